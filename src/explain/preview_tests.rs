//! Unit tests of the proposed-content preview: kubectl's source shapes and the key diff.

use super::*;

fn content(pairs: &[(&str, &str)]) -> Content {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec())).collect()
}

fn strings(keys: &[&str]) -> Vec<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

#[test]
fn the_diff_names_changed_added_and_removed_keys() {
    let current = content(&[("a", "1"), ("b", "2"), ("c", "3")]);
    let new = content(&[("a", "1"), ("b", "20"), ("d", "4")]);
    let change = diff(&current, &new);
    assert_eq!(change, ContentChange { changed: strings(&["b"]), added: strings(&["d"]), removed: strings(&["c"]) });
    assert_eq!(change.to_string(), "changed b; added d; removed c");
    let same = diff(&current, &current);
    assert!(same.is_empty());
    assert_eq!(same.to_string(), "no key changes");
}

#[test]
fn a_configmap_content_joins_data_and_binary_data() {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cfg"}, "data": {"a": "1"}, "binaryData": {"b": "AAE="}
    }))
    .expect("configmap");
    let got = configmap_content(&cm);
    assert_eq!(got.get("a"), Some(&b"1".to_vec()));
    assert_eq!(got.get("b"), Some(&vec![0u8, 1]));
}

#[test]
fn literals_and_files_read_as_kubectl_reads_them() {
    let dir = std::env::temp_dir().join(format!("reloader-preview-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("conf/sub")).expect("dirs");
    std::fs::write(dir.join("conf/app.yaml"), "x: 1").expect("write");
    std::fs::write(dir.join("conf/log.yaml"), "y: 2").expect("write");
    std::fs::write(dir.join("conf/sub/skipped"), "z").expect("write");
    std::fs::write(dir.join("tls.crt"), "cert").expect("write");
    let path = |p: &str| dir.join(p).to_string_lossy().into_owned();

    let got = read_sources(
        &["mode=fast".to_owned(), "empty=".to_owned(), "eq=a=b".to_owned()],
        &[path("conf"), format!("ca.crt={}", path("tls.crt")), path("tls.crt")],
    )
    .expect("sources");
    let expected = content(&[
        ("mode", "fast"),
        ("empty", ""),
        ("eq", "a=b"),
        ("app.yaml", "x: 1"),
        ("log.yaml", "y: 2"),
        ("ca.crt", "cert"),
        ("tls.crt", "cert"),
    ]);
    assert_eq!(got, expected);

    let err = |literals: &[&str], files: &[String]| {
        let literals: Vec<String> = literals.iter().map(|l| (*l).to_owned()).collect();
        read_sources(&literals, files).expect_err("refused").to_string()
    };
    assert_eq!(err(&["novalue"], &[]), "invalid literal source \"novalue\", expected key=value");
    assert!(err(&["a b=1"], &[]).starts_with("\"a b\" is not a valid key name"));
    assert!(err(&["..x=1"], &[]).starts_with("\"..x\" is not a valid key name"));
    assert_eq!(
        err(&["tls.crt=1"], &[path("tls.crt")]),
        "cannot add key \"tls.crt\", another key by that name already exists"
    );
    assert!(err(&[], &[format!("k={}", path("conf"))]).starts_with("cannot give a key name for a directory path"));
    assert!(err(&[], &[path("missing")]).starts_with(&format!("reading {}: ", path("missing"))));
    let _ = std::fs::remove_dir_all(&dir);
}
