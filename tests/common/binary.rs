//! The `reloader` binary under test, started as a user would start it.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use super::{RELOAD_WAIT, wait_for};

/// The `reloader` binary running against the test cluster, scoped to the test's namespace. Killed on drop;
/// its log is printed when the test fails.
pub struct Reloader {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// The threads copying stdout and stderr into `lines`; they end when the process has exited and its pipes are
    /// read to the end.
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Reloader {
    /// Starts the binary with `--namespaces=<ns>` plus `args`, and waits until its watches have synced.
    pub async fn start(ns: &str, args: &[&str]) -> Self {
        Self::start_with_env(ns, args, &[]).await
    }

    /// Like [`Reloader::start`], with extra environment variables.
    pub async fn start_with_env(ns: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let scoped = format!("--namespaces={ns}");
        let all: Vec<&str> = std::iter::once(scoped.as_str()).chain(args.iter().copied()).collect();
        Self::start_unscoped(&all, env).await
    }

    /// Starts the binary with exactly `args` (global mode unless they scope it) and waits for its sync.
    pub async fn start_unscoped(args: &[&str], env: &[(&str, &str)]) -> Self {
        let r = Self::spawn(args, env);
        r.wait_log("watches synced").await;
        r
    }

    /// Starts the binary with exactly `args` and returns at once. `env` comes last, so it may replace the
    /// test cluster's admin `KUBECONFIG` (e.g. with a ServiceAccount's).
    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_binary(std::path::Path::new(env!("CARGO_BIN_EXE_reloader")), args, env)
    }

    /// Like [`Reloader::spawn`], with another build of the binary (e.g. the one taken out of the image).
    pub fn spawn_binary(binary: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let kubeconfig = testenv::harness::kubeconfig_path();
        let mut child = Command::new(binary)
            .arg("--metrics-addr=127.0.0.1:0")
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start reloader binary");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        for pipe in [
            child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
            child.stderr.take().map(|p| Box::new(p) as _),
        ]
        .into_iter()
        .flatten()
        {
            let sink = lines.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    sink.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(line);
                }
            }));
        }
        Self { child, lines, readers }
    }

    /// The process id (for signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit by itself (after a signal) and returns its status code; its last log lines
    /// are in [`Reloader::logs`] by then.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let start = std::time::Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(status)) = self.child.try_wait() {
                // The process has exited, but its last lines may still be in the pipes.
                let readers = std::mem::take(&mut self.readers);
                let _ = tokio::task::spawn_blocking(move || readers.into_iter().for_each(|r| drop(r.join()))).await;
                return status.code();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// `http://<address>` of the metrics and health server (from the startup log line).
    pub async fn http_base(&self) -> String {
        let line = self.wait_log("serving /metrics").await;
        let addr = line.rsplit(" on ").next().unwrap_or_default().split_whitespace().next().unwrap_or_default();
        format!("http://{addr}")
    }

    /// The controller's `/metrics` exposition now.
    pub async fn metrics(&self) -> String {
        super::http_get(&self.http_base().await, "/metrics").await.1
    }

    /// Reads the counter `series` (`name{labels}` exactly as exposed; absent counts as 0) now, before a change,
    /// to wait afterwards until it has moved: evidence that the controller saw and processed that change. A
    /// "nothing happened" assertion without such evidence passes even when the controller never looked.
    pub async fn counter(&self, series: &str) -> Counter<'_> {
        let at = super::sample(&self.metrics().await, series).unwrap_or(0.0);
        Counter { reloader: self, series: series.to_owned(), at }
    }

    /// [`Reloader::counter`] of `reloader_events_received_total{event_type, resource_type}`: the observer counts
    /// a watch event when it applies it to the index, and queues the workloads it concerns in the same step.
    pub async fn events(&self, event_type: &str, resource_type: &str) -> Counter<'_> {
        self.counter(&events_received(event_type, resource_type)).await
    }

    /// Waits until this process has finished at least `n` reconciles (any result) and its work queue is empty:
    /// after a start, evidence that the full reconcile following its first list went through the namespace's `n`
    /// workloads (a workload reconciled again after its own write may count twice, hence the empty queue too).
    pub async fn wait_reconciled(&self, n: u32) {
        let base = self.http_base().await;
        wait_for(&format!("{n} reconcile(s) finished and an empty work queue"), RELOAD_WAIT, || async {
            let (_, metrics) = super::http_get(&base, "/metrics").await;
            let done: f64 = ["success", "skipped", "error"]
                .iter()
                .filter_map(|r| super::sample(&metrics, &format!("reloader_reconcile_total{{result=\"{r}\"}}")))
                .sum();
            let queued = super::sample(&metrics, "reloader_workqueue_depth").unwrap_or(0.0);
            if done >= f64::from(n) && queued == 0.0 {
                Ok(())
            } else {
                Err(format!("{done} reconcile(s), {queued} queued"))
            }
        })
        .await;
    }

    /// A copy of every log line so far.
    pub fn logs(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Waits for a log line containing `needle` and returns it.
    pub async fn wait_log(&self, needle: &str) -> String {
        wait_for(&format!("a reloader log line containing {needle:?}"), RELOAD_WAIT, || async {
            self.logs().into_iter().find(|l| l.contains(needle)).ok_or_else(|| format!("log: {:#?}", self.logs()))
        })
        .await
    }

    /// Whether a log line containing `needle` appears within `timeout` (no panic when it does not).
    pub async fn has_log_within(&self, needle: &str, timeout: Duration) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < timeout {
            if self.count_log(needle) > 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Log lines containing `needle`.
    pub fn count_log(&self, needle: &str) -> usize {
        self.logs().iter().filter(|l| l.contains(needle)).count()
    }

    /// Stops the process with SIGKILL (as a crash or OOM kill would).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("----- reloader log -----\n{}\n------------------------", self.logs().join("\n"));
        }
    }
}

/// Runs `reloader <flags> explain <target> -n <ns> <after…>` once: (success, stdout, stderr).
pub fn explain_with(ns: &super::TestNamespace, flags: &[&str], target: &str, after: &[&str]) -> (bool, String, String) {
    explain_as(&testenv::harness::kubeconfig_path(), ns, flags, target, after)
}

/// [`explain_with`] with the credentials of `kubeconfig` (e.g. a ServiceAccount's).
pub fn explain_as(
    kubeconfig: &std::path::Path,
    ns: &super::TestNamespace,
    flags: &[&str],
    target: &str,
    after: &[&str],
) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_reloader"))
        .args(flags)
        .args(["explain", target, "-n", &ns.name])
        .args(after)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("run reloader explain");
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (out.status.success(), text(out.stdout), text(out.stderr))
}

/// The commit the binary under test was built from, asked from git independently of its build script:
/// `(hash, time in RFC 3339 UTC)`, or upstream's "unknown" values where git cannot tell (a source tarball).
pub fn built_commit() -> (String, String) {
    let git = |args: &[&str]| -> Option<String> {
        let out =
            Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).env("TZ", "UTC").output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !text.is_empty()).then_some(text)
    };
    let head = git(&["rev-parse", "HEAD"]);
    let time = git(&["log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ"]);
    match (head, time) {
        (Some(head), Some(time)) => (head, time),
        _ => ("unknown".into(), "0001-01-01T00:00:00Z".into()),
    }
}

/// `reloader_events_received_total{event_type="…",resource_type="…"}` as exposed.
pub fn events_received(event_type: &str, resource_type: &str) -> String {
    format!("reloader_events_received_total{{event_type=\"{event_type}\",resource_type=\"{resource_type}\"}}")
}

/// A counter of a running [`Reloader`], read before a change (see [`Reloader::counter`]).
pub struct Counter<'a> {
    reloader: &'a Reloader,
    series: String,
    at: f64,
}

impl Counter<'_> {
    /// How much the counter has grown since it was read.
    pub async fn grown(&self) -> f64 {
        super::sample(&self.reloader.metrics().await, &self.series).unwrap_or(0.0) - self.at
    }

    /// Waits until the counter has grown by at least `by` since it was read (the change made after the reading
    /// was processed); returns how much it grew.
    pub async fn wait_grown(&self, by: u32) -> f64 {
        let base = self.reloader.http_base().await;
        let what =
            format!("{} to grow by {by} from {}: evidence the controller processed the change", self.series, self.at);
        wait_for(&what, RELOAD_WAIT, || async {
            let (_, metrics) = super::http_get(&base, "/metrics").await;
            let grown = super::sample(&metrics, &self.series).unwrap_or(0.0) - self.at;
            if grown >= f64::from(by) { Ok(grown) } else { Err(format!("grown by {grown}")) }
        })
        .await
    }
}
