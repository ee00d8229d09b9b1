//! Merging a bead's branch into its target: by each strategy, never over a person's work,
//! and finishing a merge a kill cut short.

use super::*;

/// The `rebase` landing: a fast-forward for a branch that is a line of commits on the target.
fn ff() -> Landing {
    landing(MergeStrategy::Rebase)
}

#[test]
fn merge_fast_forwards_a_target_that_is_not_checked_out() {
    let f = Fixture::new();
    let git = f.git();
    let main_tip = git.find_commit(f.tip("main")).expect("commit");
    git.branch("release", &main_tip, false).expect("branch");
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "release").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    let done = f.commit(&b, "msg");
    assert!(!f.repo.is_merged(&b, "release").expect("is_merged"));

    let outcome = f.merge(&b, "release").expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::Merged {
            from: main_tip.id().into(),
            to: done.clone()
        }
    );
    assert_eq!(CommitId::from(f.tip("release")), done);
    assert_eq!(f.tip("main"), main_tip.id(), "main is untouched");
    assert!(
        !f.ws.join("hello.txt").exists(),
        "the main checkout is on main, not release"
    );
    assert!(f.repo.is_merged(&b, "release").expect("is_merged"));

    assert_eq!(
        f.merge(&b, "release").expect("merge"),
        MergeOutcome::AlreadyMerged
    );
    assert_eq!(CommitId::from(f.tip("release")), done);
}

#[test]
fn merge_into_the_checked_out_target_updates_the_main_working_files() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    fs::remove_file(wt.path.join("old.txt")).expect("delete");
    let done = f.commit(&b, "msg");
    write(&f.ws.join("notes.txt"), "a person's untracked notes\n");

    let outcome = f.merge(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { ref to, .. } if *to == done),
        "{outcome:?}"
    );
    assert_eq!(CommitId::from(f.tip("main")), done);
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
        f.merge(&b, "main").expect("merge"),
        MergeOutcome::AlreadyMerged
    );
}

#[test]
fn merge_waits_for_a_checked_out_target_with_uncommitted_changes() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    f.commit(&b, "msg");
    let before = f.tip("main");
    write(&f.ws.join("README.md"), "a person's unsaved work\n");

    let outcome = f.merge(&b, "main").expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::TargetDirty {
            files: vec!["README.md".into()]
        }
    );
    assert_eq!(read(&f.ws.join("README.md")), "a person's unsaved work\n");
    assert_eq!(f.tip("main"), before);
    assert!(!f.ws.join("hello.txt").exists());

    // Once the person commits, the target has moved on and the branch must catch up first.
    commit_everything(&f.ws, "person's work");
    let outcome = f.merge(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::NotUpToDate { .. }),
        "{outcome:?}"
    );
}

#[test]
fn merge_waits_for_staged_changes_too() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    f.commit(&b, "msg");
    write(&f.ws.join("staged.txt"), "staged\n");
    let git = f.git();
    let mut index = git.index().expect("index");
    index.add_path(Path::new("staged.txt")).expect("stage");
    index.write().expect("write index");

    let outcome = f.merge(&b, "main").expect("merge");
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
        let (f, b, wt) = Fixture::with_bead();
        write(&wt.path.join(".env"), "from the bead\n");
        f.commit(&b, "msg");
        if ignored {
            write(&f.ws.join(".git/info/exclude"), ".env\n");
        }
        let before = f.tip("main");
        write(&f.ws.join(".env"), "a person's secrets\n");

        let outcome = f.merge(&b, "main").expect("merge");
        assert_eq!(
            outcome,
            MergeOutcome::TargetDirty {
                files: vec![".env".into()]
            },
            "ignored: {ignored}"
        );
        assert_eq!(read(&f.ws.join(".env")), "a person's secrets\n");
        assert_eq!(f.tip("main"), before);
    }
}

#[test]
fn merge_refuses_a_branch_that_does_not_contain_the_target() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    let branch = f.commit(&b, "msg");
    write(&f.ws.join("other.txt"), "other\n");
    let moved = commit_everything(&f.ws, "target moved on");

    let outcome = f.merge(&b, "main").expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::NotUpToDate {
            target: moved.into(),
            branch
        }
    );
    assert_eq!(f.tip("main"), moved, "never rewritten");
    assert!(!f.repo.is_merged(&b, "main").expect("is_merged"));
}

#[test]
fn a_branch_that_has_the_target_already_is_left_as_it_is() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    let tip = f.commit(&b, "implement");
    // `main` is where the branch started: nothing to merge, and no empty merge commit.
    assert_eq!(
        f.repo.merge_target_into_branch(&b, "main").expect("merge"),
        BranchMerge::UpToDate(tip.clone())
    );
    // Once merged, the moved target is in the branch: merging again changes nothing.
    write(&f.ws.join("other.txt"), "other\n");
    commit_everything(&f.ws, "target moved on");
    let BranchMerge::Merged(merged) = f.repo.merge_target_into_branch(&b, "main").expect("merge")
    else {
        panic!("a clean merge expected");
    };
    assert_ne!(merged, tip);
    assert_eq!(
        f.repo.merge_target_into_branch(&b, "main").expect("merge"),
        BranchMerge::UpToDate(merged)
    );
}

#[test]
fn the_conflicts_with_a_target_are_found_without_changing_the_branch() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    let tip = f.commit(&b, "implement");
    assert!(f.repo.conflicts_with(&b, "main").expect("look").is_empty());
    // The target moves on elsewhere: git would merge it, so nothing conflicts.
    write(&f.ws.join("other.txt"), "other\n");
    commit_everything(&f.ws, "other work");
    assert!(f.repo.conflicts_with(&b, "main").expect("look").is_empty());
    // The target writes the bead's file too: it conflicts there.
    write(&f.ws.join("hello.txt"), "hello\n");
    commit_everything(&f.ws, "the same file");
    assert_eq!(
        f.repo.conflicts_with(&b, "main").expect("look"),
        ["hello.txt"]
    );
    assert_eq!(
        f.repo.head(&b).expect("tip"),
        tip,
        "the branch is as it was"
    );
}

#[test]
fn merge_after_the_agent_merged_the_target_into_the_branch() {
    // The merge agent runs `git merge main` and stops without committing; the daemon's commit
    // must record the merge so that the target becomes an ancestor of the branch.
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    f.commit(&b, "implement");
    write(&f.ws.join("other.txt"), "other\n");
    let moved = commit_everything(&f.ws, "target moved on");

    let agent = Repository::open(&wt.path).expect("open worktree");
    let theirs = agent.find_annotated_commit(moved).expect("annotated");
    agent
        .merge(&[&theirs], None, None)
        .expect("merge without committing");
    let merged = f.commit(&b, "merge");
    let git = f.git();
    assert_eq!(
        git.find_commit(merged.oid().expect("oid"))
            .expect("commit")
            .parent_count(),
        2
    );
    assert_eq!(agent.state(), git2::RepositoryState::Clean);

    let outcome = f.merge(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(read(&f.ws.join("hello.txt")), "hi\n");
    assert_eq!(read(&f.ws.join("other.txt")), "other\n");
}

#[test]
fn merge_finishes_after_a_crash_between_checkout_and_ref_move() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    let done = f.commit(&b, "msg");
    // What the killed attempt left: the main checkout already at the bead's tree, ref not moved.
    let git = f.git();
    let commit = git.find_commit(done.oid().expect("oid")).expect("commit");
    git.checkout_tree(commit.as_object(), None)
        .expect("checkout");
    assert!(!tracked_changes(&f.ws).is_empty());

    let outcome = f.merge(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(CommitId::from(f.tip("main")), done);
    assert_eq!(tracked_changes(&f.ws), Vec::<String>::new());
}

#[test]
fn merge_finishes_a_checkout_killed_after_writing_files_and_before_the_index() {
    // libgit2 writes the files first and the index last: a daemon killed in between leaves
    // the bead's new file untracked (in the way of itself) and a modified tracked file, with
    // the index still at the old tip. Those files hold exactly the bead's version, so the next
    // merge finishes the checkout instead of waiting for a person forever.
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    write(&wt.path.join("old.txt"), "changed by the bead\n");
    let done = f.commit(&b, "msg");
    write(&f.ws.join("hello.txt"), "hi\n");
    write(&f.ws.join("old.txt"), "changed by the bead\n");

    let outcome = f.merge(&b, "main").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(CommitId::from(f.tip("main")), done);
    assert_eq!(tracked_changes(&f.ws), Vec::<String>::new());

    // A file in the way with other content is a person's: never overwritten.
    let c = bead("cat-2");
    let wt = f.repo.create(&c, "main").expect("create");
    write(&wt.path.join("new.txt"), "from the bead\n");
    f.commit(&c, "msg");
    write(&f.ws.join("new.txt"), "a person's\n");
    let outcome = f.merge(&c, "main").expect("merge");
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
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("new.txt"), "the whole content\n");
    let done = f.commit(&b, "msg");
    let before_kill = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    write(&f.ws.join("new.txt"), "");
    let restart = std::time::SystemTime::now() + std::time::Duration::from_secs(1);

    let outcome = f.merge(&b, "main").expect("merge");
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
        .resume_merge_into_target(&b, "main", &MergeGuard::none(), &ff(), later)
        .expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::TargetDirty { .. }),
        "a file changed outside the window is someone's: {outcome:?}"
    );
    let outcome = f
        .repo
        .resume_merge_into_target(
            &b,
            "main",
            &MergeGuard::none(),
            &ff(),
            (before_kill, restart),
        )
        .expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { .. }),
        "{outcome:?}"
    );
    assert_eq!(CommitId::from(f.tip("main")), done);
    assert_eq!(read(&f.ws.join("new.txt")), "the whole content\n");
    assert_eq!(tracked_changes(&f.ws), Vec::<String>::new());
}

#[test]
fn merge_updates_a_target_checked_out_in_a_persons_own_worktree() {
    let f = Fixture::new();
    let git = f.git();
    let main_tip = git.find_commit(f.tip("main")).expect("commit");
    let release = git.branch("release", &main_tip, false).expect("branch");
    let theirs = f.tmp.path().join("release-checkout");
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(release.get()));
    git.worktree("release", &theirs, Some(&opts))
        .expect("person's worktree");

    let b = bead("cat-1");
    let wt = f.repo.create(&b, "release").expect("create");
    write(&wt.path.join("hello.txt"), "hi\n");
    f.commit(&b, "msg");
    write(&theirs.join("README.md"), "unsaved\n");
    let outcome = f.merge(&b, "release").expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::TargetDirty { .. }),
        "{outcome:?}"
    );

    write(&theirs.join("README.md"), "hello\n");
    let outcome = f.merge(&b, "release").expect("merge");
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
fn a_change_to_workflow_files_is_held_until_its_tip_is_approved() {
    let (f, b, wt) = Fixture::with_bead();
    fs::create_dir_all(wt.path.join(".beads/formulas")).expect("mkdir");
    write(
        &wt.path.join(".beads/formulas/feature.formula.toml"),
        "planted\n",
    );
    write(&wt.path.join("src.txt"), "code\n");
    let planted = f.commit(&b, "plant a formula");
    let before = f.tip("main");
    let guard = |approved: Option<CommitId>| MergeGuard {
        files: Some(Default::default()),
        approved,
    };

    let outcome = f
        .repo
        .merge_into_target(&b, "main", &guard(None), &ff())
        .expect("merge");
    assert_eq!(
        outcome,
        MergeOutcome::Held {
            commit: planted.clone(),
            files: vec![".beads/formulas/feature.formula.toml".into()],
        }
    );
    assert_eq!(f.tip("main"), before, "the target did not move");
    assert!(!f.ws.join(".beads/formulas/feature.formula.toml").exists());

    // A later commit that leaves the workflow file as approved needs no new approval; one that
    // changes it again does.
    write(&wt.path.join("src.txt"), "more code\n");
    let later = f.commit(&b, "more code");
    write(
        &wt.path.join(".beads/formulas/feature.formula.toml"),
        "changed again\n",
    );
    let again = f.commit(&b, "change the formula after the approval");
    assert!(matches!(
        f.repo
            .merge_into_target(&b, "main", &guard(Some(planted.clone())), &ff())
            .expect("merge"),
        MergeOutcome::Held { ref commit, .. } if *commit == again
    ));
    assert_eq!(f.tip("main"), before);
    f.repo.reset_to(&b, &later).expect("reset");
    let outcome = f
        .repo
        .merge_into_target(&b, "main", &guard(Some(planted)), &ff())
        .expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { ref to, .. } if *to == later),
        "{outcome:?}"
    );
    assert_eq!(
        read(&f.ws.join(".beads/formulas/feature.formula.toml")),
        "planted\n"
    );
}

#[test]
fn a_change_outside_the_workflow_files_merges_without_an_approval() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("hello.txt"), "hi\n");
    let done = f.commit(&b, "msg");
    let guard = MergeGuard {
        files: Some(Default::default()),
        approved: None,
    };
    let outcome = f
        .repo
        .merge_into_target(&b, "main", &guard, &ff())
        .expect("merge");
    assert!(
        matches!(outcome, MergeOutcome::Merged { ref to, .. } if *to == done),
        "{outcome:?}"
    );
}

/// A bead whose branch merged `main` in after `main` moved on: the bead's commit, a person's
/// commit on `main`, and the merge of `main` into the branch. Returns the branch tip.
fn bead_that_merged_the_moved_target(f: &Fixture, b: &BeadId, wt: &Worktree) -> CommitId {
    write(&wt.path.join("hello.txt"), "hi\n");
    f.commit(b, "cat-1 implement: wrote hello.txt");
    write(&f.ws.join("other.txt"), "other\n");
    commit_everything(&f.ws, "a person's commit on main");
    match f.repo.merge_target_into_branch(b, "main").expect("merge") {
        BranchMerge::Merged(tip) => tip,
        other => panic!("{other:?}"),
    }
}

/// Lands bead `b` on `main` by `strategy`: what `main` moved to, and the tree of the bead's
/// branch tip, which must be what landed.
fn land(f: &Fixture, b: &BeadId, strategy: MergeStrategy, tip: &CommitId) -> (Oid, Oid) {
    let outcome = f.merge_as(b, "main", strategy).expect("merge");
    let MergeOutcome::Merged { to, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(CommitId::from(f.tip("main")), to);
    let git = f.git();
    let branch_tree = git
        .find_commit(tip.oid().expect("oid"))
        .expect("tip")
        .tree_id();
    (to.oid().expect("oid"), branch_tree)
}

#[test]
fn the_merge_strategy_keeps_the_target_as_first_parent() {
    let (f, b, wt) = Fixture::with_bead();
    let tip = bead_that_merged_the_moved_target(&f, &b, &wt);
    let before = f.tip("main");

    let (to, branch_tree) = land(&f, &b, MergeStrategy::Merge, &tip);
    let git = f.git();
    let merge = git.find_commit(to).expect("commit");
    assert_eq!(merge.parent_id(0).expect("first"), before, "main first");
    assert_eq!(CommitId::from(merge.parent_id(1).expect("second")), tip);
    assert_eq!(merge.tree_id(), branch_tree, "the reviewed tree lands");
    assert_eq!(
        merge.summary().ok().flatten(),
        Some("Merge catalyst/cat-1: Add a greeting"),
        "`git log --first-parent --oneline` names the bead"
    );
    assert_eq!(merge.author().name().ok(), Some("Ada Lovelace"));
    assert_eq!(merge.committer().name().ok(), Some("catalyst"));
    // `git log --first-parent main`: the merge, then the person's commit; no bead commits.
    let mut walk = git.revwalk().expect("walk");
    walk.push(f.tip("main")).expect("push");
    walk.simplify_first_parent().expect("first parent");
    let subjects: Vec<String> = walk
        .map(|id| {
            let commit = git.find_commit(id.expect("id")).expect("commit");
            commit
                .summary()
                .ok()
                .flatten()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        subjects,
        [
            "Merge catalyst/cat-1: Add a greeting",
            "a person's commit on main",
            "initial"
        ]
    );
    assert_eq!(read(&f.ws.join("hello.txt")), "hi\n", "the checkout moved");
    assert!(f.repo.is_merged(&b, "main").expect("is_merged"));
    assert_eq!(
        f.merge_as(&b, "main", MergeStrategy::Merge).expect("again"),
        MergeOutcome::AlreadyMerged
    );
}

#[test]
fn the_squash_strategy_lands_one_commit_with_the_branch_tree() {
    let (f, b, wt) = Fixture::with_bead();
    let tip = bead_that_merged_the_moved_target(&f, &b, &wt);
    let before = f.tip("main");

    let (to, branch_tree) = land(&f, &b, MergeStrategy::Squash, &tip);
    let git = f.git();
    let squashed = git.find_commit(to).expect("commit");
    assert_eq!(squashed.parent_ids().collect::<Vec<_>>(), [before]);
    assert_eq!(squashed.tree_id(), branch_tree);
    let message = squashed.message().ok().unwrap_or_default();
    assert!(message.starts_with("Add a greeting\n"), "{message}");
    assert!(
        message.contains("- cat-1 implement: wrote hello.txt"),
        "{message}"
    );
    assert!(message.contains("Catalyst-Bead: cat-1"), "{message}");
    // Repeated after a crash that lost the outcome: the tree is there, nothing lands twice.
    assert!(f.repo.is_merged(&b, "main").expect("is_merged"));
    assert_eq!(
        f.merge_as(&b, "main", MergeStrategy::Squash)
            .expect("again"),
        MergeOutcome::AlreadyMerged
    );
    assert_eq!(f.tip("main"), to);
}

#[test]
fn the_rebase_strategy_replays_the_bead_commits_in_a_line() {
    let (f, b, wt) = Fixture::with_bead();
    let tip = bead_that_merged_the_moved_target(&f, &b, &wt);
    let before = f.tip("main");

    let (to, branch_tree) = land(&f, &b, MergeStrategy::Rebase, &tip);
    let git = f.git();
    let replayed = git.find_commit(to).expect("commit");
    assert_eq!(
        replayed.parent_ids().collect::<Vec<_>>(),
        [before],
        "linear"
    );
    assert_eq!(
        replayed.summary().ok().flatten(),
        Some("cat-1 implement: wrote hello.txt")
    );
    assert_eq!(replayed.tree_id(), branch_tree);
    assert_eq!(replayed.committer().name().ok(), Some("catalyst"));
}

#[test]
fn a_rebase_whose_commits_conflict_one_by_one_lands_squashed() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("README.md"), "the bead's line\n");
    f.commit(&b, "cat-1 implement: rewrote the README");
    write(&f.ws.join("README.md"), "a person's line\n");
    let moved = commit_everything(&f.ws, "a person's README");
    // The merge agent resolves the conflict by hand and commits the merge.
    let agent = Repository::open(&wt.path).expect("open worktree");
    let theirs = agent.find_annotated_commit(moved).expect("annotated");
    agent.merge(&[&theirs], None, None).expect("merge");
    write(&wt.path.join("README.md"), "both lines\n");
    let mut index = agent.index().expect("index");
    index
        .add_path(std::path::Path::new("README.md"))
        .expect("resolve");
    index.write().expect("index");
    let tip = f.commit(&b, "merge main");

    let (to, branch_tree) = land(&f, &b, MergeStrategy::Rebase, &tip);
    let git = f.git();
    let landed = git.find_commit(to).expect("commit");
    assert_eq!(landed.parent_ids().collect::<Vec<_>>(), [moved], "linear");
    assert_eq!(landed.tree_id(), branch_tree, "the resolution lands");
    assert!(landed
        .message()
        .ok()
        .unwrap_or_default()
        .starts_with("Add a greeting\n"));
    assert_eq!(read(&f.ws.join("README.md")), "both lines\n");
}
