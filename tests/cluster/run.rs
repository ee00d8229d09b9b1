//! Beads through a daemon whose agents run on `catalyst worker` processes: a real JetStream
//! cluster, a bare repository as the shared remote, real worker processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use catalyst_testkit::nats::NatsCluster;
use catalyst_testkit::{bead, TestDaemon, Workspace};

/// Every bead's review rejects until the fix's file is there: decided by the worktree, not by
/// a count, so it holds whichever worker runs it.
pub const FIX_LOOP: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "work.txt" = "work\n" }, summary = "did the work" }]

[[rule]]
role = "review"
unless_exists = "fixed.txt"
responses = [{ verdict = "REJECTED", summary = "not yet", instructions = ["add fixed.txt"] }]

[[rule]]
role = "review"
responses = [{ verdict = "APPROVED", summary = "good" }]

[[rule]]
role = "fix"
responses = [{ write = { "fixed.txt" = "fixed\n" }, summary = "fixed" }]
"#;

/// A bare repository holding the workspace's `main`: the remote the daemon and its workers
/// share.
pub fn shared_remote(ws: &Workspace) -> PathBuf {
    let remote = ws.root.join("remote.git");
    let run = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&ws.root, &["init", "--quiet", "--bare", "remote.git"]);
    run(
        &ws.repo,
        &["push", "--quiet", remote.to_str().expect("utf-8"), "main"],
    );
    remote
}

/// The `[cluster]` config for `cluster` and `remote`, with a short lease.
pub fn cluster_config(cluster: &NatsCluster, remote: &Path, lease_secs: u64) -> String {
    let urls: Vec<String> = cluster.urls().iter().map(|u| format!("{u:?}")).collect();
    format!(
        "[cluster]\nnats = [{}]\nremote = {:?}\nlease_secs = {lease_secs}\n",
        urls.join(", "),
        remote.display().to_string()
    )
}

/// A `catalyst worker` process (killed when dropped), logging to `<root>/<name>.log`.
pub struct WorkerProcess {
    pub name: String,
    pub child: std::process::Child,
    pub log: PathBuf,
}

impl WorkerProcess {
    /// What the worker logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_worker(
    ws: &Workspace,
    cluster: &NatsCluster,
    remote: &Path,
    name: &str,
    slots: usize,
) -> WorkerProcess {
    let log = ws.root.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).expect("worker log");
    let child = Command::new(catalyst_testkit::catalyst_bin())
        .arg("worker")
        .arg("--nats")
        .arg(cluster.urls().join(","))
        .arg("--repo")
        .arg(remote)
        .arg("--workdir")
        .arg(ws.root.join(name))
        .args(["--slots", &slots.to_string(), "--name", name])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("start catalyst worker");
    WorkerProcess {
        name: name.to_owned(),
        child,
        log,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bead_runs_its_agents_on_a_worker_through_its_fix_loop_and_merges() {
    let Some(cluster) = NatsCluster::start(3).await else {
        return;
    };
    let ws = Workspace::new(FIX_LOOP, "");
    let remote = shared_remote(&ws);
    std::fs::OpenOptions::new()
        .append(true)
        .open(ws.paths.config())
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(cluster_config(&cluster, &remote, 10).as_bytes())
        })
        .expect("the cluster config");
    let daemon: TestDaemon = ws.start().await;
    let w1 = start_worker(&ws, &cluster, &remote, "w1", 2);
    let id = daemon.submit(bead("Through a worker")).await;
    daemon.wait_status(&id, "closed").await;
    assert_eq!(
        daemon.roles_of(&id),
        ["refine", "implement", "review", "fix", "review"]
    );
    assert_eq!(daemon.file_on_main("work.txt").as_deref(), Some("work\n"));
    assert_eq!(daemon.file_on_main("fixed.txt").as_deref(), Some("fixed\n"));
    // The agents ran in the worker's clone, not the daemon's worktrees.
    let cwds: Vec<String> = daemon
        .invocations()
        .into_iter()
        .filter(|i| i.bead.as_deref() == Some(id.as_str()))
        .map(|i| i.cwd)
        .collect();
    let theirs = ws.root.join(&w1.name).display().to_string();
    assert!(
        cwds.iter().all(|c| c.starts_with(&theirs)),
        "{cwds:?}\n{}",
        w1.log_text()
    );
}
