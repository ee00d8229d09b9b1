//! Agent output read back for people: Claude Code's stream-json and Codex's exec JSON.

use serde_json::json;

use crate::domain::agent::transcript::{Entry, Transcript};

fn read(lines: &[serde_json::Value]) -> (Vec<Entry>, Option<Entry>) {
    let mut t = Transcript::new();
    let entries = lines.iter().flat_map(|l| t.line(&l.to_string())).collect();
    (entries, t.finish())
}

fn call(name: &str, input: &str) -> Entry {
    Entry::ToolCall {
        name: name.into(),
        input: input.into(),
    }
}

#[test]
fn a_claude_run_reads_as_messages_tool_calls_results_and_its_end() {
    let lines = [
        json!({"type": "system", "subtype": "init", "model": "claude-sonnet-5", "cwd": "/w"}),
        json!({"type": "assistant", "message": {"content": [
            {"type": "thinking", "thinking": "Tests first."},
            {"type": "text", "text": "I'll run the tests."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cargo  test\n--quiet"}},
        ]}}),
        json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": false},
        ]}}),
        json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": "t2", "name": "Edit", "input": {"file_path": "src/lib.rs", "old_string": "a", "new_string": "b"}},
            {"type": "tool_use", "id": "t3", "name": "TodoWrite", "input": {"todos": [1]}},
        ]}}),
        json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "no such file"}], "is_error": true},
            {"type": "text", "text": "Stop hook feedback: end with a STEP-RESULT block"},
        ]}}),
        json!({"type": "stream_event", "event": {}}),
        json!({"type": "result", "subtype": "success", "is_error": false, "result": "Done.", "total_cost_usd": 0.0123}),
    ];
    let (entries, end) = read(&lines);
    let Some(Entry::End(parsed)) = entries.last() else {
        panic!("the run's end comes last: {entries:?}")
    };
    assert_eq!(parsed.final_message.as_deref(), Some("Done."));
    assert_eq!(parsed.cost_usd, Some(0.0123));
    assert!(!parsed.is_error);
    assert_eq!(
        entries[..entries.len() - 1],
        [
            Entry::Started {
                model: Some("claude-sonnet-5".into())
            },
            Entry::Thinking("Tests first.".into()),
            Entry::Message("I'll run the tests.".into()),
            call("Bash", "cargo test --quiet"),
            Entry::ToolResult {
                text: "ok".into(),
                is_error: false
            },
            call("Edit", "src/lib.rs"),
            call("TodoWrite", r#"{"todos":[1]}"#),
            Entry::ToolResult {
                text: "no such file".into(),
                is_error: true
            },
            Entry::Notice("Stop hook feedback: end with a STEP-RESULT block".into()),
        ]
    );
    assert_eq!(end, None, "the end was read already");
}

#[test]
fn a_run_cut_short_ends_as_the_daemon_reads_it() {
    let retry = json!({"type": "system", "subtype": "api_retry", "error_status": 429});
    let (entries, end) = read(&[retry]);
    assert_eq!(
        entries,
        [Entry::Notice(
            "the API answered 429; Claude Code retries".into()
        )]
    );
    let Some(Entry::End(parsed)) = end else {
        panic!("an end: {end:?}")
    };
    assert_eq!(parsed.final_message, None);
    assert!(parsed.usage_limit.is_some(), "{parsed:?}");
}

#[test]
fn a_codex_run_reads_the_same_way() {
    let lines = [
        json!({"type": "thread.started", "thread_id": "t"}),
        json!({"type": "turn.started"}),
        json!({"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "Look first."}}),
        json!({"type": "item.started", "item": {"id": "i1", "type": "command_execution", "command": "bash -lc ls", "status": "in_progress"}}),
        json!({"type": "item.completed", "item": {"id": "i1", "type": "command_execution", "command": "bash -lc ls", "aggregated_output": "a.txt\n", "exit_code": 0, "status": "completed"}}),
        json!({"type": "item.completed", "item": {"id": "i2", "type": "command_execution", "command": "false", "aggregated_output": "", "exit_code": 1, "status": "failed"}}),
        json!({"type": "item.completed", "item": {"id": "i3", "type": "file_change", "changes": [{"path": "a.txt", "kind": "add"}]}}),
        json!({"type": "error", "message": "Reconnecting... 1/5"}),
        json!({"type": "item.completed", "item": {"id": "i4", "type": "agent_message", "text": "All done."}}),
        json!({"type": "turn.completed", "usage": {"input_tokens": 5}}),
    ];
    let (entries, end) = read(&lines);
    let Some(Entry::End(parsed)) = entries.last() else {
        panic!("the run's end comes last: {entries:?}")
    };
    assert_eq!(parsed.final_message.as_deref(), Some("All done."));
    assert_eq!(
        entries[..entries.len() - 1],
        [
            Entry::Started { model: None },
            Entry::Thinking("Look first.".into()),
            call("shell", "bash -lc ls"),
            Entry::ToolResult {
                text: "a.txt\n".into(),
                is_error: false
            },
            call("shell", "false"),
            Entry::ToolResult {
                text: "exit code 1\n".into(),
                is_error: true
            },
            call("file_change", "add a.txt"),
            Entry::Notice("Reconnecting... 1/5".into()),
            Entry::Message("All done.".into()),
        ]
    );
    assert_eq!(end, None);

    let failed = [json!({"type": "turn.failed", "error": {"message": "stream disconnected"}})];
    let (entries, _) = read(&failed);
    let [Entry::End(parsed)] = entries.as_slice() else {
        panic!("{entries:?}")
    };
    assert!(parsed.is_error && parsed.error.as_deref() == Some("stream disconnected"));
}

#[test]
fn lines_of_no_known_format_are_plain_text() {
    let mut t = Transcript::new();
    assert_eq!(t.line("compiling…"), [Entry::Text("compiling…".into())]);
    assert_eq!(t.line(""), []);
    assert_eq!(
        t.line(r#"{"type": "mystery"}"#),
        [Entry::Text(r#"{"type": "mystery"}"#.into())]
    );
    assert_eq!(t.finish(), None, "plain text has no end to read");
}
