//! Plays one scenario against one controller: fresh namespaces and objects, controller start, readiness probe,
//! updates, settling, measurement, cleanup.
//!
//! The measurement window starts once the controller has made its first reload (the probe) and
//! `settle_before` has passed, and ends when every required reload was seen (or the settle timeout ran out)
//! plus one quiet second, so late duplicates are counted too.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use futures::{StreamExt, stream};
use jiff::Timestamp;

use super::{ConfigDef, ConfigKind, Layout, RefHow, driver::Driver, objects};
use crate::{
    Error,
    controller::{ControllerSpec, Running},
    env::BenchEnv,
    measure::{
        actions::{self, Dependency, Observation, Update},
        audit,
        bystander::Bystander,
        procfs,
        stats::summarize,
        tracker::{Kind, Tracker, WorkloadId},
    },
    report::ScenarioResult,
};

/// Name of the probe ConfigMap and Deployment (readiness: "first reload possible").
pub const PROBE: &str = "bench-probe";
/// How long S5's Deployments must exist before an update for its reload to be required, and how long before
/// their deletion an update must be sent.
const CHURN_MARGIN: Duration = Duration::from_secs(2);

/// How to run scenarios.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// How long updates are made (not for M1's fixed count).
    pub duration: Duration,
    /// Scope the controller to the scenario's namespace with `KUBERNETES_NAMESPACE` (upstream's single-namespace
    /// mode) when the scenario has one namespace: for shared clusters, e.g. the test suite's.
    pub scope_single_namespace: bool,
    /// Longest wait after the updates for the expected reloads.
    pub settle_timeout: Duration,
    /// Longest wait for the controller's first reload.
    pub ready_timeout: Duration,
    /// After a scenario with more than 1,000 resources, wait until its namespaces are gone (their deletion
    /// loads the API server and would distort the next scenario).
    pub wait_for_cleanup: bool,
}

fn unique_suffix() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    format!("{:x}", (nanos / 1000) % 0xff_ffff)
}

/// The probe: a ConfigMap and a Deployment using it, updated until the controller reloads it.
struct Probe {
    def: ConfigDef,
    namespace: String,
    seq: u64,
}

impl Probe {
    async fn create(client: &kube::Client, namespace: &str, run: &str) -> Result<Self, Error> {
        let def = ConfigDef { kind: ConfigKind::ConfigMap, ns: 0, name: PROBE.into(), pad_bytes: 0 };
        objects::create_config(client, &def, namespace, run, &objects::content(&def, namespace, 0)).await?;
        let w = super::deployment(0, PROBE.into(), vec![]);
        objects::create_workload(client, &w, namespace, run, &[(def.kind, def.name.clone(), RefHow::EnvFrom)]).await?;
        Ok(Self { def, namespace: namespace.into(), seq: 0 })
    }

    /// Updates the probe every 100 ms until a reload with one of these updates is seen; returns when.
    async fn wait_reload(
        &mut self,
        client: &kube::Client,
        tracker: &Tracker,
        controller: &mut Running,
        timeout: Duration,
    ) -> Result<Instant, Error> {
        let start = Instant::now();
        let before = tracker.seen_on(&self.namespace, PROBE).len();
        let mut hashes = HashSet::new();
        loop {
            controller.check_alive()?;
            self.seq += 1;
            let data = objects::content(&self.def, &self.namespace, self.seq);
            let body = serde_json::json!({"data": data});
            hashes.insert(crate::measure::content::hash_data(&data));
            let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
                kube::Api::namespaced(client.clone(), &self.namespace);
            api.patch(PROBE, &Default::default(), &kube::api::Patch::Merge(body))
                .await
                .map_err(|e| Error::kube("update probe", e))?;
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let seen = tracker.seen_on(&self.namespace, PROBE);
                if let Some(s) = seen.iter().skip(before).find(|s| hashes.contains(&s.hash)) {
                    return Ok(s.at);
                }
            }
            if start.elapsed() > timeout {
                return Err(Error::Timeout(format!("the controller's first reload (probe, {timeout:?})")));
            }
        }
    }
}

/// Runs `layout` against `spec`.
pub async fn run(
    env: &BenchEnv,
    layout: &Layout,
    spec: &ControllerSpec,
    opts: &RunOptions,
) -> Result<ScenarioResult, Error> {
    let epoch = Instant::now();
    let client = &env.client;
    let id = format!("{:?}", layout.id).to_ascii_lowercase();
    let label: String = spec.label.chars().filter(char::is_ascii_alphanumeric).take(10).collect();
    let run_tag = format!("{id}-{label}-{}", unique_suffix()).to_ascii_lowercase();
    let namespaces: Vec<String> = (0..layout.namespaces).map(|i| format!("bench-{run_tag}-{i}")).collect();
    tracing::info!(scenario = %id, controller = %spec.label, "setting up {} namespaces", namespaces.len());
    for ns in &namespaces {
        objects::create_namespace(client, ns).await?;
    }
    let result = run_in(env, layout, spec, opts, epoch, &run_tag, &namespaces).await;
    for ns in &namespaces {
        objects::delete_namespace(client, ns).await;
    }
    if opts.wait_for_cleanup && layout.configs.len() > 1000 {
        wait_namespaces_gone(client, &namespaces, Duration::from_secs(300)).await;
    }
    result
}

async fn run_in(
    env: &BenchEnv,
    layout: &Layout,
    spec: &ControllerSpec,
    opts: &RunOptions,
    epoch: Instant,
    run_tag: &str,
    namespaces: &[String],
) -> Result<ScenarioResult, Error> {
    let client = &env.client;
    let tracker = Tracker::start(client, &format!("{}={run_tag}", objects::RUN_LABEL));
    tracker.wait_synced(Duration::from_secs(30)).await?;
    let driver = Driver::new(client.clone(), namespaces.to_vec(), layout.configs.clone(), run_tag.into(), epoch);
    create_objects(client, layout, namespaces, run_tag).await?;
    let mut probe = Probe::create(client, &namespaces[0], run_tag).await?;
    let want = layout.workloads.len() + 1;
    let setup_deadline = Instant::now() + Duration::from_secs(300);
    while tracker.known() < want {
        if Instant::now() > setup_deadline {
            return Err(Error::Timeout(format!("{want} workloads on the bench's watch (saw {})", tracker.known())));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let log_dir = env.out_dir.join("logs");
    std::fs::create_dir_all(&log_dir).map_err(|source| Error::Io { path: log_dir.clone(), source })?;
    let log = log_dir.join(format!("{run_tag}.log"));
    let mut env_vars = Vec::new();
    if opts.scope_single_namespace && namespaces.len() == 1 {
        env_vars.push(("KUBERNETES_NAMESPACE".to_owned(), namespaces[0].clone()));
    }
    let start_controller =
        || Running::spawn(spec, &layout.controller_args, &env_vars, &env.controller_kubeconfig, &log, epoch);
    let mut controller = start_controller()?;
    tracing::info!(pid = controller.pid(), "controller started; probing for its first reload");
    let ready_at = probe.wait_reload(client, &tracker, &mut controller, opts.ready_timeout).await?;
    let mut startup = vec![ready_at.saturating_duration_since(controller.started).as_secs_f64() * 1000.0];
    // At least half a second: probe updates sent just before the first reload was seen may still reload it.
    tokio::time::sleep(layout.settle_before.max(Duration::from_millis(500))).await;

    let window_start = epoch.elapsed();
    let wall_start = Timestamp::now();
    let _ = controller.sample_now();
    let plane_start = plane_cpu_ticks(env);
    let bystander = Bystander::start(client.clone(), &namespaces[0], PROBE);
    tracing::info!("updating for {:?}", opts.duration);
    let mut finished_samples = Vec::new();
    let mut downtimes = Vec::new();
    if layout.restart {
        let old = controller;
        let restart = async {
            tokio::time::sleep(opts.duration / 3).await;
            let killed_at = epoch.elapsed();
            let samples = old.stop().await;
            // A pod restart takes a moment: keep updating while nothing runs.
            tokio::time::sleep((opts.duration / 6).clamp(Duration::from_secs(1), Duration::from_secs(5))).await;
            let mut next = start_controller()?;
            let ready = probe.wait_reload(client, &tracker, &mut next, opts.ready_timeout).await?;
            Ok::<_, Error>((samples, next, ready, killed_at))
        };
        let (played, restarted) = tokio::join!(driver.play(&layout.plan, opts.duration), restart);
        played?;
        let (samples, next, ready, killed_at) = restarted?;
        finished_samples.push(samples);
        startup.push(ready.saturating_duration_since(next.started).as_secs_f64() * 1000.0);
        downtimes.push((killed_at, ready.saturating_duration_since(epoch)));
        controller = next;
    } else {
        driver.play(&layout.plan, opts.duration).await?;
    }
    let duration_s = (epoch.elapsed() - window_start).as_secs_f64();

    let (index, deps) = workload_index(layout, namespaces, &driver);
    let initial = driver.initial_hashes();
    let settle_deadline = Instant::now() + opts.settle_timeout;
    loop {
        controller.check_alive()?;
        let mut updates = driver.updates();
        actions::mark_downtime_superseded(&mut updates, &downtimes);
        let (stats, _) =
            actions::analyze(&updates, &initial, &deps, &observations(&tracker, &index, epoch, &driver.value_hashes()));
        if stats.missed == 0 || Instant::now() > settle_deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = controller.sample_now();
    let window_end = epoch.elapsed();
    let wall_end = Timestamp::now();
    let plane_end = plane_cpu_ticks(env);
    let bystander = bystander.finish().await;
    finished_samples.push(controller.stop().await);

    let mut updates: Vec<Update> = driver.updates();
    actions::mark_downtime_superseded(&mut updates, &downtimes);
    let (stats, latencies) =
        actions::analyze(&updates, &initial, &deps, &observations(&tracker, &index, epoch, &driver.value_hashes()));
    let api = match &env.audit {
        Some((path, user)) => Some(audit::summarize(&audit::read_log(path)?, user, wall_start, wall_end)),
        None => None,
    };
    // Probe reloads inside the window (S6's second readiness probe) are reloads too.
    let probe_writes: HashSet<u64> = tracker
        .seen_on(&namespaces[0], PROBE)
        .iter()
        .filter(|s| (window_start..=window_end).contains(&s.at.saturating_duration_since(epoch)))
        .map(|s| s.write)
        .collect();
    let rollouts = stats.rollouts + probe_writes.len();
    let writes_per_reload =
        api.as_ref().and_then(|a| (rollouts > 0).then(|| a.template_writes as f64 / rollouts as f64));
    let ticks = procfs::clock_ticks_per_second();
    let process = procfs::summarize(&finished_samples, window_start, window_end, ticks);
    let control_plane_cpu_s = plane_end
        .iter()
        .map(|(name, end)| {
            let start = plane_start.get(name).copied().unwrap_or(*end);
            (name.clone(), end.saturating_sub(start) as f64 / ticks as f64)
        })
        .collect();
    let (exact, correct) = (stats.exact(), stats.correct());
    Ok(ScenarioResult {
        scenario: format!("{:?}", layout.id),
        title: layout.title.clone(),
        controller: spec.label.clone(),
        command: format!("{} {}", spec.command, layout.controller_args.join(" ")).trim().to_owned(),
        duration_s,
        namespaces: namespaces.len(),
        configs: layout.configs.len(),
        workloads: index.len(),
        latency: summarize(&latencies),
        latencies_ms: latencies,
        actions: stats,
        exact,
        correct,
        pause_cycles: tracker.pause_cycles(),
        api,
        writes_per_reload,
        process,
        startup_to_ready_ms: startup,
        failed_writes: driver.failures(),
        update_rtt: summarize(&driver.update_rtts()),
        bystander: summarize(&bystander.latencies_ms),
        bystander_errors: bystander.errors,
        control_plane_cpu_s,
    })
}

/// CPU ticks of each local control-plane component now.
fn plane_cpu_ticks(env: &BenchEnv) -> BTreeMap<String, u64> {
    env.plane_pids()
        .into_iter()
        .filter_map(|(name, pid)| Some((name.to_owned(), procfs::sample(pid, Duration::ZERO)?.cpu_ticks)))
        .collect()
}

async fn create_objects(client: &kube::Client, layout: &Layout, namespaces: &[String], run: &str) -> Result<(), Error> {
    let configs = layout.configs.iter().map(|def| {
        let ns = &namespaces[def.ns];
        async move { objects::create_config(client, def, ns, run, &objects::content(def, ns, 0)).await }
    });
    let results: Vec<Result<(), Error>> = stream::iter(configs).buffer_unordered(32).collect().await;
    results.into_iter().collect::<Result<(), Error>>()?;
    let workloads = layout.workloads.iter().map(|w| {
        let refs: Vec<(ConfigKind, String, RefHow)> =
            w.refs.iter().map(|(c, how)| (layout.configs[*c].kind, layout.configs[*c].name.clone(), *how)).collect();
        async move { objects::create_workload(client, w, &namespaces[w.ns], run, &refs).await }
    });
    let results: Vec<Result<(), Error>> = stream::iter(workloads).buffer_unordered(32).collect().await;
    results.into_iter().collect()
}

/// Index of every workload (layout ones, then S5's churned Deployments) and their dependencies.
fn workload_index(
    layout: &Layout,
    namespaces: &[String],
    driver: &Driver,
) -> (HashMap<WorkloadId, usize>, Vec<Dependency>) {
    let mut index = HashMap::new();
    let mut deps = Vec::new();
    for (i, w) in layout.workloads.iter().enumerate() {
        index.insert(WorkloadId { kind: w.kind, namespace: namespaces[w.ns].clone(), name: w.name.clone() }, i);
        deps.extend(w.refs.iter().map(|(c, _)| Dependency {
            workload: i,
            config: *c,
            required_from: None,
            required_until: None,
        }));
    }
    if let super::Plan::Churn { config, .. } = layout.plan {
        for c in driver.churned() {
            let i = index.len();
            index.insert(WorkloadId { kind: Kind::Deployment, namespace: namespaces[0].clone(), name: c.name }, i);
            deps.push(Dependency {
                workload: i,
                config,
                required_from: Some(c.created + CHURN_MARGIN),
                // A deleted Deployment cannot be reloaded: only updates well before its deletion count.
                required_until: Some(c.deleted.map_or(Duration::MAX, |d| d.saturating_sub(CHURN_MARGIN))),
            });
        }
    }
    (index, deps)
}

fn observations(
    tracker: &Tracker,
    index: &HashMap<WorkloadId, usize>,
    epoch: Instant,
    value_hashes: &HashMap<String, String>,
) -> Vec<Observation> {
    tracker
        .seen()
        .into_iter()
        .filter_map(|s| {
            Some(Observation {
                workload: *index.get(&s.workload)?,
                hash: value_hashes.get(&s.hash).cloned().unwrap_or(s.hash),
                seen: s.at.saturating_duration_since(epoch),
                write: s.write,
            })
        })
        .collect()
}

async fn wait_namespaces_gone(client: &kube::Client, names: &[String], timeout: Duration) {
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    let start = Instant::now();
    tracing::info!("waiting for {} namespaces to be deleted", names.len());
    while start.elapsed() < timeout {
        let mut left = 0;
        for n in names {
            if matches!(api.get_opt(n).await, Ok(Some(_))) {
                left += 1;
            }
        }
        if left == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
