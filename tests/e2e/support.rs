//! The `TestDaemon` fixture: a temporary git repository with a daemon running in-process on
//! it, agents played by stub-claude (`catalyst __stub-claude`), and helpers that wait for
//! events with one timeout instead of sleeping.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::repo;
use catalyst::cli::client::Client;
use catalyst::daemon::{self, Paths};
use catalyst::protocol::{BeadInput, Method, ShowParams, SubscribeParams};
use serde_json::Value;
use stub_claude::Invocation;
use tokio_util::sync::CancellationToken;

/// How long any wait in these tests may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(60);

pub struct TestDaemon {
    _dir: tempfile::TempDir,
    pub repo: PathBuf,
    pub paths: Paths,
    pub log: PathBuf,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), daemon::DaemonError>>>,
}

impl TestDaemon {
    /// Starts a daemon whose agents follow `scenario`, with `extra` appended to its config.
    pub async fn start(scenario: &str, extra: &str) -> TestDaemon {
        let (scenario, extra) = (scenario.to_owned(), extra.to_owned());
        TestDaemon::start_with(move |root| {
            let scenario_path = root.join("scenario.toml");
            std::fs::write(&scenario_path, scenario).expect("scenario");
            let agent = [
                env!("CARGO_BIN_EXE_catalyst").to_owned(),
                "__stub-claude".to_owned(),
            ];
            let config =
                catalyst::cli::demo::stub_config(&agent, &scenario_path, &root.join("agents.log"));
            format!("{config}\n{extra}\n")
        })
        .await
    }

    /// Starts a daemon whose config is `config(root)`, `root` being the fixture's temporary
    /// folder (the repository is `root/repo`), plus the `catalyst_bin` of this build.
    pub async fn start_with(config: impl FnOnce(&Path) -> String) -> TestDaemon {
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .try_init();
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).expect("repo dir");
        catalyst::cli::demo::init_repo(&repo).expect("init repo");
        let paths = Paths::new(&repo);
        std::fs::create_dir_all(&paths.state).expect("state dir");
        let log = root.join("agents.log");
        // The daemon runs inside the test binary, so the hooks' `catalyst` is not next to it.
        let bin = toml::Value::String(env!("CARGO_BIN_EXE_catalyst").to_owned());
        let config = format!("catalyst_bin = {bin}\n{}\n", config(&root));
        std::fs::write(paths.config(), config).expect("config");
        let mut daemon = TestDaemon {
            _dir: dir,
            repo,
            paths,
            log,
            shutdown: CancellationToken::new(),
            task: None,
        };
        daemon.spawn();
        // Up once its engine answers: tests may use `catalyst ctl` right away.
        daemon.call(Method::Status).await;
        daemon
    }

    fn spawn(&mut self) {
        self.shutdown = CancellationToken::new();
        let (paths, shutdown) = (self.paths.clone(), self.shutdown.clone());
        let bound = daemon::bind(&paths).expect("lock the workspace and bind its socket");
        self.task = Some(tokio::spawn(async move {
            let result = bound.run(shutdown, paths).await;
            if let Err(e) = &result {
                eprintln!("daemon failed: {e}");
            }
            result
        }));
    }

    /// Starts the daemon again on the same workspace (after [`TestDaemon::stop`]).
    pub fn restart(&mut self) {
        self.spawn();
    }

    /// Stops the daemon and waits for it.
    pub async fn stop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let result = tokio::time::timeout(TIMEOUT, task)
                .await
                .expect("daemon stops in time");
            result.expect("daemon task").expect("daemon ran cleanly");
        }
    }

    /// A new connection. The socket is bound before the daemon task starts, so this connects
    /// at once; a daemon that failed to start closes it, and the panic says so.
    pub async fn client(&self) -> Client {
        match Client::connect(&self.paths.socket()).await {
            Ok(c) => c,
            Err(e) => {
                panic!("cannot connect ({e}); if the daemon failed, its error is in the log above")
            }
        }
    }

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

    pub async fn show(&self, id: &str) -> Value {
        self.call(Method::Show(ShowParams {
            id: id.into(),
            runs: false,
        }))
        .await
    }

    /// A subscription from `since`.
    pub async fn subscribe(&self, since: u64) -> Client {
        let mut client = self.client().await;
        let params = SubscribeParams {
            since: Some(since),
            bead: None,
            types: None,
            follow: true,
        };
        client
            .call(&Method::Subscribe(params))
            .await
            .expect("subscribe");
        client
    }

    /// Waits until an event matching `pred` has happened (replaying from the start), and
    /// returns it.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let mut events = self.subscribe(0).await;
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
            Ok(None) => panic!("the event stream ended before {what}"),
            Err(_) => panic!("timed out waiting for {what}"),
        }
    }

    /// Waits until bead `id` reaches `status` (closed, blocked…).
    pub async fn wait_status(&self, id: &str, status: &str) -> Value {
        self.wait_for(&format!("{id} to become {status}"), |e| {
            e["type"] == "bead.status" && e["id"] == id && e["status"] == status
        })
        .await
    }

    /// Every event so far.
    pub async fn events(&self) -> Vec<Value> {
        self.client()
            .await
            .replay(0)
            .await
            .expect("replay the journal")
    }

    /// The agents that ran, in start order.
    pub fn invocations(&self) -> Vec<Invocation> {
        stub_claude::invocations(&self.log).expect("read the stub log")
    }

    /// `(role, model)` of each agent run for `bead`.
    pub fn roles_of(&self, bead: &str) -> Vec<String> {
        self.invocations()
            .into_iter()
            .filter(|i| i.bead.as_deref() == Some(bead))
            .map(|i| i.role().to_owned())
            .collect()
    }

    /// The file `path` on the `main` branch, if present.
    pub fn file_on_main(&self, path: &str) -> Option<String> {
        repo::file_on_main(&self.repo, path)
    }

    /// Commit messages on `main`, newest first.
    pub fn main_log(&self) -> Vec<String> {
        repo::main_log(&self.repo)
    }

    pub fn branch_exists(&self, bead: &str) -> bool {
        repo::branch_exists(&self.repo, bead)
    }

    pub fn worktree_exists(&self, bead: &str) -> bool {
        self.paths.worktrees().join(bead).exists()
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
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub fn bead(title: &str) -> BeadInput {
    BeadInput {
        title: title.into(),
        ..Default::default()
    }
}

/// The run folders under `runs/<bead>/<step>/`.
pub fn run_dir(daemon: &TestDaemon, bead: &str, step: &str, attempt: u32) -> PathBuf {
    daemon
        .paths
        .runs()
        .join(bead)
        .join(step)
        .join(attempt.to_string())
}
