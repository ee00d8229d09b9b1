//! The shared git store: an agent once wrote `.git/objects` and its worktree's admin folder.
//! It deleted the objects `main` needs, replaced a loose object so that `main:README.md` read
//! differently everywhere with no commit, rewrote its admin folder's `gitdir` so that the
//! daemon's next commit took the person's files from the main checkout, and replaced the
//! worktree's `.git` file by a folder whose config named an fsmonitor, which a person's
//! `git status` in the kept worktree ran. Now the store, the admin folder and the `.git` file
//! are read-only to attempts; only commits the daemon imports and checks reach the store.

use std::process::Command;

use catalyst_testkit::TestDaemon;

fn git(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .output()
        .expect("git");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_change_the_store_its_admin_folder_or_the_worktrees_git_file() {
    if crate::skip() {
        return;
    }
    let fsmonitor = std::env::temp_dir().join(format!("catalyst-fsmonitor-{}", std::process::id()));
    let common = "\"$(git rev-parse --git-common-dir)\"";
    let commands = [
        // The objects `main` needs, gone.
        format!("find {common}/objects -type f -delete"),
        // `main:README.md` replaced by another object's bytes.
        format!(
            "p=$(git rev-parse main:README.md); o=$(echo other | git hash-object -w --stdin); cp {common}/objects/$(echo $o | cut -c1-2)/$(echo $o | cut -c3-) {common}/objects/$(echo $p | cut -c1-2)/$(echo $p | cut -c3-)"
        ),
        // The admin folder's `gitdir` pointed at the main checkout.
        "echo \"$(cd ../../.. && pwd)/.git\" > \"$(git rev-parse --git-dir)/gitdir\"".to_owned(),
        // The `.git` file replaced by a folder with an fsmonitor.
        format!(
            "rm -f .git && mkdir .git && printf '[core]\\n\\tfsmonitor = touch {}\\n' > .git/config",
            fsmonitor.display()
        ),
        format!(
            "printf '[core]\\n\\tfsmonitor = touch {}\\n' >> \"$(git rev-parse --git-dir)/config.worktree\"",
            fsmonitor.display()
        ),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let daemon = TestDaemon::start(&crate::implement_runs(&commands), "").await;
    // A person's file in the main checkout, never committed.
    std::fs::write(daemon.repo.join("person-notes.txt"), "mine\n").expect("write");
    let readme = git(&daemon.repo, &["show", "main:README.md"]).1;
    daemon.submit_gated_waiting("cat-kept", "true").await;

    // The bead's worktree is kept while it waits for a person, who looks at it.
    let worktree = daemon.repo.join(".catalyst/worktrees/cat-kept");
    let dot_git = std::fs::read_to_string(worktree.join(".git")).expect("the .git file");
    assert!(dot_git.starts_with("gitdir: "), "{dot_git}");
    let (ok, status) = git(&worktree, &["status", "--short"]);
    assert!(ok, "{status}");
    let ran = fsmonitor.exists();
    let _ = std::fs::remove_file(&fsmonitor);
    assert!(!ran, "a person's git status ran the agent's fsmonitor");

    let (ok, fsck) = git(&daemon.repo, &["fsck", "--full"]);
    assert!(ok, "{fsck}");
    assert_eq!(git(&daemon.repo, &["show", "main:README.md"]).1, readme);
    let (_, tree) = git(&worktree, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(!tree.contains("person-notes.txt"), "{tree}");
    let admin = daemon.repo.join(".git/worktrees/cat-kept");
    let gitdir = std::fs::read_to_string(admin.join("gitdir")).expect("gitdir");
    assert_eq!(gitdir.trim(), worktree.join(".git").display().to_string());
    assert!(!admin.join("config.worktree").exists());
}
