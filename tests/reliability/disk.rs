//! A full disk: the workspace lives on a small tmpfs that the test fills.
//! While the journal cannot be written the daemon dispatches nothing, says why in `status` and
//! in its log, loses nothing it acknowledged, and carries on by itself once there is room.
//! A run folder that cannot be made pauses dispatching the same way, without spending the
//! step's attempts.
//!
//! Mounting a tmpfs needs root (or CAP_SYS_ADMIN); elsewhere the test says so and skips.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use catalyst::protocol::{BeadInput, ListParams, Method, PauseParams};
use serde_json::Value;

use catalyst_testkit::poll::eventually;
use catalyst_testkit::{bead_with_id, Workspace};

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(path: &Path, size: &str) -> Option<Tmpfs> {
        if !nix::unistd::getuid().is_root() {
            return None;
        }
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status()
            .ok()?;
        status.success().then(|| Tmpfs {
            path: path.to_owned(),
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Fills the file system holding `path` until a write fails with ENOSPC.
fn fill(path: &Path) -> u64 {
    let mut file = std::fs::File::create(path).expect("ballast");
    let chunk = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    for size in [chunk.len(), 4096, 1] {
        loop {
            match file.write(&chunk[..size]) {
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
    }
    written
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_dispatching_loses_nothing_and_resumes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let files = dir.path().canonicalize().expect("canonical");
    if std::env::var_os("CATALYST_KEEP_TEST_DIRS").is_some() {
        eprintln!("keeping {}", dir.keep().display());
    }
    let mnt = files.join("mnt");
    std::fs::create_dir(&mnt).expect("mount point");
    let Some(tmpfs) = Tmpfs::mount(&mnt, "24m") else {
        println!("skipped: mounting a tmpfs needs root (or CAP_SYS_ADMIN)");
        return;
    };
    let ws = Workspace::builder()
        .config("max_agents = 2")
        .repo_in(&tmpfs.path)
        .build();
    // The release file in the stub's folder, which the sandboxed agent sees.
    let release = ws.stub_file("release-a");
    let scenario = format!(
        r#"
[[rule]]
role = "implement"
bead = "cat-a"
responses = [{{ wait_for = "{}", write = {{ "a.txt" = "a\n" }}, summary = "wrote a.txt" }}]

[[rule]]
role = "implement"
responses = [{{ tools = [{{ name = "Bash", input = {{ command = "echo $CATALYST_BEAD > $CATALYST_BEAD.txt" }} }}], summary = "wrote a file" }}]

[[rule]]
role = "merge"
responses = [{{ tools = [{{ name = "Bash", input = {{ command = "git -c user.name=stub -c user.email=stub@localhost merge --no-edit main" }} }}], summary = "merged main" }}]
"#,
        release.display()
    );
    ws.set_scenario(&scenario);
    let mut daemon = ws.spawn();
    let mut acknowledged = vec!["cat-a".to_owned()];
    daemon.submit(bead_with_id("cat-a")).await;
    daemon
        .wait_for("cat-a's implementer to start", |e| {
            e["type"] == "step.dispatched" && e["step"] == "cat-a.implement"
        })
        .await;
    // Two more beads, acknowledged while dispatching is paused.
    daemon
        .call(Method::Pause(PauseParams { model: None }))
        .await;
    for id in ["cat-b", "cat-c"] {
        daemon.submit(bead_with_id(id)).await;
        acknowledged.push(id.to_owned());
    }

    let ballast = tmpfs.path.join("ballast");
    let filled = fill(&ballast);
    // The journal's last page may still take a few small events: submit until one fails.
    let mut client = daemon.client().await;
    let mut refused = None;
    for n in 0..1000 {
        let id = format!("cat-x{n}");
        let answer = client
            .call(&Method::Submit(vec![BeadInput {
                id: Some(id.clone()),
                title: "while the disk is full".into(),
                ..Default::default()
            }]))
            .await;
        match answer {
            Ok(_) => acknowledged.push(id),
            Err(e) => {
                refused = Some((id, e.to_string()));
                break;
            }
        }
    }
    let (refused_id, error) = refused.expect("a submit fails once the disk is full");
    // Cutting the refused write back freed a page: take it too.
    let filled = filled + fill(&tmpfs.path.join("ballast-2"));
    assert!(error.contains("cannot write the journal"), "{error}");
    let status = daemon.call(Method::Status).await;
    let storage = status["storage_error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(storage.contains("No space left"), "{status}");

    // Dispatching stays stopped, even when asked to resume, and cat-a's agent, released now,
    // fails on the full disk without its end being lost.
    daemon
        .call(Method::Resume(PauseParams { model: None }))
        .await;
    std::fs::write(&release, "go").expect("release cat-a");
    let status = eventually("cat-a's attempt to end", async || {
        let status = daemon.call(Method::Status).await;
        status["running"]
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(status)
    })
    .await;
    assert!(status["storage_error"].is_string(), "{status}");
    let ran: Vec<String> = ws
        .invocations()
        .into_iter()
        .filter(|i| i.bead.as_deref() != Some("cat-a"))
        .filter_map(|i| i.bead)
        .collect();
    assert!(
        ran.is_empty(),
        "nothing was dispatched while the disk was full: {ran:?}"
    );
    let log = std::fs::read_to_string(&ws.daemon_log).expect("daemon log");
    assert!(log.contains("cannot write the journal"), "the log says why");

    // Room again: the daemon notices by itself and everything acknowledged completes.
    std::fs::remove_file(&ballast).expect("remove the ballast");
    std::fs::remove_file(tmpfs.path.join("ballast-2")).expect("remove the ballast");
    let started = Instant::now();
    for id in &acknowledged {
        daemon.wait_status(id, "closed").await;
    }
    let resumed = started.elapsed();
    let status = daemon.call(Method::Status).await;
    assert!(status["storage_error"].is_null(), "{status}");
    let events = daemon.events().await;
    let retried: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "step.finished" && e["step"] == "cat-a.implement")
        .collect();
    assert_eq!(
        retried.first().map(|e| e["attempt"].clone()),
        Some(1.into()),
        "the attempt that ended on the full disk is recorded: {retried:?}"
    );

    // And after a restart the journal replays cleanly with everything acknowledged in it.
    assert!(daemon.terminate().await.success());
    let mut daemon = ws.spawn();
    let listed = daemon
        .call(Method::List(ListParams {
            status: None,
            steps: false,
            ..Default::default()
        }))
        .await;
    let ids: Vec<&str> = listed["beads"]
        .as_array()
        .expect("beads")
        .iter()
        .filter_map(|b| b["id"].as_str())
        .collect();
    for id in &acknowledged {
        assert!(
            ids.contains(&id.as_str()),
            "{id} was acknowledged and is kept"
        );
    }
    assert!(
        !ids.contains(&refused_id.as_str()),
        "the refused submit left nothing"
    );
    assert!(daemon.terminate().await.success());
    println!(
        "full disk: filled {filled} bytes; {} submits acknowledged, the next refused ({error}); resumed and finished {} beads {:.1} s after space came back",
        acknowledged.len(),
        acknowledged.len(),
        resumed.as_secs_f64()
    );
}

/// The daemon's own preparation failing (its run folder cannot be written: `runs/` is a
/// dangling symbolic link) is not the agent's failure: no attempt is spent, dispatching pauses
/// with the error and the path, and the step runs once the cause is gone and a person resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_folder_that_cannot_be_made_pauses_dispatching_and_spends_no_attempt() {
    let ws = Workspace::new(catalyst_testkit::scenario::EACH_BEAD_WRITES_ITS_FILE, "");
    let runs = ws.paths.runs();
    let _ = std::fs::remove_dir_all(&runs);
    std::os::unix::fs::symlink(ws.repo.join("nowhere/runs"), &runs).expect("dangling link");
    let daemon = ws.spawn();
    let mut events = daemon.subscribe(0).await;
    let id = daemon.submit(bead_with_id("cat-runs")).await;
    let paused = events
        .wait_for("dispatching paused", |e| e["type"] == "dispatch.paused")
        .await;
    assert_eq!(paused["cause"], "preparation", "{paused}");
    let reason = paused["reason"].as_str().expect("reason");
    assert!(
        reason.contains("runs"),
        "the reason names the path: {reason}"
    );
    let status = daemon.call(Method::Status).await;
    assert!(
        status.to_string().contains("runs/cat-runs"),
        "ctl status shows the path: {status}"
    );

    std::fs::remove_file(&runs).expect("remove the link");
    daemon
        .call(Method::Resume(PauseParams { model: None }))
        .await;
    daemon.wait_status(&id, "closed").await;
    // No attempt was charged for the daemon's own failure.
    let spent: Vec<_> = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "step.retry" && e["counted"] == true)
        .collect();
    assert!(spent.is_empty(), "{spent:?}");
    assert!(daemon.stderr().contains("runs"), "the log names the path");
}
