//! Making, listing and removing beads' worktrees and branches.

use super::*;

#[test]
fn create_makes_a_branch_and_worktree_from_the_target_tip() {
    let f = Fixture::new();
    let wt = f.repo.create(&bead("cat-1"), "main").expect("create");
    assert_eq!(wt.branch, "catalyst/cat-1");
    assert_eq!(wt.path, f.repo.worktree_path(&bead("cat-1")));
    assert_eq!(wt.head, f.tip("main").into());
    assert_eq!(read(&wt.path.join("README.md")), "hello\n");
    assert_eq!(f.repo.head(&bead("cat-1")).expect("head"), wt.head);
}

#[test]
fn create_is_idempotent_and_keeps_the_beads_work() {
    let f = Fixture::new();
    let b = bead("cat-1");
    let first = f.repo.create(&b, "main").expect("create");
    write(&first.path.join("done.txt"), "committed\n");
    let committed = f.commit(&b, "cat-1 implement: done");
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
    let f = Fixture::new();
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
    let (f, b, wt) = Fixture::with_bead();
    fs::remove_dir_all(&wt.path).expect("delete folder");
    let again = f.repo.create(&b, "main").expect("create again");
    assert_eq!(read(&again.path.join("README.md")), "hello\n");
}

#[test]
fn create_makes_again_a_worktree_whose_checkout_was_interrupted() {
    // A crash inside libgit2's add leaves the folder with some files and no index.
    let (f, b, wt) = Fixture::with_bead();
    let meta = f.ws.join(".git/worktrees/cat-1");
    fs::remove_file(meta.join("index")).expect("drop index");
    fs::remove_file(wt.path.join("old.txt")).expect("drop a file");

    f.repo.create(&b, "main").expect("create again");
    assert_eq!(read(&wt.path.join("old.txt")), "old\n");
    assert!(!f.repo.changed_since(&b, &wt.head).expect("changed"));
}

#[test]
fn create_makes_again_a_worktree_whose_folder_links_to_another_record() {
    // A crash while a spare was taken: the record is renamed to the bead's, the folder's
    // `.git` file still names the spare's record, which is gone.
    let (f, b, wt) = Fixture::with_bead();
    let gone = f.ws.join(".git/worktrees/.spare-2");
    write(
        &wt.path.join(".git"),
        &format!("gitdir: {}\n", gone.display()),
    );

    let again = f.repo.create(&b, "main").expect("create again");
    assert_eq!(read(&again.path.join("README.md")), "hello\n");
    write(&again.path.join("new.txt"), "new\n");
    let commit = f.commit(&b, "works again");
    assert_eq!(f.tip("catalyst/cat-1"), commit.oid().expect("oid"));
}

#[test]
fn create_makes_again_a_worktree_whose_record_names_no_folder() {
    // A crash while git's record of a renamed spare was rewritten: its `gitdir` is empty,
    // which libgit2 reads as the current folder.
    let (f, b, wt) = Fixture::with_bead();
    write(&f.ws.join(".git/worktrees/cat-1/gitdir"), "");

    let again = f.repo.create(&b, "main").expect("create again");
    assert_eq!(again.path, wt.path);
    assert_eq!(read(&again.path.join("README.md")), "hello\n");
    write(&again.path.join("new.txt"), "new\n");
    f.commit(&b, "works again");
}

#[test]
fn create_repairs_a_half_written_worktree_record_and_leftover_folder() {
    let f = Fixture::new();
    let b = bead("cat-1");
    fs::create_dir_all(f.ws.join(".git/worktrees/cat-1")).expect("half record");
    write(&f.repo.worktree_path(&b).join("junk.txt"), "junk\n");
    let wt = f.repo.create(&b, "main").expect("create");
    assert!(!wt.path.join("junk.txt").exists());
    assert_eq!(read(&wt.path.join("README.md")), "hello\n");
}

#[test]
fn remove_deletes_the_folder_and_branch_and_is_idempotent() {
    let (f, b, wt) = Fixture::with_bead();
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
    let f = Fixture::new();
    let (a, b) = (bead("cat-a"), bead("cat-b"));
    let wa = f.repo.create(&a, "main").expect("create a");
    let wb = f.repo.create(&b, "main").expect("create b");
    assert_ne!(wa.path, wb.path);
    write(&wa.path.join("a.txt"), "a\n");
    assert!(f.repo.changed_since(&a, &wa.head).expect("changed"));
    assert!(!f.repo.changed_since(&b, &wb.head).expect("changed"));
    assert_eq!(f.repo.commit_all(&b, "msg").expect("commit"), None);
    f.commit(&a, "msg");
    assert!(!wb.path.join("a.txt").exists());
    assert_eq!(f.repo.head(&b).expect("head"), wb.head);
    assert_eq!(f.repo.list().expect("list"), vec![a, b]);
}

#[test]
fn a_bead_created_after_a_merge_starts_from_the_merged_target() {
    let f = Fixture::new();
    let a = bead("cat-a");
    let wa = f.repo.create(&a, "main").expect("create a");
    write(&wa.path.join("a.txt"), "a\n");
    f.commit(&a, "msg");
    f.merge(&a, "main").expect("merge");
    f.repo.remove(&a).expect("remove");

    let wb = f.repo.create(&bead("cat-b"), "main").expect("create b");
    assert_eq!(read(&wb.path.join("a.txt")), "a\n");
}

#[test]
fn list_finds_worktrees_branches_and_leftover_folders_but_not_foreign_names() {
    let f = Fixture::new();
    f.repo.create(&bead("cat-1"), "main").expect("create");
    let git = f.git();
    let main_tip = git.find_commit(f.tip("main")).expect("commit");
    git.branch("catalyst/cat-2", &main_tip, false)
        .expect("branch only");
    git.branch("catalyst/not+a+bead", &main_tip, false)
        .expect("foreign branch");
    git.branch("feature", &main_tip, false)
        .expect("unrelated branch");
    fs::create_dir_all(f.repo.worktree_path(&bead("cat-3"))).expect("leftover folder");
    fs::create_dir_all(f.ws.join(".catalyst/worktrees/foreign@name")).expect("foreign folder");

    let listed = f.repo.list().expect("list");
    assert_eq!(listed, vec![bead("cat-1"), bead("cat-2"), bead("cat-3")]);
    for b in &listed {
        f.repo.remove(b).expect("remove");
    }
    assert_eq!(f.repo.list().expect("list"), Vec::<BeadId>::new());
}

#[test]
fn a_store_builds_only_on_branches_it_made() {
    let f = Fixture::new();
    let ours = f.repo.clone().with_store("aaaa");
    let theirs = f.repo.clone().with_store("bbbb");
    let (a, b, c) = (bead("cat-1"), bead("cat-2"), bead("cat-3"));
    // Made here: built on again, also after its worktree is gone.
    ours.create(&a, "main").expect("create");
    fs::remove_dir_all(ours.worktree_path(&a)).expect("remove the folder");
    ours.create(&a, "main").expect("its own branch");
    // Made by another store: refused, naming the branch and the store.
    theirs.create(&b, "main").expect("create");
    fs::remove_dir_all(theirs.worktree_path(&b)).expect("remove the folder");
    let err = ours.create(&b, "main").expect_err("another store's branch");
    assert!(
        err.to_string().starts_with(
            "branch `catalyst/cat-2` was not made by this store (it was made by store bbbb)"
        ),
        "{err}"
    );
    assert!(!ours.made_here(&b) && theirs.made_here(&b));
    // Made before store ids: taken while its worktree is in place, refused without it.
    f.repo.create(&c, "main").expect("create");
    ours.create(&c, "main").expect("in use: adopted");
    assert!(ours.made_here(&c), "and recorded as this store's");
    let d = bead("cat-4");
    f.repo.create(&d, "main").expect("create");
    fs::remove_dir_all(f.repo.worktree_path(&d)).expect("remove the folder");
    let err = ours.create(&d, "main").expect_err("left over");
    assert!(err.to_string().contains("it carries no store id"), "{err}");
}

#[test]
fn remove_keeps_a_branch_that_a_person_has_checked_out() {
    let (f, b, wt) = Fixture::with_bead();
    let git = f.git();
    // The bead's own worktree lets go of the branch; a person's worktree takes it.
    let own = Repository::open(&wt.path).expect("open the bead's worktree");
    own.set_head_detached(wt.head.oid().expect("oid"))
        .expect("detach");
    let theirs = f.person_checks_out(&b);
    let err = f.repo.remove(&b).expect_err("the branch is in use");
    assert!(err.to_string().contains("checked out"), "{err}");
    assert_eq!(f.repo.head(&b).expect("the branch is still there"), wt.head);
    assert!(theirs.join("README.md").is_file());

    // Once the person's worktree is gone, only the main repository's HEAD can hold it.
    fs::remove_dir_all(&theirs).expect("delete the person's worktree");
    git.find_worktree("inspect")
        .expect("record")
        .prune(None)
        .expect("prune");
    git.set_head(&format!("refs/heads/{}", branch_name(&b)))
        .expect("check the branch out in main");
    let err = f
        .repo
        .remove(&b)
        .expect_err("the main repository has it checked out");
    assert!(err.to_string().contains("checked out"), "{err}");
    git.set_head("refs/heads/main").expect("back to main");
    f.repo.remove(&b).expect("remove");
    assert!(matches!(f.repo.head(&b), Err(GitError::NoBranch { .. })));
}

#[test]
fn a_worktree_checked_out_afresh_is_one_git_itself_reads_as_whole() {
    // No spares: the worktree is made file for file, not by libgit2's add.
    let (f, b, wt) = Fixture::with_bead();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&wt.path)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let listed = git(&["worktree", "list", "--porcelain"]);
    let ours = fs::canonicalize(&wt.path).expect("the worktree's path");
    assert!(
        listed.contains(&format!(
            "worktree {}\nHEAD {}\nbranch refs/heads/{}\n",
            ours.display(),
            wt.head,
            branch_name(&b)
        )),
        "{listed}"
    );
    assert_eq!(
        git(&["status", "--porcelain"]),
        "",
        "nothing to commit, nothing untracked"
    );
    assert_eq!(
        git(&["worktree", "prune", "--dry-run", "-v"]),
        "",
        "nothing stale"
    );
    assert_eq!(
        git(&["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        branch_name(&b)
    );
    // And the daemon's own view of it: complete, on the branch, committable.
    write(&wt.path.join("new.txt"), "new\n");
    let committed = f.commit(&b, "cat-1 implement: new");
    assert_eq!(f.repo.head(&b).expect("head"), committed);
}

#[test]
fn create_refuses_a_branch_a_person_has_checked_out_and_leaves_nothing_behind() {
    let (f, b, wt) = Fixture::with_bead();
    let git = f.git();
    fs::remove_dir_all(&wt.path).expect("the bead's worktree folder goes");
    git.find_worktree(b.as_str())
        .expect("record")
        .prune(None)
        .expect("prune");
    f.person_checks_out(&b);

    let err = f.repo.create(&b, "main").expect_err("the branch is in use");
    assert!(err.to_string().contains("checked out"), "{err}");
    assert!(!wt.path.exists(), "no folder made");
    assert!(
        !git.commondir().join("worktrees").join(b.as_str()).exists(),
        "no record made"
    );
}
