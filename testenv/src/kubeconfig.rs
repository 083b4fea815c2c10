//! Writes kubeconfig files (as JSON, which every kubeconfig reader accepts as YAML).

use std::path::Path;

use crate::{Error, pki::ClientCert};

/// Writes a kubeconfig with one cluster, user and context, all named `testenv`.
pub fn write(path: &Path, server: &str, ca_pem: &str, user: &str, cert: &ClientCert) -> Result<(), Error> {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testenv", "cluster": {
            "server": server,
            "certificate-authority-data": b64(ca_pem.as_bytes()),
        }}],
        "users": [{"name": user, "user": {
            "client-certificate-data": b64(cert.cert_pem.as_bytes()),
            "client-key-data": b64(cert.key_pem.as_bytes()),
        }}],
        "contexts": [{"name": "testenv", "context": {"cluster": "testenv", "user": user, "namespace": "default"}}],
        "current-context": "testenv",
    });
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    std::fs::write(path, text).map_err(|source| Error::Io { path: path.to_owned(), source })
}

fn b64(input: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(input)
}
