//! The documents a user reads link where they say: every relative link of the Markdown files names a file of the
//! repository, and every `#anchor` a heading of its target (GitHub's rule: lower case, punctuation dropped except
//! `-` and `_`, spaces to `-`); so do the alerts' runbook links to this repository on GitHub. The README stays
//! short, and a headline figure has one value: it is stated in BENCHMARKS.md's headline table, rows of which the
//! README copies verbatim, and no other user document states one in its own words.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use regex::Regex;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files of a folder of the repository (not its subfolders), in name order.
fn markdown_in(folder: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(repo().join(folder))
        .unwrap_or_else(|e| panic!("{folder}: {e}"))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    found.sort();
    found
}

/// The Markdown files users are pointed at.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> =
        ["README.md", "CONTRIBUTING.md", "BENCHMARKS.md", "RELIABILITY.md", "CHANGELOG.md", "SECURITY.md"]
            .iter()
            .map(|f| repo().join(f))
            .collect();
    docs.push(repo().join("deploy/helm/reloader/README.md"));
    docs.extend(markdown_in("docs"));
    docs.extend(markdown_in("bench/results"));
    docs
}

/// The documents written for users of the controller, which quote headline figures only by copying
/// BENCHMARKS.md's rows: the README, the pages under `docs/` and the chart's README.
fn user_documents() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md"), repo().join("deploy/helm/reloader/README.md")];
    docs.extend(markdown_in("docs"));
    docs
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn name(path: &Path) -> String {
    path.strip_prefix(repo()).unwrap_or(path).display().to_string()
}

/// The lines of a Markdown text outside code blocks, with their line numbers (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut in_code = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if !in_code {
            out.push((i + 1, line));
        }
    }
    out
}

/// A line without its code spans (a flag's default such as `200ms` is not a measurement).
fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
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
    prose_lines(&read(path))
        .into_iter()
        .filter(|(_, line)| line.starts_with('#'))
        .map(|(_, line)| slug(line.trim_start_matches('#')))
        .collect()
}

/// The targets of inline links `](target)` outside code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (_, line) in prose_lines(text) {
        // Code spans may hold `](` (a regex, a shell line): drop them first.
        let prose = without_code_spans(line);
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
        for link in links(&read(&doc)) {
            if link.contains("://") || link.starts_with("mailto:") || link.is_empty() {
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((link.as_str(), ""));
            let target = if file.is_empty() { doc.clone() } else { doc.parent().unwrap_or(&repo()).join(file) };
            let doc_name = name(&doc);
            if !target.exists() {
                broken.push(format!("{doc_name}: {link} (no such file)"));
            } else if !anchor.is_empty()
                && target.extension().is_some_and(|x| x == "md")
                && !anchors(&target).contains(anchor)
            {
                broken.push(format!("{doc_name}: {link} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Where this repository's files are on GitHub: the alerts' runbook links start so.
const GITHUB_FILES: &str = "https://github.com/reloader-rs/reloader/blob/main/";

#[test]
fn the_alerts_runbook_links_name_a_page_and_heading_of_the_repository() {
    let rules = repo().join("deploy/helm/reloader/files/prometheus-rules.yaml");
    let urls: Vec<String> = read(&rules)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: "))
        .filter_map(|url| url.strip_prefix(GITHUB_FILES))
        .map(str::to_owned)
        .collect();
    assert!(!urls.is_empty(), "no runbook link into {GITHUB_FILES} in {}", name(&rules));
    let broken: Vec<&String> = urls
        .iter()
        .filter(|url| {
            let (file, anchor) = url.split_once('#').unwrap_or((url.as_str(), ""));
            let target = repo().join(file);
            !target.exists() || (!anchor.is_empty() && !anchors(&target).contains(anchor))
        })
        .collect();
    assert!(broken.is_empty(), "runbook links to no such file or heading: {broken:?}");
}

/// A README a user can read through: what and why, install, the annotation and flag tables, links to `docs/`.
const README_MAX_LINES: usize = 300;

#[test]
fn the_readme_fits_on_a_desk() {
    let lines = read(&repo().join("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines (at most {README_MAX_LINES}: move a topic to docs/)"
    );
}

/// BENCHMARKS.md's headline table: each row by its first cell (the figure's name), as written.
fn headline_rows() -> BTreeMap<String, String> {
    let text = read(&repo().join("BENCHMARKS.md"));
    let section =
        text.split("\n## Headline figures\n").nth(1).expect("BENCHMARKS.md has a '## Headline figures' section");
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Figure |"))
        .map(|l| (first_cell(l), l.trim_end().to_owned()))
        .collect()
}

fn first_cell(row: &str) -> String {
    row.split('|').nth(1).unwrap_or_default().trim().to_owned()
}

#[test]
fn headline_figures_are_stated_in_benchmarks_and_only_copied_elsewhere() {
    let rows = headline_rows();
    assert!(rows.len() >= 8, "BENCHMARKS.md's headline table has {} rows", rows.len());
    // A measured figure in a document's own words: memory, a ratio, a percentile's latency.
    let figure = Regex::new(r"\d[\d.,]*\s?MiB|÷\s?\d|\bp(50|95|99)\b[^|;]{0,40}?\d[\d.,]*\s?ms").expect("regex");
    let mut problems = Vec::new();
    let mut copied = 0;
    for doc in user_documents() {
        for (n, line) in prose_lines(&read(&doc)) {
            let at = format!("{}:{n}", name(&doc));
            if let Some(row) = line.starts_with('|').then(|| rows.get(&first_cell(line))).flatten() {
                copied += 1;
                if line.trim_end() != row {
                    problems.push(format!(
                        "{at}: the row '{}' differs from BENCHMARKS.md's:\n  {line}\n  {row}",
                        first_cell(line)
                    ));
                }
            } else if let Some(m) = figure.find(&without_code_spans(line)) {
                problems.push(format!("{at}: '{}' states a figure: copy a headline row or link to it", m.as_str()));
            }
        }
    }
    assert!(problems.is_empty(), "headline figures:\n{}", problems.join("\n"));
    assert!(copied > 0, "the README's Why switch copies no headline row");
}
