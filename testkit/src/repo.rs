//! What a test reads from a workspace's git repository: `main`'s history and files, and the
//! beads' branches.

use std::path::Path;

fn open(repo: &Path) -> git2::Repository {
    git2::Repository::open(repo).expect("open the test repository")
}

/// Commit messages on `main`, newest first.
pub fn main_log(repo: &Path) -> Vec<String> {
    let repo = open(repo);
    let mut walk = repo.revwalk().expect("revwalk");
    walk.push_ref("refs/heads/main").expect("main");
    walk.map(|oid| {
        let commit = repo.find_commit(oid.expect("oid")).expect("commit");
        commit.message().unwrap_or("").to_owned()
    })
    .collect()
}

/// The file `path` on `main`, if present.
pub fn file_on_main(repo: &Path, path: &str) -> Option<String> {
    let repo = open(repo);
    let tree = repo
        .revparse_single("refs/heads/main")
        .ok()?
        .peel_to_tree()
        .ok()?;
    let entry = tree.get_path(Path::new(path)).ok()?;
    let blob = repo.find_blob(entry.id()).ok()?;
    Some(String::from_utf8_lossy(blob.content()).into_owned())
}

/// Every file on `main` with its content, sorted by path.
pub fn files_on_main(repo: &Path) -> Vec<(String, String)> {
    let git = open(repo);
    let tree = git
        .revparse_single("refs/heads/main")
        .and_then(|o| o.peel_to_tree())
        .expect("main's tree");
    let mut files = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if let Ok(blob) = entry.to_object(&git).and_then(|o| o.peel_to_blob()) {
            let name = format!("{dir}{}", entry.name().unwrap_or(""));
            files.push((name, String::from_utf8_lossy(blob.content()).into_owned()));
        }
        git2::TreeWalkResult::Ok
    })
    .expect("walk main");
    files.sort();
    files
}

/// Whether the bead's branch `catalyst/<bead>` exists.
pub fn branch_exists(repo: &Path, bead: &str) -> bool {
    open(repo)
        .find_branch(&format!("catalyst/{bead}"), git2::BranchType::Local)
        .is_ok()
}

/// Writes `path` (relative to the checkout) and commits it on the checked-out branch, as a
/// person working in the main checkout would.
pub fn commit_file(repo: &Path, path: &str, text: &str, message: &str) {
    std::fs::write(repo.join(path), text).expect("write the file");
    let git = open(repo);
    let mut index = git.index().expect("index");
    index.add_path(Path::new(path)).expect("stage the file");
    index.write().expect("write the index");
    let tree = git
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let sig = git2::Signature::now("person", "person@example.com").expect("signature");
    let parent = git
        .head()
        .and_then(|h| h.peel_to_commit())
        .expect("a commit to build on");
    git.commit(Some("HEAD"), &sig, &sig, message, &tree, &[&parent])
        .expect("commit");
}

/// Makes branch `branch` at the checkout's HEAD plus one commit adding the top-level file
/// `path`, without touching the checkout: what a bead of an earlier store leaves behind.
pub fn branch_with_file(repo: &Path, branch: &str, path: &str, text: &str) {
    let git = open(repo);
    let head = git
        .head()
        .and_then(|h| h.peel_to_commit())
        .expect("a commit to build on");
    let blob = git.blob(text.as_bytes()).expect("blob");
    let mut tree = git
        .treebuilder(Some(&head.tree().expect("tree")))
        .expect("tree builder");
    tree.insert(path, blob, 0o100644).expect("insert");
    let tree = git.find_tree(tree.write().expect("tree")).expect("tree");
    let sig = git2::Signature::now("earlier", "earlier@example.com").expect("signature");
    git.commit(
        Some(&format!("refs/heads/{branch}")),
        &sig,
        &sig,
        "work of an earlier store",
        &tree,
        &[&head],
    )
    .expect("commit");
}

/// Deletes branch `branch`.
pub fn delete_branch(repo: &Path, branch: &str) {
    open(repo)
        .find_branch(branch, git2::BranchType::Local)
        .and_then(|mut b| b.delete())
        .expect("delete the branch");
}
