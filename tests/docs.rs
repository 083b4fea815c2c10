//! The documents a user reads link where they say: every relative link of the Markdown files names a file of the
//! repository, and every `#anchor` a heading of its target (GitHub's rule: lower case, punctuation dropped except
//! `-` and `_`, spaces to `-`).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files users are pointed at.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> =
        ["README.md", "CONTRIBUTING.md", "BENCHMARKS.md", "RELIABILITY.md", "CHANGELOG.md", "SECURITY.md"]
            .iter()
            .map(|f| repo().join(f))
            .collect();
    docs.push(repo().join("deploy/helm/reloader/README.md"));
    docs.extend(
        std::fs::read_dir(repo().join("bench/results"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md")),
    );
    docs
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut in_code = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            found.insert(slug(line.trim_start_matches('#')));
        }
    }
    found
}

/// The targets of inline links `](target)` outside code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Code spans may hold `](` (a regex, a shell line): drop them first.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            out.push(rest[..end].trim().to_owned());
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn slugs_follow_githubs_rule() {
    assert_eq!(
        slug(" Restart safety and coalescing (beyond upstream)"),
        "restart-safety-and-coalescing-beyond-upstream"
    );
    assert_eq!(slug(" `reloader explain`: what would restart, and why"), "reloader-explain-what-would-restart-and-why");
    assert_eq!(slug(" Not measured / left out"), "not-measured--left-out");
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") || link.is_empty() {
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((link.as_str(), ""));
            let target = if file.is_empty() { doc.clone() } else { doc.parent().unwrap_or(&repo()).join(file) };
            let name = doc.strip_prefix(repo()).unwrap_or(&doc).display().to_string();
            if !target.exists() {
                broken.push(format!("{name}: {link} (no such file)"));
            } else if !anchor.is_empty()
                && target.extension().is_some_and(|x| x == "md")
                && !anchors(&target).contains(anchor)
            {
                broken.push(format!("{name}: {link} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
