//! Recording: every change goes through [`Engine::record`] as one group commit. A failed write
//! stops dispatching until the state folder takes writes again; what could not be recorded is
//! kept and handled again then (docs/journal.md: nothing happens that is not recorded first).

use std::time::Duration;

use tokio::time::Instant;

use crate::daemon::store::{ApplyError, Store, StoreError};
use crate::domain::event::{Event, EventBody};
use crate::protocol::RpcError;

use super::error::EngineError;
use super::reports::Recovered;
use super::{Engine, Handled, Input};

/// The first wait before looking again at a journal that could not be written, and the most.
pub(super) const STORAGE_RETRY_FIRST: Duration = Duration::from_secs(1);
pub(super) const STORAGE_RETRY_MAX: Duration = Duration::from_secs(15);

/// The longest a group recorded with [`Engine::record_lazily`] waits for a batch that syncs
/// anyway before one is made for it.
pub(super) const LAZY_SYNC: Duration = Duration::from_millis(10);

/// The longest the events of a batch that started the daemon's merge wait, durable, for the
/// merge's own batch before subscribers are told of them ([`Engine::hold_publication`]).
pub(super) const PUBLISH_HOLD: Duration = Duration::from_millis(5);

/// The journal's health, and what waits for it.
#[derive(Debug, Default)]
pub(super) struct Storage {
    /// Set while the journal cannot be written: nothing is dispatched until a write succeeds.
    pub(super) error: Option<String>,
    /// While `error` is set: when to look again, and the wait after that.
    pub(super) retry: Option<(Instant, Duration)>,
    /// A probe of the state folder is under way (see [`Engine::retry_storage`]).
    probing: bool,
    /// Work whose events could not be written, handled again once the journal is writable.
    deferred: Vec<Deferred>,
    /// The batch being handled recorded a group that must be durable and published at its
    /// end (any group but one recorded lazily).
    urgent: bool,
    /// Groups recorded lazily are written but not yet synced: the latest they may stay so.
    lazy_until: Option<Instant>,
    /// The batch being handled started the daemon's merge, whose own batch follows within
    /// milliseconds: its events may wait for that one to be published with it.
    hold: bool,
    /// The batch being handled answers a client, who may read the events next.
    answers: bool,
    /// A batch's durable events wait, unpublished, for the next batch: the latest they may.
    publish_by: Option<Instant>,
}

/// Work the engine could not record because the journal could not be written.
#[derive(Debug)]
pub(super) enum Deferred {
    /// An input whose events failed to write; handling it again is safe (see `handle`).
    Input(Input),
    /// Start-up recovery's events (interrupted steps) failed to write.
    Recover(Box<Recovered>),
}

impl Storage {
    pub(super) fn defer(&mut self, deferred: Deferred) {
        self.deferred.push(deferred);
    }

    /// When the retry timer fires, if it is armed.
    pub(super) fn wake(&self) -> Option<Instant> {
        self.retry.map(|(at, _)| at)
    }

    /// When the engine must end a batch again: to sync groups recorded lazily, or to publish
    /// events held back; `None` when nothing waits.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.lazy_until.into_iter().chain(self.publish_by).min()
    }
}

impl Engine {
    /// Starts a batch: events recorded from now on are written without waiting for their
    /// fsync, and what follows from them is held until [`Engine::end_batch`].
    pub(super) fn begin_batch(&mut self) {
        self.store.defer_sync(true);
        self.tasks.held.get_or_insert_with(Default::default);
        self.storage.urgent = false;
        self.storage.hold = false;
        self.storage.answers = false;
    }

    /// The batch being handled started the daemon's merge: unless it answers a client, its
    /// events are published with the merge's batch, which follows as soon as the merge is
    /// done, or [`PUBLISH_HOLD`] later. A bead's end and its merge so reach each subscriber in
    /// one write instead of two.
    pub(super) fn hold_publication(&mut self) {
        self.storage.hold = true;
    }

    /// The batch being handled answers a client: its events are published when it ends, so a
    /// client that reads the journal after the answer finds them.
    pub(super) fn answers_client(&mut self) {
        self.storage.answers = true;
    }

    /// Ends a batch: one fsync makes its events durable, then the seq is published and the
    /// held effects start. A journal that cannot be synced has lost writes the state already
    /// holds (and the kernel may have dropped them): the daemon stops at once, and the next
    /// start recovers from what the disk has.
    ///
    /// A batch that recorded only lazy groups ([`Engine::record_lazily`]) and holds no effect
    /// leaves them unsynced and unpublished until a later batch syncs, at most [`LAZY_SYNC`]
    /// later. A batch that started the daemon's merge ([`Engine::hold_publication`]) is
    /// synced and its effects start, but its seq is published by the next batch, at most
    /// [`PUBLISH_HOLD`] later.
    pub(super) fn end_batch(&mut self) {
        let Some(held) = self.tasks.held.take() else {
            return;
        };
        self.store.defer_sync(false);
        let now = Instant::now();
        let urgent = std::mem::take(&mut self.storage.urgent) || !held.0.is_empty();
        let publish_due = self.storage.publish_by.is_some_and(|by| by <= now);
        if !urgent && !publish_due && self.storage.lazy_until.is_some_and(|until| now < until) {
            return;
        }
        self.storage.lazy_until = None;
        if let Err(e) = self.store.sync() {
            tracing::error!(error = %e, "cannot make the journal durable; stopping now, the next start recovers from what is on disk");
            std::process::abort();
        }
        let hold = std::mem::take(&mut self.storage.hold) && !self.storage.answers;
        if hold && self.storage.publish_by.is_none() {
            self.storage.publish_by = Some(now + PUBLISH_HOLD);
        } else if urgent || publish_due || self.storage.publish_by.is_none() {
            self.storage.publish_by = None;
            self.publish_seq();
        }
        for effect in held.0 {
            effect();
        }
    }

    /// Tells subscribers the last durable seq, waking them only when it moved.
    fn publish_seq(&self) {
        let seq = self.store.state().seq();
        self.seq.send_if_modified(|published| {
            let moved = *published != seq;
            *published = seq;
            moved
        });
    }

    /// Writes a group of events and publishes the new seq. A refused group is a bug (events
    /// are built from the state they are checked against) and is logged; a failed write sets
    /// the storage error, which stops dispatching and arms a timer that looks again.
    pub(super) fn record(&mut self, bodies: Vec<EventBody>) -> Result<Vec<Event>, EngineError> {
        if bodies.is_empty() {
            return Ok(Vec::new());
        }
        self.storage.urgent = true;
        self.commit(bodies)
    }

    /// Records a group that nothing waits for and a crash may lose (a fact the next start
    /// finds again on disk, such as a removed worktree): within a batch it is written, but
    /// synced and published with the next batch that syncs anyway, or [`LAZY_SYNC`] later.
    /// A daemon under load so spares an fsync and a wake-up of every subscriber per group.
    pub(super) fn record_lazily(&mut self, bodies: Vec<EventBody>) -> Result<(), EngineError> {
        if bodies.is_empty() {
            return Ok(());
        }
        if self.tasks.held.is_some() && self.storage.lazy_until.is_none() {
            self.storage.lazy_until = Some(Instant::now() + LAZY_SYNC);
        }
        self.commit(bodies).map(drop)
    }

    fn commit(&mut self, bodies: Vec<EventBody>) -> Result<Vec<Event>, EngineError> {
        match self.store.commit(bodies) {
            Ok(events) => {
                if self.storage.error.take().is_some() {
                    tracing::info!("the journal is writable again; dispatching resumes");
                }
                // Subscribers read up to this seq: published once the events are durable.
                if self.tasks.held.is_none() {
                    self.publish_seq();
                }
                self.queue_writebacks(&events);
                Ok(events)
            }
            Err(StoreError::Refused(e)) => {
                tracing::error!(error = %e, "the engine built events that do not apply");
                Err(EngineError::Refused(e))
            }
            Err(e) => {
                if self.storage.error.is_none() {
                    tracing::error!(error = %e, "cannot write the journal; dispatching stops until it can");
                } else {
                    tracing::debug!(error = %e, "cannot write the journal");
                }
                self.storage.error = Some(e.to_string());
                if self.storage.retry.is_none() && !self.storage.probing {
                    self.storage.retry = Some((
                        Instant::now() + STORAGE_RETRY_FIRST,
                        STORAGE_RETRY_FIRST * 2,
                    ));
                }
                Err(EngineError::Unwritten(e))
            }
        }
    }

    /// [`Engine::record`] for a request: a failure becomes the client's error.
    pub(super) fn record_for_client(&mut self, bodies: Vec<EventBody>) -> Handled<Vec<Event>> {
        self.check_for_client(&bodies)?;
        self.record(bodies).map_err(|_| self.not_written())
    }

    /// Checks a client's events against the state; a refusal names what is wrong.
    pub(super) fn check_for_client(&self, bodies: &[EventBody]) -> Handled<()> {
        self.store.state().check_group(bodies).map_err(|e| match e {
            ApplyError::NotFound(id) => RpcError::not_found(format!("bead `{id}` does not exist")),
            ApplyError::Exists(id) => RpcError::conflict(format!("bead `{id}` already exists")),
            other => RpcError::bad_request(other.to_string()),
        })
    }

    /// The client's error when its request's events could not be written: nothing was done.
    pub(super) fn not_written(&self) -> RpcError {
        RpcError::internal(format!(
            "cannot write the journal, nothing was changed: {}",
            self.storage.error.as_deref().unwrap_or("refused")
        ))
    }

    /// Keeps `input` for later when `result` says its events could not be written.
    pub(super) fn keep_if_unwritten(&mut self, result: Result<(), EngineError>, input: Input) {
        if let Err(EngineError::Unwritten(_)) = result {
            self.storage.defer(Deferred::Input(input));
        }
    }

    /// The storage retry timer: looks whether the state folder takes a durable write again,
    /// in a task that reports [`Input::Probed`].
    pub(super) fn retry_storage(&mut self) {
        let Some((_, wait)) = self.storage.retry.take() else {
            return;
        };
        self.storage.probing = true;
        let dir = self.store.dir().to_owned();
        let tx = self.tasks.tx.clone();
        self.tasks.tracker.spawn(async move {
            let result = tokio::task::spawn_blocking(move || Store::probe_dir(&dir))
                .await
                .unwrap_or_else(|e| Err(StoreError::Task(e.to_string())));
            let _ = tx.send(Input::Probed { result, wait }).await;
        });
    }

    /// The probe's answer: once the state folder takes a write again, the storage error is
    /// lifted, what could not be recorded is handled again, and scheduling resumes (its first
    /// dispatch is itself a journal write, so nothing starts unless that succeeds).
    pub(super) fn probed(&mut self, result: Result<(), StoreError>, wait: Duration) {
        self.storage.probing = false;
        if let Err(e) = result {
            let next = (wait * 2).min(STORAGE_RETRY_MAX);
            tracing::debug!(error = %e, retry_in = ?wait, "the state folder still takes no writes");
            self.storage.retry = Some((Instant::now() + wait, next));
            return;
        }
        if let Some(error) = self.storage.error.take() {
            tracing::info!(%error, "the state folder takes writes again; resuming");
        }
        for deferred in std::mem::take(&mut self.storage.deferred) {
            match deferred {
                Deferred::Input(input) => self.handle(input),
                Deferred::Recover(recovered) => {
                    if let Err(EngineError::Unwritten(_)) = self.record_interruptions(&recovered) {
                        self.storage.defer(Deferred::Recover(recovered));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::id::BeadId;
    use crate::domain::model::Bead;

    /// A formula of one step, the daemon's merge: poured, it starts the merge at once.
    const MERGE_ONLY: &str = "formula = \"merge-only\"\n\n[[steps]]\nid = \"merge\"\ntitle = \"Merge\"\nrole = \"merge\"\n";

    /// An engine over a new workspace, and its fsyncs and seq when the test starts.
    struct Fixture {
        _dir: tempfile::TempDir,
        engine: Engine,
        syncs: u64,
        seq: u64,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = engine(dir.path());
        let (syncs, seq) = (engine.store.syncs(), engine.store.state().seq());
        Fixture {
            _dir: dir,
            engine,
            syncs,
            seq,
        }
    }

    /// An engine over a new workspace (a repository with one commit on `main`) that holds
    /// bead `cat-1` of the formula [`MERGE_ONLY`], its creation synced.
    fn engine(dir: &std::path::Path) -> Engine {
        let git = git2::Repository::init(dir).expect("git init");
        git.set_head("refs/heads/main").expect("HEAD");
        let sig = git2::Signature::now("person", "person@example.com").expect("signature");
        let tree = git.treebuilder(None).and_then(|t| t.write()).expect("tree");
        let tree = git.find_tree(tree).expect("tree");
        git.commit(Some("HEAD"), &sig, &sig, "initial", &tree, &[])
            .expect("commit");
        let paths = crate::daemon::paths::Paths::new(dir);
        let formulas = paths.state.join("formulas");
        std::fs::create_dir_all(&formulas).expect("formulas folder");
        std::fs::write(formulas.join("merge-only.formula.toml"), MERGE_ONLY).expect("formula");
        let (store, _) = Store::open(&paths.state).expect("store");
        let loaded = super::super::loaded::Loaded::load(&paths).expect("config");
        let repo = crate::daemon::worktree::Repo::open(dir, &paths.worktrees()).expect("repo");
        let tracker = tokio_util::task::TaskTracker::new();
        let (mut engine, _handle, _rx) = Engine::new(paths, store, loaded, repo, tracker);
        let mut bead = Bead::new(bead_id(), "a bead", crate::daemon::clock::now());
        bead.labels.push("formula:merge-only".into());
        engine
            .record(vec![EventBody::BeadCreated {
                bead: Box::new(bead),
                by_person: true,
            }])
            .expect("created");
        engine
    }

    fn bead_id() -> BeadId {
        BeadId::new("cat-1").expect("id")
    }

    fn removed() -> Vec<EventBody> {
        vec![EventBody::WorktreeRemoved { bead: bead_id() }]
    }

    /// The seq subscribers may read up to.
    fn published(engine: &Engine) -> u64 {
        *engine.seq.borrow()
    }

    #[tokio::test(start_paused = true)]
    async fn a_lazy_group_waits_for_the_next_batch_that_syncs_and_shares_its_fsync() {
        let mut f = fixture();
        assert_eq!(published(&f.engine), f.seq);

        lazy_batch(&mut f.engine);
        assert_eq!(
            f.engine.store.syncs(),
            f.syncs,
            "a batch of only a lazy group syncs nothing"
        );
        assert_eq!(
            published(&f.engine),
            f.seq,
            "nor publishes what is not durable"
        );
        assert_eq!(
            f.engine.store.state().seq(),
            f.seq + 1,
            "it is written and applied"
        );

        f.engine.begin_batch();
        f.engine.record(removed()).expect("recorded");
        f.engine.end_batch();
        assert_eq!(
            f.engine.store.syncs(),
            f.syncs + 1,
            "the next batch syncs both groups"
        );
        assert_eq!(published(&f.engine), f.seq + 2);
        assert_eq!(f.engine.storage.deadline(), None, "no timer left armed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lazy_group_alone_is_synced_once_its_wait_is_over() {
        let mut f = fixture();

        lazy_batch(&mut f.engine);
        let until = f.engine.storage.deadline().expect("a timer armed");
        assert_eq!(f.engine.next_wake(), Some(until), "the engine wakes for it");
        assert!(until <= Instant::now() + LAZY_SYNC);

        // A batch that records nothing before the wait is over keeps waiting.
        f.engine.begin_batch();
        f.engine.end_batch();
        assert_eq!(f.engine.store.syncs(), f.syncs);

        tokio::time::advance(LAZY_SYNC).await;
        f.engine.begin_batch();
        f.engine.on_timer();
        f.engine.end_batch();
        assert_eq!(
            f.engine.store.syncs(),
            f.syncs + 1,
            "synced when the wait is over"
        );
        assert_eq!(published(&f.engine), f.seq + 1);
        assert_eq!(f.engine.storage.deadline(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_effect_held_in_a_batch_syncs_the_lazy_groups_before_it() {
        let mut f = fixture();
        let (tx, mut rx) = tokio::sync::oneshot::channel();

        f.engine.begin_batch();
        f.engine.record_lazily(removed()).expect("recorded");
        // An answer (such as `status`, which reports the f.seq) waits for what was written.
        f.engine.tasks.after_sync(move || {
            let _ = tx.send(());
        });
        assert!(rx.try_recv().is_err(), "held until the batch ends");
        f.engine.end_batch();
        assert_eq!(f.engine.store.syncs(), f.syncs + 1);
        assert_eq!(published(&f.engine), f.seq + 1);
        assert!(rx.try_recv().is_ok(), "the answer went once synced");
    }

    /// A group recorded as every group but a lazy one is: durable at its batch's end.
    fn urgent() -> Vec<EventBody> {
        removed()
    }

    /// A batch that records a group and starts the daemon's merge.
    fn held_batch(engine: &mut Engine) {
        engine.begin_batch();
        engine.record(urgent()).expect("recorded");
        engine.hold_publication();
        engine.end_batch();
    }

    /// A batch that records only a lazy group.
    fn lazy_batch(engine: &mut Engine) {
        engine.begin_batch();
        engine.record_lazily(removed()).expect("recorded");
        engine.end_batch();
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_that_starts_the_merge_is_published_with_the_merges_batch() {
        let mut f = fixture();

        held_batch(&mut f.engine);
        assert_eq!(f.engine.store.syncs(), f.syncs + 1, "durable at once");
        assert_eq!(published(&f.engine), f.seq, "but not yet published");
        let by = f.engine.storage.deadline().expect("a deadline");
        assert!(by <= Instant::now() + PUBLISH_HOLD);

        // The merge's batch, which starts the next merge too: both are published now.
        held_batch(&mut f.engine);
        assert_eq!(f.engine.store.syncs(), f.syncs + 2);
        assert_eq!(
            published(&f.engine),
            f.seq + 2,
            "one publication for both batches"
        );
        assert_eq!(
            f.engine.storage.deadline(),
            None,
            "nothing is held after it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_batch_that_starts_the_daemons_merge_holds_its_publication() {
        let mut f = fixture();

        // The bead is poured and its only step, the merge, is taken by the daemon.
        f.engine.begin_batch();
        f.engine.schedule();
        f.engine.end_batch();
        assert!(!f.engine.git.idle(), "the daemon's merge started");
        assert!(
            f.engine.store.state().seq() > f.seq,
            "its events are recorded"
        );
        assert_eq!(f.engine.store.syncs(), f.syncs + 1, "and durable");
        assert_eq!(
            published(&f.engine),
            f.seq,
            "but held for the merge's own batch"
        );
        assert!(f.engine.storage.deadline().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn held_events_are_published_once_the_hold_is_over() {
        let mut f = fixture();

        held_batch(&mut f.engine);
        let by = f.engine.storage.deadline().expect("a deadline");
        assert_eq!(f.engine.next_wake(), Some(by), "the engine wakes for it");

        // A batch with nothing to say before then keeps them held.
        f.engine.begin_batch();
        f.engine.end_batch();
        assert_eq!(published(&f.engine), f.seq);

        tokio::time::advance(PUBLISH_HOLD).await;
        f.engine.begin_batch();
        f.engine.on_timer();
        f.engine.end_batch();
        assert_eq!(
            published(&f.engine),
            f.seq + 1,
            "published when the hold is over"
        );
        assert_eq!(f.engine.storage.deadline(), None);
    }

    /// The engine's methods are not a second list kept beside `Method`: a method the connection
    /// serves itself, sent to the engine by mistake, is answered as the bug it is.
    #[tokio::test(start_paused = true)]
    async fn a_connections_method_sent_to_the_engine_is_refused_as_a_bug() {
        let mut f = fixture();
        for method in [
            crate::protocol::Method::Shutdown,
            crate::protocol::Method::Workers,
        ] {
            let name = method.name();
            let error = f.engine.request(method).expect_err("refused");
            assert_eq!(error.code, crate::protocol::ErrorCode::Internal, "{name}");
            assert!(
                error
                    .message
                    .contains(&format!("`{name}` is served by the connection")),
                "{}",
                error.message
            );
        }
        let status = f.engine.request(crate::protocol::Method::Status);
        assert!(status.is_ok(), "the engine's own methods are answered");
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_that_answers_a_client_is_published_at_once() {
        let mut f = fixture();
        let (reply, mut answer) = tokio::sync::oneshot::channel();

        // A batch that starts the daemon's merge and answers a request.
        f.engine.begin_batch();
        f.engine.schedule();
        f.engine.handle(Input::Request {
            method: crate::protocol::Method::Status,
            reply,
        });
        f.engine.end_batch();
        assert!(!f.engine.git.idle(), "the daemon's merge started");
        assert!(answer.try_recv().is_ok(), "the client got its answer");
        assert_eq!(
            published(&f.engine),
            f.engine.store.state().seq(),
            "a client reading the journal after its answer finds the events"
        );
        assert_eq!(f.engine.storage.deadline(), None);
    }
}
