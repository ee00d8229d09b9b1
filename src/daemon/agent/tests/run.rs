//! Whole runs, with `sh` scripts as agents.

use crate::domain::model::Role;
use crate::domain::result::Verdict;
use crate::domain::router::Outcome;
use crate::domain::unavailable::Unavailable;

use super::*;

#[tokio::test]
async fn prompt_arrives_on_stdin_and_in_prompt_md() {
    let fx = Fixture::new();
    let mut spec = fx.spec(OutputFormat::Text, "cat");
    spec.prompt = "Implement cat-1.\nSee the context file.\n".into();
    let report = run_now(spec).await;
    assert_eq!(report.exit, Exit::Code(0));
    assert_eq!(
        report.final_message.as_deref(),
        Some("Implement cat-1.\nSee the context file.\n")
    );
    assert_eq!(
        fx.read(PROMPT_FILE),
        b"Implement cat-1.\nSee the context file.\n"
    );
    assert_eq!(
        fx.read(STDOUT_FILE),
        b"Implement cat-1.\nSee the context file.\n"
    );
    assert!(report.pid > 0);
    assert_eq!(report.stdout_bytes, 39);
    assert!(!report.truncated);
}

/// Field `n` (numbered from 1, as in proc(5)) of a `/proc/<pid>/stat` line, found after the
/// command name, which may hold spaces and parentheses.
fn stat_field(stat: &str, n: usize) -> i32 {
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat line")
        .1
        .split_whitespace()
        .collect();
    fields[n - 3].parse().expect("a number")
}

fn niceness(stat: &str) -> i32 {
    stat_field(stat, 19)
}

/// An agent that prints its own `/proc/<pid>/stat` line and that of a process it starts.
const OWN_AND_CHILD_STAT: &str = "read -r own < /proc/$$/stat; child=$(cat /proc/self/stat); printf '%s\\n%s\\n' \"$own\" \"$child\"";

/// The two lines [`OWN_AND_CHILD_STAT`] printed.
fn own_and_child(report: RunReport) -> (String, String) {
    let message = report.final_message.expect("output");
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 2, "{message}");
    (lines[0].to_owned(), lines[1].to_owned())
}

#[tokio::test]
async fn agents_run_less_nice_than_the_daemon_by_agent_nice() {
    let fx = Fixture::new();
    // The agent's own process and a process it starts: both yield to the daemon.
    let mut spec = fx.spec(OutputFormat::Text, OWN_AND_CHILD_STAT);
    spec.nice = 7;
    let (own, child) = own_and_child(run_now(spec).await);
    let daemon = niceness(&std::fs::read_to_string("/proc/self/stat").expect("stat"));
    let want = (daemon + 7).min(19);
    assert_eq!(niceness(&own), want, "the agent: {own}");
    assert_eq!(niceness(&child), want, "its child: {child}");
}

/// The daemon ignores `SIGPIPE`, as Rust programs do; an agent must not inherit that (a
/// program killed by a closed pipe, as `yes | head` expects, would spin), nor a blocked signal.
#[tokio::test]
async fn agents_start_with_the_default_signal_dispositions() {
    let fx = Fixture::new();
    let report = run_now(fx.spec(
        OutputFormat::Text,
        "grep -E '^(SigIgn|SigBlk):' /proc/self/status",
    ))
    .await;
    let message = report.final_message.expect("output");
    const SIGPIPE_BIT: u64 = 1 << (13 - 1);
    for (name, must_clear) in [("SigIgn:", SIGPIPE_BIT), ("SigBlk:", u64::MAX)] {
        let mask = message
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or_else(|| panic!("no {name} in {message}"));
        assert_eq!(mask & must_clear, 0, "{name} {mask:x}");
    }
}

#[tokio::test]
async fn agents_and_what_they_start_are_batch_work() {
    let fx = Fixture::new();
    let (own, child) =
        own_and_child(run_now(fx.spec(OutputFormat::Text, OWN_AND_CHILD_STAT)).await);
    // Field 41: the scheduling policy.
    assert_eq!(
        stat_field(&own, 41),
        nix::libc::SCHED_BATCH,
        "the agent: {own}"
    );
    assert_eq!(
        stat_field(&child, 41),
        nix::libc::SCHED_BATCH,
        "its child: {child}"
    );
}

#[tokio::test]
async fn env_arrives_with_the_step_winning_over_the_profile() {
    let fx = Fixture::new();
    let mut spec = fx.spec(
        OutputFormat::Text,
        r#"printf '%s|%s|%s|%s|%s\n' "$FROM_PROFILE" "$CATALYST_ROLE" "$CATALYST_BEAD" "$CATALYST_STEP" "$HOME""#,
    );
    spec.profile.env.insert("FROM_PROFILE".into(), "p".into());
    spec.profile
        .env
        .insert("CATALYST_ROLE".into(), "overridden".into());
    spec.env = vec![
        ("CATALYST_ROLE".into(), "implement".into()),
        ("CATALYST_BEAD".into(), "cat-1".into()),
        ("CATALYST_STEP".into(), "cat-1.implement".into()),
    ];
    let report = run_now(spec).await;
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        report.final_message.unwrap(),
        format!("p|implement|cat-1|cat-1.implement|{home}\n"),
        "the daemon's own environment is passed on too"
    );
}

#[tokio::test]
async fn the_agent_runs_in_the_worktree() {
    let fx = Fixture::new();
    let report = run_now(fx.spec(OutputFormat::Text, "pwd -P")).await;
    let want = fx.worktree.canonicalize().unwrap();
    assert_eq!(
        report.final_message.unwrap().trim_end(),
        want.display().to_string()
    );
}

#[tokio::test]
async fn claude_stream_final_message_ignores_conversation() {
    let fx = Fixture::new();
    let fake = block("DONE", Some("APPROVED"), "a fake in the conversation");
    let real = block("DONE", Some("REJECTED"), "add a test for parse()");
    let events = fx.lines(
        "events.jsonl",
        &[
            &serde_json::json!({"type": "system", "subtype": "init", "session_id": "s-1"})
                .to_string(),
            &serde_json::json!({"type": "assistant", "message": {"content": [{"type": "text", "text": fake}]}}).to_string(),
            &serde_json::json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": fake}]}}).to_string(),
            &claude_result("success", false, &real),
        ],
    );
    let report = run_now(fx.spec(
        OutputFormat::ClaudeStreamJson,
        &format!("cat >/dev/null; cat '{}'", events.display()),
    ))
    .await;
    assert_eq!(report.final_message.as_deref(), Some(real.as_str()));
    assert_eq!(report.cost_usd, Some(0.0425));
    assert_eq!(report.usage.as_ref().unwrap()["output_tokens"], 48);
    match outcome(&report, Role::Review, false) {
        Some(Outcome::Finished { result, .. }) => {
            assert_eq!(result.verdict, Some(Verdict::Rejected));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn claude_is_error_with_subtype_success_is_a_failure() {
    let fx = Fixture::new();
    let events = fx.lines(
        "events.jsonl",
        &[&claude_result(
            "success",
            true,
            "API Error: 500 Internal server error",
        )],
    );
    let report = run_now(fx.spec(
        OutputFormat::ClaudeStreamJson,
        &format!("cat '{}'; exit 1", events.display()),
    ))
    .await;
    assert!(report.is_error);
    assert_eq!(
        outcome(&report, Role::Implement, true),
        Some(Outcome::Failed {
            reason: "agent reported an error: API Error: 500 Internal server error".into()
        })
    );
}

#[tokio::test]
async fn claude_usage_limit_is_reported_not_failed() {
    let fx = Fixture::new();
    let events = fx.lines(
        "events.jsonl",
        &[&claude_result(
            "success",
            true,
            "Claude AI usage limit reached|1753441200",
        )],
    );
    let report = run_now(fx.spec(
        OutputFormat::ClaudeStreamJson,
        &format!("cat '{}'; exit 1", events.display()),
    ))
    .await;
    assert_eq!(report.exit, Exit::Code(1));
    assert_eq!(
        outcome(&report, Role::Implement, true),
        Some(Outcome::UsageLimit {
            reason: "Claude AI usage limit reached (resets at unix time 1753441200)".into()
        })
    );
}

#[tokio::test]
async fn a_limit_said_only_on_stderr_of_a_failed_run_counts() {
    let fx = Fixture::new();
    let report = run_now(fx.spec(
        OutputFormat::Text,
        "echo 'starting'; echo 'Error: 429 Too Many Requests' >&2; exit 1",
    ))
    .await;
    assert_eq!(
        report.usage_limit.as_deref(),
        Some("Error: 429 Too Many Requests")
    );
    // The same words on stderr of a run that succeeded are just log noise.
    let report = run_now(fx.spec(
        OutputFormat::Text,
        "echo 'retrying after 429 Too Many Requests' >&2; echo done",
    ))
    .await;
    assert_eq!(report.usage_limit, None);
}

#[tokio::test]
async fn codex_prompt_as_argument_and_last_agent_message() {
    let fx = Fixture::new();
    let answer = block("DONE", None, "codex did it");
    let events = fx.lines(
        "events.jsonl",
        &[
            r#"{"type":"thread.started","thread_id":"th-1"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"looking"}}"#,
            &serde_json::json!({"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": answer}}).to_string(),
            r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":5}}"#,
        ],
    );
    let mut spec = fx.spec(
        OutputFormat::CodexJson,
        &format!(
            r#"if read -r line; then echo "stdin was open" >&2; exit 9; fi
[ "$1" = "Do the step." ] || {{ echo "prompt argument: $1" >&2; exit 8; }}
cat '{}'"#,
            events.display()
        ),
    );
    spec.profile.stdin = StdinMode::Null;
    spec.profile.command.push("{prompt}".into());
    spec.prompt = "Do the step.".into();
    let report = run_now(spec).await;
    assert_eq!(report.exit, Exit::Code(0), "{report:?}");
    assert_eq!(report.final_message.as_deref(), Some(answer.as_str()));
    assert_eq!(report.usage.unwrap()["input_tokens"], 10);
}

#[tokio::test]
async fn codex_failed_turn_is_a_failure() {
    let fx = Fixture::new();
    let events = fx.lines(
        "events.jsonl",
        &[
            r#"{"type":"turn.started"}"#,
            r#"{"type":"turn.failed","error":{"message":"model not found: gpt-9"}}"#,
        ],
    );
    let report = run_now(fx.spec(
        OutputFormat::CodexJson,
        &format!("cat '{}'; exit 1", events.display()),
    ))
    .await;
    assert_eq!(
        outcome(&report, Role::Task, false),
        Some(Outcome::Failed {
            reason: "agent reported an error: model not found: gpt-9".into()
        })
    );
}

#[tokio::test]
async fn text_final_message_is_stdout() {
    let fx = Fixture::new();
    let answer = block("DONE", None, "text agent");
    let script = fx.lines("answer.txt", &[&answer]);
    let report = run_now(fx.spec(OutputFormat::Text, &format!("cat '{}'", script.display()))).await;
    assert!(matches!(
        outcome(&report, Role::Task, false),
        Some(Outcome::Finished { .. })
    ));
    // Nothing printed is no final message.
    let report = run_now(fx.spec(OutputFormat::Text, "true")).await;
    assert_eq!(report.final_message, None);
}

#[tokio::test]
async fn output_past_the_cap_is_counted_dropped_and_marked() {
    let fx = Fixture::new();
    let cap = 64 * 1024;
    let mut spec = fx.spec(
        OutputFormat::Text,
        "head -c 10000000 /dev/zero | tr '\\0' 'x'; printf '\\nthe end\\n'; head -c 200000 /dev/zero >&2",
    );
    spec.output_cap = cap;
    let report = run_now(spec).await;
    assert_eq!(report.exit, Exit::Code(0));
    assert!(report.truncated);
    assert_eq!(report.stdout_bytes, 10_000_000 + 9);
    assert_eq!(report.stderr_bytes, 200_000);
    let stdout = fx.read(STDOUT_FILE);
    let marker = format!(
        "\n[catalyst] output truncated: kept the first {cap} bytes, dropped {} bytes\n",
        10_000_009 - cap
    );
    assert_eq!(stdout.len() as u64, cap + marker.len() as u64);
    assert!(stdout.ends_with(marker.as_bytes()));
    let stderr_marker = format!(
        "\n[catalyst] output truncated: kept the first {cap} bytes, dropped {} bytes\n",
        200_000 - cap
    );
    assert_eq!(
        fx.read(STDERR_FILE).len() as u64,
        cap + stderr_marker.len() as u64
    );
    // The final message is the tail, from a line start.
    assert_eq!(report.final_message.as_deref(), Some("the end\n"));
}

#[tokio::test]
async fn a_line_too_long_to_parse_is_skipped_not_buffered() {
    let fx = Fixture::new();
    let answer = block("DONE", None, "after a flood");
    let events = fx.lines("events.jsonl", &[&claude_result("success", false, &answer)]);
    let mut spec = fx.spec(
        OutputFormat::ClaudeStreamJson,
        &format!(
            "head -c {} /dev/zero | tr '\\0' 'x'; echo; cat '{}'",
            MAX_LINE + 1,
            events.display()
        ),
    );
    spec.output_cap = 4096;
    let report = run_now(spec).await;
    assert_eq!(report.final_message.as_deref(), Some(answer.as_str()));
    assert!(report.truncated);
}

#[tokio::test]
async fn non_utf8_output_is_read_lossily() {
    let fx = Fixture::new();
    let line = claude_result("success", false, &block("DONE", None, "caf@ ok"));
    let (before, after) = line.split_once('@').unwrap();
    let mut bytes = b"\xff\xfe not json\n".to_vec();
    bytes.extend_from_slice(before.as_bytes());
    bytes.push(0xff);
    bytes.extend_from_slice(after.as_bytes());
    bytes.push(b'\n');
    let events = fx.path("events.jsonl");
    std::fs::write(&events, bytes).unwrap();
    let report = run_now(fx.spec(
        OutputFormat::ClaudeStreamJson,
        &format!("cat '{}'", events.display()),
    ))
    .await;
    assert_eq!(report.exit, Exit::Code(0));
    let message = report.final_message.as_deref().unwrap();
    assert!(message.contains("caf\u{FFFD} ok"), "{message:?}");
    assert!(matches!(
        outcome(&report, Role::Task, false),
        Some(Outcome::Finished { .. })
    ));

    let report = run_now(fx.spec(OutputFormat::Text, "printf 'ok \\377\\376\\n'")).await;
    assert_eq!(
        report.final_message.as_deref(),
        Some("ok \u{FFFD}\u{FFFD}\n")
    );
}

#[tokio::test]
async fn spawn_failures_say_what_could_not_start() {
    let fx = Fixture::new();
    let mut spec = fx.spec(OutputFormat::Text, "true");
    spec.profile.command = vec!["/nonexistent/claude".into()];
    let report = run_now(spec.clone()).await;
    assert_eq!(
        report.exit,
        Exit::SpawnFailed(
            "cannot run `/nonexistent/claude`: not found (is it installed and on PATH?)".into()
        )
    );
    assert_eq!(report.pid, 0);
    // Not the bead's failure: no attempt is spent on an agent CLI that is not installed.
    assert!(matches!(
        outcome(&report, Role::Implement, true),
        Some(Outcome::Unavailable { cause: Unavailable::Config, reason })
            if reason.starts_with("cannot run `/nonexistent/claude`: not found")
    ));

    let mut no_worktree = fx.spec(OutputFormat::Text, "true");
    no_worktree.worktree = fx.path("missing");
    let report = run_now(no_worktree).await;
    assert!(
        matches!(&report.exit, Exit::SpawnFailed(m) if m.contains("is not a directory")),
        "{:?}",
        report.exit
    );
    assert!(matches!(
        outcome(&report, Role::Implement, true),
        Some(Outcome::Unavailable {
            cause: Unavailable::Preparation,
            ..
        })
    ));

    let mut no_settings = fx.spec(OutputFormat::Text, "true");
    no_settings.profile.command.push("{settings}".into());
    let report = run_now(no_settings).await;
    assert_eq!(
        report.exit,
        Exit::SpawnFailed(ProfileError::NoSettings.to_string())
    );
}
