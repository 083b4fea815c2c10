//! Markdown rendering: a summary table, then one table per scenario (metrics × controllers, plus the
//! ours/baseline ratio when two controllers ran).

use std::fmt::Write as _;

use super::{Report, ScenarioResult, compare};

/// A number for a table cell: integers without decimals, others with up to 3 significant decimals.
pub fn cell(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

fn ratio_cell(v: Option<f64>) -> String {
    v.map(|r| format!("{r:.2}×")).unwrap_or_else(|| "–".into())
}

/// One row per result: the headline numbers.
pub fn summary_table(results: &[ScenarioResult]) -> String {
    let mut out = String::from(
        "| Scenario | Controller | Updates | Expected | Observed | Superseded | Missed | Dup/unexp. | Exact | p50 ms | p99 ms \
         | Writes/reload | GET+LIST | CPU s | RSS sync MiB | RSS peak MiB | Ready ms |\n\
         |---|---|---:|---:|---:|---:|---:|---:|:-:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let a = &r.actions;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.scenario,
            r.controller,
            a.updates,
            a.expected,
            a.observed,
            a.superseded,
            a.missed,
            a.duplicates + a.unexpected + a.rolled_unchanged,
            match (r.exact, r.correct) {
                (true, _) => "yes",
                (false, true) => "no (superseded)",
                (false, false) => "**no**",
            },
            cell(r.latency.p50_ms),
            cell(r.latency.p99_ms),
            cell(r.writes_per_reload),
            cell(r.api.as_ref().map(|x| x.reads as f64)),
            cell(Some(r.process.cpu_seconds)),
            cell(Some(r.process.rss_start_mib)),
            cell(Some(r.process.rss_peak_mib)),
            r.startup_to_ready_ms.iter().map(|v| cell(Some(*v))).collect::<Vec<_>>().join(" / "),
        );
    }
    out
}

/// The section of one scenario: title, commands and the metric table.
pub fn scenario_section(results: &[&ScenarioResult]) -> String {
    let Some(first) = results.first() else { return String::new() };
    let mut out = format!("### {} — {}\n\n", first.scenario, first.title);
    for r in results {
        let _ = writeln!(out, "- {}: `{}`", r.controller, r.command);
    }
    out.push('\n');
    let two = results.len() == 2;
    let names: Vec<&str> = results.iter().map(|r| r.controller.as_str()).collect();
    let _ = write!(out, "| metric | {} |", names.join(" | "));
    out.push_str(if two { " ratio |\n" } else { "\n" });
    out.push_str(&"|---".repeat(1 + results.len() + usize::from(two)));
    out.push_str("|\n");
    for row in compare::rows(results) {
        let vals: Vec<String> = row.values.iter().map(|v| cell(*v)).collect();
        let _ = write!(out, "| {} | {} |", row.metric, vals.join(" | "));
        if two {
            let _ = write!(out, " {} |", ratio_cell(row.ratio));
        }
        out.push('\n');
    }
    if let Some(api) = results.iter().find_map(|r| r.api.as_ref()) {
        let verbs: Vec<String> = api.by_verb_resource.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let _ = writeln!(out, "\nRequests of `{}` by verb and resource: {}.", first.controller, verbs.join(", "));
    }
    out
}

/// The whole report: header, summary, then per-scenario sections (results grouped by scenario, run order).
pub fn render(report: &Report) -> String {
    let mut out = format!(
        "## Benchmark results\n\nMachine: {}\n\nCommand: `{}`\n\nUpdate phase per scenario: {} s.\n\n",
        report.machine, report.command, report.duration_s
    );
    out.push_str(&summary_table(&report.results));
    for f in &report.failures {
        let _ = writeln!(out, "\n**Failed:** {f}");
    }
    let mut order: Vec<&str> = Vec::new();
    for r in &report.results {
        if !order.contains(&r.scenario.as_str()) {
            order.push(&r.scenario);
        }
    }
    for id in order {
        let group: Vec<&ScenarioResult> = report.results.iter().filter(|r| r.scenario == id).collect();
        out.push('\n');
        out.push_str(&scenario_section(&group));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::actions::ActionStats;

    fn result(controller: &str, observed: usize, p50: f64) -> ScenarioResult {
        ScenarioResult {
            scenario: "S1".into(),
            title: "Burst".into(),
            controller: controller.into(),
            command: format!("bin --{controller}"),
            actions: ActionStats { updates: 4, expected: 4, observed, ..Default::default() },
            exact: observed == 4,
            correct: observed == 4,
            latency: crate::measure::stats::summarize(&[p50]),
            startup_to_ready_ms: vec![1500.0],
            ..Default::default()
        }
    }

    #[test]
    fn cells_round_by_magnitude() {
        assert_eq!(cell(Some(3.0)), "3");
        assert_eq!(cell(Some(1234.5)), "1234");
        assert_eq!(cell(Some(12.345)), "12.3");
        assert_eq!(cell(Some(0.456)), "0.46");
        assert_eq!(cell(None), "n/a");
    }

    #[test]
    fn summary_has_one_row_per_result() {
        let t = summary_table(&[result("ours", 4, 10.0), result("baseline", 3, 20.0)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(
            lines[2].starts_with("| S1 | ours | 4 | 4 | 4 | 0 | 0 | 0 | yes | 10 | 10 | n/a | n/a |"),
            "{}",
            lines[2]
        );
        assert!(lines[3].contains("| **no** |"));
        assert!(lines[3].ends_with("| 1500 |"));
    }

    #[test]
    fn scenario_section_shows_ratios_for_two_controllers() {
        let (a, b) = (result("ours", 4, 10.0), result("baseline", 4, 20.0));
        let s = scenario_section(&[&a, &b]);
        assert!(s.starts_with("### S1 — Burst\n\n- ours: `bin --ours`\n- baseline: `bin --baseline`\n"));
        assert!(s.contains("| metric | ours | baseline | ratio |\n|---|---|---|---|\n"));
        assert!(s.contains("| latency p50 (ms) | 10 | 20 | 0.50× |"), "{s}");
        assert!(s.contains("| API requests | n/a | n/a | – |"));
    }
}
