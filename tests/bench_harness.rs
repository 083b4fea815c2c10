//! The benchmark harness end to end (BENCHMARKS.md): a tiny S1 — two ConfigMap/Deployment pairs updated in
//! turn for two seconds — against the real binary, with every reload accounted for exactly.

use std::time::Duration;

use bench::{
    controller::ControllerSpec,
    env::BenchEnv,
    scenarios::{
        Layout, Plan, ScenarioId,
        run::{RunOptions, run},
    },
};

#[tokio::test]
async fn bench_accounts_for_every_reload_of_a_small_burst_exactly() {
    testenv::install_crypto_provider();
    let out = std::env::temp_dir().join(format!("reloader-bench-test-{}", std::process::id()));
    let env = BenchEnv::external(testenv::harness::kubeconfig_path(), out.clone()).await.expect("bench env");
    // Each ConfigMap changes every 500 ms: far slower than a reload, so none can be superseded.
    let plan = Plan::RoundRobin { interval: Duration::from_millis(250), targets: vec![0, 1] };
    let layout = Layout::pairs(ScenarioId::S1, "S1, two pairs", 1, 2, 0, plan);
    let command = format!("{} --coalesce-window=0s --metrics-addr=127.0.0.1:0", env!("CARGO_BIN_EXE_reloader"));
    let spec = ControllerSpec::parse("ours", &command).expect("command line");
    let opts = RunOptions {
        duration: Duration::from_secs(2),
        // The suite's cluster is shared by concurrent tests: the controller must stay in its namespace.
        scope_single_namespace: true,
        settle_timeout: Duration::from_secs(20),
        ready_timeout: Duration::from_secs(60),
        wait_for_cleanup: false,
    };
    let r = run(&env, &layout, &spec, &opts).await.expect("scenario runs");
    let a = &r.actions;
    // A tick every 250 ms for 2 s: 8 updates (a 9th if the last tick lands on the deadline).
    assert!((8..=9).contains(&a.updates), "updates: {a:?}");
    assert_eq!(a.expected, a.updates, "one reload per update: {a:?}");
    assert_eq!(a.observed, a.expected, "{a:?}");
    assert_eq!((a.superseded, a.missed, a.duplicates, a.unexpected, a.rolled_unchanged), (0, 0, 0, 0, 0), "{a:?}");
    assert_eq!(a.rollouts, a.observed, "one template change per reload: {a:?}");
    assert!(r.exact && r.correct);
    assert_eq!(r.latency.count, a.observed);
    assert_eq!(r.failed_writes, 0);
    // No audit log on an external cluster: API counts are reported as unavailable, not as zeros.
    assert_eq!(r.api, None);
    assert_eq!(r.writes_per_reload, None);
    assert!(r.process.rss_peak_mib > 1.0, "RSS sampled from /proc: {:?}", r.process);
    assert_eq!(r.startup_to_ready_ms.len(), 1);
    let _ = std::fs::remove_dir_all(out);
}
