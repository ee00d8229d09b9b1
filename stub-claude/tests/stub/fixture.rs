//! A temp folder with a worktree, a scenario, a state file and a log, and helpers to run the
//! built `stub-claude` binary in it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use stub_claude::Invocation;

/// The flags of catalyst's default `claude-stream-json` profile.
pub const STREAM: &[&str] = &[
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--model",
    "sonnet",
];

/// An implementer whose first answer has no result block and whose `after_stop_block`
/// writes a file and costs something too: what a Stop hook or a follow-up sends back.
pub const SENT_BACK_ONCE: &str = r#"
[[rule]]
role = "implement"
responses = [{ raw = "I am done.", cost_usd = 1.0,
               after_stop_block = { summary = "now with a block", cost_usd = 0.5,
                                    write = { "fixed.txt" = "1" } } }]
"#;

pub struct Stub {
    pub dir: tempfile::TempDir,
    /// The cwd of every invocation: the "worktree".
    pub work: PathBuf,
    pub log: PathBuf,
    scenario: Option<PathBuf>,
}

impl Stub {
    /// A stub driven by `scenario` (TOML).
    pub fn new(scenario: &str) -> Stub {
        let stub = Stub::without_scenario();
        let path = stub.dir.path().join("scenario.toml");
        std::fs::write(&path, scenario).expect("write the scenario");
        Stub {
            scenario: Some(path),
            ..stub
        }
    }

    /// Replaces the scenario (for scenarios that name paths in the temp folder).
    pub fn set_scenario(&mut self, scenario: &str) {
        let path = self.dir.path().join("scenario.toml");
        std::fs::write(&path, scenario).expect("write the scenario");
        self.scenario = Some(path);
    }

    /// Lines a hook appended to `name` in the temp folder, parsed as JSON.
    pub fn dumped(&self, name: &str) -> Vec<Value> {
        match std::fs::read_to_string(self.dir.path().join(name)) {
            Ok(text) => text
                .lines()
                .map(|l| serde_json::from_str(l).expect("a dumped JSON line"))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    pub fn without_scenario() -> Stub {
        let dir = tempfile::tempdir().expect("temp dir");
        let work = dir.path().join("work");
        std::fs::create_dir(&work).expect("create the worktree");
        let log = dir.path().join("log.jsonl");
        Stub {
            dir,
            work,
            log,
            scenario: None,
        }
    }

    /// Writes an executable hook script in the temp folder and returns the command for it.
    pub fn hook(&self, name: &str, script: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}")).expect("write the hook");
        format!("sh {}", path.display())
    }

    /// A command for the stub with catalyst's environment for `role` (and `step` = `<bead>.<role>`).
    pub fn command(&self, role: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stub-claude"));
        cmd.args(args)
            .current_dir(&self.work)
            .env("STUB_CLAUDE_LOG", &self.log)
            .env_remove("STUB_CLAUDE_STATE")
            .env_remove("CATALYST_CONTEXT")
            .env_remove("CATALYST_ROLE")
            .env_remove("CATALYST_STEP")
            .env_remove("CATALYST_BEAD");
        match &self.scenario {
            Some(path) => cmd.env("STUB_CLAUDE_SCENARIO", path),
            None => cmd.env_remove("STUB_CLAUDE_SCENARIO"),
        };
        if !role.is_empty() {
            cmd.env("CATALYST_ROLE", role)
                .env("CATALYST_BEAD", "cat-1")
                .env("CATALYST_STEP", format!("cat-1.{role}"));
        }
        cmd
    }

    /// Starts the stub with `prompt` on stdin, stdout and stderr captured.
    pub fn spawn(&self, cmd: &mut Command, prompt: &str) -> Child {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn stub-claude");
        let mut stdin = child.stdin.take().expect("stdin");
        // A stub that refuses its command line exits without reading the prompt.
        if let Err(e) = stdin.write_all(prompt.as_bytes()) {
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe,
                "write the prompt: {e}"
            );
        }
        child
    }

    /// Runs `cmd` to the end with `prompt` on stdin.
    pub fn run_cmd(&self, mut cmd: Command, prompt: &str) -> Run {
        let child = self.spawn(&mut cmd, prompt);
        Run::from(child.wait_with_output().expect("wait for stub-claude"))
    }

    /// Runs the stub as `role` with `args` and a fixed prompt.
    pub fn run(&self, role: &str, args: &[&str]) -> Run {
        self.run_cmd(self.command(role, args), "Do the step.")
    }

    /// Starts the stub with `args` and stdin kept open, for a conversation in stream-json
    /// user messages.
    pub fn converse(&self, role: &str, args: &[&str]) -> Conversation {
        let mut child = self
            .command(role, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn stub-claude");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            text
        });
        Conversation {
            child,
            stdin,
            lines,
            stderr: Some(stderr),
        }
    }

    pub fn invocations(&self) -> Vec<Invocation> {
        stub_claude::invocations(&self.log).expect("read the log")
    }

    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.work.join(path)).expect("read a worktree file")
    }

    pub fn exists(&self, path: impl AsRef<Path>) -> bool {
        self.work.join(path).exists()
    }
}

/// What one invocation printed and how it ended.
pub struct Run {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            status: out.status,
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    pub fn stdout_text(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }

    /// Every stdout line parsed as JSON (panics on a line that is not).
    pub fn events(&self) -> Vec<Value> {
        self.stdout_text()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }

    /// The last line, which must be the `result` event.
    pub fn result(&self) -> Value {
        let last = String::from_utf8_lossy(&self.stdout)
            .lines()
            .last()
            .map(str::to_string)
            .expect("some output");
        let v: Value = serde_json::from_str(&last).expect("the last line is JSON");
        assert_eq!(v["type"], "result", "{last}");
        v
    }

    /// The final message.
    pub fn message(&self) -> String {
        self.result()["result"]
            .as_str()
            .expect("a result text")
            .to_string()
    }

    /// The `SUMMARY:` of the final message.
    pub fn summary(&self) -> String {
        self.message()
            .lines()
            .find_map(|l| l.strip_prefix("SUMMARY: "))
            .expect("a SUMMARY line")
            .to_string()
    }
}

/// How long a conversation waits for the stub's next line, or for it to exit, before the test
/// fails: far more than a turn takes, so reaching it means the stub is stuck.
const CONVERSATION_TIMEOUT: Duration = Duration::from_secs(30);

/// A stub run whose stdin stays open: the test sends user messages one at a time and reads
/// stdout (on a thread) up to each `result` event.
pub struct Conversation {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Option<JoinHandle<String>>,
}

/// How a conversation ended: the exit status, the events printed after the last one read, and
/// stderr.
pub struct Ended {
    pub status: ExitStatus,
    pub rest: Vec<Value>,
    pub stderr: String,
}

impl Conversation {
    /// A stream-json user message line with `content` (a string or text blocks).
    pub fn user_line(content: Value) -> String {
        let message = serde_json::json!({
            "type": "user",
            "message": {"role": "user", "content": content},
            "parent_tool_use_id": null,
            "session_id": "",
        });
        format!("{message}\n")
    }

    /// Writes `text` to the stub's stdin as it is (and flushes it).
    pub fn write(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is still open");
        stdin
            .write_all(text.as_bytes())
            .and_then(|()| stdin.flush())
            .expect("write to the stub's stdin");
    }

    /// Sends a user message whose content is the string `text`.
    pub fn send(&mut self, text: &str) {
        self.write(&Conversation::user_line(Value::from(text)));
    }

    /// The events up to and including the next `result` event; fails when stdout ends first or
    /// nothing comes for [`CONVERSATION_TIMEOUT`].
    pub fn until_result(&mut self) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let line = match self.lines.recv_timeout(CONVERSATION_TIMEOUT) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => panic!("no result event in time: {events:?}"),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("stdout ended before a result event: {events:?}")
                }
            };
            let event: Value = serde_json::from_str(&line).expect("a JSON line");
            let done = event["type"] == "result";
            events.push(event);
            if done {
                return events;
            }
        }
    }

    /// Whether the stub is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().expect("poll the stub").is_none()
    }

    /// Closes stdin and waits for the stub to exit.
    pub fn finish(mut self) -> Ended {
        drop(self.stdin.take());
        self.exit()
    }

    /// Waits for the stub to exit without closing stdin: it must end the session by itself.
    pub fn exit(mut self) -> Ended {
        let deadline = Instant::now() + CONVERSATION_TIMEOUT;
        let mut rest = Vec::new();
        // Stdout ends when the stub exits.
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => rest.push(serde_json::from_str(&line).expect("a JSON line")),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => panic!("the stub did not exit: {rest:?}"),
            }
        }
        let status = self.child.wait().expect("wait for stub-claude");
        let stderr = self
            .stderr
            .take()
            .map(|h| h.join().expect("the stderr reader"))
            .unwrap_or_default();
        Ended {
            status,
            rest,
            stderr,
        }
    }
}

impl Drop for Conversation {
    /// A failed test does not leave its stub waiting on stdin.
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
