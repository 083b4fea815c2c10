//! The restart budget on the real control plane (issue 17): with `--max-concurrent-rollouts=3`, a Secret shared
//! by 30 Deployments rotates and never more than 3 of them are rolling at once (their status sampled), all 30 end
//! on the new content, and a second rotation during the waves rolls the waiting ones once, with the latest
//! content. Sampling follows the definition (a Deployment's status not yet complete); the controller's
//! first-sight records are written and observed before the rotation, since a Deployment's generation also moves
//! with its annotations.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{ResourceExt, api::ListParams};
use serde_json::json;

const COUNT: usize = 30;

/// Deployments whose rollout is not complete: the controller has not observed the template yet, or not every
/// replica is updated and available (the definition, independent of the controller's code).
async fn rolling(ns: &TestNamespace) -> usize {
    let list = ns.api::<Deployment>().list(&ListParams::default()).await.expect("list deployments");
    list.items
        .iter()
        .filter(|d| {
            let desired = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let Some(s) = &d.status else { return true };
            let observed = s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0);
            let counts = [s.updated_replicas, s.available_replicas, s.replicas].map(|c| c.unwrap_or(0) == desired);
            !(observed && counts.iter().all(|c| *c))
        })
        .count()
}

/// Samples [`rolling`] until every Deployment has `revisions` and none is rolling; returns the most seen at once.
async fn sample_until_done(ns: &TestNamespace, revisions: impl Fn(usize) -> bool) -> usize {
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut most = 0;
    loop {
        let now_rolling = rolling(ns).await;
        most = most.max(now_rolling);
        let mut done = now_rolling == 0;
        if done {
            for i in 0..COUNT {
                done &= revisions(Kind::Deployment.revisions(ns, &format!("web-{i}")).await);
            }
        }
        if done {
            return most;
        }
        assert!(Instant::now() < deadline, "the waves did not finish within 240 s (most rolling at once: {most})");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_budget_of_three_rolls_thirty_deployments_three_at_a_time() {
    let ns = TestNamespace::create("budget").await;
    create_secret(&ns, "shared", &[("ca.crt", "v1")], &[]).await;
    let auto = json!({"reloader.stakater.com/auto": "true"});
    // Pods that become available on a real cluster too (kind, k3d): rollouts must complete here.
    let mut pod_spec = volume_secret("shared");
    pod_spec["containers"][0]["image"] = json!("registry.k8s.io/pause:3.10");
    for i in 0..COUNT {
        Kind::Deployment.create(&ns, &format!("web-{i}"), auto.clone(), json!({}), pod_spec.clone()).await;
    }
    wait_for("every Deployment rolled out", Duration::from_secs(120), || async {
        let n = rolling(&ns).await;
        if n == 0 { Ok(()) } else { Err(format!("{n} rolling")) }
    })
    .await;
    let reloader = Reloader::start(&ns.name, &["--max-concurrent-rollouts=3"]).await;
    // The controller's first-sight records are metadata writes, and a Deployment's generation counts annotation
    // changes: let the Deployment controller observe them before sampling.
    wait_for("every record written and observed", Duration::from_secs(120), || async {
        let list = ns.api::<Deployment>().list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let recorded =
            list.items.iter().filter(|d| d.annotations().contains_key("reloader.stakater.com/applied-hashes"));
        let (recorded, now_rolling) = (recorded.count(), rolling(&ns).await);
        if recorded == COUNT && now_rolling == 0 {
            Ok(())
        } else {
            Err(format!("{recorded} recorded, {now_rolling} rolling"))
        }
    })
    .await;

    set_secret_value(&ns, "shared", "ca.crt", "v2").await;
    let most = sample_until_done(&ns, |r| r == 2).await;
    assert!(most <= 3, "at most 3 rolling at once, saw {most}");
    assert!(most >= 1, "the sampling saw the waves");
    let v2 = secret_hash(&[("ca.crt", "v2")]);
    for i in 0..COUNT {
        let value = Kind::Deployment.env(&ns, &format!("web-{i}"), "app", "STAKATER_SHARED_SECRET").await;
        assert_eq!(value.as_deref(), Some(v2.as_str()), "web-{i}");
    }
    let (_, metrics) = http_get(&reloader.http_base().await, "/metrics").await;
    assert_eq!(sample(&metrics, "reloader_rollouts{state=\"waiting\"}"), Some(0.0), "{metrics}");

    // Two rotations in a row: the workloads still waiting for a slot roll once, with the latest content.
    set_secret_value(&ns, "shared", "ca.crt", "v3").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    set_secret_value(&ns, "shared", "ca.crt", "v4").await;
    let most = sample_until_done(&ns, |r| (3..=4).contains(&r)).await;
    assert!(most <= 3, "at most 3 rolling at once, saw {most}");
    let v4 = secret_hash(&[("ca.crt", "v4")]);
    let mut once = 0;
    for i in 0..COUNT {
        let name = format!("web-{i}");
        let value = Kind::Deployment.env(&ns, &name, "app", "STAKATER_SHARED_SECRET").await;
        assert_eq!(value.as_deref(), Some(v4.as_str()), "{name} ends on the latest content");
        once += usize::from(Kind::Deployment.revisions(&ns, &name).await == 3);
    }
    assert!(once >= COUNT / 2, "most waited and rolled once for both rotations ({once} of {COUNT})");
}
