//! The soak scenario (issue 27): the controller's memory must stay bounded under churn. Kustomize-style
//! hash-suffixed ConfigMaps are created, switched to and deleted `cycles` times across `workloads` Deployments
//! (every switch a new template: a rollout), and `namespaces` preview namespaces are created with a ConfigMap and
//! a Deployment using it, changed once and deleted; meanwhile a ConfigMap every Deployment uses keeps changing.
//!
//! Verdict: every map of the controller's index (`reloader_index_objects{type}`, reported every 10 s) is back to
//! at most its size before the churn, and nothing was missed — each preview Deployment reloaded for its change
//! before its namespace went, each Deployment ends on the shared ConfigMap's last content. RSS before and after
//! is reported beside (an allocator keeps some of what it once needed; the maps are what must not grow).

use std::{
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Namespace},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::{
    Error,
    chaos::plane::http,
    controller::{ControllerSpec, Running},
    env::BenchEnv,
    measure::content::hash_data,
};

/// The soak's sizes.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// Create/switch/delete cycles of hash-suffixed ConfigMaps.
    pub cycles: usize,
    /// Preview namespaces created, changed and deleted.
    pub namespaces: usize,
    /// Deployments the cycles rotate over.
    pub workloads: usize,
    /// Concurrent writers of cycles (and of preview namespaces).
    pub concurrency: usize,
    /// Longest wait for one reload.
    pub reload_timeout: Duration,
}

/// What a soak measured.
#[derive(Clone, Debug, Serialize)]
pub struct SoakResult {
    /// The controller's command line.
    pub command: String,
    /// Cycles made (ConfigMap created, Deployment switched, old ConfigMap deleted).
    pub cycles: usize,
    /// Preview namespaces created, changed and deleted.
    pub namespaces: usize,
    /// Updates of the shared ConfigMap.
    pub shared_updates: usize,
    /// Seconds the churn took.
    pub churn_s: f64,
    /// `reloader_index_objects{type}` before the churn.
    pub sizes_before: BTreeMap<String, f64>,
    /// The same once the churn is over and the controller has settled.
    pub sizes_after: BTreeMap<String, f64>,
    /// RSS before and after, and the peak, MiB.
    pub rss_before_mib: f64,
    /// RSS after.
    pub rss_after_mib: f64,
    /// Peak RSS of the whole run.
    pub rss_peak_mib: f64,
    /// What was missed (empty when nothing).
    pub missed: Vec<String>,
    /// Writes of the bench that failed.
    pub failed_writes: usize,
}

impl SoakResult {
    /// Maps larger after than before.
    pub fn grown(&self) -> Vec<String> {
        let after = |k: &str| self.sizes_after.get(k).copied().unwrap_or(f64::NAN);
        let grown = self.sizes_before.iter().filter(|(k, before)| after(k) > **before || after(k).is_nan());
        grown.map(|(k, before)| format!("{k}: {before} → {}", after(k))).collect()
    }

    /// Whether the soak passed: no map grew, nothing missed.
    pub fn passed(&self) -> bool {
        self.grown().is_empty() && self.missed.is_empty() && !self.sizes_before.is_empty()
    }

    /// The report.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# Soak\n\n`{}`\n\n{} hash-suffixed ConfigMap cycles, {} preview namespaces, {} shared updates in {:.0} s; \
             {} bench writes failed.\n\n| map | before | after |\n|---|---:|---:|\n",
            self.command, self.cycles, self.namespaces, self.shared_updates, self.churn_s, self.failed_writes
        );
        for (k, before) in &self.sizes_before {
            let after = self.sizes_after.get(k).map_or("–".to_owned(), |a| a.to_string());
            out.push_str(&format!("| {k} | {before} | {after} |\n"));
        }
        out.push_str(&format!(
            "\nRSS: {:.1} MiB before, {:.1} MiB after, peak {:.1} MiB.\n\nMissed: {}.\n\nVerdict: **{}**.\n",
            self.rss_before_mib,
            self.rss_after_mib,
            self.rss_peak_mib,
            if self.missed.is_empty() { "none".to_owned() } else { self.missed.join("; ") },
            if self.passed() { "flat, 0 missed" } else { "FAILED" }
        ));
        out
    }
}

const MAIN_NS: &str = "soak-main";
const SHARED: &str = "shared";
const PREVIEW_LABEL: (&str, &str) = ("soak", "preview");

fn cm(name: &str, data: &BTreeMap<String, String>, labels: Value) -> Result<ConfigMap, Error> {
    Ok(serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": data}))?)
}

fn data(value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("value".to_owned(), value.to_owned())])
}

/// A Deployment `name` (auto) whose container reads every ConfigMap of `uses` through `envFrom`.
fn deployment(name: &str, uses: &[&str]) -> Result<Deployment, Error> {
    let env_from: Vec<Value> = uses.iter().map(|u| json!({"configMapRef": {"name": u}})).collect();
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                                       "envFrom": env_from}]}}}
    }))?)
}

/// The value of env var `var` on `name`'s container `app`.
async fn env_value(api: &Api<Deployment>, name: &str, var: &str) -> Option<String> {
    let d = api.get(name).await.ok()?;
    let containers = d.spec?.template.spec?.containers;
    let env = containers.into_iter().find(|c| c.name == "app")?.env?;
    env.into_iter().find(|e| e.name == var)?.value
}

async fn has_record(api: &Api<Deployment>, name: &str) -> bool {
    api.get(name)
        .await
        .is_ok_and(|d| d.metadata.annotations.is_some_and(|a| a.contains_key("reloader.stakater.com/applied-hashes")))
}

/// Polls `check` every 200 ms until it holds or `timeout` passes.
async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `reloader_index_objects{type}` from the controller's metrics.
async fn index_sizes(addr: &str) -> BTreeMap<String, f64> {
    let Ok((_, body)) = http(addr, "GET", "/metrics", "").await else { return BTreeMap::new() };
    let series = body.lines().filter_map(|l| l.strip_prefix("reloader_index_objects{type=\""));
    series
        .filter_map(|rest| {
            let (name, value) = rest.split_once("\"} ")?;
            Some((name.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// Sizes once two reports 11 s apart agree (the controller reports every 10 s), within `timeout`.
async fn settled_sizes(addr: &str, timeout: Duration) -> BTreeMap<String, f64> {
    let deadline = Instant::now() + timeout;
    let mut last = index_sizes(addr).await;
    loop {
        tokio::time::sleep(Duration::from_secs(11)).await;
        let now = index_sizes(addr).await;
        if (now == last && !now.is_empty()) || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// The controller's metrics address, from its startup line.
async fn metrics_addr(log: &std::path::Path) -> Result<String, Error> {
    for _ in 0..300 {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(addr) = crate::controller::metrics_addr_in(&text) {
            return Ok(addr);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(Error::Timeout("the controller's metrics address in its log".into()))
}

/// Runs the soak against `spec` (started here, cluster-wide).
pub async fn run(env: &BenchEnv, spec: &ControllerSpec, opts: &SoakOptions) -> Result<SoakResult, Error> {
    let client = env.client.clone();
    let kube = |what: &str| {
        let what = what.to_owned();
        move |e| Error::kube(what, e)
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": MAIN_NS}}))?;
    namespaces.create(&PostParams::default(), &ns).await.map_err(kube("create namespace"))?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), MAIN_NS);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), MAIN_NS);
    let pp = PostParams::default();
    cms.create(&pp, &cm(SHARED, &data("init"), json!({}))?).await.map_err(kube("create shared"))?;
    for k in 0..opts.workloads {
        let first = format!("app-{k}-init");
        cms.create(&pp, &cm(&first, &data("init"), json!({}))?).await.map_err(kube("create configmap"))?;
        let d = deployment(&format!("app-{k}"), &[SHARED, &first])?;
        deployments.create(&pp, &d).await.map_err(kube("create deployment"))?;
    }

    let log = env.out_dir.join("soak-controller.log");
    let _ = std::fs::remove_file(&log);
    let epoch = Instant::now();
    let mut controller = Running::spawn(spec, &[], &[], &env.controller_kubeconfig, &log, epoch)?;
    let addr = metrics_addr(&log).await?;
    let recorded = eventually(Duration::from_secs(120), || async {
        for k in 0..opts.workloads {
            if !has_record(&deployments, &format!("app-{k}")).await {
                return false;
            }
        }
        true
    })
    .await;
    if !recorded {
        return Err(Error::Timeout("the controller's first-sight records on every Deployment".into()));
    }
    // One change of the shared ConfigMap before the baseline: the controller keeps the last few changes of
    // recently changed resources (bounded), and the shared one keeps changing during the churn.
    let patch = json!({"data": data("0")});
    cms.patch(SHARED, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(kube("update shared"))?;
    let first = hash_data(&data("0"));
    let reloaded = eventually(Duration::from_secs(120), || async {
        for k in 0..opts.workloads {
            let value = env_value(&deployments, &format!("app-{k}"), "STAKATER_SHARED_CONFIGMAP").await;
            if value.as_deref() != Some(first.as_str()) {
                return false;
            }
        }
        true
    })
    .await;
    if !reloaded {
        return Err(Error::Timeout("every Deployment reloaded for the shared ConfigMap's first change".into()));
    }
    let sizes_before = settled_sizes(&addr, Duration::from_secs(60)).await;
    let rss_before = controller.sample_now().map_or(0, |s| s.rss_kib);
    tracing::info!("soak: before the churn {sizes_before:?}, RSS {} KiB", rss_before);

    let started = Instant::now();
    let failed = Arc::new(AtomicUsize::new(0));
    let churning = Arc::new(AtomicBool::new(true));
    let cycles = cycle_writers(&client, opts, &failed);
    let previews = preview_namespaces(&client, opts, &failed);
    let shared = {
        let (cms, churning) = (cms.clone(), churning.clone());
        async move {
            let mut n = 0;
            while churning.load(Ordering::Relaxed) {
                n += 1;
                let patch = json!({"data": data(&n.to_string())});
                let _ = cms.patch(SHARED, &PatchParams::default(), &Patch::Merge(&patch)).await;
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            n
        }
    };
    let churn = async {
        let (_, mut missed) = futures::join!(cycles, previews);
        churning.store(false, Ordering::Relaxed);
        missed.sort();
        missed
    };
    let (mut missed, shared_updates) = futures::join!(churn, shared);
    let churn_s = started.elapsed().as_secs_f64();
    controller.check_alive()?;
    tracing::info!("soak: churn done in {churn_s:.0} s; waiting for the preview namespaces to go");

    let label = format!("{}={}", PREVIEW_LABEL.0, PREVIEW_LABEL.1);
    let gone = eventually(Duration::from_secs(600), || async {
        namespaces.list(&ListParams::default().labels(&label)).await.is_ok_and(|l| l.items.is_empty())
    })
    .await;
    if !gone {
        missed.push("the preview namespaces were not all deleted within 600 s".into());
    }
    let last = hash_data(&data(&shared_updates.to_string()));
    for k in 0..opts.workloads {
        let name = format!("app-{k}");
        let on_last = eventually(opts.reload_timeout, || async {
            env_value(&deployments, &name, "STAKATER_SHARED_CONFIGMAP").await.as_deref() == Some(last.as_str())
        })
        .await;
        if !on_last {
            missed.push(format!("{name} is not on the shared ConfigMap's last content"));
        }
    }
    let sizes_after = settled_sizes(&addr, Duration::from_secs(120)).await;
    let after = controller.sample_now();
    controller.check_alive()?;
    let samples = controller.stop().await;
    let peak = samples.iter().map(|s| s.hwm_kib.max(s.rss_kib)).max().unwrap_or(0);
    let mib = |kib: u64| kib as f64 / 1024.0;
    Ok(SoakResult {
        command: spec.command.clone(),
        cycles: opts.cycles,
        namespaces: opts.namespaces,
        shared_updates,
        churn_s,
        sizes_before,
        sizes_after,
        rss_before_mib: mib(rss_before),
        rss_after_mib: mib(after.map_or(0, |s| s.rss_kib)),
        rss_peak_mib: mib(peak),
        missed,
        failed_writes: failed.load(Ordering::Relaxed),
    })
}

/// `opts.cycles` cycles over the Deployments, `opts.concurrency` writers, each owning its own Deployments: a
/// new ConfigMap `app-<k>-<i>`, the Deployment switched to it (the rollout), the one before deleted.
async fn cycle_writers(client: &Client, opts: &SoakOptions, failed: &AtomicUsize) {
    let writers = opts.concurrency.clamp(1, opts.workloads.max(1));
    let per_writer = opts.cycles.div_ceil(writers);
    let done = AtomicUsize::new(0);
    let writer = |t: usize| {
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), MAIN_NS);
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), MAIN_NS);
        let owned: Vec<usize> = (t..opts.workloads).step_by(writers).collect();
        let done = &done;
        async move {
            let mut current: BTreeMap<usize, String> = owned.iter().map(|k| (*k, format!("app-{k}-init"))).collect();
            for c in 0..per_writer {
                let i = done.fetch_add(1, Ordering::Relaxed);
                if i >= opts.cycles {
                    break;
                }
                let k = owned[c % owned.len()];
                let name = format!("app-{k}-{i:08x}");
                let ok =
                    cms.create(&PostParams::default(), &cm(&name, &data(&i.to_string()), json!({}))?).await.is_ok();
                let switch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app",
                    "envFrom": [{"configMapRef": {"name": SHARED}}, {"configMapRef": {"name": name}}]}]}}}});
                let switched = ok
                    && deployments
                        .patch(&format!("app-{k}"), &PatchParams::default(), &Patch::Strategic(&switch))
                        .await
                        .is_ok();
                let old = current.insert(k, name).unwrap_or_default();
                let deleted = cms.delete(&old, &DeleteParams::default()).await.is_ok();
                if !(ok && switched && deleted) {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                if i % 1000 == 999 {
                    tracing::info!("soak: {} cycles", i + 1);
                }
            }
            Ok::<_, Error>(())
        }
    };
    let results = futures::future::join_all((0..writers).map(writer)).await;
    failed.fetch_add(results.iter().filter(|r| r.is_err()).count(), Ordering::Relaxed);
}

/// `opts.namespaces` preview namespaces, `opts.concurrency` at a time: created with ConfigMap `cfg` and
/// Deployment `web` using it; once the controller recorded `web`, `cfg` changes and `web` must reload; then the
/// namespace is deleted. Returns what was missed.
async fn preview_namespaces(client: &Client, opts: &SoakOptions, failed: &AtomicUsize) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let worker = || async {
        let mut missed = Vec::new();
        loop {
            let j = next.fetch_add(1, Ordering::Relaxed);
            if j >= opts.namespaces {
                return missed;
            }
            if let Err(e) = preview(client, j, opts.reload_timeout, &mut missed).await {
                tracing::warn!("soak: preview namespace {j}: {e}");
                failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let all = futures::future::join_all((0..opts.concurrency.max(1)).map(|_| worker())).await;
    all.into_iter().flatten().collect()
}

async fn preview(client: &Client, j: usize, timeout: Duration, missed: &mut Vec<String>) -> Result<(), Error> {
    let name = format!("soak-preview-{j}");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {PREVIEW_LABEL.0: PREVIEW_LABEL.1}}}))?;
    namespaces.create(&PostParams::default(), &ns).await.map_err(|e| Error::kube("create preview namespace", e))?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &name);
    let pp = PostParams::default();
    cms.create(&pp, &cm("cfg", &data("1"), json!({}))?).await.map_err(|e| Error::kube("create cfg", e))?;
    deployments.create(&pp, &deployment("web", &["cfg"])?).await.map_err(|e| Error::kube("create web", e))?;
    if !eventually(timeout, || has_record(&deployments, "web")).await {
        missed.push(format!("{name}/web never recorded"));
    } else {
        let patch = json!({"data": data("2")});
        cms.patch("cfg", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::kube("update cfg", e))?;
        let want = hash_data(&data("2"));
        let reloaded = eventually(timeout, || async {
            env_value(&deployments, "web", "STAKATER_CFG_CONFIGMAP").await.as_deref() == Some(want.as_str())
        })
        .await;
        if !reloaded {
            missed.push(format!("{name}/web not reloaded"));
        }
    }
    namespaces.delete(&name, &DeleteParams::default()).await.map_err(|e| Error::kube("delete preview namespace", e))?;
    Ok(())
}
