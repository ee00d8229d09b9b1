//! Open libgit2 handles of the main repository and of beads' worktrees, kept between calls.
//!
//! Opening a repository is not free: libgit2 looks for its git folder and common folder,
//! reads git's config files (the system's, the person's and the repository's) and sets up its
//! object database, a dozen path lookups and several file reads. A bead's life opens the main
//! repository four times (its worktree made, its merge, the target's tip read, its removal),
//! and its worktree three times (made from a spare, checked after the attempt, tidied when
//! removed): 7% of the daemon's CPU in the overhead benchmark.
//!
//! A worktree's handle is kept for its bead only ([`Trees`]), from one call to the next, and
//! forgotten whenever the worktree may be made again or moved ([`Trees::forget`]).
//!
//! What a kept handle could see stale, and why that is safe here:
//! - refs, `packed-refs` and packs: libgit2 reads loose refs on each lookup and checks the
//!   other files' stamps (or looks again on a miss) before it uses them;
//! - the main checkout's index: never used through these handles (the fast-forward opens the
//!   checkout it updates afresh, see `merge.rs`);
//! - a worktree's index, which its agent may change between two calls: libgit2 reloads it
//!   when its stamp changed before a status, a diff or a checkout, and the daemon's commit
//!   reads it again from disk first;
//! - git's config: each handle reads it once, when opened ([`open`]), and a handle is
//!   reused only for [`MAX_AGE`] after that, so a person's `git config` is seen within it.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use git2::Repository;

use crate::domain::id::BeadId;

/// How long after it was opened a handle may be used again.
const MAX_AGE: Duration = Duration::from_secs(5);

/// How many idle handles are kept: one for each thread that can work on git at once in the
/// benchmarks' runs; a burst beyond it opens more, and they are closed when done.
const MAX_IDLE: usize = 4;

/// Opens the repository at `path` with a snapshot of git's config. A live config makes
/// libgit2 check the stamp of each config file (the repository's, the person's, the
/// system's) on every lookup, even of a value it has: about 84 `stat`s a bead in the overhead
/// benchmark. Nothing here writes git's config.
pub(super) fn open(path: &Path) -> Result<Repository, git2::Error> {
    let repo = Repository::open(path)?;
    let snapshot = repo.config()?.snapshot()?;
    repo.set_config(&snapshot)?;
    Ok(repo)
}

/// The idle handles, each with when it was opened.
#[derive(Default)]
pub(super) struct Handles(Mutex<Vec<(Instant, Repository)>>);

impl std::fmt::Debug for Handles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.0.lock().map(|h| h.len()).unwrap_or_default();
        f.debug_struct("Handles").field("idle", &idle).finish()
    }
}

impl Handles {
    /// An idle handle young enough to use, else one opened now at `workspace`.
    pub(super) fn take(&self, workspace: &Path) -> Result<Kept<'_>, git2::Error> {
        let idle = {
            let mut idle = self.0.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain(|(opened, _)| opened.elapsed() < MAX_AGE);
            idle.pop()
        };
        let (opened, repo) = match idle {
            Some(kept) => kept,
            None => (Instant::now(), open(workspace)?),
        };
        Ok(Kept {
            home: Home::Main(self),
            opened,
            repo: Some(repo),
        })
    }

    /// Keeps `repo`, opened at `opened`, while it is young and there is room.
    fn give_back(&self, opened: Instant, repo: Repository) {
        if opened.elapsed() >= MAX_AGE {
            return;
        }
        let mut idle = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push((opened, repo));
        }
    }
}

/// Beads' worktree handles, each kept between two calls for its bead.
#[derive(Default)]
pub(super) struct Trees(Mutex<HashMap<BeadId, (Instant, Repository)>>);

impl std::fmt::Debug for Trees {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().map(|h| h.len()).unwrap_or_default();
        f.debug_struct("Trees").field("kept", &kept).finish()
    }
}

impl Trees {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<BeadId, (Instant, Repository)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bead's kept handle, if it is young enough to use; it is the caller's until given
    /// back ([`Trees::keep`], or dropping a [`Kept`]).
    pub(super) fn take(&self, bead: &BeadId) -> Option<(Instant, Repository)> {
        self.lock()
            .remove(bead)
            .filter(|(opened, _)| opened.elapsed() < MAX_AGE)
    }

    /// Keeps `repo`, opened at `opened`, as the handle of the bead's worktree. Closes the
    /// handles too old to use again, so that a bead that stops (blocked, waiting for a person)
    /// does not hold its repository's files open.
    pub(super) fn keep(&self, bead: &BeadId, opened: Instant, repo: Repository) {
        let mut kept = self.lock();
        kept.retain(|_, (opened, _)| opened.elapsed() < MAX_AGE);
        if opened.elapsed() < MAX_AGE {
            kept.insert(bead.clone(), (opened, repo));
        }
    }

    /// Closes the bead's kept handle: its worktree is about to be made again, moved or
    /// removed.
    pub(super) fn forget(&self, bead: &BeadId) {
        self.lock().remove(bead);
    }

    /// The bead's kept handle if there is one, else `open()`'s, given back when dropped.
    pub(super) fn take_or(
        &self,
        bead: &BeadId,
        open: impl FnOnce() -> Result<Repository, super::GitError>,
    ) -> Result<Kept<'_>, super::GitError> {
        let (opened, repo) = match self.take(bead) {
            Some(kept) => kept,
            None => (Instant::now(), open()?),
        };
        Ok(Kept {
            home: Home::Tree(self, bead.clone()),
            opened,
            repo: Some(repo),
        })
    }
}

/// Where a [`Kept`] handle goes back to.
enum Home<'a> {
    Main(&'a Handles),
    /// The bead's worktree.
    Tree(&'a Trees, BeadId),
}

/// A kept handle in use, given back where it came from when dropped.
pub(super) struct Kept<'a> {
    home: Home<'a>,
    opened: Instant,
    /// Always `Some` until dropped.
    repo: Option<Repository>,
}

impl Deref for Kept<'_> {
    type Target = Repository;

    fn deref(&self) -> &Repository {
        self.repo
            .as_ref()
            .expect("a kept handle holds its repository")
    }
}

impl DerefMut for Kept<'_> {
    fn deref_mut(&mut self) -> &mut Repository {
        self.repo
            .as_mut()
            .expect("a kept handle holds its repository")
    }
}

impl Drop for Kept<'_> {
    fn drop(&mut self) {
        let Some(repo) = self.repo.take() else {
            return;
        };
        match &self.home {
            Home::Main(handles) => handles.give_back(self.opened, repo),
            Home::Tree(trees, bead) => trees.keep(bead, self.opened, repo),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repository() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        Repository::init(dir.path()).expect("init");
        dir
    }

    fn two_beads() -> (BeadId, BeadId) {
        (
            BeadId::new("bd-a").expect("id"),
            BeadId::new("bd-b").expect("id"),
        )
    }

    /// A handle reads git's config once, when opened: a change after that is seen by the
    /// next handle opened, not by this one.
    #[test]
    fn a_handle_reads_gits_config_when_opened() {
        let dir = repository();
        let set = |value: &str| {
            Repository::open(dir.path())
                .and_then(|r| r.config()?.set_str("user.name", value))
                .expect("git config");
        };
        set("before");
        let name = |repo: &Repository| repo.config().and_then(|c| c.get_string("user.name"));
        let held = open(dir.path()).expect("open");
        set("after");
        assert_eq!(name(&held).as_deref(), Ok("before"));
        let fresh = open(dir.path()).expect("open");
        assert_eq!(name(&fresh).as_deref(), Ok("after"));
    }

    /// The point of the pool: a handle given back is the one the next call gets.
    #[test]
    fn a_handle_given_back_is_used_again() {
        let dir = repository();
        let handles = Handles::default();
        let first = handles.take(dir.path()).expect("open");
        let opened = first.opened;
        drop(first);
        let again = handles.take(dir.path()).expect("reuse");
        assert_eq!(again.opened, opened, "the same handle");
        assert!(handles.0.lock().expect("lock").is_empty(), "it is in use");
    }

    /// Handles in use at once are each their own, and no more than [`MAX_IDLE`] are kept.
    #[test]
    fn a_burst_opens_more_handles_and_keeps_few() {
        let dir = repository();
        let handles = Handles::default();
        let held: Vec<_> = (0..MAX_IDLE + 2)
            .map(|_| handles.take(dir.path()).expect("open"))
            .collect();
        assert!(handles.0.lock().expect("lock").is_empty());
        drop(held);
        assert_eq!(handles.0.lock().expect("lock").len(), MAX_IDLE);
    }

    /// A handle past [`MAX_AGE`] is closed instead of used, so what libgit2 caches in it
    /// (config values) is never older than that.
    #[test]
    fn an_old_handle_is_not_used_again() {
        let dir = repository();
        let handles = Handles::default();
        let old = Instant::now()
            .checked_sub(MAX_AGE)
            .expect("the clock is past MAX_AGE");
        handles
            .0
            .lock()
            .expect("lock")
            .push((old, Repository::open(dir.path()).expect("open")));
        let fresh = handles.take(dir.path()).expect("open");
        assert_ne!(fresh.opened, old, "a new handle");
        assert!(
            handles.0.lock().expect("lock").is_empty(),
            "the old one closed"
        );
    }

    /// A worktree's handle comes back to its bead only, and not after it is forgotten.
    #[test]
    fn a_worktree_handle_is_kept_for_its_bead_until_forgotten() {
        let dir = repository();
        let trees = Trees::default();
        let (a, b) = two_beads();
        let open = || {
            Repository::open(dir.path()).map_err(|source| super::super::GitError::Git {
                action: "opening".into(),
                source,
            })
        };
        let first = trees.take_or(&a, open).expect("open");
        let opened = first.opened;
        drop(first);
        assert!(
            trees.take(&b).is_none(),
            "another bead's handle is not shared"
        );
        let again = trees.take_or(&a, open).expect("kept");
        assert_eq!(again.opened, opened, "the bead's own handle again");
        drop(again);
        trees.forget(&a);
        assert!(trees.take(&a).is_none(), "forgotten");
        let old = Instant::now().checked_sub(MAX_AGE).expect("clock");
        trees.keep(&a, old, Repository::open(dir.path()).expect("open"));
        assert!(trees.take(&a).is_none(), "too old to keep");
    }

    /// Keeping a handle closes the other beads' handles that are too old to use, so a bead
    /// that stops does not hold its repository's files open for good.
    #[test]
    fn keeping_a_handle_closes_the_old_ones() {
        let dir = repository();
        let trees = Trees::default();
        let (a, b) = two_beads();
        let old = Instant::now().checked_sub(MAX_AGE).expect("clock");
        let open = || Repository::open(dir.path()).expect("open");
        trees.lock().insert(b.clone(), (old, open()));
        trees.keep(&a, Instant::now(), open());
        let kept = trees.lock();
        assert!(kept.contains_key(&a), "the new one is kept");
        assert!(!kept.contains_key(&b), "the old one is closed");
    }
}
