use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

fn window(s: &str) -> ReloadWindow {
    ReloadWindow::parse(s).expect("valid window")
}

fn err(s: &str) -> String {
    ReloadWindow::parse(s).expect_err("invalid window").to_string()
}

#[test]
fn parse_errors_name_the_part() {
    let day_help = "(use Mon Tue Wed Thu Fri Sat Sun, ranges like Mon-Fri, or *)";
    assert_eq!(err("Mo-Fri 02:00-04:00"), format!("unknown day \"Mo\" in \"Mo-Fri 02:00-04:00\" {day_help}"));
    assert_eq!(err("Mon,,Tue 02:00-04:00"), format!("unknown day \"\" in \"Mon,,Tue 02:00-04:00\" {day_help}"));
    assert_eq!(err("Mon 02:00-04:00 Europe/Berln"), "unknown time zone \"Europe/Berln\"");
    assert_eq!(err("Mon 02:00-25:00"), "bad time \"25:00\" (HH:MM, 00:00 to 24:00)");
    assert_eq!(err("Mon 2:60-04:00"), "bad time \"2:60\" (HH:MM, 00:00 to 24:00)");
    assert_eq!(err("Mon 02:00-24:01"), "bad time \"24:01\" (HH:MM, 00:00 to 24:00)");
    assert_eq!(err("Mon 0200-0400"), "bad time \"0200\" (HH:MM, 00:00 to 24:00)");
    assert_eq!(err("Mon 24:00-02:00"), "bad start \"24:00\" in \"Mon 24:00-02:00\" (24:00 is only an end; use 00:00)");
    let empty =
        "empty window \"02:00-02:00\" in \"Mon 02:00-02:00\" (start equals end; use 00:00-24:00 for a whole day)";
    assert_eq!(err("Mon 02:00-02:00"), empty);
    assert_eq!(err("Mon 00:00-24:00x"), "bad time \"24:00x\" (HH:MM, 00:00 to 24:00)");
    assert_eq!(err("Mon 02:00"), "bad time range \"02:00\" in \"Mon 02:00\" (use HH:MM-HH:MM, e.g. 02:00-04:00)");
    assert_eq!(err("Mon-Fri"), "missing time range in \"Mon-Fri\" (e.g. Mon-Fri 02:00-04:00)");
    assert_eq!(err("02:00-04:00 UTC"), "missing days in \"02:00-04:00 UTC\" (start with days, e.g. Mon-Fri or *)");
    assert_eq!(err("Mon 02:00-04:00 UTC extra"), "unexpected \"extra\" in \"Mon 02:00-04:00 UTC extra\"");
    assert_eq!(err("Mon 02:00-04:00;"), "empty window in \"Mon 02:00-04:00;\" (remove the extra \";\")");
    assert_eq!(err("  "), "empty value (expected e.g. \"Mon-Fri 02:00-04:00 Europe/Berlin\")");
}

#[test]
fn weekday_window_in_utc() {
    let w = window("Mon-Fri 02:00-04:00 UTC");
    // 2026-12-03 is a Thursday.
    assert!(w.is_open(ts("2026-12-03T03:00:00Z")));
    assert!(w.is_open(ts("2026-12-03T02:00:00Z")), "the start is inclusive");
    assert!(!w.is_open(ts("2026-12-03T04:00:00Z")), "the end is exclusive");
    assert!(!w.is_open(ts("2026-12-03T14:00:00Z")));
    assert!(!w.is_open(ts("2026-12-05T03:00:00Z")), "Saturday");
    assert_eq!(w.next_open(ts("2026-12-03T03:00:00Z")), Some(ts("2026-12-03T03:00:00Z")));
    assert_eq!(w.closes_at(ts("2026-12-03T03:00:00Z")), Some(ts("2026-12-03T04:00:00Z")));
    assert_eq!(w.closes_at(ts("2026-12-03T14:00:00Z")), None);
    assert_eq!(w.next_open(ts("2026-12-03T14:00:00Z")), Some(ts("2026-12-04T02:00:00Z")));
    // Friday evening: Monday 02:00.
    assert_eq!(w.next_open(ts("2026-12-04T19:00:00Z")), Some(ts("2026-12-07T02:00:00Z")));
    assert_eq!(window("mon-fri 02:00-04:00"), w, "case-insensitive, UTC by default");
}

#[test]
fn crossing_midnight_belongs_to_the_start_day_and_24_00_is_midnight() {
    let w = window("Fri 22:00-02:00");
    assert!(w.is_open(ts("2026-12-04T23:00:00Z")));
    assert!(w.is_open(ts("2026-12-05T01:59:00Z")), "Saturday early morning");
    assert!(!w.is_open(ts("2026-12-05T02:00:00Z")));
    assert!(!w.is_open(ts("2026-12-04T01:00:00Z")), "Friday early morning is Thursday's night");
    assert_eq!(w.closes_at(ts("2026-12-05T01:00:00Z")), Some(ts("2026-12-05T02:00:00Z")));
    assert_eq!(w.next_open(ts("2026-12-05T02:00:00Z")), Some(ts("2026-12-11T22:00:00Z")));

    let w = window("Thu 00:00-24:00");
    assert!(w.is_open(ts("2026-12-03T00:00:00Z")));
    assert!(w.is_open(ts("2026-12-03T23:59:59Z")));
    assert!(!w.is_open(ts("2026-12-04T00:00:00Z")));
    assert_eq!(w.closes_at(ts("2026-12-03T12:00:00Z")), Some(ts("2026-12-04T00:00:00Z")));
    let w = window("Thu 22:00-00:00");
    assert_eq!(w.closes_at(ts("2026-12-03T23:00:00Z")), Some(ts("2026-12-04T00:00:00Z")));
    // Open around the clock: the span checked ends about a week ahead.
    let w = window("* 00:00-24:00 Europe/Berlin");
    assert_eq!(w.next_open(ts("2026-12-03T12:00:00Z")), Some(ts("2026-12-03T12:00:00Z")));
    assert!(w.closes_at(ts("2026-12-03T12:00:00Z")) >= Some(ts("2026-12-10T12:00:00Z")));
}

#[test]
fn berlin_follows_daylight_saving_time() {
    let w = window("Mon-Fri 02:00-04:00 Europe/Berlin");
    // Winter, UTC+1: open 01:00-03:00 UTC.
    assert!(w.is_open(ts("2026-12-03T01:30:00Z")));
    assert!(!w.is_open(ts("2026-12-03T03:30:00Z")));
    assert_eq!(w.next_open(ts("2026-12-03T12:00:00Z")), Some(ts("2026-12-04T01:00:00Z")));
    // Summer, UTC+2: open 00:00-02:00 UTC (2026-07-02 is a Thursday).
    assert!(w.is_open(ts("2026-07-02T00:30:00Z")));
    assert!(!w.is_open(ts("2026-07-02T02:30:00Z")));
    assert_eq!(w.closes_at(ts("2026-07-02T00:30:00Z")), Some(ts("2026-07-02T02:00:00Z")));
    // Clocks go forward on Sunday 2026-03-29 at 02:00: the start that day is 03:00 CEST.
    let sunday = window("Sun 02:00-04:00 Europe/Berlin");
    assert_eq!(sunday.next_open(ts("2026-03-28T12:00:00Z")), Some(ts("2026-03-29T01:00:00Z")));
    assert_eq!(sunday.closes_at(ts("2026-03-29T01:00:00Z")), Some(ts("2026-03-29T02:00:00Z")));
}

#[test]
fn wrapping_day_ranges_every_day_and_several_windows() {
    let w = window("Fri-Mon 10:00-12:00");
    assert!(w.is_open(ts("2026-12-06T11:00:00Z")), "Sunday");
    assert!(w.is_open(ts("2026-12-07T11:00:00Z")), "Monday");
    assert!(!w.is_open(ts("2026-12-08T11:00:00Z")), "Tuesday");
    assert_eq!(w.next_open(ts("2026-12-08T11:00:00Z")), Some(ts("2026-12-11T10:00:00Z")));

    for every in ["* 10:00-12:00", "DAILY 10:00-12:00"] {
        let w = window(every);
        assert_eq!(w.next_open(ts("2026-12-03T13:00:00Z")), Some(ts("2026-12-04T10:00:00Z")));
        assert!(w.is_open(ts("2026-12-05T10:00:00Z")));
    }

    let w = window(" Mon-Thu 02:00-04:00 ;  Sat, Sun 10:00 - 16:00 America/New_York ");
    assert!(w.is_open(ts("2026-12-03T03:00:00Z")));
    assert!(w.is_open(ts("2026-12-05T15:00:00Z")), "Saturday 10:00 in New York (UTC-5)");
    assert!(!w.is_open(ts("2026-12-04T03:00:00Z")), "Friday");
    assert_eq!(w.next_open(ts("2026-12-04T03:00:00Z")), Some(ts("2026-12-05T15:00:00Z")));
    // Back-to-back windows close together.
    let w = window("Thu 02:00-04:00; Thu 04:00-05:00; Thu 03:00-03:30");
    assert_eq!(w.closes_at(ts("2026-12-03T02:30:00Z")), Some(ts("2026-12-03T05:00:00Z")));
}

#[test]
fn display_is_normalised_and_round_trips() {
    for (input, shown) in [
        ("mon-FRI 2:00-04:00 europe/berlin", "Mon-Fri 02:00-04:00 Europe/Berlin"),
        ("daily 00:00-24:00", "* 00:00-24:00 UTC"),
        (
            "Mon,wed-fri 22:00-02:00 utc; Sat 10:00-12:00 America/New_York",
            "Mon,Wed-Fri 22:00-02:00 UTC; Sat 10:00-12:00 America/New_York",
        ),
    ] {
        let w = window(input);
        assert_eq!(w.to_string(), shown);
        assert_eq!(window(shown), w);
    }
}
