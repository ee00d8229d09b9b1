//! A bead's worktree checked out afresh, when no spare is left to make it from
//! (docs/worktrees.md#spare-worktrees).
//!
//! It is made as `git worktree add` makes one, file for file: git's record
//! `.git/worktrees/<bead>` with `commondir`, `gitdir` and `HEAD` on the bead's branch, the
//! folder with its `.git` link, then the branch checked out into it, which writes the index
//! last. libgit2's own add first opens every worktree of the repository as a repository, to
//! check that none has the branch checked out: with one worktree per running agent plus the
//! spares, that was most of what adding one cost. The same check is made here from each
//! worktree's `HEAD` record.
//!
//! A crash part-way leaves what a crash inside libgit2's add leaves, which
//! [`Repo::create`](super::Repo::create) already repairs: a record without all three files is
//! deleted, and a worktree without its index is pruned and made again.

use std::fs;
use std::io::Write;
use std::path::Path;

use git2::build::CheckoutBuilder;
use git2::Repository;

use super::error::Context;
use super::{branch_ref, GitError};
use crate::domain::id::BeadId;

/// Adds the worktree of `bead` at `path` (which must not exist) on its branch (which must),
/// and checks the branch out into it. Called with [`super::Repo::exclusive`] held.
pub(super) fn add_worktree(repo: &Repository, bead: &BeadId, path: &Path) -> Result<(), GitError> {
    let refname = branch_ref(bead);
    let adding = || {
        format!(
            "adding a worktree for bead `{bead}` at `{}`",
            path.display()
        )
    };
    if checked_out(repo, &refname) {
        return Err(git2::Error::from_str(&format!(
            "`{refname}` is already checked out"
        )))
        .ctx(adding);
    }
    let common = repo.commondir();
    let records = common.join("worktrees");
    fs::create_dir_all(&records).map_err(GitError::io("creating", &records))?;
    let record = records.join(bead.as_str());
    fs::create_dir(&record).map_err(GitError::io("creating the worktree record", &record))?;
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(GitError::io("creating", parent))?;
    }
    fs::create_dir(path).map_err(GitError::io("creating the worktree folder", path))?;
    // Absolute and without symbolic links, as libgit2 writes them.
    let folder = fs::canonicalize(path).map_err(GitError::io("resolving", path))?;
    let link = folder.join(".git");
    for (file, text) in [
        (link.clone(), format!("gitdir: {}\n", record.display())),
        (record.join("commondir"), format!("{}\n", common.display())),
        (record.join("gitdir"), format!("{}\n", link.display())),
        (record.join("HEAD"), format!("ref: {refname}\n")),
    ] {
        write_new(&file, &text).map_err(GitError::io("writing", &file))?;
    }
    let tree = super::handles::open(&folder).ctx(adding)?;
    tree.checkout_head(Some(CheckoutBuilder::new().safe()))
        .ctx(|| format!("checking out `{refname}` into the worktree of bead `{bead}`"))
}

/// Whether `refname` is the HEAD of the main repository or of any of its worktrees, from their
/// `HEAD` records (libgit2's own check opens each worktree as a repository).
pub(super) fn checked_out(repo: &Repository, refname: &str) -> bool {
    let wanted = format!("ref: {refname}");
    let records = repo.commondir().join("worktrees");
    let in_a_worktree = fs::read_dir(&records)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| fs::read_to_string(e.path().join("HEAD")).is_ok_and(|head| head.trim() == wanted));
    in_a_worktree
        || repo
            .find_reference("HEAD")
            .ok()
            .is_some_and(|h| matches!(h.symbolic_target(), Ok(Some(t)) if t == refname))
}

/// Writes a file that must not exist yet, as git writes a new worktree's files and its locks.
pub(super) fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(text.as_bytes())
}
