//! What a sandboxed attempt may write of the shared repository, and taking back the commits it
//! made (docs/agents.md#the-sandbox).
//!
//! A commit inside the worktree writes objects, the worktree's own index and HEAD log, and the
//! bead branch's ref. The first two are in folders the sandbox makes writable; the ref is not:
//! its folder holds every bead's branch. So the attempt gets a private copy of that folder,
//! holding only its own ref, mounted over the real one, and once it has ended the daemon moves
//! the real branch to where the copy points, if that is a descendant of the branch's tip.

use std::fs;
use std::path::Path;

use git2::Oid;
use tracing::{info, warn};

use super::error::Context;
use super::{branch_tip, CommitId, GitError, Repo, BRANCH_PREFIX};
use crate::domain::agent::sandbox::GitMounts;
use crate::domain::id::BeadId;

/// The private copies in an attempt's sandbox folder.
const REFS: &str = "refs";
const LOGS: &str = "logs";

impl Repo {
    /// Prepares the private ref folder for an attempt of `bead` in `private` (a folder of the
    /// run folder) and returns the git paths its sandbox mounts.
    pub fn sandbox_mounts(&self, bead: &BeadId, private: &Path) -> Result<GitMounts, GitError> {
        let repo = self.main_repo()?;
        let tip = branch_tip(&repo, bead)?.id();
        let common = repo.commondir().to_path_buf();
        let prefix = BRANCH_PREFIX.trim_end_matches('/');
        let refs = common.join("refs/heads").join(prefix);
        let logs = common.join("logs/refs/heads").join(prefix);
        let (own_refs, own_logs) = (private.join(REFS), private.join(LOGS));
        for dir in [&refs, &logs, &own_refs, &own_logs] {
            fs::create_dir_all(dir).map_err(GitError::io("creating", dir.clone()))?;
        }
        let own = own_refs.join(bead.as_str());
        fs::write(&own, format!("{tip}\n")).map_err(GitError::io("writing", own.clone()))?;
        // The admin folder is named after the worktree, which is named after the bead.
        repo.find_worktree(bead.as_str())
            .ctx(|| format!("finding the worktree of `{bead}`"))?;
        let admin = common.join("worktrees").join(bead.as_str());
        Ok(GitMounts {
            common: common.clone(),
            objects: common.join("objects"),
            admin,
            refs: (refs, own_refs),
            logs: (logs, own_logs),
        })
    }

    /// Moves `bead`'s branch to the commit its attempt's private ref points at, when that is
    /// a new descendant of the branch's tip; returns the new tip. Anything else (no commit,
    /// an unknown or unrelated commit, a rewound branch) leaves the branch where it is: the
    /// daemon's own commit then records what the worktree holds.
    pub fn adopt_sandbox_ref(
        &self,
        bead: &BeadId,
        private: &Path,
    ) -> Result<Option<CommitId>, GitError> {
        let own = private.join(REFS).join(bead.as_str());
        let Ok(text) = fs::read_to_string(&own) else {
            return Ok(None);
        };
        let Ok(oid) = Oid::from_str(text.trim()) else {
            warn!(%bead, ref_text = %text.trim(), "the attempt left a ref that is not a commit id");
            return Ok(None);
        };
        let _shared = self.exclusive();
        let repo = self.main_repo()?;
        let tip = branch_tip(&repo, bead)?.id();
        if oid == tip {
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
