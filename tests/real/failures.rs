//! How a real agent's failures reach the router: an API error Claude Code reports with
//! `is_error: true` under `subtype: success`, `error_max_turns`, and a Codex `turn.failed`
//! are failures, retried and counted; a refused key and an unreachable API pause dispatching
//! without spending an attempt; limits are covered in `claude.rs`.

use serde_json::{json, Value};

use crate::anthropic::{MockAnthropic, Turn, INVALID_KEY};
use crate::claude::{config as claude_config, done, start_with_args, step_events};
use crate::isolate::{in_netns, runtime};
use crate::openai::{MockOpenAi, Turn as CodexTurn};
use catalyst::protocol::Method;
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

/// The key and URL the shipped test profile gives Claude Code (see `claude::config`).
const GOOD_KEY: &str = "sk-ant-test-dummy";

/// Starts a daemon whose Claude profile is the test profile with `good` replaced by `bad` in
/// its config text, submits a bead, and checks what a person sees: dispatching paused for `cause`
/// at Claude Code's first retry (not after its own minutes of retries), no attempt spent, and
/// `ctl status` naming the pause and `hint`. Then the config is mended, and after `ctl resume`
/// the step runs.
async fn paused_then_resumed(mock: &MockAnthropic, good: &str, bad: &str, cause: &str, hint: &str) {
    let (config_mock, good_text, bad_text) = (mock.clone(), good.to_owned(), bad.to_owned());
    let daemon = TestDaemon::start_with(move |root| {
        claude_config(root, &config_mock, "pause_secs = 3600", &[]).replace(&good_text, &bad_text)
    })
    .await;
    let id = daemon.submit(bead("Cannot reach the model")).await;
    // When Claude Code first says it is retrying (its stdout has no clock of its own, so the
    // run's stdout file is watched), and when the pause is seen.
    let stdout = daemon.run_dir(&id, "refine", 1).join("stdout");
    let first_retry =
        catalyst_testkit::poll::poll(std::time::Duration::from_millis(5), async || {
            let text = std::fs::read_to_string(&stdout).ok()?;
            text.contains("\"api_retry\"").then(std::time::Instant::now)
        });
    let pause = async {
        let paused = daemon
            .wait_for("dispatching paused", |e| e["type"] == "dispatch.paused")
            .await;
        (paused, std::time::Instant::now())
    };
    let (retried_at, (paused, paused_at)) = tokio::join!(first_retry, pause);
    let retried_at = retried_at.expect("Claude Code said it was retrying");
    let took = paused_at.saturating_duration_since(retried_at);
    eprintln!(
        "{cause}: paused {} ms after Claude Code's first api_retry",
        took.as_millis()
    );
    assert!(
        took < std::time::Duration::from_secs(1),
        "paused in under a second of the first retry, not after the CLI's own retries: {took:?}"
    );
    assert_eq!(
        (paused["cause"].as_str(), paused["scope"].as_str()),
        (Some(cause), Some("agent")),
        "{paused}"
    );
    let events = daemon.events().await;
    let finished = step_events(&events, "step.finished", ".refine")[0].clone();
    assert_eq!(
        finished["exit"], "stopped: it cannot reach or use its API",
        "the daemon stopped Claude Code instead of waiting out its retries: {finished}"
    );
    assert!(
        finished["duration_ms"].as_u64().unwrap_or(u64::MAX) < 15_000,
        "stopped within seconds of starting, not minutes: {finished}"
    );
    let stdout = std::fs::read_to_string(daemon.run_dir(&id, "refine", 1).join("stdout"))
        .expect("the run's stdout");
    let retries = stdout.matches("\"api_retry\"").count();
    assert!(
        (1..=2).contains(&retries),
        "stopped at Claude Code's first retry, not after ten: {retries} api_retry lines"
    );
    let retry = step_events(&events, "step.retry", ".refine")[0].clone();
    assert_eq!(retry["counted"], false, "no attempt is spent: {retry}");
    assert!(step_events(&events, "step.escalated", ".refine").is_empty());

    let (code, status, _) = daemon.ctl(&["status"], "").await;
    assert_eq!(code, 0);
    assert!(
        status.contains(&format!("dispatching of agent steps paused ({cause})"))
            && status.contains(hint)
            && status.contains("catalyst ctl resume"),
        "ctl status says what is paused, why and what to do:\n{status}"
    );
    assert_eq!(
        step_events(&daemon.events().await, "step.dispatched", ".refine").len(),
        1,
        "nothing is dispatched while paused"
    );

    let config = std::fs::read_to_string(daemon.paths.config()).expect("the config");
    // Written whole and renamed into place, so the daemon's watcher never reads half a file.
    let mended = daemon.root.join("config.toml.new");
    std::fs::write(&mended, config.replace(bad, good)).expect("mend the config");
    std::fs::rename(&mended, daemon.paths.config()).expect("put the config in place");
    daemon.call(Method::Reload).await;
    let (code, _, err) = daemon.ctl(&["resume"], "").await;
    assert_eq!(code, 0, "{err}");
    let result = daemon
        .wait_for("the refine step's result once resumed", |e| {
            e["type"] == "step.result"
                && e["step"] == format!("{id}.refine")
                && e["outcome"] == "finished"
        })
        .await;
    assert_eq!(result["attempt"], 2, "{result}");
}

#[test]
fn a_refused_key_pauses_the_agent_at_once_and_resume_runs_the_step() {
    if !in_netns(
        "failures::a_refused_key_pauses_the_agent_at_once_and_resume_runs_the_step",
        "claude",
    ) {
        return;
    }
    runtime().block_on(async {
        let mock = MockAnthropic::start(vec![("refine", vec![done("Refined.")])]).await;
        paused_then_resumed(&mock, GOOD_KEY, INVALID_KEY, "auth", "ANTHROPIC_API_KEY").await;
        let answered_401 = mock
            .requests()
            .iter()
            .any(|r| r.header("x-api-key") == Some(INVALID_KEY));
        assert!(answered_401, "the mock saw the refused key");
    });
}

#[test]
fn an_unreachable_api_pauses_the_agent_at_once_and_resume_runs_the_step() {
    if !in_netns(
        "failures::an_unreachable_api_pauses_the_agent_at_once_and_resume_runs_the_step",
        "claude",
    ) {
        return;
    }
    runtime().block_on(async {
        let mock = MockAnthropic::start(vec![("refine", vec![done("Refined.")])]).await;
        // A loopback port nothing listens on.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let unreachable = format!("http://{closed}");
        paused_then_resumed(
            &mock,
            &mock.url,
            &unreachable,
            "connection",
            "ANTHROPIC_BASE_URL",
        )
        .await;
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
