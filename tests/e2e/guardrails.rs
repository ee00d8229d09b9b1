//! Guardrails: what each role's agent may do (tool flags, then the hooks that ask the daemon),
//! a hook with the daemon stopped, the Stop hook's second chance, and prompts that carry no
//! bead text.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use catalyst::protocol::BeadInput;
use catalyst_testkit::{bead, catalyst_bin, TestDaemon};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::gates::GATED;

/// Runs `sh -c command` with `input` on stdin and the step's environment, as Claude Code runs
/// a hook; returns exit code, stdout and stderr.
async fn run_hook(command: &str, input: &Value, socket: &Path) -> (i32, String, String) {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("CATALYST_SOCKET", socket)
        .env("CATALYST_STEP", "cat-1.implement")
        .env("CATALYST_ROLE", "implement")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the hook");
    let mut stdin = child.stdin.take().expect("stdin");
    // A hook may end without reading its input (one that cannot start does): a closed pipe
    // is its answer, not the test's failure.
    if let Err(e) = stdin.write_all(input.to_string().as_bytes()).await {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "write the hook input: {e}"
        );
    }
    drop(stdin);
    let out = child.wait_with_output().await.expect("the hook ends");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `agent.tool` events of one step.
fn tool_events(events: &[Value], step: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "agent.tool" && e["step"] == step)
        .cloned()
        .collect()
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

const REVIEW_TRIES_TO_WRITE: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]

[[rule]]
role = "review"
responses = [{ tools = [{ name = "Write", input = { file_path = "review-notes.txt", content = "notes" } }], verdict = "APPROVED", summary = "looks good" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_is_offered_only_reading_tools_and_its_write_never_happens() {
    let daemon = TestDaemon::start(REVIEW_TRIES_TO_WRITE, "").await;
    let id = daemon.submit(bead("Say hello")).await;
    daemon.wait_status(&id, "closed").await;
    let runs = daemon.invocations();
    let review = runs
        .iter()
        .find(|i| i.role() == "review")
        .expect("the review ran");
    assert!(
        review
            .argv
            .ends_with(&["--tools", "Read", "Grep", "Glob", "Bash"].map(String::from)),
        "the command line offers reading tools (and the checked shell) only: {:?}",
        review.argv
    );
    let write = &review.tools[0];
    assert!(!write.allowed, "{write:?}");
    assert!(
        write
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("No such tool")),
        "refused by the tool flags: {write:?}"
    );
    let implement = runs
        .iter()
        .find(|i| i.role() == "implement")
        .expect("the implementation ran");
    // A writing role has its list too: files, search, the shell, a to-do list; nothing else.
    let offered = implement
        .argv
        .iter()
        .skip_while(|a| *a != "--tools")
        .skip(1)
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(
        offered,
        catalyst::domain::policy::WRITE_TOOLS.map(String::from),
        "{:?}",
        implement.argv
    );
    assert_eq!(daemon.file_on_main("review-notes.txt"), None);
    assert_eq!(daemon.file_on_main("hello.txt").as_deref(), Some("hello\n"));
    let prompt = &review.prompt;
    assert!(
        prompt.contains(&format!("{id}.review"))
            && prompt.contains("role `review`")
            && prompt.contains("context.md")
            && prompt.contains("Tool policy: read-only"),
        "the prompt ends with the step, context file and policy: {prompt}"
    );
    assert!(
        review.additional_context.is_empty(),
        "no SessionStart hook runs: {:?}",
        review.additional_context
    );
}

const FEATURE_WITH_TOOLS: &str = r#"
formula = "toolreview"
version = 1
type = "workflow"

[[steps]]
id = "implement"
title = "Implement: {{title}}"
role = "implement"

[[steps]]
id = "review"
title = "Review: {{title}}"
role = "review"
needs = ["implement"]
tools = ["Read", "Grep", "Glob", "Write", "Bash"]

[[steps]]
id = "merge"
title = "Merge: {{title}}"
role = "merge"
needs = ["review"]
"#;

const REVIEW_TRIES_HARDER: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]

[[rule]]
role = "review"
responses = [{ tools = [
  { name = "Write", input = { file_path = "notes.txt", content = "notes" } },
  { name = "Bash", input = { command = "touch touched.txt" } },
  { name = "Bash", input = { command = "git diff main...HEAD" } },
  { name = "Read", input = { file_path = "hello.txt" } },
], verdict = "APPROVED", summary = "looks good" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewer_given_write_by_its_formula_is_still_denied_by_the_hook() {
    let daemon = TestDaemon::start(REVIEW_TRIES_HARDER, "").await;
    daemon.add_formula("toolreview", FEATURE_WITH_TOOLS).await;
    let id = daemon
        .submit(BeadInput {
            formula: Some("toolreview".into()),
            ..bead("Say hello")
        })
        .await;
    daemon.wait_status(&id, "closed").await;
    let review_step = format!("{id}.review");
    let events = daemon.events().await;
    let decisions: Vec<(String, bool, String)> = tool_events(&events, &review_step)
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or_default().to_owned(),
                e["allowed"] == true,
                e["target"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("Write".into(), false, "notes.txt".into()),
            ("Bash".into(), false, "touch touched.txt".into()),
            ("Bash".into(), true, "git diff main...HEAD".into()),
            ("Read".into(), true, "hello.txt".into()),
        ],
        "every call went to the daemon and was recorded"
    );
    let denied = &tool_events(&events, &review_step)[0];
    assert!(
        denied["reason"]
            .as_str()
            .is_some_and(|r| r.contains("read-only")),
        "{denied}"
    );
    let review = daemon
        .invocations()
        .into_iter()
        .find(|i| i.role() == "review")
        .expect("the review ran");
    assert!(review
        .argv
        .ends_with(&["--tools", "Read", "Grep", "Glob", "Write", "Bash"].map(String::from)));
    assert!(
        review.tools[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("read-only")),
        "the agent is told why: {:?}",
        review.tools[0]
    );
    assert_eq!(
        daemon.file_on_main("notes.txt"),
        None,
        "the write never happened"
    );
    assert_eq!(daemon.file_on_main("touched.txt"), None);
    assert!(
        events.iter().any(|e| e["type"] == "bead.status"
            && e["bead"] == review_step.as_str()
            && e["status"] == "closed"),
        "the review still completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_implementer_cannot_write_outside_its_worktree_or_into_git() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let absolute: PathBuf =
        std::env::temp_dir().join(format!("catalyst-guard-{}-{nanos}.txt", std::process::id()));
    let scenario = format!(
        r#"
[[rule]]
role = "implement"
responses = [{{ tools = [
  {{ name = "Write", input = {{ file_path = "../outside.txt", content = "escaped" }} }},
  {{ name = "Write", input = {{ file_path = {abs}, content = "escaped" }} }},
  {{ name = "Write", input = {{ file_path = ".git/config", content = "[core]\nhooksPath = /tmp\n" }} }},
  {{ name = "Bash", input = {{ command = "git push origin HEAD" }} }},
  {{ name = "Bash", input = {{ command = "echo evil > .git/info/attributes" }} }},
  {{ name = "Write", input = {{ file_path = "inside.txt", content = "inside\n" }} }},
], summary = "wrote inside.txt" }}]
"#,
        abs = toml_str(&absolute.display().to_string())
    );
    let daemon = TestDaemon::start(&scenario, "").await;
    let id = daemon.submit(bead("Stay inside")).await;
    daemon.wait_status(&id, "closed").await;
    let step = format!("{id}.implement");
    let events = daemon.events().await;
    let decisions: Vec<(bool, String)> = tool_events(&events, &step)
        .iter()
        .map(|e| {
            (
                e["allowed"] == true,
                e["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(decisions.len(), 6, "{decisions:?}");
    for (i, needle) in [
        "outside the worktree",
        "outside the worktree",
        "`.git`",
        "git push",
        "`.git`",
    ]
    .into_iter()
    .enumerate()
    {
        assert!(
            !decisions[i].0 && decisions[i].1.contains(needle),
            "call {i}: {:?}",
            decisions[i]
        );
    }
    assert!(decisions[5].0, "the write inside the worktree is allowed");
    assert!(!daemon.paths.worktrees().join("outside.txt").exists());
    assert!(!absolute.exists(), "{} was written", absolute.display());
    let git_dir = daemon.repo.join(".git");
    let config = std::fs::read_to_string(git_dir.join("config")).expect("git config");
    assert!(!config.contains("hooksPath"), "{config}");
    assert!(!git_dir.join("info/attributes").exists());
    assert_eq!(
        daemon.file_on_main("inside.txt").as_deref(),
        Some("inside\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_daemon_stopped_the_hook_denies_a_write() {
    let mut daemon = TestDaemon::start(GATED, "").await;
    let id = daemon.submit(bead("Anything")).await;
    daemon.wait_status(&id, "closed").await;
    let settings: Value = serde_json::from_slice(
        &std::fs::read(daemon.run_dir(&id, "implement", 1).join("settings.json"))
            .expect("the run's settings.json"),
    )
    .expect("settings JSON");
    daemon.stop().await;
    let input = json!({
        "session_id": "s-1", "transcript_path": "/nonexistent", "cwd": daemon.repo,
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Write",
        "tool_input": {"file_path": "a.txt", "content": "a"}, "tool_use_id": "toolu_1",
    });
    let socket = daemon.paths.socket();
    let catalyst = catalyst_bin().display().to_string();
    let direct = format!("'{catalyst}' hook pre-tool-use");
    let from_settings = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .expect("the PreToolUse command")
        .to_owned();
    assert!(
        from_settings.contains(&catalyst),
        "the hook runs this catalyst: {from_settings}"
    );
    // A hook that cannot even start must deny too, not fail open.
    let missing =
        catalyst::domain::agent::settings::settings(Path::new("/nonexistent/catalyst"), None)
            ["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .expect("command")
            .to_owned();
    for command in [direct, from_settings, missing] {
        let (code, stdout, stderr) = run_hook(&command, &input, &socket).await;
        assert_eq!(
            code, 2,
            "{command}: exit 2 denies; stdout {stdout} stderr {stderr}"
        );
        assert!(!stdout.contains("allow"), "{command}: {stdout}");
    }
    let (_, _, stderr) =
        run_hook(&format!("'{catalyst}' hook pre-tool-use"), &input, &socket).await;
    assert!(
        stderr.contains("denied") && stderr.contains("not running"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_message_without_a_block_is_sent_back_once_instead_of_retried() {
    sent_back_once(How::Conversation).await;
}

/// The same, for a profile that gives the prompt on stdin and closes it: the `Stop` hook
/// sends the message back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_message_without_a_block_is_sent_back_once_by_the_stop_hook() {
    sent_back_once(How::StopHook).await;
}

/// How a final message without a block is sent back.
#[derive(Clone, Copy, PartialEq, Debug)]
enum How {
    /// The daemon answers it on the agent's stdin (the shipped profiles).
    Conversation,
    /// The `Stop` hook blocks the stop (a profile with `stdin = "prompt"`).
    StopHook,
}

async fn sent_back_once(how: How) {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ write = { "a.txt" = "a\n" }, raw = "I wrote a.txt.", after_stop_block = { text = "I wrote a.txt.", summary = "wrote a.txt" } }]
"#;
    let ws = catalyst_testkit::Workspace::new(scenario, "");
    if how == How::StopHook {
        let config = std::fs::read_to_string(ws.paths.config()).expect("config");
        let prompt = config
            .replace("\"--input-format\", \"stream-json\", ", "")
            .replace("stdin = \"conversation\"", "stdin = \"prompt\"");
        assert_ne!(prompt, config, "the stub profile holds a conversation");
        std::fs::write(ws.paths.config(), prompt).expect("config");
    }
    let daemon = ws.start().await;
    let id = daemon.submit(bead("One chance")).await;
    daemon.wait_status(&id, "closed").await;
    let step = format!("{id}.implement");
    let implement: Vec<_> = daemon
        .invocations()
        .into_iter()
        .filter(|i| i.role() == "implement")
        .collect();
    assert_eq!(implement.len(), 1, "exactly one invocation for the step");
    let (sent, other) = match how {
        How::Conversation => (&implement[0].follow_ups, &implement[0].stop_blocks),
        How::StopHook => (&implement[0].stop_blocks, &implement[0].follow_ups),
    };
    assert_eq!(sent.len(), 1, "sent back once, then allowed: {sent:?}");
    assert!(other.is_empty(), "{how:?} only: {other:?}");
    assert!(
        sent[0].contains("---STEP-RESULT---"),
        "the agent is given the result contract: {}",
        sent[0]
    );
    let comments = daemon.comments(&id).await;
    assert!(
        !comments.iter().any(|c| c.contains("RETRY")),
        "no retry: {comments:?}"
    );
    let events = daemon.events().await;
    let stops: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "agent.tool" && e["tool"] == "Stop")
        .collect();
    assert_eq!(stops.len(), 1, "{stops:?}");
    assert_eq!(stops[0]["step"], step.as_str());
    let dispatched = events
        .iter()
        .filter(|e| e["type"] == "step.dispatched" && e["step"] == step.as_str())
        .count();
    assert_eq!(dispatched, 1);
    assert_eq!(daemon.file_on_main("a.txt").as_deref(), Some("a\n"));
}

const EVERY_ROLE: &str = r#"
formula = "everyrole"
version = 1
type = "workflow"

[[steps]]
id = "refine"
title = "Plan: {{title}}"
role = "refine"

[[steps]]
id = "implement"
title = "Implement: {{title}}"
role = "implement"
needs = ["refine"]

[[steps]]
id = "docs"
title = "Document: {{title}}"
description = "Write down what changed."
needs = ["implement"]

[[steps]]
id = "review"
title = "Review: {{title}}"
role = "review"
needs = ["docs"]

[[steps]]
id = "merge"
title = "Merge: {{title}}"
role = "merge"
needs = ["review"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_prompt_holds_the_beads_text_and_every_context_file_does() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ write = { "a.txt" = "a\n" }, summary = "wrote a.txt" }]

[[rule]]
role = "review"
responses = [
  { verdict = "REJECTED", summary = "needs b", instructions = ["add b.txt"] },
  { verdict = "APPROVED", summary = "good" },
]

[[rule]]
role = "fix"
responses = [{ write = { "b.txt" = "b\n" }, summary = "added b.txt" }]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    daemon.add_formula("everyrole", EVERY_ROLE).await;
    let marker = "MARKER-5e1f0c7a-do-not-leak";
    let id = daemon
        .submit(BeadInput {
            formula: Some("everyrole".into()),
            description: Some(format!("Make it so. {marker}")),
            ..bead("Context only")
        })
        .await;
    daemon.wait_status(&id, "closed").await;
    let runs = daemon.invocations();
    let roles: BTreeSet<String> = runs.iter().map(|i| i.role().to_owned()).collect();
    let shipped: BTreeSet<String> = catalyst::domain::prompt::PromptSet::builtin()
        .names()
        .map(str::to_owned)
        .collect();
    // Every template but the merge agent's, which runs only for a conflict (the workflow
    // tests render it).
    let shipped: BTreeSet<String> = shipped.into_iter().filter(|r| r != "merge").collect();
    assert_eq!(roles, shipped, "every shipped template was rendered");
    for run in &runs {
        assert!(!run.prompt.is_empty(), "{}: empty prompt", run.role());
        assert!(
            !run.prompt.contains(marker),
            "{}'s prompt holds the bead's text",
            run.role()
        );
    }
    let mut folders = 0;
    for step in std::fs::read_dir(daemon.paths.runs().join(&id)).expect("runs") {
        for attempt in std::fs::read_dir(step.expect("step").path()).expect("attempts") {
            let dir = attempt.expect("attempt").path();
            let prompt = std::fs::read_to_string(dir.join("prompt.md")).expect("prompt.md");
            let context = std::fs::read_to_string(dir.join("context.md")).expect("context.md");
            assert!(!prompt.contains(marker), "{}", dir.display());
            assert!(context.contains(marker), "{}", dir.display());
            folders += 1;
        }
    }
    assert_eq!(folders, runs.len(), "one run folder per agent run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attempt_is_capped_in_turns_and_by_what_is_left_of_the_budget() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ write = { "a.txt" = "a\n" }, summary = "wrote a", cost_usd = 2.5 }]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    let id = daemon.submit(bead("Capped")).await;
    daemon.wait_status(&id, "closed").await;
    let runs = daemon.invocations();
    let caps = |role: &str| {
        let argv = &runs
            .iter()
            .find(|i| i.role() == role)
            .expect("the role ran")
            .argv;
        let value = |flag: &str| {
            argv.iter()
                .position(|a| a == flag)
                .and_then(|i| argv.get(i + 1))
                .cloned()
        };
        (value("--max-turns"), value("--max-budget-usd"))
    };
    // The defaults: 100 turns, $10 a bead; the review runs on what the implementer left.
    let default_turns = catalyst::domain::config::DEFAULT_MAX_TURNS.to_string();
    assert_eq!(
        caps("implement"),
        (Some(default_turns.clone()), Some("10.00".into()))
    );
    assert_eq!(caps("review"), (Some(default_turns), Some("7.50".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reviewer_gets_the_change_in_its_context() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]
"#;
    let daemon = TestDaemon::start(scenario, "").await;
    let id = daemon.submit(bead("Say hello")).await;
    daemon.wait_status(&id, "closed").await;
    // The merge agent, which runs only for a conflict, gets it too (see the workflow tests).
    let run = daemon.run_dir(&id, "review", 1);
    let context = std::fs::read_to_string(run.join("context.md")).expect("context.md");
    assert!(
        context.contains(&format!("## The change (`git diff main...catalyst/{id}`)"))
            && context.contains("- added `hello.txt`")
            && context.contains("+hello"),
        "{context}"
    );
    let diff = std::fs::read_to_string(run.join("change.diff")).expect("change.diff");
    assert!(
        diff.contains("+++ b/hello.txt") && diff.contains("+hello"),
        "{diff}"
    );
    let implement = daemon.run_dir(&id, "implement", 1);
    let context = std::fs::read_to_string(implement.join("context.md")).expect("context.md");
    assert!(
        !context.contains("## The change"),
        "only the steps that judge: {context}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daily_budget_reached_stops_agent_attempts_and_says_so() {
    // Every implementer reports $3; the day allows $5.
    let scenario = r#"
[[rule]]
role = "implement"
bead = "cat-a"
responses = [{ write = { "a.txt" = "a\n" }, summary = "wrote a", cost_usd = 3.0 }]

[[rule]]
role = "implement"
bead = "cat-b"
responses = [{ write = { "b.txt" = "b\n" }, summary = "wrote b", cost_usd = 3.0 }]
"#;
    let daemon = TestDaemon::start(scenario, "daily_budget_usd = 5.0\n").await;
    let first = daemon
        .submit(catalyst::protocol::BeadInput {
            id: Some("cat-a".into()),
            ..bead("First")
        })
        .await;
    daemon.wait_status(&first, "closed").await;
    let second = daemon
        .submit(catalyst::protocol::BeadInput {
            id: Some("cat-b".into()),
            ..bead("Second")
        })
        .await;
    let reached = daemon
        .wait_for("the daily budget reached", |e| {
            e["type"] == "budget.reached"
        })
        .await;
    assert_eq!(reached["scope"], "daily");
    assert_eq!(reached["budget_usd"], 5.0);
    // The second bead's implementer got what was left of the day, not its own $10.
    let implement_b = daemon
        .invocations()
        .into_iter()
        .find(|i| i.bead.as_deref() == Some("cat-b") && i.role() == "implement")
        .expect("b's implementer ran");
    let cap = implement_b
        .argv
        .iter()
        .position(|a| a == "--max-budget-usd")
        .and_then(|i| implement_b.argv.get(i + 1))
        .cloned();
    assert_eq!(cap.as_deref(), Some("2.00"), "{:?}", implement_b.argv);
    // No agent attempt starts after it: b's review waits, and status says why.
    let (_, json, _) = daemon.ctl(&["status", "--json"], "").await;
    let status: serde_json::Value = serde_json::from_str(&json).expect("status JSON");
    assert_eq!(status["budget_stop"]["scope"], "daily", "{status}");
    assert!(status["budget_stop"]["until"].is_string(), "{status}");
    let (_, text, _) = daemon.ctl(&["status"], "").await;
    assert!(
        text.contains("today's spending reached its limit: agents spent $6.00 of $5.00")
            && text.contains("raise `daily_budget_usd`"),
        "{text}"
    );
    let show = daemon.show(&second).await;
    assert_eq!(show["bead"]["status"], "in_progress", "{show}");
    assert!(
        !daemon
            .invocations()
            .iter()
            .any(|i| i.bead.as_deref() == Some("cat-b") && i.role() == "review"),
        "no review started"
    );
    // A higher limit, reloaded, lets it go on.
    let config = daemon.paths.config();
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace("daily_budget_usd = 5.0", "daily_budget_usd = 50.0"),
    )
    .expect("raise the limit");
    let (code, _, err) = daemon.ctl(&["reload"], "").await;
    assert_eq!(code, 0, "{err}");
    daemon.wait_status(&second, "closed").await;
}
