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
    use serde_json::json;

    /// An issue line whose `field` is written as `value` (raw JSON).
    fn line_with(field: &str, value: &str) -> String {
        format!(
            r#"{{"id":"gt-1","title":"t","status":"open","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","{field}":{value}}}"#
        )
    }

    fn written(beads: &[Bead]) -> String {
        let mut out = Vec::new();
        write(beads, &mut out).expect("write to memory");
        String::from_utf8(out).expect("utf-8")
    }

    const DEP: &str = r#"{"issue_id":"gt-1","depends_on_id":"gt-2","type":"blocks","metadata":"{}","thread_id":""}"#;
    const COMMENT: &str =
        r#"{"id":1,"issue_id":"gt-1","author":"a","text":"b","created_at":"2026-01-01T00:00:01Z"}"#;

    #[test]
    fn structured_fields_are_read_as_json_or_as_a_string_holding_it() {
        let dep: Value = serde_json::from_str(DEP).unwrap();
        let comment: Value = serde_json::from_str(COMMENT).unwrap();
        let quoted = |json: &str| Value::from(json).to_string();
        // (field, its value as the line writes it, the field as export writes it; null: left out)
        let cases = [
            ("metadata", r#"{"k":1}"#.to_owned(), json!({"k": 1})),
            ("metadata", quoted(r#"{"k":1}"#), json!({"k": 1})),
            ("metadata", quoted("{}"), json!({})),
            (
                "metadata",
                quoted(" {\"a\": [1, {\"b\": null}]} "),
                json!({"a": [1, {"b": null}]}),
            ),
            ("metadata", quoted(""), Value::Null),
            ("metadata", quoted("null"), Value::Null),
            ("metadata", "null".to_owned(), Value::Null),
            ("labels", r#"["a","b"]"#.to_owned(), json!(["a", "b"])),
            ("labels", quoted(r#"["a","b"]"#), json!(["a", "b"])),
            ("labels", quoted("[]"), Value::Null),
            ("labels", quoted(""), Value::Null),
            ("dependencies", format!("[{DEP}]"), json!([dep])),
            ("dependencies", quoted(&format!("[{DEP}]")), json!([dep])),
            ("dependencies", quoted(""), Value::Null),
            ("comments", format!("[{COMMENT}]"), json!([comment])),
            (
                "comments",
                quoted(&format!("[{COMMENT}]")),
                json!([comment]),
            ),
            ("comments", quoted("null"), Value::Null),
        ];
        for (field, value, expected) in cases {
            let line = line_with(field, &value);
            let (parsed, errors) = parse(&line, "f.jsonl");
            assert!(errors.is_empty(), "{line}: {errors:?}");
            let out = written(&parsed.beads);
            let back: Value = serde_json::from_str(&out).expect("a JSON line");
            assert_eq!(back.get(field).unwrap_or(&Value::Null), &expected, "{line}");
            // What export writes reads back to the same bytes.
            let (again, errors) = parse(&out, "out.jsonl");
            assert!(errors.is_empty(), "{out}: {errors:?}");
            assert_eq!(written(&again.beads), out, "{line}");
        }
    }

    #[test]
    fn a_string_that_does_not_hold_the_fields_json_refuses_its_line_only() {
        let quoted = |json: &str| Value::from(json).to_string();
        let cases = [
            ("metadata", quoted("{not json")),
            ("metadata", quoted("[1,2]")),
            ("metadata", quoted("\"x\"")),
            ("metadata", quoted("7")),
            ("metadata", "7".to_owned()),
            ("labels", quoted(r#"{"a":1}"#)),
            ("labels", quoted("backend")),
            ("dependencies", quoted(r#"[{"issue_id":"gt-1"}]"#)),
            ("comments", quoted("[{")),
        ];
        let good = line_with("labels", r#"["x"]"#);
        for (field, value) in cases {
            let text = format!(
                "{good}\n{}\n{}\n",
                line_with(field, &value),
                good.replace("gt-1", "gt-3")
            );
            let (parsed, errors) = parse(&text, "backup/issues.jsonl");
            assert_eq!(parsed.beads.len(), 2, "the other lines are read: {value}");
            assert_eq!(errors.len(), 1, "{value}: {errors:?}");
            let shown = errors[0].to_string();
            assert!(
                shown.starts_with("backup/issues.jsonl:2: not a bead: "),
                "{shown}"
            );
            assert!(shown.contains(&format!("`{field}`")), "{shown}");
        }
    }

    /// The example of docs/data-model.md#beads-export-lines, byte for byte.
    #[test]
    fn a_backup_line_is_written_with_its_metadata_as_an_object() {
        let line = r#"{"id":"gt-b1","title":"Backed up","status":"open","priority":2,"issue_type":"task","created_at":"2026-02-10T08:00:00Z","updated_at":"2026-02-10T08:00:00Z","metadata":"{\"tool\":\"gt\"}","ephemeral":0}"#;
        let (parsed, errors) = parse(line, "issues.jsonl");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            written(&parsed.beads),
            "{\"id\":\"gt-b1\",\"title\":\"Backed up\",\"status\":\"open\",\"priority\":2,\"issue_type\":\"task\",\"metadata\":{\"tool\":\"gt\"},\"created_at\":\"2026-02-10T08:00:00Z\",\"updated_at\":\"2026-02-10T08:00:00Z\",\"ephemeral\":0}\n"
        );
    }

    #[test]
    fn beads_1_3_fields_are_kept_and_written_back() {
        let line = r#"{"_type":"issue","id":"gt-7","title":"Leased","status":"in_progress","priority":1,"issue_type":"task","created_at":"2026-03-01T09:00:00Z","updated_at":"2026-03-01T09:05:00.25Z","lease_expires_at":"2026-03-01T09:35:00Z","heartbeat_at":"2026-03-01T09:05:00.250001+01:00","dependency_count":2,"dependent_count":0,"comment_count":5}"#;
        let (parsed, errors) = parse(line, "f.jsonl");
        assert!(errors.is_empty(), "{errors:?}");
        let bead = &parsed.beads[0];
        assert_eq!(
            bead.extra.get("dependency_count"),
            Some(&json!(2)),
            "kept as read"
        );
        let out = written(&parsed.beads);
        let back: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(line).unwrap());
        let (again, _) = parse(&out, "out.jsonl");
        assert_eq!(written(&again.beads), out, "byte for byte");
    }

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
