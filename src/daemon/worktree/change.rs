//! What a bead's branch changes against its target, for the agents that judge it: the files,
//! and the patch from the merge base (`git diff <target>...catalyst/<bead>`).

use git2::{Delta, DiffFormat, DiffOptions};

use super::error::Context;
use super::{branch_name, branch_tip, target_tip, GitError, Repo};
use crate::domain::context::ChangedFile;
use crate::domain::id::BeadId;

impl Repo {
    /// The files the bead's branch changes since it left `target`, and the whole patch.
    pub fn change(
        &self,
        bead: &BeadId,
        target: &str,
    ) -> Result<(Vec<ChangedFile>, String), GitError> {
        let repo = self.main_repo()?;
        let head = branch_tip(&repo, bead)?;
        let base = target_tip(&repo, target)?;
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
        let diff = repo
            .diff_tree_to_tree(Some(&from), Some(&to), Some(&mut options))
            .ctx(|| format!("comparing `{}` with `{target}`", branch_name(bead)))?;
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
        let mut patch = Vec::new();
        diff.print(DiffFormat::Patch, |_, _, line| {
            if matches!(line.origin(), '+' | '-' | ' ') {
                patch.push(line.origin() as u8);
            }
            patch.extend_from_slice(line.content());
            true
        })
        .ctx(|| format!("printing the patch of `{}`", branch_name(bead)))?;
        Ok((files, String::from_utf8_lossy(&patch).into_owned()))
    }
}
