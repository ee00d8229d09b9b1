//! The engine: the single owner of the daemon's state.
//!
//! One task runs [`Engine::run`]. Everything that changes state arrives as an [`Input`] on its
//! channel (control requests, finished steps and merges, inbox files, reloads) or as a timer
//! it set itself. For each input the engine decides through the pure core (readiness, pouring,
//! the router), writes the resulting events as one group commit, and only then starts the
//! effects (agents, gates, git, files) as tasks that report back with another input. The
//! engine never waits on I/O other than its own journal appends.

mod beads;
mod dispatch;
mod error;
mod finish;
pub mod forge;
mod holds;
mod inbox;
mod input;
mod intake;
mod loaded;
mod merge;
mod merges;
mod recovery;
mod reports;
mod requests;
mod route;
mod schedule;
mod shutdown;
mod storage;
mod summary;
mod tasks;
mod tool_calls;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::daemon::store::Store;
use crate::daemon::worktree::Repo;
use crate::daemon::Paths;
use crate::domain::event::EventBody;
use crate::domain::id::BeadId;
use crate::domain::time::Timestamp;
use crate::protocol::{Answer, Method, Reloaded, RpcError};

pub use crate::daemon::runner::StepDone;
use dispatch::{Dispatch, Pause, Running};
pub use error::{EngineError, LoadError};
pub use input::{EngineHandle, Input};
use intake::Intake;
pub use loaded::Loaded;
use merges::Merges;
pub use reports::{MergeFailure, MergeRan, MergeReport};
pub(crate) use requests::blocked_reason;
use shutdown::Shutdown;
pub use summary::Summary;
use tasks::Tasks;

/// The most inputs handled before their events are synced together.
const MAX_BATCH: usize = 64;

/// The current time, read once per decision and passed in: the wall clock for what is
/// recorded, the monotonic one for the engine's timers.
#[derive(Debug, Clone, Copy)]
struct Now {
    wall: Timestamp,
    mono: Instant,
}

impl Now {
    fn read() -> Now {
        Now {
            wall: crate::daemon::clock::now(),
            mono: Instant::now(),
        }
    }
}

pub struct Engine {
    paths: Paths,
    store: Store,
    loaded: Loaded,
    repo: Repo,
    seq: watch::Sender<u64>,
    tasks: Tasks,
    storage: storage::Storage,
    /// The daemon's own git work: merges into the target and worktree removals.
    git: Merges,
    /// Inbox files in turn, inputs held during recovery, the numbering of new ids.
    intake: Intake,
    /// The attempts running and what holds new ones back for a model or a person.
    dispatch: Dispatch,
    /// Work beads whose molecule is in progress (poured, not closed or blocked).
    active: HashSet<BeadId>,
    /// Pending `cancel` requests: the bead is closed once its agent has stopped.
    cancelling: HashMap<BeadId, Option<String>>,
    /// Dispatching held back by failures no retry fixes (a refused key, an unreachable API),
    /// and which spending stop was journaled.
    holds: holds::Holds,
    /// The last reload that refused files, until a reload takes every file.
    refused_reload: Option<crate::protocol::RefusedReload>,
    /// The stop signal and its grace period.
    shutdown: Shutdown,
    /// When this daemon started: state files older than this were left by an earlier one.
    started: std::time::SystemTime,
    /// Where agent attempts run when `[cluster]` is on: workers on other machines.
    remote: Option<std::sync::Arc<dyn crate::daemon::runner::Remote>>,
    /// The `max_agents` agent slots the attempts dispatched here take to run their agents.
    slots: Arc<crate::daemon::runner::AgentSlots>,
    /// Where merges go as pull requests and issues come from, when `[forge]` is set.
    forge: Option<forge::ForgeWork>,
    /// The webhooks' posters, started again when a reload changes `webhooks`.
    notifier: Option<crate::daemon::notify::Notifier<Input>>,
}

/// A handler's failure: either a refusal for the client or a storage failure.
type Handled<T = Value> = Result<T, RpcError>;

impl Engine {
    /// Hands agent attempts to workers on other machines from now on (`[cluster]`). Gates and
    /// merges stay here.
    pub fn set_remote(&mut self, remote: std::sync::Arc<dyn crate::daemon::runner::Remote>) {
        self.remote = Some(remote);
    }

    /// Builds the engine over an opened store. Returns the engine and the channel end it reads.
    pub fn new(
        paths: Paths,
        mut store: Store,
        loaded: Loaded,
        repo: Repo,
        tracker: TaskTracker,
    ) -> (Engine, EngineHandle, mpsc::Receiver<Input>) {
        let (tx, rx) = mpsc::channel(1024);
        let (seq, seq_rx) = watch::channel(store.state().seq());
        let feed = std::sync::Arc::new(crate::daemon::store::feed::Feed::default());
        store.feed_into(feed.clone());
        let handle = EngineHandle {
            tx: tx.clone(),
            seq: seq_rx.clone(),
            journal: crate::daemon::follow::Journal {
                feed,
                seq: seq_rx,
                live: store.journal_path().to_owned(),
                segments: std::sync::Arc::new(store.segments()),
            },
        };
        let slots = Arc::new(crate::daemon::runner::AgentSlots::new(
            loaded.config.max_agents,
        ));
        let engine = Engine {
            paths,
            store,
            loaded,
            repo,
            seq,
            tasks: Tasks {
                tx,
                tracker,
                agents: CancellationToken::new(),
                writeback: None,
                held: None,
            },
            storage: Default::default(),
            git: Default::default(),
            intake: Intake::default(),
            dispatch: Dispatch::default(),
            active: HashSet::new(),
            cancelling: HashMap::new(),
            holds: holds::Holds::default(),
            refused_reload: None,
            shutdown: Shutdown::default(),
            started: std::time::SystemTime::now(),
            remote: None,
            slots,
            forge: None,
            notifier: None,
        };
        (engine, handle, rx)
    }

    /// Runs until `stop` fires and running steps have ended (or were stopped at the end of the
    /// grace period), or until every sender is gone.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Input>, stop: CancellationToken) {
        // Not written: the store's next write says why (and a restart writes it again).
        let store = self
            .store
            .state()
            .store_id()
            .map_or_else(crate::daemon::store::new_store_id, str::to_owned);
        let started = self.record(vec![EventBody::DaemonStarted {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").into(),
            store: Some(store),
        }]);
        // Branches are stamped with the id only once it is durable: stamped with an id the
        // journal lost, the store's own branches would look like another store's.
        if started.is_ok() {
            if let Some(store) = self.store.state().store_id() {
                self.repo = self.repo.clone().with_store(store);
            }
        }
        match self.repo.branch_beads() {
            Ok(beads) => self.intake.branch_beads = beads.into_iter().collect(),
            Err(e) => tracing::warn!(error = %e, "cannot list the bead branches"),
        }
        self.recover();
        self.resume_writebacks();
        loop {
            let wake = self.next_wake();
            // Inputs that arrive together share one fsync: their events are written as they
            // are decided, synced once, and only then does anything follow from them.
            self.begin_batch();
            tokio::select! {
                () = stop.cancelled(), if !self.shutdown.stopping => self.begin_stop(),
                input = rx.recv() => match input {
                    Some(input) => self.handle(input),
                    None => {
                        self.end_batch();
                        break;
                    }
                },
                () = sleep_until(wake), if wake.is_some() => self.on_timer(),
            }
            for _ in 1..MAX_BATCH {
                match rx.try_recv() {
                    Ok(input) => self.handle(input),
                    Err(_) => break,
                }
            }
            if !self.shutdown.stopping {
                self.schedule();
            }
            self.end_batch();
            if self.shutdown.stopping && self.dispatch.running.is_empty() && self.git.idle() {
                break;
            }
        }
        let _ = self.record(vec![EventBody::DaemonStopping {
            reason: Some("shutdown".into()),
        }]);
        self.tasks.agents.cancel();
    }

    /// Handles one input. An input whose events could not be written (the journal's disk is
    /// full, an I/O error) is kept and handled again once writes succeed: a finished attempt
    /// is never lost, and an inbox file stays in the inbox. Requests are not kept: their
    /// client gets the error and decides. Merges need no keeping: a merge step stays in phase
    /// `merging` until its completion is recorded, so the daemon merges again (a no-op the
    /// second time) and records it then. A followed beads file is read again when it changes,
    /// and a write-back is done again after a restart when its record is missing.
    fn handle(&mut self, input: Input) {
        let Some(input) = self.intake.hold(input) else {
            return;
        };
        match input {
            Input::Request {
                method: Method::Reload,
                reply,
            } if !self.shutdown.stopping => self.start_reload(Some(reply)),
            Input::Request { method, reply } => {
                let answer = self.request(method);
                self.answer(reply, answer);
            }
            Input::Notified(delivered) => {
                // Not written: the notice is posted again after a restart, which its seq shows.
                let _ = self.record(vec![notified(delivered)]);
            }
            Input::Board { cards, reply } => {
                let answer = Ok(Answer::Board(self.board(cards)));
                self.answer(reply, answer);
            }
            Input::StepDone(done) => {
                let result = self.step_done(&done);
                self.keep_if_unwritten(result, Input::StepDone(done));
            }
            Input::StepStarted {
                step,
                attempt,
                worker,
            } => self.step_started(&step, attempt, worker),
            Input::ClusterRefused { from, what, reason } => {
                // Not written: the storage error is reported; the refusal stands.
                let _ = self.record(vec![EventBody::ClusterRefused { from, what, reason }]);
            }
            Input::MergeDone(report) => {
                let _ = self.merge_done(*report);
            }
            Input::ForgeDone(report) => {
                // Not written: a push or a write is done again, a pull request read again.
                let _ = self.forge_done(*report);
            }
            Input::Removed { work, result } => {
                let recorded = self.removed(&work, result);
                self.keep_if_unwritten(
                    recorded,
                    Input::Removed {
                        work,
                        result: Ok(()),
                    },
                );
            }
            Input::Inbox(path) => self.inbox_arrived(path),
            Input::InboxRead(file) => self.inbox_read(*file),
            Input::InboxSettled(settled) => self.inbox_settled(settled),
            Input::Recovered(recovered) => self.recovered(recovered),
            Input::Probed { result, wait } => self.probed(result, wait),
            Input::Reload => self.start_reload(None),
            Input::Reloaded { loaded, reply } => self.reloaded(loaded, reply),
            Input::Summary(reply) => {
                self.answers_client();
                let counts = self.counts();
                self.tasks.after_sync(move || {
                    let _ = reply.send(counts);
                });
            }
            Input::BeadsFile(beads) => {
                let _ = self.ingest_watched(beads);
            }
            Input::WriteBack(report) => {
                let _ = self.writeback_done(report);
            }
        }
    }

    /// Records that a bead's worktree and branch are gone.
    fn removed(
        &mut self,
        work: &BeadId,
        result: Result<(), crate::daemon::runner::GitTaskError>,
    ) -> Result<(), EngineError> {
        self.git.removal_ended(work);
        match result {
            Ok(()) if self.store.state().contains(work.as_str()) => {
                // Nothing follows from it, and the start-up sweep finds a worktree whose
                // removal a crash lost.
                self.record_lazily(vec![EventBody::WorktreeRemoved { bead: work.clone() }])?;
                if let Some(remote) = &self.remote {
                    remote.retire(work);
                }
            }
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(bead = %work, error = %e, "could not remove the worktree")
            }
        }
        Ok(())
    }

    /// Reads config, prompts and formulas in a task; `reply` is a `reload` request's.
    fn start_reload(&mut self, reply: Option<oneshot::Sender<Handled<Answer>>>) {
        let paths = self.paths.clone();
        let previous = self.loaded.clone();
        self.tasks.blocking(
            move || Input::Reloaded {
                loaded: Ok(Loaded::reload(&paths, &previous)),
                reply,
            },
            |e| Input::Reloaded {
                loaded: Err(LoadError::Task(format!("the task panicked: {e}"))),
                reply: None,
            },
        );
    }

    fn reloaded(
        &mut self,
        loaded: Result<(Loaded, Vec<crate::protocol::RefusedFile>), LoadError>,
        reply: Option<oneshot::Sender<Handled<Answer>>>,
    ) {
        let answer = match loaded {
            Ok((loaded, refused)) => {
                self.replace_loaded(loaded);
                if refused.is_empty() {
                    self.refused_reload = None;
                    Ok(Answer::Reloaded(Reloaded {
                        reloaded: true,
                        refused,
                    }))
                } else {
                    let files: Vec<String> = refused
                        .iter()
                        .map(|r| format!("`{}`: {}", r.file, r.reason))
                        .collect();
                    self.refused_reload = Some(crate::protocol::RefusedReload {
                        at: crate::daemon::clock::now(),
                        files: refused,
                    });
                    Err(RpcError::bad_request(format!(
                        "reload refused {}; what they held before stays in force, and the other files were reloaded",
                        files.join("; ")
                    )))
                }
            }
            Err(e) => {
                if reply.is_none() {
                    tracing::error!(error = %e, "reload refused; the old files stay in force");
                }
                Err(RpcError::bad_request(e.to_string()))
            }
        };
        if let Some(reply) = reply {
            self.answers_client();
            self.tasks.after_sync(move || {
                let _ = reply.send(answer);
            });
        }
    }

    fn begin_stop(&mut self) {
        let grace = Duration::from_secs(self.loaded.config.shutdown_grace_secs);
        self.shutdown.begin(grace, Instant::now());
        tracing::info!(
            running = self.dispatch.running.len(),
            grace_secs = grace.as_secs(),
            "stopping: no new steps; running agents may finish within the grace period"
        );
    }

    /// The earliest timer the engine needs.
    fn next_wake(&self) -> Option<Instant> {
        let defer = self.next_defer();
        [
            self.git.retry_at(),
            self.shutdown.deadline(),
            defer,
            self.next_retry(),
            self.budget_stop().and_then(|stop| stop.until).map(|until| {
                let now = crate::daemon::clock::now();
                let wait = (until.to_utc() - now.to_utc()).to_std().unwrap_or_default();
                Instant::now() + wait
            }),
            self.storage.wake(),
            self.storage.deadline(),
            self.holds.earliest(),
            self.dispatch.earliest_pause(),
            self.forge.as_ref().and_then(|f| f.wake()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        self.dispatch.expire(now);
        self.holds.expire(now);
        self.git.expire(now);
        if self.shutdown.grace_over(now) {
            tracing::info!(
                running = self.dispatch.running.len(),
                "grace period over: stopping agents"
            );
            self.tasks.agents.cancel();
        }
        if self.storage.wake().is_some_and(|at| at <= now) {
            self.retry_storage();
        }
    }
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// The record of how a notice went.
fn notified(d: crate::daemon::notify::Delivered) -> EventBody {
    match d.error {
        None => EventBody::NotifySent {
            hook: d.hook,
            event: d.event,
            kind: d.kind,
            tries: d.tries,
        },
        Some(error) => EventBody::NotifyFailed {
            hook: d.hook,
            event: d.event,
            kind: d.kind,
            tries: d.tries,
            error,
        },
    }
}
