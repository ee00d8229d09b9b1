//! An agent holding a conversation on stdin: its answers judged as they come, one without a
//! valid result block sent back once, stdin closed otherwise.

use super::*;
use crate::domain::agent::attempt::{ToolRecord, STOP_TOOL, TOOL_LOG_FILE};
use crate::domain::agent::conversation::Conversation;
use crate::domain::model::Role;

/// A `result` event line whose final message is `text`.
fn result(text: &str) -> String {
    serde_json::json!({"type": "result", "subtype": "success", "is_error": false, "result": text})
        .to_string()
}

/// A spec holding a conversation with `body`, as an implementer.
fn talking(fx: &Fixture, body: &str) -> RunSpec {
    let mut spec = fx.spec(OutputFormat::ClaudeStreamJson, body);
    spec.profile.stdin = StdinMode::Conversation;
    // What Claude Code is told; the script ignores its arguments.
    spec.profile
        .command
        .extend(["--input-format".into(), "stream-json".into()]);
    spec.conversation = Some(Conversation::new(Role::Implement, "THE CONTRACT"));
    // A daemon that never answered would leave the agent waiting on its stdin until this.
    spec.stall_timeout = Duration::from_secs(20);
    spec
}

#[tokio::test]
async fn an_answer_without_a_block_is_sent_back_once_and_the_next_one_ends_the_run() {
    let fx = Fixture::new();
    let good = block("DONE", None, "fixed the block");
    let body = format!(
        r#"read -r first; printf '%s\n' "$first" > "$DIR/first"
printf '%s\n' '{}'
read -r second || exit 7
printf '%s\n' "$second" > "$DIR/second"
printf '%s\n' '{}'
if read -r third; then echo "stdin still open: $third" >&2; exit 9; fi"#,
        result("I did it, no block."),
        result(&good),
    );
    let report = run_now(talking(&fx, &body)).await;
    assert_eq!(report.exit, Exit::Code(0), "{report:?}");
    assert_eq!(report.final_message.as_deref(), Some(good.as_str()));
    let first: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.path("first")).expect("first")).expect("json");
    assert_eq!(first["type"], "user");
    assert_eq!(first["message"]["content"], "Do the step.\n");
    let second: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.path("second")).expect("second")).expect("json");
    let sent_back = second["message"]["content"].as_str().expect("text");
    assert!(sent_back.contains("THE CONTRACT"), "{sent_back}");
    let log = String::from_utf8(fx.read(TOOL_LOG_FILE)).expect("utf-8");
    let records: Vec<ToolRecord> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    assert!(
        matches!(&records[..], [r] if r.tool == STOP_TOOL && !r.allowed),
        "{records:?}"
    );
}

#[tokio::test]
async fn a_valid_answer_closes_stdin_and_is_not_logged() {
    let fx = Fixture::new();
    let good = block("DONE", None, "did it");
    let body = format!(
        r#"read -r first
printf '%s\n' '{}'
if read -r more; then echo "sent: $more" >&2; exit 9; fi"#,
        result(&good),
    );
    let report = run_now(talking(&fx, &body)).await;
    assert_eq!(report.exit, Exit::Code(0), "{report:?}");
    assert_eq!(report.final_message.as_deref(), Some(good.as_str()));
    assert!(!fx.run_dir.join(TOOL_LOG_FILE).exists());
}

#[tokio::test]
async fn without_a_judge_the_first_answer_stands() {
    let fx = Fixture::new();
    let body = format!(
        r#"read -r first
printf '%s\n' '{}'
if read -r more; then echo "sent: $more" >&2; exit 9; fi"#,
        result("no block at all"),
    );
    let mut spec = talking(&fx, &body);
    spec.conversation = None;
    let report = run_now(spec).await;
    assert_eq!(report.exit, Exit::Code(0), "{report:?}");
    assert_eq!(report.final_message.as_deref(), Some("no block at all"));
}

/// A Claude Code stdout parser that tells each turn's end on the returned receiver.
fn parser_telling_turns() -> (
    crate::daemon::agent::events::StdoutParser,
    tokio::sync::mpsc::UnboundedReceiver<crate::daemon::agent::events::TurnEnd>,
) {
    let (turns, ends) = tokio::sync::mpsc::unbounded_channel();
    let parser = crate::daemon::agent::events::StdoutParser::new(
        OutputFormat::ClaudeStreamJson,
        1 << 20,
        CancellationToken::new(),
    )
    .with_turns(turns);
    (parser, ends)
}

/// Every `result` is told to the conversation as it is read, two in one read included.
#[test]
fn the_stdout_parser_tells_each_result_it_reads() {
    use crate::daemon::agent::output::Consumer;
    let (mut parser, mut ends) = parser_telling_turns();
    let error =
        serde_json::json!({"type": "result", "subtype": "error_max_turns", "is_error": false})
            .to_string();
    let chunk = format!(
        "{}\n{}\n{}\n",
        r#"{"type":"assistant","message":{"content":[]}}"#,
        result("first"),
        error
    );
    parser.feed(chunk.as_bytes());
    let first = ends.try_recv().expect("the first result");
    assert_eq!(
        (first.message.as_deref(), first.is_error),
        (Some("first"), false)
    );
    let second = ends
        .try_recv()
        .expect("the second result, from the same read");
    assert_eq!((second.message, second.is_error), (None, true));
    assert!(ends.try_recv().is_err(), "nothing else is a result");
}

#[test]
fn a_result_too_long_to_parse_still_ends_the_turn() {
    use crate::daemon::agent::events::MAX_LINE;
    use crate::daemon::agent::output::Consumer;
    let (mut parser, mut ends) = parser_telling_turns();
    let huge = "x".repeat(MAX_LINE);
    let assistant = format!(r#"{{"type":"assistant","message":{{"content":"{huge}"}}}}"#);
    parser.feed(format!("{assistant}\n").as_bytes());
    assert!(
        ends.try_recv().is_err(),
        "a long line of another kind is no turn's end"
    );
    let result = format!(r#"{{"type":"result","subtype":"success","result":"{huge}"}}"#);
    for piece in result.as_bytes().chunks(1 << 16) {
        parser.feed(piece);
    }
    parser.feed(b"\n");
    let end = ends.try_recv().expect("the cut result ends the turn");
    assert_eq!((end.message, end.is_error), (None, false));
}
