//! The engine: the single owner of the daemon's state.
//!
//! One task runs [`Engine::run`]. Everything that changes state arrives as an [`Input`] on its
//! channel (control requests, finished steps and merges, inbox files, reloads) or as a timer
//! it set itself. For each input the engine decides through the pure core (readiness, pouring,
//! the router), writes the resulting events as one group commit, and only then starts the
//! effects (agents, gates, git) as tasks that report back with another input. The engine never
//! waits on I/O other than its own journal appends.

mod beads;
mod finish;
mod hooks;
mod recovery;
mod requests;
mod runner;
mod schedule;
mod summary;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::daemon::beads::follow::BeadsFileRead;
use crate::daemon::beads::writeback;
use crate::daemon::fswatch::WorkspaceChange;
use crate::daemon::store::{Store, StoreError};
use crate::daemon::worktree::Repo;
use crate::daemon::Paths;
use crate::domain::config::Config;
use crate::domain::event::{Event, EventBody};
use crate::domain::formula::FormulaSet;
use crate::domain::id::BeadId;
use crate::domain::prompt::PromptSet;
use crate::protocol::{Answer, EngineRequest, ErrorCode, RpcError};

pub use runner::StepDone;
pub use summary::Summary;

/// What the engine is told.
#[derive(Debug)]
pub enum Input {
    /// A control request, answered on `reply` once its events are durable.
    Request {
        method: EngineRequest,
        reply: oneshot::Sender<Result<Answer, RpcError>>,
    },
    /// A step's attempt (agent or gate) ended.
    StepDone(Box<StepDone>),
    /// The daemon's fast-forward of the target branch for a bead ended.
    MergeDone {
        work: BeadId,
        step: BeadId,
        result: Result<crate::daemon::worktree::MergeOutcome, MergeFailure>,
    },
    /// A bead's worktree and branch were removed (or could not be).
    Removed {
        work: BeadId,
        result: Result<(), String>,
    },
    /// A file appeared in the inbox.
    Inbox(PathBuf),
    /// Config, prompts or formulas changed on disk (or SIGHUP).
    Reload,
    /// Asks for the [`Summary`]. Answered only once recovery is done, so the first answer also
    /// tells that the daemon is ready.
    Summary(oneshot::Sender<Summary>),
    /// The followed beads file was read (see `crate::daemon::beads::follow`).
    BeadsFile(Vec<crate::domain::model::Bead>),
    /// A write-back command ran (see `crate::daemon::beads::writeback`).
    WriteBack(writeback::Report),
}

impl From<WorkspaceChange> for Input {
    fn from(change: WorkspaceChange) -> Input {
        match change {
            WorkspaceChange::InboxFile(path) => Input::Inbox(path),
            WorkspaceChange::Reload => Input::Reload,
        }
    }
}

impl From<BeadsFileRead> for Input {
    fn from(BeadsFileRead(beads): BeadsFileRead) -> Input {
        Input::BeadsFile(beads)
    }
}

impl From<writeback::Report> for Input {
    fn from(report: writeback::Report) -> Input {
        Input::WriteBack(report)
    }
}

/// Why the daemon's fast-forward of the target failed.
#[derive(Debug)]
pub struct MergeFailure {
    pub message: String,
    /// Trying again later may work (the target moved at that instant, a git lock is held):
    /// the bead waits instead of being blocked.
    pub transient: bool,
}

/// The parts of the engine other tasks hold: where to send inputs, and the last durable seq.
#[derive(Clone, Debug)]
pub struct EngineHandle {
    pub tx: mpsc::Sender<Input>,
    pub seq: watch::Receiver<u64>,
    pub journal: PathBuf,
}

impl EngineHandle {
    /// Sends a control request and waits for its answer.
    pub async fn request(&self, method: EngineRequest) -> Result<Answer, RpcError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Input::Request { method, reply })
            .await
            .map_err(|_| RpcError::new(ErrorCode::ShuttingDown, "the daemon is stopping"))?;
        answer
            .await
            .map_err(|_| RpcError::new(ErrorCode::ShuttingDown, "the daemon is stopping"))?
    }

    /// The engine's [`Summary`]; `None` once the engine has stopped.
    pub async fn summary(&self) -> Option<Summary> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(Input::Summary(reply)).await.ok()?;
        answer.await.ok()
    }
}

/// Config, prompts and formulas, replaced together on reload.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub config: Arc<Config>,
    pub prompts: Arc<PromptSet>,
    pub formulas: Arc<FormulaSet>,
}

/// What is running for a work bead (one step at a time per bead).
#[derive(Debug)]
struct Running {
    step: BeadId,
    attempt: u32,
    /// The model, for agent steps (gates count against no model).
    model: Option<String>,
    started: Instant,
    cancel: CancellationToken,
    /// Whether the `Stop` hook has sent this attempt's agent back once already.
    stop_blocked: bool,
}

/// A model that reported a usage limit (or a person paused).
#[derive(Debug, Clone, Copy)]
struct Pause {
    until: Instant,
}

/// Work the engine could not record because the journal could not be written.
#[derive(Debug)]
enum Deferred {
    /// An input whose events failed to write; handling it again is safe (see `handle`).
    Input(Input),
    /// Start-up recovery's events (interrupted steps) failed to write.
    Recover,
}

/// The first wait before looking again at a journal that could not be written, and the most.
const STORAGE_RETRY_FIRST: Duration = Duration::from_secs(1);
const STORAGE_RETRY_MAX: Duration = Duration::from_secs(15);

pub struct Engine {
    paths: Paths,
    store: Store,
    loaded: Loaded,
    repo: Repo,
    tx: mpsc::Sender<Input>,
    seq: watch::Sender<u64>,
    tracker: TaskTracker,
    /// Cancels running agents: fired at the end of the shutdown grace period.
    agents: CancellationToken,
    running: HashMap<BeadId, Running>,
    /// Work beads whose molecule is in progress (poured, not closed or blocked).
    active: HashSet<BeadId>,
    merging: HashSet<BeadId>,
    removing: HashSet<BeadId>,
    /// Pending `cancel` requests: the bead is closed once its agent has stopped.
    cancelling: HashMap<BeadId, Option<String>>,
    paused: bool,
    paused_models: HashMap<String, Pause>,
    /// The pause length last used per model, kept after the pause ends so that a model that
    /// hits its limit again soon after waits twice as long; forgotten after a run of the model
    /// that did not hit it.
    model_backoff: HashMap<String, u64>,
    /// When to try again to merge into a target whose checkout is dirty.
    dirty_retry: Option<Instant>,
    /// Set while the journal cannot be written: nothing is dispatched until a write succeeds.
    storage_error: Option<String>,
    /// While `storage_error` is set: when to look again, and the wait after that.
    storage_retry: Option<(Instant, Duration)>,
    /// Inputs whose events could not be written, handled again once the journal is writable.
    deferred: Vec<Deferred>,
    /// Failed journal writes so far: a handler that raised it hit the storage error.
    write_failures: u64,
    stopping: bool,
    /// When the shutdown grace period ends.
    stop_deadline: Option<Instant>,
    /// The next number for generated ids (0: not yet computed from the store).
    next_number: u64,
    /// Write-backs to beads, started with the first one.
    writeback: Option<mpsc::UnboundedSender<crate::daemon::beads::writeback::Job>>,
    /// When this daemon started: state files older than this were left by an earlier one.
    started: std::time::SystemTime,
}

/// A handler's failure: either a refusal for the client or a storage failure.
type Handled<T = Value> = Result<T, RpcError>;

impl Engine {
    /// Builds the engine over an opened store. Returns the engine and the channel end it reads.
    pub fn new(
        paths: Paths,
        store: Store,
        loaded: Loaded,
        repo: Repo,
        tracker: TaskTracker,
    ) -> (Engine, EngineHandle, mpsc::Receiver<Input>) {
        let (tx, rx) = mpsc::channel(1024);
        let (seq, seq_rx) = watch::channel(store.state().seq());
        let handle = EngineHandle {
            tx: tx.clone(),
            seq: seq_rx,
            journal: store.journal_path().to_owned(),
        };
        let engine = Engine {
            paths,
            store,
            loaded,
            repo,
            tx,
            seq,
            tracker,
            agents: CancellationToken::new(),
            running: HashMap::new(),
            active: HashSet::new(),
            merging: HashSet::new(),
            removing: HashSet::new(),
            cancelling: HashMap::new(),
            paused: false,
            paused_models: HashMap::new(),
            model_backoff: HashMap::new(),
            dirty_retry: None,
            storage_error: None,
            storage_retry: None,
            deferred: Vec::new(),
            write_failures: 0,
            stopping: false,
            stop_deadline: None,
            next_number: 0,
            writeback: None,
            started: std::time::SystemTime::now(),
        };
        (engine, handle, rx)
    }

    /// Runs until `stop` fires and running steps have ended (or were stopped at the end of the
    /// grace period), or until every sender is gone.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Input>, stop: CancellationToken) {
        self.record(vec![EventBody::DaemonStarted {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").into(),
        }]);
        if !self.recover() {
            self.deferred.push(Deferred::Recover);
        }
        self.resume_writebacks();
        self.schedule();
        loop {
            let wake = self.next_wake();
            tokio::select! {
                () = stop.cancelled(), if !self.stopping => self.begin_stop(),
                input = rx.recv() => match input {
                    Some(input) => self.handle(input),
                    None => break,
                },
                () = sleep_until(wake), if wake.is_some() => self.on_timer(),
            }
            if self.stopping {
                if self.running.is_empty() && self.merging.is_empty() {
                    break;
                }
            } else {
                self.schedule();
            }
        }
        self.record(vec![EventBody::DaemonStopping {
            reason: Some("shutdown".into()),
        }]);
        self.agents.cancel();
    }

    /// Handles one input. An input whose events could not be written (the journal's disk is
    /// full, an I/O error) is kept and handled again once writes succeed: a finished attempt
    /// is never lost, and an inbox file stays in the inbox. Requests are not kept: their
    /// client gets the error and decides. Merges need no keeping: a merge step stays in phase
    /// `merging` until its completion is recorded, so the daemon merges again (a no-op the
    /// second time) and records it then.
    fn handle(&mut self, input: Input) {
        let failures = self.write_failures;
        match input {
            Input::Request { method, reply } => {
                let answer = self.request(method);
                // A client that hung up does not need its answer.
                let _ = reply.send(answer);
            }
            Input::StepDone(done) => {
                self.step_done((*done).clone());
                if self.write_failures != failures {
                    self.deferred.push(Deferred::Input(Input::StepDone(done)));
                }
            }
            Input::MergeDone { work, step, result } => self.merge_done(work, step, result),
            Input::Removed { work, result } => {
                self.removing.remove(&work);
                match result {
                    Ok(()) => {
                        if self.store.state().contains(work.as_str())
                            && self
                                .record(vec![EventBody::WorktreeRemoved { bead: work.clone() }])
                                .is_none()
                            && self.write_failures != failures
                        {
                            self.deferred.push(Deferred::Input(Input::Removed {
                                work,
                                result: Ok(()),
                            }));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(bead = %work, error = %e, "could not remove the worktree")
                    }
                }
            }
            Input::Inbox(path) => {
                self.ingest(&path);
                if self.write_failures != failures {
                    self.deferred.push(Deferred::Input(Input::Inbox(path)));
                }
            }
            Input::Reload => {
                if let Err(e) = self.reload() {
                    tracing::error!(error = %e, "reload refused; the old files stay in force");
                }
            }
            Input::Summary(reply) => {
                let _ = reply.send(self.counts());
            }
            Input::BeadsFile(beads) => self.ingest_watched(beads),
            Input::WriteBack(report) => self.writeback_done(report),
        }
    }

    fn begin_stop(&mut self) {
        self.stopping = true;
        let grace = Duration::from_secs(self.loaded.config.shutdown_grace_secs);
        self.stop_deadline = Some(Instant::now() + grace);
        tracing::info!(
            running = self.running.len(),
            grace_secs = grace.as_secs(),
            "stopping: no new steps; running agents may finish within the grace period"
        );
    }

    /// The earliest timer the engine needs.
    fn next_wake(&self) -> Option<Instant> {
        let pauses = self.paused_models.values().map(|p| p.until);
        let defer = self.next_defer();
        let storage = self.storage_retry.map(|(at, _)| at);
        [self.dirty_retry, self.stop_deadline, defer, storage]
            .into_iter()
            .flatten()
            .chain(pauses)
            .min()
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        self.paused_models.retain(|_, p| p.until > now);
        if self.dirty_retry.is_some_and(|t| t <= now) {
            self.dirty_retry = None;
        }
        if self.stop_deadline.is_some_and(|t| t <= now) {
            self.stop_deadline = None;
            tracing::info!(
                running = self.running.len(),
                "grace period over: stopping agents"
            );
            self.agents.cancel();
        }
        if self.storage_retry.is_some_and(|(at, _)| at <= now) {
            self.retry_storage();
        }
    }

    /// The storage retry timer: once the state folder takes a write again, the storage error
    /// is lifted, what could not be recorded is handled again, and scheduling resumes (its
    /// first dispatch is itself a journal write, so nothing starts unless that succeeds).
    fn retry_storage(&mut self) {
        let Some((_, wait)) = self.storage_retry.take() else {
            return;
        };
        if let Err(e) = self.store.probe() {
            let next = (wait * 2).min(STORAGE_RETRY_MAX);
            tracing::debug!(error = %e, retry_in = ?wait, "the state folder still takes no writes");
            self.storage_retry = Some((Instant::now() + wait, next));
            return;
        }
        if let Some(error) = self.storage_error.take() {
            tracing::info!(%error, "the state folder takes writes again; resuming");
        }
        for deferred in std::mem::take(&mut self.deferred) {
            match deferred {
                Deferred::Input(input) => self.handle(input),
                Deferred::Recover => {
                    if !self.record_interruptions(false) {
                        self.deferred.push(Deferred::Recover);
                    }
                }
            }
        }
    }

    /// Writes a group of events and publishes the new seq. A refused group is a bug (events
    /// are built from the state they are checked against) and is logged; a failed write sets
    /// the storage error, which stops dispatching and arms a timer that looks again
    /// (docs/journal.md: nothing happens that is not recorded first).
    fn record(&mut self, bodies: Vec<EventBody>) -> Option<Vec<Event>> {
        if bodies.is_empty() {
            return Some(Vec::new());
        }
        match self.store.commit(bodies) {
            Ok(events) => {
                if self.storage_error.take().is_some() {
                    tracing::info!("the journal is writable again; dispatching resumes");
                }
                self.seq.send_replace(self.store.state().seq());
                self.queue_writebacks(&events);
                Some(events)
            }
            Err(StoreError::Refused(e)) => {
                tracing::error!(error = %e, "the engine built events that do not apply");
                None
            }
            Err(e) => {
                self.write_failures += 1;
                if self.storage_error.is_none() {
                    tracing::error!(error = %e, "cannot write the journal; dispatching stops until it can");
                } else {
                    tracing::debug!(error = %e, "cannot write the journal");
                }
                self.storage_error = Some(e.to_string());
                if self.storage_retry.is_none() {
                    self.storage_retry = Some((
                        Instant::now() + STORAGE_RETRY_FIRST,
                        STORAGE_RETRY_FIRST * 2,
                    ));
                }
                None
            }
        }
    }

    /// [`Engine::record`] for a request: a failure becomes the client's error.
    fn record_for_client(&mut self, bodies: Vec<EventBody>) -> Handled<Vec<Event>> {
        self.store
            .state()
            .check_group(&bodies)
            .map_err(|e| match e {
                crate::daemon::store::ApplyError::NotFound(id) => {
                    RpcError::not_found(format!("bead `{id}` does not exist"))
                }
                crate::daemon::store::ApplyError::Exists(id) => {
                    RpcError::conflict(format!("bead `{id}` already exists"))
                }
                other => RpcError::bad_request(other.to_string()),
            })?;
        self.record(bodies).ok_or_else(|| self.not_written())
    }

    /// The client's error when its request's events could not be written: nothing was done.
    fn not_written(&self) -> RpcError {
        RpcError::internal(format!(
            "cannot write the journal, nothing was changed: {}",
            self.storage_error.as_deref().unwrap_or("refused")
        ))
    }
}

impl Loaded {
    /// Reads the workspace's config, prompts and formulas. Any problem refuses the whole set,
    /// so a broken edit never half-applies.
    pub fn load(paths: &Paths) -> Result<Loaded, String> {
        let config = crate::daemon::load::config(&paths.config()).map_err(|e| e.to_string())?;
        let prompts_file = paths.prompts();
        let prompts = if prompts_file.exists() {
            crate::daemon::load::prompts(&prompts_file).map_err(|e| e.to_string())?
        } else {
            PromptSet::builtin()
        };
        let (formulas, problems) =
            crate::daemon::load::formulas(&paths.formula_dirs(), &|name| prompts.has(name));
        if !problems.is_empty() {
            let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
            return Err(lines.join("; "));
        }
        Ok(Loaded {
            config: Arc::new(config),
            prompts: Arc::new(prompts),
            formulas: Arc::new(formulas),
        })
    }
}

impl Engine {
    /// Re-reads config, prompts and formulas; on any problem the old ones stay in force.
    fn reload(&mut self) -> Result<(), String> {
        let loaded = Loaded::load(&self.paths)?;
        if loaded.config.target_branch != self.loaded.config.target_branch {
            tracing::warn!(
                "`target_branch` changed: beads already poured keep merging into the new one"
            );
        }
        if loaded.config.beads.watch != self.loaded.config.beads.watch {
            tracing::warn!(
                "`beads.watch` changed: the daemon follows the new file after a restart"
            );
        }
        self.loaded = loaded;
        tracing::info!("reloaded config, prompts and formulas");
        Ok(())
    }

    /// The `--settings` JSON for an agent of `role`: the hooks that ask the daemon. The same
    /// for every role, since the daemon knows the step's role when a hook asks.
    fn hook_settings(&self, _role: crate::domain::model::Role) -> Value {
        crate::domain::agent::settings::settings(&crate::daemon::load::catalyst_bin(
            &self.loaded.config,
        ))
    }
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
