//! CPU time and memory of the controller process, read from `/proc/<pid>/stat` and `/proc/<pid>/status`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One reading of a process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Offset from the scenario start.
    pub at: Duration,
    /// User + system CPU time in clock ticks.
    pub cpu_ticks: u64,
    /// Resident set size, KiB (`VmRSS`).
    pub rss_kib: u64,
    /// Peak resident set size since the process started, KiB (`VmHWM`).
    pub hwm_kib: u64,
}

/// CPU ticks (utime + stime) from the text of `/proc/<pid>/stat`. The command name (field 2) may contain
/// spaces and parentheses, so fields are counted after its closing `)`.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, so utime (14) and stime (15) are at offsets 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// `VmRSS` and `VmHWM` (KiB) from the text of `/proc/<pid>/status`.
pub fn parse_status_memory(status: &str) -> Option<(u64, u64)> {
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Reads one sample of `pid`; `None` once the process is gone.
pub fn sample(pid: u32, at: Duration) -> Option<Sample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let cpu_ticks = parse_stat_cpu_ticks(&stat)?;
    let (rss_kib, hwm_kib) = parse_status_memory(&status)?;
    Some(Sample { at, cpu_ticks, rss_kib, hwm_kib })
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on every Linux this runs on if that fails).
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

/// CPU and memory over a measurement window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessStats {
    /// CPU seconds used in the window (all controller processes of the run, e.g. both sides of a restart).
    pub cpu_seconds: f64,
    /// Largest `VmHWM` seen: the peak RSS since process start (startup included), MiB.
    pub rss_peak_mib: f64,
    /// Mean of the `VmRSS` samples in the window, MiB.
    pub rss_avg_mib: f64,
    /// `VmRSS` at the end of the window, MiB.
    pub rss_end_mib: f64,
    /// `VmRSS` at the start of the window, MiB.
    pub rss_start_mib: f64,
}

/// Summarises the samples of each process (one slice per process, in start order) over `[from, to]`.
pub fn summarize(processes: &[Vec<Sample>], from: Duration, to: Duration, ticks_per_second: u64) -> ProcessStats {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let mut cpu_ticks = 0;
    let mut rss = Vec::new();
    let mut peak = 0;
    for samples in processes {
        let window: Vec<&Sample> = samples.iter().filter(|s| s.at >= from && s.at <= to).collect();
        // CPU used in the window: from the last sample at or before its start (or the process's first) to the
        // last sample in it.
        let before = samples.iter().rev().find(|s| s.at <= from).or_else(|| samples.first());
        if let (Some(b), Some(last)) = (before, window.last()) {
            cpu_ticks += last.cpu_ticks.saturating_sub(b.cpu_ticks);
        }
        rss.extend(window.iter().map(|s| s.rss_kib));
        peak = peak.max(samples.iter().filter(|s| s.at <= to).map(|s| s.hwm_kib).max().unwrap_or(0));
    }
    let avg = if rss.is_empty() { 0.0 } else { rss.iter().sum::<u64>() as f64 / rss.len() as f64 };
    ProcessStats {
        cpu_seconds: cpu_ticks as f64 / ticks_per_second.max(1) as f64,
        rss_peak_mib: mib(peak),
        rss_avg_mib: avg / 1024.0,
        rss_end_mib: rss.last().copied().map(mib).unwrap_or(0.0),
        rss_start_mib: rss.first().copied().map(mib).unwrap_or(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let stat = "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1200 0 0 0 350 75 0 0 20 0 8 0 123 456 789";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(425));
        assert_eq!(parse_stat_cpu_ticks("garbage"), None);
    }

    #[test]
    fn status_gives_rss_and_high_water_mark() {
        let status = "Name:\treloader\nVmPeak:\t  99999 kB\nVmHWM:\t   30000 kB\nVmRSS:\t   25600 kB\nThreads:\t5\n";
        assert_eq!(parse_status_memory(status), Some((25600, 30000)));
        assert_eq!(parse_status_memory("Name: x\n"), None);
    }

    fn s(at_ms: u64, cpu: u64, rss: u64, hwm: u64) -> Sample {
        Sample { at: Duration::from_millis(at_ms), cpu_ticks: cpu, rss_kib: rss, hwm_kib: hwm }
    }

    #[test]
    fn window_summary_spans_restarted_processes() {
        let first = vec![s(0, 10, 1024, 2048), s(1000, 20, 2048, 2048), s(2000, 50, 3072, 3072)];
        let second = vec![s(2500, 5, 1024, 1024), s(3000, 15, 1024, 1024), s(9000, 99, 9999, 9999)];
        let st = summarize(&[first, second], Duration::from_millis(1000), Duration::from_millis(3000), 100);
        // (50 - 20) + (15 - 5) ticks at 100/s.
        assert_eq!(st.cpu_seconds, 0.4);
        assert_eq!(st.rss_peak_mib, 3.0);
        // RSS samples in the window: 2048, 3072, 1024, 1024 KiB.
        assert_eq!(st.rss_avg_mib, 1.75);
        assert_eq!(st.rss_start_mib, 2.0);
        assert_eq!(st.rss_end_mib, 1.0);
    }
}
