//! A short subset of the chaos suite (RELIABILITY.md, `make chaos`) on the test cluster: faults 1 (the
//! controller SIGKILLed twice mid-burst, restarted) and 7 (a concurrent writer replacing the Deployments with
//! stale resourceVersions: 409 Conflicts), each with both reload strategies, and 8 (fault 1 with Kruise CloneSets
//! reloaded through `--workload-kind` and Deployments whose pods are evicted), over a small layout — 8
//! Deployments, an 8 s burst, a 5 s quiet period.
//! Every run must end with 0 missed, 0 duplicate and 0 spurious rollouts, every template write classified.

use std::time::Duration;

use bench::{
    chaos::{ChaosOptions, Fault, Strategy, plane::ChaosEnv, report, run::run_fault},
    controller::ControllerSpec,
};

/// One namespace, 2 ConfigMaps + 2 Secrets, each used by 2 Deployments; about 3 updates a second for 8 s.
fn small() -> ChaosOptions {
    ChaosOptions {
        burst: Duration::from_secs(8),
        quiet: Duration::from_secs(5),
        converge_timeout: Duration::from_secs(45),
        namespaces: 1,
        configmaps_per_ns: 2,
        secrets_per_ns: 2,
        workloads_per_resource: 2,
        update_interval: Duration::from_millis(300),
        update_tasks: 1,
        kills: 2,
        ..ChaosOptions::default()
    }
}

async fn chaos(fault: Fault, strategy: Strategy) {
    testenv::install_crypto_provider();
    let out = std::env::temp_dir().join(format!(
        "reloader-chaos-test-{}-{}-{}",
        std::process::id(),
        fault.number(),
        strategy.flag()
    ));
    let env = ChaosEnv::external(testenv::harness::kubeconfig_path(), out.clone()).await.expect("chaos env");
    let command = format!("{} --metrics-addr=127.0.0.1:0", env!("CARGO_BIN_EXE_reloader"));
    let spec = ControllerSpec::parse("ours", &command).expect("command line");
    let r = run_fault(&env, fault, strategy, &small(), &spec).await.expect("chaos run completes");
    let summary = report::markdown(&report::ChaosReport { results: vec![r.clone()], ..Default::default() });
    let f = &r.figures;
    assert!(f.updates >= 10 && f.must_converge > 0 && f.rollouts > 0, "the burst reloaded nothing:\n{summary}");
    assert_eq!((f.missed, f.duplicates, f.spurious, f.blind), (0, 0, 0, 0), "\n{summary}");
    assert!(f.converged, "\n{summary}");
    assert!(r.violations.is_empty() && r.unexpected_exits.is_empty(), "\n{summary}");
    if fault == Fault::ConfiguredKind {
        // 8 Deployments, 4 CloneSets and 2 evict-pods Deployments, each converged on its resource's final content
        // (0 missed).
        assert_eq!(r.workloads, 14, "\n{summary}");
    }
    match fault {
        Fault::ControllerKill => assert_eq!(r.evidence.len(), 2, "two SIGKILLs:\n{summary}"),
        Fault::ConfiguredKind => assert_eq!(r.evidence.len(), 3, "two SIGKILLs, pods evicted:\n{summary}"),
        _ => assert!(r.writer.as_ref().is_some_and(|w| w.conflicts > 0), "409s met:\n{summary}"),
    }
    let _ = std::fs::remove_dir_all(out);
}

#[tokio::test]
async fn controller_sigkill_mid_burst_env_vars() {
    chaos(Fault::ControllerKill, Strategy::EnvVars).await;
}

#[tokio::test]
async fn controller_sigkill_mid_burst_annotations() {
    chaos(Fault::ControllerKill, Strategy::Annotations).await;
}

#[tokio::test]
async fn concurrent_writer_with_409s_env_vars() {
    chaos(Fault::ConflictingWriter, Strategy::EnvVars).await;
}

#[tokio::test]
async fn concurrent_writer_with_409s_annotations() {
    chaos(Fault::ConflictingWriter, Strategy::Annotations).await;
}

#[tokio::test]
async fn configured_kind_with_controller_sigkills_env_vars() {
    chaos(Fault::ConfiguredKind, Strategy::EnvVars).await;
}
