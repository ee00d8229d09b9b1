//! What a cluster survives: a worker killed mid-attempt, a NATS node killed mid-run, a
//! worker cut off past its lease that comes back, the daemon killed mid-run.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use catalyst_testkit::nats::{
    shared_remote, start_worker, start_worker_with_path, NatsCluster, WorkerProcess,
};
use catalyst_testkit::{bead_with_id, Workspace};

use super::run::{all_closed, fix_loop, fix_loop_workspace, two_workers};

/// The lease of these tests: a lost worker is noticed within seconds.
const LEASE: u64 = 3;

/// `fix_loop` for `beads`, but the implementer of `slow` first waits for the stub file `go`.
fn with_slow_implement(ws: &Workspace, beads: &[&str], slow: &str) -> String {
    let go = ws.stub_file("go");
    let wait = format!(
        "[[rule]]\nrole = \"implement\"\nbead = \"{slow}\"\nresponses = [{{ wait_for = {:?}, write = {{ \"{slow}.txt\" = \"work of {slow}\\n\" }}, summary = \"did the work\" }}]\n",
        go.display().to_string()
    );
    format!("{wait}{}", fix_loop(beads))
}

/// A daemon on `cluster` whose bead `bead`'s implementer waits for the stub file `go`, and
/// the worker `w1` (one slot) once it has taken that attempt: the workspace, the shared
/// remote, the daemon and the worker.
async fn slow_attempt_on_w1(
    cluster: &NatsCluster,
    bead: &str,
) -> (
    Workspace,
    std::path::PathBuf,
    catalyst_testkit::TestDaemon,
    WorkerProcess,
) {
    let ws = Workspace::new("", "");
    ws.set_scenario(&with_slow_implement(&ws, &[bead], bead));
    let remote = shared_remote(&ws);
    ws.append_config(&cluster.config_for(&remote, LEASE));
    let daemon = ws.start().await;
    let w1 = start_worker(&ws, cluster, &remote, "w1", 1);
    daemon.submit(bead_with_id(bead)).await;
    let step = format!("{bead}.implement");
    daemon
        .wait_for("w1 taking the implement attempt", |e| {
            e["type"] == "step.started" && e["step"] == step.as_str() && e["worker"] == "w1"
        })
        .await;
    (ws, remote, daemon, w1)
}

fn signal(worker: &WorkerProcess, signal: Signal) {
    kill(Pid::from_raw(worker.child.id() as i32), signal).expect("signal the worker");
}

/// How many merges the events record, of `bead` or of any bead.
fn merges(events: &[serde_json::Value], bead: Option<&str>) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == "merge.completed")
        .filter(|e| bead.is_none_or(|b| e["bead"] == b))
        .count()
}

/// The events of `kind` for `step`.
fn of(events: &[serde_json::Value], kind: &str, step: &str) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind && e["step"] == step)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_attempt_loses_it_to_the_other_not_counted() {
    let Some(cluster) = NatsCluster::start(3).await else {
        return;
    };
    let (ws, remote, daemon, w1) = slow_attempt_on_w1(&cluster, "cat-s").await;
    signal(&w1, Signal::SIGKILL);
    let w2 = start_worker(&ws, &cluster, &remote, "w2", 1);
    std::fs::write(ws.stub_file("go"), "").expect("release the agents");
    all_closed(&daemon, &["cat-s".into()], &[w1, w2]).await;

    let events = daemon.events().await;
    let interrupted = of(&events, "step.interrupted", "cat-s.implement");
    assert_eq!(interrupted.len(), 1, "{interrupted:?}");
    assert_eq!(interrupted[0]["attempt"], 1);
    let started = of(&events, "step.started", "cat-s.implement");
    assert_eq!(
        started.last().map(|e| e["worker"].clone()),
        Some("w2".into()),
        "{started:?}"
    );
    let results = of(&events, "step.result", "cat-s.implement");
    assert_eq!(results.len(), 1, "one result, from w2: {results:?}");
    assert_eq!(
        results[0]["counters"]["failed_attempts"], 0,
        "the lost attempt is not counted"
    );
    let merged = merges(&events, None);
    assert_eq!(merged, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_node_killed_mid_run_loses_nothing() {
    let Some(mut cluster) = NatsCluster::start(3).await else {
        return;
    };
    let (ws, remote, inputs) = fix_loop_workspace(&cluster, "cat-k", 8, 10);
    let daemon = ws.start().await;
    let workers = two_workers(&ws, &cluster, &remote);
    let ids = daemon.submit_all(inputs).await;
    daemon
        .wait_for("the first merge", |e| e["type"] == "merge.completed")
        .await;
    cluster.kill(0);
    all_closed(&daemon, &ids, &workers).await;
    let events = daemon.events().await;
    for id in &ids {
        assert_eq!(merges(&events, Some(id)), 1, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_past_its_lease_is_superseded_and_its_late_end_ignored() {
    let Some(cluster) = NatsCluster::start(3).await else {
        return;
    };
    let (ws, remote, daemon, w1) = slow_attempt_on_w1(&cluster, "cat-c").await;
    // Cut off: it renews nothing and hears nothing, its agent waits on.
    signal(&w1, Signal::SIGSTOP);
    daemon
        .wait_for("the lost lease", |e| {
            e["type"] == "step.interrupted" && e["step"] == "cat-c.implement"
        })
        .await;
    let w2 = start_worker(&ws, &cluster, &remote, "w2", 1);
    std::fs::write(ws.stub_file("go"), "").expect("release the agents");
    daemon
        .wait_for("w2's merge", |e| {
            e["type"] == "merge.completed" && e["bead"] == "cat-c"
        })
        .await;
    // Back: w1's agent ends, and its end comes too late.
    signal(&w1, Signal::SIGCONT);
    catalyst_testkit::poll::eventually("w1 to send its late end", async || {
        w1.log_text()
            .contains("sent the attempt's end")
            .then_some(())
    })
    .await;
    // The daemon has taken every end once the ends' work queue is empty.
    let client = async_nats::connect(cluster.url(1)).await.expect("connect");
    let js = async_nats::jetstream::new(client);
    catalyst_testkit::poll::eventually("the daemon to take the late end", async || {
        let mut stream = js.get_stream("catalyst-ends").await.ok()?;
        let info = stream.info().await.ok()?;
        (info.state.messages == 0).then_some(())
    })
    .await;
    let events = daemon.events().await;
    let finished = of(&events, "step.finished", "cat-c.implement");
    assert_eq!(finished.len(), 1, "only w2's end applied: {finished:?}");
    assert_eq!(finished[0]["attempt"], 2);
    let merged = merges(&events, None);
    assert_eq!(merged, 1, "one merge");
    drop(w2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_killed_mid_run_applies_no_attempt_twice_after_its_restart() {
    let Some(cluster) = NatsCluster::start(3).await else {
        return;
    };
    let (ws, remote, inputs) = fix_loop_workspace(&cluster, "cat-d", 6, LEASE);
    let mut daemon = ws.spawn();
    let workers = two_workers(&ws, &cluster, &remote);
    let ids = daemon.submit_all(inputs).await;
    daemon
        .wait_for("the first fix", |e| e["type"] == "fix.created")
        .await;
    daemon.kill().await;
    daemon.restart();
    all_closed(&daemon, &ids, &workers).await;
    let events = daemon.events().await;
    let mut ends = std::collections::HashMap::new();
    for e in events.iter().filter(|e| e["type"] == "step.finished") {
        let key = format!("{} #{}", e["step"], e["attempt"]);
        *ends.entry(key).or_insert(0) += 1;
    }
    assert!(
        ends.values().all(|n| *n == 1),
        "an attempt applied twice: {ends:?}"
    );
    for id in &ids {
        assert_eq!(merges(&events, Some(id)), 1, "{id}");
        assert_eq!(
            ws.file_on_main(&format!("{id}-fixed.txt")).as_deref(),
            Some("fixed\n"),
            "the same outcome as without the kill"
        );
    }
}

/// Two beads on a daemon with the worker `w1` that `broken` starts (and `breaks` once it is
/// there) and a healthy `w2` started once `w1` has handed an attempt back: the attempts `w1`
/// cannot prepare run again, not counted, on `w2`; the daemon never pauses; `w1` says why it
/// takes no orders (its reason contains `said`), and the bead says which worker handed it back.
async fn a_broken_worker_hands_attempts_back(
    broken: impl FnOnce(&Workspace, &NatsCluster, &std::path::Path) -> WorkerProcess,
    breaks: impl FnOnce(&Workspace),
    said: &str,
) {
    let Some(cluster) = NatsCluster::start(1).await else {
        return;
    };
    let implement = "[[rule]]\nrole = \"implement\"\nresponses = [{ write = { \"work.txt\" = \"work\\n\" }, summary = \"did the work\" }]\n";
    let ws = Workspace::new(implement, "max_agents = 2\n");
    let remote = shared_remote(&ws);
    ws.append_config(&cluster.config_for(&remote, LEASE));
    let daemon = ws.start().await;
    let w1 = broken(&ws, &cluster, &remote);
    let w1_as_listed = async || {
        let answer = daemon.call(catalyst::protocol::Method::Workers).await;
        let workers: catalyst::protocol::WorkersAnswer =
            serde_json::from_value(answer).expect("a workers answer");
        workers.workers.into_iter().find(|w| w.name == "w1")
    };
    catalyst_testkit::poll::eventually("w1 to say it is there", async || {
        w1_as_listed().await.map(drop)
    })
    .await;
    breaks(&ws);

    let ids: Vec<String> = vec!["cat-p1".into(), "cat-p2".into()];
    for id in &ids {
        daemon.submit(bead_with_id(id)).await;
    }
    daemon
        .wait_for("w1 handing an attempt back", |e| {
            e["type"] == "step.interrupted"
        })
        .await;
    let trouble =
        catalyst_testkit::poll::eventually("w1 to say why it takes no orders", async || {
            w1_as_listed().await?.trouble
        })
        .await;
    assert!(trouble.contains(said), "{trouble}");
    let healthy = start_worker(&ws, &cluster, &remote, "w2", 1);
    all_closed(&daemon, &ids, &[w1, healthy]).await;

    let events = daemon.events().await;
    let paused: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "dispatch.paused" || e["type"] == "model.paused")
        .collect();
    assert!(paused.is_empty(), "the daemon went on: {paused:?}");
    // w1 waits 5 s after its first failure, then 10 s: it hands back an attempt or two, not
    // one each time the daemon hands it out again.
    let handed_back = events
        .iter()
        .filter(|e| e["type"] == "step.interrupted")
        .count();
    assert!(
        (1..=3).contains(&handed_back),
        "w1 held back between attempts: {handed_back} handed back"
    );
    for id in &ids {
        assert_eq!(merges(&events, Some(id)), 1, "{id}");
    }
    assert!(
        events
            .iter()
            .filter(|e| e["type"] == "step.result")
            .all(|e| e["counters"]["failed_attempts"] == 0),
        "the attempts handed back are not counted"
    );
    assert!(
        events.iter().any(|e| e["type"] == "bead.comment"
            && e["comment"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("worker `w1` could not prepare") && t.contains(said))),
        "the bead says which worker handed it back and why"
    );
}

/// A worker whose worktrees' folder became a file cannot make an attempt's worktree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_prepare_attempts_hands_them_back_without_pausing_the_daemon() {
    a_broken_worker_hands_attempts_back(
        |ws, cluster, remote| start_worker(ws, cluster, remote, "w1", 1),
        |ws| {
            let trees = ws.root.join("w1/repo/.catalyst/worktrees");
            std::fs::remove_dir_all(&trees).expect("remove w1's worktrees");
            std::fs::write(&trees, "").expect("a file in their place");
        },
        "worktree",
    )
    .await;
}

/// A worker on a machine without `bwrap` (the default sandbox's program) runs none of the
/// daemon's attempts, unconfined or otherwise: it hands them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_bwrap_hands_attempts_back_without_pausing_the_daemon() {
    a_broken_worker_hands_attempts_back(
        |ws, cluster, remote| {
            // A PATH with git (the worker clones and fetches with it), and no bwrap.
            let bin = ws.root.join("w1-bin");
            std::fs::create_dir_all(&bin).expect("a bin folder");
            let git = catalyst::daemon::fsutil::find_on_path("git").expect("git is installed");
            std::os::unix::fs::symlink(git, bin.join("git")).expect("link git");
            start_worker_with_path(ws, cluster, remote, ("w1", 1), Some(&bin))
        },
        |_| {},
        "`bwrap` is not installed on this worker",
    )
    .await;
}
