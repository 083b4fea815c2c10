//! `reloader explain`'s own flags: kubectl's where kubectl has one (`-n`, `--context`, `--kubeconfig`, `-o`,
//! `--from-file`, `--from-literal`), so the binary installed as `kubectl-reloader` is a kubectl plugin.

/// `-o`: how the answer is printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Lines for a terminal.
    #[default]
    Text,
    /// One JSON document, for scripts.
    Json,
}

/// `reloader explain <target> [flags]`.
#[derive(clap::Args, Clone, Debug)]
pub struct ExplainArgs {
    /// `<kind>/<name>`: a workload (`deployment/web`; statefulset, daemonset, cronjob, job, rollout,
    /// deploymentconfig; kubectl's short names work) — which resources reload it; or a resource
    /// (`configmap/cfg`, `secret/db`, `secretproviderclass/vault`) — which workloads its change would roll out.
    pub target: String,
    /// The namespace (default: the kubeconfig context's namespace, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// The kubeconfig file (default: `$KUBECONFIG`, then `~/.kube/config`, then in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// A proposed new content, as for `kubectl create configmap`: `[key=]file` or a directory (each regular file
    /// in it). Shows which keys it changes; values are never printed. ConfigMap and Secret targets only.
    #[arg(long = "from-file", value_name = "[KEY=]SOURCE")]
    pub from_file: Vec<String>,
    /// A proposed new content, `key=value`, as for `kubectl create configmap`. Repeatable.
    #[arg(long = "from-literal", value_name = "KEY=VALUE")]
    pub from_literal: Vec<String>,
}

impl ExplainArgs {
    /// Whether a new content was proposed.
    pub fn previews(&self) -> bool {
        !self.from_file.is_empty() || !self.from_literal.is_empty()
    }
}
