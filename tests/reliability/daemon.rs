//! `catalystd` as a real subprocess, for what an in-process daemon cannot show: being killed
//! with SIGKILL, a second daemon on the same workspace, its resident memory.
//!
//! A [`Workspace`] is a temporary git repository with a config whose agents are stub-claude
//! (`catalyst __stub-claude`) following a scenario; [`Workspace::spawn`] starts `catalystd` on
//! it, with its stderr appended to `daemon.log` next to the repository.

use crate::repo;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use catalyst::cli::client::Client;
use catalyst::daemon::Paths;
use catalyst::protocol::{Method, SubscribeParams};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

/// How long any wait in these tests may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(120);

pub struct Workspace {
    /// Removed on drop, unless the workspace lives on a mount the test owns.
    _dir: Option<tempfile::TempDir>,
    pub root: PathBuf,
    pub repo: PathBuf,
    pub paths: Paths,
    pub scenario: PathBuf,
    /// The stub's invocation log.
    pub log: PathBuf,
    /// `catalystd`'s stderr, appended by every start.
    pub daemon_log: PathBuf,
}

impl Workspace {
    /// A new workspace in a temporary folder.
    pub fn new(scenario: &str, extra: &str) -> Workspace {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let mut ws = Workspace::at(&root, &root, scenario, extra);
        if std::env::var_os("CATALYST_KEEP_TEST_DIRS").is_some() {
            eprintln!("keeping {}", dir.keep().display());
        } else {
            ws._dir = Some(dir);
        }
        ws
    }

    /// A workspace whose repository is `repo_parent/repo`, with the test's own files (scenario,
    /// stub log, daemon log) in `files`.
    pub fn at(repo_parent: &Path, files: &Path, scenario: &str, extra: &str) -> Workspace {
        let repo = repo_parent.join("repo");
        std::fs::create_dir_all(&repo).expect("repo dir");
        catalyst::cli::demo::init_repo(&repo).expect("init repo");
        let paths = Paths::new(&repo);
        std::fs::create_dir_all(&paths.state).expect("state dir");
        let scenario_path = files.join("scenario.toml");
        std::fs::write(&scenario_path, scenario).expect("scenario");
        let log = files.join("agents.log");
        let agent = [
            env!("CARGO_BIN_EXE_catalyst").to_owned(),
            "__stub-claude".to_owned(),
        ];
        let config = catalyst::cli::demo::stub_config(&agent, &scenario_path, &log);
        std::fs::write(paths.config(), merge_config(extra, &config)).expect("config");
        Workspace {
            _dir: None,
            root: files.to_owned(),
            repo,
            paths,
            scenario: scenario_path,
            log,
            daemon_log: files.join("daemon.log"),
        }
    }

    /// Starts `catalystd --workspace <repo>`.
    pub fn spawn(&self) -> Catalystd {
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.daemon_log)
            .expect("daemon log");
        let child = Command::new(env!("CARGO_BIN_EXE_catalystd"))
            .arg("--workspace")
            .arg(&self.repo)
            .args(["--log-level", "info"])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn catalystd");
        Catalystd { child: Some(child) }
    }

    /// Connects to the daemon once its socket answers; `daemon` is checked so that a daemon
    /// that exited fails the test at once instead of at the timeout.
    pub async fn client(&self, daemon: &mut Catalystd) -> Client {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match Client::connect(&self.paths.socket()).await {
                Ok(c) => return c,
                Err(e) => {
                    if let Some(status) = daemon.exited() {
                        panic!(
                            "catalystd exited ({status}) before answering: {e}\n{}",
                            self.daemon_log_tail()
                        );
                    }
                    assert!(Instant::now() < deadline, "cannot connect: {e}");
                    // The socket answers once the daemon has bound it; until then a stale
                    // socket file refuses or is missing.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    pub async fn call(&self, daemon: &mut Catalystd, method: Method) -> Value {
        self.client(daemon)
            .await
            .call(&method)
            .await
            .expect("request succeeds")
    }

    /// Every event in the journal, through `subscribe` without `follow`.
    pub async fn events(&self, daemon: &mut Catalystd) -> Vec<Value> {
        self.client(daemon)
            .await
            .replay(0)
            .await
            .expect("replay the journal")
    }

    /// Follows the event stream from the start until `done` says the events so far are
    /// enough, and returns them.
    pub async fn follow_until(
        &self,
        daemon: &mut Catalystd,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let mut client = self.client(daemon).await;
        let params = SubscribeParams {
            since: Some(0),
            bead: None,
            types: None,
            follow: true,
        };
        client
            .call(&Method::Subscribe(params))
            .await
            .expect("subscribe");
        let mut events = Vec::new();
        let found = tokio::time::timeout(timeout, async {
            while let Some(e) = client.next_value().await.expect("event stream") {
                events.push(e);
                if done(&events) {
                    return true;
                }
            }
            false
        })
        .await;
        match found {
            Ok(true) => events,
            Ok(false) => panic!("the event stream ended before {what}"),
            Err(_) => panic!("timed out waiting for {what}\n{}", self.daemon_log_tail()),
        }
    }

    /// Waits for an event matching `pred` (replaying from the start) and returns it.
    pub async fn wait_for(
        &self,
        daemon: &mut Catalystd,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let events = self
            .follow_until(daemon, what, TIMEOUT, |events| {
                events.last().is_some_and(&pred)
            })
            .await;
        events.last().cloned().expect("the matching event")
    }

    /// Waits until bead `id` reaches `status`.
    pub async fn wait_status(&self, daemon: &mut Catalystd, id: &str, status: &str) -> Value {
        self.wait_for(daemon, &format!("{id} to become {status}"), |e| {
            e["type"] == "bead.status" && e["id"] == id && e["status"] == status
        })
        .await
    }

    /// Submits one bead with id `id`.
    pub async fn submit(&self, daemon: &mut Catalystd, id: &str) {
        let bead = catalyst::protocol::BeadInput {
            id: Some(id.to_owned()),
            title: format!("bead {id}"),
            ..Default::default()
        };
        self.call(daemon, Method::Submit(vec![bead])).await;
    }

    /// The last lines of the daemon's log, for failure messages.
    pub fn daemon_log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.daemon_log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(40);
        format!("--- daemon.log (tail) ---\n{}", lines[start..].join("\n"))
    }

    pub fn invocations(&self) -> Vec<stub_claude::Invocation> {
        stub_claude::invocations(&self.log).expect("read the stub log")
    }

    /// Processes still alive (not zombies) that were started for this workspace's agents: the
    /// stub and everything it started inherit `STUB_CLAUDE_SCENARIO=<this scenario>`.
    pub fn agent_processes(&self) -> Vec<(i32, String)> {
        let needle = format!("STUB_CLAUDE_SCENARIO={}", self.scenario.display());
        let mut found = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return found;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let dir = entry.path();
            let zombie = std::fs::read_to_string(dir.join("stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, rest)| rest.trim().starts_with('Z'))
                })
                .unwrap_or(true);
            if zombie {
                continue;
            }
            let Ok(environ) = std::fs::read(dir.join("environ")) else {
                continue;
            };
            if environ
                .split(|b| *b == 0)
                .any(|var| var == needle.as_bytes())
            {
                let cmdline = std::fs::read(dir.join("cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                    .unwrap_or_default();
                found.push((pid, cmdline));
            }
        }
        found
    }

    /// Commit messages on `main`, newest first.
    pub fn main_log(&self) -> Vec<String> {
        repo::main_log(&self.repo)
    }

    /// Every file on `main` with its content, sorted by path.
    pub fn files_on_main(&self) -> Vec<(String, String)> {
        repo::files_on_main(&self.repo)
    }

    pub fn branch_exists(&self, bead: &str) -> bool {
        repo::branch_exists(&self.repo, bead)
    }

    pub fn worktree_exists(&self, bead: &str) -> bool {
        self.paths.worktrees().join(bead).exists()
    }
}

/// The stub config with `extra`: top-level keys of both first (those `extra` sets, like the
/// timeouts, replace the stub's, since TOML refuses a key given twice), then the tables of both.
fn merge_config(extra: &str, stub: &str) -> String {
    let split = |text: &str| -> (Vec<String>, Vec<String>) {
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with('['))
            .unwrap_or(lines.len());
        (lines[..at].to_vec(), lines[at..].to_vec())
    };
    let key = |line: &str| line.split_once('=').map(|(k, _)| k.trim().to_owned());
    let (extra_top, extra_tables) = split(extra);
    let (stub_top, stub_tables) = split(stub);
    let overridden: Vec<String> = extra_top.iter().filter_map(|l| key(l)).collect();
    let mut out = extra_top;
    out.extend(
        stub_top
            .into_iter()
            .filter(|l| !key(l).is_some_and(|k| overridden.contains(&k))),
    );
    out.extend(extra_tables);
    out.extend(stub_tables);
    out.join("\n") + "\n"
}

/// A running `catalystd`; killed with SIGKILL when dropped.
pub struct Catalystd {
    child: Option<Child>,
}

impl Catalystd {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGKILL, and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
        }
    }

    /// SIGTERM, and wait for it to exit (it lets running agents finish within its grace).
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("a running daemon");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "catalystd did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A `kB` figure from `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
pub fn vm_kb(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

impl Drop for Catalystd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A small seeded generator (64-bit LCG, high bits out) for reproducible random moments.
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Lcg {
        Lcg(seed ^ 0x5DEE_CE66_D1CE_5EED)
    }

    pub fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + u64::from(self.next_u32()) % (hi - lo + 1)
    }
}

/// A file of an attempt's run folder: `runs/<bead>/<step>/<attempt>/<name>`.
pub fn run_file(ws: &Workspace, bead: &str, step: &str, attempt: u32, name: &str) -> PathBuf {
    ws.paths
        .runs()
        .join(bead)
        .join(step)
        .join(attempt.to_string())
        .join(name)
}
