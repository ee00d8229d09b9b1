//! The command line and the three output formats.

use serde_json::Value;

use crate::fixture::{Stub, STREAM};

#[test]
fn stream_json_is_init_then_messages_then_the_result() {
    let stub = Stub::new("[[rule]]\nresponses = [{ summary = \"done\", cost_usd = 0.25 }]\n");
    let mut args = STREAM.to_vec();
    args.extend(["--session-id", "11111111-2222-4333-8444-555555555555"]);
    let run = stub.run("implement", &args);
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    let events = run.events();
    let init = &events[0];
    assert_eq!(
        (init["type"].as_str(), init["subtype"].as_str()),
        (Some("system"), Some("init"))
    );
    assert_eq!(init["model"], "sonnet");
    assert!(init["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .any(|t| t == "Write"));
    assert!(init["cwd"].as_str().expect("cwd").ends_with("work"));
    let assistant = &events[1];
    assert_eq!(assistant["type"], "assistant");
    assert_eq!(assistant["message"]["content"][0]["type"], "text");
    let result = events.last().expect("result");
    assert_eq!(result["type"], "result");
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["num_turns"], 1);
    assert_eq!(result["total_cost_usd"], 0.25);
    assert!(
        result["usage"]["input_tokens"]
            .as_u64()
            .expect("input tokens")
            > 0
    );
    assert!(
        result["usage"]["output_tokens"]
            .as_u64()
            .expect("output tokens")
            > 0
    );
    assert!(result["duration_ms"].is_u64());
    assert_eq!(result["result"], assistant["message"]["content"][0]["text"]);
    for event in &events {
        assert_eq!(event["session_id"], "11111111-2222-4333-8444-555555555555");
    }
}

#[test]
fn json_is_the_result_object_alone() {
    let stub = Stub::without_scenario();
    let run = stub.run("review", &["-p", "--output-format", "json"]);
    let text = run.stdout_text();
    assert_eq!(text.lines().count(), 1);
    let v: Value = serde_json::from_str(&text).expect("one JSON object");
    assert_eq!(v["type"], "result");
    assert!(v["result"]
        .as_str()
        .expect("text")
        .contains("VERDICT: APPROVED"));
}

#[test]
fn text_is_the_final_message_alone() {
    let stub = Stub::new("[[rule]]\nresponses = [{ raw = \"just this\" }]\n");
    let run = stub.run("implement", &["-p"]);
    assert_eq!(run.stdout_text(), "just this\n");
    let run = stub.run("implement", &["--print", "--output-format", "text"]);
    assert_eq!(run.stdout_text(), "just this\n");
}

#[test]
fn partial_messages_stream_deltas_first() {
    let stub = Stub::without_scenario();
    let mut args = STREAM.to_vec();
    args.push("--include-partial-messages");
    let events = stub.run("implement", &args).events();
    assert_eq!(events[1]["type"], "stream_event");
    assert_eq!(events[1]["event"]["delta"]["type"], "text_delta");
}

#[test]
fn command_line_mistakes_fail_like_claude() {
    let stub = Stub::without_scenario();
    let cases: &[(&[&str], &str)] = &[
        (&["-p", "--bogus"], "error: unknown option '--bogus'"),
        (
            &["-p", "--output-format", "stream-json"],
            "Error: When using --print, --output-format=stream-json requires --verbose",
        ),
        (
            &["-p", "--output-format", "xml"],
            "argument 'xml' is invalid",
        ),
        (&["--output-format", "json"], "only print mode"),
    ];
    for (args, expected) in cases {
        let run = stub.run("implement", args);
        assert_eq!(run.code(), Some(1), "{args:?}");
        assert!(run.stderr.contains(expected), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}");
    }
    let empty = stub.run_cmd(stub.command("implement", &["-p"]), "");
    assert_eq!(empty.code(), Some(1));
    assert!(empty.stderr.contains("Input must be provided"));
    // Each refusal is in the log, so a test with a wrong profile can see why.
    let log = stub.invocations();
    assert_eq!(log.len(), cases.len() + 1);
    for (inv, (args, expected)) in log.iter().zip(cases) {
        assert_eq!(inv.argv, *args);
        assert_eq!(inv.role(), "implement");
        assert!(inv.errors[0].contains(expected), "{:?}", inv.errors);
        assert_eq!(inv.exit_code(), Some(1));
    }
}

#[test]
fn version_and_help() {
    let stub = Stub::without_scenario();
    let version = stub.run("", &["--version"]);
    assert_eq!(version.stdout_text(), "2.1.197 (Claude Code)\n");
    let help = stub.run("", &["--help"]);
    assert!(help.stdout_text().contains("--disallowedTools"));
}

#[test]
fn the_prompt_comes_from_stdin_or_a_trailing_argument() {
    let stub = Stub::without_scenario();
    stub.run_cmd(stub.command("refine", &["-p"]), "from stdin");
    stub.run_cmd(
        stub.command("refine", &["-p", "--model", "opus", "from argv"]),
        "ignored",
    );
    let line = serde_json::json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "from stream-json"}]}});
    stub.run_cmd(
        stub.command("refine", &["-p", "--input-format", "stream-json"]),
        &format!("{line}\n"),
    );
    let prompts: Vec<String> = stub.invocations().into_iter().map(|i| i.prompt).collect();
    assert_eq!(prompts, ["from stdin", "from argv", "from stream-json"]);
}

#[test]
fn tool_flags_remove_tools_from_init() {
    let stub = Stub::without_scenario();
    let mut args = STREAM.to_vec();
    args.extend(["--tools", "Read,Grep", "--disallowedTools", "Grep"]);
    let events = stub.run("review", &args).events();
    assert_eq!(events[0]["tools"], serde_json::json!(["Read"]));
}
