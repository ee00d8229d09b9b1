//! What a sandboxed attempt may write of the shared repository, and taking back the commits it
//! made (docs/agents.md#the-sandbox).
//!
//! Nothing of the shared repository is writable inside the sandbox. A commit made there writes
//! objects, the worktree's index, HEAD and logs, and the bead branch's ref: objects go to a
//! private object folder in the run folder (`GIT_OBJECT_DIRECTORY`, the shared store its
//! alternate), and the admin folder and the folder of the bead branches' refs are private
//! copies mounted over the real ones. Once the attempt has ended the daemon imports the new
//! objects into the shared store, each one written again so that its id is computed from its
//! content (an object whose file does not hold what its name says is refused), and moves the
//! real branch to where the private ref points, if that is a descendant of the branch's tip.

use std::fs;
use std::path::Path;

use git2::{ObjectType, Odb, Oid, Repository, TreeWalkMode, TreeWalkResult};
use tracing::{info, warn};

use super::error::Context;
use super::{branch_tip, CommitId, GitError, Repo, BRANCH_PREFIX};
use crate::domain::agent::sandbox::GitMounts;
use crate::domain::id::BeadId;

/// The private copies in an attempt's sandbox folder.
const REFS: &str = "refs";
const LOGS: &str = "logs";
const ADMIN: &str = "admin";
const OBJECTS: &str = "objects";

/// The admin file a merge in progress leaves, which the daemon's commit reads.
const MERGE_HEAD: &str = "MERGE_HEAD";

impl Repo {
    /// Prepares the private copies for an attempt of `bead` in `private` (a folder of the run
    /// folder) and returns the git paths its sandbox mounts.
    pub fn sandbox_mounts(&self, bead: &BeadId, private: &Path) -> Result<GitMounts, GitError> {
        let repo = self.main_repo()?;
        let tip = branch_tip(&repo, bead)?.id();
        let common = repo.commondir().to_path_buf();
        let prefix = BRANCH_PREFIX.trim_end_matches('/');
        let refs = common.join("refs/heads").join(prefix);
        let logs = common.join("logs/refs/heads").join(prefix);
        let (own_refs, own_logs) = (private.join(REFS), private.join(LOGS));
        let (own_admin, objects) = (private.join(ADMIN), private.join(OBJECTS));
        // A private folder left by an earlier try of the same attempt starts afresh.
        for dir in [&own_admin, &objects] {
            if dir.exists() {
                fs::remove_dir_all(dir).map_err(GitError::io("removing", dir.clone()))?;
            }
        }
        for dir in [&refs, &logs, &own_refs, &own_logs, &objects] {
            fs::create_dir_all(dir).map_err(GitError::io("creating", dir.clone()))?;
        }
        let own = own_refs.join(bead.as_str());
        fs::write(&own, format!("{tip}\n")).map_err(GitError::io("writing", own.clone()))?;
        // The admin folder is named after the worktree, which is named after the bead.
        repo.find_worktree(bead.as_str())
            .ctx(|| format!("finding the worktree of `{bead}`"))?;
        let admin = common.join("worktrees").join(bead.as_str());
        copy_folder(&admin, &own_admin)?;
        Ok(GitMounts {
            common: common.clone(),
            dot_git: self.worktree_path(bead).join(".git"),
            admin: (admin, own_admin),
            objects,
            refs: (refs, own_refs),
            logs: (logs, own_logs),
        })
    }

    /// Takes back what an attempt of `bead` committed in its sandbox: imports its new objects
    /// into the shared store (checked), then moves `bead`'s branch to the commit its private
    /// ref points at, when that is a new descendant of the branch's tip; returns the new tip.
    /// A merge it left in progress (`MERGE_HEAD`, naming commits the store has) is carried to
    /// the real admin folder, so the daemon's commit records the merge. Anything else (no
    /// commit, an unknown or unrelated commit, a rewound branch, an object that does not hold
    /// what its name says) leaves the branch where it is: the daemon's own commit then records
    /// what the worktree holds.
    pub fn adopt_sandbox_ref(
        &self,
        bead: &BeadId,
        private: &Path,
    ) -> Result<Option<CommitId>, GitError> {
        let _shared = self.exclusive();
        let repo = self.main_repo()?;
        carry_merge_head(&repo, bead, private)?;
        let own = private.join(REFS).join(bead.as_str());
        let Ok(text) = fs::read_to_string(&own) else {
            return Ok(None);
        };
        let Ok(oid) = Oid::from_str(text.trim()) else {
            warn!(%bead, ref_text = %text.trim(), "the attempt left a ref that is not a commit id");
            return Ok(None);
        };
        let tip = branch_tip(&repo, bead)?.id();
        if oid == tip {
            return Ok(None);
        }
        if let Err(why) = import(&repo, &private.join(OBJECTS), oid, tip) {
            warn!(%bead, commit = %oid, %why, "the attempt's commits are not taken");
            return Ok(None);
        }
        let descends =
            repo.find_commit(oid).is_ok() && repo.graph_descendant_of(oid, tip).unwrap_or(false);
        if !descends {
            warn!(%bead, commit = %oid, tip = %tip, "the attempt's branch is not a descendant of the bead's branch; not taken");
            return Ok(None);
        }
        let name = format!("refs/heads/{BRANCH_PREFIX}{bead}");
        repo.reference_matching(
            &name,
            oid,
            true,
            tip,
            "catalyst: commits made in the sandbox",
        )
        .ctx(|| format!("moving `{name}` to the attempt's commit"))?;
        info!(%bead, commit = %oid, "took the commits made in the sandbox");
        Ok(Some(oid.into()))
    }
}

/// Copies the files of `from` into a new folder `to`, subfolders too (an admin folder holds
/// `logs/`); links are not followed, and nothing but files and folders is copied.
fn copy_folder(from: &Path, to: &Path) -> Result<(), GitError> {
    fs::create_dir_all(to).map_err(GitError::io("creating", to.to_path_buf()))?;
    let entries = fs::read_dir(from).map_err(GitError::io("reading", from.to_path_buf()))?;
    for entry in entries {
        let entry = entry.map_err(GitError::io("reading", from.to_path_buf()))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry
            .file_type()
            .map_err(GitError::io("reading", src.clone()))?;
        if kind.is_dir() {
            copy_folder(&src, &dst)?;
        } else if kind.is_file() {
            fs::copy(&src, &dst).map_err(GitError::io("copying", src.clone()))?;
        }
    }
    Ok(())
}

/// Copies the objects that commit `new` needs and the shared store lacks from the attempt's
/// private object folder into the store. Each is read through a handle that sees both
/// folders and written again through the store's own, which names it by its content: an
/// object whose file in the private folder holds something else than its name says comes out
/// under another id, and the import stops there. Objects already in the store are never
/// written, so nothing of the store changes but what is added.
fn import(repo: &Repository, objects: &Path, new: Oid, tip: Oid) -> Result<(), String> {
    let store = repo.odb().map_err(|e| e.to_string())?;
    // A handle of its own, whose object database also reads the attempt's folder.
    let both = Repository::open(repo.commondir()).map_err(|e| e.to_string())?;
    if objects.is_dir() {
        both.odb()
            .and_then(|odb| odb.add_disk_alternate(&objects.to_string_lossy()))
            .map_err(|e| e.to_string())?;
    }
    let mut walk = both.revwalk().map_err(|e| e.to_string())?;
    walk.push(new).map_err(|e| e.to_string())?;
    // Commits the branch already has are in the store, and so is all they point at.
    let _ = walk.hide(tip);
    for commit in walk {
        let id = commit.map_err(|e| e.to_string())?;
        if store.exists(id) {
            continue;
        }
        let commit = both.find_commit(id).map_err(|e| e.to_string())?;
        copy_tree(&both, &store, commit.tree_id())?;
        copy_object(&both, &store, id)?;
    }
    Ok(())
}

/// [`import`] for one tree and everything in it the store lacks.
fn copy_tree(both: &Repository, store: &Odb<'_>, tree: Oid) -> Result<(), String> {
    if store.exists(tree) {
        return Ok(());
    }
    let found = both.find_tree(tree).map_err(|e| e.to_string())?;
    let mut failed = None;
    found
        .walk(TreeWalkMode::PreOrder, |_, entry| {
            let (id, kind) = (entry.id(), entry.kind());
            let copied = match kind {
                Some(ObjectType::Blob) if !store.exists(id) => copy_object(both, store, id),
                Some(ObjectType::Tree) if store.exists(id) => return TreeWalkResult::Skip,
                // A submodule's commit is not an object of this repository.
                _ => Ok(()),
            };
            match copied {
                Ok(()) => TreeWalkResult::Ok,
                Err(e) => {
                    failed = Some(e);
                    TreeWalkResult::Abort
                }
            }
        })
        .map_err(|e| failed.clone().unwrap_or_else(|| e.to_string()))?;
    if let Some(e) = failed {
        return Err(e);
    }
    // Subtrees went in as the walk met them; the tree itself goes in last.
    let mut subtrees = Vec::new();
    found
        .walk(TreeWalkMode::PostOrder, |_, entry| {
            if entry.kind() == Some(ObjectType::Tree) {
                subtrees.push(entry.id());
            }
            TreeWalkResult::Ok
        })
        .map_err(|e| e.to_string())?;
    for id in subtrees.into_iter().chain([tree]) {
        if !store.exists(id) {
            copy_object(both, store, id)?;
        }
    }
    Ok(())
}

/// Writes object `id`, read through `both`, into `store`; fails when its content does not
/// hash to `id`.
fn copy_object(both: &Repository, store: &Odb<'_>, id: Oid) -> Result<(), String> {
    let odb = both.odb().map_err(|e| e.to_string())?;
    let object = odb.read(id).map_err(|e| format!("object {id}: {e}"))?;
    let written = store
        .write(object.kind(), object.data())
        .map_err(|e| format!("object {id}: {e}"))?;
    if written != id {
        return Err(format!(
            "object {id} holds what hashes to {written}: not what its name says"
        ));
    }
    Ok(())
}

/// Moves a `MERGE_HEAD` the attempt left in its private admin folder to the real one, when
/// every line of it names a commit the store has; removes a stale one otherwise.
fn carry_merge_head(repo: &Repository, bead: &BeadId, private: &Path) -> Result<(), GitError> {
    let real = repo
        .commondir()
        .join("worktrees")
        .join(bead.as_str())
        .join(MERGE_HEAD);
    let left = private.join(ADMIN).join(MERGE_HEAD);
    let Ok(text) = fs::read_to_string(&left) else {
        return Ok(());
    };
    let names_commits = !text.trim().is_empty()
        && text
            .lines()
            .all(|line| Oid::from_str(line.trim()).is_ok_and(|id| repo.find_commit(id).is_ok()));
    if !names_commits {
        warn!(%bead, "the attempt left a MERGE_HEAD that names no commit of the repository; not taken");
        return Ok(());
    }
    fs::write(&real, text).map_err(GitError::io("writing", real.clone()))
}
