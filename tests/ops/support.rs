//! Fixtures for the operations tests: a workspace in a temporary git repository, and
//! `catalystd` run as a real subprocess (signals, sd_notify and exit codes only exist there).

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use catalyst::cli::client::Client;
use catalyst::daemon::Paths;
use catalyst::protocol::{BeadInput, Method, SubscribeParams};
use serde_json::Value;
use tokio::process::{Child, Command};

/// How long any wait in these tests may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(60);

pub const CATALYST: &str = env!("CARGO_BIN_EXE_catalyst");
pub const CATALYSTD: &str = env!("CARGO_BIN_EXE_catalystd");

/// A git repository with `main`, a stub-claude scenario and the stub's invocation log.
pub struct Workspace {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub repo: PathBuf,
    pub paths: Paths,
    pub scenario: PathBuf,
    pub log: PathBuf,
}

impl Workspace {
    /// A repository without any catalyst set-up.
    pub fn bare(scenario: &str) -> Workspace {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).expect("repo dir");
        catalyst::cli::demo::init_repo(&repo).expect("init repo");
        let scenario_path = root.join("scenario.toml");
        std::fs::write(&scenario_path, scenario).expect("scenario");
        Workspace {
            paths: Paths::new(&repo),
            _dir: dir,
            root: root.clone(),
            repo,
            scenario: scenario_path,
            log: root.join("agents.log"),
        }
    }

    /// A repository whose config runs stub agents, with `extra` config keys before them.
    pub fn new(scenario: &str, extra: &str) -> Workspace {
        let ws = Workspace::bare(scenario);
        std::fs::create_dir_all(&ws.paths.state).expect("state dir");
        std::fs::write(ws.paths.config(), format!("{extra}\n{}", ws.stub_config()))
            .expect("config");
        ws
    }

    /// The config keys that make stub-claude the agent.
    pub fn stub_config(&self) -> String {
        let agent = [CATALYST.to_owned(), "__stub-claude".to_owned()];
        catalyst::cli::demo::stub_config(&agent, &self.scenario, &self.log)
    }

    pub fn journal(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.paths.state.join("journal.jsonl"))
            .expect("read the journal");
        text.lines()
            .map(|l| serde_json::from_str(l).expect("journal line"))
            .collect()
    }
}

/// `catalystd` as a child process, killed on drop.
pub struct Daemon {
    child: Child,
    socket: PathBuf,
    stderr: PathBuf,
}

impl Daemon {
    pub fn spawn(ws: &Workspace, env: &[(&str, &str)]) -> Daemon {
        Daemon::spawn_with(ws, env, &[], "catalystd.stderr")
    }

    /// Like [`Daemon::spawn`] with more flags, logging into `<root>/<log>` (so a restart can
    /// keep the first log).
    pub fn spawn_with(ws: &Workspace, env: &[(&str, &str)], args: &[&str], log: &str) -> Daemon {
        let stderr = ws.root.join(log);
        let file = std::fs::File::create(&stderr).expect("stderr file");
        let mut cmd = Command::new(CATALYSTD);
        cmd.arg("--workspace")
            .arg(&ws.repo)
            .args(args)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn catalystd");
        Daemon {
            child,
            socket: ws.paths.socket(),
            stderr,
        }
    }

    pub fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.id().expect("running") as i32)
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(self.pid(), signal).expect("signal catalystd");
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until the daemon's log has a line containing `needle`. The log is a plain file,
    /// so this reads it again every few milliseconds, within one timeout.
    pub async fn wait_log(&self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let text = self.stderr();
            if let Some(line) = text.lines().find(|l| l.contains(needle)) {
                return line.to_owned();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for `{needle}` in the log:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Connects once the socket answers; fails the test if the daemon exited instead.
    pub async fn client(&mut self) -> Client {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            match Client::connect(&self.socket).await {
                Ok(c) => return c,
                Err(e) => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        panic!("catalystd exited ({status}): {e}\n{}", self.stderr());
                    }
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "cannot connect: {e}\n{}",
                        self.stderr()
                    );
                    // The socket appears once the daemon has bound it.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    pub async fn call(&mut self, method: Method) -> Value {
        let mut client = self.client().await;
        client.call(&method).await.expect("request succeeds")
    }

    pub async fn submit(&mut self, input: BeadInput) -> String {
        let answer = self.call(Method::Submit(vec![input])).await;
        answer["ids"][0].as_str().expect("an id").to_owned()
    }

    /// Waits until an event matching `pred` is in the journal (replayed from the start).
    pub async fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let mut events = self.client().await;
        let params = SubscribeParams {
            since: Some(0),
            bead: None,
            types: None,
            follow: true,
        };
        events
            .call(&Method::Subscribe(params))
            .await
            .expect("subscribe");
        let found = tokio::time::timeout(TIMEOUT, async {
            while let Some(event) = events.next_value().await.expect("event stream") {
                if pred(&event) {
                    return Some(event);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(event)) => event,
            Ok(None) => panic!("the event stream ended before {what}\n{}", self.stderr()),
            Err(_) => panic!("timed out waiting for {what}\n{}", self.stderr()),
        }
    }

    pub async fn wait_status(&mut self, id: &str, status: &str) -> Value {
        self.wait_for(&format!("{id} to become {status}"), |e| {
            e["type"] == "bead.status" && e["id"] == id && e["status"] == status
        })
        .await
    }

    /// Waits for the process to exit.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        match tokio::time::timeout(TIMEOUT, self.child.wait()).await {
            Ok(status) => status.expect("wait for catalystd"),
            Err(_) => panic!("catalystd did not exit in time\n{}", self.stderr()),
        }
    }
}

pub fn bead(title: &str) -> BeadInput {
    BeadInput {
        title: title.into(),
        ..Default::default()
    }
}
/// Whether `tool` is on PATH; tests that need it skip with a message when it is not
/// (`.ci/install-test-deps` installs it for CI).
pub fn have(tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    if !found {
        eprintln!("SKIPPED: `{tool}` is not installed (`.ci/install-test-deps` installs it)");
    }
    found
}

/// Runs `catalyst` with `args` in `cwd` and returns (exit code, stdout, stderr).
pub fn catalyst(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(CATALYST)
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_LOG")
        .output()
        .expect("run catalyst");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
