//! A bead's diff as its page shows it: the files it changes with the lines each adds and
//! removes (counted by git as it printed the patch), each a link to its part of the patch, and
//! the patch line by line with each line's number in the old and the new file.

use serde::Serialize;

use crate::daemon::audit::DiffError;
use crate::daemon::worktree::BranchDiff;

/// The most lines of the patch a page shows (`ctl diff` prints all).
const DIFF_LINES: usize = 4000;

/// The diff as the page shows it, cut after [`DIFF_LINES`] lines of patch; or why there is none.
#[derive(Debug, Default, Serialize)]
pub(super) struct DiffView {
    stat: String,
    files: Vec<FileEntry>,
    lines: Vec<DiffLine>,
    /// Lines not shown.
    more: usize,
    /// Why there is no diff (no branch yet, cancelled, an error).
    none: Option<String>,
}

/// A changed file in the list above the patch.
#[derive(Debug, Serialize)]
struct FileEntry {
    path: String,
    added: usize,
    removed: usize,
    /// The id of its part of the patch, when the page shows that part.
    anchor: Option<String>,
}

#[derive(Debug, PartialEq, Serialize)]
struct DiffLine {
    /// `file`, `hunk`, `add`, `del`, `ctx` or `note` (`\ No newline at end of file`).
    kind: &'static str,
    text: String,
    /// Its line number in the file before the change (context and removed lines).
    old: Option<u32>,
    /// Its line number in the file after the change (context and added lines).
    new: Option<u32>,
    /// On the first line of a file's part of the patch: the id the file list links to.
    anchor: Option<String>,
}

impl DiffView {
    pub(super) fn of(diff: Result<BranchDiff, DiffError>) -> DiffView {
        let diff = match diff {
            Ok(diff) => diff,
            Err(DiffError::NoBranch(why)) => {
                return DiffView {
                    none: Some(why),
                    ..DiffView::default()
                }
            }
            Err(DiffError::Failed(e)) => {
                return DiffView {
                    none: Some(format!("cannot read the diff: {e}")),
                    ..DiffView::default()
                }
            }
        };
        let all = diff.patch.lines().count();
        let lines = numbered(diff.patch.lines().take(DIFF_LINES));
        let shown = lines.iter().filter(|l| l.anchor.is_some()).count();
        let files = diff
            .files
            .into_iter()
            .enumerate()
            .map(|(i, f)| FileEntry {
                path: f.path,
                added: f.added,
                removed: f.removed,
                anchor: (i < shown).then(|| anchor(i)),
            })
            .collect();
        DiffView {
            stat: diff.stat,
            files,
            lines,
            more: all.saturating_sub(DIFF_LINES),
            none: None,
        }
    }
}

/// The id of the `i`th file's part of the patch.
fn anchor(i: usize) -> String {
    format!("file-{}", i + 1)
}

/// Where a hunk is: the next line numbers, and how many lines of each side it still holds.
#[derive(Default)]
struct Hunk {
    old: u32,
    new: u32,
    old_left: u32,
    new_left: u32,
}

impl Hunk {
    /// The hunk a header `@@ -a,b +c,d @@` opens (a count left out is 1).
    fn parse(header: &str) -> Option<Hunk> {
        let mut ranges = header.strip_prefix("@@ ")?.split(' ');
        let side = |range: Option<&str>, sign: char| -> Option<(u32, u32)> {
            let range = range?.strip_prefix(sign)?;
            let (start, count) = range.split_once(',').unwrap_or((range, "1"));
            Some((start.parse().ok()?, count.parse().ok()?))
        };
        let (old, old_left) = side(ranges.next(), '-')?;
        let (new, new_left) = side(ranges.next(), '+')?;
        Some(Hunk {
            old,
            new,
            old_left,
            new_left,
        })
    }

    fn is_open(&self) -> bool {
        self.old_left > 0 || self.new_left > 0
    }
}

/// The patch's lines with their kinds and numbers. Inside a hunk a line's first character
/// says what it is, whatever follows (a removed `-- comment` is not a file header); the hunk
/// ends when its header's counts are used up.
fn numbered<'a>(patch: impl Iterator<Item = &'a str>) -> Vec<DiffLine> {
    let mut hunk = Hunk::default();
    let mut files = 0;
    patch
        .map(|text| {
            let (mut old, mut new, mut anchor_id) = (None, None, None);
            let kind = match text.as_bytes().first() {
                _ if text.starts_with('\\') => "note",
                Some(b'+') if hunk.is_open() => {
                    new = Some(hunk.new);
                    hunk.new += 1;
                    hunk.new_left = hunk.new_left.saturating_sub(1);
                    "add"
                }
                Some(b'-') if hunk.is_open() => {
                    old = Some(hunk.old);
                    hunk.old += 1;
                    hunk.old_left = hunk.old_left.saturating_sub(1);
                    "del"
                }
                Some(b' ') | None if hunk.is_open() => {
                    (old, new) = (Some(hunk.old), Some(hunk.new));
                    hunk.old += 1;
                    hunk.new += 1;
                    hunk.old_left = hunk.old_left.saturating_sub(1);
                    hunk.new_left = hunk.new_left.saturating_sub(1);
                    "ctx"
                }
                _ if text.starts_with("@@") => {
                    hunk = Hunk::parse(text).unwrap_or_default();
                    "hunk"
                }
                _ => {
                    hunk = Hunk::default();
                    if text.starts_with("diff --git ") {
                        anchor_id = Some(anchor(files));
                        files += 1;
                    }
                    "file"
                }
            };
            DiffLine {
                kind,
                text: text.to_owned(),
                old,
                new,
                anchor: anchor_id,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(kind: &'static str, text: &str, old: Option<u32>, new: Option<u32>) -> DiffLine {
        DiffLine {
            kind,
            text: text.to_owned(),
            old,
            new,
            anchor: None,
        }
    }

    #[test]
    fn each_line_of_a_hunk_has_its_numbers_whatever_it_starts_with() {
        let patch = "diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n\
                     @@ -10,3 +10,3 @@ select\n keep\n--- a comment\n+-- a new one\n last\n\
                     \\ No newline at end of file\n@@ -40 +40,2 @@\n-x\n+y\n+z\n";
        let mut lines = numbered(patch.lines());
        assert_eq!(lines[0].anchor.as_deref(), Some("file-1"));
        lines[0].anchor = None;
        assert_eq!(
            lines,
            [
                line("file", "diff --git a/q.sql b/q.sql", None, None),
                line("file", "--- a/q.sql", None, None),
                line("file", "+++ b/q.sql", None, None),
                line("hunk", "@@ -10,3 +10,3 @@ select", None, None),
                line("ctx", " keep", Some(10), Some(10)),
                line("del", "--- a comment", Some(11), None),
                line("add", "+-- a new one", None, Some(11)),
                line("ctx", " last", Some(12), Some(12)),
                line("note", "\\ No newline at end of file", None, None),
                line("hunk", "@@ -40 +40,2 @@", None, None),
                line("del", "-x", Some(40), None),
                line("add", "+y", None, Some(40)),
                line("add", "+z", None, Some(41)),
            ]
        );
    }

    #[test]
    fn a_hunk_header_leaves_out_counts_of_one() {
        let hunk = Hunk::parse("@@ -0,0 +1 @@").expect("a hunk header");
        assert_eq!(
            (hunk.old, hunk.old_left, hunk.new, hunk.new_left),
            (0, 0, 1, 1)
        );
        assert!(Hunk::parse("@@ nonsense").is_none());
    }
}
