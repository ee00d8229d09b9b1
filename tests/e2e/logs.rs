//! `ctl logs`: an agent's output read back for people, one attempt after another.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;

use catalyst_testkit::{bead_with_id, catalyst_bin, TestDaemon, Workspace, TIMEOUT};

/// The implementer runs a command and writes a file.
const TOOLS: &str = r#"
[[rule]]
role = "implement"
responses = [{ tools = [{ name = "Bash", input = { command = "echo hello from the tool" } }], write = { "a.txt" = "a\n" }, summary = "wrote a" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_read_as_messages_tool_calls_and_the_end_headed_by_the_attempt() {
    let daemon = TestDaemon::start(TOOLS, "").await;
    daemon.submit(bead_with_id("cat-1")).await;
    daemon.wait_status("cat-1", "closed").await;

    let (code, out, err) = daemon.ctl(&["logs", "cat-1.implement"], "").await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], "== cat-1.implement · attempt 1 · sonnet ==",
        "{out}"
    );
    assert_eq!(lines[1], "session started (sonnet)", "{out}");
    assert!(
        out.contains("\n→ Bash echo hello from the tool\n  ← hello from the tool\n"),
        "the call and what it gave back: {out}"
    );
    assert!(out.contains("\n== finished · $"), "how it ended: {out}");
    assert!(!out.contains("\"type\""), "no raw JSON: {out}");

    // A bead means the step that ran last (the daemon merged, without an agent); --raw is the
    // agent's own output.
    let (code, out, _) = daemon.ctl(&["logs", "cat-1"], "").await;
    assert_eq!(code, 0);
    assert!(
        out.starts_with("== cat-1.review · attempt 1 · haiku ==\n"),
        "{out}"
    );
    let (code, raw, _) = daemon.ctl(&["logs", "cat-1", "--raw"], "").await;
    assert_eq!(code, 0);
    assert!(
        raw.starts_with('{') && raw.contains("\"type\":\"result\"") && !raw.contains("=="),
        "{raw}"
    );

    // Clear errors.
    let (code, _, err) = daemon
        .ctl(&["logs", "cat-1.implement", "--attempt", "3"], "")
        .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("`cat-1.implement` has no attempt 3 (it ran 1 times)"),
        "{err}"
    );
    daemon.ctl(&["pause"], "").await;
    daemon.submit(bead_with_id("cat-2")).await;
    let (code, _, err) = daemon.ctl(&["logs", "cat-2"], "").await;
    assert_eq!(code, 1);
    assert!(err.contains("`cat-2` has not run any step yet"), "{err}");
}

/// Reads the lines `ctl` prints into `text` until `done` holds, within the timeout.
async fn read_until(
    lines: &mut Lines<BufReader<ChildStdout>>,
    text: &mut String,
    what: &str,
    done: impl Fn(&str) -> bool,
) {
    let read = async {
        while !done(text) {
            match lines.next_line().await.expect("read ctl's output") {
                Some(line) => {
                    text.push_str(&line);
                    text.push('\n');
                }
                None => return,
            }
        }
    };
    if tokio::time::timeout(TIMEOUT, read).await.is_err() {
        panic!("timed out waiting for {what}; ctl printed:\n{text}");
    }
    assert!(done(text), "ctl ended before {what}:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_follow_the_running_attempt_then_the_next_ones_until_the_bead_closes() {
    let ws = Workspace::new("", "");
    let (first, second) = (ws.stub_file("first"), ws.stub_file("second"));
    ws.set_scenario(&format!(
        "[[rule]]\nrole = \"implement\"\nresponses = [\n  {{ wait_for = {:?}, exit_code = 1 }},\n  {{ wait_for = {:?}, write = {{ \"a.txt\" = \"a\\n\" }}, summary = \"wrote a\" }},\n]\n",
        first.display().to_string(),
        second.display().to_string(),
    ));
    let daemon = ws.start().await;
    daemon.submit(bead_with_id("cat-f")).await;
    daemon
        .wait_for("the first implement attempt", |e| {
            e["type"] == "step.dispatched" && e["step"] == "cat-f.implement"
        })
        .await;

    let mut ctl = tokio::process::Command::new(catalyst_bin())
        .args(["ctl", "--workspace"])
        .arg(&daemon.repo)
        .args(["logs", "cat-f", "-f"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run ctl logs -f");
    let mut lines = BufReader::new(ctl.stdout.take().expect("stdout")).lines();
    let mut text = String::new();
    read_until(&mut lines, &mut text, "the running attempt", |t| {
        t.contains("== cat-f.implement · attempt 1 · sonnet ==\nsession started")
    })
    .await;
    std::fs::write(&first, "").expect("release the first attempt");
    read_until(&mut lines, &mut text, "the next attempt, live", |t| {
        t.split_once("== cat-f.implement · attempt 2 · ")
            .is_some_and(|(_, attempt)| attempt.contains("\nsession started"))
    })
    .await;
    let attempt_one = &text
        [text.find("attempt 1").expect("attempt 1")..text.find("attempt 2").expect("attempt 2")];
    assert!(
        attempt_one.contains("\n== "),
        "the first attempt's end: {text}"
    );

    // Meanwhile, without -f: the attempt is said to be running.
    let (code, now, _) = daemon.ctl(&["logs", "cat-f.implement"], "").await;
    assert_eq!(code, 0);
    assert!(
        now.starts_with("== cat-f.implement · attempt 2 · ")
            && now.ends_with("(still running: `-f` follows it)\n"),
        "{now}"
    );

    std::fs::write(&second, "").expect("release the second attempt");
    read_until(&mut lines, &mut text, "the rest of the bead", |t| {
        t.contains("== cat-f.review · attempt 1 · haiku ==")
    })
    .await;
    let status = tokio::time::timeout(TIMEOUT, ctl.wait())
        .await
        .expect("ctl ends once the bead is closed")
        .expect("ctl's exit");
    while let Some(line) = lines.next_line().await.expect("read") {
        text.push_str(&line);
        text.push('\n');
    }
    assert!(status.success(), "{status:?}\n{text}");
    let order: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("== cat-f."))
        .map(|l| l.split(" · ").next().unwrap_or(l))
        .collect();
    assert_eq!(
        order,
        [
            "== cat-f.implement",
            "== cat-f.implement",
            "== cat-f.review",
        ],
        "{text}"
    );
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.starts_with("== finished")),
        "the review's end is the last thing: {text}"
    );
}
