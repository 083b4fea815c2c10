//! Alert payloads, byte-compatible with upstream v1 (`internal/pkg/alerts`, reloader-behaviour.md §6.2).

use serde::Serialize;
use serde_json::json;

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

/// upstream v1's message; `additional` (set, even to "") prefixes `"<info> : "`.
pub fn message(
    resource: &str,
    resource_type: &str,
    workload: &str,
    kind: &str,
    namespace: &str,
    additional: Option<&str>,
) -> String {
    let msg = format!(
        "Reloader detected changes in *{resource}* of type *{resource_type}* in namespace *{namespace}*. Hence reloaded *{workload}* of type *{kind}* in namespace *{namespace}*"
    );
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
pub fn structured(
    resource: &str,
    resource_type: &str,
    workload: &str,
    kind: &str,
    namespace: &str,
    additional: Option<&str>,
    timestamp: &str,
) -> String {
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
    body.to_string()
}

/// upstream v1's `--webhook-url` body, sent instead of reloading.
pub const WEBHOOK_BODY: &str = r#"{"webhook":"update successful"}"#;

#[cfg(test)]
mod tests {
    use super::*;

    const MSG: &str = "Reloader detected changes in *cfg* of type *CONFIGMAP* in namespace *ns*. Hence reloaded *web* of type *Deployment* in namespace *ns*";

    #[test]
    fn structured_raw_alerts_carry_v2s_fields() {
        let body = structured("db", "SECRET", "web", "Deployment", "ns", Some("prod"), "2026-12-02T10:00:00Z");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&body).expect("json"),
            json!({"event": "reload", "workloadKind": "Deployment", "workloadName": "web", "workloadNamespace": "ns",
                   "resourceKind": "Secret", "resourceName": "db", "resourceNamespace": "ns",
                   "timestamp": "2026-12-02T10:00:00Z", "additional": "prod"})
        );
    }

    #[test]
    fn message_and_additional_info_match_upstream() {
        assert_eq!(message("cfg", "CONFIGMAP", "web", "Deployment", "ns", None), MSG);
        assert_eq!(message("cfg", "CONFIGMAP", "web", "Deployment", "ns", Some("prod")), format!("prod : {MSG}"));
        assert_eq!(
            message("cfg", "CONFIGMAP", "web", "Deployment", "ns", Some("")),
            format!(" : {MSG}"),
            "upstream: set but empty"
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
