//! The `reloader` binary: parse flags, set up logging and TLS, run the controller until SIGTERM/SIGINT (or, with
//! `explain`, print what it would do for one workload and exit).

use std::{process::ExitCode, sync::Arc};

use clap::Parser;
use reloader::{
    config::{Args, Command, LeaderElection, LogFormat},
    controller::{self, Settings},
    http::{self, Health},
    leader::Leadership,
    metrics::Metrics,
};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    // First, before the runtime exists and anything is logged or connected: returns only when the allocator is
    // tuned already or cannot be.
    let untuned = reloader::allocator::reexec_with_tunables();
    start(untuned)
}

// One thread: the controller waits on the network almost all the time, and every runtime thread costs a glibc
// arena that keeps the initial lists' freed pages. Measured at M1 (bench, issue 15): RSS after sync 28.7 vs
// 36.5 MiB, CPU 0.90 vs 1.33 s, ready 1.0 vs 1.6 s against the two-thread default of this machine
// (bench/results/HISTORY.md).
#[tokio::main(flavor = "current_thread")]
async fn start(untuned: Option<String>) -> ExitCode {
    // One rustls crypto provider for the whole process (rust-stack.md §1.10): ring, as kube uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    // `explain` prints its answer on stdout: log lines (e.g. flag warnings) go to stderr then.
    init_logging(&args, args.command.is_some());
    if let Some(why) = untuned {
        tracing::warn!("{why}");
    }
    let validated =
        Settings::from_args(&args).map_err(|e| e.to_string()).and_then(|s| Ok((s, args.leader.validate()?)));
    let (settings, election) = match validated {
        Ok(v) => v,
        Err(e) => {
            // Same status as clap's own validation errors.
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(Command::Explain(explain_args)) = &args.command {
        return explain(explain_args, &settings).await;
    }
    match run(args, settings, election).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `reloader explain`: prints the answer, or the error (status 2 for a bad command line, 1 otherwise).
async fn explain(args: &reloader::config::ExplainArgs, settings: &Settings) -> ExitCode {
    use reloader::explain::cli::{Failure, answer};
    match answer(args, settings).await {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(if matches!(e, Failure::Usage(_)) { 2 } else { 1 })
        }
    }
}

fn init_logging(args: &Args, to_stderr: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RELOADER_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{},kube_client=warn", args.log_level.directive()))
    });
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let (writer, ansi) = if to_stderr {
        (BoxMakeWriter::new(std::io::stderr), std::io::IsTerminal::is_terminal(&std::io::stderr()))
    } else {
        (BoxMakeWriter::new(std::io::stdout), std::io::IsTerminal::is_terminal(&std::io::stdout()))
    };
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_ansi(ansi).with_writer(writer);
    match args.log_format {
        LogFormat::Json => builder.event_format(reloader::logging::LogrusJson).init(),
        LogFormat::Text => builder.init(),
    }
}

async fn run(args: Args, mut settings: Settings, election: Option<LeaderElection>) -> anyhow::Result<()> {
    if !args.ignored_arguments.is_empty() {
        tracing::warn!(arguments = ?args.ignored_arguments, "ignoring positional arguments (upstream ignores them too)");
    }
    for flag in args.later.requested() {
        tracing::warn!("{flag} is accepted for compatibility and ignored: pprof is a Go runtime feature");
    }
    let metrics = Arc::new(Metrics::new(args.metrics_count_by_namespace == "enabled"));
    let health = Arc::new(Health::default());
    let shutdown = CancellationToken::new();
    let router = http::router(metrics.clone(), health.clone());
    let addr = http::parse_listen_addr(&args.metrics_addr).map_err(anyhow::Error::msg)?;
    let bound = http::serve(addr, router.clone(), shutdown.clone()).await?;
    tracing::info!(address = %bound, "serving /metrics, /live, /healthz, /readyz on {bound}");
    if !args.health_addr.is_empty() {
        let addr = http::parse_listen_addr(&args.health_addr).map_err(anyhow::Error::msg)?;
        let bound = http::serve(addr, router, shutdown.clone()).await?;
        tracing::info!(address = %bound, "serving health endpoints on {bound}");
    }
    let client = reloader::client::counted_client(metrics.rest_requests.clone(), metrics.rest_duration.clone()).await?;
    settings.load_hash_key(&client).await?;
    if let Some(secret) = &settings.hash_key_secret {
        tracing::info!(secret = %secret, "Secret hashes written on workloads are keyed (HMAC-SHA1) by {secret}");
    }
    reloader::metainfo::publish(&client, &args).await;
    let signals = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received, shutting down");
        signals.cancel();
    });
    let leadership = match &election {
        Some(cfg) => {
            tracing::info!(lease = %cfg.lease_name, namespace = %cfg.namespace, identity = %cfg.identity, "leader election enabled");
            let client = reloader::client::counted_client(metrics.rest_requests.clone(), metrics.rest_duration.clone());
            Leadership::elect(client, cfg)
        }
        None => Leadership::always(),
    };
    let result = controller::run(client, settings, shutdown, metrics, health, leadership.is_leader.clone()).await;
    leadership.release().await;
    Ok(result?)
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}
