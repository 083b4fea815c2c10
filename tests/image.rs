//! The image `make image` built (`build/image.sh`), checked as a user's cluster would meet it: an OCI index for
//! linux/amd64 and linux/arm64; each platform's one layer holds a static binary for that machine, the CA roots and
//! no shell; the configs run /reloader as 65534 with the commit in the labels; the amd64 binary taken out of the
//! layer reloads a Deployment on the test control plane, and the arm64 one answers `--version` under qemu-user.
//!
//! Run by `make image-check` (it builds the image first); ignored in `make test`, where building two release
//! binaries more would take a cold CI run past its budget. `RELOADER_IMAGE_DIR` names the image's folder.

mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use common::*;
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

/// A fresh folder under target/ for this test's files.
fn tempdir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}
