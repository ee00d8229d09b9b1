//! Signals to `catalystd`: SIGTERM stops it gracefully and a restart resumes; SIGHUP reloads
//! config, prompts and formulas, refusing broken files. Also the log formats.

use nix::sys::signal::Signal;

use catalyst_testkit::scenario::IMPLEMENT_REPORTS_BLOCKED;
use catalyst_testkit::{bead, TestDaemon, Workspace};

/// An implement step that waits for `go` in the stub's folder (released by the test) the first time and
/// runs straight through any later time.
fn waiting_implement(ws: &Workspace) -> std::path::PathBuf {
    let go = ws.stub_file("go");
    let scenario = format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [\n  {{ wait_for = {:?}, write = {{ \"a.txt\" = \"a\\n\" }}, summary = \"wrote a\" }},\n  {{ write = {{ \"a.txt\" = \"a again\\n\" }}, summary = \"wrote a again\" }},\n]\n",
        go.display().to_string()
    );
    std::fs::write(&ws.scenario, scenario).expect("scenario");
    go
}

async fn implement_running(daemon: &TestDaemon, id: &str) {
    let step = format!("{id}.implement");
    daemon
        .wait_for("the implement step to start", |e| {
            e["type"] == "step.dispatched" && e["step"] == step.as_str()
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_running_agent_finish_and_a_restart_completes_the_bead() {
    let ws = Workspace::new("", "shutdown_grace_secs = 30");
    let go = waiting_implement(&ws);
    let mut daemon = ws.spawn();
    let id = daemon.submit(bead("Write a")).await;
    implement_running(&daemon, &id).await;

    daemon.signal(Signal::SIGTERM);
    daemon.wait_log("stopping: no new steps").await;
    std::fs::write(&go, "").expect("release the agent");
    let status = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{}", daemon.stderr());

    let journal = ws.journal();
    let last = journal.last().expect("events");
    assert_eq!(last["type"], "daemon.stopping", "{last}");
    let step = format!("{id}.implement");
    assert!(
        journal
            .iter()
            .any(|e| e["type"] == "step.result" && e["step"] == step.as_str()),
        "the attempt that finished in the grace period counts"
    );
    assert!(
        !journal.iter().any(|e| e["type"] == "step.interrupted"),
        "nothing was interrupted"
    );

    let mut daemon = ws.spawn();
    daemon.wait_status(&id, "closed").await;
    assert_eq!(ws.roles_of(&id), ["refine", "implement", "review"]);
    daemon.signal(Signal::SIGINT);
    assert!(daemon.wait_exit().await.success(), "SIGINT stops it too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_an_agent_that_outlasts_the_grace_period() {
    let ws = Workspace::new("", "shutdown_grace_secs = 1");
    waiting_implement(&ws);
    let mut daemon = ws.spawn();
    let id = daemon.submit(bead("Write a")).await;
    implement_running(&daemon, &id).await;

    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{}", daemon.stderr());
    let journal = ws.journal();
    assert!(
        journal.iter().any(|e| e["type"] == "step.interrupted"),
        "the stopped attempt is recorded as interrupted"
    );
    assert_eq!(journal.last().expect("events")["type"], "daemon.stopping");

    let daemon = ws.spawn();
    daemon.wait_status(&id, "closed").await;
    assert_eq!(
        ws.roles_of(&id),
        ["refine", "implement", "implement", "review"],
        "the interrupted step ran again after the restart"
    );
}

const ONE_STEP: &str = r#"
formula = "feature"
description = "One step instead of four."
version = 1
type = "workflow"
merge = false

[[steps]]
id = "only"
title = "Do it: {{title}}"
role = "task"
"#;

/// The step names of the molecule poured for `id`.
async fn poured_steps(daemon: &TestDaemon, id: &str) -> Vec<String> {
    let poured = daemon
        .wait_for("the molecule", |e| {
            e["type"] == "molecule.poured" && e["bead"] == id
        })
        .await;
    poured["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            s["metadata"]["catalyst"]["step"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_a_changed_formula_and_refuses_a_broken_one() {
    let ws = Workspace::new("", "");
    let mut daemon = ws.spawn();
    let first = daemon.submit(bead("Before")).await;
    assert_eq!(
        poured_steps(&daemon, &first).await,
        ["refine", "implement", "review", "merge"]
    );

    // The folder did not exist when the daemon started, so only SIGHUP makes it look.
    let dir = ws.paths.state.join("formulas");
    std::fs::create_dir_all(&dir).expect("formulas dir");
    std::fs::write(dir.join("feature.formula.toml"), ONE_STEP).expect("formula");
    daemon.signal(Signal::SIGHUP);
    daemon
        .wait_log("reloaded config, prompts and formulas")
        .await;
    let second = daemon.submit(bead("After")).await;
    assert_eq!(poured_steps(&daemon, &second).await, ["only"]);

    std::fs::write(dir.join("broken.formula.toml"), "formula = \n").expect("broken");
    daemon.signal(Signal::SIGHUP);
    let refused = daemon.wait_log("reload refused").await;
    assert!(refused.contains("broken.formula.toml"), "{refused}");
    let third = daemon.submit(bead("Still")).await;
    assert_eq!(
        poured_steps(&daemon, &third).await,
        ["only"],
        "the old formulas stay in force"
    );
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_json_or_plain_text_without_colour() {
    let ws = Workspace::new("", "");
    let mut json = ws.catalystd().args(&["--log-format", "json"]).spawn();
    json.client().await;
    json.wait_log("serving").await;
    json.signal(Signal::SIGTERM);
    assert!(json.wait_exit().await.success());
    for line in json.stderr().lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{line}");
    }

    let mut text = ws
        .catalystd()
        .env("RUST_LOG", "debug")
        .args(&["--log-level", "warn"])
        .spawn();
    text.client().await;
    text.wait_log("serving").await;
    text.signal(Signal::SIGTERM);
    assert!(text.wait_exit().await.success());
    let log = text.stderr();
    assert!(!log.contains('\u{1b}'), "no colour when stderr is a file");
    assert!(
        log.contains(" INFO "),
        "RUST_LOG=debug wins over --log-level warn: {log}"
    );
}

/// Regression: `ctl shutdown` stopped the control server but not the engine, so the daemon
/// never exited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_shutdown_stops_the_daemon() {
    let ws = Workspace::new("", "");
    let mut daemon = ws.spawn();
    daemon.client().await;
    let (code, out, err) = catalyst_testkit::cli::catalyst(&ws.repo, &["ctl", "shutdown"]);
    assert_eq!(code, 0, "{out}{err}");
    let status = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{}", daemon.stderr());
    assert_eq!(
        ws.journal().last().expect("events")["type"],
        "daemon.stopping"
    );
}

/// During the grace period after `ctl shutdown`, `ctl status` said the daemon was not running
/// while it and its agent were alive: the control server had stopped at the request. It now
/// answers `stopping` until the daemon exits, and `ctl shutdown --wait` returns only then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_daemon_says_so_and_shutdown_wait_returns_once_it_is_gone() {
    let ws = Workspace::new("", "shutdown_grace_secs = 60");
    let go = waiting_implement(&ws);
    let mut daemon = ws.spawn();
    let id = daemon.submit(bead("Write a")).await;
    implement_running(&daemon, &id).await;
    let (code, out, err) = catalyst_testkit::cli::catalyst(&ws.repo, &["ctl", "shutdown"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, status, err) = catalyst_testkit::cli::catalyst(&ws.repo, &["ctl", "status"]);
    assert_eq!(code, 0, "{status}{err}");
    assert!(status.contains("STOPPING"), "{status}");
    let json = daemon.call(catalyst::protocol::Method::Status).await;
    assert_eq!(json["stopping"], true, "{json}");

    use tokio::io::AsyncBufReadExt;
    let mut waiting = tokio::process::Command::new(catalyst_testkit::catalyst_bin())
        .args(["ctl", "shutdown", "--wait"])
        .current_dir(&ws.repo)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("ctl shutdown --wait");
    let mut lines = tokio::io::BufReader::new(waiting.stdout.take().expect("stdout")).lines();
    let first = lines.next_line().await.expect("read").expect("a line");
    assert!(first.starts_with("stopping"), "{first}");
    std::fs::write(&go, "").expect("release the agent");
    let exited = daemon.wait_exit().await;
    assert!(exited.success(), "{exited}\n{}", daemon.stderr());
    let last = tokio::time::timeout(catalyst_testkit::TIMEOUT, lines.next_line())
        .await
        .expect("ctl shutdown --wait returns")
        .expect("read");
    assert_eq!(last.as_deref(), Some("stopped"));
    let code = waiting.wait().await.expect("ctl exits");
    assert!(code.success(), "{code}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_tells_the_story_of_a_blocked_bead_one_line_per_decision() {
    let ws = Workspace::new(IMPLEMENT_REPORTS_BLOCKED, "");
    let mut daemon = ws.spawn();
    let id = daemon.submit(bead("Impossible")).await;
    daemon.wait_status(&id, "blocked").await;
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit().await.success());
    let log = daemon.stderr();
    let lines = |needle: &str| {
        log.lines()
            .filter(|l| l.contains(" INFO ") && l.contains(&id) && l.contains(needle))
            .count()
    };
    assert_eq!(lines("dispatched"), 2, "refine and implement:\n{log}");
    assert!(
        log.contains("target branch `main` at ") && log.contains("agent CLI `"),
        "catalystd says at start that the target branch exists and the agent CLI runs:\n{log}"
    );
    assert_eq!(lines("step done"), 1, "refine's result:\n{log}");
    assert_eq!(
        lines("blocked: implement: the agent reported BLOCKED: the spec contradicts itself"),
        1,
        "the block and why, at info:\n{log}"
    );
}

/// `ctl events -f` ended when the daemon restarted, so a script following the events missed
/// what came after. It now takes the stream up again once the daemon is back, from the event
/// after the last it printed: every event once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_follow_survives_a_restart_and_resumes_from_its_seq() {
    use tokio::io::AsyncBufReadExt;
    let ws = Workspace::new(catalyst_testkit::scenario::IMPLEMENT_WRITES_HELLO, "");
    let mut daemon = ws.spawn();
    let first = daemon.submit(bead("Before the restart")).await;
    daemon.wait_status(&first, "closed").await;
    let mut follower = tokio::process::Command::new(catalyst_testkit::catalyst_bin())
        .args(["ctl", "--json", "events", "-f"])
        .current_dir(&ws.repo)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("ctl events -f");
    let mut lines = tokio::io::BufReader::new(follower.stdout.take().expect("stdout")).lines();
    let mut seqs = Vec::new();
    let mut created = Vec::new();
    let mut read_until = async |want: &str, seqs: &mut Vec<u64>, created: &mut Vec<String>| {
        tokio::time::timeout(catalyst_testkit::TIMEOUT, async {
            while let Some(line) = lines.next_line().await.expect("read") {
                let event: serde_json::Value = serde_json::from_str(&line).expect("json");
                seqs.push(event["seq"].as_u64().expect("seq"));
                if event["type"] == "bead.created" {
                    created.push(event["bead"]["id"].as_str().expect("id").to_owned());
                }
                if created.iter().any(|c| c == want) {
                    return;
                }
            }
            panic!("the stream ended");
        })
        .await
        .expect("the bead's creation is followed");
    };
    read_until(&first, &mut seqs, &mut created).await;

    assert!(daemon.terminate().await.success());
    let daemon = ws.spawn();
    let second = daemon.submit(bead("After the restart")).await;
    read_until(&second, &mut seqs, &mut created).await;
    assert_eq!(created, [first, second]);
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(seqs, sorted, "every event once, in order");
    assert!(
        follower.try_wait().expect("status").is_none(),
        "still following"
    );
}
