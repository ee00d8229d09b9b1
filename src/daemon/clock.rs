//! The one place the runtime reads the wall clock: the domain takes `now` as an argument.

use crate::domain::time::Timestamp;

/// The current time, in UTC with microseconds, as catalyst writes its own timestamps.
pub fn now() -> Timestamp {
    Timestamp::from_utc(chrono::Utc::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_utc_with_microseconds() {
        let text = now().to_string();
        assert!(text.ends_with('Z'), "{text}");
        assert_eq!(text.len(), "2026-01-26T02:02:08.123456Z".len(), "{text}");
    }
}
