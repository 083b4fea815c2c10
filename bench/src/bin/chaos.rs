//! `chaos`: runs a Reloader-compatible controller through the fault suite of RELIABILITY.md and reports missed,
//! duplicate and spurious rollouts per fault and reload strategy.
//!
//! ```text
//! chaos [--faults all|1,7] [--strategies env-vars,annotations] [--burst 25s] [--quiet 20s]
//!       [--controller-cmd "target/release/reloader --metrics-addr=127.0.0.1:0"] [--kubeconfig PATH] [--out DIR]
//! ```
//! Without `--kubeconfig` it starts a local control plane (faults 2 and 3 need it). Exit status 1 when any run
//! is not clean.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use bench::{
    chaos::{
        ChaosOptions, Fault, Strategy,
        plane::ChaosEnv,
        report::{ChaosReport, markdown},
        run::run_fault,
    },
    cli::{parse_duration, workspace_target},
    controller::ControllerSpec,
    report::describe_machine,
};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Inject faults while ConfigMaps and Secrets change; count missed, duplicate and spurious rollouts")]
struct Args {
    /// Faults: `all` or a comma list of numbers 1–7 (see RELIABILITY.md).
    #[arg(long, default_value = "all")]
    faults: String,
    /// Reload strategies each fault runs with.
    #[arg(long, default_value = "env-vars,annotations")]
    strategies: String,
    /// The controller under test: program and flags, split on whitespace. The runner adds
    /// `--reload-strategy`, `--namespaces` and the fault's own flags.
    #[arg(long, default_value = "target/release/reloader --metrics-addr=127.0.0.1:0")]
    controller_cmd: String,
    /// How long random updates are made per run.
    #[arg(long, default_value = "25s", value_parser = parse_duration)]
    burst: Duration,
    /// How long template writes are watched for after convergence (spurious rollouts).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    quiet: Duration,
    /// Seed of the fault timings.
    #[arg(long, default_value_t = ChaosOptions::default().seed)]
    seed: u64,
    /// Use this cluster instead of starting a local control plane (faults 2 and 3 are then skipped).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Where report.md, report.json and the controller logs go.
    #[arg(long, default_value = "target/chaos")]
    out: PathBuf,
}

fn main() -> ExitCode {
    bench::cli::run_tool("chaos", main_async(Args::parse()))
}

async fn main_async(args: Args) -> anyhow::Result<bool> {
    let faults = Fault::parse_list(&args.faults)?;
    let strategies = Strategy::parse_list(&args.strategies)?;
    let spec = ControllerSpec::parse("ours", &args.controller_cmd)?;
    spec.ensure_built()?;
    let opts = ChaosOptions { burst: args.burst, quiet: args.quiet, seed: args.seed, ..ChaosOptions::default() };
    std::fs::create_dir_all(&args.out).with_context(|| args.out.display().to_string())?;
    let mut env = match &args.kubeconfig {
        Some(k) => ChaosEnv::external(k.clone(), args.out.clone()).await?,
        None => ChaosEnv::local(&workspace_target(), args.out.clone()).await?,
    };
    let mut report = ChaosReport {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: describe_machine(),
        ..ChaosReport::default()
    };
    for fault in faults {
        if fault.needs_local_plane() && !env.is_local() {
            eprintln!("chaos: skipping fault {} (needs the local control plane)", fault.number());
            continue;
        }
        for &strategy in &strategies {
            match run_fault(&env, fault, strategy, &opts, &spec).await {
                Ok(r) => {
                    let f = &r.figures;
                    tracing::info!(
                        "fault {} / {}: updates {} expected {} rollouts {} missed {} duplicate {} spurious {} clean {}",
                        r.number,
                        strategy.flag(),
                        f.updates,
                        f.expected,
                        f.rollouts,
                        f.missed,
                        f.duplicates,
                        f.spurious,
                        r.clean()
                    );
                    report.results.push(r);
                }
                Err(e) => {
                    tracing::error!("fault {} with {} failed: {e}", fault.number(), strategy.flag());
                    report.failures.push(format!("fault {} with {}: {e}", fault.number(), strategy.flag()));
                }
            }
            let write = |name: &str, text: String| {
                let path = args.out.join(name);
                std::fs::write(&path, text).with_context(|| path.display().to_string())
            };
            write("report.md", markdown(&report))?;
            write("report.json", serde_json::to_string_pretty(&report)?)?;
        }
    }
    env.stop().await;
    println!("{}", markdown(&report));
    eprintln!("chaos: report in {}", args.out.join("report.md").display());
    Ok(report.clean())
}
