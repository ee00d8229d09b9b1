//! What a bead's branch changes against its target, from their merge base
//! (`git diff <target>...catalyst/<bead>`): the files and the patch for the agents that judge
//! it, and the stat and patch `ctl diff` prints.

use git2::{Commit, Delta, Diff, DiffFormat, DiffOptions, DiffStatsFormat, Repository};

use super::error::Context;
use super::{branch_name, branch_tip, target_tip, GitError, Repo};
use crate::domain::context::ChangedFile;
use crate::domain::id::BeadId;
use crate::domain::state::Merged;

/// `git diff --stat` and `git diff` of a bead's branch against its target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchDiff {
    /// One line per file (`path | 3 ++-`), then the total; empty when nothing changed.
    pub stat: String,
    /// The unified patch, with its `diff --git` headers.
    pub patch: String,
    /// The files of the patch, in its order, with the lines each adds and removes.
    pub files: Vec<FileLines>,
}

/// A file of a patch and how many lines its part of the patch adds and removes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FileLines {
    /// Its path after the change, or before it for a deleted file.
    pub path: String,
    pub added: usize,
    pub removed: usize,
}

impl Repo {
    /// The files the bead's branch changes since it left `target`, and the whole patch.
    pub fn change(
        &self,
        bead: &BeadId,
        target: &str,
    ) -> Result<(Vec<ChangedFile>, String), GitError> {
        let repo = self.main_repo()?;
        let diff = merge_base_diff(&repo, bead, target)?;
        let files = diff
            .deltas()
            .map(|d| {
                let path = d
                    .new_file()
                    .path()
                    .or_else(|| d.old_file().path())
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let status = match d.status() {
                    Delta::Added => "added",
                    Delta::Deleted => "deleted",
                    Delta::Renamed => "renamed",
                    _ => "modified",
                };
                ChangedFile {
                    status: status.into(),
                    path,
                }
            })
            .collect();
        let (patch, _) = patch_of(&diff, &format!("`{}`", branch_name(bead)))?;
        Ok((files, patch))
    }

    /// The stat (at most `width` columns wide) and the patch of the bead's branch against
    /// `target`. [`GitError::NoBranch`] when the bead has no branch (not started yet, or
    /// removed after its merge or cancel).
    pub fn branch_diff(
        &self,
        bead: &BeadId,
        target: &str,
        width: usize,
    ) -> Result<BranchDiff, GitError> {
        let repo = self.main_repo()?;
        let diff = merge_base_diff(&repo, bead, target)?;
        stat_and_patch(&diff, &branch_name(bead), width)
    }

    /// The bead's branch against `target` while it has one ([`Self::branch_diff`]), else,
    /// once it was merged, what its merge brought ([`Self::merged_diff`]). A merged bead's
    /// branch changes nothing against the target it went into until the daemon deletes it (a
    /// moment after the merge): the merge's diff is shown then too.
    pub fn work_diff(
        &self,
        bead: &BeadId,
        merged: Option<&Merged>,
        target: &str,
        width: usize,
    ) -> Result<BranchDiff, GitError> {
        match (self.branch_diff(bead, target, width), merged) {
            (Err(GitError::NoBranch { .. }), Some(m)) => self.merged_diff(&m.from, &m.to, width),
            (Ok(diff), Some(m)) if diff.patch.is_empty() => self.merged_diff(&m.from, &m.to, width),
            (diff, _) => diff,
        }
    }

    /// What a merge brought to its target: the change from where the target was (`from`)
    /// and the bead's tip it moved to (`to`) parted, to `to`. The same as [`Self::branch_diff`]
    /// just before the merge, for a bead whose branch is gone.
    pub fn merged_diff(&self, from: &str, to: &str, width: usize) -> Result<BranchDiff, GitError> {
        let repo = self.main_repo()?;
        let commit = |rev: &str| {
            git2::Oid::from_str(rev)
                .and_then(|oid| repo.find_commit(oid))
                .ctx(|| format!("reading the merged commit `{rev}`"))
        };
        let (base, head) = (commit(from)?, commit(to)?);
        let names = (format!("`{from}`"), format!("`{to}`"));
        let diff = diff_since(&repo, (&base, &names.0), (&head, &names.1))?;
        stat_and_patch(&diff, &format!("`{from}..{to}`"), width)
    }
}

/// The stat (at most `width` columns) and the patch of `diff`; `what` names it in errors.
fn stat_and_patch(diff: &Diff<'_>, what: &str, width: usize) -> Result<BranchDiff, GitError> {
    let stats = diff
        .stats()
        .ctx(|| format!("counting the changes of {what}"))?;
    let stat = stats
        .to_buf(DiffStatsFormat::FULL, width)
        .ctx(|| format!("printing the stat of {what}"))?;
    let stat = if stats.files_changed() == 0 {
        String::new()
    } else {
        String::from_utf8_lossy(&stat).into_owned()
    };
    let (patch, files) = patch_of(diff, what)?;
    Ok(BranchDiff { stat, patch, files })
}

/// The tree diff from where the bead's branch left `target` to the branch's tip.
fn merge_base_diff<'r>(
    repo: &'r Repository,
    bead: &BeadId,
    target: &str,
) -> Result<Diff<'r>, GitError> {
    let head = branch_tip(repo, bead)?;
    let base = target_tip(repo, target)?;
    let names = (format!("`{target}`"), format!("`{}`", branch_name(bead)));
    diff_since(repo, (&base, &names.0), (&head, &names.1))
}

/// The tree diff from where `head` left `base` (their merge base) to `head`, each given with
/// its name for errors.
fn diff_since<'r>(
    repo: &'r Repository,
    (base, base_name): (&Commit<'_>, &str),
    (head, what): (&Commit<'_>, &str),
) -> Result<Diff<'r>, GitError> {
    let merge_base = repo
        .merge_base(base.id(), head.id())
        .ctx(|| format!("finding where {what} left {base_name}"))?;
    let from = repo
        .find_commit(merge_base)
        .and_then(|c| c.tree())
        .ctx(|| format!("reading the tree of `{merge_base}`"))?;
    let to = head
        .tree()
        .ctx(|| format!("reading the tree of `{}`", head.id()))?;
    let mut options = DiffOptions::new();
    options.context_lines(3);
    repo.diff_tree_to_tree(Some(&from), Some(&to), Some(&mut options))
        .ctx(|| format!("comparing {what} with {base_name}"))
}

/// The patch as `git diff` prints it (headers, hunk headers and `+`/`-`/` ` lines), and its
/// files with the lines each adds and removes, counted as they are printed.
fn patch_of(diff: &Diff<'_>, what: &str) -> Result<(String, Vec<FileLines>), GitError> {
    let mut patch = Vec::new();
    let mut files: Vec<FileLines> = Vec::new();
    diff.print(DiffFormat::Patch, |delta, _, line| {
        match line.origin() {
            // A file's header opens its part of the patch.
            'F' => files.push(FileLines {
                path: delta
                    .new_file()
                    .path()
                    .or_else(|| delta.old_file().path())
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                added: 0,
                removed: 0,
            }),
            '+' => files.last_mut().into_iter().for_each(|f| f.added += 1),
            '-' => files.last_mut().into_iter().for_each(|f| f.removed += 1),
            _ => {}
        }
        if matches!(line.origin(), '+' | '-' | ' ') {
            patch.push(line.origin() as u8);
        }
        patch.extend_from_slice(line.content());
        true
    })
    .ctx(|| format!("printing the patch of {what}"))?;
    Ok((String::from_utf8_lossy(&patch).into_owned(), files))
}
