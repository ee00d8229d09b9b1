//! The worktree layer against real git repositories: one [`Fixture`] per test, a
//! repository with one commit on `main`, and a bead's worktree made from it.

mod change;
mod commit;
mod create;
mod merge;
mod sandbox;
mod spare;

use std::fs;
use std::path::{Path, PathBuf};

use git2::{IndexAddOption, Oid, Repository, Signature, StatusOptions};
use tempfile::TempDir;

use super::*;
use crate::domain::model::MergeStrategy;

/// A workspace repository with one commit on `main` (README.md, old.txt), `main` checked out,
/// and `.catalyst/` *not* excluded, so that merges also prove an untracked `.catalyst/` (where
/// the worktrees live) never counts as uncommitted work.
struct Fixture {
    tmp: TempDir,
    ws: PathBuf,
    repo: Repo,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().expect("temp dir");
        let ws = tmp.path().join("ws");
        let git = Repository::init(&ws).expect("git init");
        git.set_head("refs/heads/main").expect("point HEAD at main");
        let mut config = git.config().expect("config");
        config
            .set_str("user.name", "Ada Lovelace")
            .expect("user.name");
        config
            .set_str("user.email", "ada@example.com")
            .expect("user.email");
        fs::write(ws.join("README.md"), "hello\n").expect("write");
        fs::write(ws.join("old.txt"), "old\n").expect("write");
        commit_everything(&ws, "initial");
        let repo = Repo::open(&ws, &ws.join(".catalyst/worktrees")).expect("open repo");
        Fixture { tmp, ws, repo }
    }

    /// A new fixture with bead `cat-1`'s worktree made from `main`: what most tests start from.
    fn with_bead() -> (Fixture, BeadId, Worktree) {
        let f = Fixture::new();
        let b = bead("cat-1");
        let wt = f.repo.create(&b, "main").expect("create");
        (f, b, wt)
    }

    /// Commits everything in the bead's worktree, which must hold a change.
    fn commit(&self, b: &BeadId, message: &str) -> CommitId {
        self.repo
            .commit_all(b, message)
            .expect("commit")
            .expect("a change")
    }

    /// The workspace repository itself.
    fn git(&self) -> Repository {
        Repository::open(&self.ws).expect("open")
    }

    /// A person's worktree of the bead's branch, `inspect` beside the workspace: where it is.
    fn person_checks_out(&self, b: &BeadId) -> PathBuf {
        let git = self.git();
        let branch = git
            .find_reference(&format!("refs/heads/{}", branch_name(b)))
            .expect("the bead's branch");
        let theirs = self.tmp.path().join("inspect");
        let mut opts = git2::WorktreeAddOptions::new();
        opts.reference(Some(&branch));
        git.worktree("inspect", &theirs, Some(&opts))
            .expect("a person's worktree of the branch");
        theirs
    }

    /// The tip of a branch of the workspace repository.
    fn tip(&self, branch: &str) -> Oid {
        tip(&self.ws, branch)
    }

    /// Merges `bead` into `target` with no workflow files to hold for, by a fast-forward
    /// where the branch is a line of commits on the target (the `rebase` strategy).
    fn merge(&self, bead: &BeadId, target: &str) -> Result<MergeOutcome, GitError> {
        self.merge_as(bead, target, MergeStrategy::Rebase)
    }

    fn merge_as(
        &self,
        bead: &BeadId,
        target: &str,
        strategy: MergeStrategy,
    ) -> Result<MergeOutcome, GitError> {
        self.repo
            .merge_into_target(bead, target, &MergeGuard::none(), &landing(strategy))
    }
}

/// A landing by `strategy` for a bead titled "Add a greeting".
fn landing(strategy: MergeStrategy) -> Landing {
    Landing {
        strategy,
        title: "Add a greeting".into(),
    }
}

fn bead(id: &str) -> BeadId {
    BeadId::new(id).expect("valid bead id")
}

/// Commits every file of the checkout at `dir` (but `.catalyst/`) on its HEAD, as a person would.
fn commit_everything(dir: &Path, message: &str) -> Oid {
    let repo = Repository::open(dir).expect("open checkout");
    let mut index = repo.index().expect("index");
    let mut skip = |p: &Path, _: &[u8]| i32::from(p.starts_with(".catalyst"));
    index
        .add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip))
        .expect("add");
    index.update_all(["*"], Some(&mut skip)).expect("update");
    index.write().expect("write index");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let sig = Signature::now("person", "person@example.com").expect("signature");
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<_> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .expect("commit")
}

fn tip(ws: &Path, branch: &str) -> Oid {
    Repository::open(ws)
        .expect("open")
        .find_branch(branch, git2::BranchType::Local)
        .expect("branch exists")
        .get()
        .target()
        .expect("direct ref")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).expect("mkdir");
    }
    fs::write(path, text).expect("write");
}

/// Tracked files of the checkout at `dir` that differ from HEAD.
fn tracked_changes(dir: &Path) -> Vec<String> {
    let repo = Repository::open(dir).expect("open");
    let mut opts = StatusOptions::new();
    opts.include_untracked(false);
    let statuses = repo.statuses(Some(&mut opts)).expect("status");
    statuses
        .iter()
        .filter_map(|e| e.path().ok().map(str::to_owned))
        .collect()
}

fn file_in_commit(ws: &Path, commit: &CommitId, path: &str) -> Option<String> {
    let repo = Repository::open(ws).expect("open");
    let commit = repo
        .find_commit(commit.oid().expect("oid"))
        .expect("commit");
    let entry = commit
        .tree()
        .expect("tree")
        .get_path(Path::new(path))
        .ok()?;
    let blob = repo.find_blob(entry.id()).expect("blob");
    Some(String::from_utf8_lossy(blob.content()).into_owned())
}

#[test]
fn repo_can_move_to_a_blocking_thread() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Repo>();
}

#[test]
fn branch_is_named_after_the_bead() {
    assert_eq!(branch_name(&bead("cat-1x9")), "catalyst/cat-1x9");
}

#[test]
fn commit_ids_are_validated_and_serialized_as_hex() {
    let hex = "0123456789abcdef0123456789abcdef01234567";
    let id = CommitId::parse(hex).expect("valid");
    assert_eq!(
        serde_json::to_string(&id).expect("json"),
        format!("\"{hex}\"")
    );
    let back: CommitId = serde_json::from_str(&format!("\"{hex}\"")).expect("json");
    assert_eq!(back, id);
    for bad in [
        "",
        "abc123",
        "zz23456789abcdef0123456789abcdef01234567",
        "../x",
    ] {
        assert!(CommitId::parse(bad).is_err(), "{bad:?}");
    }
    assert!(serde_json::from_str::<CommitId>("\"abc\"").is_err());
    let outcome = MergeOutcome::Merged {
        from: id.clone(),
        to: id,
    };
    let json = serde_json::to_string(&outcome).expect("json");
    assert!(json.starts_with("{\"outcome\":\"merged\""), "{json}");
}

#[test]
fn errors_name_what_was_missing() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let err = Repo::open(tmp.path(), &tmp.path().join("wt")).expect_err("not a repository");
    assert!(
        err.to_string().contains("opening the git repository at"),
        "{err}"
    );
    Repository::init_bare(tmp.path().join("bare")).expect("bare");
    let err = Repo::open(&tmp.path().join("bare"), &tmp.path().join("wt")).expect_err("bare");
    assert!(matches!(err, GitError::Bare { .. }), "{err}");

    let f = Fixture::new();
    let b = bead("cat-9");
    let err = f.repo.commit_all(&b, "msg").expect_err("no worktree");
    assert!(matches!(err, GitError::NoWorktree { .. }), "{err}");
    assert!(err.to_string().contains("`cat-9`"), "{err}");
    let err = f.repo.head(&b).expect_err("no branch");
    assert_eq!(
        err.to_string(),
        "bead `cat-9` has no branch `catalyst/cat-9`"
    );
    let err = f.merge(&b, "main").expect_err("no branch");
    assert!(matches!(err, GitError::NoBranch { .. }), "{err}");
}
