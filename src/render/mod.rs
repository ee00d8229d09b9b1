//! How answers and events read for people: one line per event ([`event`]), tables and
//! progress bars, in local time ([`time`]) and in colour on a terminal ([`style`]).

mod diff;
mod event;
mod list;
pub mod logs;
mod show;
mod status;
pub mod style;
pub mod table;
pub mod time;
mod workers;

use serde_json::Value;

pub use diff::render_diff;
pub use event::{render_event, render_event_with};
pub use list::{render_beads, status_label, waiting_for};
pub use logs::{render_attempt_header, render_entry};
pub use show::render_show;
pub use status::render_status;
pub use workers::render_workers;

/// A small answer on one line: `key: value, …`, strings without their quotes.
pub fn compact(v: &Value) -> String {
    match v {
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}: {s}"),
                other => format!("{k}: {other}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// `[####----] 2/4`.
pub fn progress_bar(done: u64, total: u64, width: usize) -> String {
    let filled = if total == 0 {
        0
    } else {
        (done as usize * width).div_ceil(total as usize).min(width)
    };
    format!(
        "[{}{}] {done}/{total}",
        "#".repeat(filled),
        "-".repeat(width - filled)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_bars() {
        assert_eq!(progress_bar(0, 4, 8), "[--------] 0/4");
        assert_eq!(progress_bar(2, 4, 8), "[####----] 2/4");
        assert_eq!(progress_bar(4, 4, 8), "[########] 4/4");
        assert_eq!(progress_bar(0, 0, 4), "[----] 0/0");
    }
}
