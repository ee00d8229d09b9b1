//! A workspace deep in the file system: an attempt's sockets (its hooks, its network) must not
//! depend on how long the run folder's path is. A Unix socket address holds about 108 bytes;
//! the run folder of a workspace 70 characters deep passed that, and every agent step was then
//! paused for "preparation" forever.

use catalyst_testkit::{bead, Workspace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bead_runs_to_merge_from_a_workspace_whose_path_is_200_characters_long() {
    if crate::skip() {
        return;
    }
    let parent = tempfile::tempdir().expect("temp dir");
    let mut deep = parent.path().canonicalize().expect("canonical temp dir");
    // Each folder adds its name and a `/`; the last one leaves exactly 200.
    while deep.join("repo").as_os_str().len() < 200 {
        let left = 200 - deep.join("repo").as_os_str().len();
        deep.push("d".repeat((left - 1).clamp(1, 40)));
    }
    std::fs::create_dir_all(&deep).expect("deep folder");
    let ws = Workspace::builder()
        .scenario(&crate::implement_runs(&["true"]))
        .repo_in(&deep)
        .build();
    assert_eq!(ws.repo.as_os_str().len(), 200, "{}", ws.repo.display());
    let daemon = ws.start().await;
    let id = daemon.submit(bead("From far down")).await;
    daemon.wait_status(&id, "closed").await;
    assert_eq!(daemon.file_on_main("done.txt").as_deref(), Some("done\n"));
    let events = daemon.events().await;
    assert!(
        !events.iter().any(|e| e["type"] == "dispatch.paused"),
        "{events:?}"
    );
}
