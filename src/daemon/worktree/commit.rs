//! Work inside one bead's worktree: committing what an agent left, checking that it changed
//! anything, and putting the worktree back to a step's starting commit.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use git2::{IndexAddOption, Repository, RepositoryState, ResetType, Status, StatusOptions};
use tracing::info;

use super::error::Context;
use super::{
    branch_name, branch_ref, branch_tip, find_branch, is_catalyst_path, CommitId, GitError, Repo,
};
use crate::domain::id::BeadId;

impl Repo {
    /// Stages everything in the bead's worktree (new, modified and deleted files, respecting
    /// `.gitignore`, never `.catalyst/`) and, if the result differs from the branch tip,
    /// commits it on the bead's branch with `message` as written by the caller and the
    /// configured author. Returns `None` when there was nothing to commit.
    ///
    /// If the agent left a merge in progress with its conflicts resolved (a merge step that
    /// ran `git merge` but not `git commit`), the commit records the merged commits as parents,
    /// as `git commit` would, so that the target becomes an ancestor of the branch.
    ///
    /// Fails with [`GitError::WrongHead`] if the worktree is not on the bead's branch: the
    /// daemon's commit must land where the merge will look for it.
    pub fn commit_all(&self, bead: &BeadId, message: &str) -> Result<Option<CommitId>, GitError> {
        let mut repo = self.open_worktree(bead)?;
        self.expect_on_branch(&repo, bead)?;
        self.refuse_big_files(&repo, bead)?;
        let what = || format!("staging the changes in the worktree of bead `{bead}`");
        let mut index = repo.index().ctx(what)?;
        // The handle may be the one kept from an earlier call, and the agent's `git add` since
        // then is on disk only: read again when the file changed (git replaces the index by a
        // rename, so its inode changes too).
        index.read(false).ctx(what)?;
        let mut skip_catalyst = |path: &Path, _: &[u8]| i32::from(is_catalyst_path(path));
        index
            .add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip_catalyst))
            .ctx(what)?;
        // `add_all` picks up new and modified files; `update_all` drops the deleted ones.
        index
            .update_all(["*"], Some(&mut skip_catalyst))
            .ctx(what)?;
        index.write().ctx(what)?;
        let tree_id = index.write_tree().ctx(what)?;

        let mut merged = Vec::new();
        if repo.state() == RepositoryState::Merge {
            repo.mergehead_foreach(|oid| {
                merged.push(*oid);
                true
            })
            .ctx(|| format!("reading MERGE_HEAD in the worktree of bead `{bead}`"))?;
        }
        let head = repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .ctx(|| format!("reading HEAD of the worktree of bead `{bead}`"))?;
        if tree_id == head.tree_id() && merged.is_empty() {
            return Ok(None);
        }

        let commit_what = || format!("committing in the worktree of bead `{bead}`");
        let tree = repo.find_tree(tree_id).ctx(commit_what)?;
        let (author, committer) = self.signatures(&repo).ctx(commit_what)?;
        let mut parents = vec![head];
        for oid in &merged {
            parents.push(repo.find_commit(*oid).ctx(commit_what)?);
        }
        let parents: Vec<_> = parents.iter().collect();
        // Updating through HEAD (checked above to be the bead's branch) makes libgit2 refuse
        // the commit if the branch moved since HEAD was read.
        let id = repo
            .commit(Some("HEAD"), &author, &committer, message, &tree, &parents)
            .ctx(commit_what)?;
        if !merged.is_empty() {
            repo.cleanup_state().ctx(commit_what)?;
        }
        info!(%bead, commit = %id, "committed the worktree");
        Ok(Some(id.into()))
    }

    /// Whether the bead's work differs from `base`: the worktree is not on the bead's branch
    /// (an agent switched it away, or a daemon killed while making it from a spare left the
    /// spare's detached HEAD), the branch tip's tree differs from `base`'s, or the worktree has
    /// uncommitted changes (staged, unstaged, or untracked files that are not ignored;
    /// `.catalyst/` does not count). Commits that change nothing do not count either, so an
    /// agent cannot pass for having worked by committing an empty commit.
    pub fn changed_since(&self, bead: &BeadId, base: &CommitId) -> Result<bool, GitError> {
        let repo = self.open_worktree(bead)?;
        if self.expect_on_branch(&repo, bead).is_err() {
            return Ok(true);
        }
        let base_tree = repo
            .find_commit(base.oid()?)
            .ctx(|| format!("looking up commit `{base}` for bead `{bead}`"))?
            .tree_id();
        if branch_tip(&repo, bead)?.tree_id() != base_tree {
            return Ok(true);
        }
        Ok(!uncommitted(&repo, bead)?.is_empty())
    }

    /// Hard-resets the bead's worktree and branch to `commit` and deletes untracked files
    /// that are not ignored (`git reset --hard <commit> && git clean -fd`, sparing
    /// `.catalyst/`). Used when a step was interrupted and must start again from its starting
    /// commit, so it also repairs what an interrupted agent may have left: a HEAD switched
    /// away from the branch, a merge in progress, a deleted worktree folder or branch, and
    /// the lock files of a git command killed half-way.
    ///
    /// Ignored files (build output, caches) are kept, as `git clean` without `-x` keeps them.
    pub fn reset_to(&self, bead: &BeadId, commit: &CommitId) -> Result<(), GitError> {
        self.trees.forget(bead);
        let shared = self.exclusive();
        let main = self.main_repo()?;
        self.clear_bead_locks(&main, bead);
        let oid = commit.oid()?;
        let target = main
            .find_commit(oid)
            .ctx(|| format!("looking up commit `{commit}` to reset bead `{bead}` to"))?;
        if find_branch(&main, bead)?.is_none() {
            let branch = branch_name(bead);
            self.stamp(&main, &branch)?;
            main.branch(&branch, &target, false)
                .ctx(|| format!("creating branch `{branch}` at `{commit}`"))?;
        }
        self.ensure_worktree(&main, bead)?;
        drop(shared);

        let repo = self.open_worktree(bead)?;
        let what = || format!("resetting the worktree of bead `{bead}` to `{commit}`");
        repo.set_head(&branch_ref(bead)).ctx(what)?;
        let object = repo.find_object(oid, None).ctx(what)?;
        repo.reset(&object, ResetType::Hard, None).ctx(what)?;
        repo.cleanup_state().ctx(what)?;
        remove_untracked(&repo, bead)?;
        info!(%bead, %commit, "reset the worktree");
        Ok(())
    }

    /// Whether the repository holds `commit`.
    pub fn has_commit(&self, commit: &CommitId) -> bool {
        let Ok(main) = self.main_repo() else {
            return false;
        };
        commit.oid().is_ok_and(|oid| main.find_commit(oid).is_ok())
    }

    /// The first parent of `commit` (`None` for a root commit).
    pub fn parent_of(&self, commit: &CommitId) -> Result<Option<CommitId>, GitError> {
        let main = self.main_repo()?;
        let found = main
            .find_commit(commit.oid()?)
            .ctx(|| format!("looking up commit `{commit}`"))?;
        Ok(found
            .parent_ids()
            .next()
            .and_then(|p| CommitId::parse(&p.to_string()).ok()))
    }

    /// Refuses a worktree whose new or changed files include one larger than
    /// `max_file_bytes`: staging reads every file it adds, and git's later reads of the blob
    /// (a diff, a checkout) take it whole into memory. Only the files' sizes are looked at.
    fn refuse_big_files(&self, repo: &Repository, bead: &BeadId) -> Result<(), GitError> {
        if self.max_file_bytes == u64::MAX {
            return Ok(());
        }
        let Some(workdir) = repo.workdir() else {
            return Ok(());
        };
        let changed = Status::WT_NEW | Status::WT_MODIFIED | Status::WT_TYPECHANGE;
        let files: Vec<(PathBuf, u64)> = uncommitted(repo, bead)?
            .into_iter()
            .filter(|(_, status)| status.intersects(changed))
            .filter_map(|(path, _)| {
                let size = fs::symlink_metadata(workdir.join(&path)).ok()?.len();
                (size > self.max_file_bytes).then_some((path, size))
            })
            .collect();
        if files.is_empty() {
            return Ok(());
        }
        Err(GitError::TooBig {
            files,
            max: self.max_file_bytes,
        })
    }

    /// Fails unless the worktree's HEAD is the bead's branch.
    fn expect_on_branch(&self, repo: &Repository, bead: &BeadId) -> Result<(), GitError> {
        let head = repo
            .find_reference("HEAD")
            .ctx(|| format!("reading HEAD of the worktree of bead `{bead}`"))?;
        let expected = branch_ref(bead);
        let actual = match head.symbolic_target() {
            Ok(Some(name)) if name == expected => return Ok(()),
            Ok(Some(name)) => name.to_owned(),
            _ => match head.target() {
                Some(oid) => format!("detached HEAD at {oid}"),
                None => "an unreadable HEAD".to_owned(),
            },
        };
        Err(GitError::WrongHead {
            bead: bead.clone(),
            path: self.worktree_path(bead),
            head: actual,
        })
    }
}

/// Paths (relative to the worktree) that differ from HEAD: staged, unstaged, or untracked and
/// not ignored, outside `.catalyst/`. Untracked folders are listed file by file, except nested
/// repositories, which git lists as one `dir/` entry.
fn uncommitted(repo: &Repository, bead: &BeadId) -> Result<Vec<(PathBuf, Status)>, GitError> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false);
    let statuses = repo
        .statuses(Some(&mut opts))
        .ctx(|| format!("reading the status of the worktree of bead `{bead}`"))?;
    Ok(statuses
        .iter()
        .filter(|e| !e.status().intersects(Status::IGNORED) && e.status() != Status::CURRENT)
        .filter_map(|e| {
            let path = PathBuf::from(String::from_utf8_lossy(e.path_bytes()).into_owned());
            (!is_catalyst_path(&path)).then_some((path, e.status()))
        })
        .collect())
}

/// Deletes untracked, not ignored files, then the folders that this left empty.
fn remove_untracked(repo: &Repository, bead: &BeadId) -> Result<(), GitError> {
    let Some(workdir) = repo.workdir().map(Path::to_path_buf) else {
        return Ok(());
    };
    let mut parents = BTreeSet::new();
    for (rel, status) in uncommitted(repo, bead)? {
        if !status.contains(Status::WT_NEW) {
            continue;
        }
        let path = workdir.join(&rel);
        let is_dir = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        let removed = if is_dir {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(GitError::io("removing untracked", path)(e)),
        }
        parents.extend(
            rel.ancestors()
                .skip(1)
                .filter(|p| !p.as_os_str().is_empty())
                .map(Path::to_path_buf),
        );
    }
    // Deepest first, so that a folder emptied by removing its subfolders goes too; a folder
    // that still holds something (ignored files) fails to be removed and stays, as intended.
    for rel in parents.iter().rev() {
        let _ = fs::remove_dir(workdir.join(rel));
    }
    Ok(())
}
