//! The control socket: an agent reaches only its own attempt's hooks, never a person's methods.

use serde_json::json;

use crate::MAIN_CHECKOUT;

/// Sends one request line on `$CATALYST_SOCKET` and prints the answers (hello, then reply).
fn raw_request(line: &str) -> String {
    request_from(&format!("{line:?}"))
}

/// [`raw_request`] for a line that the Python expression `line` makes inside the agent.
fn request_from(line: &str) -> String {
    let script = format!(
        "import json, os, socket; s = socket.socket(socket.AF_UNIX); s.connect(os.environ['CATALYST_SOCKET']); f = s.makefile('rw'); f.write({line} + '\\n'); f.flush(); print(f.readline().strip()); print(f.readline().strip())"
    );
    format!("python3 -c {}", shell_quote(&script))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_approve_a_waiting_bead_or_stop_the_daemon() {
    if crate::skip() {
        return;
    }
    let approve = json!({"id": 1, "method": "approve", "params": {"id": "cat-gated"}}).to_string();
    let shutdown = json!({"id": 2, "method": "shutdown"}).to_string();
    let other_hook = json!({"id": 3, "method": "hook", "params": {"step": "cat-gated.approve", "event": "PreToolUse", "payload": {}}}).to_string();
    // A refused connection is the daemon's own record; the agent may not forge one.
    let forged = "json.dumps({'id': 4, 'method': 'hook', 'params': {'step': os.environ['CATALYST_STEP'], 'event': 'NetworkRefused', 'payload': {'target': 'forged:1'}}})";
    let commands = [
        raw_request(&approve),
        raw_request(&shutdown),
        raw_request(&other_hook),
        request_from(forged),
        format!(
            "{} ctl --workspace {MAIN_CHECKOUT} approve cat-gated",
            catalyst_testkit::catalyst_bin().display()
        ),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let (daemon, shell) = crate::attempt_beside_a_waiting_approval(&commands).await;
    for s in &shell[..4] {
        assert!(s.output.contains("\"forbidden\""), "{s:?}");
    }
    // The daemon's own socket is not in the sandbox at all.
    assert_ne!(shell[4].exit_code, Some(0), "{shell:?}");
    assert!(shell[4].output.contains("no socket"), "{shell:?}");
    // Still waiting for a person, and the daemon still answers.
    let shown = daemon.show("cat-gated").await;
    assert_eq!(shown["bead"]["status"], "in_progress", "{shown}");
    let events = daemon.events().await;
    let approved = |e: &&catalyst_testkit::Event| {
        e["type"] == "gate.passed" && e["step"] == "cat-gated.approve"
    };
    assert_eq!(events.iter().filter(approved).count(), 0);
    let forged =
        |e: &&catalyst_testkit::Event| e["type"] == "agent.tool" && e["target"] == "forged:1";
    assert_eq!(events.iter().filter(forged).count(), 0);
}
