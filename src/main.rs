//! The `reloader` binary: parse flags, set up logging and TLS, run the controller until SIGTERM/SIGINT.

use std::process::ExitCode;

use clap::Parser;
use reloader::{
    config::{Args, LogFormat},
    controller::{self, Settings},
    decision::DecisionSettings,
};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    // One rustls crypto provider for the whole process (rust-stack.md §1.10): ring, as kube uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    init_logging(&args);
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(args: &Args) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RELOADER_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{},kube_client=warn", args.log_level.directive()))
    });
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_ansi(ansi);
    match args.log_format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await?;
    let settings = Settings {
        scope: args.watch_scope(),
        keys: std::sync::Arc::new(args.annotations.keys()),
        strategy: args.reload_strategy,
        decisions: DecisionSettings { auto_reload_all: args.auto_reload_all },
        workers: usize::from(args.workers),
        max_backoff: args.max_retry_backoff,
    };
    let shutdown = CancellationToken::new();
    let (ready_tx, _ready) = tokio::sync::watch::channel(false);
    let signals = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        signals.cancel();
    });
    controller::run(client, settings, shutdown, ready_tx).await;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}
