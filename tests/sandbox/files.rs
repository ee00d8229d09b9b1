//! Files outside the attempt: the user's home and `/etc`, the main checkout, the shared
//! repository's configuration and hooks, the daemon's journal and other beads' worktrees.

use std::path::PathBuf;

use catalyst_testkit::{bead, TestDaemon};

use crate::{attempt, MAIN_CHECKOUT, STATE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_home_folder_and_etc_cannot_be_written() {
    if crate::skip() {
        return;
    }
    let name = format!("catalyst-escape-{}", std::process::id());
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(&name);
    let etc = PathBuf::from("/etc").join(&name);
    let (_daemon, shell) = attempt(&[
        &format!("touch \"$HOME/{name}\""),
        &format!("touch /etc/{name}"),
    ])
    .await;
    let escaped = [home.exists(), etc.exists()];
    for path in [&home, &etc] {
        let _ = std::fs::remove_file(path);
    }
    assert_eq!(escaped, [false, false], "{shell:?}");
    assert!(shell.iter().all(|s| s.exit_code != Some(0)), "{shell:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_checkout_keeps_uncommitted_work_and_its_branch() {
    if crate::skip() {
        return;
    }
    let commands = [
        format!("echo planted > {MAIN_CHECKOUT}/planted.txt"),
        format!("git -C {MAIN_CHECKOUT} reset --hard"),
        format!("git -C {MAIN_CHECKOUT} commit --allow-empty -m sneaked"),
        // The agent's own commit, then a merge of it into the main checkout's branch.
        format!(
            "git commit -q --allow-empty -m unreviewed; git -C {MAIN_CHECKOUT} merge -q --no-edit \"$(git rev-parse HEAD)\""
        ),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let daemon = TestDaemon::start(&crate::implement_runs(&commands), "").await;
    // A person's edit, not committed: `reset --hard` would throw it away.
    let readme = daemon.repo.join("README.md");
    std::fs::write(&readme, "# a person's unsaved edit\n").expect("edit README.md");
    let main_before = daemon.main_log();
    let id = daemon.submit(bead("Try to get out")).await;
    let implement = format!("{id}.implement");
    daemon
        .wait_for("the implement attempt to end", |e| {
            e["type"] == "step.finished" && e["step"] == implement.as_str()
        })
        .await;
    let shell = crate::implement_shell(&daemon, commands.len());
    assert_eq!(
        std::fs::read_to_string(&readme).expect("README.md"),
        "# a person's unsaved edit\n",
        "{shell:?}"
    );
    // The write may land in the sandbox's own empty folders (a checkout under `/tmp` is
    // covered by the private `/tmp`) or fail; either way the real checkout never sees it.
    assert!(!daemon.repo.join("planted.txt").exists(), "{shell:?}");
    assert_eq!(daemon.main_log(), main_before, "{shell:?}");
    assert!(
        shell[1..].iter().all(|s| s.exit_code != Some(0)),
        "{shell:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_repository_config_and_hooks_cannot_be_changed() {
    if crate::skip() {
        return;
    }
    let (daemon, shell) = attempt(&[
        "git config core.hooksPath /tmp/planted",
        "git config filter.planted.clean 'touch /tmp/planted'",
        &format!("echo 'touch planted' > {MAIN_CHECKOUT}/.git/hooks/pre-commit"),
        &format!("echo '[core]' >> {MAIN_CHECKOUT}/.git/config"),
    ])
    .await;
    let git = daemon.repo.join(".git");
    let config = std::fs::read_to_string(git.join("config")).expect("the repository's config");
    assert!(
        !config.contains("planted") && !config.contains("hooksPath"),
        "{config}"
    );
    assert!(!git.join("hooks/pre-commit").exists(), "{shell:?}");
    assert!(shell.iter().all(|s| s.exit_code != Some(0)), "{shell:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_and_other_beads_are_out_of_sight() {
    if crate::skip() {
        return;
    }
    // A first bead runs and closes; the second one's agent looks for the first one's run
    // folders and the journal, and truncates the journal.
    let first_rule = "[[rule]]\nrole = \"implement\"\nbead = \"cat-first\"\nresponses = [{ write = { \"a.txt\" = \"a\\n\" } }]\n";
    let scenario = format!(
        "{first_rule}\n{}",
        crate::implement_runs(&[
            &format!("cat {STATE}/journal.jsonl"),
            &format!("ls -R {STATE}/runs {STATE}/worktrees"),
            &format!("cat {STATE}/runs/cat-first/implement/1/prompt.md"),
            &format!(": > {STATE}/journal.jsonl"),
        ])
    );
    let daemon = catalyst_testkit::TestDaemon::start(&scenario, "").await;
    let first = catalyst::protocol::BeadInput {
        id: Some("cat-first".into()),
        ..catalyst_testkit::bead("First")
    };
    daemon.submit(first).await;
    daemon.wait_status("cat-first", "closed").await;
    let second = daemon.submit(catalyst_testkit::bead("Second")).await;
    daemon.wait_status(&second, "closed").await;
    let shell = daemon
        .invocations()
        .into_iter()
        .find(|i| i.bead.as_deref() == Some(second.as_str()) && i.role() == "implement")
        .expect("the second bead's agent ran")
        .shell;
    for s in &shell {
        assert!(!s.output.contains("bead.created"), "{s:?}");
    }
    assert!(!shell[1].output.contains("cat-first"), "{shell:?}");
    assert_ne!(shell[0].exit_code, Some(0), "{shell:?}");
    assert_ne!(shell[2].exit_code, Some(0), "{shell:?}");
    // The journal is whole, and the daemon goes on.
    let journal = daemon.journal();
    assert!(journal
        .iter()
        .any(|e| e["type"] == "bead.created" && e["bead"]["id"] == "cat-first"));
    daemon.call(catalyst::protocol::Method::Status).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_made_inside_the_worktree_reaches_the_branch() {
    if crate::skip() {
        return;
    }
    let (daemon, shell) = attempt(&[
        "echo inside > inside.txt && git add inside.txt && git -c user.name=a -c user.email=a@b commit -q -m 'made inside the sandbox'",
    ])
    .await;
    assert_eq!(shell[0].exit_code, Some(0), "{shell:?}");
    let log = daemon.main_log();
    assert!(
        log.iter().any(|l| l.contains("made inside the sandbox")),
        "{log:?}"
    );
    assert_eq!(
        daemon.file_on_main("inside.txt").as_deref(),
        Some("inside\n")
    );
}

/// The hooks decide from the attempt's policy in its run folder, which the agent can write
/// to: the policy itself is mounted read-only, so the agent cannot grant itself more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attempts_policy_cannot_be_changed_by_its_agent() {
    if crate::skip() {
        return;
    }
    let policy = r#""$(dirname "$CATALYST_CONTEXT")/policy.json""#;
    let (_daemon, shell) = attempt(&[
        &format!("echo '{{}}' > {policy}"),
        &format!("rm -f {policy}"),
        &format!("cat {policy}"),
    ])
    .await;
    assert_ne!(shell[0].exit_code, Some(0), "written: {shell:?}");
    assert_ne!(shell[1].exit_code, Some(0), "removed: {shell:?}");
    assert!(
        shell[2].output.contains("\"access\": \"worktree\""),
        "still the daemon's: {shell:?}"
    );
}
