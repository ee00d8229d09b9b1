//! The control protocol on the wire, byte for byte: a daemon is driven through every method
//! (and the usual mistakes), and each answer line, as sent, is compared with
//! `tests/fixtures/wire.golden`, as is the text `catalyst ctl` prints for people. Volatile
//! values (times, durations, pids, commits, the temporary folder) are masked in the raw text,
//! never by parsing and printing again, which would reorder keys.
//!
//! After an intended change of the protocol, `CATALYST_BLESS=1 cargo test --test e2e wire`
//! writes the fixture again.

mod raw;

use std::path::{Path, PathBuf};

use serde_json::json;

use catalyst_testkit::{TestDaemon, TIMEOUT};
use raw::{Log, Raw};

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/wire.golden");

/// The agents: implement and fix write a file; bead `cat-stuck` is blocked by its agent.
const SCENARIO: &str = r#"
[[rule]]
role = "implement"
bead = "cat-stuck"
responses = [{ status = "BLOCKED", summary = "cannot do this" }]

[[rule]]
role = "implement"
responses = [{ write = { "impl.txt" = "impl\n" }, summary = "implemented" }]

[[rule]]
role = "fix"
responses = [{ write = { "fixed.txt" = "fixed\n" }, summary = "made it so" }]
"#;

/// The daemon under test, where to reach it, and what was seen so far.
struct Wire<'a> {
    daemon: &'a TestDaemon,
    socket: PathBuf,
    log: Log,
}

async fn ctl(daemon: &TestDaemon, args: &[&str], log: &mut Log) -> String {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_catalyst"))
        .arg("ctl")
        .arg("--workspace")
        .arg(&daemon.repo)
        .args(args)
        .output()
        .await
        .expect("run catalyst ctl");
    log.section(&format!(
        "ctl {} (exit {})",
        args.join(" "),
        out.status.code().unwrap_or(-1)
    ));
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        log.push(format!("| {line}"));
    }
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        log.push(format!("! {line}"));
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn request(id: u64, method: &str, params: serde_json::Value) -> String {
    json!({"id": id, "method": method, "params": params}).to_string()
}

async fn waiting_approval(daemon: &TestDaemon, id: &str, after: u64) -> u64 {
    let approve = format!("{id}.approve");
    let e = daemon
        .wait_for("the approval to wait", |e| {
            e["type"] == "gate.waiting"
                && e["step"] == approve.as_str()
                && e["seq"].as_u64() > Some(after)
        })
        .await;
    e["seq"].as_u64().expect("seq")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_is_the_same_on_the_wire() {
    let daemon = TestDaemon::start(SCENARIO, "").await;
    let root = daemon
        .repo
        .parent()
        .expect("the repository's folder")
        .display()
        .to_string();
    let mut w = Wire {
        daemon: &daemon,
        socket: daemon.paths.socket(),
        log: Log {
            root,
            lines: vec!["# catalyst control protocol answers, masked".into()],
        },
    };
    let mut c = idle(&mut w).await;
    mistakes(&mut w, &mut c).await;
    let waited = gated(&mut w, &mut c).await;
    gated_logs_hooks_and_ctl(&mut w, &mut c).await;
    let mut c = approval(&mut w, waited).await;
    blocked(&mut w, &mut c).await;
    pausing(&mut w, &mut c).await;
    events(&mut w, &mut c).await;
    interchange(&mut w, &mut c).await;
    compare(w.log);
}

/// Compares what was seen with the golden file, or writes it with `CATALYST_BLESS=1`.
fn compare(log: Log) {
    let mut text = log.lines.join("\n");
    text.push('\n');
    if std::env::var_os("CATALYST_BLESS").is_some() {
        std::fs::create_dir_all(Path::new(GOLDEN).parent().expect("fixtures folder"))
            .expect("fixtures folder");
        std::fs::write(GOLDEN, &text).expect("write the golden file");
        return;
    }
    let golden = std::fs::read_to_string(GOLDEN).expect("the golden file (CATALYST_BLESS=1)");
    if golden != text {
        let now = concat!(env!("CARGO_TARGET_TMPDIR"), "/wire.now");
        std::fs::write(now, &text).expect("write what was seen");
        let diff: Vec<String> = golden
            .lines()
            .zip(text.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(5)
            .map(|(i, (a, b))| format!("line {}:\n- {a}\n+ {b}", i + 1))
            .collect();
        panic!(
            "the wire changed ({} golden lines, {} now, all in {now}):\n{}",
            golden.lines().count(),
            text.lines().count(),
            diff.join("\n")
        );
    }
}

/// A daemon with nothing to do.
async fn idle(w: &mut Wire<'_>) -> Raw {
    w.log.section("an idle daemon");
    let mut c = Raw::connect(&w.socket, &mut w.log).await;
    c.ask(r#"{"id":1,"method":"status"}"#, 1, &mut w.log).await;
    c.ask(r#"{"id":2,"method":"list","params":{}}"#, 1, &mut w.log)
        .await;
    c.ask(r#"{"id":"r","method":"ready"}"#, 1, &mut w.log).await;
    c
}

/// Lines that are not requests, and requests the daemon refuses.
async fn mistakes(w: &mut Wire<'_>, c: &mut Raw) {
    w.log.section("mistakes");
    for line in [
        "{nope",
        "[1,2]",
        r#"{"method":"status"}"#,
        r#"{"id":{},"method":"status"}"#,
        r#"{"id":3}"#,
        r#"{"id":3,"method":7}"#,
        r#"{"id":3,"method":"explode"}"#,
        r#"{"id":3,"method":"status","params":{"x":1}}"#,
        r#"{"id":3,"method":"status","extra":1}"#,
        r#"{"id":3,"method":"status","params":[1]}"#,
        r#"{"id":3,"method":"show","params":{"id":5}}"#,
        r#"{"id":3,"method":"show","params":{"id":"cat-404"}}"#,
        r#"{"id":3,"method":"show","params":{"id":"../x"}}"#,
        r#"{"id":3,"method":"submit","params":{"beads":[]}}"#,
        r#"{"id":3,"method":"submit","params":{"title":"  "}}"#,
        r#"{"id":3,"method":"submit","params":{"title":"x","formula":"nope"}}"#,
        r#"{"id":3,"method":"submit","params":{"title":"x","after":["cat-404"]}}"#,
        r#"{"id":3,"method":"submit","params":{"title":"x","priority":9}}"#,
        r#"{"id":3,"method":"logs","params":{"step":"cat-404.implement"}}"#,
        r#"{"id":3,"method":"logs","params":{"step":"cat-404"}}"#,
        r#"{"id":3,"method":"logs","params":{"step":"cat-404.x","stream":"video"}}"#,
        r#"{"id":3,"method":"hook","params":{"step":"cat-404.x","event":"Stop","payload":{}}}"#,
    ] {
        c.ask(line, 1, &mut w.log).await;
    }
}

/// A gated bead waits for its approval; every query and change that may be asked then. Returns
/// the seq of the wait.
async fn gated(w: &mut Wire<'_>, c: &mut Raw) -> u64 {
    w.log.section("a gated bead up to its approval");
    let submit = request(
        4,
        "submit",
        json!({"id": "cat-gated", "title": "Checked work", "formula": "gated",
               "metadata": {"formula_vars": {"test_command": "true"}}}),
    );
    c.ask(&submit, 1, &mut w.log).await;
    let id = "cat-gated";
    let waited = waiting_approval(w.daemon, id, 0).await;
    c.ask(r#"{"id":5,"method":"status"}"#, 1, &mut w.log).await;
    c.ask(r#"{"id":6,"method":"list"}"#, 1, &mut w.log).await;
    c.ask(
        r#"{"id":7,"method":"list","params":{"steps":true}}"#,
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        r#"{"id":8,"method":"list","params":{"status":"in_progress"}}"#,
        1,
        &mut w.log,
    )
    .await;
    c.ask(r#"{"id":9,"method":"ready"}"#, 1, &mut w.log).await;
    c.ask(&request(10, "show", json!({"id": id})), 1, &mut w.log)
        .await;
    c.ask(
        &request(11, "show", json!({"id": id, "runs": true})),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(12, "comment", json!({"id": id, "text": "looks fine"})),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(
            13,
            "comment",
            json!({"id": id, "text": "by a bot", "author": "bot"}),
        ),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(14, "update", json!({"id": id, "set": {"notes": "noted"}})),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(15, "reject", json!({"id": id, "reason": " "})),
        1,
        &mut w.log,
    )
    .await;
    c.ask(&request(17, "reopen", json!({"id": id})), 1, &mut w.log)
        .await;
    c.ask(&request(18, "retry", json!({"id": id})), 1, &mut w.log)
        .await;
    waited
}

/// The gated bead's logs, its hooks, and `ctl`'s text for it.
async fn gated_logs_hooks_and_ctl(w: &mut Wire<'_>, c: &mut Raw) {
    let id = "cat-gated";
    c.ask(
        &request(19, "logs", json!({"step": format!("{id}.refine")})),
        3,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(
            20,
            "hook",
            json!({"step": format!("{id}.implement"), "event": "SessionStart", "payload": {}}),
        ),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(
            21,
            "hook",
            json!({"step": format!("{id}.implement"), "event": "PreToolUse",
                   "payload": {"tool_name": "Write", "tool_input": {"file_path": "a"}}}),
        ),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(
            22,
            "hook",
            json!({"step": format!("{id}.implement"), "event": "Nope", "payload": {}}),
        ),
        1,
        &mut w.log,
    )
    .await;
    ctl(w.daemon, &["status"], &mut w.log).await;
    ctl(w.daemon, &["list"], &mut w.log).await;
    ctl(w.daemon, &["list", "--steps"], &mut w.log).await;
    ctl(w.daemon, &["ready"], &mut w.log).await;
    ctl(w.daemon, &["show", id], &mut w.log).await;
    ctl(w.daemon, &["show", id, "--runs"], &mut w.log).await;
    ctl(w.daemon, &["show", "cat-404"], &mut w.log).await;
    ctl(w.daemon, &["comment", id, "from ctl"], &mut w.log).await;
}

/// The gated bead is rejected, fixed, then approved and closed; a new connection is returned.
async fn approval(w: &mut Wire<'_>, waited: u64) -> Raw {
    let id = "cat-gated";
    w.log.section("a rejection, then an approval");
    let mut c = Raw::connect(&w.socket, &mut w.log).await;
    c.ask(
        &request(30, "reject", json!({"id": id, "reason": "rename it"})),
        1,
        &mut w.log,
    )
    .await;
    c.ask(&request(31, "approve", json!({"id": id})), 1, &mut w.log)
        .await;
    waiting_approval(w.daemon, id, waited).await;
    ctl(
        w.daemon,
        &["approve", id, "--comment", "ship it"],
        &mut w.log,
    )
    .await;
    w.daemon.wait_status(id, "closed").await;
    w.daemon
        .wait_for("the worktree to go", |e| {
            e["type"] == "worktree.removed" && e["bead"] == id
        })
        .await;
    c.ask(&request(32, "show", json!({"id": id})), 1, &mut w.log)
        .await;
    c.ask(&request(33, "cancel", json!({"id": id})), 1, &mut w.log)
        .await;
    c
}

/// A bead its agent blocks, retried.
async fn blocked(w: &mut Wire<'_>, c: &mut Raw) {
    w.log.section("a blocked bead, retried");
    c.ask(
        &request(
            40,
            "submit",
            json!({"beads": [{"id": "cat-stuck", "title": "Stuck"}]}),
        ),
        1,
        &mut w.log,
    )
    .await;
    let stuck = "cat-stuck";
    w.daemon.wait_status(stuck, "blocked").await;
    c.ask(&request(41, "retry", json!({"id": stuck})), 1, &mut w.log)
        .await;
    w.daemon
        .follow_until("cat-stuck to be blocked again", TIMEOUT, |events| {
            events
                .iter()
                .filter(|e| {
                    e["type"] == "bead.status" && e["bead"] == stuck && e["status"] == "blocked"
                })
                .count()
                >= 2
        })
        .await;
    ctl(w.daemon, &["retry", "cat-404"], &mut w.log).await;
}

/// Pausing models, closing, reopening and cancelling beads.
async fn pausing(w: &mut Wire<'_>, c: &mut Raw) {
    w.log.section("pausing, closing, reopening and cancelling");
    c.ask(r#"{"id":50,"method":"pause"}"#, 1, &mut w.log).await;
    c.ask(
        r#"{"id":51,"method":"pause","params":{"model":"opus"}}"#,
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        r#"{"id":52,"method":"resume","params":{"model":"opus"}}"#,
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(
            53,
            "submit",
            json!({"beads": [{"id": "cat-x", "title": "Later", "priority": 1, "labels": ["a"]},
                             {"title": "After", "after": ["cat-x"], "description": "d"}]}),
        ),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(54, "submit", json!({"id": "cat-x", "title": "Twice"})),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(55, "close", json!({"id": "cat-x", "reason": "not now"})),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(56, "reopen", json!({"id": "cat-x"})),
        1,
        &mut w.log,
    )
    .await;
    c.ask(
        &request(57, "cancel", json!({"id": "cat-x", "reason": "dropped"})),
        1,
        &mut w.log,
    )
    .await;
    w.daemon
        .wait_for("the cancelled bead's cleanup", |e| {
            e["type"] == "worktree.removed" && e["bead"] == "cat-x"
        })
        .await;
    c.ask(r#"{"id":58,"method":"status"}"#, 1, &mut w.log).await;
    ctl(w.daemon, &["pause", "--model", "haiku"], &mut w.log).await;
    ctl(w.daemon, &["resume", "--model", "haiku"], &mut w.log).await;
    let submitted = ctl(
        w.daemon,
        &["submit", "--title", "From ctl", "--priority", "3"],
        &mut w.log,
    )
    .await;
    let new = submitted.trim().rsplit(' ').next().expect("the new id");
    ctl(w.daemon, &["close", new, "--reason", "done"], &mut w.log).await;
    ctl(w.daemon, &["reload"], &mut w.log).await;
}

/// Replays and subscriptions, and `ctl events`.
async fn events(w: &mut Wire<'_>, c: &mut Raw) {
    w.log.section("events");
    c.ask(r#"{"id":60,"method":"reload"}"#, 1, &mut w.log).await;
    let mut e = Raw::connect(&w.socket, &mut w.log).await;
    e.ask_all(
        r#"{"id":61,"method":"subscribe","params":{"since":0,"follow":false}}"#,
        &mut w.log,
    )
    .await;
    let mut e = Raw::connect(&w.socket, &mut w.log).await;
    e.ask_all(
        r#"{"id":62,"method":"subscribe","params":{"since":0,"follow":false,"bead":"cat-x","types":["bead.status"]}}"#,
        &mut w.log,
    )
    .await;
    let mut e = Raw::connect(&w.socket, &mut w.log).await;
    e.ask(
        r#"{"id":63,"method":"subscribe","params":{"since":3}}"#,
        2,
        &mut w.log,
    )
    .await;
    drop(e);
    ctl(w.daemon, &["events", "--since", "0"], &mut w.log).await;
    ctl(
        w.daemon,
        &["events", "--bead", "cat-x", "--json"],
        &mut w.log,
    )
    .await;
}

/// Export, import and shutdown.
async fn interchange(w: &mut Wire<'_>, c: &mut Raw) {
    w.log.section("interchange and shutdown");
    c.ask(r#"{"id":70,"method":"export"}"#, 1, &mut w.log).await;
    c.ask(
        r#"{"id":71,"method":"import","params":{"beads":[{"id":"cat-x","title":"Later","status":"open","priority":2,"issue_type":"task","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"},{"id":"bd-9","title":"Imported","status":"open","priority":2,"issue_type":"task","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}]}}"#,
        1,
        &mut w.log,
    )
    .await;
    c.ask(r#"{"id":72,"method":"shutdown"}"#, 1, &mut w.log)
        .await;
}
