//! One git worktree and branch per bead, through libgit2 (docs/worktrees.md).
//!
//! A bead works in the linked worktree `<worktrees_dir>/<bead>` on branch `catalyst/<bead>`,
//! made from the tip of the target branch when its molecule is poured. The daemon commits what
//! agents leave behind ([`Repo::commit_all`]), checks that an agent really changed something
//! ([`Repo::changed_since`]), puts a worktree back to a step's starting commit after a crash
//! ([`Repo::reset_to`]), finishes the bead by fast-forwarding the target
//! ([`Repo::merge_into_target`]) and removes what the bead no longer needs ([`Repo::remove`]).
//!
//! Contracts that hold for every operation:
//! - **Blocking and synchronous.** The daemon calls these from `spawn_blocking`. Calls for
//!   different beads may run in parallel; calls for the same bead, and merges into the same
//!   target, are serialized by the caller (the engine runs one step per bead at a time).
//!   Changes to git's shared records (adding and pruning worktrees, creating and deleting
//!   branches, moving the target) take a lock inside [`Repo`], since libgit2 does not make
//!   them safe against each other.
//! - **Safe to repeat after `kill -9` at any instant** (docs/overview.md#state-lives-on-disk): creating an existing
//!   worktree returns it, a half-made worktree is made again, merging a merged bead answers
//!   [`MergeOutcome::AlreadyMerged`], removing a removed bead succeeds.
//! - **Uncommitted work outside a bead's own worktree is never overwritten**, and a target
//!   branch only ever moves forward to a descendant.
//! - **`.catalyst/` is never staged or cleaned** inside a worktree: it holds daemon state.

mod add;
mod change;
mod commit;
mod error;
mod handles;
mod merge;
mod sandbox;
mod spare;
#[cfg(test)]
mod tests;
pub mod transport;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use git2::{BranchType, Commit, ErrorCode, Repository, Signature, WorktreePruneOptions};
use tracing::{info, warn};

pub use crate::domain::config::merge::Identity;
use crate::domain::id::BeadId;
pub use change::{BranchDiff, FileLines};
use error::Context;
pub use error::{CommitId, GitError};
pub use merge::{BranchMerge, Landing, MergeGuard, MergeOutcome};

/// The committer of the commits the daemon makes, and their author when the repository names
/// no user, unless [`Repo::with_identity`] says otherwise.
pub const DEFAULT_AUTHOR: (&str, &str) = ("catalyst", "catalyst@localhost");

/// The prefix of every bead branch; [`Repo::list`] finds beads by it.
const BRANCH_PREFIX: &str = "catalyst/";

/// The name of a bead's branch: `catalyst/<bead>`.
pub fn branch_name(bead: &BeadId) -> String {
    format!("{BRANCH_PREFIX}{bead}")
}

/// The file that records which store made `branch`: one of catalyst's own in the repository's
/// git folder (`.git/catalyst-stores/<bead>`), which git never reads and an agent cannot write
/// (the sandbox mounts the git folder read-only). Not git's config: libgit2 rewrites that file
/// whole for each change, and a reader opening the repository meanwhile fails.
fn stamp_path(repo: &Repository, branch: &str) -> PathBuf {
    let name = branch.strip_prefix(BRANCH_PREFIX).unwrap_or(branch);
    repo.commondir().join("catalyst-stores").join(name)
}

/// The store `branch` records, if any.
fn stamp_of(repo: &Repository, branch: &str) -> Option<String> {
    let text = fs::read_to_string(stamp_path(repo, branch)).ok()?;
    Some(text.trim().to_owned()).filter(|s| !s.is_empty())
}

/// The full ref of a bead's branch: `refs/heads/catalyst/<bead>`.
fn branch_ref(bead: &BeadId) -> String {
    format!("refs/heads/{BRANCH_PREFIX}{bead}")
}

/// A bead's worktree as [`Repo::create`] leaves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// `<worktrees_dir>/<bead>`, with `worktrees_dir` canonicalized.
    pub path: PathBuf,
    /// `catalyst/<bead>`.
    pub branch: String,
    /// The branch tip: the commit the bead's first step starts from.
    pub head: CommitId,
    /// Made by this call (checked out, or from a spare), so clean at `head`; `false` for a
    /// worktree that was there already.
    pub fresh: bool,
}

/// The workspace's repository and catalyst's worktrees folder.
///
/// Keeps libgit2 handles between calls for a few seconds: of the main repository, and of
/// each bead's worktree for that bead ([`handles`] says why what agents and people write in
/// between is still seen).
#[derive(Debug, Clone)]
pub struct Repo {
    /// The main repository's working directory.
    workspace: PathBuf,
    /// Canonical, so that it compares equal to the paths libgit2 records for worktrees.
    worktrees_dir: PathBuf,
    /// The author of the daemon's commits; None: the repository's `user.name` and
    /// `user.email`, else the committer.
    author: Option<Identity>,
    committer: Identity,
    /// Held while git's shared records change: worktrees added, pruned or listed, branches
    /// created or deleted, the target moved. libgit2 takes no lock of its own across them:
    /// adding a worktree while another is pruned fails with "already checked out", and two
    /// ref deletions race on `packed-refs`. Work inside one bead's worktree (commits, status)
    /// does not take it.
    shared: Arc<Mutex<()>>,
    /// The store whose beads these are ([`Repo::with_store`]): branches it makes carry it, and
    /// a bead branch that carries another is not built on.
    store: Option<Arc<str>>,
    /// The largest file [`Repo::commit_all`] commits.
    max_file_bytes: u64,
    /// Finished beads' worktrees kept for the next beads ([`Repo::with_spares`]).
    spares: Arc<Mutex<spare::Spares>>,
    spare_limit: usize,
    /// Idle handles of the main repository ([`Repo::main_repo`]).
    handles: Arc<handles::Handles>,
    /// Handles of beads' worktrees kept between calls ([`Repo::open_worktree`]).
    trees: Arc<handles::Trees>,
}

impl Repo {
    /// Opens the repository whose working directory is `workspace` (no search upwards) and
    /// creates `worktrees_dir` (normally `<workspace>/.catalyst/worktrees`) if it is missing.
    pub fn open(workspace: &Path, worktrees_dir: &Path) -> Result<Repo, GitError> {
        let repo = Repository::open(workspace)
            .ctx(|| format!("opening the git repository at `{}`", workspace.display()))?;
        let Some(workdir) = repo.workdir() else {
            return Err(GitError::Bare {
                path: workspace.to_path_buf(),
            });
        };
        fs::create_dir_all(worktrees_dir)
            .map_err(GitError::io("creating the worktrees folder", worktrees_dir))?;
        let worktrees_dir = fs::canonicalize(worktrees_dir).map_err(GitError::io(
            "resolving the worktrees folder",
            worktrees_dir,
        ))?;
        // libgit2 creates `.git/worktrees` with an exclusive mkdir the first time a worktree is
        // added, so two beads created in parallel on a fresh repository would race; an empty
        // folder is what git itself leaves after pruning the last worktree.
        let meta = repo.commondir().join("worktrees");
        fs::create_dir_all(&meta).map_err(GitError::io("creating", meta))?;
        Ok(Repo {
            workspace: workdir.to_path_buf(),
            worktrees_dir,
            author: None,
            committer: Identity {
                name: DEFAULT_AUTHOR.0.to_owned(),
                email: DEFAULT_AUTHOR.1.to_owned(),
            },
            shared: Arc::new(Mutex::new(())),
            store: None,
            max_file_bytes: u64::MAX,
            spares: Arc::default(),
            spare_limit: 0,
            handles: Arc::default(),
            trees: Arc::default(),
        })
    }

    /// Makes [`Repo::commit_all`] refuse a worktree with a file larger than `max` bytes,
    /// before it reads any of it.
    /// The repository's working folder (the workspace).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The largest file the daemon's commits take (see [`Repo::with_max_file_bytes`]).
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    pub fn with_max_file_bytes(mut self, max: u64) -> Repo {
        self.max_file_bytes = max;
        self
    }

    /// Makes this the repository of store `store`: each bead branch it creates records the
    /// store (`.git/catalyst-stores/<bead>`), and [`Repo::create`] refuses a
    /// bead branch that records another store, or none (unless the bead's worktree is in
    /// place: a branch made before store ids, still in use).
    pub fn with_store(mut self, store: &str) -> Repo {
        self.store = Some(store.into());
        self
    }

    /// Records this store as the maker of `branch`.
    pub(super) fn stamp(&self, repo: &Repository, branch: &str) -> Result<(), GitError> {
        let Some(store) = self.store.as_deref() else {
            return Ok(());
        };
        let path = stamp_path(repo, branch);
        let folder = path.parent().map(Path::to_owned).unwrap_or_default();
        fs::create_dir_all(&folder).map_err(GitError::io(
            "creating the folder of branch records",
            folder,
        ))?;
        // Not fsynced, like the refs libgit2 writes: after a power cut the record is as
        // durable as the branch it describes.
        crate::daemon::fsutil::write_replace(&path, store.as_bytes())
            .map_err(GitError::io("recording the store of a branch in", path))
    }

    /// Whether the existing branch of `bead` is this store's (see [`Repo::with_store`]).
    fn check_ours(&self, repo: &Repository, bead: &BeadId, branch: &str) -> Result<(), GitError> {
        let Some(ours) = self.store.as_deref() else {
            return Ok(());
        };
        match stamp_of(repo, branch) {
            Some(s) if s == ours => Ok(()),
            None if self.worktree_path(bead).is_dir() => self.stamp(repo, branch),
            other => Err(GitError::NotOurs {
                branch: branch.to_owned(),
                store: other,
            }),
        }
    }

    /// Whether this store made the branch of `bead` (always, for a repository without a
    /// store): a branch another store made is never removed by this one.
    pub fn made_here(&self, bead: &BeadId) -> bool {
        let Some(ours) = self.store.as_deref() else {
            return true;
        };
        let Ok(repo) = self.main_repo() else {
            return false;
        };
        stamp_of(&repo, &branch_name(bead)).is_some_and(|s| s == ours)
    }

    /// The beads that have a branch (`catalyst/<bead>`), whoever made it: a new bead's id is
    /// never one of them.
    pub fn branch_beads(&self) -> Result<Vec<BeadId>, GitError> {
        let repo = self.main_repo()?;
        let branches = repo
            .branches(Some(BranchType::Local))
            .ctx(|| "listing branches".to_owned())?;
        Ok(branches
            .flatten()
            .filter_map(|(b, _)| {
                let name = b.name().ok()??.strip_prefix(BRANCH_PREFIX)?.to_owned();
                BeadId::new(&name).ok()
            })
            .collect())
    }

    /// Takes [`Repo::shared`] (a panic that poisoned it left git's files as a crash would,
    /// which every operation here repairs).
    fn exclusive(&self) -> MutexGuard<'_, ()> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the author (None: the repository's user) and the committer of the commits the
    /// daemon makes.
    pub fn with_identity(mut self, author: Option<Identity>, committer: Identity) -> Repo {
        self.author = author;
        self.committer = committer;
        self
    }

    /// [`Repo::with_identity`] from the config's `[merge]` (checked when it was loaded; a
    /// value that does not read keeps what this repository had).
    pub fn with_identity_of(self, merge: &crate::domain::config::merge::MergeConfig) -> Repo {
        match (merge.author(), merge.committer()) {
            (Ok(author), Ok(committer)) => self.with_identity(author, committer),
            _ => self,
        }
    }

    /// Whom the daemon's commits name, as `Name <email>` (author, committer): what an order
    /// tells a worker, so that the commits made on other machines name the same people.
    pub fn commit_identity(&self) -> Result<(String, String), GitError> {
        let repo = self.main_repo()?;
        let (author, committer) = self
            .signatures(&repo)
            .ctx(|| "reading whom the daemon's commits name".to_owned())?;
        let text = |s: &Signature<'_>| {
            format!(
                "{} <{}>",
                s.name().unwrap_or_default(),
                s.email().unwrap_or_default()
            )
        };
        Ok((text(&author), text(&committer)))
    }

    /// The author and committer of a commit made now in `repo`.
    pub(super) fn signatures(
        &self,
        repo: &Repository,
    ) -> Result<(Signature<'static>, Signature<'static>), git2::Error> {
        let committer = Signature::now(&self.committer.name, &self.committer.email)?;
        let author = match &self.author {
            Some(who) => Signature::now(&who.name, &who.email)?,
            // git's own lookup: `user.name` and `user.email` of the repository's config, the
            // user's and the system's. A repository that names nobody gets the committer.
            None => repo.signature().unwrap_or_else(|_| committer.clone()),
        };
        Ok((author, committer))
    }

    /// Where a bead's worktree lives, whether or not it exists.
    pub fn worktree_path(&self, bead: &BeadId) -> PathBuf {
        self.worktrees_dir.join(bead.as_str())
    }

    /// Creates branch `catalyst/<bead>` at the tip of the local branch `target` and a worktree
    /// for it at [`Repo::worktree_path`].
    ///
    /// Idempotent: an existing branch is kept where it is (it may hold the bead's committed
    /// work from before a restart) and an existing worktree is returned unchanged. A worktree
    /// left half-made by a crash, or whose folder was deleted, is made again from the branch.
    pub fn create(&self, bead: &BeadId, target: &str) -> Result<Worktree, GitError> {
        self.trees.forget(bead);
        let _shared = self.exclusive();
        let repo = self.main_repo()?;
        self.clear_bead_locks(&repo, bead);
        let branch = branch_name(bead);
        let head = match find_branch(&repo, bead)? {
            Some(tip) => {
                self.check_ours(&repo, bead, &branch)?;
                tip.id()
            }
            None => {
                let from = target_tip(&repo, target)?;
                // Stamped first: a daemon killed in between leaves a record without a branch,
                // which the next creation writes again, never a branch without its record.
                self.stamp(&repo, &branch)?;
                repo.branch(&branch, &from, false)
                    .ctx(|| format!("creating branch `{branch}` at `{target}`"))?;
                info!(%bead, %branch, %target, commit = %from.id(), "created bead branch");
                from.id()
            }
        };
        let (path, fresh) = self.ensure_worktree(&repo, bead)?;
        Ok(Worktree {
            path,
            branch,
            head: head.into(),
            fresh,
        })
    }

    /// The tip of the bead's branch.
    pub fn head(&self, bead: &BeadId) -> Result<CommitId, GitError> {
        let repo = self.main_repo()?;
        let tip = branch_tip(&repo, bead)?.id();
        Ok(tip.into())
    }

    /// Removes the bead's worktree folder, git's record of it, and its branch; the worktree is
    /// kept as a spare instead when the repository keeps spares and has room
    /// ([`Repo::with_spares`]).
    ///
    /// Idempotent: whatever is already gone is skipped. Whether the bead may lose its work is
    /// the caller's decision (docs/worktrees.md#removal: only merged beads, or ones a person cancelled). A
    /// worktree a person locked (`git worktree lock`) is refused, and a worktree with the
    /// bead's name outside the worktrees folder is left alone.
    pub fn remove(&self, bead: &BeadId) -> Result<(), GitError> {
        let repo = self.main_repo()?;
        // Git's record of the worktree is the bead's own: looked up once, before the lock.
        let found = find_worktree(&repo, bead)?;
        let spare = found
            .as_ref()
            .and_then(|wt| self.tidy_for_spare(&repo, bead, wt));
        self.trees.forget(bead);
        let _shared = self.exclusive();
        self.clear_bead_locks(&repo, bead);
        let path = self.worktree_path(bead);
        if let Some(wt) = found {
            let ours = same_path(wt.path(), &path);
            let kept = match spare {
                Some(tidied) if ours => self.keep_as_spare(&repo, bead, tidied),
                _ => false,
            };
            if kept {
                info!(%bead, "kept the bead's worktree as a spare");
            } else if ours || wt.validate().is_err() {
                let mut opts = WorktreePruneOptions::new();
                // Only delete a working tree in our own folder, never one elsewhere.
                opts.valid(true).working_tree(ours);
                wt.prune(Some(&mut opts))
                    .ctx(|| format!("removing the worktree of bead `{bead}`"))?;
            } else {
                warn!(%bead, path = %wt.path().display(), "leaving a git worktree that catalyst did not make");
            }
        }
        if fs::symlink_metadata(&path).is_ok() {
            fs::remove_dir_all(&path).map_err(GitError::io("removing worktree folder", &path))?;
        }
        let branch = branch_name(bead);
        match repo.find_branch(&branch, BranchType::Local) {
            Ok(b) => {
                delete_branch(&repo, b).ctx(|| format!("deleting branch `{branch}`"))?;
                let _ = fs::remove_file(stamp_path(&repo, &branch));
            }
            Err(e) if e.code() == ErrorCode::NotFound => {}
            Err(e) => return Err(e).ctx(|| format!("looking up branch `{branch}`")),
        }
        info!(%bead, "removed bead worktree and branch");
        Ok(())
    }

    /// Beads that have a worktree in the worktrees folder (registered with git or a leftover
    /// folder) or a `catalyst/*` branch, sorted, for the daemon's start-up sweep. Names that
    /// are not valid bead ids are skipped: catalyst never made them.
    pub fn list(&self) -> Result<Vec<BeadId>, GitError> {
        let _shared = self.exclusive();
        let repo = self.main_repo()?;
        let mut beads = BTreeSet::new();
        let names = repo
            .worktrees()
            .ctx(|| "listing git worktrees".to_owned())?;
        for name in names.iter().filter_map(|n| n.ok().flatten()) {
            let Ok(bead) = BeadId::new(name) else {
                continue;
            };
            if let Ok(wt) = repo.find_worktree(name) {
                if same_path(wt.path(), &self.worktree_path(&bead)) {
                    beads.insert(bead);
                }
            }
        }
        let glob = format!("refs/heads/{BRANCH_PREFIX}*");
        let refs = repo
            .references_glob(&glob)
            .ctx(|| format!("listing `{glob}`"))?;
        for r in refs {
            let r = r.ctx(|| format!("listing `{glob}`"))?;
            let name = r.name().unwrap_or_default();
            if let Some(Ok(bead)) = name
                .strip_prefix("refs/heads/")
                .and_then(|n| n.strip_prefix(BRANCH_PREFIX))
                .map(BeadId::new)
            {
                beads.insert(bead);
            }
        }
        let entries = fs::read_dir(&self.worktrees_dir)
            .map_err(GitError::io("listing", &self.worktrees_dir))?;
        for entry in entries {
            let entry = entry.map_err(GitError::io("listing", &self.worktrees_dir))?;
            if let Some(Ok(bead)) = entry.file_name().to_str().map(BeadId::new) {
                if entry.path().is_dir() {
                    beads.insert(bead);
                }
            }
        }
        Ok(beads.into_iter().collect())
    }

    /// A handle of the main repository: an idle one when there is one ([`handles`]).
    /// The repository's git folder (`.git`, the common one of its worktrees).
    pub fn common_dir(&self) -> Result<PathBuf, GitError> {
        Ok(self.main_repo()?.commondir().to_path_buf())
    }

    fn main_repo(&self) -> Result<handles::Kept<'_>, GitError> {
        self.handles.take(&self.workspace).ctx(|| {
            format!(
                "opening the git repository at `{}`",
                self.workspace.display()
            )
        })
    }

    /// Opens the bead's worktree as a repository of its own (index, HEAD and files of that
    /// worktree), or takes the handle kept from the last call ([`handles::Trees`]).
    /// `Repository::open` does not search upwards, so a folder that lost its `.git` file is
    /// reported missing instead of silently opening the main repository around it.
    fn open_worktree(&self, bead: &BeadId) -> Result<handles::Kept<'_>, GitError> {
        let path = self.worktree_path(bead);
        let missing = || GitError::NoWorktree {
            bead: bead.clone(),
            path: path.clone(),
        };
        if !path.join(".git").is_file() {
            self.trees.forget(bead);
            return Err(missing());
        }
        self.trees.take_or(bead, || {
            let repo = handles::open(&path).ctx(|| {
                format!(
                    "opening the worktree of bead `{bead}` at `{}`",
                    path.display()
                )
            })?;
            if !repo.is_worktree() {
                return Err(missing());
            }
            Ok(repo)
        })
    }

    /// Makes sure the bead's worktree exists, complete, on its branch (which must exist);
    /// `true` with it when it was made now.
    fn ensure_worktree(
        &self,
        repo: &Repository,
        bead: &BeadId,
    ) -> Result<(PathBuf, bool), GitError> {
        let path = self.worktree_path(bead);
        if let Some(wt) = find_worktree(repo, bead)? {
            let ours = same_path(wt.path(), &path);
            if wt.validate().is_ok() && !ours && !links_back(repo, &wt) {
                // A record whose folder does not name it back (a crash while a spare was
                // renamed left it half-written) is no one's worktree: only the record goes.
                warn!(%bead, path = %wt.path().display(), "git's record of the bead's worktree names a folder that is not that worktree; pruning the record");
            } else if wt.validate().is_ok() {
                if !ours {
                    return Err(GitError::WorktreeElsewhere {
                        bead: bead.clone(),
                        path: wt.path().to_path_buf(),
                    });
                }
                if checkout_finished(repo, &wt) {
                    return Ok((path, false));
                }
                warn!(%bead, "worktree was left half-made (crash while it was created); making it again");
            } else {
                warn!(%bead, path = %wt.path().display(), "worktree folder is gone; pruning git's record of it");
            }
            let mut opts = WorktreePruneOptions::new();
            opts.valid(true).working_tree(ours);
            wt.prune(Some(&mut opts))
                .ctx(|| format!("pruning the broken worktree of bead `{bead}`"))?;
        }
        if fs::symlink_metadata(&path).is_ok() {
            // Only an interrupted add (or a person) leaves our folder without git's record; the
            // folder is catalyst's own and libgit2 refuses to add over it.
            warn!(%bead, path = %path.display(), "removing a leftover worktree folder git does not know");
            fs::remove_dir_all(&path)
                .map_err(GitError::io("removing leftover worktree folder", &path))?;
        }
        if self.adopt_spare(repo, bead) {
            return Ok((path, true));
        }
        add::add_worktree(repo, bead, &path)?;
        info!(%bead, path = %path.display(), "created bead worktree");
        Ok((path, true))
    }
}

impl Repo {
    /// Removes the lock files a killed git command left in the bead's own records: its
    /// worktree's git folder (`index.lock`, `HEAD.lock`, …) and its branch's ref. Only the
    /// daemon and the bead's agents write there, and this runs when no agent of the bead is
    /// running (before an attempt starts, when the worktree goes), so a lock found there is
    /// stale. git never removes a stale lock by itself, and every later git command on the
    /// bead would fail on it.
    fn clear_bead_locks(&self, repo: &Repository, bead: &BeadId) {
        let common = repo.commondir();
        let mut locks: Vec<PathBuf> = vec![common
            .join("refs/heads")
            .join(format!("{}.lock", branch_name(bead)))];
        if let Ok(entries) = fs::read_dir(common.join("worktrees").join(bead.as_str())) {
            locks.extend(
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "lock") && p.is_file()),
            );
        }
        for lock in locks {
            match fs::remove_file(&lock) {
                Ok(()) => warn!(%bead, path = %lock.display(), "removed a stale git lock file"),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    warn!(%bead, path = %lock.display(), error = %e, "cannot remove a stale git lock file")
                }
            }
        }
    }

    /// Removes lock files on the target (its checkout's `index.lock`, its ref's lock) created
    /// at or after `since`: what a daemon killed in the middle of its merge leaves, when the
    /// daemon recorded at `since` that this merge was starting. Older locks are someone
    /// else's and stay. Returns the files removed.
    pub fn clear_interrupted_merge_locks(
        &self,
        target: &str,
        since: std::time::SystemTime,
    ) -> Result<Vec<PathBuf>, GitError> {
        let _shared = self.exclusive();
        let repo = self.main_repo()?;
        let refname = format!("refs/heads/{target}");
        let mut locks = vec![repo.commondir().join(format!("{refname}.lock"))];
        if let Some(checkout) = self.checkout_of(&repo, &refname)? {
            locks.push(checkout.path().join("index.lock"));
        }
        let mut removed = Vec::new();
        for lock in locks {
            let recent = fs::metadata(&lock)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t >= since);
            if recent && fs::remove_file(&lock).is_ok() {
                warn!(path = %lock.display(), "removed the lock file of an interrupted merge");
                removed.push(lock);
            }
        }
        Ok(removed)
    }
}

/// The bead's branch tip, or `None` if the branch does not exist.
fn find_branch<'r>(repo: &'r Repository, bead: &BeadId) -> Result<Option<Commit<'r>>, GitError> {
    let branch = branch_name(bead);
    match repo.find_branch(&branch, BranchType::Local) {
        Ok(b) => b
            .get()
            .peel_to_commit()
            .map(Some)
            .ctx(|| format!("reading the tip of `{branch}`")),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e).ctx(|| format!("looking up branch `{branch}`")),
    }
}

fn branch_tip<'r>(repo: &'r Repository, bead: &BeadId) -> Result<Commit<'r>, GitError> {
    find_branch(repo, bead)?.ok_or_else(|| GitError::NoBranch {
        bead: bead.clone(),
        branch: branch_name(bead),
    })
}

/// The tip commit of the local branch `target`, or of the ref `target` when it is a whole
/// ref name (`refs/…`).
fn target_tip<'r>(repo: &'r Repository, target: &str) -> Result<Commit<'r>, GitError> {
    // A whole ref name: a start point the daemon keeps (the forge's target, fetched).
    let found = if target.starts_with("refs/") {
        repo.find_reference(target)
    } else {
        repo.find_branch(target, BranchType::Local)
            .map(git2::Branch::into_reference)
    };
    match found {
        Ok(r) => r
            .peel_to_commit()
            .ctx(|| format!("reading the tip of target branch `{target}`")),
        Err(e) if matches!(e.code(), ErrorCode::NotFound | ErrorCode::InvalidSpec) => {
            Err(GitError::NoTarget {
                target: target.to_owned(),
            })
        }
        Err(e) => Err(e).ctx(|| format!("looking up target branch `{target}`")),
    }
}

/// git's record of the bead's worktree, if any. A record left half-written by a crash inside
/// libgit2's add (its folder lacks the files libgit2 writes next) is deleted, because libgit2
/// can neither open nor replace it.
fn find_worktree(repo: &Repository, bead: &BeadId) -> Result<Option<git2::Worktree>, GitError> {
    match repo.find_worktree(bead.as_str()) {
        Ok(wt) => Ok(Some(wt)),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => {
            let meta = repo.commondir().join("worktrees").join(bead.as_str());
            let half_written = ["commondir", "gitdir", "HEAD"]
                .iter()
                .any(|f| !meta.join(f).is_file());
            if meta.is_dir() && half_written {
                warn!(%bead, path = %meta.display(), "removing half-written git worktree record");
                fs::remove_dir_all(&meta)
                    .map_err(GitError::io("removing half-written worktree record", &meta))?;
                Ok(None)
            } else {
                Err(e).ctx(|| format!("reading git's record of the worktree of bead `{bead}`"))
            }
        }
    }
}

/// Deletes a bead's branch unless a worktree has it checked out: the main repository's HEAD,
/// or a worktree someone made of it ([`add::checked_out`]; libgit2's own checked delete opens
/// every worktree as a repository).
fn delete_branch(repo: &Repository, branch: git2::Branch<'_>) -> Result<(), git2::Error> {
    let mut reference = branch.into_reference();
    let name = reference.name().unwrap_or_default().to_owned();
    if add::checked_out(repo, &name) {
        return Err(git2::Error::from_str(&format!(
            "`{name}` is checked out in a worktree"
        )));
    }
    reference.delete()
}

/// libgit2 writes the worktree's index only once its checkout is complete, so a missing index
/// means the add was interrupted and the files on disk are partial. A worktree whose folder
/// does not link back to its record (a crash while a spare was renamed, between the record and
/// the folder's `.git` file) is not finished either. Both are read from the files, without
/// opening the worktree as a repository.
fn checkout_finished(repo: &Repository, wt: &git2::Worktree) -> bool {
    links_back(repo, wt) && record_of(repo, wt).is_some_and(|r| r.join("index").is_file())
}

/// Whether the worktree's folder names its record in the main repository back (its `.git`
/// file's `gitdir:`), as a whole worktree's does.
fn links_back(repo: &Repository, wt: &git2::Worktree) -> bool {
    let Some(record) = record_of(repo, wt) else {
        return false;
    };
    fs::read_to_string(wt.path().join(".git")).is_ok_and(|text| {
        text.trim()
            .strip_prefix("gitdir:")
            .is_some_and(|dir| same_path(Path::new(dir.trim()), &record))
    })
}

/// git's record of a worktree in the main repository: `.git/worktrees/<name>`.
fn record_of(repo: &Repository, wt: &git2::Worktree) -> Option<PathBuf> {
    let name = wt.name().ok().flatten()?;
    Some(repo.commondir().join("worktrees").join(name))
}

/// Compares paths as the file system sees them (libgit2 records resolved paths). Equal
/// paths are the same without asking: resolving one is a `readlink` per component.
fn same_path(a: &Path, b: &Path) -> bool {
    let resolve = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || resolve(a) == resolve(b)
}

/// `.catalyst/` holds daemon state and is never staged, cleaned or counted as a change.
fn is_catalyst_path(path: &Path) -> bool {
    path.starts_with(".catalyst")
}
