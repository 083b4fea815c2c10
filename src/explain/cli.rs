//! `reloader explain` as a command: parse the target, read a proposed content, connect as kubectl would
//! (`--kubeconfig`, `--context`, the context's namespace), ask, and print in the `-o` format.

use kube::{
    Client, Config,
    config::{KubeConfigOptions, Kubeconfig},
};

use super::{Target, parse_target, preview, read, render};
use crate::rules::resource::ConfigKind;
use crate::{config::ExplainArgs, controller::Settings};

/// Why `explain` printed no answer.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The command line is wrong (exit status 2, as clap's own errors); nothing was read from the cluster.
    #[error("{0}")]
    Usage(String),
    /// The cluster could not be asked (exit status 1).
    #[error("{0}")]
    Cluster(String),
}

/// Answers `explain` as `args` ask.
pub async fn answer(args: &ExplainArgs, settings: &Settings) -> Result<String, Failure> {
    let (target, connected) = match parse_target(&args.target) {
        Ok(target) => (target, None),
        // A kind the flags did not configure: found by discovery, as the controller's flag would name it.
        Err(unknown) => {
            let usage = || Failure::Usage(unknown.to_string());
            let kind = args.target.split_once('/').filter(|(k, n)| !k.is_empty() && !n.is_empty()).ok_or_else(usage)?.0;
            let (client, namespace) = connect(args).await.map_err(Failure::Cluster)?;
            let found = super::discover::configure_kind_named(&client, kind)
                .await
                .map_err(|e| Failure::Cluster(format!("discovering the kind {kind:?}: {e}")))?;
            let target = if found { parse_target(&args.target).map_err(|_| usage())? } else { return Err(usage()) };
            (target, Some((client, namespace)))
        }
    };
    let new_content = match &target {
        _ if !args.previews() => None,
        Target::Config(ConfigKind::ConfigMap | ConfigKind::Secret, _) => Some(
            preview::read_sources(&args.from_literal, &args.from_file).map_err(|e| Failure::Usage(e.to_string()))?,
        ),
        _ => {
            return Err(Failure::Usage(
                "--from-file and --from-literal apply to configmap/ and secret/ targets".into(),
            ));
        }
    };
    let (client, context_namespace) = match connected {
        Some(connected) => connected,
        None => connect(args).await.map_err(Failure::Cluster)?,
    };
    let namespace = args.namespace.clone().unwrap_or(context_namespace);
    let mut settings = settings.clone();
    settings.load_hash_key(&client).await.map_err(|e| Failure::Cluster(e.to_string()))?;
    let cluster = |e: super::ExplainError| Failure::Cluster(e.to_string());
    Ok(match target {
        Target::Workload(kind, name) => {
            let answer = read::workload(&client, (kind, name), &namespace, &settings).await.map_err(cluster)?;
            render(&answer, super::WorkloadExplanation::to_text, args.output)
        }
        Target::Config(kind, name) => {
            let new = new_content.as_ref();
            let answer = read::dependents(&client, (kind, name), &namespace, &settings, new).await.map_err(cluster)?;
            render(&answer, super::reverse::Dependents::to_text, args.output)
        }
    })
}

/// A client configured as kubectl would be, and the namespace kubectl would default to.
async fn connect(args: &ExplainArgs) -> Result<(Client, String), String> {
    let options = KubeConfigOptions { context: args.context.clone(), ..KubeConfigOptions::default() };
    let config = match (&args.kubeconfig, &args.context) {
        (Some(path), _) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &options).await.map_err(|e| e.to_string())
        }
        (None, Some(_)) => Config::from_kubeconfig(&options).await.map_err(|e| e.to_string()),
        (None, None) => Config::infer().await.map_err(|e| e.to_string()),
    }
    .map_err(|e| format!("no Kubernetes client: {e}"))?;
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| format!("no Kubernetes client: {e}"))?;
    Ok((client, namespace))
}
