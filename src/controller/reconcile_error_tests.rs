//! Unit tests of the reconcile errors: which are retried.

use super::*;

fn api_error(code: u16, message: &str) -> Error {
    let status = kube::core::Status { code, message: message.into(), reason: "r".into(), ..Default::default() };
    Error::Patch { workload: "w".into(), resources: "r".into(), source: kube::Error::Api(status.boxed()) }
}

#[test]
fn conflicts_throttling_server_errors_and_permissions_are_retried_verdicts_are_not() {
    for code in [409, 429, 500, 503, 401] {
        assert!(api_error(code, "m").is_transient(), "{code}");
    }
    let rbac = r#"deployments.apps "web" is forbidden: User "system:serviceaccount:a:reloader" cannot patch resource "deployments""#;
    assert!(api_error(403, rbac).is_transient(), "a missing permission may come back");
    let webhook = r#"admission webhook "policy.example.com" denied the request: frozen"#;
    assert!(!api_error(403, webhook).is_transient(), "an admission denial is a verdict");
    for code in [400, 404, 415, 422] {
        assert!(!api_error(code, "m").is_transient(), "{code}");
    }
}
