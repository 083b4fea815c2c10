//! A hand-written SVG plot of latency distributions: the empirical CDF of each controller's reload latencies
//! on a logarithmic time axis (1 ms … 10 s), one line per controller.

use std::fmt::Write as _;

const W: f64 = 640.0;
const H: f64 = 360.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
/// Axis range in log10(ms): 0.1 ms … 10 s.
const LOG_MIN: f64 = -1.0;
const LOG_MAX: f64 = 4.0;
const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// x position of a latency in ms (clamped to the axis).
pub fn x_of(ms: f64) -> f64 {
    let l = ms.max(1e-3).log10().clamp(LOG_MIN, LOG_MAX);
    LEFT + (l - LOG_MIN) / (LOG_MAX - LOG_MIN) * (W - LEFT - RIGHT)
}

/// y position of a cumulative fraction (0 at the bottom axis, 1 at the top).
pub fn y_of(fraction: f64) -> f64 {
    TOP + (1.0 - fraction.clamp(0.0, 1.0)) * (H - TOP - BOTTOM)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The CDF points (x, y) of `samples`: a step per sample.
pub fn cdf_points(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    let mut pts = Vec::with_capacity(sorted.len() * 2);
    for (i, v) in sorted.iter().enumerate() {
        pts.push((x_of(*v), y_of(i as f64 / n)));
        pts.push((x_of(*v), y_of((i + 1) as f64 / n)));
    }
    pts
}

/// The plot for one scenario: `series` are (controller label, latency samples in ms).
pub fn latency_cdf(title: &str, series: &[(&str, &[f64])]) -> String {
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>
"#,
        W / 2.0,
        escape(title)
    );
    // Grid and axes.
    for decade in (LOG_MIN as i32)..=(LOG_MAX as i32) {
        let x = x_of(10f64.powi(decade));
        let label = match decade {
            d if d < 0 => format!("{}", 10f64.powi(d)),
            d if d < 3 => format!("{}", 10i64.pow(d.unsigned_abs())),
            d => format!("{}s", 10i64.pow(d.unsigned_abs() - 3)),
        };
        let label = if decade < 3 { format!("{label}ms") } else { label };
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 16.0
        );
    }
    for q in [0.0, 0.5, 0.95, 0.99, 1.0] {
        let y = y_of(q);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{q}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">reload latency (update sent → template change seen), log scale</text>"##,
        W / 2.0,
        H - 12.0
    );
    for (i, (label, samples)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let pts: Vec<String> = cdf_points(samples).iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        if !pts.is_empty() {
            let _ =
                writeln!(s, r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#, pts.join(" "));
        }
        let ly = TOP + 16.0 + 16.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="12" height="3" fill="{colour}"/><text x="{:.1}" y="{:.1}">{} (n={})</text>"#,
            LEFT + 10.0,
            ly - 4.0,
            LEFT + 28.0,
            ly,
            escape(label),
            samples.len()
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_maps_decades_evenly_and_clamps() {
        assert_eq!(x_of(0.1), LEFT);
        assert_eq!(x_of(10_000.0), W - RIGHT);
        assert_eq!(x_of(1e9), W - RIGHT);
        assert_eq!(x_of(0.0), LEFT);
        let step = (W - LEFT - RIGHT) / 5.0;
        assert!((x_of(1.0) - (LEFT + step)).abs() < 1e-9);
        assert_eq!(y_of(1.0), TOP);
        assert_eq!(y_of(0.0), H - BOTTOM);
    }

    #[test]
    fn cdf_steps_up_once_per_sample() {
        let pts = cdf_points(&[10.0, 1.0]);
        assert_eq!(pts.len(), 4);
        assert_eq!(pts[0], (x_of(1.0), y_of(0.0)));
        assert_eq!(pts[1], (x_of(1.0), y_of(0.5)));
        assert_eq!(pts[3], (x_of(10.0), y_of(1.0)));
    }

    #[test]
    fn plot_has_a_line_and_legend_per_series() {
        let svg = latency_cdf("S1 <burst>", &[("ours", &[1.0, 2.0]), ("baseline", &[])]);
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("S1 &lt;burst&gt;"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("ours (n=2)") && svg.contains("baseline (n=0)"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }
}
