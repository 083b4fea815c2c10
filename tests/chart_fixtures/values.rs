//! The upstream values the fixture comparison cannot show on its own: what the image, pull secrets, the API
//! guards of the ServiceMonitor and the VPA, `namespace`, `tpl` and the token settings render to, and the NOTES
//! that say where upstream's chart drops a value without a word.

use serde_json::{Value, json};

use super::{app_version, common::chart::*, fixtures, path_arg, values_args};

/// Our chart with upstream's values.yaml, a fixture case (or "default") and extra `helm template` args.
fn render(case: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = values_args(case);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    template("rl", "reloader", &args)
}

fn pod(objects: &[Value]) -> &Value {
    &find(objects, "Deployment", Some("rl-reloader"))["spec"]["template"]["spec"]
}

fn image(objects: &[Value]) -> String {
    pod(objects)["containers"][0]["image"].as_str().unwrap_or_default().to_owned()
}

/// The NOTES `helm install --dry-run` prints (they are not part of `helm template`).
fn notes(extra: &[&str]) -> String {
    let chart = chart_dir().display().to_string();
    let values = values_args("default");
    let mut args = vec!["install", "rl", &chart, "--namespace", "reloader", "--dry-run=client"];
    args.extend(values.iter().map(String::as_str));
    args.extend_from_slice(extra);
    let out = helm(&args);
    out.split("NOTES:").nth(1).unwrap_or_else(|| panic!("no NOTES in {out}")).to_owned()
}

#[test]
fn the_image_follows_upstreams_rule() {
    let ours = |repository: &str| format!("{repository}:{}", app_version());
    // The image keys a migrating user sets (tests/chart/our-image.yaml): ours, our version.
    assert_eq!(image(&render("default", &[])), ours("ghcr.io/reloader-rs/reloader"));
    // global.imageRegistry (a mirror): <registry>/<name>.
    assert_eq!(image(&render("image", &[])), ours("registry.internal/reloader-rs/reloader"));
    // Any other image is used as given, with upstream's precedence: registry, then digest, then tag.
    let set = |pairs: &str| render("default", &["--set", pairs]);
    assert_eq!(image(&set("image.repository=my.registry/team/reloader,image.tag=v9")), "my.registry/team/reloader:v9");
    assert_eq!(
        image(&set("image.repository=my.registry/team/reloader,image.tag=v9,image.digest=sha256:abc")),
        "my.registry/team/reloader@sha256:abc"
    );
    assert_eq!(
        image(&set("global.imageRegistry=mirror.local,image.name=team/reloader,image.tag=v9")),
        "mirror.local/team/reloader:v9"
    );
    // This chart's earlier keys still win when set.
    let legacy = set("reloader.deployment.image.name=my.registry/r,reloader.deployment.image.tag=v1");
    assert_eq!(image(&legacy), "my.registry/r:v1");
}

#[test]
fn pull_secrets_accept_plain_names_and_objects() {
    let objects = render("image", &["--set", "reloader.deployment.imagePullSecrets[0].name=deploy-secret"]);
    // upstream's case gives `global.imagePullSecrets: [my-pull-secret]` (plain names).
    assert_eq!(pod(&objects)["imagePullSecrets"], json!([{"name": "my-pull-secret"}, {"name": "deploy-secret"}]));
    let account = find(&objects, "ServiceAccount", Some("rl-reloader"));
    assert_eq!(account["imagePullSecrets"], json!([{"name": "my-pull-secret"}]));
    let objects = render("default", &["--set", "global.imagePullSecrets[0].name=obj,global.imagePullSecrets[1]=plain"]);
    assert_eq!(pod(&objects)["imagePullSecrets"], json!([{"name": "obj"}, {"name": "plain"}]));
}

#[test]
fn servicemonitor_and_vpa_render_only_when_the_cluster_serves_their_api() {
    let kinds = |objects: &[Value]| -> Vec<String> {
        objects.iter().filter_map(|o| o["kind"].as_str().map(str::to_owned)).collect()
    };
    let without = kinds(&render("monitors", &[]));
    assert!(!without.iter().any(|k| k == "ServiceMonitor" || k == "VerticalPodAutoscaler"), "{without:?}");
    assert!(without.iter().any(|k| k == "PodMonitor"), "upstream renders the PodMonitor unguarded: {without:?}");
    let apis = ["--api-versions", "monitoring.coreos.com/v1", "--api-versions", "autoscaling.k8s.io/v1"];
    let with = render("monitors", &apis);
    let monitor = find(&with, "ServiceMonitor", Some("rl-reloader"));
    assert_eq!(monitor["spec"]["jobLabel"], "rl-reloader", "the Prometheus job keeps upstream's name");
    find(&with, "VerticalPodAutoscaler", Some("rl-reloader"));
}

#[test]
fn namespace_tpl_and_service_account_token_follow_upstream() {
    let objects = render("monitors", &["--set", "namespace=elsewhere"]);
    for o in objects.iter().filter(|o| o["metadata"]["namespace"].is_string()) {
        assert_eq!(o["metadata"]["namespace"], "elsewhere", "{} {}", o["kind"], o["metadata"]["name"]);
    }
    let binding = find(&objects, "ClusterRoleBinding", Some("rl-reloader-role-binding"));
    assert_eq!(binding["subjects"][0]["namespace"], "elsewhere");
    // monitors.yaml: deployment.annotations.rel = "{{ .Release.Name }}", through tpl as upstream.
    let deployment = find(&objects, "Deployment", Some("rl-reloader"));
    assert_eq!(deployment["metadata"]["annotations"]["rel"], "rl");
    // serviceAccount.automountServiceAccountToken: false on the account; the pod still mounts its token.
    assert_eq!(find(&objects, "ServiceAccount", Some("rl-reloader"))["automountServiceAccountToken"], json!(false));
    assert_eq!(pod(&objects)["automountServiceAccountToken"], json!(true));
    // upstream's values.yaml has `hostUsers: null`: unset, not rendered.
    assert!(pod(&render("default", &[])).get("hostUsers").is_none());
    assert_eq!(find(&render("replicas0", &[]), "Deployment", None)["spec"]["replicas"], json!(0));
}

#[test]
fn notes_say_where_upstream_drops_a_value() {
    let case = |name: &str| path_arg(fixtures().join(format!("cases/{name}.yaml")));
    let (webhook, monitors) = (case("webhook-only"), case("monitors"));
    // (without the PodMonitor, whose kind a dry run must find in the test cluster)
    let text = notes(&["--values", &webhook, "--values", &monitors, "--set", "reloader.podMonitor.enabled=false"]);
    assert!(text.contains("WARNING: reloader.webhookUrl is set but not passed to the controller"), "{text}");
    assert!(text.contains("serviceMonitor.enabled is true but the cluster does not serve monitoring"), "{text}");
    assert!(text.contains("verticalPodAutoscaler.enabled is true but the cluster does not serve"), "{text}");
    // With custom annotations the flag is rendered (as upstream), and nothing is said.
    let global = case("global");
    assert!(!notes(&["--values", &global]).contains("webhookUrl"));
}
