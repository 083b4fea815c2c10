//! `bench`: runs Reloader-compatible controllers through the load-test scenarios and writes a report.
//!
//! ```text
//! bench [--scenarios all|quick|S1,S4,…] [--duration 10s]
//!       [--controller-cmd "target/release/reloader --coalesce-window=0s"] [--baseline-cmd "<other binary + flags>"]
//!       [--kubeconfig PATH] [--out DIR]
//! ```
//! Without `--kubeconfig` it starts a local control plane (testenv) with an audit log for API counts.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use bench::{
    cli::{parse_duration, workspace_target},
    controller::ControllerSpec,
    env::{BenchEnv, LocalPlane},
    report::{self, Report, ScenarioResult},
    scenarios::{
        self, ScenarioId,
        run::{RunOptions, run},
    },
};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Benchmark Reloader-compatible controllers (upstream load-test scenarios S1–S13 and M1)")]
struct Args {
    /// Scenarios: `all`, `quick` (S1,S4,S6) or a comma list such as `S1,S6,M1`.
    #[arg(long, default_value = "quick")]
    scenarios: String,
    /// How long each scenario makes updates (`10s`, `500ms`, `2m`; M1 makes a fixed 1,000).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// The controller under test: program and upstream-compatible flags, split on whitespace.
    #[arg(long, default_value = "target/release/reloader --coalesce-window=0s --metrics-addr=127.0.0.1:0")]
    controller_cmd: String,
    /// Label of the controller under test in reports.
    #[arg(long, default_value = "ours")]
    controller_label: String,
    /// A second controller run through the same scenarios (fresh namespaces) for ours/baseline ratios.
    #[arg(long)]
    baseline_cmd: Option<String>,
    /// Label of the baseline in reports.
    #[arg(long, default_value = "baseline")]
    baseline_label: String,
    /// Use this cluster instead of starting a local control plane (API counts are then unavailable).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Scope the controller to the scenario namespace (`KUBERNETES_NAMESPACE`) when there is one namespace.
    #[arg(long)]
    scope_namespace: bool,
    /// Where report.md, report.json, the SVG plots and controller logs go.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// Longest wait for outstanding reloads after the updates.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    settle_timeout: Duration,
    /// Keep kube-controller-manager, kube-scheduler and KWOK at normal priority (default: nice 10, so the
    /// rollouts they process compete less with the API server and the controller under test).
    #[arg(long)]
    no_renice: bool,
    /// KWOK fake nodes of the local control plane.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// An extra kube-apiserver flag for the local control plane, repeatable; e.g.
    /// `--apiserver-arg=--profiling=true` to take a CPU profile from `/debug/pprof/profile` during a run.
    #[arg(long = "apiserver-arg", allow_hyphen_values = true)]
    apiserver_args: Vec<String>,
    /// Run kube-controller-manager without its Deployment, ReplicaSet, StatefulSet and DaemonSet controllers:
    /// template writes are still made and seen, but spawn no ReplicaSets or pods, so the API server serves the
    /// controller under test instead of the rollouts it causes (isolates the controller's own latency).
    #[arg(long)]
    no_rollouts: bool,
    /// Start a new local control plane for every scenario run, so no run inherits another's objects, etcd
    /// history or API server warm-up (comparisons of two big scenarios, e.g. M2 against M2N, otherwise depend on
    /// their order).
    #[arg(long)]
    fresh_plane: bool,
}

fn main() -> ExitCode {
    bench::cli::run_tool("bench", main_async(Args::parse()))
}

async fn main_async(args: Args) -> anyhow::Result<bool> {
    let ids = ScenarioId::parse_list(&args.scenarios)?;
    let mut controllers = vec![ControllerSpec::parse(&args.controller_label, &args.controller_cmd)?];
    if let Some(cmd) = &args.baseline_cmd {
        controllers.push(ControllerSpec::parse(&args.baseline_label, cmd)?);
    }
    for c in &controllers {
        c.ensure_built()?;
    }
    std::fs::create_dir_all(&args.out).with_context(|| args.out.display().to_string())?;
    let plane = LocalPlane {
        nodes: args.nodes,
        renice_reactors: !args.no_renice,
        apiserver_args: args.apiserver_args.clone(),
        rollouts: !args.no_rollouts,
    };
    let mut env = match &args.kubeconfig {
        Some(k) => BenchEnv::external(k.clone(), args.out.clone()).await?,
        None => BenchEnv::local(workspace_target(), args.out.clone(), &plane).await?,
    };
    let fresh_plane = args.fresh_plane && args.kubeconfig.is_none();
    let opts = RunOptions {
        duration: args.duration,
        scope_single_namespace: args.scope_namespace,
        settle_timeout: args.settle_timeout,
        ready_timeout: Duration::from_secs(180),
        wait_for_cleanup: true,
    };
    let mut report = Report {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: report::describe_machine(),
        duration_s: args.duration.as_secs_f64(),
        results: Vec::new(),
        failures: Vec::new(),
    };
    let runs = ids.len() * controllers.len();
    let mut done = 0;
    for id in ids {
        let layout = scenarios::layout(id);
        for c in &controllers {
            done += 1;
            if fresh_plane && done > 1 {
                env.stop().await;
                env = BenchEnv::local(workspace_target(), args.out.clone(), &plane).await?;
            }
            // Big scenarios leave much to delete: wait for it unless nothing runs after (or on a plane of its own).
            let opts = RunOptions { wait_for_cleanup: done < runs && !fresh_plane, ..opts.clone() };
            tracing::info!("=== {id:?} with {} ===", c.label);
            match run(&env, &layout, c, &opts).await {
                Ok(r) => {
                    tracing::info!(
                        "{id:?}/{}: expected {} observed {} missed {} p50 {:?} ms p99 {:?} ms",
                        c.label,
                        r.actions.expected,
                        r.actions.observed,
                        r.actions.missed,
                        r.latency.p50_ms,
                        r.latency.p99_ms
                    );
                    report.results.push(r);
                }
                Err(e) => {
                    tracing::error!("{id:?} with {} failed: {e}", c.label);
                    report.failures.push(format!("{id:?} with {}: {e}", c.label));
                }
            }
        }
        write_outputs(&args.out, &report, id)?;
    }
    env.stop().await;
    println!("{}", report::markdown::render(&report));
    eprintln!("bench: report in {}", args.out.join("report.md").display());
    Ok(report.failures.is_empty())
}

fn write_outputs(out: &std::path::Path, report: &Report, id: ScenarioId) -> anyhow::Result<()> {
    let write = |name: &str, text: String| {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| path.display().to_string())
    };
    write("report.md", report::markdown::render(report))?;
    write("report.json", serde_json::to_string_pretty(report)?)?;
    let name = format!("{id:?}");
    let group: Vec<&ScenarioResult> = report.results.iter().filter(|r| r.scenario == name).collect();
    if let Some(first) = group.first() {
        let series: Vec<(&str, &[f64])> =
            group.iter().map(|r| (r.controller.as_str(), r.latencies_ms.as_slice())).collect();
        write(&format!("latency-{name}.svg"), report::svg::latency_cdf(&format!("{name}: {}", first.title), &series))?;
    }
    Ok(())
}
