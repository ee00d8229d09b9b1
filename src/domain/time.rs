//! RFC 3339 timestamps that are written back exactly as they were read.
//!
//! beads exports carry two styles, `2025-11-20T21:21:23.497486-05:00` and
//! `2026-01-26T02:02:08Z`, and a re-export must not rewrite them. A [`Timestamp`] keeps the instant
//! together with the things that decide its spelling: how many fraction digits it had, whether
//! its zero offset was written `Z`, and whether it had an offset at all. The beads database's
//! own rows, as Gas Town backs them up (`dolt sql -r json`), write a date and time without one
//! (`2026-03-16 18:14:23.843993`): such a time is read as UTC and written back as it came.

use std::cmp::Ordering;
use std::fmt;

use chrono::{DateTime, FixedOffset, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Copy)]
pub struct Timestamp {
    at: DateTime<FixedOffset>,
    /// Digits after the decimal point in the original text (0–9).
    frac: u8,
    /// The offset was written `Z` rather than `+00:00`.
    zulu: bool,
    /// Written without an offset, the date and time apart by this (` ` or `T`): UTC.
    naive: Option<char>,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid RFC 3339 timestamp `{text}`: {source}")]
pub struct TimestampError {
    text: String,
    source: chrono::ParseError,
}

impl Timestamp {
    /// `at` in UTC with microseconds, as catalyst writes its own timestamps.
    pub fn from_utc(at: DateTime<Utc>) -> Timestamp {
        Timestamp {
            at: at.fixed_offset(),
            frac: 6,
            zulu: true,
            naive: None,
        }
    }

    pub fn parse(text: &str) -> Result<Timestamp, TimestampError> {
        let frac = text
            .get(19..)
            .filter(|rest| rest.starts_with('.'))
            .map(|rest| rest[1..].bytes().take_while(u8::is_ascii_digit).count())
            .unwrap_or(0)
            .min(9) as u8;
        match DateTime::parse_from_rfc3339(text) {
            Ok(at) => Ok(Timestamp {
                at,
                frac,
                zulu: text.ends_with(['Z', 'z']),
                naive: None,
            }),
            Err(source) => Timestamp::parse_naive(text, frac).ok_or(TimestampError {
                text: text.to_owned(),
                source,
            }),
        }
    }

    /// A date and time without an offset (`2026-03-16 18:14:23.843993`), as UTC.
    fn parse_naive(text: &str, frac: u8) -> Option<Timestamp> {
        let separator = text.chars().nth(10).filter(|c| *c == ' ' || *c == 'T')?;
        let format = if separator == ' ' {
            "%Y-%m-%d %H:%M:%S%.f"
        } else {
            "%Y-%m-%dT%H:%M:%S%.f"
        };
        let at = chrono::NaiveDateTime::parse_from_str(text, format).ok()?;
        Some(Timestamp {
            at: at.and_utc().fixed_offset(),
            frac,
            zulu: false,
            naive: Some(separator),
        })
    }

    pub fn instant(&self) -> DateTime<FixedOffset> {
        self.at
    }

    pub fn to_utc(&self) -> DateTime<Utc> {
        self.at.with_timezone(&Utc)
    }

    /// `secs` seconds later, in UTC.
    pub fn after_secs(&self, secs: u64) -> Timestamp {
        let secs = i64::try_from(secs).unwrap_or(i64::MAX);
        Timestamp::from_utc(self.to_utc() + chrono::Duration::seconds(secs))
    }
}

impl fmt::Display for Timestamp {
    /// Written field by field: every journal line has a timestamp, and chrono's `format`
    /// parses its pattern each time.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use chrono::{Datelike, Timelike};
        let at = &self.at;
        // chrono keeps a leap second as second 59 with a billion nanoseconds more.
        let (leap, nanos) = match at.nanosecond() {
            n if n >= 1_000_000_000 => (1, n - 1_000_000_000),
            n => (0, n),
        };
        write!(
            f,
            "{:04}-{:02}-{:02}{}{:02}:{:02}:{:02}",
            at.year(),
            at.month(),
            at.day(),
            self.naive.unwrap_or('T'),
            at.hour(),
            at.minute(),
            at.second() + leap
        )?;
        if self.frac > 0 {
            let digits = u32::from(self.frac);
            let shown = nanos / 10u32.pow(9 - digits);
            write!(f, ".{shown:0width$}", width = usize::from(self.frac))?;
        }
        if self.naive.is_some() {
            return Ok(());
        }
        let offset = at.offset().local_minus_utc();
        if self.zulu && offset == 0 {
            return f.write_str("Z");
        }
        let sign = if offset < 0 { '-' } else { '+' };
        let minutes = offset.unsigned_abs() / 60;
        write!(f, "{sign}{:02}:{:02}", minutes / 60, minutes % 60)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// Equality and order are by instant: the same moment spelled two ways is the same moment.
impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl Eq for Timestamp {}
impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at.cmp(&other.at)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Timestamp::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// RFC 3339 in UTC with seconds, for messages meant for people.
pub fn human(ts: &Timestamp) -> String {
    ts.to_utc().to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_beads_styles_round_trip() {
        for text in [
            "2025-11-20T21:21:23.497486-05:00",
            "2026-01-26T02:02:08Z",
            "2026-01-26T02:02:08+00:00",
            "2026-01-26T02:02:08.5Z",
            "2026-01-26T02:02:08.123456789+05:30",
            "0999-03-04T05:06:07-00:30",
            "2026-12-31T23:59:59.000000001-12:00",
            "2016-12-31T23:59:60Z",
            "2016-12-31T23:59:60.25Z",
        ] {
            let ts = Timestamp::parse(text).unwrap();
            assert_eq!(ts.to_string(), text);
            let json = serde_json::to_string(&ts).unwrap();
            assert_eq!(json, format!("\"{text}\""));
        }
    }

    /// Gas Town backs the beads database up as its rows, whose times have no offset: they
    /// read as UTC and are written back as they came.
    #[test]
    fn a_time_without_an_offset_is_utc_and_round_trips() {
        for text in [
            "2026-03-16 18:14:23.843993",
            "2026-03-16 18:14:23",
            "2026-03-16T18:14:23.5",
        ] {
            let ts = Timestamp::parse(text).unwrap();
            assert_eq!(ts.to_string(), text);
        }
        assert_eq!(
            Timestamp::parse("2026-03-16 18:14:23.843993").unwrap(),
            Timestamp::parse("2026-03-16T18:14:23.843993Z").unwrap()
        );
        for bad in ["2026-03-16", "2026-03-16 25:00:00", "2026-03-16x18:14:23"] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn same_instant_in_two_zones_is_equal() {
        let a = Timestamp::parse("2025-11-20T21:00:00-05:00").unwrap();
        let b = Timestamp::parse("2025-11-21T02:00:00Z").unwrap();
        assert_eq!(a, b);
        assert!(Timestamp::parse("2025-11-21T02:00:01Z").unwrap() > a);
    }

    #[test]
    fn garbage_is_an_error_naming_the_text() {
        let err = Timestamp::parse("yesterday").unwrap_err();
        assert!(err.to_string().contains("`yesterday`"));
    }
}
