//! Beads through a daemon whose agents run on `catalyst worker` processes: a real JetStream
//! cluster, a bare repository as the shared remote, real worker processes.

use catalyst_testkit::nats::{shared_remote, start_worker, NatsCluster, WorkerProcess};
use catalyst_testkit::poll::eventually;
use catalyst_testkit::{bead_with_id, most_at_once, TestDaemon, Workspace};

/// For each of `beads`: the implementer writes `<bead>.txt`; the review rejects until the
/// fix has written `<bead>-fixed.txt`. Decided by each bead's own files, not by a count, so it
/// holds whichever worker runs it, and no bead's change is already on `main`.
pub fn fix_loop(beads: &[&str]) -> String {
    let mut scenario = String::new();
    for b in beads {
        scenario.push_str(&format!(
            r#"
[[rule]]
role = "implement"
bead = "{b}"
responses = [{{ write = {{ "{b}.txt" = "work of {b}\n" }}, summary = "did the work" }}]

[[rule]]
role = "review"
bead = "{b}"
unless_exists = "{b}-fixed.txt"
responses = [{{ verdict = "REJECTED", summary = "not yet", instructions = ["add {b}-fixed.txt"] }}]

[[rule]]
role = "fix"
bead = "{b}"
responses = [{{ write = {{ "{b}-fixed.txt" = "fixed\n" }}, summary = "fixed" }}]
"#
        ));
    }
    scenario.push_str("\n[[rule]]\nrole = \"review\"\nresponses = [{ verdict = \"APPROVED\", summary = \"good\" }]\n");
    scenario
}

/// A workspace whose `n` beads `<prefix>1`…`<prefix>n` go through their fix loops
/// (`max_agents = 3`), on `cluster` with the lease `lease_secs`: the workspace, the shared
/// remote, and the beads to submit.
pub fn fix_loop_workspace(
    cluster: &NatsCluster,
    prefix: &str,
    n: usize,
    lease_secs: u64,
) -> (
    Workspace,
    std::path::PathBuf,
    Vec<catalyst::protocol::BeadInput>,
) {
    let names: Vec<String> = (1..=n).map(|i| format!("{prefix}{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let ws = Workspace::new(&fix_loop(&names), "max_agents = 3\n");
    let remote = shared_remote(&ws);
    ws.append_config(&cluster.config_for(&remote, lease_secs));
    let inputs = names.iter().map(|n| bead_with_id(n)).collect();
    (ws, remote, inputs)
}

/// Two workers, `w1` and `w2`, of two slots each.
pub fn two_workers(
    ws: &Workspace,
    cluster: &NatsCluster,
    remote: &std::path::Path,
) -> [WorkerProcess; 2] {
    [
        start_worker(ws, cluster, remote, "w1", 2),
        start_worker(ws, cluster, remote, "w2", 2),
    ]
}

/// Waits until every bead of `ids` is closed; on a timeout, fails with what each one is
/// doing, the last events and the workers' logs.
pub async fn all_closed(daemon: &TestDaemon, ids: &[String], workers: &[WorkerProcess]) {
    let closed = catalyst_testkit::poll::poll(std::time::Duration::from_millis(200), async || {
        for id in ids {
            if daemon.show(id).await["status"] != "closed" {
                return None;
            }
        }
        Some(())
    })
    .await;
    if closed.is_none() {
        let mut why = String::new();
        for id in ids {
            let shown = daemon.show(id).await;
            why.push_str(&format!("{id}: {} {}\n", shown["status"], shown["current"]));
        }
        let events = daemon.events().await;
        for e in events.iter().rev().take(40).rev() {
            why.push_str(&format!("{e}\n"));
        }
        for w in workers {
            why.push_str(&format!("--- {}\n{}\n", w.name, w.log_text()));
        }
        panic!("not every bead closed:\n{why}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bead_runs_its_agents_on_a_worker_through_its_fix_loop_and_merges() {
    let Some(cluster) = NatsCluster::start(3).await else {
        return;
    };
    let ws = Workspace::new(&fix_loop(&["cat-one"]), "");
    let remote = shared_remote(&ws);
    ws.append_config(&format!(
        "{}keep_refs_secs = 0\n",
        cluster.config_for(&remote, 10)
    ));
    ws.append_config("[merge]\nauthor = \"Ada Lovelace <ada@example.com>\"\n");
    let daemon: TestDaemon = ws.start().await;
    let w1 = start_worker(&ws, &cluster, &remote, "w1", 2);
    let id = daemon.submit(bead_with_id("cat-one")).await;
    daemon.wait_status(&id, "closed").await;
    // Its attempts' refs were in the shared remote; once its worktree went here, they go
    // there too (`keep_refs_secs = 0`).
    daemon
        .wait_for("its worktree removed", |e| e["type"] == "worktree.removed")
        .await;
    catalyst_testkit::poll::eventually("the bead's refs gone from the shared remote", async || {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&remote)
            .args(["for-each-ref", "--format=%(refname)", "refs/catalyst/"])
            .output()
            .expect("git for-each-ref");
        let refs = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && !refs.contains("cat-one")).then_some(())
    })
    .await;
    assert_eq!(
        daemon.roles_of(&id),
        ["refine", "implement", "review", "fix", "review"]
    );
    assert_eq!(
        daemon.file_on_main("cat-one.txt").as_deref(),
        Some("work of cat-one\n")
    );
    assert_eq!(
        daemon.file_on_main("cat-one-fixed.txt").as_deref(),
        Some("fixed\n")
    );
    // The commits made on the worker name whom the daemon's own name: `[merge] author`, and
    // the daemon's committer, whatever the worker's machine would have said.
    let log = std::process::Command::new("git")
        .arg("-C")
        .arg(&ws.repo)
        .args([
            "log",
            "--format=%an <%ae> / %cn <%ce> %s",
            "main",
            "^main~1",
        ])
        .output()
        .expect("git log");
    let log = String::from_utf8_lossy(&log.stdout).into_owned();
    let agents: Vec<&str> = log.lines().filter(|l| !l.contains("Merge")).collect();
    assert!(!agents.is_empty(), "{log}");
    for line in &agents {
        assert!(
            line.starts_with("Ada Lovelace <ada@example.com> / catalyst <catalyst@localhost>"),
            "{log}"
        );
    }
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
    // Each agent attempt was taken by the worker, as the events say; gates and the merge
    // stayed here.
    let started: Vec<String> = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "step.started")
        .map(|e| {
            format!(
                "{} {}",
                e["step"].as_str().unwrap_or(""),
                e["worker"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(started.len(), 5, "{started:?}");
    assert!(started.iter().all(|s| s.ends_with(" w1")), "{started:?}");
    // The worker says what it runs every two seconds: idle once its next word comes.
    let out = catalyst_testkit::poll::eventually("ctl workers to show w1 idle", async || {
        let (code, out, err) = daemon.ctl(&["workers"], "").await;
        assert_eq!(code, 0, "{err}");
        (out.contains("w1") && out.contains("0/2")).then_some(out)
    })
    .await;
    assert!(out.contains("all"), "every model: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_beads_spread_over_two_workers_each_attempt_once_within_the_caps() {
    let Some(cluster) = NatsCluster::start(3).await else {
        return;
    };
    let (ws, remote, inputs) = fix_loop_workspace(&cluster, "cat-n", 20, 30);
    ws.append_config("[models.sonnet]\nmax_concurrent = 1\n");
    // The first review of `cat-n1` holds its agent until `go`, so that another agent runs
    // beside it whatever the machine's speed.
    let go = ws.stub_file("go");
    let names: Vec<String> = (1..=20).map(|i| format!("cat-n{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    ws.set_scenario(&format!(
        "[[rule]]\nrole = \"review\"\nbead = \"cat-n1\"\nunless_exists = \"cat-n1-fixed.txt\"\n\
         responses = [{{ wait_for = {:?}, verdict = \"REJECTED\", summary = \"not yet\", \
         instructions = [\"add cat-n1-fixed.txt\"] }}]\n{}",
        go.display().to_string(),
        fix_loop(&names)
    ));
    let daemon = ws.start().await;
    let workers = two_workers(&ws, &cluster, &remote);
    let ids = daemon.submit_all(inputs).await;
    let held = eventually("cat-n1's first review to start", async || {
        daemon
            .invocations()
            .into_iter()
            .find(|i| i.bead.as_deref() == Some("cat-n1") && i.role() == "review")
    })
    .await;
    eventually("another agent to start while it waits", async || {
        daemon
            .invocations()
            .iter()
            .any(|i| i.started_ms > held.started_ms)
            .then_some(())
    })
    .await;
    std::fs::write(&go, "").expect("go");
    all_closed(&daemon, &ids, &workers).await;
    let invocations = daemon.invocations();
    // Every bead went through its fix loop, each attempt run once.
    for id in &ids {
        assert_eq!(
            daemon.roles_of(id),
            ["refine", "implement", "review", "fix", "review"],
            "{id}"
        );
    }
    // Over both workers.
    for w in &workers {
        let theirs = ws.root.join(&w.name).display().to_string();
        let n = invocations
            .iter()
            .filter(|i| i.cwd.starts_with(&theirs))
            .count();
        assert!(n > 0, "{} ran nothing:\n{}", w.name, w.log_text());
    }
    // Never more agents at once than `max_agents`, nor more of `sonnet` than its own cap,
    // whichever machine ran them.
    let most = most_at_once(invocations.iter());
    assert!(most <= 3, "{most} agents ran at once");
    let sonnet = most_at_once(
        invocations
            .iter()
            .filter(|i| i.model.as_deref() == Some("sonnet")),
    );
    assert_eq!(sonnet, 1, "`sonnet` ran {sonnet} at once; its cap is 1");
    assert!(most >= 2, "the workers ran agents side by side ({most})");
    // Each attempt says which worker took it, even one whose end came before its lease.
    let started = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "step.started" && e["worker"].as_str().is_some())
        .count();
    assert_eq!(started, invocations.len(), "one step.started per attempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_no_worker_took_is_waiting_for_one_and_status_warns() {
    let Some(cluster) = NatsCluster::start(1).await else {
        return;
    };
    let ws = Workspace::new(&fix_loop(&["cat-wait"]), "");
    let remote = shared_remote(&ws);
    ws.append_config(&cluster.config_for(&remote, 10));
    let (daemon, base, token) = catalyst_testkit::web::dashboard_on(ws.clone()).await;
    let id = daemon.submit(bead_with_id("cat-wait")).await;
    daemon
        .wait_for("the refiner handed to the workers", |e| {
            e["type"] == "step.dispatched" && e["step"] == "cat-wait.refine"
        })
        .await;
    let (code, text, err) = daemon.ctl(&["status"], "").await;
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("cat-wait.refine attempt 1 (sonnet) waiting for a worker for")
            && text.contains("running 0  waiting for a worker 1"),
        "{text}"
    );
    assert!(
        text.contains("cluster: no worker has said it is there"),
        "{text}"
    );
    let (_, json, _) = daemon.ctl(&["status", "--json"], "").await;
    let status: serde_json::Value = serde_json::from_str(&json).expect("status JSON");
    assert_eq!(status["running"][0]["waiting_for_worker"], true, "{status}");
    assert!(status["cluster_warning"].is_string(), "{status}");
    // The board says the same: the attempt waits, and the warning is in "Needs a person".
    let page = board(&base, &token).await;
    assert!(page.contains("(waiting for a worker)"), "{page}");
    assert!(
        page.contains("cluster: no worker has said it is there"),
        "{page}"
    );

    // A worker comes: it takes the attempt, and the warning goes.
    let w1 = start_worker(&ws, &cluster, &remote, "w1", 2);
    all_closed(
        &daemon,
        std::slice::from_ref(&id),
        std::slice::from_ref(&w1),
    )
    .await;
    let (_, json, _) = daemon.ctl(&["status", "--json"], "").await;
    let status: serde_json::Value = serde_json::from_str(&json).expect("status JSON");
    assert!(status.get("cluster_warning").is_none(), "{status}");
    let page = board(&base, &token).await;
    assert!(!page.contains("cluster: no worker"), "{page}");
}

/// The web board's page, fetched with the dashboard's token.
async fn board(base: &str, token: &str) -> String {
    let answer = reqwest::Client::new()
        .get(format!("{base}/"))
        .bearer_auth(token)
        .timeout(catalyst_testkit::TIMEOUT)
        .send()
        .await
        .expect("the board answers");
    assert!(answer.status().is_success(), "{}", answer.status());
    answer.text().await.expect("the board's page")
}
