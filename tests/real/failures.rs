//! How a real agent's failures reach the router: an API error Claude Code reports with
//! `is_error: true` under `subtype: success`, `error_max_turns`, and a Codex `turn.failed`
//! are failures, retried and counted; limits are covered in `claude.rs`.

use serde_json::{json, Value};

use crate::anthropic::{MockAnthropic, Turn};
use crate::claude::{start, start_with_args, step_events};
use crate::isolate::{in_netns, runtime};
use crate::openai::{MockOpenAi, Turn as CodexTurn};
use catalyst_testkit::{bead, TestDaemon};

/// Waits for the first retry of `step` and returns the router's result of attempt 1.
async fn first_retry(daemon: &TestDaemon, id: &str, step: &str) -> (Value, Value) {
    let full = format!("{id}.{step}");
    let retry = daemon
        .wait_for("the first retry", |e| {
            e["type"] == "step.retry" && e["step"] == full
        })
        .await;
    let events = daemon.events().await;
    let result = step_events(&events, "step.result", &format!(".{step}"))
        .first()
        .map(|e| (*e).clone())
        .expect("attempt 1's result");
    (result, retry)
}

/// The last `result` event of a Claude run.
fn claude_result(daemon: &TestDaemon, id: &str, step: &str) -> Value {
    let stdout = std::fs::read_to_string(daemon.run_dir(id, step, 1).join("stdout"))
        .expect("the run's stdout");
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|e| e["type"] == "result")
        .expect("a result event")
}

#[test]
fn a_401_is_a_failure_that_is_retried() {
    if !in_netns("failures::a_401_is_a_failure_that_is_retried", "claude") {
        return;
    }
    runtime().block_on(async {
        let mock = MockAnthropic::start(vec![(
            "refine",
            vec![Turn::Error(401, "authentication_error".into())],
        )])
        .await;
        let daemon = start(&mock, "").await;
        let id = daemon.submit(bead("Unauthorised")).await;
        let (result, retry) = first_retry(&daemon, &id, "refine").await;
        assert_eq!(result["outcome"], "failed", "{result}");
        assert_eq!(retry["counted"], true, "{retry}");
        let reported = claude_result(&daemon, &id, "refine");
        assert_eq!(
            (reported["subtype"].as_str(), reported["is_error"].as_bool()),
            (Some("success"), Some(true)),
            "Claude Code flags the API error only by is_error: {reported}"
        );
        let events = daemon.events().await;
        assert!(
            !events.iter().any(|e| e["type"] == "model.paused"),
            "a 401 is not a limit"
        );
    });
}

#[test]
fn error_max_turns_is_a_failure_that_is_retried() {
    if !in_netns(
        "failures::error_max_turns_is_a_failure_that_is_retried",
        "claude",
    ) {
        return;
    }
    runtime().block_on(async {
        let mock = MockAnthropic::start(vec![(
            "refine",
            vec![
                Turn::tool("Read", json!({"file_path": "{worktree}/README.md"})),
                Turn::tool("Read", json!({"file_path": "{worktree}/README.md"})),
                Turn::done("Plan.", "planned", &[]),
            ],
        )])
        .await;
        let daemon = start_with_args(&mock, "max_turns = 1", &[]).await;
        let id = daemon.submit(bead("Too long")).await;
        let (result, retry) = first_retry(&daemon, &id, "refine").await;
        assert_eq!(result["outcome"], "failed", "{result}");
        assert_eq!(retry["counted"], true, "{retry}");
        let reported = claude_result(&daemon, &id, "refine");
        assert_eq!(reported["subtype"], "error_max_turns", "{reported}");
    });
}

#[test]
fn a_codex_turn_failed_is_a_failure_that_is_retried() {
    if !in_netns(
        "failures::a_codex_turn_failed_is_a_failure_that_is_retried",
        "codex",
    ) {
        return;
    }
    runtime().block_on(async {
        let mock = MockOpenAi::start(vec![(
            "refine",
            vec![CodexTurn::Fail("the mock model broke down".into())],
        )])
        .await;
        let daemon = {
            let mock = mock.clone();
            TestDaemon::start_with(move |root| crate::codex::config(root, &mock)).await
        };
        let id = daemon.submit(bead("Broken model")).await;
        let (result, retry) = first_retry(&daemon, &id, "refine").await;
        assert_eq!(result["outcome"], "failed", "{result}");
        assert_eq!(retry["counted"], true, "{retry}");
        let stdout = std::fs::read_to_string(daemon.run_dir(&id, "refine", 1).join("stdout"))
            .expect("the run's stdout");
        assert!(
            stdout.lines().any(|l| l.contains("\"turn.failed\"")),
            "Codex reported turn.failed: {stdout}"
        );
    });
}

#[test]
fn a_429_to_codex_pauses_the_model() {
    if !in_netns("failures::a_429_to_codex_pauses_the_model", "codex") {
        return;
    }
    runtime().block_on(async {
        let mock = MockOpenAi::start(vec![(
            "refine",
            vec![CodexTurn::Error(429, "rate_limit_exceeded".into())],
        )])
        .await;
        let daemon = {
            let mock = mock.clone();
            TestDaemon::start_with(move |root| {
                format!("pause_secs = 3600\n{}", crate::codex::config(root, &mock))
            })
            .await
        };
        let id = daemon.submit(bead("Limited")).await;
        let paused = daemon
            .wait_for("the model's pause", |e| e["type"] == "model.paused")
            .await;
        assert_eq!(paused["model"], "sonnet", "{paused}");
        let events = daemon.events().await;
        let results = step_events(&events, "step.result", ".refine");
        assert!(
            matches!(&results[..], [r] if r["outcome"] == "usage_limit"),
            "{results:?}"
        );
        let shown = daemon.show(&id).await;
        assert_ne!(shown["bead"]["status"], "blocked", "{shown}");
    });
}
