//! An admission webhook on 127.0.0.1 that refuses every Deployment update (or every Job create) in one namespace
//! with a chosen status code: for a test, the API answering one namespace's writes 503 for as long as it runs (a
//! webhook whose backend is down, an aggregated API that is unavailable).

use std::{
    io,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use axum::{Router, routing::post};
use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, server::TlsStream};

use super::{RELOAD_WAIT, TestNamespace, wait_for};

/// The webhook, registered while this lives.
pub struct RefusingWebhook {
    name: String,
    calls: Arc<AtomicUsize>,
    server: tokio::task::JoinHandle<()>,
}

/// Accepts TLS connections for axum (a handshake that fails is dropped, and the next connection taken).
struct TlsListener {
    tcp: TcpListener,
    tls: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else { continue };
            if let Ok(stream) = self.tls.accept(stream).await {
                return (stream, addr);
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// What the webhook refuses.
pub enum Refused<'a> {
    /// Updates of Deployments; the named Deployment is probed with a dry-run update.
    DeploymentUpdates(&'a str),
    /// Creates of Jobs; probed with a dry-run create.
    JobCreates,
    /// Creates of Jobs that are not dry runs (admission passes, the create itself fails: a quota or a webhook
    /// with side effects); probed with a create.
    JobCreatesExceptDryRuns,
}

impl RefusingWebhook {
    /// Serves the webhook and registers it for updates of Deployments in `ns`, answered with `code`; returns
    /// once the API server refuses a (dry-run) update of `probe`, a Deployment in `ns`, with that code.
    pub async fn start(ns: &TestNamespace, code: u16, probe: &str) -> Self {
        Self::refusing(ns, code, Refused::DeploymentUpdates(probe)).await
    }

    /// Serves the webhook and registers it for `refused` in `ns`, answered with `code`; returns once the API
    /// server refuses a dry run of it with that code.
    pub async fn refusing(ns: &TestNamespace, code: u16, refused: Refused<'_>) -> Self {
        let cert = testenv::pki::self_signed_localhost().expect("webhook certificate");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_der));
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(cert.cert_der)], key)
            .expect("TLS config");
        let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind webhook");
        let port = tcp.local_addr().expect("addr").port();
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let admits_dry_runs = matches!(refused, Refused::JobCreatesExceptDryRuns);
        let app = Router::new().route(
            "/",
            post(move |body: String| {
                counter.fetch_add(1, Ordering::Relaxed);
                async move {
                    let review: Value = serde_json::from_str(&body).unwrap_or_default();
                    let allowed = admits_dry_runs && review["request"]["dryRun"] == true;
                    let answer = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
                        "uid": review["request"]["uid"], "allowed": allowed,
                        "status": {"code": code, "message": "the test webhook's backend is unavailable"}}});
                    ([(http::header::CONTENT_TYPE, "application/json")], answer.to_string())
                }
            }),
        );
        let listener = TlsListener { tcp, tls: TlsAcceptor::from(Arc::new(config)) };
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });

        let name = format!("refuse-{}", ns.name);
        let rule = match refused {
            Refused::DeploymentUpdates(_) => {
                json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments"]})
            }
            Refused::JobCreates | Refused::JobCreatesExceptDryRuns => {
                json!({"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]})
            }
        };
        let ca = base64::engine::general_purpose::STANDARD.encode(&cert.cert_pem);
        let registration: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": name},
            "webhooks": [{
                "name": "refuse.reloader.test",
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/"), "caBundle": ca},
                "rules": [rule],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name}},
                "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 5
            }]
        }))
        .expect("webhook configuration");
        let configurations: Api<ValidatingWebhookConfiguration> = Api::all(ns.client.clone());
        configurations.create(&PostParams::default(), &registration).await.expect("register webhook");

        let probe_client = testenv::harness::client_without_retries().await;
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(probe_client.clone(), &ns.name);
        let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(probe_client, &ns.name);
        let dry_run = PatchParams { dry_run: true, ..PatchParams::default() };
        let touch = json!({"metadata": {"annotations": {"probe": "1"}}});
        let probe_job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
            "metadata": {"name": "webhook-probe"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x"}]}}}
        }))
        .expect("probe job");
        let create_dry_run = PostParams { dry_run: true, ..PostParams::default() };
        wait_for("the API server calling the webhook", RELOAD_WAIT, || async {
            let answer = match refused {
                Refused::DeploymentUpdates(probe) => {
                    deployments.patch(probe, &dry_run, &Patch::Merge(&touch)).await.map(|_| ())
                }
                Refused::JobCreates => jobs.create(&create_dry_run, &probe_job).await.map(|_| ()),
                Refused::JobCreatesExceptDryRuns => {
                    let created = jobs.create(&PostParams::default(), &probe_job).await.map(|_| ());
                    if created.is_ok() {
                        // Not called yet: the probe Job goes again before the next try.
                        let _ = jobs.delete("webhook-probe", &DeleteParams::background()).await;
                    }
                    created
                }
            };
            match answer {
                Err(kube::Error::Api(s)) if s.code == code => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        Self { name, calls, server }
    }

    /// Reviews answered so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

impl Drop for RefusingWebhook {
    fn drop(&mut self) {
        // Unregistered before the server stops: a registered webhook that no longer answers fails the updates too.
        let name = self.name.clone();
        testenv::harness::cleanup_from_drop(move |client| async move {
            let _ = Api::<ValidatingWebhookConfiguration>::all(client).delete(&name, &DeleteParams::default()).await;
        });
        self.server.abort();
    }
}
