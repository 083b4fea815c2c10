//! Flag parsing and validation.

use super::*;
use crate::rules::annotations::AnnotationKeys;

fn parse(args: &[&str]) -> Result<Args, clap::Error> {
    Args::try_parse_from(std::iter::once("reloader").chain(args.iter().copied()))
}

#[test]
fn defaults_match_upstream() {
    let a = parse(&[]).expect("defaults parse");
    assert!(!a.auto_reload_all);
    assert_eq!(a.reload_strategy, ReloadStrategy::EnvVars);
    assert_eq!(a.log_level, LogLevel::Info);
    assert_eq!(a.annotations.keys(), AnnotationKeys::default());
}

#[test]
fn bool_flags_take_bare_or_explicit_values() {
    assert!(parse(&["--auto-reload-all"]).expect("bare").auto_reload_all);
    assert!(parse(&["--auto-reload-all=true"]).expect("=true").auto_reload_all);
    assert!(!parse(&["--auto-reload-all=false"]).expect("=false").auto_reload_all);
    let err = parse(&["--auto-reload-all=maybe"]).expect_err("invalid bool");
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("--auto-reload-all"), "{err}");
}

#[test]
fn invalid_strategy_exits_2_naming_flag_and_values() {
    let err = parse(&["--reload-strategy=rolling"]).expect_err("invalid");
    assert_eq!(err.exit_code(), 2);
    let text = err.to_string();
    assert!(text.contains("--reload-strategy") && text.contains("env-vars") && text.contains("annotations"), "{text}");
}

#[test]
fn unknown_flags_exit_2() {
    assert_eq!(parse(&["--no-such-flag"]).expect_err("unknown").exit_code(), 2);
}

#[test]
fn log_flags_accept_upstream_spellings() {
    let a = parse(&["--log-format=json", "--log-level=warning"]).expect("parse");
    assert_eq!((a.log_format, a.log_level), (LogFormat::Json, LogLevel::Warning));
    assert_eq!(parse(&["--log-format="]).expect("empty format").log_format, LogFormat::Text);
    assert_eq!(parse(&["--log-level=warn"]).expect("warn").log_level, LogLevel::Warning);
    assert_eq!(parse(&["--log-level=loud"]).expect_err("bad level").exit_code(), 2);
}

#[test]
fn annotation_keys_are_overridable() {
    let a = parse(&["--auto-annotation=example.com/auto", "--configmap-annotation=example.com/cm"]).expect("parse");
    let keys = a.annotations.keys();
    assert_eq!(keys.auto, "example.com/auto");
    assert_eq!(keys.named[0], "example.com/cm");
}

#[test]
fn resources_to_ignore_accepts_one_type_case_insensitively_with_upstreams_messages() {
    let s = parse(&["--resources-to-ignore=ConfigMaps"]).expect("parse").scoping().expect("valid");
    assert!(!s.configmaps && s.secrets);
    let e = parse(&["--resources-to-ignore=configmaps,secrets"]).expect("parse").scoping().expect_err("both");
    assert_eq!(e.to_string(), "'resources-to-ignore' only accepts 'configmaps' or 'secrets', not both");
    let e = parse(&["--resources-to-ignore=pods"]).expect("parse").scoping().expect_err("unknown");
    assert_eq!(e.to_string(), "'resources-to-ignore' only accepts 'configmaps' or 'secrets', not 'pods'");
}

#[test]
fn ignored_workload_types_are_validated_not_silently_skipped() {
    let s = parse(&["--ignored-workload-types=jobs,cronjobs"]).expect("parse").scoping().expect("valid");
    assert!(!s.jobs && !s.cronjobs);
    let e = parse(&["--ignored-workload-types=deployments"]).expect("parse").scoping().expect_err("invalid");
    assert_eq!(e.to_string(), "'ignored-workload-types' accepts 'jobs', 'cronjobs', or both, not 'deployments'");
}

#[test]
fn selectors_are_normalised_and_namespace_scoping_flags_need_global_mode() {
    let s = parse(&["--namespace-selector=\"team:a,env=prod\"", "--resource-label-selector=reload:*"])
        .expect("parse")
        .scoping()
        .expect("valid");
    assert_eq!(s.namespace_selector.as_deref(), Some("team=a,env=prod"));
    assert_eq!(s.resource_label_selector.as_deref(), Some("reload"));
    let s = parse(&["--namespaces=a", "--namespace-selector=x=y", "--namespaces-to-ignore=b"])
        .expect("parse")
        .scoping()
        .expect("valid");
    assert_eq!((s.namespace_selector, s.namespaces_to_ignore), (None, vec![]));
    let e = parse(&["--namespace-selector=a=b=c"]).expect("parse").scoping().expect_err("invalid");
    assert!(e.to_string().starts_with("--namespace-selector: invalid selector"), "{e}");
}

#[test]
fn leader_election_is_validated_like_upstream_pr_1206() {
    let ha = |extra: &[&str]| {
        let mut args = vec!["--enable-ha", "--pod-name=p", "--pod-namespace=ns"];
        args.extend_from_slice(extra);
        parse(&args).expect("parse").leader.validate()
    };
    let ok = ha(&[]).expect("defaults are valid").expect("enabled");
    assert_eq!((ok.lease_name.as_str(), ok.namespace.as_str(), ok.lease_seconds), ("stakater-reloader-lock", "ns", 15));
    assert_eq!(
        ha(&["--leader-election-lease-duration=1500ms"]),
        Err("--leader-election-lease-duration must be a whole number of seconds".into())
    );
    assert_eq!(
        ha(&["--leader-election-lease-duration=0s"]),
        Err("--leader-election-lease-duration must be at least 1s".into())
    );
    assert_eq!(
        ha(&["--leader-election-lease-duration=10s"]),
        Err("--leader-election-lease-duration must be greater than --leader-election-renew-deadline".into())
    );
    assert!(ha(&["--leader-election-renew-deadline=2s"]).expect_err("renew vs retry").contains("jitter factor (1.2)"));
    assert_eq!(
        parse(&["--enable-ha", "--pod-namespace=ns"]).expect("parse").leader.validate(),
        Err("POD_NAME not set, cannot run in HA mode without POD_NAME set".into())
    );
    assert_eq!(parse(&[]).expect("parse").leader.validate(), Ok(None));
}

#[test]
fn namespaces_win_over_kubernetes_namespace() {
    let a = parse(&["--namespaces=a, b", "--namespaces=c", "--kubernetes-namespace=x"]).expect("parse");
    assert_eq!(a.watch_scope(), WatchScope::Namespaces(vec!["a".into(), "b".into(), "c".into()]));
    let a = parse(&["--kubernetes-namespace=x"]).expect("parse");
    assert_eq!(a.watch_scope(), WatchScope::Namespaces(vec!["x".into()]));
    assert_eq!(parse(&[]).expect("parse").watch_scope(), WatchScope::All);
}

#[test]
fn upstream_command_lines_parse_unchanged() {
    // Upstream's string flags take their value after a space; cobra ignores stray positional arguments.
    let a = parse(&[
        "--reload-on-create",
        "true",
        "--reload-on-delete",
        "true",
        "--is-Argo-Rollouts",
        "true",
        "--enable-ha",
        "true",
        "leftover",
        "--log-level=INFO",
        "--log-format=JSON",
    ])
    .expect("upstream command line");
    assert!(a.reload_on_create && a.reload_on_delete && a.is_argo_rollouts && a.leader.enable_ha);
    assert_eq!(a.ignored_arguments, ["leftover"]);
    assert_eq!((a.log_level, a.log_format), (LogLevel::Info, LogFormat::Json));
    assert!(!parse(&["--reload-on-create", "false"]).expect("false").reload_on_create);
    let s = parse(&["--ignored-workload-types=Jobs"]).expect("parse").scoping().expect("upstream spelling");
    assert!(!s.jobs && s.cronjobs);
    assert!(matches!(parse(&["explain", "deployment/web"]).expect("explain").command, Some(Command::Explain(_))));
}

#[test]
fn sync_after_restart_acts_only_with_reload_on_create_as_upstream() {
    let alone = crate::controller::Settings::from_args(&parse(&["--sync-after-restart"]).expect("parse"));
    assert!(!alone.expect("valid").sync_after_restart);
    let both = parse(&["--sync-after-restart", "--reload-on-create=true"]).expect("parse");
    assert!(crate::controller::Settings::from_args(&both).expect("valid").sync_after_restart);
}

#[test]
fn the_workload_kinds_watched_are_the_ones_the_flags_ask_for() {
    use crate::controller::Source;
    use crate::rules::{keys::WorkloadKind as K, resource::ConfigKind};
    let settings = |args: &[&str]| crate::controller::Settings::from_args(&parse(args).expect("parse")).expect("valid");
    let default = settings(&[]);
    let core = [K::Deployment, K::StatefulSet, K::DaemonSet, K::CronJob, K::Job].map(Source::Workload);
    let configs = [Source::Config(ConfigKind::ConfigMap), Source::Config(ConfigKind::Secret)];
    assert_eq!(default.watch.sources, [&configs[..], &core[..]].concat());
    let optional = |s: &crate::controller::Settings| {
        s.optional.iter().map(|o| (o.sources.to_vec(), o.group_version, o.plural, o.configured)).collect::<Vec<_>>()
    };
    let dc = (vec![Source::Workload(K::DeploymentConfig)], "apps.openshift.io/v1", "deploymentconfigs", None);
    assert_eq!(optional(&default), std::slice::from_ref(&dc), "--is-openshift is on unless false");
    let fewer = settings(&["--ignored-workload-types=jobs,cronjobs", "--is-Argo-Rollouts", "--is-openshift=false"]);
    assert_eq!(fewer.watch.sources, [&configs[..], &core[..3]].concat());
    let rollouts = (vec![Source::Workload(K::Rollout)], "argoproj.io/v1alpha1", "rollouts", None);
    assert_eq!(optional(&fewer), std::slice::from_ref(&rollouts));
    assert_eq!(optional(&settings(&["--is-Argo-Rollouts"])), [rollouts, dc]);
}

#[test]
fn alert_on_reload_tolerates_upstreams_non_boolean_values() {
    let off = parse(&["--alert-on-reload=on", "--alert-webhook-url=http://x"]).expect("accepted, as upstream");
    assert!(off.alerts.alerts().is_none(), "not \"true\": alerts stay off, as upstream");
    let on = parse(&["--alert-on-reload", "--alert-webhook-url=http://x"]).expect("bare");
    assert!(on.alerts.alerts().is_some());
}

#[test]
fn a_repeated_flag_takes_its_last_value_and_lists_still_accumulate() {
    let a = parse(&["--reload-strategy=annotations", "--reload-strategy=env-vars", "--namespaces=a", "--namespaces=b"])
        .expect("repeated flags, as pflag accepts");
    assert_eq!(a.reload_strategy, ReloadStrategy::EnvVars);
    assert_eq!(a.namespaces, ["a", "b"]);
}

#[test]
fn the_write_rate_must_be_a_finite_number_not_below_zero() {
    assert_eq!(parse(&[]).expect("defaults").kube_api_qps, 0.0, "no ceiling unless set (issue 39)");
    assert_eq!(parse(&["--kube-api-qps=12.5"]).expect("valid").kube_api_qps, 12.5);
    assert_eq!(parse(&["--kube-api-qps=0"]).expect("0 disables").kube_api_qps, 0.0);
    for bad in ["-1", "NaN", "inf", "fast"] {
        let e = parse(&[&format!("--kube-api-qps={bad}")]).expect_err(bad);
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{bad}");
        let text = e.to_string();
        assert!(text.contains("--kube-api-qps") && text.contains("writes per second, a number ≥ 0"), "{bad}: {text}");
    }
}

/// Env vars upstream reads (v1's, and v2's flag names upper-cased with `-` → `_`, reloader-behaviour.md §2).
const UPSTREAM_ENV: &[&str] = &[
    "ALERT_ADDITIONAL_INFO",
    "ALERT_ON_RELOAD",
    "ALERT_PROXY",
    "ALERT_SINK",
    "ALERT_STRUCTURED",
    "ALERT_WEBHOOK_PROXY",
    "ALERT_WEBHOOK_URL",
    "AUTO_ANNOTATION",
    "AUTO_RELOAD_ALL",
    "AUTO_SEARCH_ANNOTATION",
    "CONFIGMAP_ANNOTATION",
    "CONFIGMAP_AUTO_ANNOTATION",
    "CONFIGMAP_EXCLUDE_ANNOTATION",
    "ENABLE_CSI_INTEGRATION",
    "ENABLE_HA",
    "ENABLE_PPROF",
    "HEALTH_ADDR",
    "IGNORED_WORKLOAD_TYPES",
    "IGNORE_ANNOTATION",
    "IS_ARGO_ROLLOUTS",
    "IS_OPENSHIFT",
    "KUBERNETES_NAMESPACE",
    "LEADER_ELECTION_ID",
    "LEADER_ELECTION_LEASE_DURATION",
    "LEADER_ELECTION_NAMESPACE",
    "LEADER_ELECTION_RELEASE_ON_CANCEL",
    "LEADER_ELECTION_RENEW_DEADLINE",
    "LEADER_ELECTION_RETRY_PERIOD",
    "LOG_FORMAT",
    "LOG_LEVEL",
    "METRICS_ADDR",
    "METRICS_COUNT_BY_NAMESPACE",
    "NAMESPACES",
    "NAMESPACES_TO_IGNORE",
    "NAMESPACE_SELECTOR",
    "PAUSE_DEPLOYMENT_ANNOTATION",
    "PAUSE_DEPLOYMENT_TIME_ANNOTATION",
    "POD_NAME",
    "POD_NAMESPACE",
    "PPROF_ADDR",
    "RELOADER_DEPLOYMENT_NAME",
    "RELOADER_NAMESPACE",
    "RELOAD_ON_CREATE",
    "RELOAD_ON_DELETE",
    "RELOAD_STRATEGY",
    "RESOURCES_TO_IGNORE",
    "RESOURCE_LABEL_SELECTOR",
    "SEARCH_MATCH_ANNOTATION",
    "SECRETPROVIDERCLASS_ANNOTATION",
    "SECRETPROVIDERCLASS_AUTO_ANNOTATION",
    "SECRETPROVIDERCLASS_EXCLUDE_ANNOTATION",
    "SECRET_ANNOTATION",
    "SECRET_AUTO_ANNOTATION",
    "SECRET_EXCLUDE_ANNOTATION",
    "SYNC_AFTER_RESTART",
    "WEBHOOK_URL",
];

#[test]
fn every_flag_has_an_env_var_upstreams_name_or_a_reloader_prefixed_one() {
    use clap::CommandFactory;
    let command = Args::command();
    for arg in command.get_arguments().filter(|a| a.get_long().is_some_and(|l| l != "help" && l != "version")) {
        let long = arg.get_long().unwrap_or_default();
        let env = arg.get_env().and_then(|e| e.to_str()).unwrap_or_else(|| panic!("--{long} has no env var"));
        assert!(
            UPSTREAM_ENV.contains(&env) || env.starts_with("RELOADER_"),
            "--{long} reads {env}: flags this project adds read RELOADER_* (README, Flags)"
        );
    }
}
