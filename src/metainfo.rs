//! upstream v1's meta-info ConfigMap: when `RELOADER_NAMESPACE` is set (the chart sets it), the controller
//! publishes `reloader-meta-info` there, labelled `reloader.stakater.com/meta-info: reloader`, with the JSON
//! documents `buildInfo`, `reloaderOptions` (the options in effect, upstream's keys and order) and
//! `deploymentInfo` (the Deployment running it). One server-side apply at start, by every replica, as upstream.
//! The webhook URL is published as `<set>` rather than verbatim: it may embed a token.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, Patch, PatchParams},
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::{
    build_info,
    config::{Args, LogFormat},
    constants::{FIELD_MANAGER, annotation::ROLLOUT_STRATEGY, meta_info},
};

/// `buildInfo` (upstream's fields; there is no Go toolchain, so `goVersion` is empty; the rest from
/// [`build_info`]).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BuildInfo {
    go_version: &'static str,
    release_version: &'static str,
    commit_hash: &'static str,
    commit_time: &'static str,
    edition: &'static str,
}

/// `reloaderOptions`, in upstream v1's field order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReloaderOptions<'a> {
    auto_reload_all: bool,
    configmap_update_on_change_annotation: &'a str,
    secret_update_on_change_annotation: &'a str,
    reloader_auto_annotation: &'a str,
    ignore_resource_annotation: &'a str,
    configmap_reloader_auto_annotation: &'a str,
    secret_reloader_auto_annotation: &'a str,
    configmap_exclude_reloader_annotation: &'a str,
    secret_exclude_reloader_annotation: &'a str,
    auto_search_annotation: &'a str,
    search_match_annotation: &'a str,
    rollout_strategy_annotation: &'a str,
    pause_deployment_annotation: &'a str,
    pause_deployment_time_annotation: &'a str,
    log_format: &'a str,
    log_level: String,
    is_argo_rollouts: bool,
    reload_strategy: String,
    reload_on_create: bool,
    reload_on_delete: bool,
    sync_after_restart: bool,
    #[serde(rename = "enableHA")]
    enable_ha: bool,
    webhook_url: &'a str,
    resources_to_ignore: &'a [String],
    namespace_selectors: &'a [String],
    resource_selectors: &'a [String],
    namespaces_to_ignore: &'a [String],
}

/// `deploymentInfo`: the fields of Go's metav1.ObjectMeta that are set, in its order; an unset
/// creationTimestamp marshals as null there.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeploymentInfo<'a> {
    name: &'a str,
    namespace: &'a str,
    creation_timestamp: Option<&'a str>,
}

fn value_name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value().map(|p| p.get_name().to_owned()).unwrap_or_default()
}

/// The ConfigMap to publish, or `None` when `RELOADER_NAMESPACE` is not set.
pub fn configmap(args: &Args) -> Option<Value> {
    let namespace = args.meta_info.namespace.as_str();
    if namespace.is_empty() {
        return None;
    }
    let a = &args.annotations;
    let options = ReloaderOptions {
        auto_reload_all: args.auto_reload_all,
        configmap_update_on_change_annotation: &a.configmap_annotation,
        secret_update_on_change_annotation: &a.secret_annotation,
        reloader_auto_annotation: &a.auto_annotation,
        ignore_resource_annotation: &a.ignore_annotation,
        configmap_reloader_auto_annotation: &a.configmap_auto_annotation,
        secret_reloader_auto_annotation: &a.secret_auto_annotation,
        configmap_exclude_reloader_annotation: &a.configmap_exclude_annotation,
        secret_exclude_reloader_annotation: &a.secret_exclude_annotation,
        auto_search_annotation: &a.auto_search_annotation,
        search_match_annotation: &a.search_match_annotation,
        rollout_strategy_annotation: ROLLOUT_STRATEGY,
        pause_deployment_annotation: &a.pause_deployment_annotation,
        pause_deployment_time_annotation: &a.pause_deployment_time_annotation,
        log_format: match args.log_format {
            LogFormat::Text => "",
            LogFormat::Json => "json",
        },
        log_level: value_name(args.log_level),
        is_argo_rollouts: args.is_argo_rollouts,
        reload_strategy: value_name(args.reload_strategy),
        reload_on_create: args.reload_on_create,
        reload_on_delete: args.reload_on_delete,
        sync_after_restart: args.sync_after_restart,
        enable_ha: args.leader.enable_ha,
        webhook_url: if args.alerts.webhook_url.is_empty() { "" } else { "<set>" },
        resources_to_ignore: &args.resources_to_ignore,
        namespace_selectors: &args.namespace_selector,
        resource_selectors: &args.resource_label_selector,
        namespaces_to_ignore: &args.namespaces_to_ignore,
    };
    let build = BuildInfo {
        go_version: "",
        release_version: build_info::VERSION,
        commit_hash: build_info::COMMIT,
        commit_time: build_info::COMMIT_TIME,
        edition: meta_info::EDITION,
    };
    let deployment = DeploymentInfo { name: &args.meta_info.deployment_name, namespace, creation_timestamp: None };
    Some(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": meta_info::CONFIGMAP_NAME, "namespace": namespace,
                     "labels": {meta_info::LABEL.0: meta_info::LABEL.1}},
        "data": {
            "buildInfo": serde_json::to_string(&build).unwrap_or_default(),
            "reloaderOptions": serde_json::to_string(&options).unwrap_or_default(),
            "deploymentInfo": serde_json::to_string(&deployment).unwrap_or_default(),
        }
    }))
}

/// Publishes the ConfigMap (server-side apply; creates or replaces it). Failures are logged, not fatal
/// (upstream v1 logs and carries on).
pub async fn publish(client: &Client, args: &Args) {
    let Some(cm) = configmap(args) else {
        tracing::info!("RELOADER_NAMESPACE is not set, skipping meta info configmap creation");
        return;
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &args.meta_info.namespace, &ApiResource::erase::<ConfigMap>(&()));
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api.patch(meta_info::CONFIGMAP_NAME, &params, &Patch::Apply(&cm)).await {
        Ok(_) => tracing::info!(namespace = %args.meta_info.namespace, "published meta info configmap"),
        Err(e) => tracing::warn!(namespace = %args.meta_info.namespace, "cannot publish meta info configmap: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn nothing_is_published_without_reloader_namespace() {
        let args = Args::try_parse_from(["reloader"]).expect("args");
        assert_eq!(args.meta_info.namespace, "", "the test environment must not set RELOADER_NAMESPACE");
        assert!(configmap(&args).is_none());
    }

    #[test]
    fn the_configmap_carries_upstreams_documents() {
        let args = Args::try_parse_from([
            "reloader",
            "--reloader-namespace=ops",
            "--reloader-deployment-name=reloader",
            "--auto-reload-all=true",
            "--reload-strategy=annotations",
            "--log-format=json",
            "--resources-to-ignore=secrets",
            "--namespace-selector=team=a",
            "--webhook-url=https://hooks.example.com/T0/secret-token",
        ])
        .expect("args");
        let cm = configmap(&args).expect("published");
        assert_eq!(
            cm["metadata"],
            json!({"name": "reloader-meta-info", "namespace": "ops", "labels": {"reloader.stakater.com/meta-info": "reloader"}})
        );
        assert_eq!(cm["data"]["deploymentInfo"], r#"{"name":"reloader","namespace":"ops","creationTimestamp":null}"#);
        assert_eq!(
            cm["data"]["buildInfo"],
            format!(
                r#"{{"goVersion":"","releaseVersion":"{}","commitHash":"{}","commitTime":"{}","edition":"oss"}}"#,
                build_info::VERSION,
                build_info::COMMIT,
                build_info::COMMIT_TIME
            )
        );
        assert_eq!(
            cm["data"]["reloaderOptions"],
            concat!(
                r#"{"autoReloadAll":true,"configmapUpdateOnChangeAnnotation":"configmap.reloader.stakater.com/reload","#,
                r#""secretUpdateOnChangeAnnotation":"secret.reloader.stakater.com/reload","reloaderAutoAnnotation":"reloader.stakater.com/auto","#,
                r#""ignoreResourceAnnotation":"reloader.stakater.com/ignore","configmapReloaderAutoAnnotation":"configmap.reloader.stakater.com/auto","#,
                r#""secretReloaderAutoAnnotation":"secret.reloader.stakater.com/auto","#,
                r#""configmapExcludeReloaderAnnotation":"configmaps.exclude.reloader.stakater.com/reload","#,
                r#""secretExcludeReloaderAnnotation":"secrets.exclude.reloader.stakater.com/reload","#,
                r#""autoSearchAnnotation":"reloader.stakater.com/search","searchMatchAnnotation":"reloader.stakater.com/match","#,
                r#""rolloutStrategyAnnotation":"reloader.stakater.com/rollout-strategy","#,
                r#""pauseDeploymentAnnotation":"deployment.reloader.stakater.com/pause-period","#,
                r#""pauseDeploymentTimeAnnotation":"deployment.reloader.stakater.com/paused-at","logFormat":"json","logLevel":"info","#,
                r#""isArgoRollouts":false,"reloadStrategy":"annotations","reloadOnCreate":false,"reloadOnDelete":false,"#,
                r#""syncAfterRestart":false,"enableHA":false,"webhookUrl":"<set>","resourcesToIgnore":["secrets"],"#,
                r#""namespaceSelectors":["team=a"],"resourceSelectors":[],"namespacesToIgnore":[]}"#
            )
        );
    }
}
