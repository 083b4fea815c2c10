//! `testenv`: build, start and stop the local control plane.
//!
//! ```text
//! testenv build                  build or find the cached binaries; prints their folder
//! testenv up  [--name N]         start the control plane, print its KUBECONFIG, run until Ctrl-C
//! testenv run [--name N] -- CMD  start it, run CMD with KUBECONFIG / RELOADER_TEST_KUBECONFIG set, stop it,
//!                                exit with CMD's status (component logs are printed when CMD fails)
//! ```
//! With `RELOADER_TEST_KUBECONFIG` already set, `run` uses that cluster and starts nothing.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use testenv::{
    binaries,
    cluster::{ControlPlane, Options},
    harness::KUBECONFIG_ENV,
};
use tokio::signal::unix::{SignalKind, signal};

#[derive(Parser)]
#[command(about = "Local Kubernetes control plane for reloader's tests, `make run` and benchmarks")]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build (or find cached) control-plane binaries and print their folder.
    Build,
    /// Start the control plane and keep it running until Ctrl-C.
    Up(StartArgs),
    /// Start the control plane, run a command against it, stop it.
    Run {
        #[command(flatten)]
        start: StartArgs,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(clap::Args)]
struct StartArgs {
    /// Name of this control plane; its state lives in target/testenv/<name>.
    #[arg(long, default_value = "default")]
    name: String,
    /// Number of KWOK fake nodes.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
}

fn main() -> ExitCode {
    let Some(rt) = testenv::tool_runtime("testenv") else { return ExitCode::FAILURE };
    match rt.block_on(run(Args::parse())) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("testenv: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<ExitCode, testenv::Error> {
    match args.command {
        Cmd::Build => {
            println!("{}", binaries::ensure_built()?.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Up(start) => {
            let mut cp = start_plane(&start).await?;
            print_usage(&cp);
            eprintln!("testenv: running; Ctrl-C stops it");
            wait_for_signal().await;
            cp.stop().await;
            eprintln!("testenv: stopped");
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run { start, command } => {
            if let Some(external) = std::env::var_os(KUBECONFIG_ENV) {
                eprintln!(
                    "testenv: {KUBECONFIG_ENV}={} is set; using that cluster",
                    PathBuf::from(&external).display()
                );
                return run_command(&command, &PathBuf::from(external), None).await;
            }
            let mut cp = start_plane(&start).await?;
            print_usage(&cp);
            let code = run_command(&command, &cp.kubeconfig.clone(), Some(&cp)).await;
            cp.stop().await;
            code
        }
    }
}

async fn start_plane(start: &StartArgs) -> Result<ControlPlane, testenv::Error> {
    let bin_dir = binaries::ensure_built()?;
    let state_dir = workspace_target().join("testenv").join(&start.name);
    eprintln!("testenv: starting control plane '{}' ({} KWOK nodes)", start.name, start.nodes);
    let started = std::time::Instant::now();
    let cp = ControlPlane::start(&Options {
        bin_dir,
        state_dir,
        nodes: start.nodes,
        ready_timeout: Duration::from_secs(120),
        extra_apiserver_args: Vec::new(),
        extra_controller_manager_args: Vec::new(),
    })
    .await?;
    eprintln!("testenv: control plane ready in {:.1}s", started.elapsed().as_secs_f64());
    Ok(cp)
}

fn print_usage(cp: &ControlPlane) {
    eprintln!("testenv: KUBECONFIG={}", cp.kubeconfig.display());
    eprintln!(
        "testenv:   from another terminal: export KUBECONFIG={}; {}/kubectl get nodes",
        cp.kubeconfig.display(),
        cp.bin_dir.display()
    );
    eprintln!("testenv: component logs in {}", cp.log_dir.display());
}

/// `<workspace>/target`, or `CARGO_TARGET_DIR`.
fn workspace_target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        crate_dir.parent().map(|root| root.join("target")).unwrap_or(crate_dir)
    })
}

async fn wait_for_signal() {
    let mut term = signal(SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}

async fn run_command(
    command: &[String],
    kubeconfig: &std::path::Path,
    cp: Option<&ControlPlane>,
) -> Result<ExitCode, testenv::Error> {
    let (program, rest) = command.split_first().ok_or_else(|| testenv::Error::Timeout { what: "a command".into() })?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(rest).env("KUBECONFIG", kubeconfig).env(KUBECONFIG_ENV, kubeconfig).kill_on_drop(true);
    if let Some(cp) = cp {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![cp.bin_dir.clone()];
        paths.extend(std::env::split_paths(&path));
        cmd.env("PATH", std::env::join_paths(paths).unwrap_or(path)).env("TESTENV_BIN_DIR", &cp.bin_dir);
    }
    let mut child = cmd.spawn().map_err(|source| testenv::Error::Spawn { program: program.into(), source })?;
    let status = tokio::select! {
        s = child.wait() => s.ok(),
        _ = wait_for_signal() => {
            eprintln!("testenv: interrupted; stopping {program}");
            // The terminal's Ctrl-C reached the child too; give it a moment, then kill it.
            match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
                Ok(s) => s.ok(),
                Err(_) => { let _ = child.kill().await; None }
            }
        }
    };
    let ok = status.is_some_and(|s| s.success());
    if !ok && let Some(cp) = cp {
        eprintln!("testenv: `{}` failed; control-plane component logs:\n{}", command.join(" "), cp.log_tails(30));
    }
    let code = status.and_then(|s| s.code()).unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
