//! Faulty agents: an agent that hangs, dies by a signal, stalls, floods its
//! output, prints bytes that are not UTF-8, or quotes a result block it did not mean. None of
//! them may take the daemon down, leave a process behind, or be believed.

use std::time::{Duration, Instant};

use catalyst::protocol::{LogsParams, Method};
use serde_json::Value;

use catalyst_testkit::procfs::vm_kb;
use catalyst_testkit::{bead_with_id, Workspace};

/// Whether process `pid` is gone (or a zombie, which runs nothing).
fn finished(e: &Value, step: &str, attempt: u32) -> bool {
    e["type"] == "step.finished" && e["step"] == step && e["attempt"] == attempt
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_agent_and_its_children_are_killed_at_the_timeout_and_retried() {
    // The agent hangs in a tool call whose shell left a child that ignores SIGTERM: stopping
    // only the agent, or only politely, would leave that child running in the worktree.
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { tools = [{ name = "Bash", input = { command = "(trap '' TERM; exec sleep 300) >/dev/null 2>&1 & sleep 300" } }] },
  { write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" },
]
"#;
    let ws = Workspace::new(
        scenario,
        "agent_timeout_secs = 2\nstall_timeout_secs = 60\ngrace_secs = 1",
    );
    let daemon = ws.spawn();
    daemon.submit(bead_with_id("cat-hang")).await;
    let end = daemon
        .wait_for("the hung attempt to end", |e| {
            finished(e, "cat-hang.implement", 1)
        })
        .await;
    // Every process the agent started carries the stub's environment.
    let sleepers: Vec<_> = ws
        .agent_processes()
        .into_iter()
        .filter(|(_, command)| command.contains("sleep 300"))
        .collect();
    assert!(
        sleepers.is_empty(),
        "the child that ignored SIGTERM is gone: {sleepers:?}"
    );
    assert_eq!(end["exit"], "timed out after 2s");
    let took = end["duration_ms"].as_u64().expect("duration");
    assert!(
        (2000..2000 + 1000 + 1500).contains(&took),
        "stopped within the grace period: {took} ms"
    );
    let retry = daemon
        .wait_for("the retry", |e| {
            e["type"] == "step.retry" && e["step"] == "cat-hang.implement"
        })
        .await;
    assert_eq!(retry["counted"], true);
    daemon.wait_status("cat-hang", "closed").await;
    let alive = ws.agent_processes();
    assert!(alive.is_empty(), "{alive:?}");
    println!("hung agent: stopped {took} ms after it started (timeout 2 s, grace 1 s)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_by_a_signal_is_retried() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { signal = "SEGV" },
  { write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" },
]
"#;
    let ws = Workspace::new(scenario, "");
    let daemon = ws.spawn();
    daemon.submit(bead_with_id("cat-crash")).await;
    let end = daemon
        .wait_for("the crashed attempt", |e| {
            finished(e, "cat-crash.implement", 1)
        })
        .await;
    assert_eq!(end["exit"], "killed by SIGSEGV");
    let retry = daemon
        .wait_for("the retry", |e| {
            e["type"] == "step.retry" && e["step"] == "cat-crash.implement"
        })
        .await;
    assert!(
        retry["reason"]
            .as_str()
            .is_some_and(|r| r.contains("SIGSEGV")),
        "{retry}"
    );
    daemon.wait_status("cat-crash", "closed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_agent_is_stopped_as_stalled_and_retried() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { sleep_ms = 60000 },
  { write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" },
]
"#;
    let ws = Workspace::new(
        scenario,
        "agent_timeout_secs = 60\nstall_timeout_secs = 1\ngrace_secs = 1",
    );
    let daemon = ws.spawn();
    daemon.submit(bead_with_id("cat-stall")).await;
    let end = daemon
        .wait_for("the stalled attempt", |e| {
            finished(e, "cat-stall.implement", 1)
        })
        .await;
    assert_eq!(end["exit"], "no output for 1s");
    assert!(end["duration_ms"].as_u64().expect("duration") < 5000);
    let retry = daemon
        .wait_for("the retry", |e| {
            e["type"] == "step.retry" && e["step"] == "cat-stall.implement"
        })
        .await;
    assert_eq!(retry["counted"], true, "a stall counts like a timeout");
    daemon.wait_status("cat-stall", "closed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gibibyte_of_output_keeps_the_daemon_small_and_the_log_capped() {
    const FLOOD: u64 = 1 << 30;
    const CAP: u64 = 4 << 20;
    let scenario = format!(
        r#"
[[rule]]
role = "implement"
responses = [{{ flood_bytes = {FLOOD}, write = {{ "hello.txt" = "hello\n" }}, summary = "wrote hello.txt" }}]
"#
    );
    let ws = Workspace::new(&scenario, &format!("output_cap_bytes = {CAP}"));
    let daemon = ws.spawn();
    daemon.submit(bead_with_id("cat-flood")).await;
    daemon
        .wait_for("implement to start", |e| {
            e["type"] == "step.dispatched" && e["step"] == "cat-flood.implement"
        })
        .await;
    let started = Instant::now();
    let pid = daemon.pid();
    let mut sampled = 0;
    let end = {
        let waiting = daemon.wait_for("the flood to end", |e| {
            finished(e, "cat-flood.implement", 1)
        });
        tokio::pin!(waiting);
        loop {
            tokio::select! {
                end = &mut waiting => break end,
                () = tokio::time::sleep(Duration::from_millis(100)) => {
                    sampled = sampled.max(vm_kb(pid, "VmRSS").unwrap_or(0));
                }
            }
        }
    };
    let flood_secs = started.elapsed().as_secs_f64();
    let hwm = vm_kb(pid, "VmHWM").expect("VmHWM");
    assert_eq!(end["exit"], "exit code 0");
    let stdout = ws.run_dir("cat-flood", "implement", 1).join("stdout");
    let stored = std::fs::metadata(&stdout).expect("stdout").len();
    assert!(
        stored <= CAP + 200,
        "the stored log is capped: {stored} bytes"
    );
    let report: Value = serde_json::from_slice(
        &std::fs::read(stdout.with_file_name("report.json")).expect("report"),
    )
    .expect("report json");
    assert!(report["stdout_bytes"].as_u64().expect("bytes") > FLOOD);
    assert_eq!(report["truncated"], true);
    daemon.wait_status("cat-flood", "closed").await;
    println!(
        "1 GiB flood: {flood_secs:.1} s; daemon's peak resident memory {:.1} MB (VmHWM), highest sample {:.1} MB (VmRSS every 100 ms); stored log {stored} bytes",
        hwm as f64 / 1024.0,
        sampled as f64 / 1024.0
    );
    assert!(
        hwm < 100 * 1024,
        "the daemon's peak resident memory stays under 100 MB: {hwm} kB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_that_is_not_utf8_is_handled() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [{ non_utf8 = true, write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]
"#;
    let ws = Workspace::new(scenario, "");
    let daemon = ws.spawn();
    daemon.submit(bead_with_id("cat-bytes")).await;
    daemon.wait_status("cat-bytes", "closed").await;
    let stdout = ws.run_dir("cat-bytes", "implement", 1).join("stdout");
    let bytes = std::fs::read(&stdout).expect("stdout");
    assert!(
        String::from_utf8(bytes).is_err(),
        "the bytes are stored as the agent wrote them"
    );
    // And served to a person as text.
    let mut client = daemon.client().await;
    let answer = client
        .call(&Method::Logs(LogsParams {
            step: "cat-bytes.implement".into(),
            attempt: Some(1),
            stream: None,
            follow: false,
        }))
        .await
        .expect("logs");
    assert!(answer["file"].is_string());
    let mut text = String::new();
    while let Some(line) = client.next_value().await.expect("log lines") {
        if line["type"] == "log.end" {
            break;
        }
        text.push_str(line["data"].as_str().expect("data"));
    }
    assert!(text.contains('\u{fffd}'), "replacement characters: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_block_outside_the_final_message_is_not_believed() {
    // The decoys say BLOCKED and REJECTED, in a tool result and in an earlier turn of the
    // transcript. The review's final message approves: the bead merges without a fix. The
    // implementer's final message has no block at all: the decoys do not make it valid.
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { fake_block_in_tool_result = true, fake_block_in_earlier_turn = true, raw = "I did it." },
  { write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" },
]

[[rule]]
role = "review"
responses = [{ fake_block_in_tool_result = true, fake_block_in_earlier_turn = true, verdict = "APPROVED", summary = "good" }]
"#;
    let ws = Workspace::new(scenario, "");
    let daemon = ws.spawn();
    daemon.submit(bead_with_id("cat-decoy")).await;
    daemon.wait_status("cat-decoy", "closed").await;
    let events = daemon.events().await;
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "step.result")
        .collect();
    let implement1 = results
        .iter()
        .find(|e| e["step"] == "cat-decoy.implement" && e["attempt"] == 1)
        .expect("implement attempt 1");
    assert_eq!(implement1["outcome"], "malformed", "{implement1}");
    let review = results
        .iter()
        .find(|e| e["step"] == "cat-decoy.review")
        .expect("review");
    assert_eq!(review["verdict"], "approved", "{review}");
    assert!(!events.iter().any(|e| e["type"] == "fix.created"));
    let stdout = std::fs::read_to_string(ws.run_dir("cat-decoy", "review", 1).join("stdout"))
        .expect("stdout");
    assert!(
        stdout.matches("---STEP-RESULT---").count() >= 3,
        "the decoys were really in the transcript"
    );
}

/// An agent dies with its daemon: a `catalystd` killed with SIGKILL cannot stop it, so the
/// agent's process asks the kernel for a signal when its parent dies. Unconfined here: the
/// sandbox (bubblewrap's `--die-with-parent`) would hide whether the daemon asked for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_with_sigkill_takes_its_agents_with_it() {
    let scenario = r#"
[[rule]]
role = "implement"
responses = [
  { tools = [{ name = "Bash", input = { command = "sleep 300" } }] },
]
"#;
    let ws = Workspace::new(
        scenario,
        "agent_timeout_secs = 600\nstall_timeout_secs = 600",
    );
    let config = std::fs::read_to_string(ws.paths.config()).expect("config");
    std::fs::write(ws.paths.config(), catalyst::cli::demo::unconfined(&config)).expect("config");
    let mut daemon = ws.spawn();
    daemon.submit(bead_with_id("cat-orphan")).await;
    daemon
        .wait_for("the agent's tool call", |e| {
            e["type"] == "agent.tool" && e["bead"] == "cat-orphan"
        })
        .await;
    let bead = catalyst::domain::id::BeadId::new("cat-orphan").expect("id");
    let pid_file = ws.paths.run_dir(&bead, "implement", 1).join("pid");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("the agent's pid file")
        .trim()
        .parse()
        .expect("a pid");
    assert!(running(pid), "the agent {pid} runs");
    daemon.kill().await;
    catalyst_testkit::poll::eventually(
        &format!("the agent {pid} to die with its daemon"),
        async || (!running(pid)).then_some(()),
    )
    .await;
    // What the agent started is no child of the daemon; the next start kills its group.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Whether `pid` is a process that runs (not gone, not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}
