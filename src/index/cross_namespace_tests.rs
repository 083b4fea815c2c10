//! Cross-namespace references in the index: which workloads a change in another namespace concerns, and what
//! their plans write.

use serde_json::json;

use super::tests::{cm, deployment, full_plan};
use super::*;
use crate::{decision::DecisionSettings, strategy::ReloadStrategy};

/// Cross-namespace references (issue 29): `<namespace>/<name>` entries, plain and regex, find the workload from the
/// other namespace's change; they reload only with `--allow-cross-namespace-references`, into the first container,
/// under their own record entry and `STAKATER_*` name.
#[test]
fn a_cross_namespace_entry_reloads_from_another_namespace_only_when_allowed() {
    let remote = |name: &str, value: &str| {
        let (mut key, facts) = cm(name, value);
        key.namespace = "istio-system".into();
        (key, facts)
    };
    for entry in ["istio-system/stable-tag", "istio-system/stable-.*"] {
        let mut index = Index::default();
        let (wk, ws) = deployment("web", json!({"configmap.reloader.stakater.com/reload": entry}), json!([]));
        let (local, lf) = cm("stable-tag", "local");
        let (ck, v1) = remote("stable-tag", "v1");
        index.upsert_config(local.clone(), lf, Baseline::Current);
        index.upsert_config(ck.clone(), v1, Baseline::Current);
        index.upsert_workload(wk.clone(), ws, Baseline::Current);
        assert!(index.candidates(&local).is_empty(), "{entry}: the local namesake is not named");
        assert_eq!(index.candidates(&ck), std::slice::from_ref(&wk), "{entry}");
        let (_, v2) = remote("stable-tag", "v2");
        index.upsert_config(ck.clone(), v2, Baseline::Current);
        let refused = full_plan(&mut index, &wk);
        assert!(refused.reloads.is_empty(), "{entry}: refused without the flag");
        let allowed = DecisionSettings { cross_namespace: true, ..DecisionSettings::default() };
        let (_, v3) = remote("stable-tag", "v3");
        index.upsert_config(ck.clone(), v3, Baseline::Current);
        let plan = index.plan(&wk, allowed, ReloadStrategy::EnvVars);
        assert_eq!(plan.reloads.len(), 1, "{entry}");
        let r = &plan.reloads[0];
        assert_eq!((r.pair.1.as_str(), r.container.as_str()), ("istio-system/stable-tag", "app"), "{entry}");
        assert_eq!(crate::resource::env_var_name(r.pair.0, &r.pair.1), "STAKATER_ISTIO_SYSTEM_STABLE_TAG_CONFIGMAP");
        let record = plan.applied_hashes.clone().expect("record");
        assert!(record.contains_key(&(ConfigKind::ConfigMap, "istio-system/stable-tag".to_owned())), "{record:?}");
        index.mark_written(&wk, &plan);
        assert!(index.plan(&wk, allowed, ReloadStrategy::EnvVars).reloads.is_empty(), "{entry}: written once");
    }
}
