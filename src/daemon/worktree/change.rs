//! What a bead's branch changes against its target, from their merge base
//! (`git diff <target>...catalyst/<bead>`): the files and the patch for the agents that judge
//! it, and the stat and patch `ctl diff` prints.

use git2::{Delta, Diff, DiffFormat, DiffOptions, DiffStatsFormat, Repository};

use super::error::Context;
use super::{branch_name, branch_tip, target_tip, GitError, Repo};
use crate::domain::context::ChangedFile;
use crate::domain::id::BeadId;

/// `git diff --stat` and `git diff` of a bead's branch against its target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchDiff {
    /// One line per file (`path | 3 ++-`), then the total; empty when nothing changed.
    pub stat: String,
    /// The unified patch, with its `diff --git` headers.
    pub patch: String,
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
        Ok((files, patch_text(&diff, bead)?))
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
        let stats = diff
            .stats()
            .ctx(|| format!("counting the changes of `{}`", branch_name(bead)))?;
        let stat = stats
            .to_buf(DiffStatsFormat::FULL, width)
            .ctx(|| format!("printing the stat of `{}`", branch_name(bead)))?;
        let stat = if stats.files_changed() == 0 {
            String::new()
        } else {
            String::from_utf8_lossy(&stat).into_owned()
        };
        Ok(BranchDiff {
            stat,
            patch: patch_text(&diff, bead)?,
        })
    }
}

/// The tree diff from where the bead's branch left `target` to the branch's tip.
fn merge_base_diff<'r>(
    repo: &'r Repository,
    bead: &BeadId,
    target: &str,
) -> Result<Diff<'r>, GitError> {
    let head = branch_tip(repo, bead)?;
    let base = target_tip(repo, target)?;
    let merge_base = repo
        .merge_base(base.id(), head.id())
        .ctx(|| format!("finding where `{}` left `{target}`", branch_name(bead)))?;
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
        .ctx(|| format!("comparing `{}` with `{target}`", branch_name(bead)))
}

/// The patch as `git diff` prints it: headers, hunk headers and `+`/`-`/` ` lines.
fn patch_text(diff: &Diff<'_>, bead: &BeadId) -> Result<String, GitError> {
    let mut patch = Vec::new();
    diff.print(DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            patch.push(line.origin() as u8);
        }
        patch.extend_from_slice(line.content());
        true
    })
    .ctx(|| format!("printing the patch of `{}`", branch_name(bead)))?;
    Ok(String::from_utf8_lossy(&patch).into_owned())
}
