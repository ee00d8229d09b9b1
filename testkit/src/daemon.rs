//! [`TestDaemon`]: a daemon on a [`Workspace`], in-process or as a subprocess, and the
//! requests and waits the tests make of it.

use std::ops::Deref;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use catalyst::cli::client::Client;
use catalyst::daemon::{self, DaemonError};
use catalyst::protocol::{BeadInput, Method, ShowParams};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::events::{self, Event, Events};
use crate::process::{Process, Spawn};
use crate::{poll, Workspace, TIMEOUT};

/// A daemon running on a [`Workspace`] (which it derefs to). Started in-process by
/// [`Workspace::start`] or [`TestDaemon::start`], or as `catalystd` by [`Workspace::spawn`];
/// stopped when dropped (an in-process one is cancelled, a subprocess killed).
pub struct TestDaemon {
    pub(crate) ws: Workspace,
    pub(crate) run: Run,
}

pub(crate) enum Run {
    InProcess(InProcess),
    Process(Box<Process>),
}

pub(crate) struct InProcess {
    shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), DaemonError>>>,
}

impl InProcess {
    fn start(ws: &Workspace) -> InProcess {
        let shutdown = CancellationToken::new();
        let (paths, token) = (ws.paths.clone(), shutdown.clone());
        // Bound before the task starts, so clients connect at once.
        let bound = daemon::bind(&paths).expect("lock the workspace and bind its socket");
        let task = tokio::spawn(async move {
            let result = bound.run(token, paths).await;
            if let Err(e) = &result {
                eprintln!("daemon failed: {e}");
            }
            result
        });
        InProcess {
            shutdown,
            task: Some(task),
        }
    }
}

impl Workspace {
    /// Starts a daemon in-process (through the library) on this workspace, up once its engine
    /// answers, so that tests may use `catalyst ctl` right away.
    pub async fn start(&self) -> TestDaemon {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .try_init();
        let daemon = TestDaemon {
            ws: self.clone(),
            run: Run::InProcess(InProcess::start(self)),
        };
        daemon.call(Method::Status).await;
        daemon
    }

    /// Starts `catalystd --workspace <repo>` as a subprocess.
    pub fn spawn(&self) -> TestDaemon {
        self.catalystd().spawn()
    }

    /// `catalystd` with flags or environment of the test's choosing.
    pub fn catalystd(&self) -> Spawn {
        Spawn::new(self)
    }
}

impl Deref for TestDaemon {
    type Target = Workspace;

    fn deref(&self) -> &Workspace {
        &self.ws
    }
}

impl TestDaemon {
    /// An in-process daemon on a new workspace whose agents follow `scenario`, with `extra`
    /// config keys.
    pub async fn start(scenario: &str, extra: &str) -> TestDaemon {
        Workspace::new(scenario, extra).start().await
    }

    /// An in-process daemon on a new workspace whose agents are configured by `config(root)`.
    pub async fn start_with(config: impl FnOnce(&Path) -> String + 'static) -> TestDaemon {
        Workspace::builder()
            .agent_config(config)
            .build()
            .start()
            .await
    }

    /// The workspace the daemon runs on.
    pub fn workspace(&self) -> &Workspace {
        &self.ws
    }

    /// Stops the daemon and waits for it; it must stop cleanly.
    pub async fn stop(&mut self) {
        match &mut self.run {
            Run::InProcess(run) => {
                run.shutdown.cancel();
                if let Some(task) = run.task.take() {
                    let result = tokio::time::timeout(TIMEOUT, task)
                        .await
                        .expect("daemon stops in time");
                    result.expect("daemon task").expect("daemon ran cleanly");
                }
            }
            Run::Process(_) => {
                let status = self.terminate().await;
                assert!(status.success(), "catalystd stopped with {status}");
            }
        }
    }

    /// Starts the daemon again on the same workspace, the same way (after a stop or a kill).
    pub fn restart(&mut self) {
        match &mut self.run {
            Run::InProcess(run) => *run = InProcess::start(&self.ws),
            Run::Process(process) => process.restart(),
        }
    }

    /// A new connection. An in-process daemon's socket is bound before it starts, so this
    /// connects at once; a subprocess is waited for until its socket answers.
    pub async fn client(&self) -> Client {
        match &self.run {
            Run::Process(process) => process.client(&self.paths.socket()).await,
            Run::InProcess(_) => match Client::connect(&self.paths.socket()).await {
                Ok(c) => c,
                Err(e) => panic!(
                    "cannot connect ({e}); if the daemon failed, its error is in the log above"
                ),
            },
        }
    }

    /// Sends one request; it must succeed.
    pub async fn call(&self, method: Method) -> Value {
        self.client()
            .await
            .call(&method)
            .await
            .expect("request succeeds")
    }

    /// Submits one bead and returns its id.
    pub async fn submit(&self, input: BeadInput) -> String {
        let answer = self.call(Method::Submit(vec![input])).await;
        answer["ids"][0].as_str().expect("an id").to_owned()
    }

    /// Submits beads as one group and returns their ids.
    pub async fn submit_all(&self, inputs: Vec<BeadInput>) -> Vec<String> {
        let answer = self.call(Method::Submit(inputs)).await;
        answer["ids"]
            .as_array()
            .expect("ids")
            .iter()
            .map(|id| id.as_str().expect("an id").to_owned())
            .collect()
    }

    pub async fn show(&self, id: &str) -> Value {
        self.call(Method::Show(ShowParams {
            id: id.into(),
            runs: false,
        }))
        .await
    }

    /// Comments on a bead, as text.
    pub async fn comments(&self, id: &str) -> Vec<String> {
        let shown = self.show(id).await;
        shown["bead"]["comments"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// Installs a formula in the workspace and makes the daemon read it.
    pub async fn add_formula(&self, name: &str, text: &str) {
        self.write_formula(name, text);
        self.call(Method::Reload).await;
    }

    /// A subscription to every event from `since`.
    pub async fn subscribe(&self, since: u64) -> Events {
        self.subscribe_types(since, &[]).await
    }

    /// A subscription to the events of `types` from `since`.
    pub async fn subscribe_types(&self, since: u64, types: &[&str]) -> Events {
        Events::open(self.client().await, since, types, self.daemon_log()).await
    }

    /// Waits until an event matching `pred` has happened (replaying from the start), and
    /// returns it.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&Event) -> bool) -> Event {
        self.subscribe(0).await.wait_for(what, pred).await
    }

    /// Waits until bead `id` reaches `status` (closed, blocked…).
    pub async fn wait_status(&self, id: &str, status: &str) -> Event {
        self.wait_for(&format!("{id} to become {status}"), |e| {
            e["type"] == "bead.status" && e["bead"] == id && e["status"] == status
        })
        .await
    }

    /// Submits a bead `id` of the shipped `gated` formula (see [`crate::gated_bead`]) and waits
    /// until its approval step waits for a person.
    pub async fn submit_gated_waiting(&self, id: &str, test_command: &str) {
        self.submit(crate::gated_bead(id, test_command)).await;
        let step = format!("{id}.approve");
        self.wait_for("the approval to wait", |e| {
            e["type"] == "gate.waiting" && e["step"] == step.as_str()
        })
        .await;
    }

    /// Follows the events from the start until `done` says those so far are enough, within
    /// `timeout`, and returns them.
    pub async fn follow_until(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[Event]) -> bool,
    ) -> Vec<Event> {
        self.subscribe(0)
            .await
            .follow_until(what, timeout, done)
            .await
    }

    /// Every event so far.
    pub async fn events(&self) -> Vec<Event> {
        events::replay(self.client().await).await
    }

    /// Runs `catalyst ctl --workspace <repo> args…` with `stdin`, and returns its exit code
    /// (-1 if a signal ended it), stdout and stderr.
    pub async fn ctl(&self, args: &[&str], stdin: &str) -> (i32, String, String) {
        self.ctl_env(args, stdin, &[]).await
    }

    /// [`TestDaemon::ctl`] with more environment variables (`TZ`, `NO_COLOR`).
    pub async fn ctl_env(
        &self,
        args: &[&str],
        stdin: &str,
        env: &[(&str, &str)],
    ) -> (i32, String, String) {
        let mut child = tokio::process::Command::new(crate::catalyst_bin())
            .arg("ctl")
            .arg("--workspace")
            .arg(&self.repo)
            .args(args)
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run catalyst ctl");
        let mut input = child.stdin.take().expect("stdin");
        input
            .write_all(stdin.as_bytes())
            .await
            .expect("write ctl's stdin");
        drop(input);
        let out = child.wait_with_output().await.expect("ctl's output");
        crate::cli::outcome(&out)
    }

    fn daemon_log(&self) -> Option<crate::process::DaemonLog> {
        match &self.run {
            Run::Process(process) => Some(process.log.clone()),
            Run::InProcess(_) => None,
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Run::InProcess(run) = &self.run {
            run.shutdown.cancel();
        }
    }
}

impl Spawn {
    /// Starts it, its stderr appended to [`Workspace::daemon_log`].
    pub fn spawn(self) -> TestDaemon {
        let process = Process::start(self);
        TestDaemon {
            ws: process.spawn.ws.clone(),
            run: Run::Process(Box::new(process)),
        }
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
