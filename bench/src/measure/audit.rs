//! API requests made by the controller under test, from the API server's audit log.
//!
//! The controller runs as its own user (a client certificate minted for the bench), and the audit policy logs
//! only that user: level `Request` for writes to Deployments/StatefulSets/DaemonSets (the patch body tells a
//! pod-template write from a metadata-only one, such as our controller's `applied-hashes` record), level
//! `Metadata` for its other requests and `None` for everyone else, so the API server's extra work is tiny.
//! Counting in the API server measures any binary the same way, whatever its client library.

use std::collections::{BTreeMap, HashSet};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Workload kinds whose template writes are reloads.
const WORKLOAD_RESOURCES: [&str; 3] = ["deployments", "statefulsets", "daemonsets"];

/// The audit policy for `user`.
pub fn policy(user: &str) -> String {
    format!(
        r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Request
    users: ["{user}"]
    verbs: ["patch", "update"]
    resources:
      - group: "apps"
        resources: ["deployments", "statefulsets", "daemonsets"]
  - level: Metadata
    users: ["{user}"]
  - level: None
"#
    )
}

/// One audited request.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Unique per request (a request may log several stages).
    pub audit_id: String,
    /// `get`, `list`, `watch`, `patch`, `create`, …
    pub verb: String,
    /// `objectRef.resource` (with `/subresource`), empty for non-resource URLs.
    pub resource: String,
    /// `user.username`.
    pub user: String,
    /// `responseStatus.code` (0 when absent).
    pub code: u16,
    /// When the API server received it.
    pub received: Timestamp,
    /// For workload writes: whether the body touches `spec.template` (a pod-template write; a pause or
    /// resume touches only `spec.paused`).
    pub touches_template: bool,
}

/// Parses one line of a JSON audit log; `None` for lines that are not audit events.
pub fn parse_line(line: &str) -> Option<Record> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let str_at = |ptr: &str| v.pointer(ptr).and_then(|x| x.as_str()).unwrap_or_default().to_owned();
    let mut resource = str_at("/objectRef/resource");
    let sub = str_at("/objectRef/subresource");
    if !sub.is_empty() {
        resource = format!("{resource}/{sub}");
    }
    let touches_template = v.pointer("/requestObject/spec/template").is_some();
    Some(Record {
        audit_id: v.get("auditID")?.as_str()?.to_owned(),
        verb: v.get("verb")?.as_str()?.to_owned(),
        resource,
        user: str_at("/user/username"),
        code: v.pointer("/responseStatus/code").and_then(serde_json::Value::as_u64).unwrap_or(0) as u16,
        received: str_at("/requestReceivedTimestamp").parse().ok()?,
        touches_template,
    })
}

/// Requests counted over a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiCounts {
    /// All requests.
    pub total: u64,
    /// By verb.
    pub by_verb: BTreeMap<String, u64>,
    /// By `verb resource`.
    pub by_verb_resource: BTreeMap<String, u64>,
    /// Accepted pod-template writes to workloads (the reloads themselves).
    pub template_writes: u64,
    /// Workload writes the API server refused (e.g. 404: the workload was deleted meanwhile, as in S5's churn;
    /// 409: a conflict the controller retries). They roll nothing out, so they are not template writes.
    #[serde(default)]
    pub failed_workload_writes: u64,
    /// Workload writes that leave the pod template alone (our `applied-hashes` record, pause/resume).
    pub metadata_writes: u64,
    /// Event objects written (`events`, core or events.k8s.io).
    pub event_writes: u64,
    /// Any other write.
    pub other_writes: u64,
    /// GET and LIST requests.
    pub reads: u64,
    /// Responses with a 4xx/5xx code.
    pub errors: u64,
    /// Responses 429 Too Many Requests (API Priority and Fairness), among `errors`.
    #[serde(default)]
    pub throttled: u64,
}

fn is_write(verb: &str) -> bool {
    matches!(verb, "create" | "update" | "patch" | "delete" | "deletecollection")
}

/// Counts the requests of `user` received in `[from, to]`, each request once.
pub fn summarize<'a>(
    records: impl IntoIterator<Item = &'a Record>,
    user: &str,
    from: Timestamp,
    to: Timestamp,
) -> ApiCounts {
    let mut seen = HashSet::new();
    let mut c = ApiCounts::default();
    for r in records {
        if r.user != user || r.received < from || r.received > to || !seen.insert(r.audit_id.as_str()) {
            continue;
        }
        c.total += 1;
        *c.by_verb.entry(r.verb.clone()).or_default() += 1;
        *c.by_verb_resource.entry(format!("{} {}", r.verb, r.resource)).or_default() += 1;
        if r.code >= 400 {
            c.errors += 1;
        }
        if r.code == 429 {
            c.throttled += 1;
        }
        let workload = WORKLOAD_RESOURCES.contains(&r.resource.as_str());
        match r.verb.as_str() {
            "get" | "list" => c.reads += 1,
            // NB: an `update` (PUT) carries the whole object; upstream uses it only for kinds it cannot patch.
            "patch" | "update" if workload && r.code >= 400 => c.failed_workload_writes += 1,
            "patch" | "update" if workload && (r.touches_template || r.verb == "update") => c.template_writes += 1,
            "patch" | "update" if workload => c.metadata_writes += 1,
            v if is_write(v) && r.resource == "events" => c.event_writes += 1,
            v if is_write(v) => c.other_writes += 1,
            _ => {}
        }
    }
    c
}

/// Reads and parses an audit log file (lines that do not parse are skipped).
pub fn read_log(path: &std::path::Path) -> Result<Vec<Record>, crate::Error> {
    let text = std::fs::read_to_string(path).map_err(|source| crate::Error::Io { path: path.to_owned(), source })?;
    Ok(text.lines().filter_map(parse_line).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, verb: &str, resource: &str, user: &str, at: &str, code: u16, body: &str) -> String {
        let body = if body.is_empty() { String::new() } else { format!(r#","requestObject":{body}"#) };
        format!(
            r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"{id}","stage":"ResponseComplete","requestURI":"/x","verb":"{verb}","user":{{"username":"{user}","groups":["system:masters"]}},"objectRef":{{"resource":"{resource}","namespace":"n","name":"a","apiGroup":"apps"}},"responseStatus":{{"metadata":{{}},"code":{code}}}{body},"requestReceivedTimestamp":"{at}","stageTimestamp":"{at}"}}"#
        )
    }

    #[test]
    fn parses_the_fields_it_counts() {
        let l = line(
            "id1",
            "patch",
            "deployments",
            "bench",
            "2026-12-02T10:00:00.123456Z",
            200,
            r#"{"spec":{"template":{}}}"#,
        );
        let r = parse_line(&l).expect("parses");
        assert_eq!(r.audit_id, "id1");
        assert_eq!(r.verb, "patch");
        assert_eq!(r.resource, "deployments");
        assert_eq!(r.user, "bench");
        assert_eq!(r.code, 200);
        assert!(r.touches_template);
        assert_eq!(r.received, "2026-12-02T10:00:00.123456Z".parse::<Timestamp>().expect("ts"));
        assert_eq!(parse_line("not json"), None);
        assert_eq!(parse_line("{}"), None);
    }

    #[test]
    fn counts_by_verb_and_kind_of_write_in_the_window_for_one_user() {
        let t = |s: u32| format!("2026-12-02T10:00:{s:02}Z");
        let lines = [
            line("1", "patch", "deployments", "bench", &t(1), 200, r#"{"spec":{"template":{}}}"#),
            line("1", "patch", "deployments", "bench", &t(1), 200, r#"{"spec":{"template":{}}}"#), // same request
            line("2", "patch", "deployments", "bench", &t(2), 200, r#"{"metadata":{"annotations":{}}}"#),
            line("2b", "patch", "deployments", "bench", &t(2), 200, r#"{"spec":{"paused":false}}"#), // resume
            line("3", "create", "events", "bench", &t(3), 201, ""),
            line("4", "list", "configmaps", "bench", &t(4), 200, ""),
            line("5", "get", "deployments", "bench", &t(5), 404, ""),
            line("6", "watch", "secrets", "bench", &t(6), 200, ""),
            line("7", "update", "statefulsets", "bench", &t(7), 409, r#"{"spec":{}}"#),
            line("7b", "patch", "deployments", "bench", &t(7), 404, r#"{"spec":{"template":{}}}"#), // deleted
            line("8", "create", "leases", "bench", &t(8), 201, ""),
            line("9", "patch", "deployments", "someone-else", &t(9), 200, r#"{"spec":{}}"#),
            line("10", "patch", "deployments", "bench", &t(59), 200, r#"{"spec":{}}"#), // after the window
        ];
        let records: Vec<Record> = lines.iter().filter_map(|l| parse_line(l)).collect();
        let c = summarize(&records, "bench", t(0).parse().expect("ts"), t(30).parse().expect("ts"));
        assert_eq!(c.total, 10);
        assert_eq!(c.template_writes, 1);
        assert_eq!(c.failed_workload_writes, 2);
        assert_eq!(c.metadata_writes, 2);
        assert_eq!(c.event_writes, 1);
        assert_eq!(c.other_writes, 1);
        assert_eq!(c.reads, 2);
        assert_eq!(c.errors, 3);
        assert_eq!(c.by_verb.get("patch"), Some(&4));
        assert_eq!(c.by_verb.get("watch"), Some(&1));
        assert_eq!(c.by_verb_resource.get("list configmaps"), Some(&1));
    }

    #[test]
    fn policy_names_the_user() {
        let p = policy("reloader-bench");
        assert!(p.contains(r#"users: ["reloader-bench"]"#));
        assert!(p.trim_end().ends_with("- level: None"));
    }
}
