//! One fault with one reload strategy, end to end: fresh namespaces and objects, the controller started and
//! synced, a burst of random ConfigMap and Secret updates while the fault script runs, convergence, a quiet
//! period, the final read, the figures, the evidence that the fault took effect, cleanup.

use std::{
    path::PathBuf,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

use super::{
    ChaosOptions, Fault, Rng, Strategy, analysis,
    analysis::Figures,
    api_faults, faults,
    faults::{FaultCtx, FaultOutcome},
    layout::{ChaosLayout, install_cloneset_crd, install_rollout_crd},
    observe::{Tracker, WorkloadKind},
    plane::{ChaosEnv, http},
    settle,
    settle::Created,
    writer::{Writer, WriterStats},
};
use crate::{
    Error,
    controller::ControllerSpec,
    scenarios::{Plan, driver::Driver},
};

/// The controller's log filter: info, plus kube's watcher at debug so every watch error it hits (410 Gone
/// included) is one line: the controller itself names only the first error of a run of failures.
pub const CONTROLLER_LOG: &str = "info,kube_client=warn,kube_runtime::watcher=debug";
/// A watch error answered with 410 Gone, as kube's watcher logs it (`Status { … code: 410 … }`).
const GONE: &str = "code: 410";
/// The controller's log line for a workload write (upstream's wording).
const UPDATED: &str = "; updated '";

/// The outcome of one fault with one strategy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FaultResult {
    /// The fault.
    pub fault: Fault,
    /// Its number.
    pub number: usize,
    /// What it does.
    pub title: String,
    /// `--reload-strategy`.
    pub strategy: Strategy,
    /// The controller's command line (replica 0's flags).
    pub command: String,
    /// Workloads (Deployments, plus Rollouts for fault 4).
    pub workloads: usize,
    /// The figures.
    pub figures: Figures,
    /// Seconds of random updates.
    pub burst_s: f64,
    /// Last update acknowledged → every workload on its final hash, seconds.
    pub converge_s: Option<f64>,
    /// What the fault did.
    pub evidence: Vec<String>,
    /// Requirements broken, or a fault that did not take effect.
    pub violations: Vec<String>,
    /// Controller log lines of watch errors answered with 410 Gone.
    pub watch_410: usize,
    /// `reloader_watch_restarts_total` of replica 0 at the end (its last process only).
    pub watch_restarts: Option<f64>,
    /// Controller log lines containing "forbidden".
    pub forbidden: usize,
    /// Workload writes the controller logged (`…; updated '<workload>' …`, upstream's message): a cross-check
    /// of `figures.rollouts` from the controller's side (a SIGKILL can fall between a write and its log line).
    pub logged_writes: usize,
    /// Replicas that exited on their own (restarted).
    pub unexpected_exits: Vec<String>,
    /// The concurrent writer's requests (fault 7).
    pub writer: Option<WriterStats>,
    /// Update requests that failed (e.g. while the API server restarted).
    pub failed_updates: usize,
    /// Controller logs.
    pub logs: Vec<PathBuf>,
    /// Wall-clock seconds of the whole run.
    pub duration_s: f64,
}

impl FaultResult {
    /// 0 missed, 0 duplicate, 0 spurious, every write classified, the fault effective, no crash.
    pub fn clean(&self) -> bool {
        self.figures.clean() && self.violations.is_empty() && self.unexpected_exits.is_empty()
    }
}

fn unique_suffix() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    format!("{:x}", (nanos / 1000) % 0xff_ffff)
}

/// Runs `fault` with `strategy` against `spec` in fresh namespaces (deleted afterwards).
pub async fn run_fault(
    env: &ChaosEnv,
    fault: Fault,
    strategy: Strategy,
    opts: &ChaosOptions,
    spec: &ControllerSpec,
) -> Result<FaultResult, Error> {
    if fault.needs_local_plane() && !env.is_local() {
        return Err(Error::Invalid(format!("fault {} needs the local control plane", fault.number())));
    }
    let short = if strategy == Strategy::EnvVars { "env" } else { "ann" };
    let tag = format!("chaos{}-{short}-{}", fault.number(), unique_suffix());
    let layout = ChaosLayout::new(opts, &tag);
    tracing::info!(fault = fault.number(), strategy = strategy.flag(), "=== {} ({tag}) ===", fault.title());
    layout.create_namespaces(&env.client).await?;
    let result = run_in(env, fault, strategy, opts, spec, &layout, &tag).await;
    layout.delete_namespaces(&env.client).await;
    result
}

#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
async fn run_in(
    env: &ChaosEnv,
    fault: Fault,
    strategy: Strategy,
    opts: &ChaosOptions,
    spec: &ControllerSpec,
    layout: &ChaosLayout,
    tag: &str,
) -> Result<FaultResult, Error> {
    let epoch = Instant::now();
    let epoch_wall = jiff::Timestamp::now();
    let client = &env.client;
    let mut kinds = vec![WorkloadKind::Deployment];
    if fault == Fault::CrdRecreate {
        install_rollout_crd(client, Duration::from_secs(60)).await?;
        kinds.push(WorkloadKind::Rollout);
    }
    if fault == Fault::ConfiguredKind {
        install_cloneset_crd(client, Duration::from_secs(60)).await?;
        kinds.push(WorkloadKind::CloneSet);
    }
    let tracker = Tracker::start(client, tag, &kinds, epoch);
    tracker.wait_lists_after(&vec![0; kinds.len()], Duration::from_secs(30)).await?;
    layout.create_objects(client, tag).await?;
    let mut workloads: Vec<Created> = layout.deployments.iter().map(|w| (w.clone(), Duration::ZERO)).collect();
    if fault == Fault::CrdRecreate {
        for w in layout.rollouts("a") {
            layout.create_custom(client, &w, tag).await?;
            workloads.push((w, Duration::ZERO));
        }
    }
    // Faults 8 and 9's pod-restarting workloads: their rollouts are pod restarts, judged apart (pod_restarts.rs).
    let evicting = match fault {
        Fault::ConfiguredKind => layout.evicting(),
        Fault::OwnerStopped => [layout.evicting(), layout.deleting_daemon_set()].concat(),
        _ => Vec::new(),
    };
    let pod_watch = super::pod_restarts::PodWatch::start(client, &layout.namespaces[0], &evicting);
    if fault == Fault::ConfiguredKind {
        for w in layout.clonesets() {
            layout.create_custom(client, &w, tag).await?;
            workloads.push((w, Duration::ZERO));
        }
    }
    for w in &evicting {
        super::pod_restarts::create(client, layout, w, tag).await?;
    }
    wait_until("the runner's watch to see every workload", Duration::from_secs(60), || {
        tracker.snapshot().len() >= workloads.len()
    })
    .await?;

    let log_dir = env.out_dir.join("logs");
    std::fs::create_dir_all(&log_dir).map_err(|source| Error::Io { path: log_dir.clone(), source })?;
    let kubeconfig = match fault {
        Fault::RoleRemoved => {
            let path = log_dir.join(format!("{tag}.kubeconfig"));
            api_faults::scoped_service_account(client, &layout.namespaces, &env.controller_kubeconfig, path).await?
        }
        _ => env.controller_kubeconfig.clone(),
    };
    let mut args =
        vec![format!("--reload-strategy={}", strategy.flag()), format!("--namespaces={}", layout.namespaces.join(","))];
    match fault {
        Fault::CrdRecreate => args.push("--is-Argo-Rollouts=true".into()),
        Fault::ConfiguredKind => args.push("--workload-kind=kruise-cloneset".into()),
        Fault::LeaderKill => args.extend(
            [
                "--enable-ha",
                "--leader-election-lease-duration=3s",
                "--leader-election-renew-deadline=2s",
                "--leader-election-retry-period=1s",
            ]
            .map(String::from),
        ),
        _ => {}
    }
    let command = format!("{} {}", spec.command, args.join(" "));
    let ha = fault == Fault::LeaderKill;
    let lease_ns = layout.namespaces[0].clone();
    let env_of = |i: usize| {
        let mut vars = vec![("RELOADER_LOG".to_owned(), CONTROLLER_LOG.to_owned())];
        if ha {
            vars.push(("POD_NAME".into(), format!("r{i}")));
            vars.push(("POD_NAMESPACE".into(), lease_ns.clone()));
        }
        vars
    };
    let replicas = if ha { 3 } else { 1 };
    let mut controllers =
        super::controllers::Controllers::new(spec, args, &kubeconfig, &log_dir.join(tag), replicas, env_of, epoch);
    controllers.start_all()?;
    let mut writer = None;
    let measured = async {
        for i in 0..replicas {
            controllers.wait_synced(i, Duration::from_secs(60)).await?;
        }
        // The controller records each workload once on first sight (metadata only): start from that state.
        let recorded = wait_until("the controller to record every workload", Duration::from_secs(60), || {
            let snapshot = tracker.snapshot();
            snapshot.values().filter(|o| o.recorded).count() >= workloads.len()
        });
        if let Err(e) = recorded.await {
            tracing::warn!("{e}; starting the burst anyway");
        }

        let driver = Driver::new(client.clone(), layout.namespaces.clone(), layout.configs.clone(), tag.into(), epoch);
        if fault == Fault::ConflictingWriter {
            writer = Some(Writer::start(client, &layout.namespaces, tag));
        }
        let burst = match fault {
            Fault::ApiserverStop => opts.burst.max(opts.apiserver_stop + Duration::from_secs(15)),
            _ => opts.burst,
        };
        let plan = Plan::Random {
            interval: opts.update_interval,
            tasks: opts.update_tasks,
            targets: (0..layout.configs.len()).collect(),
            annotation_only: false,
        };
        let burst_start = Instant::now();
        let mut ctx = FaultCtx {
            env,
            client,
            controllers: &mut controllers,
            tracker: &tracker,
            layout,
            driver: &driver,
            tag,
            epoch,
            burst_start,
            burst,
            opts,
            rng: Rng::new(opts.seed ^ (fault.number() as u64) << 32),
        };
        let script = async {
            match fault {
                Fault::ControllerKill | Fault::ConfiguredKind => faults::controller_kill(&mut ctx).await,
                Fault::ApiserverStop => faults::apiserver_stop(&mut ctx).await,
                Fault::EtcdCompaction => faults::etcd_compaction(&mut ctx).await,
                Fault::CrdRecreate => api_faults::crd_recreate(&mut ctx).await,
                Fault::RoleRemoved => api_faults::role_removed(&mut ctx).await,
                Fault::LeaderKill => faults::leader_kill(&mut ctx).await,
                Fault::ConflictingWriter => Ok(FaultOutcome::default()),
                Fault::OwnerStopped => faults::owner_stop(&mut ctx).await,
            }
        };
        let (played, outcome) = tokio::join!(driver.play(&plan, burst), script);
        played?;
        let outcome = outcome?;
        let burst_s = burst_start.elapsed().as_secs_f64();
        let last_update = epoch.elapsed();
        workloads.extend(outcome.created.iter().cloned());

        let resources = settle::read_contents(client, layout, &driver).await?;
        let converged = settle::wait_converged(
            &tracker,
            &mut controllers,
            layout,
            &workloads,
            &resources,
            epoch,
            opts.converge_timeout,
        )
        .await?;
        let restarted = match converged {
            Some(_) if !evicting.is_empty() => {
                let times = (epoch, epoch_wall);
                let timeout = opts.converge_timeout;
                super::pod_restarts::wait_restarted(client, &pod_watch, layout, &evicting, &resources, times, timeout)
                    .await
            }
            other => other,
        };
        if converged.is_some() && restarted.is_some() {
            controllers.pause(opts.quiet).await?;
        }
        let histories = settle::histories(client, &tracker, layout, &workloads).await?;
        let mut figures = analysis::analyze(&histories, &resources, converged);
        if !evicting.is_empty() {
            super::pod_restarts::analyze(&mut figures, &pod_watch, &evicting, &resources, epoch_wall, restarted);
        }
        let converge_s = converged.map(|c| c.saturating_sub(last_update).as_secs_f64());
        Ok::<_, Error>((figures, outcome, burst_s, converge_s, driver.failures()))
    };
    let measured = measured.await;
    let writer_stats = match writer {
        Some(w) => Some(w.stop().await),
        None => None,
    };
    let watch_restarts = match controllers.metrics_addr(0) {
        Some(addr) => http(&addr, "GET", "/metrics", "")
            .await
            .ok()
            .and_then(|(_, body)| sum_metric(&body, "reloader_watch_restarts_total")),
        None => None,
    };
    controllers.stop_all().await;
    let pod_watch_down = pod_watch.too_many_down();
    pod_watch.stop();
    let (figures, outcome, burst_s, converge_s, failed_updates) = measured?;
    let mut result = FaultResult {
        fault,
        number: fault.number(),
        title: fault.title().into(),
        strategy,
        command,
        workloads: workloads.len() + evicting.len(),
        figures,
        burst_s,
        converge_s,
        evidence: outcome.evidence,
        violations: outcome.violations,
        watch_410: controllers.count_log(GONE),
        watch_restarts,
        forbidden: controllers.count_log("forbidden"),
        logged_writes: controllers.count_log(UPDATED),
        unexpected_exits: controllers.unexpected_exits.clone(),
        writer: writer_stats,
        failed_updates,
        logs: controllers.logs(),
        duration_s: epoch.elapsed().as_secs_f64(),
    };
    check_effective(&mut result);
    if !evicting.is_empty() {
        // The pod-restarting workloads' rollouts are pod restarts: the controller must have made some.
        match (controllers.count_log("evicted pod"), controllers.count_log("deleted pod")) {
            (0, 0) => result.violations.push("the controller's log shows no pod restarted".into()),
            (evicted, deleted) => result.evidence.push(format!(
                "{evicted} pods evicted (evict-pods), {deleted} deleted (delete-pods), as the controller logged"
            )),
        }
        for (workload, down) in pod_watch_down {
            result.violations.push(format!("{down} pods of {workload} were down at once"));
        }
    }
    Ok(result)
}

/// Evidence from the controller's side that the fault took effect; its absence is a violation.
fn check_effective(r: &mut FaultResult) {
    match r.fault {
        Fault::EtcdCompaction if r.watch_410 == 0 => {
            r.violations.push("the controller's log shows no watch answered with 410 Gone".into());
        }
        Fault::EtcdCompaction => {
            r.evidence.push(format!("{} watch errors with 410 Gone in the controller's log", r.watch_410))
        }
        Fault::RoleRemoved if r.forbidden == 0 => {
            r.violations.push("the controller's log shows no forbidden request".into());
        }
        Fault::RoleRemoved => r.evidence.push(format!("{} controller log lines with \"forbidden\"", r.forbidden)),
        Fault::ConflictingWriter => match &r.writer {
            Some(w) if w.conflicts > 0 => r.evidence.push(format!(
                "writer: {} replaces ({} refused with 409 Conflict), {} metadata patches",
                w.replaced + w.conflicts,
                w.conflicts,
                w.patched
            )),
            _ => r.violations.push("the concurrent writer met no 409 Conflict".into()),
        },
        _ => {}
    }
}

/// The sum of every series of a counter in a Prometheus text exposition.
fn sum_metric(text: &str, name: &str) -> Option<f64> {
    let values = text.lines().filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']));
    let values: Vec<f64> = values.filter_map(|l| l.rsplit(' ').next()?.parse().ok()).collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

async fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) -> Result<(), Error> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > timeout {
            return Err(Error::Timeout(what.into()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_summed_over_their_series() {
        let text = "# TYPE reloader_watch_restarts_total counter\n\
                    reloader_watch_restarts_total{resource=\"ConfigMap\"} 2\n\
                    reloader_watch_restarts_total{resource=\"Secret\"} 3\n\
                    reloader_watch_restarts_total_other 9\n";
        assert_eq!(sum_metric(text, "reloader_watch_restarts_total"), Some(5.0));
        assert_eq!(sum_metric(text, "absent_total"), None);
    }
}
