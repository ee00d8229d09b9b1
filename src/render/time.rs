//! Times as people read them: in the local time zone, which is `TZ` when it is set (a zone
//! name, a POSIX string such as `EST5EDT`, or `UTC`) and the system's otherwise. What catalyst
//! stores stays UTC; only what is printed for people is local.

use std::fmt::Display;

use chrono::{Local, TimeZone};

use crate::domain::time::Timestamp;

/// `14:03:07`, for lines of a stream (`ctl events`, the live view).
pub fn clock(ts: &Timestamp) -> String {
    format_in(ts, &Local, "%H:%M:%S")
}

/// `2026-05-01 14:03:07`.
pub fn date_time(ts: &Timestamp) -> String {
    format_in(ts, &Local, "%Y-%m-%d %H:%M:%S")
}

fn format_in<Tz: TimeZone>(ts: &Timestamp, zone: &Tz, format: &str) -> String
where
    Tz::Offset: Display,
{
    ts.instant().with_timezone(zone).format(format).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    #[test]
    fn times_are_shown_in_the_zone_asked_for() {
        let ts = Timestamp::parse("2026-01-01T23:30:05.123456Z").unwrap();
        let plus_two = FixedOffset::east_opt(2 * 3600).unwrap();
        assert_eq!(
            format_in(&ts, &plus_two, "%Y-%m-%d %H:%M:%S"),
            "2026-01-02 01:30:05"
        );
        let utc = FixedOffset::east_opt(0).unwrap();
        assert_eq!(format_in(&ts, &utc, "%H:%M:%S"), "23:30:05");
    }
}
