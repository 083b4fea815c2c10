//! Faults 4 and 5, made through the API: the Argo Rollouts CRD deleted and re-created, and one namespace's Role
//! of a namespace-scoped ServiceAccount removed and restored.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
    config::{AuthInfo, Kubeconfig},
};
use serde_json::json;

use super::{
    faults::{FaultCtx, FaultOutcome},
    layout::{delete_rollout_crd, install_rollout_crd},
    observe::WorkloadKind,
};
use crate::Error;

/// Name of the ServiceAccount, its Roles and RoleBindings (fault 5).
pub const SERVICE_ACCOUNT: &str = "reloader-chaos";

/// Fault 4: at 30 % of the burst delete the Rollout CRD (its Rollouts go with it) and wait until it is gone; at
/// 55 % (or once it is gone) create it again, create a second set of Rollouts, wait until the controller has
/// recorded them (`applied-hashes`), then update each one's resource twice, a second apart. Deployments must
/// keep reloading while the API is missing.
pub async fn crd_recreate(ctx: &mut FaultCtx<'_>) -> Result<FaultOutcome, Error> {
    let mut out = FaultOutcome::default();
    ctx.until(ctx.part(0.3)).await?;
    let deleted_at = ctx.epoch.elapsed();
    let gone = delete_rollout_crd(ctx.client, Duration::from_secs(60)).await?;
    ctx.until(ctx.part(0.55)).await?;
    let back_at = ctx.epoch.elapsed();
    install_rollout_crd(ctx.client, Duration::from_secs(60)).await?;
    let second = ctx.layout.rollouts("b");
    for w in &second {
        ctx.layout.create_custom(ctx.client, w, ctx.tag).await?;
        out.created.push((w.clone(), ctx.epoch.elapsed()));
    }
    let created = Instant::now();
    let mut seen_after = None;
    while created.elapsed() < Duration::from_secs(90) {
        let recorded = |w: &super::layout::ChaosWorkload| {
            let key = (WorkloadKind::Rollout, ctx.layout.namespaces[w.ns].clone(), w.name.clone());
            ctx.tracker.get(&key).is_some_and(|o| o.recorded)
        };
        if second.iter().all(recorded) {
            seen_after = Some(created.elapsed());
            break;
        }
        ctx.controllers.pause(Duration::from_millis(200)).await?;
    }
    let Some(seen_after) = seen_after else {
        out.violations.push("the controller did not record the re-created Rollouts within 90 s".into());
        return Ok(out);
    };
    for _ in 0..2 {
        for w in &second {
            ctx.driver.update(w.resource).await;
        }
        ctx.controllers.pause(Duration::from_secs(1)).await?;
    }
    let during = deployment_writes_between(ctx, deleted_at, back_at);
    out.evidence.push(format!(
        "CRD deleted at {:.1} s (gone {:.1} s later), re-created at {:.1} s; {} new Rollouts recorded by the \
         controller {:.1} s after creation; {during} Deployment rollouts while the CRD was missing",
        deleted_at.as_secs_f64(),
        gone.as_secs_f64(),
        back_at.as_secs_f64(),
        second.len(),
        seen_after.as_secs_f64()
    ));
    if during == 0 {
        out.violations.push("no Deployment rolled out while the Rollout CRD was missing".into());
    }
    Ok(out)
}

/// Template writes of Deployments seen between two offsets of the run (in namespaces `except` excluded).
fn deployment_writes_between(ctx: &FaultCtx<'_>, from: Duration, to: Duration) -> usize {
    deployment_writes_except(ctx, from, to, None)
}

fn deployment_writes_except(ctx: &FaultCtx<'_>, from: Duration, to: Duration, except: Option<&str>) -> usize {
    let snapshot = ctx.tracker.snapshot();
    let deployments = snapshot.iter().filter(|(k, _)| k.0 == WorkloadKind::Deployment && Some(k.1.as_str()) != except);
    deployments.map(|(_, o)| o.writes.iter().filter(|w| (from..=to).contains(&w.at)).count()).sum()
}

/// Fault 5: at 30 % of the burst delete the Role of the second namespace (its RoleBinding stays, granting
/// nothing), restore it at 75 %. The other namespaces must keep reloading meanwhile.
pub async fn role_removed(ctx: &mut FaultCtx<'_>) -> Result<FaultOutcome, Error> {
    let mut out = FaultOutcome::default();
    let ns = ctx.layout.namespaces.get(1).cloned().unwrap_or_else(|| ctx.layout.namespaces[0].clone());
    let roles: Api<Role> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.until(ctx.part(0.3)).await?;
    let removed_at = ctx.epoch.elapsed();
    roles
        .delete(SERVICE_ACCOUNT, &DeleteParams::default())
        .await
        .map_err(|e| Error::kube(format!("delete Role {ns}/{SERVICE_ACCOUNT}"), e))?;
    ctx.until(ctx.part(0.75)).await?;
    let restored_at = ctx.epoch.elapsed();
    roles
        .create(&PostParams::default(), &role()?)
        .await
        .map_err(|e| Error::kube(format!("restore Role {ns}/{SERVICE_ACCOUNT}"), e))?;
    let others = deployment_writes_except(ctx, removed_at, restored_at, Some(&ns));
    out.evidence.push(format!(
        "Role {ns}/{SERVICE_ACCOUNT} removed at {:.1} s, restored at {:.1} s; {others} Deployment rollouts in the \
         other namespaces meanwhile",
        removed_at.as_secs_f64(),
        restored_at.as_secs_f64()
    ));
    if others == 0 {
        out.violations.push("no Deployment in the other namespaces rolled out while the Role was missing".into());
    }
    Ok(out)
}

/// What the controller needs in each watched namespace (tests/isolation.rs's namespace-scoped set).
fn role() -> Result<Role, Error> {
    let read = ["get", "list", "watch"];
    let write = ["get", "list", "watch", "patch", "update"];
    Ok(serde_json::from_value(json!({
        "metadata": {"name": SERVICE_ACCOUNT},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": read},
            {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"], "verbs": write},
            {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": ["get", "list", "watch", "patch", "create", "delete"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
        ]
    }))?)
}

/// Creates ServiceAccount [`SERVICE_ACCOUNT`] in the first namespace, a Role and RoleBinding for it in every
/// namespace, and writes a kubeconfig holding a token of it (TokenRequest, 1 h) next to the controller logs.
pub async fn scoped_service_account(
    client: &Client,
    namespaces: &[String],
    admin_kubeconfig: &std::path::Path,
    out: PathBuf,
) -> Result<PathBuf, Error> {
    let pp = PostParams::default();
    let home = &namespaces[0];
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": SERVICE_ACCOUNT}}))?;
    Api::<ServiceAccount>::namespaced(client.clone(), home)
        .create(&pp, &sa)
        .await
        .map_err(|e| Error::kube("create the ServiceAccount", e))?;
    for ns in namespaces {
        Api::<Role>::namespaced(client.clone(), ns)
            .create(&pp, &role()?)
            .await
            .map_err(|e| Error::kube(format!("create Role in {ns}"), e))?;
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": SERVICE_ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SERVICE_ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": home}]
        }))?;
        Api::<RoleBinding>::namespaced(client.clone(), ns)
            .create(&pp, &binding)
            .await
            .map_err(|e| Error::kube(format!("create RoleBinding in {ns}"), e))?;
    }
    let request = TokenRequest {
        spec: TokenRequestSpec { audiences: vec![], expiration_seconds: Some(3600), ..Default::default() },
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(client.clone(), home)
        .create_token_request(SERVICE_ACCOUNT, &pp, &request)
        .await
        .map_err(|e| Error::kube("request a ServiceAccount token", e))?
        .status
        .map(|s| s.token)
        .ok_or_else(|| Error::Invalid("the token request returned no status".into()))?;
    let mut config = Kubeconfig::read_from(admin_kubeconfig)
        .map_err(|e| Error::Invalid(format!("{}: {e}", admin_kubeconfig.display())))?;
    for named in &mut config.auth_infos {
        named.auth_info = Some(AuthInfo { token: Some(token.clone().into()), ..Default::default() });
    }
    std::fs::write(&out, serde_json::to_string(&config)?).map_err(|source| Error::Io { path: out.clone(), source })?;
    Ok(out)
}
