//! The real Claude Code CLI, driven by the daemon through the shipped `claude` profile, against
//! the mock Anthropic API.

use std::path::Path;

use catalyst::domain::agent::profile::AgentProfile;
use catalyst::protocol::BeadInput;
use serde_json::{json, Value};

use crate::anthropic::{user_text, MockAnthropic, Turn, Usage};
use crate::isolate::{agent_bin, in_netns, runtime};
use catalyst_testkit::TestDaemon;

/// The shipped Claude profile with the installed binary, pointed at `mock` with a throwaway
/// HOME; `extra` (top-level keys only, dotted keys for tables) goes before it.
pub(crate) fn config(root: &Path, mock: &MockAnthropic, extra: &str, args: &[String]) -> String {
    let home = root.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let mut profile = AgentProfile::claude();
    profile.command[0] = agent_bin("claude")
        .expect("claude is installed")
        .display()
        .to_string();
    profile.command.extend(args.iter().cloned());
    for (k, v) in [
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_BASE_URL", mock.url.clone()),
        ("ANTHROPIC_API_KEY", "sk-ant-test-dummy".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        // One retry of a failed API call instead of ten with backoff, so a 429 ends the run
        // in seconds.
        ("CLAUDE_CODE_MAX_RETRIES", "1".into()),
    ] {
        profile.env.insert(k.into(), v);
    }
    let mut table = toml::Table::new();
    table.insert("agent".into(), "real".into());
    table.insert("stall_timeout_secs".into(), 60.into());
    table.insert("agent_timeout_secs".into(), 120.into());
    table.insert("grace_secs".into(), 2.into());
    let mut profiles = toml::Table::new();
    profiles.insert(
        "real".into(),
        toml::Value::try_from(&profile).expect("profile as TOML"),
    );
    table.insert("profiles".into(), profiles.into());
    format!(
        "{extra}\n{}",
        toml::to_string(&table).expect("config as TOML")
    )
}

pub(crate) async fn start(mock: &MockAnthropic, extra: &str) -> TestDaemon {
    start_with_args(mock, extra, &[]).await
}

/// [`start`], with `args` appended to the profile's command.
pub(crate) async fn start_with_args(
    mock: &MockAnthropic,
    extra: &str,
    args: &[&str],
) -> TestDaemon {
    let (mock, extra) = (mock.clone(), extra.to_owned());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    TestDaemon::start_with(move |root| config(root, &mock, &extra, &args)).await
}

pub(crate) fn done(summary: &str) -> Turn {
    Turn::done("Done.", summary, &[])
}

fn approve() -> Turn {
    Turn::done(
        "Looks right.",
        "the change is right",
        &["VERDICT: APPROVED"],
    )
}

/// An implementer that writes `hello.txt` with the Write tool, then reports.
pub(crate) fn write_hello() -> Vec<Turn> {
    vec![
        Turn::tool(
            "Write",
            json!({"file_path": "{worktree}/hello.txt", "content": "hello\n"}),
        ),
        done("wrote hello.txt"),
    ]
}

/// The text of the tool results in a request's last message.
fn tool_results(request: &Value) -> Vec<(bool, String)> {
    // The newest message that carries tool results: Claude Code may add a system note after
    // it (the budget left, with `--max-budget-usd`).
    let has_results = |m: &&Value| {
        m["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    };
    let last = request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(has_results))
        .cloned()
        .unwrap_or_default();
    last["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (b["is_error"].as_bool().unwrap_or(false), text)
        })
        .collect()
}

pub(crate) fn step_events<'a>(events: &'a [Value], kind: &str, step: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind && e["step"].as_str().is_some_and(|s| s.ends_with(step)))
        .collect()
}

#[test]
fn feature_formula_end_to_end() {
    if !in_netns("claude::feature_formula_end_to_end", "claude") {
        return;
    }
    runtime().block_on(async {
        let mock = MockAnthropic::start(vec![
            (
                "refine",
                vec![Turn::done(
                    "Plan: write hello.txt.",
                    "planned hello.txt",
                    &[],
                )],
            ),
            (
                "implement",
                vec![
                    Turn::tool(
                        "Write",
                        json!({"file_path": "{worktree}/hello.txt", "content": "hello\n"}),
                    ),
                    Turn::tool(
                        "Edit",
                        json!({"file_path": "{worktree}/hello.txt", "old_string": "hello",
                            "new_string": "hello world"}),
                    ),
                    Turn::tool(
                        "Bash",
                        json!({"command": "cat hello.txt", "description": "show it"}),
                    ),
                    done("wrote hello.txt"),
                ],
            ),
            (
                "review",
                vec![
                    Turn::tool("Read", json!({"file_path": "{worktree}/hello.txt"})),
                    approve(),
                ],
            ),
            ("merge", vec![done("up to date with main")]),
        ])
        .await;
        let daemon = start(&mock, "").await;
        let secret = "The greeting must be lowercase, says ticket QX-7731.";
        let id = daemon
            .submit(BeadInput {
                title: "Say hello".into(),
                description: Some(secret.into()),
                ..Default::default()
            })
            .await;
        daemon.wait_status(&id, "closed").await;
        assert_eq!(
            daemon.file_on_main("hello.txt").as_deref(),
            Some("hello world\n")
        );

        let implement = mock.conversation("implement");
        assert_eq!(implement.len(), 4, "three tool turns and a final turn");
        let prompt = user_text(&implement[0].body);
        assert!(
            prompt.contains("You are the implementation step of an automated software workflow"),
            "the prompt is agent_prompts.toml's: {prompt}"
        );
        assert!(
            !prompt.contains("QX-7731"),
            "the bead's description stays in the context file: {prompt}"
        );
        let written = tool_results(&implement[1].body);
        assert!(
            matches!(&written[..], [(false, text)] if text.contains("hello.txt")),
            "the Write went through: {written:?}"
        );
        let edited = tool_results(&implement[2].body);
        assert!(
            matches!(&edited[..], [(false, _)]),
            "the Edit went through: {edited:?}"
        );
        let ran = tool_results(&implement[3].body);
        assert!(
            matches!(&ran[..], [(false, text)] if text.contains("hello world")),
            "the Bash command ran without a prompt: {ran:?}"
        );
        let review = mock.conversation("review");
        let read = tool_results(&review[1].body);
        assert!(
            matches!(&read[..], [(false, text)] if text.contains("hello")),
            "the reviewer read the file: {read:?}"
        );
        // git merges the branch: no merge agent runs.
        let events = daemon.events().await;
        assert!(
            step_events(&events, "step.dispatched", ".merge").is_empty(),
            "no merge agent without a conflict"
        );
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "merge.completed" && e["bead"] == id.as_str()),
            "the daemon merged"
        );
        assert!(mock.conversation("merge").is_empty());
    });
}

#[test]
fn a_reviewers_write_is_denied_by_the_hook() {
    if !in_netns("claude::a_reviewers_write_is_denied_by_the_hook", "claude") {
        return;
    }
    runtime().block_on(async {
        let mock = MockAnthropic::start(vec![
            ("refine", vec![done("planned")]),
            (
                "implement",
                write_hello(),
            ),
            (
                "review",
                vec![
                    Turn::tool(
                        "Write",
                        json!({"file_path": "{worktree}/sneaky.txt", "content": "fixed it myself\n"}),
                    ),
                    Turn::done(
                        "My write was denied: reviewers are read-only.",
                        "the change is right",
                        &["VERDICT: APPROVED"],
                    ),
                ],
            ),
            ("merge", vec![done("up to date with main")]),
        ])
        .await;
        // The reviewer is offered Write, so that catalyst's hook is what refuses it.
        let daemon = start(
            &mock,
            r#"tool_policy.review = { access = "read-only", tools = ["Read", "Grep", "Glob", "Write"] }"#,
        )
        .await;
        let id = daemon.submit(catalyst_testkit::bead("Say hello")).await;
        daemon.wait_status(&id, "closed").await;
        assert_eq!(daemon.file_on_main("sneaky.txt"), None);
        assert_eq!(daemon.file_on_main("hello.txt").as_deref(), Some("hello\n"));
        let review = mock.conversation("review");
        let results = tool_results(&review[1].body);
        assert!(
            matches!(&results[..], [(true, text)] if text.contains("read-only") || text.contains("denied") || text.contains("not allowed")),
            "Claude was told the write was denied: {results:?}"
        );
        let events = daemon.events().await;
        let denied: Vec<_> = events
            .iter()
            .filter(|e| e["type"] == "agent.tool" && e["tool"] == "Write" && e["allowed"] == false)
            .collect();
        assert!(
            matches!(&denied[..], [d] if d["step"] == format!("{id}.review")),
            "catalyst's PreToolUse hook denied the reviewer's Write: {denied:?}"
        );
        let stdout = std::fs::read_to_string(daemon.run_dir(&id, "review", 1).join("stdout"))
        .expect("the review's stdout");
        let result: Value = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .rfind(|e| e["type"] == "result")
            .expect("a result event");
        let denials = result["permission_denials"].as_array().cloned().unwrap_or_default();
        assert!(
            denials.iter().any(|d| d["tool_name"] == "Write"),
            "Claude's result lists the denial: {result}"
        );
    });
}

#[test]
fn a_message_without_a_block_is_sent_back_in_the_same_conversation() {
    if !in_netns(
        "claude::a_message_without_a_block_is_sent_back_in_the_same_conversation",
        "claude",
    ) {
        return;
    }
    runtime().block_on(async {
        let mock = MockAnthropic::start(vec![
            (
                "refine",
                vec![
                    Turn::Text("Plan: write hello.txt. (I forgot the block.)".into()),
                    Turn::done("Plan: write hello.txt.", "planned after the reminder", &[]),
                ],
            ),
            ("implement", write_hello()),
            ("review", vec![approve()]),
            ("merge", vec![done("up to date with main")]),
        ])
        .await;
        let daemon = start(&mock, "").await;
        let id = daemon.submit(catalyst_testkit::bead("Say hello")).await;
        daemon.wait_status(&id, "closed").await;
        let events = daemon.events().await;
        let started = step_events(&events, "step.dispatched", ".refine");
        assert_eq!(started.len(), 1, "one invocation, no retry: {started:?}");
        let results = step_events(&events, "step.result", ".refine");
        assert!(
            matches!(&results[..], [r] if r["outcome"] == "finished"
                && r["summary"] == "planned after the reminder"),
            "the second answer's block is used: {results:?}"
        );
        let refine = mock.conversation("refine");
        assert_eq!(refine.len(), 2, "asked twice in one conversation");
        let reminder = user_text(&refine[1].body);
        assert!(
            reminder.contains("STEP-RESULT"),
            "the daemon's objection reached the model: {reminder}"
        );
        let sent_back = step_events(&events, "agent.tool", ".refine");
        assert!(
            matches!(&sent_back[..], [e] if e["tool"] == "Stop" && e["allowed"] == false),
            "the message sent back is recorded: {sent_back:?}"
        );
    });
}

#[test]
fn the_reported_cost_is_recorded_and_counts_toward_the_budget() {
    if !in_netns(
        "claude::the_reported_cost_is_recorded_and_counts_toward_the_budget",
        "claude",
    ) {
        return;
    }
    runtime().block_on(async {
        let mock = MockAnthropic::start(vec![
            ("refine", vec![done("planned")]),
            ("implement", vec![done("nothing to do")]),
            ("review", vec![approve()]),
            ("merge", vec![done("up to date with main")]),
        ])
        .await;
        // A million input tokens: dollars, whatever the model's price.
        mock.set_usage(Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000,
        });
        let daemon = start(&mock, "budget_usd = 0.5").await;
        let id = daemon.submit(catalyst_testkit::bead("Expensive")).await;
        daemon.wait_status(&id, "blocked").await;
        let events = daemon.events().await;
        let finished = step_events(&events, "step.finished", ".refine");
        let cost = finished
            .first()
            .and_then(|e| e["cost_usd"].as_f64())
            .expect("the refine attempt records a cost");
        let stdout = std::fs::read_to_string(daemon.run_dir(&id, "refine", 1).join("stdout"))
            .expect("the refine's stdout");
        let reported = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .rfind(|e| e["type"] == "result")
            .and_then(|e| e["total_cost_usd"].as_f64())
            .expect("Claude reports total_cost_usd");
        assert!(
            (cost - reported).abs() < 1e-9 && cost > 0.5,
            "{cost} vs {reported}"
        );
        let comments = daemon.comments(&id).await;
        assert!(
            comments.iter().any(|c| c.contains("over budget")),
            "{comments:?}"
        );
        assert!(
            step_events(&events, "step.dispatched", ".implement").is_empty(),
            "nothing runs past the budget"
        );
    });
}

#[test]
fn a_429_pauses_the_model_instead_of_burning_attempts() {
    if !in_netns(
        "claude::a_429_pauses_the_model_instead_of_burning_attempts",
        "claude",
    ) {
        return;
    }
    runtime().block_on(async {
        let mock = MockAnthropic::start(vec![(
            "refine",
            vec![Turn::Error(429, "rate_limit_error".into())],
        )])
        .await;
        let daemon = start(&mock, "pause_secs = 3600").await;
        let id = daemon.submit(catalyst_testkit::bead("Limited")).await;
        let paused = daemon
            .wait_for("the model's pause", |e| e["type"] == "model.paused")
            .await;
        assert_eq!(paused["model"], "sonnet", "{paused}");
        let events = daemon.events().await;
        let results = step_events(&events, "step.result", ".refine");
        assert!(
            results.iter().all(|r| r["outcome"] == "usage_limit"),
            "{results:?}"
        );
        let shown = daemon.show(&id).await;
        assert_ne!(shown["bead"]["status"], "blocked", "{shown}");
        assert!(
            step_events(&events, "step.dispatched", ".refine").len() == 1,
            "no attempt is burnt while the model is paused"
        );
    });
}

#[test]
fn a_command_the_hook_allows_is_still_held_by_the_sandbox() {
    if !in_netns(
        "claude::a_command_the_hook_allows_is_still_held_by_the_sandbox",
        "claude",
    ) {
        return;
    }
    runtime().block_on(async {
        let escape = "touch \"$HOME/escaped.txt\"; echo planted > ../../../planted.txt; git -C ../../.. commit -q --allow-empty -m sneaked; true";
        let mut implement = vec![Turn::tool(
            "Bash",
            json!({"command": escape, "description": "try to get out"}),
        )];
        implement.extend(write_hello());
        let mock = MockAnthropic::start(vec![
            ("refine", vec![done("planned")]),
            ("implement", implement),
            ("review", vec![approve()]),
            ("merge", vec![done("up to date with main")]),
        ])
        .await;
        let daemon = start(&mock, "").await;
        let id = daemon.submit(catalyst_testkit::bead("Say hello")).await;
        daemon.wait_status(&id, "closed").await;
        // The hook let the command through (it names neither `.git` nor `.catalyst`) ...
        let events = daemon.events().await;
        assert!(
            events.iter().any(|e| e["type"] == "agent.tool"
                && e["tool"] == "Bash"
                && e["allowed"] == true
                && e["target"].as_str().is_some_and(|t| t.contains("escaped.txt"))),
            "the hook allowed the command"
        );
        // ... and the operating system held it: nothing outside the worktree changed.
        assert!(!daemon.root.join("home/escaped.txt").exists());
        assert!(!daemon.repo.join("planted.txt").exists());
        assert!(!daemon.main_log().iter().any(|l| l.contains("sneaked")));
        assert_eq!(daemon.file_on_main("hello.txt").as_deref(), Some("hello\n"));
    });
}
