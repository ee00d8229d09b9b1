//! A [`TestDaemon`] run as a `catalystd` subprocess: what an in-process daemon cannot show
//! (signals, SIGKILL, sd_notify, exit codes, a second daemon on the workspace, its memory).

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use catalyst::cli::client::Client;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::daemon::{Run, TestDaemon};
use crate::{poll, Workspace, TIMEOUT};

/// How `catalystd` is started: [`Workspace::catalystd`], then [`Spawn::spawn`].
#[derive(Clone)]
pub struct Spawn {
    ws: Workspace,
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

    /// Starts it, its stderr appended to [`Workspace::daemon_log`].
    pub fn spawn(self) -> TestDaemon {
        let process = Process::start(self);
        TestDaemon {
            ws: process.spawn.ws.clone(),
            run: Run::Process(Box::new(process)),
        }
    }
}

/// A running `catalystd`; killed with SIGKILL when dropped.
pub(crate) struct Process {
    spawn: Spawn,
    child: Mutex<Child>,
    pid: u32,
    pub(crate) log: DaemonLog,
}

impl Process {
    fn start(spawn: Spawn) -> Process {
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

/// What only a subprocess daemon has; these panic for an in-process one.
impl TestDaemon {
    fn process(&self) -> &Process {
        match &self.run {
            Run::Process(p) => p,
            Run::InProcess(_) => panic!("an in-process daemon: start it with Workspace::spawn"),
        }
    }

    fn process_mut(&mut self) -> &mut Process {
        match &mut self.run {
            Run::Process(p) => p,
            Run::InProcess(_) => panic!("an in-process daemon: start it with Workspace::spawn"),
        }
    }

    /// `catalystd`'s pid.
    pub fn pid(&self) -> u32 {
        self.process().pid
    }

    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.pid() as i32), signal).expect("signal catalystd");
    }

    /// Its exit status, if it has exited.
    pub fn exited(&self) -> Option<ExitStatus> {
        self.process().exited()
    }

    /// Waits for it to exit.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let process = self.process_mut();
        let child = process.child.get_mut().expect("child lock");
        match tokio::time::timeout(TIMEOUT, child.wait()).await {
            Ok(status) => status.expect("wait for catalystd"),
            Err(_) => panic!("catalystd did not exit in time\n{}", process.log.tail()),
        }
    }

    /// SIGKILL, and reap it.
    pub async fn kill(&mut self) {
        let child = self.process_mut().child.get_mut().expect("child lock");
        let _ = child.start_kill();
        let _ = child.wait().await;
    }

    /// SIGTERM, and wait for it to exit (it lets running agents finish within its grace).
    pub async fn terminate(&mut self) -> ExitStatus {
        self.signal(Signal::SIGTERM);
        self.wait_exit().await
    }

    /// What this start of `catalystd` wrote to stderr.
    pub fn stderr(&self) -> String {
        self.process().log.text()
    }

    /// The last lines of [`TestDaemon::stderr`], for failure messages.
    pub fn log_tail(&self) -> String {
        self.process().log.tail()
    }

    /// Waits until the daemon's log has a line containing `needle`, and returns the line. The
    /// log is a plain file: it is read again every few milliseconds, within one timeout.
    pub async fn wait_log(&self, needle: &str) -> String {
        let found = poll::poll(Duration::from_millis(20), async || {
            let text = self.stderr();
            text.lines().find(|l| l.contains(needle)).map(str::to_owned)
        })
        .await;
        found.unwrap_or_else(|| {
            panic!(
                "timed out waiting for `{needle}` in the log:\n{}",
                self.stderr()
            )
        })
    }
}
