//! ServiceAccounts with exactly the rules a test grants, and a kubeconfig using a token of theirs: the
//! controller started with it has those permissions and no others.

use std::path::PathBuf;

use k8s_openapi::api::{
    core::v1::ServiceAccount,
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use serde_json::{Value, json};

use super::{TestNamespace, chart::service_account_kubeconfig};

/// Where a ServiceAccount's rules apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A Role and RoleBinding in the test's namespace.
    Namespace,
    /// A ClusterRole and ClusterRoleBinding named `<account>-<namespace>` (remove with [`delete_cluster_role`]).
    Cluster,
}

/// Creates ServiceAccount `account` in `ns`, bound to `rules` in `scope`, and returns a kubeconfig path that
/// authenticates as it.
pub async fn service_account_with_rules(ns: &TestNamespace, account: &str, rules: Value, scope: Scope) -> PathBuf {
    let pp = PostParams::default();
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": account}})).expect("service account");
    ns.api::<ServiceAccount>().create(&pp, &sa).await.expect("create service account");
    let subjects = json!([{"kind": "ServiceAccount", "name": account, "namespace": ns.name}]);
    match scope {
        Scope::Namespace => {
            let role: Role =
                serde_json::from_value(json!({"metadata": {"name": account}, "rules": rules})).expect("role");
            ns.api::<Role>().create(&pp, &role).await.expect("create role");
            let binding: RoleBinding = serde_json::from_value(json!({
                "metadata": {"name": account},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
                "subjects": subjects
            }))
            .expect("role binding");
            ns.api::<RoleBinding>().create(&pp, &binding).await.expect("create role binding");
        }
        Scope::Cluster => {
            let name = cluster_role_name(ns, account);
            let role: ClusterRole =
                serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).expect("cluster role");
            Api::<ClusterRole>::all(ns.client.clone()).create(&pp, &role).await.expect("create cluster role");
            let binding: ClusterRoleBinding = serde_json::from_value(json!({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subjects
            }))
            .expect("cluster role binding");
            Api::<ClusterRoleBinding>::all(ns.client.clone()).create(&pp, &binding).await.expect("create binding");
        }
    }
    service_account_kubeconfig(&ns.client, &ns.name, account).await
}

fn cluster_role_name(ns: &TestNamespace, account: &str) -> String {
    format!("{account}-{}", ns.name)
}

/// Deletes the ClusterRole and binding [`service_account_with_rules`] made for `account` (best effort).
pub async fn delete_cluster_role(ns: &TestNamespace, account: &str) {
    let (name, dp) = (cluster_role_name(ns, account), DeleteParams::default());
    let _ = Api::<ClusterRoleBinding>::all(ns.client.clone()).delete(&name, &dp).await;
    let _ = Api::<ClusterRole>::all(ns.client.clone()).delete(&name, &dp).await;
}
