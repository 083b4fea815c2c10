//! The binary's command line as a user meets it: invalid input exits 2 naming the flag and the accepted
//! values; env vars set flags; `--version` names the commit; JSON logs carry the reload's fields.

mod common;

use std::process::Command;

use common::*;
use serde_json::json;

fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_reloader"))
        .args(args)
        .envs(env.iter().copied())
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("run reloader");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn invalid_flag_values_exit_2_naming_the_flag_and_accepted_values() {
    let (code, err) = run(&["--reload-strategy=restart"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--reload-strategy") && err.contains("env-vars") && err.contains("annotations"), "{err}");

    let (code, err) = run(&["--log-level=loud"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--log-level") && err.contains("warning"), "{err}");

    let (code, err) = run(&["--auto-reload-all=perhaps"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--auto-reload-all"), "{err}");
}

#[test]
fn version_names_the_release_and_the_commit_built() {
    let out = Command::new(env!("CARGO_BIN_EXE_reloader")).arg("--version").output().expect("run reloader");
    assert!(out.status.success(), "{out:?}");
    let (commit, time) = built_commit();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("reloader {} (commit {commit}, {time})", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn unknown_flags_exit_2() {
    let (code, err) = run(&["--no-such-flag"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--no-such-flag"), "{err}");
}

#[test]
fn env_vars_are_validated_like_flags() {
    let (code, err) = run(&[], &[("RELOAD_STRATEGY", "bogus")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bogus") && err.contains("env-vars"), "{err}");
}

#[tokio::test]
async fn json_logs_carry_namespace_workload_kind_config_reason_and_latency() {
    let ns = TestNamespace::create("json-logs").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    // The log format comes from its env var here, as a chart's `env` would set it.
    let reloader = Reloader::start_with_env(&ns.name, &[], &[("LOG_FORMAT", "json")]).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    let line = reloader.wait_log("Changes detected").await;
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    assert_eq!(v["namespace"], ns.name.as_str());
    assert_eq!(v["workload"], "web");
    assert_eq!(v["kind"], "Deployment");
    assert_eq!(v["config"], "cfg");
    assert_eq!(v["reason"], "auto: referenced via envFrom");
    assert!(v["latency_ms"].as_f64().is_some_and(|l| l >= 0.0), "{v}");
    // upstream's (logrus) field names, so log pipelines written for upstream keep parsing.
    assert_eq!(v["level"], "info");
    assert!(v["msg"].as_str().is_some_and(|m| m.starts_with("Changes detected in 'cfg'")), "{v}");
    assert!(v["time"].as_str().is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()), "{v}");
}

#[test]
fn scoping_flags_are_validated_at_startup_with_upstreams_messages() {
    let (code, err) = run(&["--resources-to-ignore=configmaps,secrets"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'resources-to-ignore' only accepts 'configmaps' or 'secrets', not both"), "{err}");

    let (code, err) = run(&[], &[("IGNORED_WORKLOAD_TYPES", "jobs,pods")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'ignored-workload-types' accepts 'jobs', 'cronjobs', or both, not 'pods'"), "{err}");

    let (code, err) = run(&["--namespace-selector=team=a=b"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--namespace-selector") && err.contains("team=a=b"), "{err}");

    let (code, err) = run(&["--coalesce-window=soon"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--coalesce-window"), "{err}");
}

#[tokio::test]
async fn an_upstream_command_line_starts_and_serves_on_ipv6_and_ipv4() {
    let ns = TestNamespace::create("upstream-cli").await;
    // Values after a space and a stray argument (valid for upstream's cobra), Go's `:port` listen address.
    let args = ["--metrics-addr=:0", "--reload-on-create", "true", "--reload-on-delete", "true", "leftover"];
    let reloader = Reloader::start(&ns.name, &args).await;
    let ignored = reloader.wait_log("ignoring positional arguments").await;
    assert!(ignored.contains("leftover"), "{ignored}");
    let serving = reloader.wait_log("serving /metrics").await;
    let port = serving.rsplit("]:").next().and_then(|p| p.split_whitespace().next()).unwrap_or_default();
    assert!(serving.contains("[::]:") && port.parse::<u16>().is_ok(), "{serving}");
    for host in ["127.0.0.1", "[::1]"] {
        let (status, body) = http_get(&format!("http://{host}:{port}"), "/healthz").await;
        assert_eq!((status, body.as_str()), (200, "ok"), "{host}");
    }
}

/// Whether a running process's environment holds `GLIBC_TUNABLES=<value>`. glibc's loader parses the variable in
/// place, so `/proc/<pid>/environ` may show its `:` separators as NULs.
fn has_tunables(pid: u32, value: &str) -> bool {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).expect("read environ");
    let entry = format!("\0GLIBC_TUNABLES={value}\0");
    let parsed = entry.replace(':', "\0");
    let holds = |needle: &str| raw.windows(needle.len()).any(|w| w == needle.as_bytes());
    holds(&entry) || holds(&parsed)
}

#[tokio::test]
async fn the_controller_runs_with_the_allocator_tunables_and_keeps_a_users_own() {
    let ns = TestNamespace::create("tunables").await;
    // Re-executed once with them (src/allocator.rs): the same process, started once.
    let tuned = Reloader::start(&ns.name, &[]).await;
    assert!(has_tunables(tuned.pid(), reloader::allocator::TUNABLES));
    assert_eq!(tuned.count_log("Starting Reloader"), 1, "{:?}", tuned.logs());
    drop(tuned);
    let users = Reloader::start_with_env(&ns.name, &[], &[("GLIBC_TUNABLES", "glibc.malloc.arena_max=1")]).await;
    assert!(has_tunables(users.pid(), "glibc.malloc.arena_max=1"));
    assert!(!has_tunables(users.pid(), reloader::allocator::TUNABLES));
}

#[test]
fn every_visible_flag_has_a_row_in_the_readmes_flag_tables() {
    use clap::CommandFactory;
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    // The flags in the first cell of a table row: "| `--a`, `--b` (also `--c`) | …" (`*`: any part of a name).
    let documented: Vec<String> = readme
        .lines()
        .filter(|l| l.starts_with("| `--"))
        .flat_map(|l| l.split(" |").next().unwrap_or_default().split('`').map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|token| token.strip_prefix("--").map(str::to_owned))
        .collect();
    let covers = |pattern: &str, name: &str| match pattern.split_once('*') {
        Some((head, tail)) => name.starts_with(head) && name.ends_with(tail),
        None => pattern == name,
    };
    let command = reloader::config::Args::command();
    let missing: Vec<&str> = command
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long())
        .filter(|long| !documented.iter().any(|p| covers(p, long)))
        .collect();
    assert!(missing.is_empty(), "flags without a README row: {missing:?}");
}
