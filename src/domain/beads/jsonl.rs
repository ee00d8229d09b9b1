//! beads export lines: one JSON object per line, each an issue in the beads schema. Newer
//! exports tag lines with `_type`; lines of another type (and catalyst's own snapshot header)
//! are skipped and counted, not refused, and a line that is not a bead is reported on its own,
//! so a whole export can be read.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::Value;

use crate::domain::model::Bead;

/// What a file held.
#[derive(Debug, Default)]
pub struct Parsed {
    pub beads: Vec<Bead>,
    /// Lines skipped, by their `_type`.
    pub skipped: BTreeMap<String, usize>,
}

/// A line that is not a bead, with its 1-based number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {problem}")]
pub struct LineError {
    pub source_name: String,
    pub line: usize,
    pub problem: String,
}

/// Reads every line it can and collects the problems of the others: an import counts them and
/// takes the rest, a followed file may be caught mid-write.
pub fn parse(text: &str, source_name: &str) -> (Parsed, Vec<LineError>) {
    let mut parsed = Parsed::default();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let error = |problem: String| LineError {
            source_name: source_name.to_owned(),
            line: i + 1,
            problem,
        };
        let value: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                errors.push(error(format!("not JSON: {e}")));
                continue;
            }
        };
        match value.get("_type") {
            None => {}
            Some(Value::String(t)) if t == "issue" => {}
            Some(other) => {
                let kind = other
                    .as_str()
                    .map_or_else(|| other.to_string(), str::to_owned);
                *parsed.skipped.entry(kind).or_default() += 1;
                continue;
            }
        }
        match serde_json::from_value::<Bead>(value) {
            Ok(bead) => parsed.beads.push(bead),
            Err(e) => errors.push(error(format!("not a bead: {e}"))),
        }
    }
    (parsed, errors)
}

/// Writes beads as export lines.
pub fn write<'a>(
    beads: impl IntoIterator<Item = &'a Bead>,
    out: &mut impl Write,
) -> io::Result<()> {
    for bead in beads {
        serde_json::to_writer(&mut *out, bead).map_err(io::Error::other)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_types_are_skipped_and_counted_and_bad_lines_named() {
        let text = "{\"_type\":\"catalyst.snapshot\",\"version\":1,\"seq\":0,\"beads\":0}\n\n\
            {\"_type\":\"issue\",\"id\":\"bd-1\",\"title\":\"t\",\"status\":\"open\",\"created_at\":\"2026-01-01T00:00:00Z\",\"updated_at\":\"2026-01-01T00:00:00Z\"}\n\
            {\"_type\":\"memory\",\"text\":\"x\"}\n{\"_type\":\"memory\"}\n";
        let (parsed, errors) = parse(text, "f.jsonl");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(parsed.beads.len(), 1);
        assert_eq!(parsed.skipped.get("memory"), Some(&2));
        assert_eq!(parsed.skipped.get("catalyst.snapshot"), Some(&1));
        let (parsed, errors) = parse(&format!("{{\"id\":\"bd-1\"}}\nnope\n{text}"), "f.jsonl");
        assert_eq!(parsed.beads.len(), 1, "the good lines are read");
        assert_eq!(errors.len(), 2);
        assert_eq!((errors[0].line, errors[1].line), (1, 2));
        assert!(
            errors[0].to_string().starts_with("f.jsonl:1: not a bead"),
            "{}",
            errors[0]
        );
        assert!(errors[1].problem.starts_with("not JSON"), "{errors:?}");
    }
}
