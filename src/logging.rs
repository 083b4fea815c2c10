//! Log output: text lines, or JSON lines with upstream's (logrus) field names — `level` in lower case (`info`,
//! `warning`), `msg`, `time` (RFC 3339) — so log pipelines and alerts written for upstream keep parsing them.
//! Structured fields follow as top-level keys.

use std::fmt;

use serde_json::{Map, Value};
use tracing::{Event, Level, Subscriber, field::Field};
use tracing_subscriber::{
    field::Visit,
    fmt::{FmtContext, FormatEvent, FormatFields, format::Writer},
    registry::LookupSpan,
};

/// Formats one event as a logrus-style JSON object.
pub struct LogrusJson;

/// logrus's level names.
fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warning",
        Level::ERROR => "error",
    }
}

/// Collects an event's fields; `message` becomes `msg`.
struct Fields(Map<String, Value>);

impl Fields {
    fn insert(&mut self, field: &Field, value: Value) {
        let name = if field.name() == "message" { "msg" } else { field.name() };
        self.0.insert(name.to_owned(), value);
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.insert(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.insert(field, Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.insert(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.insert(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.insert(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.insert(field, value.into());
    }
}

/// One JSON line for an event at `level` with `fields`, stamped `time`.
fn line(level: &Level, time: jiff::Timestamp, fields: Map<String, Value>) -> String {
    let mut out = Map::new();
    out.insert("level".into(), level_name(level).into());
    out.insert("time".into(), jiff::Timestamp::from_second(time.as_second()).unwrap_or(time).to_string().into());
    out.extend(fields);
    Value::Object(out).to_string()
}

impl<S, N> FormatEvent<S, N> for LogrusJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        writeln!(writer, "{}", line(event.metadata().level(), jiff::Timestamp::now(), fields.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_use_logrus_field_names() {
        let mut fields = Map::new();
        fields.insert("msg".into(), "Starting Reloader".into());
        fields.insert("namespace".into(), "shop".into());
        let time: jiff::Timestamp = "2026-12-02T10:00:00.5Z".parse().expect("time");
        let text = line(&Level::WARN, time, fields);
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"level": "warning", "msg": "Starting Reloader", "time": "2026-12-02T10:00:00Z", "namespace": "shop"})
        );
    }
}
