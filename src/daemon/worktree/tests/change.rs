//! What a bead's branch changes, from where it left the target (`ctl diff`).

use super::*;

#[test]
fn the_diff_starts_where_the_branch_left_the_target() {
    let (f, b, wt) = Fixture::with_bead();
    write(&wt.path.join("new.txt"), "new\n");
    write(&wt.path.join("README.md"), "hello\nmore\n");
    f.commit(&b, "cat-1 implement: two files");
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
        diff.stat.contains("2 files changed, 2 insertions(+)"),
        "{}",
        diff.stat
    );
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
