//! Committing a bead's work, telling whether it changed, and resetting it to a commit.

use super::*;

#[test]
fn commit_all_commits_new_modified_and_deleted_files_with_the_exact_message() {
    let (f, b, wt) = Fixture::with_bead();
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

    let git = f.git();
    let commit = git.find_commit(id.oid().expect("oid")).expect("commit");
    assert_eq!(commit.message().ok(), Some(message));
    // The repository's user is the author; catalyst commits.
    assert_eq!(commit.author().name().ok(), Some("Ada Lovelace"));
    assert_eq!(commit.author().email().ok(), Some("ada@example.com"));
    assert_eq!(commit.committer().name().ok(), Some("catalyst"));
    assert_eq!(commit.committer().email().ok(), Some("catalyst@localhost"));
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
    let f = Fixture::new();
    let robot = Identity::parse("robot <robot@example.com>", "merge.author").expect("valid");
    let bot = Identity::parse("ci bot <ci@example.com>", "merge.committer").expect("valid");
    let repo = f.repo.clone().with_identity(Some(robot), bot);
    let b = bead("cat-1");
    let wt = repo.create(&b, "main").expect("create");
    write(&wt.path.join("x.txt"), "x\n");
    let id = repo
        .commit_all(&b, "msg")
        .expect("commit")
        .expect("a change");
    let git = f.git();
    let commit = git.find_commit(id.oid().expect("oid")).expect("commit");
    assert_eq!(commit.author().email().ok(), Some("robot@example.com"));
    assert_eq!(commit.committer().email().ok(), Some("ci@example.com"));
}

#[test]
fn commit_all_refuses_a_worktree_switched_off_its_branch() {
    let (f, b, wt) = Fixture::with_bead();
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
        let (f, b, wt) = Fixture::with_bead();
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
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join(".gitignore"), "cache/\n");
    let start = f.commit(&b, "step 1");

    // An interrupted step: a commit, edits, staged and untracked files, ignored output.
    write(&wt.path.join("README.md"), "half done\n");
    f.commit(&b, "step 2 partial");
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
    let (f, b, wt) = Fixture::with_bead();
    let git = Repository::open(&wt.path).expect("open worktree");
    git.set_head_detached(wt.head.oid().expect("oid"))
        .expect("detach");
    // Also what a daemon killed while making the worktree from a spare leaves (the spare's
    // HEAD, detached), even at the branch tip's very commit: it differs from the bead's work,
    // so the next attempt's preparation resets it, and the daemon's commit is not refused.
    assert!(f.repo.changed_since(&b, &wt.head).expect("check"));
    f.repo.reset_to(&b, &wt.head).expect("reset");
    assert!(!f.repo.changed_since(&b, &wt.head).expect("check"));
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

/// The daemon keeps a worktree's handle between calls; what the agent staged in between is
/// read from disk. A file the agent force-added though it is ignored is committed only if the
/// commit sees the agent's index.
#[test]
fn commit_all_sees_what_the_agent_staged_after_the_last_check() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join(".gitignore"), "*.log\n");
    assert!(
        f.repo.changed_since(&b, &wt.head).expect("check"),
        "the new .gitignore"
    );
    write(&wt.path.join("keep.log"), "kept\n");
    let agent = Repository::open(&wt.path).expect("the agent's git");
    let mut index = agent.index().expect("index");
    index
        .add_path(Path::new("keep.log"))
        .expect("git add -f keep.log");
    index.write().expect("write the index");
    let id = f
        .repo
        .commit_all(&b, "msg")
        .expect("commit")
        .expect("a change");
    assert_eq!(
        file_in_commit(&f.ws, &id, "keep.log").as_deref(),
        Some("kept\n")
    );
}
