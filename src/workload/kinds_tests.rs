//! Unit tests of the kind table: every kind reaches its own type, its facts agree with its type's API names, and
//! what the rules make of them per kind.

use super::*;

struct KindOf;
impl KindVisitor for KindOf {
    type Output = WorkloadKind;
    fn visit<K: WorkloadObject>(self) -> WorkloadKind {
        K::KIND
    }
}

#[test]
fn every_kind_maps_to_the_type_of_that_kind() {
    for kind in WorkloadKind::ALL.into_iter().chain((0..8).map(WorkloadKind::Configured)) {
        assert_eq!(visit(kind, KindOf), kind);
    }
}

#[test]
fn each_kind_gets_the_rollout_strategies_it_can_take() {
    use crate::rules::strategy::RolloutStrategy as S;
    use WorkloadKind::{CronJob, Deployment, Job, Rollout};
    for s in [S::Rollout, S::Restart, S::EvictPods, S::DeletePods] {
        assert_eq!(s.for_kind(&Deployment.facts()), s, "{s:?}");
        assert_eq!(s.for_kind(&Rollout.facts()), s, "{s:?}");
        assert_eq!(s.for_kind(&CronJob.facts()), S::Rollout, "{s:?}: CronJobs spawn a Job");
        assert_eq!(s.for_kind(&Job.facts()), S::Rollout, "{s:?}: Jobs are recreated");
    }
}

#[test]
fn the_built_in_kinds_are_known_by_their_types_api_names() {
    let built_in = [
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "DaemonSet"),
        ("batch", "CronJob"),
        ("batch", "Job"),
        ("argoproj.io", "Rollout"),
        ("apps.openshift.io", "DeploymentConfig"),
    ];
    for (group, kind) in built_in {
        assert!(is_built_in(group, kind), "{group} {kind}");
    }
    for (group, kind) in [("apps.kruise.io", "StatefulSet"), ("apps.kruise.io", "CloneSet"), ("apps", "ReplicaSet")] {
        assert!(!is_built_in(group, kind), "{group} {kind}");
    }
}

#[test]
fn each_kinds_facts_name_the_api_its_type_is_served_by() {
    struct Api;
    impl KindVisitor for Api {
        type Output = (String, String);
        fn visit<K: WorkloadObject>(self) -> Self::Output {
            (K::api_version(&()).into_owned(), format!("{}.{}", K::plural(&()), K::group(&())))
        }
    }
    for kind in WorkloadKind::ALL {
        let facts = kind.facts();
        let (api_version, api_resource) = visit(kind, Api);
        assert_eq!((facts.api_version, facts.api_resource), (api_version.as_str(), api_resource.as_str()), "{kind}");
    }
}

/// A kind the crate does not have, stated in this test alone, as a new kind's file would state it: `Widget` of
/// `example.com/v1`, its pod template at `spec.template`, paused by `spec.paused`, its rollout told by
/// `status.ready`, written like a Deployment (one strategic merge patch, the default [`WriteStyle`]). The tests
/// below run the same generic code the table runs for a real kind (`visit`'s line for a kind is `visitor.visit::<K>()`;
/// here each visitor is called with `Widget` itself).
mod widget {
    use std::borrow::Cow;

    use k8s_openapi::{
        NamespaceResourceScope, api::core::v1::PodTemplateSpec, apimachinery::pkg::apis::meta::v1::ObjectMeta,
    };
    use serde::Deserialize;

    use crate::workload::{KindFacts, RolloutState, Watched, WorkloadKind, WorkloadObject};

    /// The object: what reloads need of it.
    #[derive(Clone, Debug, Default, Deserialize)]
    pub struct Widget {
        pub metadata: ObjectMeta,
        pub spec: Option<WidgetSpec>,
        pub status: Option<WidgetStatus>,
    }

    #[derive(Clone, Debug, Default, Deserialize)]
    pub struct WidgetSpec {
        pub template: PodTemplateSpec,
        pub paused: Option<bool>,
    }

    #[derive(Clone, Debug, Default, Deserialize)]
    pub struct WidgetStatus {
        pub ready: bool,
    }

    impl kube::Resource for Widget {
        type DynamicType = ();
        type Scope = NamespaceResourceScope;

        fn kind((): &()) -> Cow<'_, str> {
            "Widget".into()
        }
        fn group((): &()) -> Cow<'_, str> {
            "example.com".into()
        }
        fn version((): &()) -> Cow<'_, str> {
            "v1".into()
        }
        fn api_version((): &()) -> Cow<'_, str> {
            "example.com/v1".into()
        }
        fn plural((): &()) -> Cow<'_, str> {
            "widgets".into()
        }
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    impl WorkloadObject for Widget {
        // A kind's identity is its variant of `WorkloadKind` (with its line in `visit`), which a test cannot add:
        // this one borrows a configured slot nothing registers (there are at most 8) and is never looked up by it.
        const KIND: WorkloadKind = WorkloadKind::Configured(u8::MAX);
        type Spec = WidgetSpec;
        type Status = WidgetStatus;

        fn facts() -> KindFacts {
            KindFacts {
                api_version: "example.com/v1",
                api_resource: "widgets.example.com",
                names: &["widget", "wd"],
                watched: Watched::Always,
                tracks_rollouts: true,
                has_pod_template: true,
                runs_to_completion: false,
                pause_period: true,
                cronjob_reload: false,
            }
        }

        fn from_parts(metadata: ObjectMeta, spec: Option<WidgetSpec>, status: Option<WidgetStatus>) -> Self {
            Self { metadata, spec, status }
        }

        fn pod_template(&self) -> Option<&PodTemplateSpec> {
            self.spec.as_ref().map(|s| &s.template)
        }

        fn paused(&self) -> bool {
            self.spec.as_ref().and_then(|s| s.paused).unwrap_or(false)
        }

        fn rollout(&self) -> RolloutState {
            match &self.status {
                Some(s) if s.ready => RolloutState::Complete,
                _ => RolloutState::InProgress,
            }
        }
    }
}

use widget::Widget;

#[test]
fn a_kind_stated_in_its_own_file_is_what_the_table_asks_of_its_type() {
    use crate::rules::strategy::RolloutStrategy as S;
    // `WorkloadKind::facts`, `from_kubectl_name` and `is_built_in` ask these visitors of the kind's type.
    let facts = FactsOf.visit::<Widget>();
    assert_eq!(facts, Widget::facts());
    assert_eq!((facts.plural(), facts.served_by_crd()), ("widgets", false));
    assert!(Named("wd").visit::<Widget>() && Named("widget").visit::<Widget>() && !Named("w").visit::<Widget>());
    assert!(IsApiKind { group: "example.com", kind: "Widget" }.visit::<Widget>());
    assert!(!IsApiKind { group: "apps", kind: "Widget" }.visit::<Widget>());
    // The rules are given its facts: its rollouts are tracked, it has a template, its pods do not run to completion.
    for s in [S::Rollout, S::Restart, S::EvictPods, S::DeletePods] {
        assert_eq!(s.for_kind(&facts), s, "{s:?}");
    }
}

#[test]
fn a_kind_stated_in_its_own_file_is_watched_and_summarised_as_its_facts_say() {
    use crate::rules::{annotations::AnnotationKeys, resource::ConfigKind};
    use crate::workload::{Lean, RolloutState, summarise};
    let keys = AnnotationKeys::default();
    let widget = |paused: bool, ready: bool| {
        serde_json::from_value::<Lean<Widget>>(serde_json::json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "ns", "uid": "u1", "generation": 3, "annotations": {
                "deployment.reloader.stakater.com/pause-period": "5m",
                "reloader.stakater.com/cronjob-reload": "patch"
            }},
            "spec": {"paused": paused, "template": {"spec": {"containers": [
                {"name": "app", "envFrom": [{"configMapRef": {"name": "cfg"}}]}
            ]}}},
            "status": {"ready": ready}
        }))
        .expect("a widget decodes as the watches decode it")
    };
    let (key, summary) = summarise(&widget(false, false).0, &keys).expect("summary");
    assert_eq!((key.kind, key.namespace.as_ref(), key.name.as_str()), (Widget::KIND, "ns", "w"));
    let used: Vec<_> = summary.uses.iter().map(|u| (u.kind, u.name.as_str())).collect();
    assert_eq!(used, [(ConfigKind::ConfigMap, "cfg")]);
    assert_eq!((summary.first_container.as_deref(), summary.generation), (Some("app"), 3));
    assert_eq!(summary.rollout, RolloutState::InProgress, "its own rollout rule");
    assert_eq!(summarise(&widget(false, true).0, &keys).expect("summary").1.rollout, RolloutState::Complete);
    assert_eq!(summarise(&widget(true, false).0, &keys).expect("summary").1.rollout, RolloutState::Untracked);
    // `pause-period` applies to it (its facts say so: no problem, the period is kept), `cronjob-reload` does not.
    assert_eq!(summary.pause.period.as_deref(), Some("5m"));
    let problems: Vec<_> = summary.annotations.problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(problems, ["Annotation 'reloader.stakater.com/cronjob-reload' only applicable for cronjobs"]);
}

/// Written the way its kind's [`WriteStyle`] says (the default: one strategic merge patch of its template, the
/// record and the pause), at the URL its type names.
#[tokio::test]
async fn a_kind_stated_in_its_own_file_is_written_as_its_write_style_says() {
    use kube::client::Body;

    use crate::rules::{hash::ContentHash, pause::PauseAction, resource::ConfigKind};
    use crate::workload::test_support::{change, env_write};

    let (service, mut handle) = tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>();
    let client = Client::new(service, "default");
    let server = tokio::spawn(async move {
        let (request, respond) = handle.next_request().await.expect("a request");
        let method = request.method().to_string();
        let uri = request.uri().to_string();
        let content_type = request.headers().get(http::header::CONTENT_TYPE).cloned();
        let body = request.into_body().collect_bytes().await.expect("body");
        let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        let answer = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"generation":4}}"#;
        respond.send_response(http::Response::new(Body::from(answer.as_bytes().to_vec())));
        (method, uri, content_type, body)
    });
    let key = WorkloadKey { kind: Widget::KIND, namespace: "ns".into(), name: "w".into() };
    let changes = [change(ConfigKind::ConfigMap, "cfg", "app")];
    let w = WorkloadWrite {
        pause: Some(("example.com/paused-at", PauseAction::Pause { at: "2026-12-02T10:00:00Z".into() })),
        ..env_write(&changes, Some("{}"))
    };
    assert_eq!(write::<Widget>(&client, &key, &w).await.expect("written"), Some(4), "the generation it answers");
    let (method, uri, content_type, body) = server.await.expect("server");
    assert_eq!(method, "PATCH");
    assert_eq!(uri, "/apis/example.com/v1/namespaces/ns/widgets/w?&fieldManager=reloader");
    assert_eq!(content_type.as_ref().and_then(|v| v.to_str().ok()), Some("application/strategic-merge-patch+json"));
    let hash = ContentHash::NONE.to_string();
    assert_eq!(
        body,
        serde_json::json!({
            "metadata": {"annotations": {crate::constants::annotation::APPLIED_HASHES: "{}", "example.com/paused-at": "2026-12-02T10:00:00Z"}},
            "spec": {"paused": true, "template": {"spec": {"containers": [{"name": "app", "env": [{"name": "STAKATER_CFG_CONFIGMAP", "value": hash}]}]}}}
        })
    );
}
