//! Alert payloads, byte-compatible with upstream v1 (`internal/pkg/alerts`, reloader-behaviour.md §6.2).

use serde::Serialize;
use serde_json::json;

use crate::rules::keyprints::ChangedKeys;

/// Slack attachment, fields in upstream's order.
#[derive(Serialize)]
struct SlackAttachment<'a> {
    color: &'a str,
    author_name: &'a str,
    text: &'a str,
}

#[derive(Serialize)]
struct SlackMessage<'a> {
    attachments: [SlackAttachment<'a>; 1],
}

/// Where alerts go (`ALERT_SINK`, trimmed and lower-cased; anything unknown means a raw webhook).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// Slack incoming webhook.
    Slack,
    /// Microsoft Teams.
    Teams,
    /// Google Chat.
    GChat,
    /// Any other endpoint: the message as plain text.
    Raw,
}

impl Sink {
    /// upstream v1 parsing.
    pub fn parse(value: &str) -> Self {
        match value.trim().to_ascii_lowercase().as_str() {
            "slack" => Self::Slack,
            "teams" => Self::Teams,
            "gchat" => Self::GChat,
            _ => Self::Raw,
        }
    }

    /// Whether an HTTP status counts as delivered (upstream: Slack and raw accept < 400, Teams and GChat 200).
    pub fn accepts(self, status: u16) -> bool {
        match self {
            Self::Slack | Self::Raw => status < 400,
            Self::Teams | Self::GChat => status == 200,
        }
    }
}

/// One reload, as an alert describes it.
#[derive(Clone, Copy, Debug)]
pub struct ReloadAlert<'a> {
    /// The resource's name.
    pub resource: &'a str,
    /// `CONFIGMAP`, `SECRET`, `SECRETPROVIDERCLASS`.
    pub resource_type: &'a str,
    /// The workload's name.
    pub workload: &'a str,
    /// The workload's kind.
    pub kind: &'a str,
    /// Their namespace.
    pub namespace: &'a str,
    /// The keys whose change it applies, when known (names only; ours).
    pub changed: Option<&'a ChangedKeys>,
}

/// upstream v1's message; `additional` (set, even to "") prefixes `"<info> : "`. Ours appends
/// ` (changed keys: a, b)` when the keys are known.
pub fn message(r: &ReloadAlert<'_>, additional: Option<&str>) -> String {
    let ReloadAlert { resource, resource_type, workload, kind, namespace, changed } = *r;
    let mut msg = format!(
        "Reloader detected changes in *{resource}* of type *{resource_type}* in namespace *{namespace}*. Hence reloaded *{workload}* of type *{kind}* in namespace *{namespace}*"
    );
    if let Some(keys) = changed.filter(|c| !c.is_empty()) {
        msg.push_str(&format!(" (changed keys: {keys})"));
    }
    match additional {
        Some(info) => format!("{info} : {msg}"),
        None => msg,
    }
}

/// The request body and its content type for `sink`.
pub fn body(sink: Sink, message: &str) -> (&'static str, String) {
    match sink {
        Sink::Slack => {
            let m = SlackMessage {
                attachments: [SlackAttachment { color: "good", author_name: "Reloader", text: message }],
            };
            ("application/json", serde_json::to_string(&m).unwrap_or_default())
        }
        Sink::Teams | Sink::GChat => ("application/json", json!({"text": message}).to_string()),
        Sink::Raw => ("text/plain", message.replace('*', "")),
    }
}

/// upstream v2's `--alert-structured` raw body: one JSON object per reload (no markdown).
pub fn structured(r: &ReloadAlert<'_>, additional: Option<&str>, timestamp: &str) -> String {
    let ReloadAlert { resource, resource_type, workload, kind, namespace, changed } = *r;
    let resource_kind = match resource_type {
        "CONFIGMAP" => "ConfigMap",
        "SECRET" => "Secret",
        _ => "SecretProviderClass",
    };
    let mut body = json!({
        "event": "reload",
        "workloadKind": kind, "workloadName": workload, "workloadNamespace": namespace,
        "resourceKind": resource_kind, "resourceName": resource, "resourceNamespace": namespace,
        "timestamp": timestamp,
    });
    if let Some(info) = additional {
        body["additional"] = json!(info);
    }
    if let Some(keys) = changed {
        body["changedKeys"] = json!(keys.names);
        body["removedKeys"] = json!(keys.removed);
    }
    body.to_string()
}

/// upstream v1's `--webhook-url` body, plus (ours) the resource and the keys its change touched, when known.
pub fn webhook_body(kind: &str, name: &str, namespace: &str, changed: Option<&ChangedKeys>) -> String {
    let mut body = json!({"webhook": "update successful", "resourceKind": kind, "resourceName": name,
                          "resourceNamespace": namespace});
    if let Some(keys) = changed {
        body["changedKeys"] = json!(keys.names);
        body["removedKeys"] = json!(keys.removed);
    }
    body.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSG: &str = "Reloader detected changes in *cfg* of type *CONFIGMAP* in namespace *ns*. Hence reloaded *web* of type *Deployment* in namespace *ns*";

    fn alert<'a>(resource: &'a str, resource_type: &'a str, changed: Option<&'a ChangedKeys>) -> ReloadAlert<'a> {
        ReloadAlert { resource, resource_type, workload: "web", kind: "Deployment", namespace: "ns", changed }
    }

    #[test]
    fn structured_raw_alerts_carry_v2s_fields_and_the_changed_keys() {
        let body = structured(&alert("db", "SECRET", None), Some("prod"), "2026-12-02T10:00:00Z");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&body).expect("json"),
            json!({"event": "reload", "workloadKind": "Deployment", "workloadName": "web", "workloadNamespace": "ns",
                   "resourceKind": "Secret", "resourceName": "db", "resourceNamespace": "ns",
                   "timestamp": "2026-12-02T10:00:00Z", "additional": "prod"})
        );
        let keys = ChangedKeys { names: vec!["password".into()], removed: 1 };
        let body = structured(&alert("db", "SECRET", Some(&keys)), None, "t");
        let value: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!((&value["changedKeys"], &value["removedKeys"]), (&json!(["password"]), &json!(1)));
    }

    #[test]
    fn message_and_additional_info_match_upstream() {
        assert_eq!(message(&alert("cfg", "CONFIGMAP", None), None), MSG);
        assert_eq!(message(&alert("cfg", "CONFIGMAP", None), Some("prod")), format!("prod : {MSG}"));
        assert_eq!(message(&alert("cfg", "CONFIGMAP", None), Some("")), format!(" : {MSG}"), "upstream: set but empty");
        let keys = ChangedKeys { names: vec!["a".into(), "b".into()], removed: 0 };
        assert_eq!(message(&alert("cfg", "CONFIGMAP", Some(&keys)), None), format!("{MSG} (changed keys: a, b)"));
    }

    #[test]
    fn the_webhook_body_keeps_upstreams_field_and_names_the_resource_and_keys() {
        let keys = ChangedKeys { names: vec!["a".into()], removed: 0 };
        let body: serde_json::Value =
            serde_json::from_str(&webhook_body("ConfigMap", "cfg", "ns", Some(&keys))).expect("json");
        assert_eq!(
            body,
            json!({"webhook": "update successful", "resourceKind": "ConfigMap", "resourceName": "cfg",
                   "resourceNamespace": "ns", "changedKeys": ["a"], "removedKeys": 0})
        );
    }

    #[test]
    fn bodies_per_sink_match_upstream() {
        assert_eq!(
            body(Sink::Slack, "m"),
            (
                "application/json",
                r#"{"attachments":[{"color":"good","author_name":"Reloader","text":"m"}]}"#.to_owned()
            )
        );
        assert_eq!(body(Sink::Teams, "m"), ("application/json", r#"{"text":"m"}"#.to_owned()));
        assert_eq!(body(Sink::GChat, "m"), ("application/json", r#"{"text":"m"}"#.to_owned()));
        assert_eq!(body(Sink::Raw, MSG).1, MSG.replace('*', ""));
    }

    #[test]
    fn sinks_parse_like_upstream_and_judge_statuses() {
        assert_eq!(Sink::parse(" Slack "), Sink::Slack);
        assert_eq!(Sink::parse("webhook"), Sink::Raw);
        assert_eq!(Sink::parse(""), Sink::Raw);
        assert!(Sink::Slack.accepts(204) && !Sink::Slack.accepts(400));
        assert!(Sink::Teams.accepts(200) && !Sink::Teams.accepts(202));
    }
}
