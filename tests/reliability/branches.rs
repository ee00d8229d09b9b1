//! A store started over (its state folder removed) numbers beads from the start again. The
//! daemon must never build on a branch it did not make in this store: a generated id skips
//! the ids that have a branch, and a bead named onto one is not dispatched until a person
//! moves the old branch away; the old bead's file never reaches the target.

use catalyst::protocol::{Method, PauseParams};
use catalyst_testkit::repo::{branch_with_file, delete_branch, file_on_main};
use catalyst_testkit::scenario::EACH_BEAD_WRITES_ITS_FILE;
use catalyst_testkit::{bead, bead_with_id, Workspace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_store_never_builds_on_an_earlier_stores_branch() {
    let ws = Workspace::new(EACH_BEAD_WRITES_ITS_FILE, "");
    // What a rejected bead `cat-1` of an earlier store left: its branch, with its work.
    branch_with_file(
        &ws.repo,
        "catalyst/cat-1",
        "old.txt",
        "the earlier bead's work\n",
    );
    let daemon = ws.spawn();

    // A generated id is not `cat-1`.
    let fresh = daemon.submit(bead("a new bead")).await;
    assert_ne!(fresh, "cat-1");
    daemon.wait_status(&fresh, "closed").await;
    assert_eq!(
        file_on_main(&ws.repo, &format!("{fresh}.txt")).as_deref(),
        Some(format!("{fresh}\n").as_str())
    );
    assert_eq!(file_on_main(&ws.repo, "old.txt"), None);

    // A bead named `cat-1` by its submitter: its step is not run on the old branch; dispatching
    // pauses, saying which branch and what to do.
    let mut events = daemon.subscribe(0).await;
    let named = daemon.submit(bead_with_id("cat-1")).await;
    let paused = events
        .wait_for("dispatching paused for the branch", |e| {
            e["type"] == "dispatch.paused"
        })
        .await;
    let reason = paused["reason"].as_str().expect("reason");
    assert!(
        reason.contains("branch `catalyst/cat-1` was not made by this store"),
        "{reason}"
    );
    let status = daemon.call(Method::Status).await;
    assert!(
        status.to_string().contains("was not made by this store"),
        "{status}"
    );
    assert_eq!(file_on_main(&ws.repo, "old.txt"), None);

    // The person moves the old branch away and resumes: the bead runs on a branch of its own.
    delete_branch(&ws.repo, "catalyst/cat-1");
    daemon
        .call(Method::Resume(PauseParams { model: None }))
        .await;
    daemon.wait_status(&named, "closed").await;
    assert_eq!(file_on_main(&ws.repo, "old.txt"), None);
    assert_eq!(
        file_on_main(&ws.repo, "cat-1.txt").as_deref(),
        Some("cat-1\n")
    );
}
