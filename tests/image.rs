//! The image `make image` built (`build/image.sh`), checked as a user's cluster would meet it: an OCI index for
//! linux/amd64 and linux/arm64; each platform's one layer holds a static binary for that machine, the CA roots and
//! no shell; the configs run /reloader as 65534 with the commit in the labels; the amd64 binary taken out of the
//! layer reloads a Deployment on the test control plane, and the arm64 one answers `--version` under qemu-user;
//! each platform's SBOM lists the crates compiled in.
//!
//! Run by `make image-check` (it builds the image first); ignored in `make test`, where building two release
//! binaries more would take a cold CI run past its budget. `RELOADER_IMAGE_DIR` names the image's folder.

mod common;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use common::{chart, *};
use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{Value, json};

fn image_dir() -> PathBuf {
    let dir =
        std::env::var("RELOADER_IMAGE_DIR").unwrap_or_else(|_| format!("{}/target/image", env!("CARGO_MANIFEST_DIR")));
    PathBuf::from(dir)
}

/// A blob of the OCI layout by digest.
fn blob(layout: &Path, digest: &str) -> Vec<u8> {
    let path = layout.join("blobs").join(digest.replacen(':', "/", 1));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_blob(layout: &Path, digest: &str) -> Value {
    serde_json::from_slice(&blob(layout, digest)).expect("JSON blob")
}

/// The platforms' manifests of the layout's one index: `os/arch` → manifest.
fn manifests(layout: &Path) -> Vec<(String, Value)> {
    let top: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).expect("index.json")).expect("JSON");
    let entries = top["manifests"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 1, "one image index in the layout: {top}");
    assert_eq!(entries[0]["mediaType"], "application/vnd.oci.image.index.v1+json", "{top}");
    let index = json_blob(layout, entries[0]["digest"].as_str().unwrap_or_default());
    index["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let platform = format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap_or("?"),
                m["platform"]["architecture"].as_str().unwrap_or("?")
            );
            (platform, json_blob(layout, m["digest"].as_str().unwrap_or_default()))
        })
        .collect()
}

/// The one layer of `manifest`, unpacked into a fresh folder; its file list.
fn unpack(layout: &Path, manifest: &Value, into: &Path) -> Vec<String> {
    let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
    assert_eq!(layers.len(), 1, "one layer: {manifest}");
    let tarball = into.with_extension("tar.gz");
    std::fs::write(&tarball, blob(layout, layers[0]["digest"].as_str().unwrap_or_default())).expect("write layer");
    std::fs::create_dir_all(into).expect("mkdir");
    let listing = Command::new("tar").arg("-tzf").arg(&tarball).output().expect("tar -t");
    assert!(listing.status.success(), "{listing:?}");
    let status = Command::new("tar").arg("-xzf").arg(&tarball).arg("-C").arg(into).status().expect("tar -x");
    assert!(status.success());
    let mut files: Vec<String> =
        String::from_utf8_lossy(&listing.stdout).lines().map(|l| l.trim_end_matches('/').to_owned()).collect();
    files.sort();
    files
}

/// The ELF machine of a binary (e_machine), and whether it asks for an interpreter (a dynamic binary).
fn elf_machine_and_dynamic(path: &Path) -> (u16, bool) {
    let bytes = std::fs::read(path).expect("read binary");
    assert_eq!(&bytes[..4], b"\x7fELF", "{} is not an ELF file", path.display());
    let machine = u16::from_le_bytes([bytes[18], bytes[19]]);
    // PT_INTERP among the program headers (64-bit little-endian layout).
    let word = |at: usize, n: usize| bytes[at..at + n].iter().rev().fold(0u64, |v, b| v << 8 | u64::from(*b)) as usize;
    let (phoff, phentsize, phnum) = (word(32, 8), word(54, 2), word(56, 2));
    let dynamic = (0..phnum).any(|i| word(phoff + i * phentsize, 4) == 3);
    (machine, dynamic)
}

#[tokio::test]
#[ignore = "needs `make image` (run by `make image-check`)"]
async fn the_image_holds_a_static_binary_per_platform_and_the_amd64_one_reloads() {
    let dir = image_dir();
    let layout = dir.join("oci");
    let platforms = manifests(&layout);
    let names: Vec<&str> = platforms.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["linux/amd64", "linux/arm64"], "the index's platforms");

    let scratch = tempdir("image-check");
    for (platform, manifest) in &platforms {
        let arch = platform.trim_start_matches("linux/");
        let config = json_blob(&layout, manifest["config"]["digest"].as_str().unwrap_or_default());
        assert_eq!(config["architecture"], arch);
        assert_eq!(config["config"]["User"], "65534:65534", "non-root, the chart's runAsUser");
        assert_eq!(config["config"]["Entrypoint"], json!(["/reloader"]));
        let labels = &config["config"]["Labels"];
        assert_eq!(labels["org.opencontainers.image.revision"], built_commit().0.as_str(), "{labels}");
        assert_eq!(labels["org.opencontainers.image.version"], env!("CARGO_PKG_VERSION"), "{labels}");
        assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0", "{labels}");

        let root = scratch.join(arch);
        let files = unpack(&layout, manifest, &root);
        assert_eq!(
            files,
            [
                "etc",
                "etc/group",
                "etc/passwd",
                "etc/ssl",
                "etc/ssl/certs",
                "etc/ssl/certs/ca-certificates.crt",
                "reloader",
                "tmp"
            ],
            "{platform}: the layer's files (no shell, nothing else)"
        );
        let roots = std::fs::read_to_string(root.join("etc/ssl/certs/ca-certificates.crt")).expect("CA roots");
        assert!(roots.matches("BEGIN CERTIFICATE").count() > 50, "{platform}: a CA bundle");
        let (machine, dynamic) = elf_machine_and_dynamic(&root.join("reloader"));
        let expected = if arch == "amd64" { 0x3e } else { 0xb7 }; // EM_X86_64, EM_AARCH64
        assert_eq!(machine, expected, "{platform}: the binary's machine");
        assert!(!dynamic, "{platform}: the binary is static (the image has no libc)");

        // The SBOM beside the image lists the crates compiled in (embedded by cargo-auditable), at Cargo.lock's
        // versions, and nothing that only the tests use.
        let sbom_path = dir.join(format!("sbom-linux-{arch}.spdx.json"));
        let sbom: Value = serde_json::from_str(&std::fs::read_to_string(&sbom_path).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{}: {e}", sbom_path.display()));
        assert_eq!(sbom["spdxVersion"], "SPDX-2.3", "{platform}");
        let packages: BTreeMap<&str, &str> = sbom["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p["name"].as_str()?, p["versionInfo"].as_str().unwrap_or_default())))
            .collect();
        assert_eq!(packages.get("reloader").copied(), Some(env!("CARGO_PKG_VERSION")), "{platform}: the SBOM");
        for name in ["kube", "tokio", "rustls", "prometheus"] {
            assert_eq!(packages.get(name).copied(), Some(locked_version(name).as_str()), "{platform}: {name}");
        }
        assert!(!packages.contains_key("tower-test"), "{platform}: a dev-dependency is not in the binary's SBOM");
    }

    let version = format!("reloader {} (commit {}", env!("CARGO_PKG_VERSION"), built_commit().0);
    let amd64 = scratch.join("amd64/reloader");
    let out = Command::new(&amd64).arg("--version").output().expect("run the amd64 binary");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&version), "{out:?}");
    let qemu = Command::new("qemu-aarch64").arg(scratch.join("arm64/reloader")).arg("--version").output();
    let out = qemu.expect("qemu-aarch64 (Debian: apt-get install qemu-user) runs the arm64 binary");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&version), "{out:?}");

    // The amd64 binary from the layer, as the image runs it, reloads a Deployment.
    let ns = TestNamespace::create("image").await;
    create_configmap(&ns, "cfg", &[("k", "1")], &[]).await;
    Kind::Deployment
        .create(&ns, "web", json!({"reloader.stakater.com/auto": "true"}), json!({}), env_from_configmap("cfg"))
        .await;
    let scoped = format!("--namespaces={}", ns.name);
    let reloader = Reloader::spawn_binary(&amd64, &[&scoped], &[]);
    reloader.wait_log("watches synced").await;
    Kind::Deployment.wait_revisions(&ns, "web", 1).await;
    set_configmap_data(&ns, "cfg", &[("k", "2")]).await;
    Kind::Deployment.wait_revisions(&ns, "web", 2).await;
    let value = Kind::Deployment.env(&ns, "web", "app", "STAKATER_CFG_CONFIGMAP").await;
    assert_eq!(value.as_deref(), Some(configmap_hash(&[("k", "2")]).as_str()));
}

/// "Build your own image", as the README's quick start says it: the image pushed with crane to a registry (one
/// crane serves here), the chart packaged and pushed there as an OCI artifact (`helm push`, as the release
/// workflow publishes it) and installed from that OCI reference with `--set image.repository=…`; the Deployment
/// names that image, the registry serves it at the digest `make image` wrote, and the binary pulled from it, run
/// with the installed Deployment's arguments and ServiceAccount, reloads a Deployment of the release's namespace.
#[tokio::test]
#[ignore = "needs `make image` (run by `make image-check`)"]
async fn the_image_pushed_to_a_registry_installs_with_helm_and_reloads() {
    let dir = image_dir();
    let crane = crane();
    let mut registry = KillOnDrop(
        Command::new(&crane)
            .args(["registry", "serve", "--address", "127.0.0.1:0"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("crane registry serve"),
    );
    // Its log is read to the end (a registry whose stderr is closed dies at its next log line).
    let stderr = registry.0.stderr.take().expect("stderr");
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            if let Some(port) = line.split("serving on port ").nth(1) {
                let _ = port_tx.send(port.trim().to_owned());
            }
        }
    });
    let port = port_rx.recv_timeout(std::time::Duration::from_secs(30)).expect("crane registry announces its port");
    let repository = format!("127.0.0.1:{port}/reloader");
    let image = format!("{repository}:{}", env!("CARGO_PKG_VERSION"));
    let crane_run = |args: &[&str]| {
        let out = Command::new(&crane).args(args).output().expect("run crane");
        assert!(out.status.success(), "crane {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    crane_run(&["push", dir.join("oci").to_str().unwrap_or_default(), &image]);

    let scratch = tempdir("own-image");
    let packaged =
        chart::helm(&["package", &chart::chart_dir().display().to_string(), "-d", &scratch.display().to_string()]);
    let tgz = packaged.rsplit(": ").next().unwrap_or_default().trim().to_owned();
    let charts = format!("oci://127.0.0.1:{port}/charts");
    chart::helm(&["push", &tgz, &charts, "--plain-http"]);

    let ns = TestNamespace::create("own-image").await;
    let reference = format!("{charts}/reloader");
    let set_repository = format!("image.repository={repository}");
    let release = ns.name.clone();
    chart::helm(&[
        "install",
        &release,
        &reference,
        "--version",
        env!("CARGO_PKG_VERSION"),
        "--plain-http",
        "-n",
        &ns.name,
        "--set",
        &set_repository,
        "--wait",
        "--timeout",
        "120s",
    ]);
    let deployment = ns.api::<Deployment>().get(&format!("{release}-reloader")).await.expect("the chart's Deployment");
    let spec = deployment.spec.and_then(|s| s.template.spec).expect("pod spec");
    assert_eq!(spec.containers[0].image.as_deref(), Some(image.as_str()), "the Deployment runs the pushed image");
    let digest = std::fs::read_to_string(dir.join("digest")).expect("digest");
    assert_eq!(crane_run(&["digest", &image]), digest.trim(), "the registry serves the image make image built");

    // The binary as a node would run it: pulled from the registry (amd64), with the installed Deployment's
    // arguments and environment and its ServiceAccount's permissions.
    let tarball = scratch.join("fs.tar");
    crane_run(&["export", "--platform", "linux/amd64", &image, tarball.to_str().unwrap_or_default()]);
    let untar = Command::new("tar").arg("-xf").arg(&tarball).arg("-C").arg(&scratch).arg("reloader").status();
    assert!(untar.is_ok_and(|s| s.success()), "the image holds /reloader");
    let manifest = chart::parse_documents(&chart::helm(&["get", "manifest", &release, "-n", &ns.name]));
    let account = format!("{release}-reloader");
    chart::installed_controller_reloads(&scratch.join("reloader"), &manifest, &ns.name, &account, &[], &ns).await;
    chart::helm(&["uninstall", &release, "-n", &ns.name, "--wait"]);
}

/// A child process stopped when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// crane as `make image` built it (build/versions.env pins it; build/image.sh caches it).
fn crane() -> PathBuf {
    let pins = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/build/versions.env")).expect("pins");
    let version = pins.lines().find_map(|l| l.strip_prefix("CRANE_VERSION=")).expect("CRANE_VERSION");
    let tools = std::env::var("RELOADER_TOOLS_CACHE")
        .unwrap_or_else(|_| format!("{}/.cache/reloader-rs/tools", std::env::var("HOME").unwrap_or_default()));
    PathBuf::from(tools).join(format!("crane-{version}/crane"))
}

/// The version Cargo.lock pins for `crate_name` (one version of it in the lock file).
fn locked_version(crate_name: &str) -> String {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock")).expect("Cargo.lock");
    let entry = format!("name = \"{crate_name}\"\nversion = \"");
    let start = lock.find(&entry).map(|i| i + entry.len()).unwrap_or_else(|| panic!("{crate_name} not in Cargo.lock"));
    lock[start..].split('"').next().unwrap_or_default().to_owned()
}

/// A fresh folder under target/ for this test's files.
fn tempdir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}
