//! Spare worktrees: a removed bead's worktree is kept and becomes the next bead's.

use std::os::unix::fs::MetadataExt;

use super::*;

/// A fixture whose repository keeps up to `n` spares, with bead `cat-1` merged into `main`
/// (it wrote `a.txt`) and its worktree holding an untracked and an ignored file.
fn merged_bead(n: usize) -> (Fixture, BeadId) {
    let mut f = Fixture::new();
    f.repo = f.repo.clone().with_spares(n);
    let b = bead("cat-1");
    let wt = f.repo.create(&b, "main").expect("create");
    write(&wt.path.join("a.txt"), "a\n");
    write(&wt.path.join(".gitignore"), "target/\n");
    f.commit(&b, "a");
    f.merge(&b, "main").expect("merge");
    write(&wt.path.join("notes.txt"), "untracked\n");
    write(&wt.path.join("target/debug/build.o"), "ignored\n");
    (f, b)
}

/// Removes `bead`'s worktree, which becomes the repository's one spare; the spare's folder.
fn removed_into_a_spare(f: &Fixture, bead: &BeadId) -> PathBuf {
    f.repo.remove(bead).expect("remove");
    assert_eq!(f.repo.spare_count(), 1);
    let spares: Vec<PathBuf> = fs::read_dir(f.ws.join(".catalyst/worktrees"))
        .expect("worktrees folder")
        .flatten()
        .map(|e| e.path())
        .collect();
    match &spares[..] {
        [spare] => spare.clone(),
        other => panic!("one spare: {other:?}"),
    }
}

#[test]
fn a_removed_worktree_becomes_the_next_beads_at_the_targets_tip() {
    let (f, first) = merged_bead(1);
    let folder = fs::metadata(f.repo.worktree_path(&first))
        .expect("worktree")
        .ino();
    f.repo.remove(&first).expect("remove");
    assert!(!f.repo.worktree_path(&first).exists());
    assert_eq!(f.repo.spare_count(), 1);
    assert!(f
        .git()
        .find_branch("catalyst/cat-1", git2::BranchType::Local)
        .is_err());
    assert_eq!(
        f.repo.list().expect("list"),
        Vec::<BeadId>::new(),
        "a spare is no bead"
    );
    // main moves on after the spare was kept: the next bead starts at the new tip.
    write(&f.ws.join("b.txt"), "b\n");
    let main = commit_everything(&f.ws, "b on main");

    let next = bead("cat-2");
    let wt = f.repo.create(&next, "main").expect("create from the spare");
    assert!(wt.fresh);
    assert_eq!(
        fs::metadata(&wt.path).expect("worktree").ino(),
        folder,
        "the same folder"
    );
    assert_eq!(f.repo.spare_count(), 0);
    assert_eq!(wt.head.as_str(), main.to_string());
    assert_eq!(f.repo.head(&next).expect("head").as_str(), main.to_string());
    assert_eq!(read(&wt.path.join("b.txt")), "b\n");
    assert_eq!(read(&wt.path.join("a.txt")), "a\n");
    assert!(
        !wt.path.join("notes.txt").exists(),
        "untracked files are deleted"
    );
    assert!(
        !wt.path.join("target").exists(),
        "ignored files are deleted"
    );
    assert!(tracked_changes(&wt.path).is_empty());
    assert!(!f.repo.changed_since(&next, &wt.head).expect("status"));
    let record = f
        .git()
        .find_worktree("cat-2")
        .expect("git knows the worktree");
    assert!(record.validate().is_ok());
    // It works as any bead's worktree: a commit lands on the bead's branch.
    write(&wt.path.join("c.txt"), "c\n");
    let commit = f.commit(&next, "c");
    assert_eq!(f.tip("catalyst/cat-2"), commit.oid().expect("oid"));
    assert_eq!(tip(&f.ws, "main"), main, "main did not move");
}

#[test]
fn without_room_a_removed_worktree_is_deleted() {
    let (f, first) = merged_bead(0);
    f.repo.remove(&first).expect("remove");
    assert_eq!(f.repo.spare_count(), 0);
    let left: Vec<_> = fs::read_dir(f.ws.join(".catalyst/worktrees"))
        .expect("worktrees folder")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_locked_worktree_is_neither_kept_nor_touched() {
    let (f, first) = merged_bead(1);
    let path = f.repo.worktree_path(&first);
    f.git()
        .find_worktree("cat-1")
        .expect("worktree")
        .lock(Some("a person is looking"))
        .expect("lock");
    let _ = f.repo.remove(&first);
    assert_eq!(f.repo.spare_count(), 0);
    assert_eq!(read(&path.join("notes.txt")), "untracked\n");
}

#[test]
fn a_damaged_spare_is_deleted_when_the_repository_opens_and_creation_goes_on() {
    let (f, first) = merged_bead(1);
    let spare = removed_into_a_spare(&f, &first);
    let record =
        f.ws.join(".git/worktrees")
            .join(spare.file_name().expect("name"));
    // As a crash between the two renames would leave it: the record points elsewhere.
    fs::write(record.join("gitdir"), "/nowhere/.git\n").expect("damage");
    let repo = Repo::open(&f.ws, &f.ws.join(".catalyst/worktrees"))
        .expect("open")
        .with_spares(1);
    assert_eq!(repo.spare_count(), 0);
    assert!(!spare.exists() && !record.exists(), "both halves are gone");
    let wt = repo.create(&bead("cat-2"), "main").expect("create");
    assert_eq!(read(&wt.path.join("a.txt")), "a\n");
}

#[test]
fn spares_are_found_again_when_the_repository_opens() {
    let (f, first) = merged_bead(2);
    f.repo.remove(&first).expect("remove");
    let repo = Repo::open(&f.ws, &f.ws.join(".catalyst/worktrees"))
        .expect("open")
        .with_spares(2);
    assert_eq!(repo.spare_count(), 1);
    let wt = repo.create(&bead("cat-2"), "main").expect("create");
    assert_eq!(repo.spare_count(), 0);
    assert_eq!(read(&wt.path.join("a.txt")), "a\n");
}

#[test]
fn a_spare_kept_clean_at_the_targets_tip_is_taken_as_it_is_without_a_checkout() {
    let (f, first) = merged_bead(1);
    let spare = removed_into_a_spare(&f, &first);
    // Nothing but catalyst touches a spare; a change made behind its back shows whether the
    // next bead's worktree was checked out again.
    write(&spare.join("a.txt"), "touched while spare\n");
    // main has not moved: the spare was kept clean at the commit the next bead starts from.
    let next = bead("cat-2");
    let wt = f.repo.create(&next, "main").expect("create from the spare");
    assert_eq!(f.repo.spare_count(), 0);
    assert_eq!(
        read(&wt.path.join("a.txt")),
        "touched while spare\n",
        "no checkout"
    );
    assert!(!wt.path.join("notes.txt").exists() && !wt.path.join("target").exists());
    write(&wt.path.join("a.txt"), "a\n");
    assert!(tracked_changes(&wt.path).is_empty());
    assert!(!f.repo.changed_since(&next, &wt.head).expect("status"));
    write(&wt.path.join("c.txt"), "c\n");
    let commit = f.commit(&next, "c");
    assert_eq!(f.tip("catalyst/cat-2"), commit.oid().expect("oid"));
}

#[test]
fn a_spare_kept_with_a_changed_file_is_checked_out_again_when_taken() {
    let (f, first) = merged_bead(1);
    let old = f.repo.worktree_path(&first);
    // Tracked and changed, never committed: the spare is not clean at its commit.
    write(&old.join("a.txt"), "changed after the merge\n");
    f.repo.remove(&first).expect("remove");
    assert_eq!(f.repo.spare_count(), 1);
    let next = bead("cat-2");
    let wt = f.repo.create(&next, "main").expect("create from the spare");
    assert_eq!(read(&wt.path.join("a.txt")), "a\n", "checked out again");
    assert!(tracked_changes(&wt.path).is_empty());
}

#[test]
fn a_kept_spares_index_holds_its_files_as_they_are_so_the_next_status_reads_none() {
    let (f, first) = merged_bead(1);
    // A file whose stat data no longer matches the index, as a file checked out in the same
    // tick of the clock as the index was written looks: every status reads it again.
    let file = f.repo.worktree_path(&first).join("a.txt");
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_modified(hour_ago))
        .expect("set the file's time");
    let spare = removed_into_a_spare(&f, &first);
    let name = spare.file_name().expect("a name");
    let record = f.ws.join(".git/worktrees").join(name);
    let index = git2::Index::open(&record.join("index")).expect("the spare's index");
    let entry = index
        .get_path(Path::new("a.txt"), 0)
        .expect("a.txt in the index");
    let on_disk = fs::metadata(spare.join("a.txt")).expect("a.txt in the spare");
    assert_eq!(
        i64::from(entry.mtime.seconds()),
        on_disk.mtime(),
        "the index was written back with the file's stat data"
    );
}
