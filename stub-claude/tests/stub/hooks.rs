//! Hooks through `--settings`: PreToolUse decisions, Stop blocks, SessionStart context.

use serde_json::{json, Value};

use crate::fixture::{Stub, SENT_BACK_ONCE, STREAM};

/// A hook script that appends its stdin to `dump` in the temp folder, then runs `body`.
fn dumping_hook(stub: &Stub, name: &str, dump: &str, body: &str) -> String {
    let dump = stub.dir.path().join(dump);
    stub.hook(
        name,
        &format!(
            "input=$(cat)\nprintf '%s\\n' \"$input\" >> '{}'\n{body}\n",
            dump.display()
        ),
    )
}

fn settings(event: &str, matcher: Option<&str>, command: &str) -> String {
    let mut group = json!({"hooks": [{"type": "command", "command": command}]});
    if let Some(matcher) = matcher {
        group["matcher"] = json!(matcher);
    }
    json!({"hooks": {event: [group]}}).to_string()
}

fn with_settings(settings: &str) -> Vec<String> {
    let mut args: Vec<String> = STREAM.iter().map(|s| s.to_string()).collect();
    args.extend(["--settings".to_string(), settings.to_string()]);
    args
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn a_pre_tool_use_hook_that_exits_2_denies_with_its_stderr() {
    let mut stub = Stub::without_scenario();
    let outside = stub.dir.path().join("outside.txt");
    stub.set_scenario(&format!(
        r#"
        [[rule]]
        role = "implement"
        responses = [{{ tools = [
          {{ name = "Write", input = {{ file_path = "{}", content = "escaped" }} }},
          {{ name = "Write", input = {{ file_path = "inside.txt", content = "fine" }} }},
          {{ name = "Bash", input = {{ command = "echo ran > bash.txt" }} }},
        ] }}]
        "#,
        outside.display()
    ));
    let guard = dumping_hook(
        &stub,
        "guard.sh",
        "pre.jsonl",
        "case \"$input\" in *'\"file_path\":\"/'*) echo 'outside the worktree' >&2; exit 2;; esac\nexit 0",
    );
    let args = with_settings(&settings("PreToolUse", Some("Write|Edit"), &guard));
    let run = stub.run("implement", &strs(&args));
    assert_eq!(run.code(), Some(0), "{}", run.stderr);

    assert!(!outside.exists(), "the denied write must not happen");
    assert_eq!(stub.read("inside.txt"), "fine");
    assert_eq!(stub.read("bash.txt"), "ran\n");

    let tools = &stub.invocations()[0].tools;
    let decisions: Vec<_> = tools
        .iter()
        .map(|t| (t.name.as_str(), t.allowed, t.reason.as_deref()))
        .collect();
    assert_eq!(
        decisions,
        [
            ("Write", false, Some("outside the worktree")),
            ("Write", true, None),
            ("Bash", true, None),
        ]
    );

    let events = run.events();
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "user")
        .map(|e| &e["message"]["content"][0])
        .collect();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[0]["content"], "outside the worktree");
    assert_eq!(results[1]["is_error"], false);
    let uses: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "assistant")
        .map(|e| &e["message"]["content"][0])
        .filter(|c| c["type"] == "tool_use")
        .collect();
    assert_eq!(uses.len(), 3);
    assert_eq!(uses[0]["id"], results[0]["tool_use_id"]);
    let result = run.result();
    assert_eq!(
        result["permission_denials"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(result["num_turns"], 4);

    // The hook saw Claude Code's input; Bash did not match `Write|Edit`.
    let inputs = stub.dumped("pre.jsonl");
    assert_eq!(inputs.len(), 2);
    let first = &inputs[0];
    assert_eq!(first["hook_event_name"], "PreToolUse");
    assert_eq!(first["tool_name"], "Write");
    assert_eq!(
        first["tool_input"]["file_path"],
        outside.display().to_string()
    );
    assert_eq!(first["session_id"], result["session_id"]);
    assert_eq!(first["tool_use_id"], uses[0]["id"]);
    assert!(first["cwd"].as_str().expect("cwd").ends_with("work"));
    assert!(!first["transcript_path"]
        .as_str()
        .expect("transcript")
        .is_empty());
}

#[test]
fn pre_tool_use_json_decisions_and_non_blocking_errors() {
    let stub = Stub::new(
        r#"
        [[rule]]
        responses = [{ tools = [
          { name = "Write", input = { file_path = "a.txt", content = "a" } },
          { name = "Edit", input = { file_path = "a.txt", old_string = "a", new_string = "b" } },
          { name = "Read", input = { file_path = "a.txt" } },
        ] }]
        "#,
    );
    std::fs::write(stub.work.join("a.txt"), "a").expect("seed");
    let hook = stub.hook(
        "policy.sh",
        r#"input=$(cat)
case "$input" in
  *'"tool_name":"Write"'*)
    echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"reviewers are read-only"}}';;
  *'"tool_name":"Edit"'*) echo 'hook crashed' >&2; exit 1;;
  *) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}';;
esac
"#,
    );
    let args = with_settings(&settings("PreToolUse", None, &hook));
    let run = stub.run("review", &strs(&args));
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    let decisions: Vec<_> = stub.invocations()[0]
        .tools
        .iter()
        .map(|t| (t.name.clone(), t.allowed, t.reason.clone()))
        .collect();
    assert_eq!(
        decisions,
        [
            (
                "Write".into(),
                false,
                Some("reviewers are read-only".into())
            ),
            ("Edit".into(), true, None),
            ("Read".into(), true, None),
        ]
    );
    // The write was denied, the edit (whose hook failed without blocking) happened.
    assert_eq!(stub.read("a.txt"), "b");
}

#[test]
fn an_ask_is_denied_in_print_mode_unless_permissions_are_skipped() {
    let stub = Stub::new(
        "[[rule]]\nresponses = [{ tools = [{ name = \"Write\", input = { file_path = \"w.txt\", content = \"w\" } }] }]\n",
    );
    let hook = stub.hook(
        "ask.sh",
        "cat >/dev/null\necho '{\"hookSpecificOutput\":{\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"sure?\"}}'\n",
    );
    let args = with_settings(&settings("PreToolUse", Some("*"), &hook));
    stub.run("implement", &strs(&args));
    assert!(!stub.exists("w.txt"));
    let mut skip = args.clone();
    skip.push("--dangerously-skip-permissions".into());
    stub.run("implement", &strs(&skip));
    assert!(stub.exists("w.txt"));
}

#[test]
fn the_tool_flags_refuse_before_any_hook_runs() {
    let stub = Stub::new(
        "[[rule]]\nresponses = [{ tools = [{ name = \"Write\", input = { file_path = \"w.txt\", content = \"w\" } }] }]\n",
    );
    let hook = dumping_hook(&stub, "h.sh", "pre.jsonl", "exit 0");
    let mut args = with_settings(&settings("PreToolUse", None, &hook));
    args.extend(["--disallowedTools".into(), "Write".into(), "Edit".into()]);
    let run = stub.run("review", &strs(&args));
    assert_eq!(run.code(), Some(0));
    assert!(!stub.exists("w.txt"));
    assert!(stub.dumped("pre.jsonl").is_empty());
    let tool = &stub.invocations()[0].tools[0];
    assert!(!tool.allowed);
    assert!(tool
        .reason
        .as_deref()
        .unwrap_or("")
        .contains("No such tool available: Write"));
}

#[test]
fn a_stop_block_sends_the_agent_back_for_after_stop_block() {
    let stub = Stub::new(SENT_BACK_ONCE);
    let copy = stub.dir.path().join("transcript-copy.jsonl");
    let hook = dumping_hook(
        &stub,
        "stop.sh",
        "stop.jsonl",
        &format!(
            r#"t=$(printf '%s' "$input" | sed -n 's/.*"transcript_path":"\([^"]*\)".*/\1/p')
case "$input" in
  *'"stop_hook_active":false'*)
    cp "$t" '{}'
    echo '{{"decision":"block","reason":"end with a STEP-RESULT block"}}';;
esac
exit 0"#,
            copy.display()
        ),
    );
    let args = with_settings(&settings("Stop", None, &hook));
    let run = stub.run("implement", &strs(&args));
    assert_eq!(run.code(), Some(0), "{}", run.stderr);

    let result = run.result();
    assert!(result["result"]
        .as_str()
        .expect("text")
        .contains("SUMMARY: now with a block"));
    assert_eq!(result["total_cost_usd"], 1.5);
    assert_eq!(result["num_turns"], 2);
    assert_eq!(stub.read("fixed.txt"), "1");
    let events = run.events();
    assert!(events.iter().any(|e| e["type"] == "user"
        && e["message"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("end with a STEP-RESULT block"))));

    let calls = stub.dumped("stop.jsonl");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["hook_event_name"], "Stop");
    assert_eq!(calls[0]["stop_hook_active"], false);
    assert_eq!(calls[0]["last_assistant_message"], "I am done.");
    assert_eq!(calls[1]["stop_hook_active"], true);
    assert!(calls[1]["last_assistant_message"]
        .as_str()
        .is_some_and(|m| m.contains("now with a block")));
    let transcript = std::fs::read_to_string(&copy).expect("the hook copied the transcript");
    assert!(transcript.contains("I am done.") && transcript.contains("Do the step."));

    let inv = &stub.invocations()[0];
    assert_eq!(inv.stop_blocks, ["end with a STEP-RESULT block"]);
}

#[test]
fn a_second_stop_block_is_ignored_and_the_first_answer_stands() {
    let stub = Stub::new("[[rule]]\nresponses = [{ summary = \"first answer\" }]\n");
    let hook = dumping_hook(&stub, "stop.sh", "stop.jsonl", "echo 'not yet' >&2\nexit 2");
    let args = with_settings(&settings("Stop", None, &hook));
    let run = stub.run("implement", &strs(&args));
    assert_eq!(run.code(), Some(0));
    assert_eq!(run.summary(), "first answer");
    assert_eq!(stub.dumped("stop.jsonl").len(), 2);
    let blocks: Vec<_> = stub_claude::read_log(&stub.log)
        .expect("log")
        .into_iter()
        .filter_map(|e| match e.event {
            stub_claude::LogEvent::StopBlock {
                reason,
                stop_hook_active,
                ignored,
            } => Some((reason, stop_hook_active, ignored)),
            _ => None,
        })
        .collect();
    assert_eq!(
        blocks,
        [
            ("not yet".into(), false, false),
            ("not yet".into(), true, true)
        ]
    );
}

#[test]
fn session_start_context_is_logged_and_settings_may_be_a_file() {
    let stub = Stub::without_scenario();
    let json_hook = stub.hook(
        "start.sh",
        "cat >/dev/null\nprintf '{\"hookSpecificOutput\":{\"hookEventName\":\"SessionStart\",\"additionalContext\":\"step %s\"}}' \"$CATALYST_STEP\"\n",
    );
    let plain_hook = stub.hook("plain.sh", "cat >/dev/null\necho plain context\n");
    let settings = json!({"hooks": {"SessionStart": [
        {"hooks": [{"type": "command", "command": json_hook}]},
        {"matcher": "startup", "hooks": [{"type": "command", "command": plain_hook}]},
        {"matcher": "resume", "hooks": [{"type": "command", "command": "echo never"}]},
    ]}});
    let path = stub.dir.path().join("settings.json");
    std::fs::write(&path, settings.to_string()).expect("write settings");
    let args = with_settings(&path.display().to_string());
    let run = stub.run("review", &strs(&args));
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert_eq!(
        stub.invocations()[0].additional_context,
        ["step cat-1.review", "plain context"]
    );

    let bad = with_settings("{not json");
    let run = stub.run("review", &strs(&bad));
    assert_eq!(run.code(), Some(1));
    assert!(run.stderr.contains("--settings"));
}
