//! The stream parsers, line splitting and limit detection, fed directly.

use serde_json::json;

use super::super::events::Parsed;
use super::super::output::{LineSplitter, Tail};
use super::*;
use crate::domain::agent::claude::Claude;
use crate::domain::agent::codex::Codex;
use crate::domain::agent::limits;

fn claude(lines: &[String]) -> Parsed {
    let mut c = Claude::default();
    for l in lines {
        c.line(l);
    }
    c.finish()
}

fn codex(lines: &[serde_json::Value]) -> Parsed {
    let mut c = Codex::default();
    for l in lines {
        c.line(&l.to_string());
    }
    c.finish()
}

fn init() -> String {
    json!({"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-sonnet-4-5", "tools": ["Bash", "Read"]}).to_string()
}

fn assistant_text(text: &str) -> String {
    json!({"type": "assistant", "session_id": "s-1", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": text}]}}).to_string()
}

fn tool_result(text: &str) -> String {
    json!({"type": "user", "session_id": "s-1", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text}]}}).to_string()
}

#[test]
fn claude_final_message_is_the_last_result_event_only() {
    let quoted = block("DONE", Some("APPROVED"), "quoted by the model");
    let last = block("DONE", Some("REJECTED"), "the real answer");
    let parsed = claude(&[
        init(),
        assistant_text(&quoted),
        tool_result(&quoted),
        "not json at all".into(),
        claude_result("success", false, "an earlier result"),
        claude_result("success", false, &last),
    ]);
    assert_eq!(parsed.final_message.as_deref(), Some(last.as_str()));
    assert!(!parsed.is_error);
    assert_eq!(parsed.cost_usd, Some(0.0425));
    assert_eq!(
        parsed.usage,
        Some(json!({"input_tokens": 120, "output_tokens": 48}))
    );
    assert_eq!(parsed.usage_limit, None);
}

#[test]
fn claude_conversation_alone_has_no_final_message() {
    let parsed = claude(&[init(), assistant_text(&block("DONE", None, "x"))]);
    assert_eq!(parsed, Parsed::default());
}

#[test]
fn claude_is_error_fails_even_with_subtype_success() {
    let parsed = claude(&[claude_result(
        "success",
        true,
        "API Error: 500 {\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}",
    )]);
    assert!(parsed.is_error);
    assert!(parsed
        .error
        .as_deref()
        .unwrap()
        .starts_with("API Error: 500"));
    assert_eq!(parsed.usage_limit, None);
}

#[test]
fn claude_error_subtype_without_text_names_the_subtype() {
    let line = json!({"type": "result", "subtype": "error_max_turns", "is_error": false, "session_id": "s-1"}).to_string();
    let parsed = claude(&[line]);
    assert!(parsed.is_error);
    assert_eq!(parsed.error.as_deref(), Some("error_max_turns"));
    assert_eq!(parsed.final_message, None);

    let line = json!({"type": "result", "subtype": "error_during_execution", "is_error": true, "errors": ["tool crashed", "then gave up"]}).to_string();
    assert_eq!(
        claude(&[line]).error.as_deref(),
        Some("tool crashed; then gave up")
    );
}

#[test]
fn claude_usage_limits_are_recognised_in_each_shape() {
    let cases = [
        (
            claude_result("success", true, "Claude AI usage limit reached|1753441200"),
            "Claude AI usage limit reached (resets at unix time 1753441200)",
        ),
        (
            claude_result("success", true, "API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"This request would exceed your account's rate limit.\"}}"),
            "API Error: 429",
        ),
        (
            claude_result("success", true, "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"),
            "API Error: 529",
        ),
        (
            claude_result("success", true, "You've hit your limit · resets 7pm (Europe/Paris)"),
            "You've hit your limit",
        ),
        // Not flagged as an error, but the whole answer is a one-line limit notice.
        (
            claude_result("success", false, "Claude AI usage limit reached|1753441200"),
            "Claude AI usage limit reached",
        ),
    ];
    for (line, want) in cases {
        let parsed = claude(&[init(), line.clone()]);
        let got = parsed
            .usage_limit
            .unwrap_or_else(|| panic!("no limit in {line}"));
        assert!(got.starts_with(want), "{got:?} for {line}");
        assert!(!got.contains('\n'));
    }
}

#[test]
fn claude_limit_words_in_a_successful_answer_are_not_a_limit() {
    let answer = format!(
        "I added handling for the API's rate limit and usage limit errors.\n\n{}",
        block("DONE", None, "handle 429 rate limit responses")
    );
    let parsed = claude(&[
        assistant_text("Claude AI usage limit reached|1753441200"),
        claude_result("success", false, &answer),
    ]);
    assert_eq!(parsed.usage_limit, None);
    assert!(!parsed.is_error);
}

#[test]
fn claude_structured_limit_signals_count_only_if_nothing_recovered() {
    let retry = json!({"type": "system", "subtype": "api_retry", "attempt": 3, "max_retries": 10, "error_status": 429}).to_string();
    // Killed while still retrying: no result at all.
    let parsed = claude(&[init(), retry.clone()]);
    assert!(parsed.usage_limit.unwrap().contains("429"));

    // The retry worked: an ordinary assistant message followed.
    let parsed = claude(&[init(), retry.clone(), assistant_text("working")]);
    assert_eq!(parsed.usage_limit, None);

    // An assistant message standing for a rate-limit error, then a generic error result.
    let limited = json!({"type": "assistant", "error": "rate_limit", "message": {"content": [{"type": "text", "text": "API Error"}]}}).to_string();
    let parsed = claude(&[limited, claude_result("success", true, "API Error")]);
    assert!(parsed.usage_limit.unwrap().contains("rate_limit"));

    // A retry followed by a successful result is a success.
    let ok = block("DONE", None, "x");
    let parsed = claude(&[retry, claude_result("success", false, &ok)]);
    assert_eq!(parsed.usage_limit, None);
}

#[test]
fn claude_api_error_status_decides_between_limit_and_failure() {
    // As Claude Code 2.1.197 ends a run on an API error: `subtype: success`, `is_error: true`,
    // the status in `api_error_status`, a message that need not name the limit.
    let ended = |status: u64, text: &str| {
        json!({"type": "result", "subtype": "success", "is_error": true,
            "api_error_status": status, "result": text, "total_cost_usd": 0})
        .to_string()
    };
    let parsed = claude(&[
        init(),
        ended(429, "API Error: Request rejected (429) · try again later"),
    ]);
    assert!(parsed.is_error);
    assert!(parsed.usage_limit.unwrap().contains("429"));
    let parsed = claude(&[init(), ended(529, "API Error: Repeated 529")]);
    assert!(parsed.usage_limit.unwrap().contains("529"));
    let parsed = claude(&[init(), ended(401, "API Error: 401 · invalid x-api-key")]);
    assert!(parsed.is_error);
    assert_eq!(
        parsed.usage_limit, None,
        "a bad key is a failure, not a limit"
    );
}

#[test]
fn codex_final_message_is_the_last_agent_message() {
    let answer = block("DONE", None, "codex did it");
    let parsed = codex(&[
        json!({"type": "thread.started", "thread_id": "th-1"}),
        json!({"type": "turn.started"}),
        json!({"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "thinking"}}),
        json!({"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": "first"}}),
        json!({"type": "item.completed", "item": {"id": "i2", "type": "command_execution", "command": "ls", "aggregated_output": block("DONE", None, "fake"), "exit_code": 0, "status": "completed"}}),
        json!({"type": "item.started", "item": {"id": "i3", "type": "agent_message", "text": "partial"}}),
        json!({"type": "item.completed", "item": {"id": "i3", "type": "agent_message", "text": answer}}),
        json!({"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion)"}),
        json!({"type": "turn.completed", "usage": {"input_tokens": 900, "cached_input_tokens": 100, "output_tokens": 70}}),
    ]);
    assert_eq!(parsed.final_message.as_deref(), Some(answer.as_str()));
    assert!(!parsed.is_error);
    assert_eq!(parsed.usage.unwrap()["output_tokens"], 70);
}

#[test]
fn codex_failed_turns_and_fatal_errors_are_errors() {
    let parsed = codex(&[
        json!({"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": "half way"}}),
        json!({"type": "turn.failed", "error": {"message": "stream error: unexpected status 500"}}),
    ]);
    assert!(parsed.is_error);
    assert_eq!(
        parsed.error.as_deref(),
        Some("stream error: unexpected status 500")
    );
    assert_eq!(parsed.usage_limit, None);

    let parsed = codex(&[
        json!({"type": "error", "message": "You've hit your usage limit. Try again in 2 days 17 hours."}),
    ]);
    assert!(parsed.is_error);
    assert!(parsed
        .usage_limit
        .unwrap()
        .starts_with("You've hit your usage limit"));

    let parsed = codex(&[
        json!({"type": "turn.failed", "error": {"message": "{\"error\":{\"type\":\"usage_limit_reached\",\"resets_in_seconds\":13872}}"}}),
    ]);
    assert!(parsed.usage_limit.is_some());
}

#[test]
fn error_texts_and_limit_texts_are_told_apart() {
    for text in [
        "Claude AI usage limit reached|1760000400",
        "You've hit your limit · resets 4pm (Asia/Kuala_Lumpur)",
        "Session limit reached ∙ resets 2am",
        "Weekly limit reached ∙ resets Oct 9",
        "API Error: 429 rate_limit_error",
        "exceeded retry limit, last status: 429 Too Many Requests",
        "ERROR: Quota exceeded. Check your plan and billing details.",
        "Credit balance is too low",
        "API Error: 529 Overloaded",
    ] {
        assert!(limits::in_error_text(text).is_some(), "{text}");
    }
    for text in [
        "API Error: 500 Internal server error",
        "Prompt is too long",
        "Context limit reached",
        "error_max_turns",
        "permission denied",
    ] {
        assert_eq!(limits::in_error_text(text), None, "{text}");
    }
    assert_eq!(limits::in_bare_notice("rate limit\nSTATUS: DONE"), None);
    let long = "x".repeat(2000);
    assert!(limits::one_line(&format!("a\n  b {long}")).starts_with("a b x"));
    assert_eq!(limits::one_line(&long).chars().count(), 301);
}

#[test]
fn lines_are_split_across_chunks_and_oversized_ones_skipped() {
    let mut lines = LineSplitter::new(8);
    let mut got = Vec::new();
    let mut push = |l: &[u8]| got.push(String::from_utf8_lossy(l).into_owned());
    for chunk in [
        &b"ab"[..],
        b"c\nde",
        b"f\n\n",
        b"0123456789",
        b"abc\nok\n123456",
        b"78\n",
        b"123456789\nlast",
    ] {
        lines.feed(chunk, &mut push);
    }
    lines.end(&mut push);
    assert_eq!(got, ["abc", "def", "", "ok", "12345678", "last"]);
    assert_eq!(lines.oversized, 2);
}

#[test]
fn a_skipped_line_is_told_by_its_start() {
    let mut lines = LineSplitter::new(8);
    let (mut whole, mut cut) = (Vec::new(), Vec::new());
    for chunk in [
        &b"ok\n0123"[..],
        b"456789",
        b"abc\nfine\n",
        b"x".repeat(100).as_slice(),
        b"\n",
    ] {
        lines.feed_noting_cut(
            chunk,
            &mut |l| whole.push(String::from_utf8_lossy(l).into_owned()),
            &mut |head| cut.push(String::from_utf8_lossy(head).into_owned()),
        );
    }
    assert_eq!(whole, ["ok", "fine"]);
    // The first cut line kept its start as far as the piece that outgrew the limit; the
    // second, the most a head holds.
    let long = "x".repeat(super::super::output::HEAD_KEPT);
    assert_eq!(cut, ["0123456789".to_owned(), long]);
}

#[test]
fn tail_keeps_the_end_from_a_line_start() {
    let mut tail = Tail::new(10);
    tail.feed(b"one\ntwo\n");
    tail.feed(b"three\n");
    assert_eq!(tail.into_text(), "three\n");

    let mut tail = Tail::new(10);
    tail.feed(b"short\n");
    assert_eq!(tail.into_text(), "short\n");

    let mut tail = Tail::new(4);
    tail.feed(b"a very long chunk\nend");
    assert_eq!(tail.into_text(), "end");
}

/// Claude Code 2.1's `api_retry` event, as it prints it for a 401 or a refused connection.
fn api_retry(status: Option<u64>, error: &str) -> String {
    json!({"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10, "retry_delay_ms": 536.4, "error_status": status, "error": error, "session_id": "s-1"}).to_string()
}

#[test]
fn claude_retrying_a_refused_key_or_an_unreachable_api_is_hopeless_at_once() {
    use crate::domain::unavailable::Unavailable;
    let hopeless = |lines: &[String]| {
        let mut c = Claude::default();
        for l in lines {
            c.line(l);
        }
        c.hopeless.map(|h| h.cause)
    };
    assert_eq!(
        hopeless(&[init(), api_retry(Some(401), "authentication_failed")]),
        Some(Unavailable::Auth)
    );
    assert_eq!(
        hopeless(&[init(), api_retry(None, "unknown")]),
        Some(Unavailable::Connection),
        "a connection retried before the model said anything"
    );
    assert_eq!(
        hopeless(&[
            init(),
            assistant_text("working"),
            api_retry(None, "unknown")
        ]),
        None,
        "mid-run, Claude Code's own retries may still recover"
    );
    assert_eq!(hopeless(&[init(), api_retry(Some(500), "api_error")]), None);
    assert_eq!(
        hopeless(&[init(), api_retry(Some(429), "rate_limit")]),
        None
    );

    // Mid-run, a connection that never came back counts once the run ends without a result.
    let parsed = claude(&[
        init(),
        assistant_text("working"),
        api_retry(None, "unknown"),
    ]);
    assert_eq!(
        parsed.unavailable.map(|h| h.cause),
        Some(Unavailable::Connection)
    );
    let parsed = claude(&[
        init(),
        assistant_text("working"),
        api_retry(None, "unknown"),
        assistant_text("back"),
        claude_result("success", false, "done"),
    ]);
    assert_eq!(parsed.unavailable, None, "recovered");
}

#[test]
fn claude_not_logged_in_is_an_auth_failure() {
    use crate::domain::unavailable::Unavailable;
    let parsed = claude(&[
        init(),
        claude_result("success", true, "Not logged in · Please run /login"),
    ]);
    assert_eq!(parsed.unavailable.map(|h| h.cause), Some(Unavailable::Auth));
    let parsed = claude(&[init(), claude_result("success", true, "the tests failed")]);
    assert_eq!(parsed.unavailable, None);
}
