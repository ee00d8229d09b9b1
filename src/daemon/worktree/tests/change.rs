//! What a bead's branch changes, from where it left the target (`ctl diff`).

use super::*;
use crate::domain::state::Merged;

#[test]
fn the_diff_starts_where_the_branch_left_the_target() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("new.txt"), "new\n");
    write(&wt.path.join("README.md"), "hello\nmore\n");
    std::fs::write(wt.path.join("logo.bin"), [0u8, 1, 2, 0]).expect("a binary file");
    f.commit(&b, "cat-1 implement: three files");
    // The target moves on after the branch left it: not part of the bead's change.
    write(&f.ws.join("later.txt"), "later\n");
    commit_everything(&f.ws, "a person's commit on main");

    let diff = f.repo.branch_diff(&b, "main", 80).expect("diff");
    assert!(
        diff.patch.contains("diff --git a/README.md b/README.md")
            && diff.patch.contains("+more\n")
            && diff.patch.contains("+++ b/new.txt\n")
            && !diff.patch.contains("later.txt"),
        "{}",
        diff.patch
    );
    assert!(diff.stat.contains("README.md | 1 +"), "{}", diff.stat);
    assert!(
        diff.stat.contains("3 files changed, 2 insertions(+)"),
        "{}",
        diff.stat
    );
    // Each file of the patch, in its order, with the lines it adds and removes; a binary
    // file has a part (its header) but no lines.
    let files: Vec<(&str, usize, usize)> = diff
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.added, f.removed))
        .collect();
    assert_eq!(
        files,
        [("README.md", 1, 0), ("logo.bin", 0, 0), ("new.txt", 1, 0)]
    );
    assert_eq!(diff.patch.matches("diff --git ").count(), files.len());
}

#[test]
fn a_bead_without_a_branch_is_named() {
    let f = Fixture::new();
    let err = f.repo.branch_diff(&bead("cat-9"), "main", 80).unwrap_err();
    assert!(matches!(err, GitError::NoBranch { .. }), "{err}");
    let (f, b, _) = Fixture::with_bead();
    let same = f.repo.branch_diff(&b, "main", 80).expect("diff");
    assert_eq!((same.stat.as_str(), same.patch.as_str()), ("", ""));
}

#[test]
fn a_merged_beads_diff_is_what_its_merge_brought_after_its_branch_is_gone() {
    let (f, b, before, merged) = merged_bead();
    f.repo.remove(&b).expect("remove");
    // The target moves on after the merge: not part of what the merge brought.
    write(&f.ws.join("later.txt"), "later\n");
    commit_everything(&f.ws, "a person's commit on main");

    let after = f
        .repo
        .work_diff(&b, Some(&merged), "main", 80)
        .expect("diff");
    assert!(after.patch.contains("+++ b/new.txt\n"), "{}", after.patch);
    assert_eq!(after, before, "the same change as just before the merge");
    let gone = f.repo.work_diff(&b, None, "main", 80).unwrap_err();
    assert!(matches!(gone, GitError::NoBranch { .. }), "{gone}");
}

#[test]
fn a_merged_beads_diff_is_what_its_merge_brought_while_its_branch_lingers() {
    let (f, b, before, merged) = merged_bead();
    // The branch is still there (the daemon deletes it a moment later) and, merged, changes
    // nothing against the target.
    let lingering = f.repo.branch_diff(&b, "main", 80).expect("diff");
    assert_eq!(lingering.patch, "");
    let shown = f
        .repo
        .work_diff(&b, Some(&merged), "main", 80)
        .expect("diff");
    assert_eq!(shown, before, "the merge's change, not an empty one");
}

/// A bead that added a file, merged into `main`: its diff just before the merge, and the
/// merge's record.
fn merged_bead() -> (Fixture, BeadId, BranchDiff, Merged) {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("new.txt"), "new\n");
    f.commit(&b, "cat-1 implement: a file");
    let before = f.repo.branch_diff(&b, "main", 80).expect("diff");
    let MergeOutcome::Merged { from, to } = f.merge(&b, "main").expect("merge") else {
        panic!("not merged");
    };
    let merged = Merged {
        target: "main".into(),
        from: from.to_string(),
        to: to.to_string(),
    };
    (f, b, before, merged)
}
