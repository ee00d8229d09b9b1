use std::fs;
use std::path::{Path, PathBuf};

use git2::{IndexAddOption, Oid, Repository, Signature, StatusOptions};
use tempfile::TempDir;

use super::*;

/// A workspace repository with one commit on `main` (README.md, old.txt), `main` checked out,
/// and `.catalyst/` *not* excluded, so that merges also prove an untracked `.catalyst/` (where
/// the worktrees live) never counts as uncommitted work.
struct Fixture {
    tmp: TempDir,
    ws: PathBuf,
    repo: Repo,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("temp dir");
    let ws = tmp.path().join("ws");
    let git = Repository::init(&ws).expect("git init");
    git.set_head("refs/heads/main").expect("point HEAD at main");
    fs::write(ws.join("README.md"), "hello\n").expect("write");
    fs::write(ws.join("old.txt"), "old\n").expect("write");
    commit_everything(&ws, "initial");
    let repo = Repo::open(&ws, &ws.join(".catalyst/worktrees")).expect("open repo");
    Fixture { tmp, ws, repo }
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
fn create_makes_a_branch_and_worktree_from_the_target_tip() {
    let f = fixture();
    let wt = f.repo.create(&bead("cat-1"), "main").expect("create");
    assert_eq!(wt.branch, "catalyst/cat-1");
    assert_eq!(wt.path, f.repo.worktree_path(&bead("cat-1")));
    assert_eq!(wt.head, tip(&f.ws, "main").into());
    assert_eq!(read(&wt.path.join("README.md")), "hello\n");
    assert_eq!(f.repo.head(&bead("cat-1")).expect("head"), wt.head);
}

#[test]
fn create_is_idempotent_and_keeps_the_beads_work() {
    let f = fixture();
    let b = bead("cat-1");
    let first = f.repo.create(&b, "main").expect("create");
    write(&first.path.join("done.txt"), "committed\n");
    let committed = f
        .repo
        .commit_all(&b, "cat-1 implement: done")
        .expect("commit")
        .expect("a change");
    write(&first.path.join("wip.txt"), "uncommitted\n");
    // The target moving on must not move an existing bead branch.
    write(&f.ws.join("other.txt"), "other\n");
    commit_everything(&f.ws, "someone else's work");

    let again = f.repo.create(&b, "main").expect("create again");
    assert_eq!(again.path, first.path);
    assert_eq!(again.head, committed);
    assert_eq!(read(&again.path.join("wip.txt")), "uncommitted\n");
    assert!(!again.path.join("other.txt").exists());
}

#[test]
fn create_refuses_a_missing_target() {
    let f = fixture();
    let err = f
        .repo
        .create(&bead("cat-1"), "nope")
        .expect_err("no such target");
    assert!(
        matches!(err, GitError::NoTarget { ref target } if target == "nope"),
        "{err}"
    );
    assert!(err.to_string().contains("`nope`"), "{err}");
}

#[test]
fn create_makes_again_a_worktree_whose_folder_was_deleted() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    fs::remove_dir_all(&wt.path).expect("delete folder");
    let again = f.repo.create(&b, "main").expect("create again");
    assert_eq!(read(&again.path.join("README.md")), "hello\n");
}

#[test]
fn create_makes_again_a_worktree_whose_checkout_was_interrupted() {
    // A crash inside libgit2's add leaves the folder with some files and no index.
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    let meta = f.ws.join(".git/worktrees/cat-1");
    fs::remove_file(meta.join("index")).expect("drop index");
    fs::remove_file(wt.path.join("old.txt")).expect("drop a file");

    f.repo.create(&b, "main").expect("create again");
    assert_eq!(read(&wt.path.join("old.txt")), "old\n");
    assert!(!f.repo.changed_since(&b, &wt.head).expect("changed"));
}

#[test]
fn create_repairs_a_half_written_worktree_record_and_leftover_folder() {
    let f = fixture();
    let b = bead("cat-1");
    fs::create_dir_all(f.ws.join(".git/worktrees/cat-1")).expect("half record");
    write(&f.repo.worktree_path(&b).join("junk.txt"), "junk\n");
    let wt = f.repo.create(&b, "main").expect("create");
    assert!(!wt.path.join("junk.txt").exists());
    assert_eq!(read(&wt.path.join("README.md")), "hello\n");
}

#[test]
fn commit_all_commits_new_modified_and_deleted_files_with_the_exact_message() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    write(&wt.path.join("nested/deep.txt"), "deep\n");
    write(&wt.path.join("README.md"), "changed\n");
    fs::remove_file(wt.path.join("old.txt")).expect("delete");
    write(&wt.path.join(".gitignore"), "build/\n");
    write(&wt.path.join("build/out.o"), "binary\n");
    write(&wt.path.join(".catalyst/journal.jsonl"), "{}\n");

    let message = "cat-1 implement: wrote hello.txt\n\nCatalyst-Step: cat-1.implement/1";
    let id = f
        .repo
        .commit_all(&b, message)
        .expect("commit")
        .expect("a change");

    let git = Repository::open(&f.ws).expect("open");
    let commit = git.find_commit(id.oid().expect("oid")).expect("commit");
    assert_eq!(commit.message().ok(), Some(message));
    assert_eq!(commit.author().name().ok(), Some("catalyst"));
    assert_eq!(commit.author().email().ok(), Some("catalyst@localhost"));
    assert_eq!(commit.committer().name().ok(), Some("catalyst"));
    assert_eq!(
        commit.parent_id(0).expect("parent"),
        wt.head.oid().expect("oid")
    );
    assert_eq!(
        file_in_commit(&f.ws, &id, "hello.txt").as_deref(),
        Some("hi\n")
    );
    assert_eq!(
        file_in_commit(&f.ws, &id, "nested/deep.txt").as_deref(),
        Some("deep\n")
    );
    assert_eq!(
        file_in_commit(&f.ws, &id, "README.md").as_deref(),
        Some("changed\n")
    );
    assert_eq!(
        file_in_commit(&f.ws, &id, ".gitignore").as_deref(),
        Some("build/\n")
    );
    assert_eq!(file_in_commit(&f.ws, &id, "old.txt"), None);
    assert_eq!(file_in_commit(&f.ws, &id, "build/out.o"), None);
    assert_eq!(file_in_commit(&f.ws, &id, ".catalyst/journal.jsonl"), None);
    assert_eq!(f.repo.head(&b).expect("head"), id);

    assert_eq!(
        f.repo.commit_all(&b, "again").expect("commit"),
        None,
        "nothing left to commit"
    );
    assert_eq!(f.repo.head(&b).expect("head"), id);
}

#[test]
fn commit_all_uses_the_configured_author() {
    let f = fixture();
    let repo = f.repo.clone().with_author("robot", "robot@example.com");
    let b = bead("cat-1");
    let wt = repo.create(&b, "main").expect("create");
    write(&wt.path.join("x.txt"), "x\n");
    let id = repo
        .commit_all(&b, "msg")
        .expect("commit")
        .expect("a change");
    let git = Repository::open(&f.ws).expect("open");
    let commit = git.find_commit(id.oid().expect("oid")).expect("commit");
    assert_eq!(commit.author().email().ok(), Some("robot@example.com"));
}

#[test]
fn commit_all_refuses_a_worktree_switched_off_its_branch() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    let git = Repository::open(&wt.path).expect("open worktree");
    git.set_head_detached(wt.head.oid().expect("oid"))
        .expect("detach");
    write(&wt.path.join("x.txt"), "x\n");
    let err = f.repo.commit_all(&b, "msg").expect_err("detached");
    assert!(matches!(err, GitError::WrongHead { .. }), "{err}");
    assert!(err.to_string().contains("detached HEAD"), "{err}");
}

#[test]
fn changed_since_sees_commits_edits_and_untracked_files_but_not_ignored_or_empty_commits() {
    type Change = fn(&Path, &Repo, &BeadId);
    let cases: &[(&str, Change, bool)] = &[
        ("nothing", |_, _, _| {}, false),
        (
            "committed change",
            |wt, repo, b| {
                write(&wt.join("a.txt"), "a\n");
                repo.commit_all(b, "msg").expect("commit");
            },
            true,
        ),
        (
            "uncommitted edit",
            |wt, _, _| write(&wt.join("README.md"), "edited\n"),
            true,
        ),
        (
            "untracked file",
            |wt, _, _| write(&wt.join("dir/new.txt"), "new\n"),
            true,
        ),
        (
            "deleted file",
            |wt, _, _| fs::remove_file(wt.join("old.txt")).expect("delete"),
            true,
        ),
        (
            "ignored file",
            |wt, _, _| {
                write(&wt.join("target/x"), "x");
                let exclude = Repository::open(wt)
                    .expect("open")
                    .commondir()
                    .join("info/exclude");
                write(&exclude, "target/\n");
            },
            false,
        ),
        (
            "daemon state",
            |wt, _, _| write(&wt.join(".catalyst/x"), "x"),
            false,
        ),
        (
            "empty commit",
            |wt, _, _| {
                let git = Repository::open(wt).expect("open");
                let head = git.head().expect("head").peel_to_commit().expect("commit");
                let sig = Signature::now("agent", "agent@example.com").expect("sig");
                git.commit(
                    Some("HEAD"),
                    &sig,
                    &sig,
                    "nothing",
                    &head.tree().expect("tree"),
                    &[&head],
                )
                .expect("commit");
            },
            false,
        ),
    ];
    for (name, change, expected) in cases {
        let f = fixture();
        let b = bead("cat-1");
        let wt = f.repo.create(&b, "main").expect("create");
        change(&wt.path, &f.repo, &b);
        assert_eq!(
            f.repo.changed_since(&b, &wt.head).expect("changed_since"),
            *expected,
            "{name}"
        );
    }
}

#[test]
fn reset_to_restores_content_and_removes_untracked_files() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join(".gitignore"), "cache/\n");
    let start = f
        .repo
        .commit_all(&b, "step 1")
        .expect("commit")
        .expect("a change");

    // An interrupted step: a commit, edits, staged and untracked files, ignored output.
    write(&wt.path.join("README.md"), "half done\n");
    f.repo.commit_all(&b, "step 2 partial").expect("commit");
    write(&wt.path.join("old.txt"), "edited\n");
    write(&wt.path.join("staged.txt"), "staged\n");
    let git = Repository::open(&wt.path).expect("open");
    let mut index = git.index().expect("index");
    index.add_path(Path::new("staged.txt")).expect("stage");
    index.write().expect("write index");
    write(&wt.path.join("new/dir/file.txt"), "untracked\n");
    write(&wt.path.join("cache/blob"), "ignored\n");
    write(&wt.path.join(".catalyst/state"), "daemon\n");

    f.repo.reset_to(&b, &start).expect("reset");

    assert_eq!(f.repo.head(&b).expect("head"), start);
    assert_eq!(read(&wt.path.join("README.md")), "hello\n");
    assert_eq!(read(&wt.path.join("old.txt")), "old\n");
    assert!(!wt.path.join("staged.txt").exists());
    assert!(!wt.path.join("new").exists(), "emptied folders go too");
    assert_eq!(read(&wt.path.join("cache/blob")), "ignored\n");
    assert_eq!(read(&wt.path.join(".catalyst/state")), "daemon\n");
    assert!(!f.repo.changed_since(&b, &start).expect("changed_since"));
}

#[test]
fn reset_to_repairs_a_detached_head_and_a_deleted_worktree() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    let git = Repository::open(&wt.path).expect("open worktree");
    git.set_head_detached(wt.head.oid().expect("oid"))
        .expect("detach");
    f.repo.reset_to(&b, &wt.head).expect("reset");
    write(&wt.path.join("x.txt"), "x\n");
    assert!(f
        .repo
        .commit_all(&b, "msg")
        .expect("back on the branch")
        .is_some());

    fs::remove_dir_all(&wt.path).expect("delete folder");
    f.repo.reset_to(&b, &wt.head).expect("reset");
    assert_eq!(read(&wt.path.join("README.md")), "hello\n");
    assert!(!wt.path.join("x.txt").exists());
}

#[test]
fn merge_fast_forwards_a_target_that_is_not_checked_out() {
    let f = fixture();
    let git = Repository::open(&f.ws).expect("open");
    let main_tip = git.find_commit(tip(&f.ws, "main")).expect("commit");
    git.branch("release", &main_tip, false).expect("branch");
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "release").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    let done = f
        .repo
        .commit_all(&b, "msg")
        .expect("commit")
        .expect("a change");
    assert!(!f.repo.is_merged(&b, "release").expect("is_merged"));

    let outcome = f.repo.merge_into_target(&b, "release").expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::Merged {
            from: main_tip.id().into(),
            to: done.clone()
        }
    );
    assert_eq!(CommitId::from(tip(&f.ws, "release")), done);
    assert_eq!(tip(&f.ws, "main"), main_tip.id(), "main is untouched");
    assert!(
        !f.ws.join("hello.txt").exists(),
        "the main checkout is on main, not release"
    );
    assert!(f.repo.is_merged(&b, "release").expect("is_merged"));

    assert_eq!(
        f.repo.merge_into_target(&b, "release").expect("merge"),
        MergeOutcome::AlreadyMerged
    );
    assert_eq!(CommitId::from(tip(&f.ws, "release")), done);
}

#[test]
fn merge_into_the_checked_out_target_updates_the_main_working_files() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    fs::remove_file(wt.path.join("old.txt")).expect("delete");
    let done = f
        .repo
        .commit_all(&b, "msg")
        .expect("commit")
        .expect("a change");
    write(&f.ws.join("notes.txt"), "a person's untracked notes\n");

    let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { ref to, .. } if *to == done),
        "{outcome:?}"
    );
    assert_eq!(CommitId::from(tip(&f.ws, "main")), done);
    assert_eq!(read(&f.ws.join("hello.txt")), "hi\n");
    assert!(!f.ws.join("old.txt").exists());
    assert_eq!(
        read(&f.ws.join("notes.txt")),
        "a person's untracked notes\n"
    );
    assert_eq!(
        tracked_changes(&f.ws),
        Vec::<String>::new(),
        "index and files match the new tip"
    );

    assert_eq!(
        f.repo.merge_into_target(&b, "main").expect("merge"),
        MergeOutcome::AlreadyMerged
    );
}

#[test]
fn merge_waits_for_a_checked_out_target_with_uncommitted_changes() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    f.repo.commit_all(&b, "msg").expect("commit");
    let before = tip(&f.ws, "main");
    write(&f.ws.join("README.md"), "a person's unsaved work\n");

    let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::TargetDirty {
            files: vec!["README.md".into()]
        }
    );
    assert_eq!(read(&f.ws.join("README.md")), "a person's unsaved work\n");
    assert_eq!(tip(&f.ws, "main"), before);
    assert!(!f.ws.join("hello.txt").exists());

    // Once the person commits, the target has moved on and the branch must catch up first.
    commit_everything(&f.ws, "person's work");
    let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::NotUpToDate { .. }),
        "{outcome:?}"
    );
}

#[test]
fn merge_waits_for_staged_changes_too() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    f.repo.commit_all(&b, "msg").expect("commit");
    write(&f.ws.join("staged.txt"), "staged\n");
    let git = Repository::open(&f.ws).expect("open");
    let mut index = git.index().expect("index");
    index.add_path(Path::new("staged.txt")).expect("stage");
    index.write().expect("write index");

    let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::TargetDirty {
            files: vec!["staged.txt".into()]
        }
    );
    assert!(tracked_changes(&f.ws).contains(&"staged.txt".to_owned()));
}

#[test]
fn merge_never_overwrites_an_untracked_or_ignored_file_in_the_way() {
    for ignored in [false, true] {
        let f = fixture();
        let b = bead("cat-1");
        let wt = f.repo.create(&b, "main").expect("create");
        write(&wt.path.join(".env"), "from the bead\n");
        f.repo.commit_all(&b, "msg").expect("commit");
        if ignored {
            write(&f.ws.join(".git/info/exclude"), ".env\n");
        }
        let before = tip(&f.ws, "main");
        write(&f.ws.join(".env"), "a person's secrets\n");

        let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
        assert_eq!(
            outcome,
            MergeOutcome::TargetDirty {
                files: vec![".env".into()]
            },
            "ignored: {ignored}"
        );
        assert_eq!(read(&f.ws.join(".env")), "a person's secrets\n");
        assert_eq!(tip(&f.ws, "main"), before);
    }
}

#[test]
fn merge_refuses_a_branch_that_does_not_contain_the_target() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    let branch = f
        .repo
        .commit_all(&b, "msg")
        .expect("commit")
        .expect("a change");
    write(&f.ws.join("other.txt"), "other\n");
    let moved = commit_everything(&f.ws, "target moved on");

    let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::NotUpToDate {
            target: moved.into(),
            branch
        }
    );
    assert_eq!(tip(&f.ws, "main"), moved, "never rewritten");
    assert!(!f.repo.is_merged(&b, "main").expect("is_merged"));
}

#[test]
fn merge_after_the_agent_merged_the_target_into_the_branch() {
    // The merge agent runs `git merge main` and stops without committing; the daemon's commit
    // must record the merge so that the target becomes an ancestor of the branch.
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    f.repo.commit_all(&b, "implement").expect("commit");
    write(&f.ws.join("other.txt"), "other\n");
    let moved = commit_everything(&f.ws, "target moved on");

    let agent = Repository::open(&wt.path).expect("open worktree");
    let theirs = agent.find_annotated_commit(moved).expect("annotated");
    agent
        .merge(&[&theirs], None, None)
        .expect("merge without committing");
    let merged = f
        .repo
        .commit_all(&b, "merge")
        .expect("commit")
        .expect("a change");
    let git = Repository::open(&f.ws).expect("open");
    assert_eq!(
        git.find_commit(merged.oid().expect("oid"))
            .expect("commit")
            .parent_count(),
        2
    );
    assert_eq!(agent.state(), git2::RepositoryState::Clean);

    let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(read(&f.ws.join("hello.txt")), "hi\n");
    assert_eq!(read(&f.ws.join("other.txt")), "other\n");
}

#[test]
fn merge_finishes_after_a_crash_between_checkout_and_ref_move() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    let done = f
        .repo
        .commit_all(&b, "msg")
        .expect("commit")
        .expect("a change");
    // What the killed attempt left: the main checkout already at the bead's tree, ref not moved.
    let git = Repository::open(&f.ws).expect("open");
    let commit = git.find_commit(done.oid().expect("oid")).expect("commit");
    git.checkout_tree(commit.as_object(), None)
        .expect("checkout");
    assert!(!tracked_changes(&f.ws).is_empty());

    let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(CommitId::from(tip(&f.ws, "main")), done);
    assert_eq!(tracked_changes(&f.ws), Vec::<String>::new());
}

#[test]
fn merge_finishes_a_checkout_killed_after_writing_files_and_before_the_index() {
    // libgit2 writes the files first and the index last: a daemon killed in between leaves
    // the bead's new file untracked (in the way of itself) and a modified tracked file, with
    // the index still at the old tip. Those files hold exactly the bead's version, so the next
    // merge finishes the checkout instead of waiting for a person forever.
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    write(&wt.path.join("old.txt"), "changed by the bead\n");
    let done = f
        .repo
        .commit_all(&b, "msg")
        .expect("commit")
        .expect("a change");
    write(&f.ws.join("hello.txt"), "hi\n");
    write(&f.ws.join("old.txt"), "changed by the bead\n");

    let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(CommitId::from(tip(&f.ws, "main")), done);
    assert_eq!(tracked_changes(&f.ws), Vec::<String>::new());

    // A file in the way with other content is a person's: never overwritten.
    let c = bead("cat-2");
    let wt = f.repo.create(&c, "main").expect("create");
    write(&wt.path.join("new.txt"), "from the bead\n");
    f.repo.commit_all(&c, "msg").expect("commit");
    write(&f.ws.join("new.txt"), "a person's\n");
    let outcome = f.repo.merge_into_target(&c, "main").expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::TargetDirty {
            files: vec!["new.txt".into()]
        }
    );
    assert_eq!(read(&f.ws.join("new.txt")), "a person's\n");
}

#[test]
fn a_resumed_merge_overwrites_a_file_the_kill_cut_short_and_nothing_else() {
    // Killed in the middle of writing a file, the checkout leaves it empty or half-written:
    // neither the old version nor the bead's. Only a merge that knows when the killed one was
    // writing may take such a file for its own.
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("new.txt"), "the whole content\n");
    let done = f
        .repo
        .commit_all(&b, "msg")
        .expect("commit")
        .expect("a change");
    let before_kill = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    write(&f.ws.join("new.txt"), "");
    let restart = std::time::SystemTime::now() + std::time::Duration::from_secs(1);

    let outcome = f.repo.merge_into_target(&b, "main").expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::TargetDirty {
            files: vec!["new.txt".into()]
        },
        "an ordinary merge does not know the file"
    );
    let later = (restart, restart + std::time::Duration::from_secs(60));
    let outcome = f
        .repo
        .resume_merge_into_target(&b, "main", later)
        .expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::TargetDirty { .. }),
        "a file changed outside the window is someone's: {outcome:?}"
    );
    let outcome = f
        .repo
        .resume_merge_into_target(&b, "main", (before_kill, restart))
        .expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(CommitId::from(tip(&f.ws, "main")), done);
    assert_eq!(read(&f.ws.join("new.txt")), "the whole content\n");
    assert_eq!(tracked_changes(&f.ws), Vec::<String>::new());
}

#[test]
fn remove_deletes_the_folder_and_branch_and_is_idempotent() {
    let f = fixture();
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("wip.txt"), "x\n");
    f.repo.remove(&b).expect("remove");
    assert!(!wt.path.exists());
    assert!(matches!(f.repo.head(&b), Err(GitError::NoBranch { .. })));
    assert!(!f.ws.join(".git/worktrees/cat-1").exists());
    assert_eq!(f.repo.list().expect("list"), Vec::<BeadId>::new());
    f.repo.remove(&b).expect("remove again");
    // The same bead can be made again from scratch.
    let again = f.repo.create(&b, "main").expect("create again");
    assert!(!again.path.join("wip.txt").exists());
}

#[test]
fn two_beads_work_independently() {
    let f = fixture();
    let (a, b) = (bead("cat-a"), bead("cat-b"));
    let wa = f.repo.create(&a, "main").expect("create a");
    let wb = f.repo.create(&b, "main").expect("create b");
    assert_ne!(wa.path, wb.path);
    write(&wa.path.join("a.txt"), "a\n");
    assert!(f.repo.changed_since(&a, &wa.head).expect("changed"));
    assert!(!f.repo.changed_since(&b, &wb.head).expect("changed"));
    assert_eq!(f.repo.commit_all(&b, "msg").expect("commit"), None);
    f.repo
        .commit_all(&a, "msg")
        .expect("commit")
        .expect("a change");
    assert!(!wb.path.join("a.txt").exists());
    assert_eq!(f.repo.head(&b).expect("head"), wb.head);
    assert_eq!(f.repo.list().expect("list"), vec![a, b]);
}

#[test]
fn a_bead_created_after_a_merge_starts_from_the_merged_target() {
    let f = fixture();
    let a = bead("cat-a");
    let wa = f.repo.create(&a, "main").expect("create a");
    write(&wa.path.join("a.txt"), "a\n");
    f.repo.commit_all(&a, "msg").expect("commit");
    f.repo.merge_into_target(&a, "main").expect("merge");
    f.repo.remove(&a).expect("remove");

    let wb = f.repo.create(&bead("cat-b"), "main").expect("create b");
    assert_eq!(read(&wb.path.join("a.txt")), "a\n");
}

#[test]
fn list_finds_worktrees_branches_and_leftover_folders_but_not_foreign_names() {
    let f = fixture();
    f.repo.create(&bead("cat-1"), "main").expect("create");
    let git = Repository::open(&f.ws).expect("open");
    let main_tip = git.find_commit(tip(&f.ws, "main")).expect("commit");
    git.branch("catalyst/cat-2", &main_tip, false)
        .expect("branch only");
    git.branch("catalyst/Not_A_Bead", &main_tip, false)
        .expect("foreign branch");
    git.branch("feature", &main_tip, false)
        .expect("unrelated branch");
    fs::create_dir_all(f.repo.worktree_path(&bead("cat-3"))).expect("leftover folder");
    fs::create_dir_all(f.ws.join(".catalyst/worktrees/UPPER")).expect("foreign folder");

    let listed = f.repo.list().expect("list");
    assert_eq!(listed, vec![bead("cat-1"), bead("cat-2"), bead("cat-3")]);
    for b in &listed {
        f.repo.remove(b).expect("remove");
    }
    assert_eq!(f.repo.list().expect("list"), Vec::<BeadId>::new());
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
fn merge_updates_a_target_checked_out_in_a_persons_own_worktree() {
    let f = fixture();
    let git = Repository::open(&f.ws).expect("open");
    let main_tip = git.find_commit(tip(&f.ws, "main")).expect("commit");
    let release = git.branch("release", &main_tip, false).expect("branch");
    let theirs = f.tmp.path().join("release-checkout");
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(release.get()));
    git.worktree("release", &theirs, Some(&opts))
        .expect("person's worktree");

    let b = bead("cat-1");
    let wt = f.repo.create(&b, "release").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    f.repo.commit_all(&b, "msg").expect("commit");
    write(&theirs.join("README.md"), "unsaved\n");
    let outcome = f.repo.merge_into_target(&b, "release").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::TargetDirty { .. }),
        "{outcome:?}"
    );

    write(&theirs.join("README.md"), "hello\n");
    let outcome = f.repo.merge_into_target(&b, "release").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(read(&theirs.join("hello.txt")), "hi\n");
    assert_eq!(tracked_changes(&theirs), Vec::<String>::new());
    assert!(!f.ws.join("hello.txt").exists());
    assert_eq!(
        f.repo.list().expect("list"),
        vec![b],
        "a person's worktree is not a bead's"
    );
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

    let f = fixture();
    let b = bead("cat-9");
    let err = f.repo.commit_all(&b, "msg").expect_err("no worktree");
    assert!(matches!(err, GitError::NoWorktree { .. }), "{err}");
    assert!(err.to_string().contains("`cat-9`"), "{err}");
    let err = f.repo.head(&b).expect_err("no branch");
    assert_eq!(
        err.to_string(),
        "bead `cat-9` has no branch `catalyst/cat-9`"
    );
    let err = f.repo.merge_into_target(&b, "main").expect_err("no branch");
    assert!(matches!(err, GitError::NoBranch { .. }), "{err}");
}
