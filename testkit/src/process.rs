//! `catalystd` run as a subprocess, for a [`crate::TestDaemon`]: what an in-process daemon
//! cannot show (signals, SIGKILL, sd_notify, exit codes, a second daemon on the workspace, its
//! memory). The test daemon's methods for it are beside the test daemon's own.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use catalyst::cli::client::Client;
use tokio::process::{Child, Command};

use crate::{poll, Workspace};

/// How `catalystd` is started: [`Workspace::catalystd`], then [`Spawn::spawn`].
#[derive(Clone)]
pub struct Spawn {
    pub(crate) ws: Workspace,
    env: Vec<(String, String)>,
    args: Vec<String>,
}

impl Spawn {
    pub(crate) fn new(ws: &Workspace) -> Spawn {
        Spawn {
            ws: ws.clone(),
            env: Vec::new(),
            args: Vec::new(),
        }
    }

    /// Sets `key=value` in its environment (which otherwise has no `RUST_LOG`,
    /// `NOTIFY_SOCKET` or `WATCHDOG_USEC`).
    pub fn env(mut self, key: &str, value: &str) -> Spawn {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Adds flags after `--workspace <repo>`.
    pub fn args(mut self, args: &[&str]) -> Spawn {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }
}

/// A running `catalystd`; killed with SIGKILL when dropped.
pub(crate) struct Process {
    pub(crate) spawn: Spawn,
    pub(crate) child: Mutex<Child>,
    pub(crate) pid: u32,
    pub(crate) log: DaemonLog,
}

impl Process {
    pub(crate) fn start(spawn: Spawn) -> Process {
        let path = spawn.ws.daemon_log.clone();
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .expect("daemon log");
        let from = stderr.metadata().expect("daemon log size").len();
        let mut cmd = Command::new(crate::catalystd_bin());
        cmd.arg("--workspace")
            .arg(&spawn.ws.repo)
            .args(&spawn.args)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("RUST_LOG")
            .envs(spawn.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true);
        let child = cmd.spawn().expect("spawn catalystd");
        Process {
            pid: child.id().expect("a running catalystd"),
            child: Mutex::new(child),
            log: DaemonLog { path, from },
            spawn,
        }
    }

    pub(crate) fn restart(&mut self) {
        *self = Process::start(self.spawn.clone());
    }

    pub(crate) fn exited(&self) -> Option<ExitStatus> {
        let mut child = self.child.lock().expect("child lock");
        child.try_wait().ok().flatten()
    }

    /// Connects once the socket answers (it appears once the daemon has bound it); fails the
    /// test at once if the daemon exited instead.
    pub(crate) async fn client(&self, socket: &std::path::Path) -> Client {
        let mut last_error = String::new();
        let connected = poll::poll(Duration::from_millis(5), async || {
            match Client::connect(socket).await {
                Ok(client) => Some(client),
                Err(e) => {
                    if let Some(status) = self.exited() {
                        panic!("catalystd exited ({status}): {e}\n{}", self.log.tail());
                    }
                    last_error = e.to_string();
                    None
                }
            }
        })
        .await;
        connected.unwrap_or_else(|| panic!("cannot connect: {last_error}\n{}", self.log.tail()))
    }
}

/// What one start of `catalystd` wrote to the daemon log (which several starts append to).
#[derive(Clone)]
pub(crate) struct DaemonLog {
    path: PathBuf,
    from: u64,
}

impl DaemonLog {
    pub(crate) fn text(&self) -> String {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return String::new();
        };
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(self.from)).is_ok() {
            let _ = file.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The last lines, for failure messages.
    pub(crate) fn tail(&self) -> String {
        let text = self.text();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(40);
        format!(
            "--- catalystd's log (tail) ---\n{}",
            lines[start..].join("\n")
        )
    }
}
