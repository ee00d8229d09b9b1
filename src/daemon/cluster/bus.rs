//! The daemon's side of NATS: the streams, handing orders out, taking ends back, leases,
//! cancels and the workers' presence ([`runner::Remote`] for the engine's attempts).
//!
//! - Orders go to the work-queue stream `<name>-attempts`, subject `<name>.attempt.<model>`,
//!   each with its dispatch as `Nats-Msg-Id`; the workers of a model share the durable pull
//!   consumer `<name>-model-<model>`, so each order goes to one of them. The per-model caps
//!   need nothing of NATS: the daemon hands out no more than they allow.
//! - Ends come back on the work-queue stream `<name>-ends`, each on its worker's subject
//!   `<name>.end.<worker>`, read by the durable consumer `<name>-daemon`. An end is
//!   acknowledged once its waiting attempt took it, or when no attempt waits for its dispatch
//!   any more (superseded, or from before a restart): it is then ignored, so exactly one end
//!   per attempt is ever applied.
//! - Leases, cancels and presence are plain NATS messages: losing one only delays a decision
//!   the next one makes.
//! - Orders and cancels go signed by the daemon's key; a lease, end or presence message is
//!   taken only as [`Admit`] says, and an end or a lease only from the worker whose lease
//!   first held the attempt. A refused message changes nothing: the real end still finds its
//!   attempt waiting.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use futures::StreamExt;
use tokio::sync::{oneshot, watch, Notify};
use tokio_util::sync::CancellationToken;

use super::admit::{Admit, Record};
use super::held::{self, take_ends, Waiting, Waitings};
pub use super::link::ClusterError;
use super::link::{publish_once, retry, Link};
use super::trust::Signer;
use crate::daemon::runner::{HandOutError, Pending, Remote};
use crate::daemon::worktree::transport;
use crate::domain::cluster::{bead_of_ref, AttemptOrder, Kind, Subjects, WorkerBeat, REFS};
use crate::domain::config::cluster::ClusterConfig;
use crate::domain::id::BeadId;

/// A worker that has not said it is there for this long is left out of `ctl workers`.
pub const WORKER_GONE: Duration = Duration::from_secs(30);

/// The daemon's connection to its workers.
pub struct Bus {
    subjects: Subjects,
    client: async_nats::Client,
    js: jetstream::Context,
    remote: String,
    lease: Duration,
    replicas: usize,
    waiting: Waitings,
    consumers: tokio::sync::Mutex<HashSet<String>>,
    workers: Arc<Mutex<BTreeMap<String, (WorkerBeat, Instant)>>>,
    /// Commits the shared remote holds, with a ref that holds each (see [`Remote::known`]).
    pushed: Mutex<HashMap<String, String>>,
    /// The daemon's repository, where `git` runs to reach the shared remote.
    workspace: PathBuf,
    /// Beads whose refs in the shared remote are to go ([`Remote::retire`]), with when, in
    /// that order, and a wake-up for the task that deletes them `keep_refs` later.
    retired: Mutex<VecDeque<(BeadId, Instant)>>,
    retiring: Notify,
    keep_refs: Duration,
    /// Signs orders and cancels.
    signer: Signer,
    admit: Arc<Admit>,
}

/// The most commits [`Bus`] remembers the shared remote holds; past it, it starts over (a
/// commit forgotten is pushed again, which costs a transfer, nothing more).
const REMEMBERED: usize = 10_000;

/// The consumer the workers of `model` share: one order to one worker; an order taken but
/// not acknowledged (the worker died at once) goes to another after `ack_wait`.
pub fn model_consumer(subjects: &Subjects, model: &str) -> consumer::pull::Config {
    let name = subjects.model_consumer(model);
    consumer::pull::Config {
        durable_name: Some(name.clone()),
        name: Some(name),
        filter_subject: subjects.attempt(model),
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: Duration::from_secs(30),
        ..Default::default()
    }
}

/// What the daemon's side of the cluster is given besides its `[cluster]`.
pub struct Setting<'a> {
    /// The models whose consumers are made at start.
    pub models: Vec<String>,
    /// The daemon's repository, where `git` runs to reach the shared remote.
    pub workspace: &'a Path,
    /// The seed file of the daemon's key (made when missing).
    pub key_file: &'a Path,
    /// Where refused messages are recorded.
    pub record: Record,
}

impl Bus {
    /// Connects to `config.nats`, makes the streams and the daemon's consumer, drops the
    /// orders a previous run of the daemon left (their attempts were interrupted and run
    /// again), makes the consumer of each model (so a worker finds them when it starts, not
    /// after the first order), and follows ends, leases and workers until `shutdown`.
    pub async fn connect(
        config: &ClusterConfig,
        setting: Setting<'_>,
        shutdown: CancellationToken,
    ) -> Result<Arc<Bus>, ClusterError> {
        let Setting {
            models,
            workspace,
            key_file,
            record,
        } = setting;
        let (signer, made) = Signer::load_or_make(key_file)?;
        if made {
            tracing::info!(path = %key_file.display(), "made the daemon's cluster key");
        }
        tracing::info!(
            key = %signer.public_key(),
            "the daemon's cluster key: give it to each worker as `--daemon-key`"
        );
        let admit = Arc::new(Admit::new(&config.workers, record)?);
        let link = Link::of(config);
        link.check()?;
        let client = link.connect().await?;
        let js = jetstream::new(client.clone());
        let subjects = Subjects::new(&config.name);
        let replicas = config.replicas();
        let attempts = stream_config(subjects.attempts_stream(), subjects.attempts(), replicas);
        let attempts = retry("the attempts stream", || {
            js.get_or_create_stream(attempts.clone())
        })
        .await?;
        retry("dropping the last run's orders", || async {
            attempts.purge().await
        })
        .await?;
        // Made or updated: a stream of an older daemon took all ends on one subject.
        let ends = stream_config(subjects.ends_stream(), subjects.ends(), replicas);
        retry("the ends stream", || {
            js.create_or_update_stream(ends.clone())
        })
        .await?;
        let ends = retry("the ends stream", || js.get_stream(subjects.ends_stream())).await?;
        let reader = consumer::pull::Config {
            durable_name: Some(subjects.ends_consumer()),
            name: Some(subjects.ends_consumer()),
            ack_policy: consumer::AckPolicy::Explicit,
            num_replicas: replicas,
            ..Default::default()
        };
        let reader_name = subjects.ends_consumer();
        let reader: consumer::PullConsumer = retry("the daemon's consumer of ends", || {
            ends.get_or_create_consumer(&reader_name, reader.clone())
        })
        .await?;
        let bus = Arc::new(Bus {
            subjects,
            client,
            js,
            remote: config.remote.clone().unwrap_or_default(),
            lease: Duration::from_secs(config.lease_secs),
            replicas,
            waiting: Arc::default(),
            consumers: tokio::sync::Mutex::new(HashSet::new()),
            workers: Arc::default(),
            pushed: Mutex::default(),
            workspace: workspace.to_owned(),
            retired: Mutex::default(),
            retiring: Notify::new(),
            keep_refs: Duration::from_secs(config.keep_refs_secs),
            signer,
            admit,
        });
        for model in models {
            bus.model_consumer(&model)
                .await
                .map_err(|e| ClusterError::Setup {
                    what: format!("the consumer of {model}'s orders"),
                    detail: e.to_string(),
                })?;
        }
        tokio::spawn(take_ends(
            reader,
            bus.waiting.clone(),
            bus.admit.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(prune_refs(bus.clone(), shutdown.clone()));
        bus.follow_leases(shutdown.clone()).await?;
        bus.follow_workers(shutdown).await?;
        Ok(bus)
    }

    /// The workers that said they were there within [`WORKER_GONE`], by name, with how long
    /// ago they last did.
    pub fn workers(&self) -> Vec<(WorkerBeat, Duration)> {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        workers.retain(|_, (_, at)| at.elapsed() < WORKER_GONE);
        workers
            .values()
            .map(|(beat, at)| (beat.clone(), at.elapsed()))
            .collect()
    }

    /// How many messages from the cluster's subjects were refused since the start.
    pub fn refused(&self) -> u64 {
        self.admit.refused()
    }

    /// Takes the leases of listed workers (see [`held::take_lease`]).
    async fn follow_leases(&self, shutdown: CancellationToken) -> Result<(), ClusterError> {
        let (waiting, admit) = (self.waiting.clone(), self.admit.clone());
        self.follow(self.subjects.leases(), shutdown, move |subject, payload| {
            held::take_lease(&waiting, &admit, subject, payload);
        })
        .await
    }

    async fn follow_workers(&self, shutdown: CancellationToken) -> Result<(), ClusterError> {
        let (workers, admit) = (self.workers.clone(), self.admit.clone());
        self.follow(
            self.subjects.workers(),
            shutdown,
            move |subject, payload| match admit.check(
                subject,
                payload,
                Kind::Presence,
                |b: &WorkerBeat| &b.name,
            ) {
                Ok(beat) => {
                    let mut workers = workers.lock().unwrap_or_else(|e| e.into_inner());
                    workers.insert(beat.name.clone(), (beat, Instant::now()));
                }
                Err(refusal) => admit.refuse(subject, Kind::Presence, &refusal),
            },
        )
        .await
    }

    /// Hands each message of `subject` to `take` with the subject it came on, until
    /// `shutdown`.
    async fn follow(
        &self,
        subject: String,
        shutdown: CancellationToken,
        take: impl Fn(&str, &[u8]) + Send + 'static,
    ) -> Result<(), ClusterError> {
        let mut messages = self.subscribe(subject).await?;
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    () = shutdown.cancelled() => return,
                    next = messages.next() => match next {
                        Some(m) => m,
                        None => return,
                    },
                };
                take(message.subject.as_str(), &message.payload);
            }
        });
        Ok(())
    }

    async fn subscribe(&self, subject: String) -> Result<async_nats::Subscriber, ClusterError> {
        self.client
            .subscribe(subject.clone())
            .await
            .map_err(|e| ClusterError::Setup {
                what: subject,
                detail: e.to_string(),
            })
    }

    /// Deletes the shared remote's refs of `beads`, and forgets the commits they held.
    async fn prune(&self, beads: &HashSet<BeadId>) -> Result<(), transport::GitCommandError> {
        let all = transport::remote_refs(&self.workspace, &self.remote, REFS).await?;
        let names: HashSet<&str> = beads.iter().map(BeadId::as_str).collect();
        let theirs: Vec<String> = all
            .into_iter()
            .filter(|r| bead_of_ref(r).is_some_and(|b| names.contains(b)))
            .collect();
        if theirs.is_empty() {
            return Ok(());
        }
        transport::delete_refs(&self.workspace, &self.remote, &theirs).await?;
        let gone: HashSet<&String> = theirs.iter().collect();
        self.pushed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, reference| !gone.contains(reference));
        tracing::debug!(
            refs = theirs.len(),
            "deleted finished beads' refs from the shared remote"
        );
        Ok(())
    }

    /// The consumer of `model`'s orders, made the first time.
    async fn model_consumer(&self, model: &str) -> Result<(), ClusterError> {
        let name = self.subjects.model_consumer(model);
        let mut made = self.consumers.lock().await;
        if made.contains(&name) {
            return Ok(());
        }
        let config = consumer::pull::Config {
            num_replicas: self.replicas,
            ..model_consumer(&self.subjects, model)
        };
        let stream = retry("the attempts stream", || {
            self.js.get_stream(self.subjects.attempts_stream())
        })
        .await?;
        let _: consumer::PullConsumer = retry(&name, || {
            stream.get_or_create_consumer(&name, config.clone())
        })
        .await?;
        made.insert(name);
        Ok(())
    }

    async fn hand_out(&self, order: AttemptOrder) -> Result<Pending, HandOutError> {
        let refused = |order: &AttemptOrder, e: ClusterError| HandOutError {
            dispatch: order.dispatch.clone(),
            model: order.model.clone(),
            source: Box::new(e),
        };
        if let Err(e) = self.model_consumer(&order.model).await {
            return Err(refused(&order, e));
        }
        let payload = self.signer.seal(Kind::Order, &order);
        let (end_tx, end) = oneshot::channel();
        let (lease_tx, leases) = watch::channel(None);
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                order.dispatch.clone(),
                Waiting {
                    end: end_tx,
                    leases: lease_tx,
                    seq: 0,
                    queued: None,
                },
            );
        let subject = self.subjects.attempt(&order.model);
        let published = publish_once(
            &self.js,
            "handing an attempt out",
            subject,
            &order.dispatch,
            payload,
        )
        .await;
        match published {
            Ok(ack) => {
                let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(w) = waiting.get_mut(&order.dispatch) {
                    w.queued = Some(ack.sequence);
                }
            }
            Err(e) => {
                self.forget(&order.dispatch);
                return Err(refused(&order, e));
            }
        }
        Ok(Pending { end, leases })
    }

    fn forget(&self, dispatch: &str) {
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(dispatch);
    }
}

impl Remote for Bus {
    fn url(&self) -> &str {
        &self.remote
    }

    fn workers_seen(&self) -> usize {
        self.workers().len()
    }

    fn lease(&self) -> Duration {
        self.lease
    }

    fn send(
        &self,
        order: AttemptOrder,
    ) -> Pin<Box<dyn Future<Output = Result<Pending, HandOutError>> + Send + '_>> {
        Box::pin(self.hand_out(order))
    }

    fn known(&self, commit: &str) -> Option<String> {
        self.pushed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(commit)
            .cloned()
    }

    fn remember(&self, commit: &str, reference: &str) {
        let mut pushed = self.pushed.lock().unwrap_or_else(|e| e.into_inner());
        if pushed.len() >= REMEMBERED {
            pushed.clear();
        }
        pushed.insert(commit.to_owned(), reference.to_owned());
    }

    fn retire(&self, work: &BeadId) {
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((work.clone(), Instant::now()));
        self.retiring.notify_one();
    }

    fn taken(&self, dispatch: &str) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        let queued = self
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(dispatch)
            .and_then(|w| w.queued);
        Box::pin(async move {
            let Some(sequence) = queued else {
                return false;
            };
            let Ok(stream) = self.js.get_stream(self.subjects.attempts_stream()).await else {
                return false;
            };
            // A work queue keeps an order until a worker acknowledges it.
            matches!(
                stream.get_raw_message(sequence).await,
                Err(e) if e.kind() == stream::RawMessageErrorKind::NoMessageFound
            )
        })
    }

    fn cancel(&self, dispatch: &str) {
        self.forget(dispatch);
        let (client, subject) = (self.client.clone(), self.subjects.cancels());
        let payload = self.signer.seal(Kind::Cancel, &dispatch);
        tokio::spawn(async move {
            if let Err(e) = client.publish(subject, payload.into()).await {
                tracing::warn!(error = %e, "cannot tell the workers of a cancel");
            }
        });
    }
}

/// Deletes the refs of retired beads from the shared remote `keep_refs` after they retired,
/// those of every bead due at once (one listing and one push), until `shutdown`. The refs of
/// a bead not yet due when the daemon stops stay; they hold nothing the daemon needs.
async fn prune_refs(bus: Arc<Bus>, shutdown: CancellationToken) {
    loop {
        let next = bus
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .front()
            .map(|(_, at)| *at + bus.keep_refs);
        let due = async {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => bus.retiring.notified().await,
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = due => {}
        }
        let beads: HashSet<BeadId> = {
            let mut retired = bus.retired.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let mut beads = HashSet::new();
            while retired
                .front()
                .is_some_and(|(_, at)| *at + bus.keep_refs <= now)
            {
                beads.extend(retired.pop_front().map(|(bead, _)| bead));
            }
            beads
        };
        if beads.is_empty() {
            continue;
        }
        if let Err(e) = bus.prune(&beads).await {
            tracing::warn!(error = %e, beads = beads.len(), "cannot delete finished beads' refs from the shared remote");
        }
    }
}

/// A work-queue stream named `name` over `subjects`, kept on `replicas` nodes.
fn stream_config(name: String, subjects: String, replicas: usize) -> stream::Config {
    stream::Config {
        name,
        subjects: vec![subjects],
        retention: stream::RetentionPolicy::WorkQueue,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    }
}
