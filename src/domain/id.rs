//! Validated bead and step ids.
//!
//! Ids become file names under `.catalyst/runs/`, worktree folders and git branch names
//! (`catalyst/<id>`), so every id is checked where it enters: from a socket request, an inbox
//! file, a formula, a beads import or the journal itself.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 64;

/// Why a string is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid id `{shown}`: {reason}")]
pub struct IdError {
    /// The offending id, escaped and shortened so that it is safe to print.
    pub shown: String,
    pub reason: &'static str,
}

/// A bead id such as `cat-1x9` or a step id such as `cat-1x9.review`.
///
/// The rule is `[a-z0-9][a-z0-9._-]*`, at most [`MAX_ID_LEN`] bytes, and additionally nothing
/// git refuses in a branch name: no `..`, no trailing `.`, no `.lock` suffix.
/// Cloning is cheap (shared string).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BeadId(Arc<str>);

impl BeadId {
    /// Validates `s` and wraps it.
    pub fn new(s: &str) -> Result<BeadId, IdError> {
        validate(s)?;
        Ok(BeadId(Arc::from(s)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of a step of this bead's molecule: `<bead>.<step>`.
    pub fn step(&self, step: &str) -> Result<BeadId, IdError> {
        BeadId::new(&format!("{}.{}", self.0, step))
    }
}

fn validate(s: &str) -> Result<(), IdError> {
    let fail = |reason| {
        Err(IdError {
            shown: shown(s),
            reason,
        })
    };
    let Some(first) = s.bytes().next() else {
        return fail("it is empty");
    };
    if s.len() > MAX_ID_LEN {
        return fail("it is longer than 64 bytes");
    }
    if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
        return fail("it must start with a lowercase letter or a digit");
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
    {
        return fail("only `a-z`, `0-9`, `.`, `_` and `-` are allowed");
    }
    if s.contains("..") {
        return fail("it contains `..`");
    }
    if s.ends_with('.') || s.ends_with(".lock") {
        return fail("it must not end with `.` or `.lock`");
    }
    Ok(())
}

/// Escapes control characters and cuts long input so an error message stays one short line.
fn shown(s: &str) -> String {
    let mut out: String = s.chars().take(80).flat_map(char::escape_default).collect();
    if s.chars().count() > 80 {
        out.push('…');
    }
    out
}

impl fmt::Display for BeadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for BeadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::str::FromStr for BeadId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BeadId::new(s)
    }
}

impl std::borrow::Borrow<str> for BeadId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl Serialize for BeadId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for BeadId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        BeadId::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_beads_and_step_ids() {
        for ok in ["cat-1x9", "bd-5zf0.1", "cat-a.fix-2", "0", "a_b-c.d"] {
            assert!(BeadId::new(ok).is_ok(), "{ok} should be valid");
        }
    }

    #[test]
    fn refuses_what_could_escape_a_path_or_break_a_branch() {
        let long = "a".repeat(1024);
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("../etc", "start"),
            ("a/b", "allowed"),
            ("a b", "allowed"),
            ("Cat-1", "start"),
            ("cat-A", "allowed"),
            ("a\nb", "allowed"),
            ("a\u{7}", "allowed"),
            ("a..b", "`..`"),
            ("a.", "end"),
            ("a.lock", "end"),
            (".hidden", "start"),
            ("-x", "start"),
            (&long, "64 bytes"),
        ];
        for (bad, why) in cases {
            let err = BeadId::new(bad).expect_err(bad);
            assert!(err.reason.contains(why), "{bad:?}: {}", err.reason);
            assert!(
                !err.to_string().contains('\n'),
                "error must stay on one line"
            );
        }
    }

    #[test]
    fn error_names_the_id() {
        let err = BeadId::new("Bad Id").unwrap_err();
        assert!(err.to_string().contains("`Bad Id`"), "{err}");
    }

    #[test]
    fn deserializing_validates() {
        assert!(serde_json::from_str::<BeadId>("\"ok-1\"").is_ok());
        let err = serde_json::from_str::<BeadId>("\"../x\"").unwrap_err();
        assert!(err.to_string().contains("../x"), "{err}");
    }
}
