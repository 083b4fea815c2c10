//! Starts and stops the local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
//! KWOK with fake nodes, on loopback with free ports and generated certificates (testenv.md §4–§5).

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client, Config,
    api::PostParams,
    config::{KubeConfigOptions, Kubeconfig},
};

use crate::{
    Error,
    pki::{CertificateAuthority, Pki},
    process::{Component, tail},
};

/// How to start a control plane.
#[derive(Debug, Clone)]
pub struct Options {
    /// Folder with kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok, kwok-stages.yaml.
    pub bin_dir: PathBuf,
    /// Per-run folder: certificates, etcd data, logs, kubeconfig. Emptied at start.
    pub state_dir: PathBuf,
    /// Number of KWOK fake nodes (≥ 2 so DaemonSets have several pods).
    pub nodes: usize,
    /// How long to wait for every component to become ready.
    pub ready_timeout: Duration,
    /// Extra kube-apiserver flags (e.g. an audit policy for the benchmark), appended after the defaults.
    pub extra_apiserver_args: Vec<String>,
    /// Extra kube-controller-manager flags, appended after the defaults (a repeated flag wins).
    pub extra_controller_manager_args: Vec<String>,
}

/// A running control plane. Call [`ControlPlane::stop`]; dropping it also kills the processes.
pub struct ControlPlane {
    components: Vec<Component>,
    ca: CertificateAuthority,
    /// Admin kubeconfig (user `admin`, group `system:masters`).
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// Component logs.
    pub log_dir: PathBuf,
    /// The binaries in use.
    pub bin_dir: PathBuf,
    etcd_url: String,
}

/// Label and annotation that mark the fake nodes KWOK manages.
const KWOK_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

fn free_port() -> Result<u16, Error> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|source| Error::Io { path: "127.0.0.1:0".into(), source })?;
    listener.local_addr().map(|a| a.port()).map_err(|source| Error::Io { path: "127.0.0.1:0".into(), source })
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

impl ControlPlane {
    /// Starts every component and waits until the API is ready and the fake nodes are Ready.
    pub async fn start(opts: &Options) -> Result<Self, Error> {
        let started = Instant::now();
        let state = &opts.state_dir;
        if state.exists() {
            std::fs::remove_dir_all(state).map_err(|source| Error::Io { path: state.clone(), source })?;
        }
        let log_dir = state.join("logs");
        std::fs::create_dir_all(&log_dir).map_err(|source| Error::Io { path: log_dir.clone(), source })?;
        let (ca, pki) = CertificateAuthority::generate(&state.join("pki"))?;
        let (etcd_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);
        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = state.join("kubeconfig");
        let admin = ca.client_cert("admin", &["system:masters"])?;
        crate::kubeconfig::write(&kubeconfig, &server, &ca.ca_pem(), "admin", &admin)?;

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let mut cp =
            Self { components: Vec::new(), ca, kubeconfig, server, log_dir, bin_dir: opts.bin_dir.clone(), etcd_url };
        let result = cp.boot(opts, &pki, state, etcd_port, peer_port).await;
        if let Err(e) = result {
            let logs = cp.log_tails(40);
            cp.stop().await;
            return Err(Error::NotReady { what: e.to_string(), logs });
        }
        tracing::info!(elapsed = ?started.elapsed(), kubeconfig = %cp.kubeconfig.display(), "control plane ready");
        Ok(cp)
    }

    async fn boot(
        &mut self,
        opts: &Options,
        pki: &Pki,
        state: &Path,
        etcd_port: u16,
        peer_port: u16,
    ) -> Result<(), Error> {
        let bin = &opts.bin_dir;
        let deadline = Instant::now() + opts.ready_timeout;
        let etcd_url = self.etcd_url.clone();
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        self.spawn(
            "etcd",
            &bin.join("etcd"),
            vec![
                "--name=testenv".into(),
                format!("--data-dir={}", s(&state.join("etcd"))),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=testenv={peer_url}"),
                "--unsafe-no-fsync=true".into(),
                "--quota-backend-bytes=8589934592".into(),
                "--auto-compaction-retention=1".into(),
                "--log-level=warn".into(),
            ],
        )?;
        self.wait_tcp(etcd_port, deadline, "etcd").await?;

        let api_port = self.server.rsplit(':').next().unwrap_or_default().to_owned();
        self.spawn(
            "kube-apiserver",
            &bin.join("kube-apiserver"),
            vec![
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                // Without it a loopback bind makes the apiserver look for a default-route interface (testenv.md §5.2).
                "--advertise-address=127.0.0.1".into(),
                format!("--secure-port={api_port}"),
                "--endpoint-reconciler-type=none".into(),
                format!("--tls-cert-file={}", s(&pki.serving_cert)),
                format!("--tls-private-key-file={}", s(&pki.serving_key)),
                format!("--client-ca-file={}", s(&pki.ca_cert)),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", s(&pki.sa_pub)),
                format!("--service-account-signing-key-file={}", s(&pki.sa_key)),
                "--service-cluster-ip-range=10.96.0.0/16".into(),
                "--authorization-mode=RBAC".into(),
                "--allow-privileged=true".into(),
                // Pods must not wait for the namespace's `default` ServiceAccount (a race right after namespace
                // creation); no kubelet mounts tokens here anyway.
                "--disable-admission-plugins=ServiceAccount".into(),
                "--profiling=false".into(),
            ]
            .into_iter()
            .chain(opts.extra_apiserver_args.iter().cloned())
            .collect(),
        )?;
        let client = self.client().await?;
        self.wait_ready(&client, deadline).await?;

        let kubeconfig = s(&self.kubeconfig);
        self.spawn(
            "kube-controller-manager",
            &bin.join("kube-controller-manager"),
            vec![
                format!("--kubeconfig={kubeconfig}"),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                "--secure-port=0".into(),
                format!("--service-account-private-key-file={}", s(&pki.sa_key)),
                format!("--root-ca-file={}", s(&pki.ca_cert)),
                format!("--cluster-signing-cert-file={}", s(&pki.ca_cert)),
                format!("--cluster-signing-key-file={}", s(&pki.ca_key)),
                "--controllers=*".into(),
                "--kube-api-qps=200".into(),
                "--kube-api-burst=400".into(),
                "--concurrent-deployment-syncs=10".into(),
                "--concurrent-replicaset-syncs=10".into(),
            ]
            .into_iter()
            .chain(opts.extra_controller_manager_args.iter().cloned())
            .collect(),
        )?;
        self.spawn(
            "kube-scheduler",
            &bin.join("kube-scheduler"),
            vec![
                format!("--kubeconfig={kubeconfig}"),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                "--secure-port=0".into(),
            ],
        )?;
        self.spawn(
            "kwok",
            &bin.join("kwok"),
            vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--config={}", s(&bin.join("kwok-stages.yaml"))),
                "--manage-all-nodes=false".into(),
                format!(
                    "--manage-nodes-with-annotation-selector={}={}",
                    KWOK_NODE_ANNOTATION.0, KWOK_NODE_ANNOTATION.1
                ),
                "--cidr=10.244.0.0/16".into(),
                "--node-ip=10.240.0.10".into(),
                "--node-lease-duration-seconds=40".into(),
            ],
        )?;
        self.create_nodes(&client, opts.nodes).await?;
        self.wait_nodes_ready(&client, opts.nodes, deadline).await
    }

    fn spawn(&mut self, name: &'static str, program: &Path, args: Vec<String>) -> Result<(), Error> {
        if !program.exists() {
            return Err(Error::MissingBinary { path: program.to_owned() });
        }
        self.components.push(Component::spawn(name, program, &args, &self.log_dir)?);
        Ok(())
    }

    /// Fails if a component has exited: there is no point waiting for the rest.
    fn check_alive(&mut self) -> Result<(), Error> {
        for c in &mut self.components {
            if let Some(status) = c.exited() {
                return Err(Error::Exited { name: c.name, status: status.to_string(), log: c.log.clone() });
            }
        }
        Ok(())
    }

    async fn wait_tcp(&mut self, port: u16, deadline: Instant, what: &str) -> Result<(), Error> {
        loop {
            self.check_alive()?;
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { what: format!("{what} listening on 127.0.0.1:{port}") });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_ready(&mut self, client: &Client, deadline: Instant) -> Result<(), Error> {
        loop {
            self.check_alive()?;
            let req =
                http::Request::get("/readyz").body(Vec::new()).map_err(|e| Error::Kube(kube::Error::HttpError(e)))?;
            let last = match client.request_text(req).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(body) => body,
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(Error::Timeout { what: format!("kube-apiserver /readyz (last answer: {last})") });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn create_nodes(&self, client: &Client, count: usize) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(client.clone());
        for i in 0..count {
            let name = format!("kwok-node-{i}");
            let node: Node = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {KWOK_NODE_ANNOTATION.0: KWOK_NODE_ANNOTATION.1, "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                               "kubernetes.io/arch": "amd64", "type": "kwok"},
                },
                // No NoSchedule taint: unmodified Deployments, DaemonSets and charts must schedule here.
                "status": {
                    "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "1000"},
                    "capacity": {"cpu": "32", "memory": "256Gi", "pods": "1000"},
                },
            }))
            .map_err(Error::Json)?;
            nodes.create(&PostParams::default(), &node).await.map_err(Error::Kube)?;
        }
        Ok(())
    }

    async fn wait_nodes_ready(&mut self, client: &Client, count: usize, deadline: Instant) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(client.clone());
        loop {
            self.check_alive()?;
            let list = nodes.list(&Default::default()).await.map_err(Error::Kube)?;
            let ready = list.items.iter().filter(|n| node_ready(n)).count();
            if ready >= count {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout { what: format!("{count} KWOK nodes Ready (saw {ready})") });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// An admin client.
    pub async fn client(&self) -> Result<Client, Error> {
        client_from_kubeconfig(&self.kubeconfig).await
    }

    /// Writes a kubeconfig for another user (client certificate signed by the cluster CA).
    pub fn write_user_kubeconfig(&self, path: &Path, user: &str, groups: &[&str]) -> Result<(), Error> {
        let cert = self.ca.client_cert(user, groups)?;
        crate::kubeconfig::write(path, &self.server, &self.ca.ca_pem(), user, &cert)
    }

    /// The last lines of every component's log, for failure reports.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for c in &self.components {
            out.push_str(&format!("----- {} (last {lines} lines of {}) -----\n", c.name, c.log.display()));
            out.push_str(&tail(&c.log, lines));
            out.push('\n');
        }
        out
    }

    /// etcd's client URL (`http://127.0.0.1:<port>`, plain HTTP): its v3 JSON gateway serves `/v3/kv/…`.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// Kills component `name` (`kube-apiserver`, …) and starts it again with the same flags; for the API
    /// server, waits until `/readyz` answers `ok` again (within `timeout`). The log is appended to, not replaced.
    pub async fn restart(&mut self, name: &str, timeout: Duration) -> Result<(), Error> {
        let component = self.components.iter_mut().find(|c| c.name == name);
        let component = component.ok_or_else(|| Error::UnknownComponent(name.to_owned()))?;
        component.restart().await?;
        if name == "kube-apiserver" {
            let client = self.client().await?;
            self.wait_ready(&client, Instant::now() + timeout).await?;
        }
        Ok(())
    }

    /// Process ids of the running components.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        self.components.iter().filter_map(|c| c.id().map(|id| (c.name, id))).collect()
    }

    /// Kills every component, newest first.
    pub async fn stop(&mut self) {
        while let Some(mut c) = self.components.pop() {
            c.kill().await;
        }
    }
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A client for a kubeconfig file.
pub async fn client_from_kubeconfig(path: &Path) -> Result<Client, Error> {
    Client::try_from(config_from_kubeconfig(path).await?).map_err(Error::Kube)
}

/// The client configuration of a kubeconfig file.
pub async fn config_from_kubeconfig(path: &Path) -> Result<Config, Error> {
    let kc =
        Kubeconfig::read_from(path).map_err(|e| Error::Kubeconfig { path: path.to_owned(), message: e.to_string() })?;
    Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Kubeconfig { path: path.to_owned(), message: e.to_string() })
}
