//! The `reloader.stakater.com/reload-window` annotation: when a workload's reloads may happen (issue 17:
//! "certificates rotate at 14:00 but production Deployments roll between 02:00 and 04:00"). A change to a
//! ConfigMap or Secret only rolls the workload while the window is open; outside it the reload waits until
//! the window opens. Pure: the caller passes `now`.
//!
//! Format: one or more windows separated by `;`, each `<days> <HH:MM>-<HH:MM> [<time zone>]`.
//!
//! - `<days>`: comma-separated day names or ranges of `Mon Tue Wed Thu Fri Sat Sun` (case-insensitive),
//!   e.g. `Mon-Fri`, `Sat,Sun`, `Mon,Wed-Fri`; ranges may wrap around the week (`Fri-Mon` is Friday to
//!   Monday); `*` or `daily` means every day.
//! - Times are 24-hour `HH:MM`, from `00:00` to `23:59`; an end may also be `24:00` (midnight). The start is
//!   inclusive, the end exclusive. An end earlier than the start crosses midnight: `Fri 22:00-02:00` is open
//!   from Friday 22:00 to Saturday 02:00 (the days name the day the window starts). A start equal to its end
//!   is an error; use `00:00-24:00` for a whole day.
//! - The time zone is an IANA name (`Europe/Berlin`, `America/New_York`) or `UTC`, the default. Local times
//!   follow the zone's daylight saving time rules: a time skipped when the clocks go forward moves later by
//!   the jump (02:30 becomes 03:30), and a time that happens twice when they go back means its first time.
//! - Whitespace around parts is ignored; an empty window (e.g. a trailing `;`) is an error.
//!
//! Examples:
//!
//! - `Mon-Fri 02:00-04:00 Europe/Berlin`: weekdays from 02:00 to 04:00 Berlin time.
//! - `Sat,Sun 00:00-24:00`: all weekend, UTC.
//! - `Fri 22:00-02:00 America/New_York`: Friday night to Saturday 02:00 New York time.
//! - `Mon-Thu 02:00-04:00; Fri-Sun 10:00-16:00 UTC`: two windows; either being open allows a reload.
//! - `* 01:00-05:00`: every night, UTC.

use std::fmt;

use jiff::{Timestamp, civil, tz::TimeZone};

const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const DAY_HELP: &str = "use Mon Tue Wed Thu Fri Sat Sun, ranges like Mon-Fri, or *";
const MINUTES_PER_DAY: u16 = 24 * 60;

/// A parsed `reload-window` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReloadWindow {
    windows: Vec<Window>,
}

/// A `reload-window` value that could not be parsed; the message is one line and names the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WindowError(String);

/// One `<days> <HH:MM>-<HH:MM> [<time zone>]`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Window {
    days: Days,
    /// Minutes after midnight, 0 to 1439.
    start: u16,
    /// Minutes after midnight, 0 to 1440 (`24:00`); at or before `start` crosses midnight.
    end: u16,
    tz: TimeZone,
    /// The zone's name as displayed.
    zone: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Days {
    /// `*` or `daily`.
    Every,
    /// Inclusive ranges of Monday-based day numbers (0 = Mon); `first > last` wraps around the week.
    List(Vec<(u8, u8)>),
}

impl Days {
    fn contains(&self, day: u8) -> bool {
        match self {
            Days::Every => true,
            Days::List(ranges) => {
                ranges.iter().any(|&(a, b)| if a <= b { a <= day && day <= b } else { day >= a || day <= b })
            }
        }
    }
}

impl ReloadWindow {
    /// Parses the annotation's value. Errors are one-line, user-facing, and name the offending part.
    pub fn parse(value: &str) -> Result<Self, WindowError> {
        if value.trim().is_empty() {
            return Err(WindowError("empty value (expected e.g. \"Mon-Fri 02:00-04:00 Europe/Berlin\")".into()));
        }
        let windows = value.split(';').map(|part| parse_window(part.trim(), value)).collect::<Result<_, _>>()?;
        Ok(Self { windows })
    }

    /// Whether a reload may happen at `now`.
    pub fn is_open(&self, now: Timestamp) -> bool {
        self.closes_at(now).is_some()
    }

    /// When it opens next, at or after `now` (`now` itself when open). `None` only if it never opens in the
    /// week ahead, which a parsed value cannot do.
    pub fn next_open(&self, now: Timestamp) -> Option<Timestamp> {
        let intervals = self.intervals(now);
        let open = intervals.iter().any(|&(start, end)| start <= now && now < end);
        if open { Some(now) } else { intervals.iter().map(|&(start, _)| start).find(|&start| start > now) }
    }

    /// When the window containing `now` closes (`None` when closed now). Overlapping and back-to-back windows
    /// count as one; a value open around the clock (`* 00:00-24:00`) gives a time about a week ahead.
    pub fn closes_at(&self, now: Timestamp) -> Option<Timestamp> {
        let mut close = now;
        let mut open = false;
        // Sorted by start: a later interval can only extend the span if it starts at or before its end so far.
        for (start, end) in self.intervals(now) {
            if start <= close && close < end {
                close = end;
                open = true;
            }
        }
        open.then_some(close)
    }

    /// Every window's open intervals starting from the day before `now` (local to the window's zone, for
    /// windows crossing midnight) to 8 days after, sorted by start.
    fn intervals(&self, now: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        let mut intervals = Vec::new();
        for window in &self.windows {
            let today = window.tz.to_datetime(now).date();
            let mut day = today.yesterday().unwrap_or(today);
            for _ in 0..10 {
                let weekday = u8::try_from(day.weekday().to_monday_zero_offset()).unwrap_or(u8::MAX);
                if window.days.contains(weekday) {
                    intervals.extend(window.interval(day));
                }
                match day.tomorrow() {
                    Ok(next) => day = next,
                    Err(_) => break,
                }
            }
        }
        intervals.sort();
        intervals
    }
}

impl Window {
    /// The window starting on local `day`, as instants; `None` if it is empty there (a clock change) or out
    /// of jiff's range.
    fn interval(&self, day: civil::Date) -> Option<(Timestamp, Timestamp)> {
        let at = |day: civil::Date, minutes: u16| {
            let hour = i8::try_from(minutes / 60).ok()?;
            let minute = i8::try_from(minutes % 60).ok()?;
            let time = civil::Time::new(hour, minute, 0, 0).ok()?;
            self.tz.to_timestamp(day.to_datetime(time)).ok()
        };
        let start = at(day, self.start)?;
        let end = if self.end == MINUTES_PER_DAY {
            at(day.tomorrow().ok()?, 0)?
        } else if self.end <= self.start {
            at(day.tomorrow().ok()?, self.end)?
        } else {
            at(day, self.end)?
        };
        (start < end).then_some((start, end))
    }
}

fn parse_window(part: &str, value: &str) -> Result<Window, WindowError> {
    if part.is_empty() {
        return Err(WindowError(format!("empty window in {value:?} (remove the extra \";\")")));
    }
    let tokens: Vec<&str> = part.split_whitespace().collect();
    // Days run up to the first token starting with a digit, the time range over the tokens after it made of
    // digits, ':' and '-'; spaces inside either are tolerated ("Mon, Wed", "02:00 - 04:00").
    let time_at = tokens.iter().position(|t| t.starts_with(|c: char| c.is_ascii_digit()));
    let Some(time_at) = time_at else {
        return Err(WindowError(format!("missing time range in {part:?} (e.g. Mon-Fri 02:00-04:00)")));
    };
    if time_at == 0 {
        return Err(WindowError(format!("missing days in {part:?} (start with days, e.g. Mon-Fri or *)")));
    }
    let time_end = tokens[time_at + 1..]
        .iter()
        .position(|t| !t.chars().all(|c| c.is_ascii_digit() || c == ':' || c == '-'))
        .map_or(tokens.len(), |n| time_at + 1 + n);
    let days = parse_days(&tokens[..time_at].concat(), part)?;
    let range = tokens[time_at..time_end].concat();
    let (start, end) = parse_range(&range, part)?;
    let (tz, zone) = match &tokens[time_end..] {
        [] => (TimeZone::UTC, "UTC".to_owned()),
        [name] => parse_zone(name)?,
        [_, extra, ..] => return Err(WindowError(format!("unexpected {extra:?} in {part:?}"))),
    };
    Ok(Window { days, start, end, tz, zone })
}

fn parse_days(spec: &str, part: &str) -> Result<Days, WindowError> {
    if spec == "*" || spec.eq_ignore_ascii_case("daily") {
        return Ok(Days::Every);
    }
    let day = |name: &str| {
        DAY_NAMES
            .iter()
            .position(|d| d.eq_ignore_ascii_case(name))
            .and_then(|i| u8::try_from(i).ok())
            .ok_or_else(|| WindowError(format!("unknown day {name:?} in {part:?} ({DAY_HELP})")))
    };
    let ranges = spec
        .split(',')
        .map(|item| match item.split_once('-') {
            Some((first, last)) => Ok((day(first)?, day(last)?)),
            None => day(item).map(|d| (d, d)),
        })
        .collect::<Result<_, _>>()?;
    Ok(Days::List(ranges))
}

fn parse_range(range: &str, part: &str) -> Result<(u16, u16), WindowError> {
    let Some((start, end)) = range.split_once('-') else {
        return Err(WindowError(format!("bad time range {range:?} in {part:?} (use HH:MM-HH:MM, e.g. 02:00-04:00)")));
    };
    let (start, end) = (parse_time(start)?, parse_time(end)?);
    if start == MINUTES_PER_DAY {
        return Err(WindowError(format!("bad start \"24:00\" in {part:?} (24:00 is only an end; use 00:00)")));
    }
    if start == end {
        return Err(WindowError(format!(
            "empty window {range:?} in {part:?} (start equals end; use 00:00-24:00 for a whole day)"
        )));
    }
    Ok((start, end))
}

/// `HH:MM` (or `H:MM`) as minutes after midnight, up to 24:00.
fn parse_time(time: &str) -> Result<u16, WindowError> {
    let bad = || WindowError(format!("bad time {time:?} (HH:MM, 00:00 to 24:00)"));
    let (hours, minutes) = time.split_once(':').ok_or_else(bad)?;
    let number = |s: &str, lens: &[usize]| {
        (lens.contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.parse::<u16>().ok()).flatten()
    };
    match (number(hours, &[1, 2]), number(minutes, &[2])) {
        (Some(h), Some(m)) if m <= 59 && h * 60 + m <= MINUTES_PER_DAY => Ok(h * 60 + m),
        _ => Err(bad()),
    }
}

fn parse_zone(name: &str) -> Result<(TimeZone, String), WindowError> {
    if name.eq_ignore_ascii_case("UTC") {
        return Ok((TimeZone::UTC, "UTC".to_owned()));
    }
    let tz = TimeZone::get(name).map_err(|_| WindowError(format!("unknown time zone {name:?}")))?;
    let zone = tz.iana_name().unwrap_or(name).to_owned();
    Ok((tz, zone))
}

impl fmt::Display for ReloadWindow {
    /// The value normalised, e.g. `Mon-Fri 02:00-04:00 Europe/Berlin; Sat,Sun 10:00-24:00 UTC`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, w) in self.windows.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            let name = |d: u8| DAY_NAMES.get(usize::from(d)).copied().unwrap_or("?");
            let days = match &w.days {
                Days::Every => "*".to_owned(),
                Days::List(ranges) => ranges
                    .iter()
                    .map(|&(a, b)| if a == b { name(a).to_owned() } else { format!("{}-{}", name(a), name(b)) })
                    .collect::<Vec<_>>()
                    .join(","),
            };
            let (start, end) = (w.start, w.end);
            write!(f, "{days} {:02}:{:02}-{:02}:{:02} {}", start / 60, start % 60, end / 60, end % 60, w.zone)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
