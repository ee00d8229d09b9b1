//! Conversations under `--input-format stream-json`: a `result` per turn, stdin kept open for
//! follow-up user messages, the session ending when stdin does.

use serde_json::{json, Value};

use crate::fixture::{Conversation, Stub, SENT_BACK_ONCE, STREAM};

/// catalyst's stream-json flags, with the prompt and follow-ups as stream-json on stdin.
fn args() -> Vec<&'static str> {
    let mut args = STREAM.to_vec();
    args.extend(["--input-format", "stream-json"]);
    args
}

/// A conversation as an implementer, its prompt sent and its first turn read: the events up
/// to that turn's `result`.
fn opened(stub: &Stub) -> (Conversation, Vec<Value>) {
    let mut talk = stub.converse("implement", &args());
    talk.send("Do the step.");
    let first = talk.until_result();
    (talk, first)
}

fn text(event: &Value) -> &str {
    event["result"].as_str().expect("a result text")
}

/// The texts of the assistant messages among `events`.
fn assistant_texts(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["type"] == "assistant")
        .filter_map(|e| e["message"]["content"][0]["text"].as_str())
        .collect()
}

fn end_lines(stub: &Stub) -> usize {
    stub_claude::read_log(&stub.log)
        .expect("read the log")
        .iter()
        .filter(|e| matches!(e.event, stub_claude::LogEvent::End(_)))
        .count()
}

const FOLLOW_UP: &str = "your final message has no valid result block, send it again";

#[test]
fn a_follow_up_is_answered_by_after_stop_block_and_closing_stdin_ends_the_session() {
    let stub = Stub::new(SENT_BACK_ONCE);
    let mut talk = stub.converse("implement", &args());
    // The first message in text blocks, as catalyst may write it.
    talk.write(&Conversation::user_line(
        json!([{"type": "text", "text": "Do the step."}]),
    ));
    let first = talk.until_result();
    let result = first.last().expect("the result");
    assert_eq!(text(result), "I am done.");
    assert_eq!(result["num_turns"], 1);
    assert_eq!(result["total_cost_usd"], 1.0);
    assert_eq!(first[0]["subtype"], "init");
    assert!(talk.running(), "stdin is open: the stub waits for more");
    assert!(!stub.exists("fixed.txt"), "no Stop hook asked for it yet");
    let inv = &stub.invocations()[0];
    assert_eq!(inv.prompt, "Do the step.");
    assert!(inv.end.is_none(), "the session has not ended");

    talk.send(FOLLOW_UP);
    let second = talk.until_result();
    let result = second.last().expect("the second result");
    assert!(
        text(result).ends_with("SUMMARY: now with a block\n---END-RESULT---"),
        "{result}"
    );
    assert_eq!(assistant_texts(&second), [text(result)]);
    assert_eq!(result["num_turns"], 2);
    assert_eq!(result["total_cost_usd"], 1.5);
    assert_eq!(result["is_error"], false);
    assert_eq!(result["session_id"], first[0]["session_id"]);
    assert_eq!(stub.read("fixed.txt"), "1");

    let ended = talk.finish();
    assert_eq!(ended.status.code(), Some(0), "{}", ended.stderr);
    assert!(
        ended.rest.is_empty(),
        "nothing after stdin closed: {:?}",
        ended.rest
    );
    let inv = &stub.invocations()[0];
    assert_eq!(inv.follow_ups, [FOLLOW_UP]);
    let end = inv.end.as_ref().expect("the end line");
    assert_eq!(end.exit_code, 0);
    assert_eq!(end.num_turns, 2);
    assert_eq!(end.cost_usd, 1.5);
    assert_eq!(end.result, text(result));
    assert_eq!(end_lines(&stub), 1);
}

#[test]
fn closing_stdin_after_the_first_result_ends_with_that_result() {
    let stub = Stub::new("[[rule]]\nresponses = [{ summary = \"done\" }]\n");
    let (talk, first) = opened(&stub);
    let ended = talk.finish();
    assert_eq!(ended.status.code(), Some(0), "{}", ended.stderr);
    assert!(ended.rest.is_empty(), "{:?}", ended.rest);
    let results = first.iter().filter(|e| e["type"] == "result").count();
    assert_eq!(results, 1);
    let inv = &stub.invocations()[0];
    assert!(inv.follow_ups.is_empty());
    let end = inv.end.as_ref().expect("the end line");
    assert_eq!((end.exit_code, end.num_turns), (0, 1));
    assert_eq!(end.result, text(first.last().expect("the result")));
    assert_eq!(end_lines(&stub), 1);
}

#[test]
fn a_follow_up_without_after_stop_block_gets_the_same_final_message_again() {
    let stub = Stub::new(
        "[[rule]]\nresponses = [{ summary = \"only answer\", cost_usd = 0.25, append = { \"count.txt\" = \"x\" } }]\n",
    );
    let (mut talk, first) = opened(&stub);
    let answer = text(first.last().expect("the result")).to_string();
    assert!(answer.contains("SUMMARY: only answer"), "{answer}");

    // Lines that are not user messages are skipped, as they are before the prompt.
    talk.write("not json\n{\"type\":\"control_request\"}\n");
    talk.send("again");
    let second = talk.until_result();
    let result = second.last().expect("the second result");
    assert_eq!(text(result), answer);
    assert_eq!(assistant_texts(&second), [answer.as_str()]);
    assert_eq!(result["num_turns"], 2);
    assert_eq!(
        result["total_cost_usd"], 0.25,
        "nothing acted out, nothing spent"
    );

    talk.send("and again");
    let third = talk.until_result();
    assert_eq!(text(third.last().expect("the third result")), answer);
    assert_eq!(third.last().expect("result")["num_turns"], 3);
    assert_eq!(stub.read("count.txt"), "x", "the side effects ran once");

    let ended = talk.finish();
    assert_eq!(ended.status.code(), Some(0), "{}", ended.stderr);
    let inv = &stub.invocations()[0];
    assert_eq!(inv.follow_ups, ["again", "and again"]);
    assert_eq!(inv.end.as_ref().map(|e| e.num_turns), Some(3));
    assert_eq!(end_lines(&stub), 1);
}

#[test]
fn after_stop_block_used_by_a_stop_hook_is_not_played_again() {
    let stub = Stub::new(
        r#"
        [[rule]]
        responses = [{ raw = "I am done.",
                       after_stop_block = { summary = "with a block", append = { "n.txt" = "1" } } }]
        "#,
    );
    let hook = stub.hook(
        "stop.sh",
        "case \"$(cat)\" in *'\"stop_hook_active\":false'*) echo '{\"decision\":\"block\",\"reason\":\"add the block\"}';; esac\n",
    );
    let settings =
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": hook}]}]}}).to_string();
    let mut args = args();
    args.extend(["--settings", &settings]);
    let mut talk = stub.converse("implement", &args);
    talk.send("Do the step.");
    let first = text(talk.until_result().last().expect("the result")).to_string();
    assert!(first.contains("SUMMARY: with a block"), "{first}");

    talk.send(FOLLOW_UP);
    let second = talk.until_result();
    assert_eq!(text(second.last().expect("the second result")), first);
    let ended = talk.finish();
    assert_eq!(ended.status.code(), Some(0), "{}", ended.stderr);
    assert_eq!(stub.read("n.txt"), "1");
    let inv = &stub.invocations()[0];
    assert_eq!(inv.stop_blocks, ["add the block"]);
    assert_eq!(inv.follow_ups, [FOLLOW_UP]);
}

#[test]
fn the_exit_code_is_the_last_turns() {
    let stub = Stub::new(
        "[[rule]]\nresponses = [{ summary = \"failed\", exit_code = 3, after_stop_block = { summary = \"fixed\" } }]\n",
    );
    let (mut talk, _) = opened(&stub);
    talk.send(FOLLOW_UP);
    let second = talk.until_result();
    assert!(text(second.last().expect("the result")).contains("SUMMARY: fixed"));
    let ended = talk.finish();
    assert_eq!(ended.status.code(), Some(0), "{}", ended.stderr);

    // Without the follow-up, the first turn's code.
    let (talk, _) = opened(&stub);
    assert_eq!(talk.finish().status.code(), Some(3));
}

#[test]
fn a_usage_limit_ends_the_session_with_stdin_still_open() {
    let stub = Stub::new("[[rule]]\nresponses = [{ usage_limit = true }]\n");
    let (talk, first) = opened(&stub);
    assert_eq!(first.last().expect("the result")["is_error"], true);
    // Stdin stays open: the stub exits by itself.
    let ended = talk.exit();
    assert_eq!(ended.status.code(), Some(1), "{}", ended.stderr);
    assert!(ended.rest.is_empty());
    let inv = &stub.invocations()[0];
    assert!(inv.end.as_ref().is_some_and(|e| e.usage_limit));
}

#[test]
fn messages_written_at_once_are_each_a_turn() {
    let stub = Stub::without_scenario();
    let mut talk = stub.converse("implement", &args());
    // Both lines reach the stub in one read: the follow-up must not be lost with the prompt.
    talk.write(&format!(
        "{}{}",
        Conversation::user_line(json!("Do the step.")),
        Conversation::user_line(json!("once more"))
    ));
    talk.until_result();
    let second = talk.until_result();
    assert_eq!(second.last().expect("the result")["num_turns"], 2);
    let ended = talk.finish();
    assert_eq!(ended.status.code(), Some(0), "{}", ended.stderr);
    let inv = &stub.invocations()[0];
    assert_eq!(inv.prompt, "Do the step.");
    assert_eq!(inv.follow_ups, ["once more"]);
}
