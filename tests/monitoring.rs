//! The alerts and the Grafana dashboard the chart ships (`deploy/helm/reloader/files/`): the rules pass
//! `promtool check rules` and their unit tests (`promtool test rules tests/monitoring/alerts-test.yaml`: each
//! alert fires after its `for` and not before); the chart renders both unchanged; and every metric they query is
//! exposed by the binary, scraped from a controller that reloaded a Deployment on the local control plane.

mod common;

use std::{collections::BTreeSet, path::PathBuf};

use common::{
    chart::{chart_dir, find, repo, run, template, tool},
    *,
};
use serde_json::{Value, json};

fn rules_file() -> PathBuf {
    chart_dir().join("files/prometheus-rules.yaml")
}

fn dashboard_file() -> PathBuf {
    chart_dir().join("files/grafana-dashboard.json")
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rules() -> Value {
    serde_saphyr::from_str(&read(&rules_file())).unwrap_or_else(|e| panic!("rules file: {e}"))
}

fn dashboard() -> Value {
    serde_json::from_str(&read(&dashboard_file())).unwrap_or_else(|e| panic!("dashboard: {e}"))
}

/// Every PromQL expression of the alert rules and the dashboard (panels and template variables).
fn expressions() -> Vec<String> {
    let mut exprs: Vec<String> = rules()["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["expr"].as_str().map(str::to_owned))
        .collect();
    let board = dashboard();
    for panel in board["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.extend(target["expr"].as_str().map(str::to_owned));
        }
    }
    for variable in board["templating"]["list"].as_array().into_iter().flatten() {
        exprs.extend(variable["query"]["query"].as_str().map(str::to_owned));
    }
    exprs
}

/// The metric names an expression selects: identifiers left once label matchers (`{…}`), ranges (`[…]`),
/// grouping clauses (`by (…)`) and strings are removed, and that are neither functions nor keywords. Histogram
/// series keep their `_bucket` suffix (that is the name in the exposition).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let strip = |re: &str, text: &str| regex::Regex::new(re).expect("regex").replace_all(text, " ").into_owned();
    let mut text = strip(r#""[^"]*""#, expr);
    for re in [r"\{[^}]*\}", r"\[[^\]]*\]", r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"] {
        text = strip(re, &text);
    }
    // label_values(<selector>, <label>): the label is not a metric.
    text = strip(r",\s*[a-zA-Z_]+\s*\)", &text);
    let keywords = ["and", "or", "unless", "bool", "offset", "by", "without"];
    regex::Regex::new(r"[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?")
        .expect("regex")
        .find_iter(&text)
        .map(|m| m.as_str())
        .filter(|t| !t.ends_with('(') && !keywords.contains(t))
        .map(str::to_owned)
        .collect()
}

#[test]
fn metric_names_are_found_in_expressions() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le, verb) (rate(rest_client_request_duration_seconds_bucket{job=~"$job"}[$__rate_interval]))) * 1000"#,
    );
    assert_eq!(names, BTreeSet::from(["rest_client_request_duration_seconds_bucket".to_owned()]));
    let names = metric_names(r#"label_values(reloader_ready{job=~"$job"}, instance)"#);
    assert_eq!(names, BTreeSet::from(["reloader_ready".to_owned()]));
    let names = metric_names("reloader_ready == 0 and on (pod) up > bool 1");
    assert_eq!(names, BTreeSet::from(["reloader_ready".to_owned(), "up".to_owned()]));
}

#[test]
fn alert_rules_pass_promtool_check_and_their_unit_tests() {
    let promtool = tool("promtool");
    let check = run(&promtool, &["check", "rules", rules_file().to_str().unwrap_or_default()]);
    let out = check.unwrap_or_else(|e| panic!("{e}"));
    let count = rules()["groups"][0]["rules"].as_array().map_or(0, Vec::len);
    assert!(out.contains(&format!("SUCCESS: {count} rules found")), "{out}");
    // Rule files named in the test file are relative to it.
    let test_file = repo().join("tests/monitoring/alerts-test.yaml");
    let out = std::process::Command::new(&promtool)
        .args(["test", "rules", test_file.to_str().unwrap_or_default()])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", promtool.display()));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("SUCCESS"), "promtool test rules:\n{text}");
    // Every alert has a unit test.
    let tests = read(&test_file);
    for rule in rules()["groups"][0]["rules"].as_array().into_iter().flatten() {
        let name = rule["alert"].as_str().unwrap_or_default();
        assert!(tests.contains(&format!("alertname: {name}\n")), "no promtool test for {name}");
    }
}

#[test]
fn the_chart_renders_the_rules_and_the_dashboard_unchanged() {
    let objects = template(
        "rl",
        "monitoring",
        &[
            "--set=reloader.prometheusRule.enabled=true",
            "--set=reloader.prometheusRule.additionalRuleLabels.team=platform",
            "--set=reloader.grafanaDashboard.enabled=true",
        ],
    );
    let rule = find(&objects, "PrometheusRule", Some("rl-reloader"));
    let mut expected = rules()["groups"].clone();
    for group in expected.as_array_mut().into_iter().flatten() {
        for r in group["rules"].as_array_mut().into_iter().flatten() {
            r["labels"]["team"] = json!("platform");
        }
    }
    assert_eq!(rule["spec"]["groups"], expected, "the PrometheusRule's groups are the rules file's, labels added");
    let board = find(&objects, "ConfigMap", Some("rl-reloader-dashboard"));
    assert_eq!(board["metadata"]["labels"]["grafana_dashboard"], "1", "{board}");
    let json: Value = serde_json::from_str(board["data"]["reloader.json"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("dashboard in the ConfigMap: {e}"));
    assert_eq!(json, dashboard());

    let defaults = template("rl", "monitoring", &[]);
    assert!(
        !defaults.iter().any(|o| o["kind"] == "PrometheusRule" || o["metadata"]["name"] == "rl-reloader-dashboard"),
        "both are opt-in"
    );
}

#[tokio::test]
async fn every_metric_the_dashboard_and_the_alerts_query_is_exposed() {
    let names: BTreeSet<String> = expressions().iter().flat_map(|e| metric_names(e)).collect();
    assert!(names.len() >= 20, "too few metric names found: {names:?}");

    let ns = TestNamespace::create("monitoring").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    // The budget's gauges exist only with a budget; one reload fills the per-kind series.
    let reloader = Reloader::start(&ns.name, &["--max-concurrent-rollouts=2"]).await;
    let base = reloader.http_base().await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let (status, metrics) = http_get(&base, "/metrics").await;
    assert_eq!(status, 200, "{metrics}");

    let exposed: BTreeSet<&str> =
        metrics.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split(['{', ' ']).next()).collect();
    let missing: Vec<&String> = names.iter().filter(|n| !exposed.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "queried but not exposed: {missing:?}\n{metrics}");
}
