//! The control protocol on the wire, byte for byte: a daemon is driven through every method
//! (and the usual mistakes), and each answer line, as sent, is compared with
//! `tests/fixtures/wire.golden`, as is the text `catalyst ctl` prints for people. Volatile
//! values (times, durations, pids, commits, the temporary folder) are masked in the raw text,
//! never by parsing and printing again, which would reorder keys.
//!
//! After an intended change of the protocol, `CATALYST_BLESS=1 cargo test --test e2e wire`
//! writes the fixture again.

use std::path::Path;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use catalyst_testkit::{TestDaemon, TIMEOUT};

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

/// Keys whose values change from run to run.
const VOLATILE: [&str; 19] = [
    "stdout_bytes",
    "stderr_bytes",
    "ts",
    "started",
    "base",
    "data",
    "created_at",
    "updated_at",
    "closed_at",
    "started_at",
    "dispatched_at",
    "elapsed_ms",
    "duration_ms",
    "pid",
    "version",
    "commit",
    "from",
    "to",
    "session_id",
];

/// One raw connection: lines exactly as the daemon sent them.
struct Raw {
    lines: Lines<BufReader<OwnedReadHalf>>,
    writer: OwnedWriteHalf,
}

impl Raw {
    async fn connect(socket: &Path, log: &mut Log) -> Raw {
        let stream = UnixStream::connect(socket).await.expect("connect");
        let (read, writer) = stream.into_split();
        let mut raw = Raw {
            lines: BufReader::new(read).lines(),
            writer,
        };
        let hello = raw.line().await.expect("hello");
        log.push(format!("< {hello}"));
        raw
    }

    async fn line(&mut self) -> Option<String> {
        tokio::time::timeout(TIMEOUT, self.lines.next_line())
            .await
            .expect("an answer in time")
            .expect("read a line")
    }

    async fn send(&mut self, line: &str, log: &mut Log) {
        log.push(format!("> {line}"));
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("send");
    }

    /// Sends `line` and logs the next `n` lines of the answer.
    async fn ask(&mut self, line: &str, n: usize, log: &mut Log) {
        self.send(line, log).await;
        for _ in 0..n {
            let answer = self.line().await.expect("an answer line");
            log.push(format!("< {answer}"));
        }
    }

    /// Sends `line` and logs every line until the daemon closes the connection.
    async fn ask_all(&mut self, line: &str, log: &mut Log) {
        self.send(line, log).await;
        while let Some(answer) = self.line().await {
            log.push(format!("< {answer}"));
        }
    }
}

/// What the test saw, masked as it is recorded.
struct Log {
    root: String,
    lines: Vec<String>,
}

impl Log {
    fn push(&mut self, line: String) {
        let line = line.replace(&self.root, "<root>");
        let mut line = mask_keys(&line);
        if !line.starts_with('<') && !line.starts_with('>') {
            line = mask_text(&line);
        }
        self.lines.push(line);
    }

    fn section(&mut self, title: &str) {
        self.lines.push(String::new());
        self.lines.push(format!("## {title}"));
    }
}

/// The end of the JSON value that starts at `start`.
fn value_end(s: &[u8], start: usize) -> usize {
    let (mut depth, mut in_str, mut escaped) = (0i32, false, false);
    let mut i = start;
    while i < s.len() {
        let c = s[i];
        if in_str {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => {
                    in_str = false;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                _ => {}
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => return i,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                b',' if depth == 0 => return i,
                _ => {}
            }
        }
        i += 1;
    }
    s.len()
}

/// Replaces the values of [`VOLATILE`] keys (but `null`) with `"<key>"`.
fn mask_keys(line: &str) -> String {
    let mut out = line.to_owned();
    for key in VOLATILE {
        let needle = format!("\"{key}\":");
        let mut from = 0;
        while let Some(at) = out[from..].find(&needle) {
            let start = from + at + needle.len();
            let end = value_end(out.as_bytes(), start);
            let value = &out[start..end];
            if value == "null" || value.starts_with("\"<") {
                from = end;
                continue;
            }
            let masked = format!("\"<{key}>\"");
            out.replace_range(start..end, &masked);
            from = start + masked.len();
        }
    }
    out
}

/// Masks what changes in text for people: times, durations, pids and commit hashes.
fn mask_text(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for (i, word) in words.iter().enumerate() {
        let bare = word.trim_matches(|c: char| "`(),:".contains(c));
        let previous = if i > 0 { words[i - 1] } else { "" };
        let next = words.get(i + 1).copied().unwrap_or("");
        let hex = bare.len() >= 7
            && bare.chars().all(|c| c.is_ascii_hexdigit())
            && bare.chars().any(|c| c.is_ascii_alphabetic());
        let digits = !bare.is_empty() && bare.chars().all(|c| c.is_ascii_digit());
        let clock = bare.len() >= 8
            && bare.as_bytes()[bare.len() - 3] == b':'
            && bare.bytes().filter(|b| *b == b':').count() >= 2
            && bare.bytes().any(|b| b.is_ascii_digit());
        let masked = if hex {
            word.replace(bare, "<sha>")
        } else if clock {
            word.replace(bare, "<time>")
        } else if digits && previous == "(pid" {
            word.replace(bare, "<pid>")
        } else if digits && next.starts_with("ms") {
            word.replace(bare, "<ms>")
        } else {
            (*word).to_owned()
        };
        out.push(masked);
    }
    out.join(" ")
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
    let socket = daemon.paths.socket();
    let root = daemon
        .repo
        .parent()
        .expect("the repository's folder")
        .display()
        .to_string();
    let mut log = Log {
        root,
        lines: vec!["# catalyst control protocol answers, masked".into()],
    };
    log.section("an idle daemon");
    let mut c = Raw::connect(&socket, &mut log).await;
    c.ask(r#"{"id":1,"method":"status"}"#, 1, &mut log).await;
    c.ask(r#"{"id":2,"method":"list","params":{}}"#, 1, &mut log)
        .await;
    c.ask(r#"{"id":"r","method":"ready"}"#, 1, &mut log).await;

    log.section("mistakes");
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
        c.ask(line, 1, &mut log).await;
    }

    log.section("a gated bead up to its approval");
    let submit = request(
        4,
        "submit",
        json!({"id": "cat-gated", "title": "Checked work", "formula": "gated",
               "metadata": {"formula_vars": {"test_command": "true"}}}),
    );
    c.ask(&submit, 1, &mut log).await;
    let id = "cat-gated";
    let waited = waiting_approval(&daemon, id, 0).await;
    c.ask(r#"{"id":5,"method":"status"}"#, 1, &mut log).await;
    c.ask(r#"{"id":6,"method":"list"}"#, 1, &mut log).await;
    c.ask(
        r#"{"id":7,"method":"list","params":{"steps":true}}"#,
        1,
        &mut log,
    )
    .await;
    c.ask(
        r#"{"id":8,"method":"list","params":{"status":"in_progress"}}"#,
        1,
        &mut log,
    )
    .await;
    c.ask(r#"{"id":9,"method":"ready"}"#, 1, &mut log).await;
    c.ask(&request(10, "show", json!({"id": id})), 1, &mut log)
        .await;
    c.ask(
        &request(11, "show", json!({"id": id, "runs": true})),
        1,
        &mut log,
    )
    .await;
    c.ask(
        &request(12, "comment", json!({"id": id, "text": "looks fine"})),
        1,
        &mut log,
    )
    .await;
    c.ask(
        &request(
            13,
            "comment",
            json!({"id": id, "text": "by a bot", "author": "bot"}),
        ),
        1,
        &mut log,
    )
    .await;
    c.ask(
        &request(14, "update", json!({"id": id, "set": {"notes": "noted"}})),
        1,
        &mut log,
    )
    .await;
    c.ask(
        &request(15, "reject", json!({"id": id, "reason": " "})),
        1,
        &mut log,
    )
    .await;
    c.ask(&request(17, "reopen", json!({"id": id})), 1, &mut log)
        .await;
    c.ask(&request(18, "retry", json!({"id": id})), 1, &mut log)
        .await;
    c.ask(
        &request(19, "logs", json!({"step": format!("{id}.refine")})),
        3,
        &mut log,
    )
    .await;
    c.ask(
        &request(
            20,
            "hook",
            json!({"step": format!("{id}.implement"), "event": "SessionStart", "payload": {}}),
        ),
        1,
        &mut log,
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
        &mut log,
    )
    .await;
    c.ask(
        &request(
            22,
            "hook",
            json!({"step": format!("{id}.implement"), "event": "Nope", "payload": {}}),
        ),
        1,
        &mut log,
    )
    .await;
    ctl(&daemon, &["status"], &mut log).await;
    ctl(&daemon, &["list"], &mut log).await;
    ctl(&daemon, &["list", "--steps"], &mut log).await;
    ctl(&daemon, &["ready"], &mut log).await;
    ctl(&daemon, &["show", id], &mut log).await;
    ctl(&daemon, &["show", id, "--runs"], &mut log).await;
    ctl(&daemon, &["show", "cat-404"], &mut log).await;
    ctl(&daemon, &["comment", id, "from ctl"], &mut log).await;

    log.section("a rejection, then an approval");
    let mut c = Raw::connect(&socket, &mut log).await;
    c.ask(
        &request(30, "reject", json!({"id": id, "reason": "rename it"})),
        1,
        &mut log,
    )
    .await;
    c.ask(&request(31, "approve", json!({"id": id})), 1, &mut log)
        .await;
    waiting_approval(&daemon, id, waited).await;
    ctl(&daemon, &["approve", id, "--comment", "ship it"], &mut log).await;
    daemon.wait_status(id, "closed").await;
    daemon
        .wait_for("the worktree to go", |e| {
            e["type"] == "worktree.removed" && e["bead"] == id
        })
        .await;
    c.ask(&request(32, "show", json!({"id": id})), 1, &mut log)
        .await;
    c.ask(&request(33, "cancel", json!({"id": id})), 1, &mut log)
        .await;

    log.section("a blocked bead, retried");
    c.ask(
        &request(
            40,
            "submit",
            json!({"beads": [{"id": "cat-stuck", "title": "Stuck"}]}),
        ),
        1,
        &mut log,
    )
    .await;
    let stuck = "cat-stuck";
    daemon.wait_status(stuck, "blocked").await;
    c.ask(&request(41, "retry", json!({"id": stuck})), 1, &mut log)
        .await;
    daemon
        .follow_until("cat-stuck to be blocked again", TIMEOUT, |events| {
            events
                .iter()
                .filter(|e| {
                    e["type"] == "bead.status" && e["id"] == stuck && e["status"] == "blocked"
                })
                .count()
                >= 2
        })
        .await;
    ctl(&daemon, &["retry", "cat-404"], &mut log).await;

    log.section("pausing, closing, reopening and cancelling");
    c.ask(r#"{"id":50,"method":"pause"}"#, 1, &mut log).await;
    c.ask(
        r#"{"id":51,"method":"pause","params":{"model":"opus"}}"#,
        1,
        &mut log,
    )
    .await;
    c.ask(
        r#"{"id":52,"method":"resume","params":{"model":"opus"}}"#,
        1,
        &mut log,
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
        &mut log,
    )
    .await;
    c.ask(
        &request(54, "submit", json!({"id": "cat-x", "title": "Twice"})),
        1,
        &mut log,
    )
    .await;
    c.ask(
        &request(55, "close", json!({"id": "cat-x", "reason": "not now"})),
        1,
        &mut log,
    )
    .await;
    c.ask(&request(56, "reopen", json!({"id": "cat-x"})), 1, &mut log)
        .await;
    c.ask(
        &request(57, "cancel", json!({"id": "cat-x", "reason": "dropped"})),
        1,
        &mut log,
    )
    .await;
    daemon
        .wait_for("the cancelled bead's cleanup", |e| {
            e["type"] == "worktree.removed" && e["bead"] == "cat-x"
        })
        .await;
    c.ask(r#"{"id":58,"method":"status"}"#, 1, &mut log).await;
    ctl(&daemon, &["pause", "--model", "haiku"], &mut log).await;
    ctl(&daemon, &["resume", "--model", "haiku"], &mut log).await;
    let submitted = ctl(
        &daemon,
        &["submit", "--title", "From ctl", "--priority", "3"],
        &mut log,
    )
    .await;
    let new = submitted.trim().rsplit(' ').next().expect("the new id");
    ctl(&daemon, &["close", new, "--reason", "done"], &mut log).await;
    ctl(&daemon, &["reload"], &mut log).await;

    log.section("events");
    c.ask(r#"{"id":60,"method":"reload"}"#, 1, &mut log).await;
    let mut e = Raw::connect(&socket, &mut log).await;
    e.ask_all(
        r#"{"id":61,"method":"subscribe","params":{"since":0,"follow":false}}"#,
        &mut log,
    )
    .await;
    let mut e = Raw::connect(&socket, &mut log).await;
    e.ask_all(
        r#"{"id":62,"method":"subscribe","params":{"since":0,"follow":false,"bead":"cat-x","types":["bead.status"]}}"#,
        &mut log,
    )
    .await;
    let mut e = Raw::connect(&socket, &mut log).await;
    e.ask(
        r#"{"id":63,"method":"subscribe","params":{"since":3}}"#,
        2,
        &mut log,
    )
    .await;
    drop(e);
    ctl(&daemon, &["events", "--since", "0"], &mut log).await;
    ctl(&daemon, &["events", "--bead", "cat-x", "--json"], &mut log).await;

    log.section("interchange and shutdown");
    c.ask(r#"{"id":70,"method":"export"}"#, 1, &mut log).await;
    c.ask(
        r#"{"id":71,"method":"import","params":{"beads":[{"id":"cat-x","title":"Later","status":"open","priority":2,"issue_type":"task","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"},{"id":"bd-9","title":"Imported","status":"open","priority":2,"issue_type":"task","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}]}}"#,
        1,
        &mut log,
    )
    .await;
    c.ask(r#"{"id":72,"method":"shutdown"}"#, 1, &mut log).await;

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
