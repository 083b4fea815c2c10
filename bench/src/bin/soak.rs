//! `soak`: churns hash-suffixed ConfigMaps and preview namespaces past a Reloader-compatible controller and checks
//! that its index comes back to its size and nothing is missed (issue 27; BENCHMARKS.md, "Soak").
//!
//! ```text
//! soak [--cycles 10000] [--namespaces 200] [--workloads 50] [--concurrency 4] [--rollouts]
//!      [--controller-cmd "target/release/reloader --metrics-addr=127.0.0.1:0"] [--out target/soak]
//! ```
//! It starts a local control plane of its own. Exit status 1 when a map grew or a reload was missed.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use bench::{
    cli::{parse_duration, workspace_target},
    controller::ControllerSpec,
    env::{BenchEnv, LocalPlane},
    soak::{SoakOptions, run},
};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Churn hash-suffixed ConfigMaps and namespaces; check the controller's index stays flat, 0 missed")]
struct Args {
    /// Create/switch/delete cycles of hash-suffixed ConfigMaps.
    #[arg(long, default_value_t = 10_000)]
    cycles: usize,
    /// Preview namespaces created, changed once and deleted.
    #[arg(long, default_value_t = 200)]
    namespaces: usize,
    /// Deployments the cycles rotate over.
    #[arg(long, default_value_t = 50)]
    workloads: usize,
    /// Concurrent writers.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Longest wait for one reload.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    reload_timeout: Duration,
    /// Let kube-controller-manager roll the Deployments out (ReplicaSets and pods for every cycle; slower).
    #[arg(long)]
    rollouts: bool,
    /// The controller under test: program and flags, split on whitespace.
    #[arg(long, default_value = "target/release/reloader --metrics-addr=127.0.0.1:0")]
    controller_cmd: String,
    /// Where soak.md, soak.json and the controller's log go.
    #[arg(long, default_value = "target/soak")]
    out: PathBuf,
}

fn main() -> ExitCode {
    bench::cli::run_tool("soak", main_async(Args::parse()))
}

async fn main_async(args: Args) -> anyhow::Result<bool> {
    let spec = ControllerSpec::parse("ours", &args.controller_cmd)?;
    spec.ensure_built()?;
    anyhow::ensure!(args.workloads > 0, "--workloads must be at least 1 (the cycles rotate over them)");
    std::fs::create_dir_all(&args.out).with_context(|| args.out.display().to_string())?;
    let plane = LocalPlane { nodes: 2, renice_reactors: true, apiserver_args: Vec::new(), rollouts: args.rollouts };
    let mut env = BenchEnv::local(workspace_target(), args.out.clone(), &plane).await?;
    let opts = SoakOptions {
        cycles: args.cycles,
        namespaces: args.namespaces,
        workloads: args.workloads,
        concurrency: args.concurrency,
        reload_timeout: args.reload_timeout,
    };
    let result = run(&env, &spec, &opts).await;
    env.stop().await;
    let result = result?;
    let report = result.markdown();
    std::fs::write(args.out.join("soak.md"), &report).context("soak.md")?;
    std::fs::write(args.out.join("soak.json"), serde_json::to_string_pretty(&result)?).context("soak.json")?;
    println!("{report}");
    Ok(result.passed())
}
