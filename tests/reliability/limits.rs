//! Rate limits, budgets and sizes: an agent that reports a usage limit costs the
//! step no attempt and pauses its model, longer each time it happens again; a bead whose
//! agents report spending more than the budget is blocked with a comment saying so; a file
//! larger than `max_file_bytes` is not committed, with a comment saying so.

use catalyst::protocol::{Method, ShowParams};
use chrono::DateTime;
use serde_json::Value;

use catalyst_testkit::{bead_with_id, Workspace};

fn at(e: &Value, key: &str) -> DateTime<chrono::FixedOffset> {
    DateTime::parse_from_rfc3339(e[key].as_str().expect("a timestamp")).expect("RFC 3339")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_usage_limit_requeues_without_an_attempt_and_pauses_the_model_with_backoff() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { usage_limit = true },
  { usage_limit = true },
  { write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" },
]
"#;
    let ws = Workspace::new(scenario, "pause_secs = 1\nmax_pause_secs = 8");
    let daemon = ws.spawn();
    daemon.submit(bead_with_id("cat-limit")).await;
    daemon.wait_status("cat-limit", "closed").await;
    let events = daemon.events().await;

    let pauses: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "model.paused")
        .collect();
    assert_eq!(pauses.len(), 2, "{pauses:?}");
    let lengths: Vec<i64> = pauses
        .iter()
        .map(|p| (at(p, "until") - at(p, "ts")).num_milliseconds())
        .collect();
    assert!(
        (900..=1100).contains(&lengths[0]) && (1900..=2100).contains(&lengths[1]),
        "the pause doubles: {lengths:?} ms"
    );
    for p in &pauses {
        assert_eq!(p["model"], "sonnet");
        assert!(p["reason"]
            .as_str()
            .is_some_and(|r| r.contains("usage limit")));
    }
    let retries: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "step.retry" && e["step"] == "cat-limit.implement")
        .collect();
    assert_eq!(retries.len(), 2);
    assert!(retries.iter().all(|r| r["counted"] == false), "{retries:?}");
    // The model is given nothing until its pause ends, then it resumes.
    let dispatches: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "step.dispatched" && e["step"] == "cat-limit.implement")
        .collect();
    assert_eq!(dispatches.len(), 3);
    for (pause, next) in pauses.iter().zip(&dispatches[1..]) {
        assert!(
            at(next, "ts") >= at(pause, "until"),
            "dispatched at {} before the pause ended at {}",
            next["ts"],
            pause["until"]
        );
    }
    let last = events
        .iter()
        .rfind(|e| e["type"] == "step.result" && e["step"] == "cat-limit.implement")
        .expect("implement's result");
    assert_eq!(last["counters"]["failed_attempts"], 0, "{last}");
    let shown = daemon
        .call(Method::Show(ShowParams {
            id: "cat-limit".into(),
            runs: false,
        }))
        .await;
    let comments = shown["bead"]["comments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !comments
            .iter()
            .any(|c| c["text"].as_str().is_some_and(|t| t.contains("RETRY"))),
        "a usage limit is not a failed attempt: {comments:?}"
    );
    println!(
        "usage limit: the model was paused for {lengths:?} ms, then resumed; no attempt counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bead_over_its_budget_is_blocked_with_a_comment() {
    let scenario = r#"
[[rule]]
role = "refine"
responses = [{ cost_usd = 0.6, summary = "planned" }]

[[rule]]
role = "implement"
responses = [{ cost_usd = 0.6, write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]
"#;
    let ws = Workspace::new(scenario, "budget_usd = 1.0");
    let daemon = ws.spawn();
    daemon.submit(bead_with_id("cat-spend")).await;
    daemon.wait_status("cat-spend", "blocked").await;
    let shown = daemon
        .call(Method::Show(ShowParams {
            id: "cat-spend".into(),
            runs: false,
        }))
        .await;
    let spent = shown["bead"]["metadata"]["catalyst_cost_usd"]
        .as_f64()
        .expect("the cost is recorded");
    assert!((spent - 1.2).abs() < 1e-9, "{spent}");
    let comments: Vec<String> = shown["bead"]["comments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str().map(str::to_owned))
        .collect();
    assert!(
        comments
            .iter()
            .any(|c| c.starts_with("[daemon] BLOCKED") && c.contains("over budget")),
        "{comments:?}"
    );
    let roles: Vec<String> = ws
        .invocations()
        .into_iter()
        .map(|i| i.role().to_owned())
        .collect();
    assert_eq!(
        roles,
        ["refine", "implement"],
        "nothing runs past the budget"
    );
}

/// An agent that leaves a gibibyte file: the daemon does not commit it (nor read it), says so
/// in a comment on the bead, and stays small.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gibibyte_file_left_by_an_agent_is_not_committed_and_keeps_the_daemon_small() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ tools = [{ name = "Bash", input = { command = "truncate -s 1G big.bin" } }], summary = "wrote a big file" }]
"#;
    let ws = Workspace::new(scenario, "");
    let daemon = ws.spawn();
    let id = daemon.submit(bead_with_id("cat-big")).await;
    let comment = catalyst_testkit::poll::eventually("the daemon's comment", async || {
        daemon
            .comments(&id)
            .await
            .into_iter()
            .find(|c| c.contains("big.bin"))
    })
    .await;
    assert!(
        comment.contains("`big.bin` (1073741824 bytes)") && comment.contains("max_file_bytes"),
        "{comment}"
    );
    let peak = catalyst_testkit::procfs::vm_kb(daemon.pid(), "VmHWM").expect("VmHWM");
    println!(
        "daemon peak RSS with a 1 GiB file left in the worktree: {} MB",
        peak / 1024
    );
    assert!(peak <= 64 * 1024, "peak RSS {peak} kB");
    assert_eq!(
        catalyst_testkit::repo::file_on_main(&ws.repo, "big.bin"),
        None
    );
}
