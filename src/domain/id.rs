//! Validated bead and step ids.
//!
//! Ids become file names under `.catalyst/runs/`, worktree folders and git branch names
//! (`catalyst/<id>`), so every id is checked where it enters: from a socket request, an inbox
//! file, a formula, a beads import or the journal itself. A dependency may instead point at an
//! issue of another project (`external:<project>:<id>`, as beads writes it): a
//! [`DepTarget`], never a bead of this store, so it never becomes a path.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smol_str::SmolStr;

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
/// The rule is `[A-Za-z0-9][A-Za-z0-9._-]*`, at most [`MAX_ID_LEN`] bytes, and additionally
/// nothing git refuses in a branch name: no `..`, no trailing `.`, no `.lock` suffix.
/// Upper-case letters are allowed because beads allows them (its prefixes are the user's, e.g.
/// `API-12`) and an import keeps ids as they are; git and the file system take them as they
/// are too. The store refuses two ids that differ only in case (a case-insensitive file system
/// would give them one worktree and one branch). Cloning is cheap, and an id of up to 23 bytes
/// is held inline, so the store's tables compare ids without following a pointer.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BeadId(SmolStr);

impl BeadId {
    /// Validates `s` and wraps it.
    pub fn new(s: &str) -> Result<BeadId, IdError> {
        validate(s)?;
        Ok(BeadId(SmolStr::new(s)))
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
    if !first.is_ascii_alphanumeric() {
        return fail("it must start with a letter or a digit");
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return fail("only `a-z`, `A-Z`, `0-9`, `.`, `_` and `-` are allowed");
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

/// The longest external reference accepted, in bytes.
pub const MAX_EXTERNAL_LEN: usize = 256;

/// What a dependency points at: a bead (of this store, or one it does not have yet), or an
/// issue of another project, `external:<project>:<id>` as beads writes it.
///
/// An external reference is kept as it was read and written back unchanged; catalyst cannot
/// look into other projects, so it never holds a bead back (see `domain::state::ready`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum DepTarget {
    Bead(BeadId),
    External(Arc<str>),
}

impl DepTarget {
    /// `external:<project>:<id>` (both parts non-empty, no control characters), else a bead id.
    pub fn parse(s: &str) -> Result<DepTarget, IdError> {
        let Some(rest) = s.strip_prefix(EXTERNAL) else {
            return BeadId::new(s).map(DepTarget::Bead);
        };
        let fail = |reason| {
            Err(IdError {
                shown: shown(s),
                reason,
            })
        };
        if s.len() > MAX_EXTERNAL_LEN {
            return fail("an external reference is at most 256 bytes");
        }
        if s.chars().any(char::is_control) {
            return fail("an external reference must not hold control characters");
        }
        match rest.split_once(':') {
            Some((project, id)) if !project.is_empty() && !id.is_empty() => {
                Ok(DepTarget::External(Arc::from(s)))
            }
            _ => fail("an external reference is `external:<project>:<id>`"),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            DepTarget::Bead(id) => id.as_str(),
            DepTarget::External(s) => s,
        }
    }

    /// The bead, unless this is an external reference.
    pub fn bead(&self) -> Option<&BeadId> {
        match self {
            DepTarget::Bead(id) => Some(id),
            DepTarget::External(_) => None,
        }
    }
}

const EXTERNAL: &str = "external:";

impl From<BeadId> for DepTarget {
    fn from(id: BeadId) -> Self {
        DepTarget::Bead(id)
    }
}

impl PartialEq<BeadId> for DepTarget {
    fn eq(&self, other: &BeadId) -> bool {
        self.bead() == Some(other)
    }
}

impl fmt::Display for DepTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for DepTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Serialize for DepTarget {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for DepTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        DepTarget::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_beads_and_step_ids() {
        for ok in [
            "cat-1x9",
            "bd-5zf0.1",
            "cat-a.fix-2",
            "0",
            "a_b-c.d",
            "API-12",
            "Cat-1",
            "cat-A.review",
        ] {
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
            ("Çat-1", "start"),
            ("cat-é", "allowed"),
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

    #[test]
    fn a_dependency_points_at_a_bead_or_at_another_project() {
        let bead: DepTarget = serde_json::from_str("\"bd-1\"").unwrap();
        assert_eq!(bead, BeadId::new("bd-1").unwrap());
        let external: DepTarget = serde_json::from_str("\"external:billing:BIL-7\"").unwrap();
        assert_eq!(external.bead(), None);
        assert_eq!(
            serde_json::to_string(&external).unwrap(),
            "\"external:billing:BIL-7\""
        );
        for bad in [
            "external:",
            "external:billing",
            "external::x",
            "external:billing:",
            "external:a:b\nc",
            "a:b",
        ] {
            assert!(DepTarget::parse(bad).is_err(), "{bad:?}");
        }
        let long = format!("external:p:{}", "x".repeat(MAX_EXTERNAL_LEN));
        assert!(DepTarget::parse(&long).is_err());
    }
}
