//! What a response does besides answering: files, timing, endings, noise.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixture::{Run, Stub, STREAM};

fn stub_with(response: &str) -> Stub {
    Stub::new(&format!("[[rule]]\nresponses = [{response}]\n"))
}

#[test]
fn files_are_written_appended_and_deleted_in_the_worktree() {
    let stub = stub_with(
        r#"{ write = { "hello.txt" = "hello\n", "src/deep/new.rs" = "fn main() {}\n" },
             append = { "notes.md" = "more\n" }, delete = ["old.txt"] }"#,
    );
    std::fs::write(stub.work.join("notes.md"), "first\n").expect("seed");
    std::fs::write(stub.work.join("old.txt"), "bye").expect("seed");
    let run = stub.run("implement", STREAM);
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert_eq!(stub.read("hello.txt"), "hello\n");
    assert_eq!(stub.read("src/deep/new.rs"), "fn main() {}\n");
    assert_eq!(stub.read("notes.md"), "first\nmore\n");
    assert!(!stub.exists("old.txt"));
}

#[test]
fn exit_code_is_error_and_stderr() {
    let stub = Stub::new(
        r#"
        [[rule]]
        role = "implement"
        responses = [{ exit_code = 3, stderr = "something broke" }]
        [[rule]]
        role = "review"
        responses = [{ is_error = true, raw = "API Error: 500" }]
        "#,
    );
    let run = stub.run("implement", STREAM);
    assert_eq!(run.code(), Some(3));
    assert_eq!(run.stderr, "something broke\n");
    assert_eq!(run.result()["is_error"], false);

    let run = stub.run("review", STREAM);
    assert_eq!(run.code(), Some(1));
    let result = run.result();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["subtype"], "error_during_execution");
    assert_eq!(result["result"], "API Error: 500");
    let log = stub.invocations();
    assert_eq!(log[1].end.as_ref().map(|e| e.is_error), Some(true));
}

#[test]
fn a_signal_kills_the_stub_after_its_earlier_effects() {
    let stub = stub_with(r#"{ write = { "partial.txt" = "half" }, signal = "KILL" }"#);
    let run = stub.run("implement", STREAM);
    assert_eq!(run.status.signal(), Some(9));
    assert!(stub.exists("partial.txt"));
    let events: Vec<Value> = run.events();
    assert_eq!(events.len(), 1, "only the init event: {events:?}");
    let log = stub.invocations();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].end, None, "no end line when dying by a signal");

    let stub = stub_with("{ signal = 15 }");
    assert_eq!(stub.run("implement", STREAM).status.signal(), Some(15));
}

#[test]
fn sleep_ms_delays_the_answer() {
    let stub = stub_with("{ sleep_ms = 300 }");
    let start = Instant::now();
    let run = stub.run("implement", STREAM);
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!(run.code(), Some(0));
}

#[test]
fn wait_for_blocks_until_the_test_releases_it() {
    let stub = stub_with(r#"{ wait_for = "../release", summary = "released" }"#);
    let mut child = stub.spawn(&mut stub.command("implement", STREAM), "go");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "must still be waiting"
    );
    std::fs::write(stub.dir.path().join("release"), "").expect("release");
    let run = Run::from(child.wait_with_output().expect("wait"));
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert_eq!(run.summary(), "released");
}

#[test]
fn flood_bytes_come_before_the_result_in_every_format() {
    let stub = stub_with("{ flood_bytes = 300000 }");
    let run = stub.run("implement", STREAM);
    assert!(run.stdout.len() >= 300_000);
    let events = run.events();
    assert!(events.len() > 10);
    assert_eq!(events.last().expect("result")["type"], "result");

    let run = stub.run("implement", &["-p"]);
    assert!(run.stdout.len() >= 300_000);
    assert!(run.stdout_text().trim_end().ends_with("---END-RESULT---"));
}

#[test]
fn a_usage_limit_is_reported_as_claude_reports_it() {
    let stub = stub_with("{ usage_limit = true }");
    let run = stub.run("implement", STREAM);
    assert_eq!(run.code(), Some(1));
    let events = run.events();
    let limit = events
        .iter()
        .find(|e| e["type"] == "rate_limit_event")
        .expect("a rate_limit_event");
    assert_eq!(limit["rate_limit_info"]["status"], "rejected");
    let resets_at = limit["rate_limit_info"]["resetsAt"]
        .as_u64()
        .expect("resetsAt");
    let result = run.result();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["subtype"], "success");
    assert_eq!(
        result["result"],
        format!("Claude AI usage limit reached|{resets_at}")
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!(resets_at > now && resets_at <= now + 3600);
    let log = stub.invocations();
    assert_eq!(log[0].end.as_ref().map(|e| e.usage_limit), Some(true));

    let stub = stub_with(r#"{ usage_limit = "You've hit your limit · resets 3pm (UTC)" }"#);
    let run = stub.run("implement", &["-p", "--output-format", "json"]);
    assert_eq!(run.code(), Some(1));
    assert_eq!(
        run.result()["result"],
        "You've hit your limit · resets 3pm (UTC)"
    );
}

#[test]
fn cost_usd_is_the_total_cost() {
    let stub = stub_with("{ cost_usd = 1.5 }");
    let result = stub
        .run("implement", &["-p", "--output-format", "json"])
        .result();
    assert_eq!(result["total_cost_usd"], 1.5);
    assert_eq!(result["usage"]["service_tier"], "standard");
}

#[test]
fn non_utf8_bytes_come_before_a_valid_result() {
    let stub = stub_with("{ non_utf8 = true }");
    let run = stub.run("implement", STREAM);
    assert_eq!(run.code(), Some(0));
    assert!(String::from_utf8(run.stdout.clone()).is_err());
    assert!(run.message().contains("STATUS: DONE"));

    let run = stub.run("implement", &["-p"]);
    assert!(String::from_utf8(run.stdout.clone()).is_err());
}

#[test]
fn a_decoy_block_in_a_tool_result_precedes_the_real_answer() {
    let stub = stub_with(r#"{ fake_block_in_tool_result = true, summary = "the real one" }"#);
    let run = stub.run("review", STREAM);
    let events = run.events();
    let decoy = events
        .iter()
        .find(|e| e["type"] == "user")
        .expect("a user event");
    let content = decoy["message"]["content"][0]["content"]
        .as_str()
        .expect("text");
    assert!(content.contains("---STEP-RESULT---") && content.contains("STATUS: BLOCKED"));
    let message = run.message();
    assert!(message.contains("SUMMARY: the real one") && message.contains("VERDICT: APPROVED"));
}
