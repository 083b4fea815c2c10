//! Unit tests of `strategy`: the template patches byte for byte, the records, the rollout strategies by a kind's
//! facts (what each real kind gets is tested with the kind table, `workload/kinds_tests.rs`).

use super::*;

#[test]
fn the_rollout_strategy_a_kind_gets_follows_its_facts() {
    use RolloutStrategy as S;
    let rolls_out = KindFacts {
        api_version: "example.com/v1",
        api_resource: "widgets.example.com",
        names: &[],
        watched: crate::rules::keys::Watched::Always,
        tracks_rollouts: true,
        has_pod_template: true,
        runs_to_completion: false,
        pause_period: false,
        cronjob_reload: false,
    };
    let untracked = KindFacts { tracks_rollouts: false, ..rolls_out };
    let runs = KindFacts { runs_to_completion: true, ..untracked };
    let templateless = KindFacts { has_pod_template: false, ..untracked };
    for s in [S::Rollout, S::Restart, S::EvictPods, S::DeletePods] {
        assert_eq!(s.for_kind(&rolls_out), s, "{s:?}");
        assert_eq!(s.for_kind(&runs), S::Rollout, "{s:?}: a reload starts a run");
    }
    assert_eq!(S::Restart.for_kind(&untracked), S::Rollout, "restart needs tracked rollouts");
    assert_eq!(S::EvictPods.for_kind(&untracked), S::EvictPods);
    let restarts = [S::Rollout, S::Restart, S::EvictPods].map(|s| s.for_kind(&templateless));
    assert_eq!(restarts, [S::EvictPods; 3], "without a template only its pods restart");
    assert_eq!(S::DeletePods.for_kind(&templateless), S::DeletePods);
}

fn change(kind: ConfigKind, name: &str, container: &str, hash: &str) -> TemplateChange {
    TemplateChange {
        kind,
        name: name.into(),
        namespace: "ns".into(),
        hash: ContentHash::parse_hex(hash).expect("hex"),
        container: container.into(),
        deleted: false,
    }
}

const H1: &str = "dc30e0faa89a70dec1033016a2309bbeb9efcbd0";
const H2: &str = "f83e99e324ba68ccc373a58ef1eb42f8ab88646a";

#[test]
fn restart_marks_have_milliseconds_and_argos_whole_seconds() {
    let at = jiff::Timestamp::new(1_796_479_200, 5_000_000).expect("time");
    assert_eq!(restarted_at(at), "2026-12-05T14:00:00.005Z");
    assert_eq!(restarted_at(jiff::Timestamp::new(1_796_479_200, 0).expect("time")), "2026-12-05T14:00:00.000Z");
    assert_eq!(argo_restart_at(at), "2026-12-05T14:00:00Z");
    assert_eq!(
        restart_template_patch(at),
        json!({"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-05T14:00:00.005Z"}}})
    );
    assert_eq!(RolloutStrategy::parse("restart"), Some(RolloutStrategy::Restart));
    assert_eq!(RolloutStrategy::parse("Restart"), None, "upstream compares exactly");
}

#[test]
fn env_vars_patch_matches_upstreams_strategic_merge_shape() {
    let p = template_patch(ReloadStrategy::EnvVars, &[change(ConfigKind::ConfigMap, "my-config", "app", H1)], 0);
    assert_eq!(
        p,
        json!({"spec": {"containers": [{"name": "app", "env": [{"name": "STAKATER_MY_CONFIG_CONFIGMAP", "value": H1}]}]}})
    );
}

#[test]
fn several_changes_become_one_patch_grouped_by_container() {
    let p = template_patch(
        ReloadStrategy::EnvVars,
        &[
            change(ConfigKind::ConfigMap, "a", "app", H1),
            change(ConfigKind::Secret, "b", "side", H2),
            change(ConfigKind::Secret, "c", "app", H2),
        ],
        0,
    );
    assert_eq!(
        p,
        json!({"spec": {"containers": [
            {"name": "app", "env": [{"name": "STAKATER_A_CONFIGMAP", "value": H1}, {"name": "STAKATER_C_SECRET", "value": H2}]},
            {"name": "side", "env": [{"name": "STAKATER_B_SECRET", "value": H2}]}
        ]}})
    );
}

#[test]
fn annotations_patch_is_upstream_v1_json_in_field_order() {
    let p = template_patch(ReloadStrategy::Annotations, &[change(ConfigKind::Secret, "db", "app", H1)], 1_700_000_000);
    let expected = format!(
        r#"{{"type":"SECRET","name":"db","namespace":"ns","hash":"{H1}","containerRefs":["app"],"observedAt":1700000000}}"#
    );
    assert_eq!(p, json!({"metadata": {"annotations": {LAST_RELOADED_FROM: expected}}}));
}

#[test]
fn a_deleted_resource_removes_its_env_var_with_a_delete_directive() {
    let mut c = change(ConfigKind::ConfigMap, "gone", "app", H1);
    c.deleted = true;
    let p = template_patch(ReloadStrategy::EnvVars, &[c], 0);
    assert_eq!(
        p,
        json!({"spec": {"containers": [{"name": "app", "env": [{"name": "STAKATER_GONE_CONFIGMAP", "$patch": "delete"}]}]}})
    );
}

#[test]
fn applying_to_a_template_matches_the_patch() {
    let mut t: PodTemplateSpec = serde_json::from_value(json!({"spec": {"containers": [
        {"name": "app", "env": [{"name": "STAKATER_A_CONFIGMAP", "value": "old"}, {"name": "KEEP", "value": "x"}]},
        {"name": "side"}
    ]}}))
    .expect("template");
    let mut gone = change(ConfigKind::Secret, "gone", "side", H2);
    gone.deleted = true;
    apply_to_template(
        &mut t,
        ReloadStrategy::EnvVars,
        &[change(ConfigKind::ConfigMap, "a", "app", H1), change(ConfigKind::Secret, "b", "side", H2), gone],
        0,
    );
    let env = |i: usize| serde_json::to_value(&t.spec.as_ref().expect("spec").containers[i].env).expect("json");
    assert_eq!(env(0), json!([{"name": "KEEP", "value": "x"}, {"name": "STAKATER_A_CONFIGMAP", "value": H1}]));
    assert_eq!(env(1), json!([{"name": "STAKATER_B_SECRET", "value": H2}]));

    apply_to_template(&mut t, ReloadStrategy::Annotations, &[change(ConfigKind::ConfigMap, "a", "app", H1)], 7);
    let patch = template_patch(ReloadStrategy::Annotations, &[change(ConfigKind::ConfigMap, "a", "app", H1)], 7);
    let written = t.metadata.and_then(|m| m.annotations).and_then(|a| a.get(LAST_RELOADED_FROM).cloned());
    assert_eq!(written.map(Value::String).as_ref(), patch.pointer(POINTER));
}

#[test]
fn applying_to_json_keeps_unknown_fields() {
    let mut t = json!({"spec": {"futureField": 1, "containers": [{"name": "app", "futureToo": true, "env": [{"name": "KEEP", "value": "x"}]}]}});
    apply_to_template_json(&mut t, ReloadStrategy::EnvVars, &[change(ConfigKind::ConfigMap, "a", "app", H1)], 0);
    assert_eq!(
        t,
        json!({"spec": {"futureField": 1, "containers": [{"name": "app", "futureToo": true,
        "env": [{"name": "KEEP", "value": "x"}, {"name": "STAKATER_A_CONFIGMAP", "value": H1}]}]}})
    );
    apply_to_template_json(&mut t, ReloadStrategy::Annotations, &[change(ConfigKind::ConfigMap, "a", "app", H1)], 7);
    assert!(t["metadata"]["annotations"][LAST_RELOADED_FROM].as_str().is_some_and(|v| v.contains(H1)));
}

#[test]
fn applied_hashes_round_trip_and_tolerate_garbage() {
    let mut m = BTreeMap::new();
    m.insert((ConfigKind::ConfigMap, "a".to_owned()), ContentHash::parse_hex(H1).expect("hex"));
    m.insert((ConfigKind::Secret, "b".to_owned()), ContentHash::parse_hex(H2).expect("hex"));
    let text = encode_applied_hashes(&m);
    assert_eq!(text, format!(r#"{{"configmap/a":"{H1}","secret/b":"{H2}"}}"#));
    assert_eq!(parse_applied_hashes(&text), m);
    let entries: usize = m.keys().map(applied_hashes_entry_len).sum();
    assert_eq!(text.len(), 2 + entries - 1, "entry lengths add up to the encoded record");
    assert!(parse_applied_hashes("garbage").is_empty());
    assert_eq!(parse_applied_hashes(&format!(r#"{{"pod/x":"{H1}","secret/b":"{H2}","configmap/c":"zz"}}"#)).len(), 1);
}

#[test]
fn last_reloaded_from_parses_both_upstream_shapes() {
    let v1 = format!(
        r#"{{"type":"CONFIGMAP","name":"a","namespace":"ns","hash":"{H1}","containerRefs":["c"],"observedAt":1}}"#
    );
    let v2 = format!(
        r#"{{"kind":"secret","name":"b","namespace":"ns","hash":"{H2}","containers":["c"],"reloadedAt":"2026-01-01T00:00:00Z"}}"#
    );
    assert_eq!(
        parse_last_reloaded_from(&v1),
        Some((ConfigKind::ConfigMap, "a".into(), ContentHash::parse_hex(H1).expect("hex")))
    );
    assert_eq!(
        parse_last_reloaded_from(&v2),
        Some((ConfigKind::Secret, "b".into(), ContentHash::parse_hex(H2).expect("hex")))
    );
    assert_eq!(parse_last_reloaded_from("not json"), None);
    assert_eq!(
        parse_last_reloaded_from(r#"{"kind":"secret","name":"b","hash":""}"#),
        None,
        "v2 delete marker records no hash"
    );
}
