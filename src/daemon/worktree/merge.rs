//! The daemon's side of the merge step (docs/worktrees.md#the-merge): once the bead's branch
//! contains the target (the daemon merged it in, or the merge agent did), the branch's tree
//! lands on the target as the strategy says (a merge commit, a squashed commit, or the bead's
//! commits replayed), without ever rewriting the target's history or overwriting uncommitted
//! work in a checkout of the target.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use git2::{
    build::CheckoutBuilder, CheckoutNotificationType, ErrorCode, Oid, Repository, Status,
    StatusOptions,
};
use serde::{Deserialize, Serialize};
use tracing::info;

use super::error::Context;
use super::{branch_name, branch_tip, target_tip, CommitId, GitError, Repo};
use crate::domain::id::BeadId;
use crate::domain::model::MergeStrategy;
use crate::domain::workflow::WorkflowFiles;

/// How a bead lands on the target ([`Repo::merge_into_target`]).
#[derive(Clone, Debug)]
pub struct Landing {
    pub strategy: MergeStrategy,
    /// The bead's title, the subject of a merge or squashed commit.
    pub title: String,
}

/// What [`Repo::merge_into_target`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum MergeOutcome {
    /// The target moved forward from `from` to `to`, whose tree is the bead's branch tip's.
    Merged { from: CommitId, to: CommitId },
    /// The target already contains the bead's branch tip, or already has its tree (a repeat
    /// after a crash between moving the ref and recording it, a person merged it, or the
    /// bead changed nothing): nothing was changed.
    AlreadyMerged,
    /// The target's tip is not an ancestor of the bead's branch: the merge agent did not bring
    /// the branch up to date (or the target moved on since). Nothing was changed.
    NotUpToDate { target: CommitId, branch: CommitId },
    /// The target is checked out with uncommitted changes to tracked files, or with files in
    /// the way of the merge; `files` lists them, relative to that checkout. Nothing was
    /// changed; the daemon waits for a person and tries again.
    TargetDirty { files: Vec<String> },
    /// The bead's change touches workflow files (`files`) that a person has not approved at
    /// the branch tip `commit`. Nothing was changed; the merge waits for the approval.
    Held {
        commit: CommitId,
        files: Vec<String>,
    },
}

/// What [`Repo::merge_target_into_branch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchMerge {
    /// The target merged cleanly: the branch has a new merge commit, and its worktree (if
    /// any) was brought to it.
    Merged(CommitId),
    /// The target and the branch change the same lines: nothing was changed; `files` are the
    /// conflicting paths, for the merge agent.
    Conflict { files: Vec<String> },
    /// The branch has the target's tip already: nothing to merge; the branch's tip.
    UpToDate(CommitId),
}

/// What a merge must check before it moves the target: which files need a person's approval,
/// and the commit a person approved, if any.
#[derive(Clone, Debug)]
pub struct MergeGuard {
    pub files: Option<Arc<WorkflowFiles>>,
    /// A branch tip a person approved: a workflow file the tip holds exactly as this commit
    /// held it needs no new approval.
    pub approved: Option<CommitId>,
}

impl MergeGuard {
    /// No file needs an approval.
    pub fn none() -> MergeGuard {
        MergeGuard {
            files: None,
            approved: None,
        }
    }
}

impl Repo {
    /// Lands the bead's branch tip on the local branch `target`, as `how` says: a merge
    /// commit (first parent the target's tip, second the bead's tip), one squashed commit, or
    /// the bead's commits replayed on the target. Whichever, the target's new tree is the
    /// bead's tip's.
    ///
    /// Decided in this order: if the target already contains the tip, or already has its
    /// tree → [`MergeOutcome::AlreadyMerged`]; if the target's tip is not an ancestor of the
    /// bead's tip → [`MergeOutcome::NotUpToDate`]. Otherwise, if `target` is checked out (in the main
    /// working directory or any linked worktree), that checkout must have no uncommitted
    /// changes to tracked files and nothing in the way of the new files, else
    /// [`MergeOutcome::TargetDirty`]; its index and files are then updated by a safe checkout
    /// before the ref moves. If `target` is not checked out, only the ref moves.
    ///
    /// The ref moves by compare-and-swap against the tip that was checked, so a target that a
    /// person moves at the same instant gives [`GitError::TargetMoved`], never a rewrite.
    /// If a crash falls between the checkout and the ref move, the checkout's index and files
    /// already equal the bead's tip; a repeat recognizes that and only moves the ref. A crash
    /// in the middle of the checkout leaves some files written; those that already hold the
    /// bead's version are recognized too (see [`Repo::resume_merge_into_target`] for files
    /// the crash cut short).
    ///
    /// A bead whose change (from the target's tip to its own) touches a file of
    /// `guard.files` is not merged unless that file is as `guard.approved` holds it:
    /// [`MergeOutcome::Held`], decided before the checkout is looked at.
    pub fn merge_into_target(
        &self,
        bead: &BeadId,
        target: &str,
        guard: &MergeGuard,
        how: &Landing,
    ) -> Result<MergeOutcome, GitError> {
        self.merge(bead, target, guard, how, None)
    }

    /// [`Repo::merge_into_target`] for a merge that a killed daemon had started: `window` is
    /// (when that merge started, when the next daemon started). Besides files that already
    /// hold the bead's version, a file the checkout writes that changed within the window is
    /// taken for that checkout's own, cut short by the kill (an empty or half-written file),
    /// and overwritten. Only a person who created or edited, within that window, a file the
    /// bead adds or changes could lose an edit this way.
    pub fn resume_merge_into_target(
        &self,
        bead: &BeadId,
        target: &str,
        guard: &MergeGuard,
        how: &Landing,
        window: (SystemTime, SystemTime),
    ) -> Result<MergeOutcome, GitError> {
        self.merge(bead, target, guard, how, Some(window))
    }

    /// Merges the target's tip into the bead's branch, as `git merge <target>` on the branch
    /// would, when git can do it without a person or an agent: the merge is computed in
    /// memory (libgit2), and only a merge without conflicts is committed (parents: the branch
    /// tip, then the target tip), moving the branch by compare-and-swap; the bead's worktree,
    /// which the daemon's commit of the last step left clean, is then checked out at it. A
    /// branch that has the target's tip already is left as it is (no empty merge commit).
    pub fn merge_target_into_branch(
        &self,
        bead: &BeadId,
        target: &str,
    ) -> Result<BranchMerge, GitError> {
        let _shared = self.exclusive();
        let repo = self.main_repo()?;
        let what = || format!("merging `{target}` into the branch of bead `{bead}`");
        let ours = branch_tip(&repo, bead)?;
        let theirs = target_tip(&repo, target)?;
        if contains(&repo, ours.id(), theirs.id()).ctx(what)? {
            return Ok(BranchMerge::UpToDate(ours.id().into()));
        }
        let mut index = match merged_index(&repo, &ours, &theirs).ctx(what)? {
            Ok(index) => index,
            Err(files) => return Ok(BranchMerge::Conflict { files }),
        };
        let tree_id = index.write_tree_to(&repo).ctx(what)?;
        let tree = repo.find_tree(tree_id).ctx(what)?;
        let (author, committer) = self.signatures(&repo).ctx(what)?;
        let branch = branch_name(bead);
        let message = format!("Merge `{target}` into {branch}\n\nCatalyst-Step: merge/daemon\n");
        let commit = repo
            .commit(
                None,
                &author,
                &committer,
                &message,
                &tree,
                &[&ours, &theirs],
            )
            .ctx(what)?;
        repo.reference_matching(
            &format!("refs/heads/{branch}"),
            commit,
            true,
            ours.id(),
            &format!("catalyst: merge `{target}`"),
        )
        .ctx(what)?;
        if let Ok(worktree) = self.open_worktree(bead) {
            let mut checkout = CheckoutBuilder::new();
            checkout.force();
            worktree
                .checkout_head(Some(&mut checkout))
                .ctx(|| format!("checking out the merge in the worktree of bead `{bead}`"))?;
        }
        info!(%bead, %commit, "merged the target into the bead's branch");
        Ok(BranchMerge::Merged(commit.into()))
    }

    fn merge(
        &self,
        bead: &BeadId,
        target: &str,
        guard: &MergeGuard,
        how: &Landing,
        interrupted: Option<(SystemTime, SystemTime)>,
    ) -> Result<MergeOutcome, GitError> {
        let _shared = self.exclusive();
        let repo = self.main_repo()?;
        let tip = branch_tip(&repo, bead)?;
        let current_commit = target_tip(&repo, target)?;
        let current = current_commit.id();
        // A squashed or rebased bead is never an ancestor of the target; its tree is there.
        if current_commit.tree_id() == tip.tree_id()
            || contains(&repo, current, tip.id())
                .ctx(|| format!("comparing `{target}` with `{}`", branch_name(bead)))?
        {
            return Ok(MergeOutcome::AlreadyMerged);
        }
        let up_to_date = repo
            .graph_descendant_of(tip.id(), current)
            .ctx(|| format!("checking that `{}` contains `{target}`", branch_name(bead)))?;
        if !up_to_date {
            return Ok(MergeOutcome::NotUpToDate {
                target: current.into(),
                branch: tip.id().into(),
            });
        }
        if let Some(files) = &guard.files {
            let held = held_files(&repo, current, &tip, files, guard.approved.as_ref())
                .ctx(|| format!("listing the workflow files `{}` changes", branch_name(bead)))?;
            if !held.is_empty() {
                info!(%bead, %target, ?held, "the change touches workflow files; waiting for an approval");
                return Ok(MergeOutcome::Held {
                    commit: tip.id().into(),
                    files: held,
                });
            }
        }

        let refname = format!("refs/heads/{target}");
        if let Some(checkout) = self.checkout_of(&repo, &refname)? {
            let files = update_checkout(&checkout, tip.tree_id(), interrupted)
                .ctx(|| format!("updating the checkout of `{target}` to `{}`", tip.id()))?;
            if !files.is_empty() {
                info!(%bead, %target, ?files, "target is checked out with uncommitted changes; not merging");
                return Ok(MergeOutcome::TargetDirty { files });
            }
        }
        let landed = self
            .landing_commit(&repo, bead, &current_commit, &tip, how)
            .ctx(|| {
                format!(
                    "making the {} commit of `{}`",
                    how.strategy,
                    branch_name(bead)
                )
            })?;
        let message = format!("catalyst: {} {}", how.strategy, branch_name(bead));
        match repo.reference_matching(&refname, landed, true, current, &message) {
            Ok(_) => {}
            Err(e) if e.code() == ErrorCode::Modified => {
                return Err(GitError::TargetMoved {
                    bead: bead.clone(),
                    target: target.to_owned(),
                })
            }
            Err(e) => return Err(e).ctx(|| format!("moving `{target}` to `{landed}`")),
        }
        info!(%bead, %target, from = %current, to = %landed, strategy = %how.strategy, "merged into the target");
        Ok(MergeOutcome::Merged {
            from: current.into(),
            to: landed.into(),
        })
    }

    /// The commit the target moves to, made (not yet referenced) with the tree of `tip`,
    /// which contains `onto`, the target's tip.
    fn landing_commit(
        &self,
        repo: &Repository,
        bead: &BeadId,
        onto: &git2::Commit<'_>,
        tip: &git2::Commit<'_>,
        how: &Landing,
    ) -> Result<Oid, git2::Error> {
        let (author, committer) = self.signatures(repo)?;
        let branch = branch_name(bead);
        let title = how.title.lines().next().unwrap_or_default().trim();
        let tree = tip.tree()?;
        match how.strategy {
            MergeStrategy::Merge => {
                let message = format!("Merge {branch}: {title}\n\nCatalyst-Bead: {bead}\n");
                repo.commit(None, &author, &committer, &message, &tree, &[onto, tip])
            }
            MergeStrategy::Squash => squash(repo, bead, title, onto, tip, (&author, &committer)),
            MergeStrategy::Rebase => match replay(repo, onto, tip, &committer)? {
                Some(replayed) => Ok(replayed),
                None => {
                    info!(%bead, "the bead's commits do not replay one by one; landing them squashed");
                    squash(repo, bead, title, onto, tip, (&author, &committer))
                }
            },
        }
    }

    /// The tip of the local branch `target`.
    pub fn target_head(&self, target: &str) -> Result<CommitId, GitError> {
        let repo = self.main_repo()?;
        let tip = target_tip(&repo, target)?.id();
        Ok(tip.into())
    }

    /// The files in which the target and the bead's branch change the same lines, from the
    /// merge [`Repo::merge_target_into_branch`] would make; empty when git merges them, or
    /// the branch has the target. Nothing is changed.
    pub fn conflicts_with(&self, bead: &BeadId, target: &str) -> Result<Vec<String>, GitError> {
        let repo = self.main_repo()?;
        let ours = branch_tip(&repo, bead)?;
        let theirs = target_tip(&repo, target)?;
        let what = || format!("merging `{target}` into the branch of bead `{bead}`");
        if contains(&repo, ours.id(), theirs.id()).ctx(what)? {
            return Ok(Vec::new());
        }
        Ok(merged_index(&repo, &ours, &theirs)
            .ctx(what)?
            .err()
            .unwrap_or_default())
    }

    /// Whether the bead's branch has the target's tip: it is the branch tip or one of its
    /// ancestors.
    pub fn branch_has(&self, bead: &BeadId, target: &str) -> Result<bool, GitError> {
        let repo = self.main_repo()?;
        let tip = branch_tip(&repo, bead)?;
        let theirs = target_tip(&repo, target)?;
        contains(&repo, tip.id(), theirs.id())
            .ctx(|| format!("comparing `{}` with `{target}`", branch_name(bead)))
    }

    /// Whether the bead's branch tip is the target's tip or one of its ancestors, or the
    /// target's tip has the branch tip's tree.
    pub fn is_merged(&self, bead: &BeadId, target: &str) -> Result<bool, GitError> {
        let repo = self.main_repo()?;
        let tip = branch_tip(&repo, bead)?;
        let current = target_tip(&repo, target)?;
        if current.tree_id() == tip.tree_id() {
            return Ok(true);
        }
        contains(&repo, current.id(), tip.id())
            .ctx(|| format!("comparing `{target}` with `{}`", branch_name(bead)))
    }

    /// The checkout whose HEAD is `refname`: the main working directory or a linked worktree.
    /// A bare repository's HEAD names a branch too, but has no files to update, so it is
    /// skipped.
    pub(super) fn checkout_of(
        &self,
        repo: &Repository,
        refname: &str,
    ) -> Result<Option<Repository>, GitError> {
        let mut paths: Vec<PathBuf> = vec![self.workspace.clone()];
        if repo.is_worktree() {
            // The workspace is itself a linked worktree; the main one may hold the target.
            paths.push(repo.commondir().to_path_buf());
        }
        let names = repo
            .worktrees()
            .ctx(|| "listing git worktrees".to_owned())?;
        for name in names.iter().filter_map(|n| n.ok().flatten()) {
            if let Ok(wt) = repo.find_worktree(name) {
                if wt.validate().is_ok() {
                    paths.push(wt.path().to_path_buf());
                }
            }
        }
        for path in paths {
            let Ok(checkout) = Repository::open(&path) else {
                continue;
            };
            if checkout.is_bare() {
                continue;
            }
            let on_target = checkout
                .find_reference("HEAD")
                .ok()
                .and_then(|head| head.symbolic_target().ok().flatten().map(|t| t == refname))
                .unwrap_or(false);
            if on_target {
                return Ok(Some(checkout));
            }
        }
        Ok(None)
    }
}

/// The workflow files that the change from `base` to `tip` adds, changes or removes, and the
/// symbolic links it adds or changes that need an approval
/// ([`WorkflowFiles::link_needs_approval`]), less those that `tip` holds exactly as the
/// `approved` commit does.
fn held_files(
    repo: &Repository,
    base: Oid,
    tip: &git2::Commit<'_>,
    files: &WorkflowFiles,
    approved: Option<&CommitId>,
) -> Result<Vec<String>, git2::Error> {
    let from = repo.find_commit(base)?.tree()?;
    let to = tip.tree()?;
    let diff = repo.diff_tree_to_tree(Some(&from), Some(&to), None)?;
    let mut touched = BTreeSet::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(path) = file.path().and_then(|p| p.to_str()) {
                if files.matches(path) {
                    touched.insert(path.to_owned());
                }
            }
        }
        let new = delta.new_file();
        if new.mode() == git2::FileMode::Link {
            let target = repo.find_blob(new.id())?;
            let path = new.path().map(|p| p.to_string_lossy().into_owned());
            if let Some(path) = path {
                if files.link_needs_approval(&path, target.content()) {
                    touched.insert(path);
                }
            }
        }
    }
    let approved = match approved {
        // An approved commit that is gone (a person reset the branch) approves nothing.
        Some(commit) => match Oid::from_str(commit.as_str()).and_then(|id| repo.find_commit(id)) {
            Ok(commit) => Some(commit.tree()?),
            Err(_) => None,
        },
        None => None,
    };
    let entry = |tree: &git2::Tree<'_>, path: &str| {
        tree.get_path(std::path::Path::new(path))
            .ok()
            .map(|e| (e.id(), e.filemode()))
    };
    Ok(touched
        .into_iter()
        .filter(|path| match &approved {
            Some(tree) => entry(tree, path) != entry(&to, path),
            None => true,
        })
        .collect())
}

/// One commit on `onto` with the tree of `tip`, its message the bead's title and the subjects
/// of the commits it squashes.
fn squash(
    repo: &Repository,
    bead: &BeadId,
    title: &str,
    onto: &git2::Commit<'_>,
    tip: &git2::Commit<'_>,
    (author, committer): (&git2::Signature<'_>, &git2::Signature<'_>),
) -> Result<Oid, git2::Error> {
    let mut message = format!("{title}\n\nSquashed from {}:\n", branch_name(bead));
    for commit in bead_commits(repo, onto, tip)? {
        let subject = String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default());
        message.push_str(&format!("- {subject}\n"));
    }
    message.push_str(&format!("\nCatalyst-Bead: {bead}\n"));
    repo.commit(None, author, committer, &message, &tip.tree()?, &[onto])
}

/// The bead's own commits, oldest first: those of `tip` that `onto` lacks, merges left out.
fn bead_commits<'r>(
    repo: &'r Repository,
    onto: &git2::Commit<'_>,
    tip: &git2::Commit<'_>,
) -> Result<Vec<git2::Commit<'r>>, git2::Error> {
    let mut walk = repo.revwalk()?;
    walk.push(tip.id())?;
    walk.hide(onto.id())?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    let mut commits = Vec::new();
    for id in walk {
        let commit = repo.find_commit(id?)?;
        if commit.parent_count() <= 1 {
            commits.push(commit);
        }
    }
    Ok(commits)
}

/// The bead's commits replayed one by one on `onto` (each keeps its author and message),
/// computed in memory; the tip itself when the branch is a line of commits on `onto`. None when one of them does not apply cleanly, or when the replayed
/// tree is not `tip`'s (a merge of the branch resolved something): the bead's tree is what
/// was reviewed, so only it may land.
fn replay(
    repo: &Repository,
    onto: &git2::Commit<'_>,
    tip: &git2::Commit<'_>,
    committer: &git2::Signature<'_>,
) -> Result<Option<Oid>, git2::Error> {
    let commits = bead_commits(repo, onto, tip)?;
    // A branch of single-parent commits on the target's tip is already rebased: it lands as
    // it is, by a fast-forward.
    if commits.last().is_some_and(|last| last.id() == tip.id())
        && commits
            .first()
            .is_some_and(|first| first.parent_id(0).ok() == Some(onto.id()))
        && commits
            .windows(2)
            .all(|w| w[1].parent_id(0).ok() == Some(w[0].id()))
    {
        return Ok(Some(tip.id()));
    }
    let mut base = repo.find_commit(onto.id())?;
    for commit in commits {
        let mut index = repo.cherrypick_commit(&commit, &base, 0, None)?;
        if index.has_conflicts() {
            return Ok(None);
        }
        let tree = repo.find_tree(index.write_tree_to(repo)?)?;
        let message = String::from_utf8_lossy(commit.message_raw_bytes());
        let id = repo.commit(None, &commit.author(), committer, &message, &tree, &[&base])?;
        base = repo.find_commit(id)?;
    }
    Ok((base.id() != onto.id() && base.tree_id() == tip.tree_id()).then_some(base.id()))
}

/// The merge of `theirs` into `ours`, in memory: its index, or the files that conflict.
fn merged_index(
    repo: &Repository,
    ours: &git2::Commit<'_>,
    theirs: &git2::Commit<'_>,
) -> Result<Result<git2::Index, Vec<String>>, git2::Error> {
    let index = repo.merge_commits(ours, theirs, None)?;
    if !index.has_conflicts() {
        return Ok(Ok(index));
    }
    let mut files = BTreeSet::new();
    for conflict in index.conflicts()? {
        let conflict = conflict?;
        if let Some(entry) = conflict.our.or(conflict.their).or(conflict.ancestor) {
            files.insert(String::from_utf8_lossy(&entry.path).into_owned());
        }
    }
    Ok(Err(files.into_iter().collect()))
}

/// Whether `tip` is `target` or one of its ancestors.
fn contains(repo: &Repository, target: Oid, tip: Oid) -> Result<bool, git2::Error> {
    Ok(target == tip || repo.graph_descendant_of(target, tip)?)
}

/// Brings a clean checkout of the target (HEAD still at the target's old tip) to `tip_tree`.
/// Returns the files that stop it (uncommitted changes, or files in the way); empty means
/// the index and files now match `tip_tree`.
fn update_checkout(
    checkout: &Repository,
    tip_tree: Oid,
    interrupted: Option<(SystemTime, SystemTime)>,
) -> Result<Vec<String>, git2::Error> {
    let dirty = tracked_changes(checkout)?;
    if !dirty.is_empty() {
        if already_checked_out(checkout, tip_tree)? {
            return Ok(Vec::new());
        }
        let paths = dirty.into_iter().map(|(path, _)| path).collect();
        return finish_interrupted(checkout, tip_tree, paths, interrupted);
    }
    // Looked up through the checkout's own handle: libgit2 refuses objects of another handle.
    let tree = checkout.find_tree(tip_tree)?;
    let mut blocked = Vec::new();
    let result = {
        let mut opts = CheckoutBuilder::new();
        // Safe: libgit2 plans the whole checkout against HEAD's tree first and writes nothing
        // if any file would lose content. Ignored files count as content too: a bead that adds
        // a file a person keeps ignored (a `.env`) must not replace theirs.
        opts.safe()
            .overwrite_ignored(false)
            .notify_on(CheckoutNotificationType::CONFLICT)
            .notify(|_, path, _, _, _| {
                if let Some(path) = path {
                    blocked.push(path.to_string_lossy().into_owned());
                }
                true
            });
        checkout.checkout_tree(tree.as_object(), Some(&mut opts))
    };
    match result {
        Ok(()) => Ok(Vec::new()),
        Err(e) if e.code() == ErrorCode::Conflict && !blocked.is_empty() => {
            finish_interrupted(checkout, tip_tree, blocked, interrupted)
        }
        Err(e) => Err(e),
    }
}

/// Finishes a checkout that a killed daemon left half-done. libgit2 writes the files first and
/// the index last, so a kill in between leaves files that already hold the bead's version while
/// the index still says the old tip: modified tracked files, and new files in the way of
/// themselves. When every file that stops the checkout (`paths`) already has exactly the content
/// `tip_tree` gives it (or is gone where `tip_tree` has no such file), writing the tip over them
/// loses nothing, and the checkout is finished by force. Otherwise the files that differ are
/// someone's changes: they are returned, and the daemon waits. With `interrupted` (the
/// window in which a killed merge was writing), a file the checkout writes that changed within
/// it counts as the checkout's own as well: the kill may have cut its write short.
fn finish_interrupted(
    checkout: &Repository,
    tip_tree: Oid,
    paths: Vec<String>,
    interrupted: Option<(SystemTime, SystemTime)>,
) -> Result<Vec<String>, git2::Error> {
    let tree = checkout.find_tree(tip_tree)?;
    let head = checkout.head()?.peel_to_tree()?;
    let Some(workdir) = checkout.workdir() else {
        return Ok(paths);
    };
    let cut_short = |path: &str, file: &std::path::Path| {
        let Some((since, until)) = interrupted else {
            return false;
        };
        let written = std::fs::symlink_metadata(file)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= since && t <= until);
        let entry = |tree: &git2::Tree<'_>| {
            tree.get_path(std::path::Path::new(path))
                .ok()
                .map(|e| e.id())
        };
        written && entry(&tree) != entry(&head)
    };
    let differing: Vec<String> = paths
        .into_iter()
        .filter(|path| {
            let file = workdir.join(path);
            !holds_tip_version(&tree, &file, path) && !cut_short(path, &file)
        })
        .collect();
    if !differing.is_empty() {
        return Ok(differing);
    }
    info!(path = %workdir.display(), "finishing a checkout of the target that was interrupted");
    let mut opts = CheckoutBuilder::new();
    opts.force().overwrite_ignored(false);
    checkout.checkout_tree(tree.as_object(), Some(&mut opts))?;
    Ok(Vec::new())
}

/// Whether the file at `file` (`path` relative to the checkout) is what `tree` says it is.
fn holds_tip_version(tree: &git2::Tree<'_>, file: &std::path::Path, path: &str) -> bool {
    match tree.get_path(std::path::Path::new(path)) {
        Ok(entry) => {
            entry.kind() == Some(git2::ObjectType::Blob)
                && Oid::hash_file(git2::ObjectType::Blob, file).is_ok_and(|id| id == entry.id())
        }
        Err(_) => std::fs::symlink_metadata(file).is_err(),
    }
}

/// Tracked files whose index or working copy differs from HEAD (untracked and ignored files
/// are not changes to the target and do not stop a merge unless they are in the way).
fn tracked_changes(repo: &Repository) -> Result<Vec<(String, Status)>, git2::Error> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(false).include_ignored(false);
    let statuses = repo.statuses(Some(&mut opts))?;
    Ok(statuses
        .iter()
        .filter(|e| {
            !e.status().intersects(Status::WT_NEW | Status::IGNORED)
                && e.status() != Status::CURRENT
        })
        .map(|e| {
            (
                String::from_utf8_lossy(e.path_bytes()).into_owned(),
                e.status(),
            )
        })
        .collect())
}

/// Whether the checkout's index already equals `tip_tree` with the working files matching
/// it: what an earlier attempt leaves when it is killed after the checkout and before the ref
/// move. Moving HEAD's ref to the tip then loses nothing, whoever staged it.
fn already_checked_out(checkout: &Repository, tip_tree: Oid) -> Result<bool, git2::Error> {
    let mut index = checkout.index()?;
    if index.has_conflicts() {
        return Ok(false);
    }
    if index.write_tree()? != tip_tree {
        return Ok(false);
    }
    let worktree_changes =
        Status::WT_MODIFIED | Status::WT_DELETED | Status::WT_TYPECHANGE | Status::WT_RENAMED;
    Ok(tracked_changes(checkout)?
        .iter()
        .all(|(_, status)| !status.intersects(worktree_changes)))
}
