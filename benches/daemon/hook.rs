//! The `hook` row: what an agent's tool call costs in catalyst's `PreToolUse` hook, run as
//! Claude Code runs it (a new `catalyst-hook pre-tool-use` process, the hook's JSON on stdin,
//! the answer read from stdout), against spawning `/bin/true` the same way in the same run;
//! and the same through `catalyst hook pre-tool-use`, the full command line.
//! The hook decides from the attempt's policy file and hands the record to the attempt's
//! socket, served here by a thread that reads what it is sent, as the daemon's would.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use catalyst::domain::agent::attempt::{AttemptPolicy, POLICY_FILE};
use catalyst::domain::id::BeadId;
use catalyst::domain::model::Role;
use catalyst::domain::policy::Access;

use crate::{percentile, row, target};

/// A `Bash` call the implementer's policy allows, as Claude Code sends it.
const INPUT: &str = r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"cargo test --quiet"},"tool_use_id":"t1"}"#;

/// Spawns `program args` with `input` on stdin, waits for it, returns how long it took and
/// its stdout.
fn spawn(program: &Path, args: &[&str], env: &[(&str, &Path)], input: &str) -> (Duration, String) {
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // A program that does not read its input may exit first.
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes());
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read stdout");
    child.wait().expect("wait");
    (start.elapsed(), out)
}

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

pub fn hook(quick: bool) {
    let n = if quick { 50 } else { 1000 };
    let dir = tempfile::tempdir().expect("temp dir");
    let (worktree, run_dir) = (dir.path().join("wt"), dir.path().join("run"));
    std::fs::create_dir_all(&worktree).expect("worktree");
    std::fs::create_dir_all(&run_dir).expect("run folder");
    let policy = AttemptPolicy {
        bead: BeadId::new("cat-1").expect("id"),
        step: BeadId::new("cat-1.implement").expect("id"),
        role: Role::Implement,
        attempt: 1,
        access: Access::Worktree,
        tools: None,
        worktree: worktree.clone(),
        target_branch: "main".into(),
        context: run_dir.join("context.md"),
        contract: "---STEP-RESULT---".into(),
    };
    std::fs::write(
        run_dir.join(POLICY_FILE),
        serde_json::to_vec(&policy).expect("json"),
    )
    .expect("policy");
    let socket = run_dir.join("hook.sock");
    let listener = UnixListener::bind(&socket).expect("socket");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut sink = Vec::new();
            let mut stream = stream;
            let _ = stream.read_to_end(&mut sink);
        }
    });
    let context = run_dir.join("context.md");
    let env = [
        ("CATALYST_SOCKET", socket.as_path()),
        ("CATALYST_CONTEXT", context.as_path()),
    ];
    let catalyst = catalyst_testkit::catalyst_bin();
    let hook = catalyst.with_file_name("catalyst-hook");
    let truth = Path::new("/bin/true");
    // Warm the page cache for the three binaries.
    for (program, args) in [
        (hook.as_path(), &["pre-tool-use"][..]),
        (catalyst.as_path(), &["hook", "pre-tool-use"][..]),
    ] {
        let (_, answer) = spawn(program, args, &env, INPUT);
        assert!(answer.contains("\"allow\""), "the hook allows it: {answer}");
    }
    spawn(truth, &[], &[], INPUT);
    let (mut hooks, mut trues, mut fulls) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so all see the same machine.
    for _ in 0..n {
        hooks.push(spawn(&hook, &["pre-tool-use"], &env, INPUT).0);
        trues.push(spawn(truth, &[], &env, INPUT).0);
        fulls.push(spawn(&catalyst, &["hook", "pre-tool-use"], &env, INPUT).0);
    }
    let (hooks, trues, fulls) = (sorted(hooks), sorted(trues), sorted(fulls));
    let (t50, t99) = (percentile(&trues, 50), percentile(&trues, 99));
    let (h50, h99) = (percentile(&hooks, 50), percentile(&hooks, 99));
    let (f50, f99) = (percentile(&fulls, 50), percentile(&fulls, 99));
    row(
        "hook: `catalyst hook pre-tool-use`, p50 / p99",
        format!("{f50:.2?} / {f99:.2?}"),
        "-",
        &format!("/bin/true spawn p99 {t99:.2?}"),
        f99.as_secs_f64() / t99.as_secs_f64(),
    );
    row(
        "hook: `catalyst-hook pre-tool-use`, p50",
        format!("{h50:.2?}"),
        "-",
        &format!("/bin/true spawn p50 {t50:.2?}"),
        h50.as_secs_f64() / t50.as_secs_f64(),
    );
    let ratio = h99.as_secs_f64() / t99.as_secs_f64();
    row(
        "hook: `catalyst-hook pre-tool-use`, p99",
        format!("{h99:.2?}"),
        &target("<= 2x", ratio <= 2.0),
        &format!("/bin/true spawn p99 {t99:.2?}"),
        ratio,
    );
    let logged = std::fs::read_to_string(run_dir.join("tools.jsonl")).unwrap_or_default();
    assert_eq!(logged.lines().count(), 2 * n + 2, "every call was logged");
}
