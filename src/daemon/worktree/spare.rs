//! Spare worktrees: a finished bead's worktree is kept, renamed, instead of deleted, and the
//! next bead's worktree is made from it instead of checked out afresh
//! (docs/worktrees.md#spare-worktrees).
//!
//! Checking out a whole tree and deleting it again per bead creates and frees as many inodes
//! as the tree has files; on ext4 each new inode then scans the ones freed in the last 30 s
//! (`find_inode_bit` → `recently_deleted`), so bead after bead the creation slows down. A
//! spare only changes the files that differ between its commit and the new bead's.
//!
//! A spare is `<worktrees_dir>/.spare-<n>` with git's record `.git/worktrees/.spare-<n>`, its
//! HEAD detached, nothing untracked in it (no bead id starts with a dot, so the sweeps that
//! list beads never see one). Taking or returning one renames the folder and the record and
//! rewrites the two files that link them (`gitdir` both ways), as `git worktree move` does. A
//! crash in between leaves a record or a folder that no longer matches: a spare that does not
//! check out is deleted when the repository opens, and what is left under the bead's name is
//! what [`Repo::remove`] and [`Repo::create`] already repair.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{Repository, ResetType, StatusOptions};
use tracing::{info, warn};

use super::error::Context;
use super::{GitError, Repo};
use crate::daemon::fsutil;
use crate::domain::id::BeadId;

/// The names of spares start with it; no bead id can.
const SPARE_PREFIX: &str = ".spare-";

/// The spares the repository keeps, and the next number.
#[derive(Debug, Default)]
pub(super) struct Spares {
    names: Vec<Spare>,
    next: u64,
}

/// One spare worktree.
#[derive(Debug)]
struct Spare {
    /// `.spare-<n>`.
    name: String,
    /// The commit the spare's files and index were found to match when it was kept (nothing
    /// changed, staged or untracked): taken for a bead at that same commit, it needs no
    /// checkout. `None` when not known (a spare found when the repository opened).
    clean_at: Option<git2::Oid>,
}

/// A bead's worktree made ready to be kept as a spare ([`Repo::tidy_for_spare`]).
#[derive(Debug)]
pub(super) struct Tidied {
    clean_at: Option<git2::Oid>,
}

impl Repo {
    /// Keeps up to `n` spare worktrees (see the module documentation); 0, the default, keeps
    /// none. Spares found from an earlier run are checked and kept, or deleted.
    pub fn with_spares(mut self, n: usize) -> Repo {
        self.spare_limit = n;
        self.check_spares();
        self
    }

    fn check_spares(&self) {
        let n = self.spare_limit;
        let _shared = self.exclusive();
        let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
        spares.names.clear();
        let Ok(repo) = self.main_repo() else {
            return;
        };
        let mut found: Vec<String> = fs::read_dir(repo.commondir().join("worktrees"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| n.starts_with(SPARE_PREFIX))
            .collect();
        found.sort();
        for name in found {
            let number = name[SPARE_PREFIX.len()..].parse::<u64>().unwrap_or(0);
            spares.next = spares.next.max(number + 1);
            if spares.names.len() < n && self.spare_intact(&repo, &name) {
                spares.names.push(Spare {
                    name,
                    clean_at: None,
                });
            } else {
                self.delete_spare(&repo, &name);
            }
        }
    }

    /// How many spares are kept now.
    pub fn spare_count(&self) -> usize {
        self.spares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .names
            .len()
    }

    fn spare_path(&self, name: &str) -> PathBuf {
        self.worktrees_dir.join(name)
    }

    /// Whether the spare's record and folder link to each other and its checkout finished.
    fn spare_intact(&self, repo: &Repository, name: &str) -> bool {
        let record = repo.commondir().join("worktrees").join(name);
        let folder = self.spare_path(name);
        let gitdir = fs::read_to_string(record.join("gitdir")).unwrap_or_default();
        let link = fs::read_to_string(folder.join(".git")).unwrap_or_default();
        Path::new(gitdir.trim()) == folder.join(".git")
            && link.trim().strip_prefix("gitdir: ").map(Path::new) == Some(&record)
            && record.join("index").is_file()
    }

    /// Deletes a spare's record and folder, whatever state they are in.
    fn delete_spare(&self, repo: &Repository, name: &str) {
        let record = repo.commondir().join("worktrees").join(name);
        for path in [record, self.spare_path(name)] {
            if let Err(e) = fs::remove_dir_all(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    warn!(path = %path.display(), error = %e, "cannot delete a spare worktree");
                }
            }
        }
    }

    /// Makes the bead's worktree out of a spare, on its branch (which must exist) at the
    /// branch's tip. `false` when there is no spare, or when this one failed (it is deleted,
    /// and the caller adds the worktree as usual). Called with [`Repo::exclusive`] held.
    pub(super) fn adopt_spare(&self, repo: &Repository, bead: &BeadId) -> bool {
        let Spare { name, clean_at } = {
            let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
            match spares.names.pop() {
                Some(spare) => spare,
                None => return false,
            }
        };
        match self.adopt(repo, &name, clean_at, bead) {
            Ok(()) => {
                info!(%bead, spare = %name, "made the bead's worktree from a spare");
                true
            }
            Err(e) => {
                warn!(%bead, spare = %name, error = %e, "cannot use a spare worktree; checking out a new one");
                self.delete_spare(repo, &name);
                self.delete_spare(repo, bead.as_str());
                false
            }
        }
    }

    fn adopt(
        &self,
        repo: &Repository,
        name: &str,
        clean_at: Option<git2::Oid>,
        bead: &BeadId,
    ) -> Result<(), GitError> {
        self.relink(repo, name, bead.as_str())?;
        let branch = super::branch_ref(bead);
        write_head(repo, bead.as_str(), &format!("ref: {branch}"))?;
        let path = self.worktree_path(bead);
        let opened = std::time::Instant::now();
        let tree = super::handles::open(&path).ctx(|| format!("opening the spare for `{bead}`"))?;
        {
            let tip = tree
                .head()
                .and_then(|h| h.peel_to_commit())
                .ctx(|| format!("reading the tip of `{branch}`"))?;
            // Only the files that differ from the spare's commit are written; none when the
            // spare was kept clean at this very commit (the target has not moved since).
            if clean_at != Some(tip.id()) {
                tree.reset(tip.as_object(), ResetType::Hard, None)
                    .ctx(|| format!("checking out `{branch}` in the spare"))?;
            }
        }
        self.trees.keep(bead, opened, tree);
        Ok(())
    }

    /// Gets the bead's worktree ready to be kept as a spare, when there is room and it is in
    /// order (catalyst's, unlocked, complete): HEAD detached, untracked and ignored files
    /// deleted (the bead is finished with them). Touches only the bead's own worktree and
    /// record, so it runs before [`Repo::exclusive`] is taken; `None` when it is not to be
    /// kept.
    pub(super) fn tidy_for_spare(
        &self,
        repo: &Repository,
        bead: &BeadId,
        wt: &git2::Worktree,
    ) -> Option<Tidied> {
        if self.spare_count() >= self.spare_limit {
            return None;
        }
        self.tidy_if_in_order(repo, bead, wt).unwrap_or_else(|e| {
            warn!(%bead, error = %e, "cannot keep the bead's worktree as a spare; deleting it");
            None
        })
    }

    fn tidy_if_in_order(
        &self,
        repo: &Repository,
        bead: &BeadId,
        wt: &git2::Worktree,
    ) -> Result<Option<Tidied>, GitError> {
        let path = self.worktree_path(bead);
        let unlocked = matches!(wt.is_locked(), Ok(git2::WorktreeLockStatus::Unlocked));
        let in_order = super::same_path(wt.path(), &path)
            && unlocked
            && wt.validate().is_ok()
            && super::checkout_finished(repo, wt);
        if !in_order {
            return Ok(None);
        }
        self.tidy(repo, bead, &path).map(Some)
    }

    fn tidy(&self, repo: &Repository, bead: &BeadId, path: &Path) -> Result<Tidied, GitError> {
        // Kept again when dropped, and forgotten by `remove` before the worktree moves.
        let tree = self.trees.take_or(bead, || {
            super::handles::open(path).ctx(|| format!("opening the worktree of `{bead}`"))
        })?;
        let head = tree
            .head()
            .and_then(|h| h.peel_to_commit())
            .ctx(|| format!("reading the head of `{bead}`"))?
            .id();
        write_head(repo, bead.as_str(), &head.to_string())?;
        let mut opts = StatusOptions::new();
        opts.include_untracked(true)
            .include_ignored(true)
            .recurse_untracked_dirs(false)
            .recurse_ignored_dirs(false);
        // Files checked out in the same tick of the clock as the index was written are
        // "racily clean": every status hashes them again (a read of the file and of its
        // attributes each), for as long as the index stays as it is. This status writes the
        // index back with their stat data once they are found unchanged, as `git status`
        // does, so the beads that get this spare next do not hash them (a spare kept at the
        // target's tip is not checked out again). An index that cannot be written (a lock
        // left behind) is only read.
        opts.update_index(true);
        let statuses = match tree.statuses(Some(&mut opts)) {
            Ok(statuses) => statuses,
            Err(_) => tree
                .statuses(Some(opts.update_index(false)))
                .ctx(|| format!("reading the status of `{bead}`"))?,
        };
        let mut clean = true;
        for entry in statuses.iter() {
            if !(entry.status().is_wt_new() || entry.status().is_ignored()) {
                clean = false;
                continue;
            }
            let rel = entry.path_bytes();
            let rel = rel.strip_suffix(b"/").unwrap_or(rel);
            let file = path.join(std::ffi::OsStr::from_bytes(rel));
            let gone = match fs::symlink_metadata(&file) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&file),
                Ok(_) => fs::remove_file(&file),
                Err(_) => Ok(()),
            };
            gone.map_err(GitError::io("deleting an untracked file of", &file))?;
        }
        Ok(Tidied {
            clean_at: clean.then_some(head),
        })
    }

    /// Keeps the bead's worktree, made ready by [`Repo::tidy_for_spare`], as a spare: `false`
    /// when there is no room any more or the renames failed (the caller deletes what is left
    /// under the bead's name). Called with [`Repo::exclusive`] held, before the bead's branch
    /// is deleted.
    pub(super) fn keep_as_spare(&self, repo: &Repository, bead: &BeadId, tidied: Tidied) -> bool {
        let name = {
            let mut spares = self.spares.lock().unwrap_or_else(|e| e.into_inner());
            if spares.names.len() >= self.spare_limit {
                return false;
            }
            spares.next += 1;
            format!("{SPARE_PREFIX}{}", spares.next - 1)
        };
        match self.relink(repo, bead.as_str(), &name) {
            Ok(()) => {
                self.spares
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .names
                    .push(Spare {
                        name,
                        clean_at: tidied.clean_at,
                    });
                true
            }
            Err(e) => {
                warn!(%bead, error = %e, "cannot keep the bead's worktree as a spare; deleting it");
                self.delete_spare(repo, &name);
                false
            }
        }
    }

    /// Renames worktree `from` (its folder and git's record) to `to`, and rewrites the files
    /// that link them.
    fn relink(&self, repo: &Repository, from: &str, to: &str) -> Result<(), GitError> {
        let records = repo.commondir().join("worktrees");
        let (old_record, record) = (records.join(from), records.join(to));
        let (old_folder, folder) = (self.spare_path(from), self.spare_path(to));
        for (a, b) in [(&old_folder, &folder), (&old_record, &record)] {
            fs::rename(a, b).map_err(GitError::io("renaming a worktree", a))?;
        }
        // Each link is replaced whole (a new file renamed over it): a crash leaves the old
        // link or the new one, never an empty file git would read as the current folder.
        let gitdir = folder.join(".git");
        let link = format!("{}\n", gitdir.display());
        fsutil::write_replace(&record.join("gitdir"), link.as_bytes())
            .map_err(GitError::io("linking a worktree's record to", &gitdir))?;
        let back = format!("gitdir: {}\n", record.display());
        fsutil::write_replace(&gitdir, back.as_bytes())
            .map_err(GitError::io("linking a worktree to its record", &record))
    }
}

/// Points the HEAD of worktree `name` at `target` (`ref: <branch>` or a commit id) in its
/// record in the main repository, as git does: `HEAD.lock` written, then renamed over `HEAD`
/// (a lock another git process holds makes it fail). libgit2's `set_head` would first open
/// every worktree of the repository to check that no other has the branch checked out; the
/// branches here are the bead's own.
fn write_head(repo: &Repository, name: &str, target: &str) -> Result<(), GitError> {
    let record = repo.commondir().join("worktrees").join(name);
    let (lock, head) = (record.join("HEAD.lock"), record.join("HEAD"));
    if let Err(e) = super::add::write_new(&lock, &format!("{target}\n")) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            let _ = fs::remove_file(&lock);
        }
        return Err(GitError::io("writing a worktree's HEAD", lock)(e));
    }
    fs::rename(&lock, &head).map_err(GitError::io("writing a worktree's HEAD", head))
}
