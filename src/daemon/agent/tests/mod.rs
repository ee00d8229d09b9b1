//! Tests of [`super`]: pure parsing and mapping by tables, and whole runs with small `sh`
//! scripts standing in for agents.

mod conversation;
mod parse;
mod run;
mod stop;

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::domain::agent::outcome::outcome;
use crate::domain::agent::profile::{AgentProfile, OutputFormat, ProfileError, StdinMode};
use crate::domain::agent::report::{Exit, RunReport};
use crate::domain::agent::tests::block;

/// A temporary folder with a worktree, a run folder and room for agent scripts.
struct Fixture {
    dir: tempfile::TempDir,
    worktree: PathBuf,
    run_dir: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let worktree = dir.path().join("worktree");
        std::fs::create_dir(&worktree).expect("worktree");
        let run_dir = dir.path().join("runs").join("1");
        Fixture {
            dir,
            worktree,
            run_dir,
        }
    }

    /// The folder scripts may use for their own files (pid files, fixtures).
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `body` as a shell script; `$DIR` in it is the fixture's folder.
    fn script(&self, body: &str) -> PathBuf {
        let path = self.path("agent.sh");
        let text = format!("DIR='{}'\n{body}\n", self.dir.path().display());
        std::fs::write(&path, text).expect("write script");
        path
    }

    /// Writes a file of fixture lines for a script to `cat`.
    fn lines(&self, name: &str, lines: &[&str]) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, lines.join("\n") + "\n").expect("write fixture");
        path
    }

    /// A spec running `body` with `sh` and reading its output as `format`.
    fn spec(&self, format: OutputFormat, body: &str) -> RunSpec {
        let script = self.script(body);
        RunSpec {
            profile: AgentProfile {
                command: vec!["sh".into(), script.display().to_string()],
                format,
                stdin: StdinMode::Prompt,
                ..AgentProfile::shell()
            },
            model: "sonnet".into(),
            prompt: "Do the step.\n".into(),
            worktree: self.worktree.clone(),
            run_dir: self.run_dir.clone(),
            env: Vec::new(),
            settings_path: None,
            timeout: Duration::from_secs(60),
            stall_timeout: Duration::from_secs(60),
            grace: Duration::from_secs(5),
            output_cap: 1024 * 1024,
            max_processes: None,
            nice: 0,
            conversation: None,
            sandbox: None,
        }
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.run_dir.join(name)).expect("read run file")
    }
}

async fn run_now(spec: RunSpec) -> RunReport {
    run(spec, CancellationToken::new()).await
}

/// Waits until `done` holds, failing the test after one generous limit.
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let limit = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(
            tokio::time::Instant::now() < limit,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether a process is alive (a zombie waiting for its reaper is not).
fn is_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid")
}

/// One Claude `result` event line.
fn claude_result(subtype: &str, is_error: bool, result: &str) -> String {
    serde_json::json!({
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "duration_ms": 1200,
        "num_turns": 3,
        "result": result,
        "session_id": "s-1",
        "total_cost_usd": 0.0425,
        "usage": {"input_tokens": 120, "output_tokens": 48},
    })
    .to_string()
}
