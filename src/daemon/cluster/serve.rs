//! `catalyst worker`: takes agent attempts from NATS, at most `slots` at once, runs each in
//! its workspace ([`Worker`]) and sends its end back; says it is there every few seconds;
//! holds each attempt by renewing its lease while it runs, and stops one the daemon cancels.
//!
//! It takes orders and cancels signed by the daemon's key only (`--daemon-key`); anything
//! else on those subjects is refused, logged and dropped. Its own leases, ends and presence
//! go signed by its key, each on its own subject.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::bus::{model_consumer, ClusterError};
use super::link::{retry, Link};
use super::speak::Speaker;
use super::trouble::Trouble;
use super::trust::{self, KeyError, Refusal, Signer, Verifier};
use super::worker::{Worker, WorkerError};
use crate::domain::agent::profile::AgentProfile;
use crate::domain::cluster::{AttemptOrder, Kind, Subjects, WorkerBeat};
use crate::domain::config::cluster::subject_token;
use crate::domain::id::BeadId;
use crate::domain::router::Outcome;

/// How often a worker says it is there.
const PRESENCE: Duration = Duration::from_secs(2);

/// How long one request for an order stays open (an order that comes meanwhile is delivered
/// at once; the request is then made again).
const FETCH_WAIT: Duration = Duration::from_secs(2);

/// How often a worker looks for consumers of models it does not follow yet.
const LOOK_AGAIN: Duration = Duration::from_secs(5);

/// How soon a worker that follows no model yet looks again (the daemon makes its models'
/// consumers when it starts).
const LOOK_SOON: Duration = Duration::from_millis(500);

/// How long a worker waits before asking again after JetStream did not answer.
const RETRY_AFTER: Duration = Duration::from_millis(250);

/// A worker's settings (`catalyst worker`'s flags).
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The NATS servers, how to log in to them and whether plain `nats://` off this machine
    /// is allowed.
    pub link: Link,
    /// The daemon's public key (`--daemon-key`): only orders and cancels signed with it are
    /// taken.
    pub daemon_key: String,
    /// The seed file of the worker's own key (`--key-file`), made when missing; the daemon
    /// lists its public key under the worker's name.
    pub key_file: PathBuf,
    /// The profiles it runs, by name: the built-in ones, and those of `--profiles`.
    pub profiles: BTreeMap<String, AgentProfile>,
    /// Lets a profile with `sandbox = "none"` run (`--allow-unconfined`).
    pub allow_unconfined: bool,
    /// The shared git remote.
    pub remote: String,
    pub workdir: PathBuf,
    pub slots: usize,
    /// The models it takes attempts of; empty: every model the daemon hands out.
    pub models: Vec<String>,
    pub name: String,
    /// The daemon's `[cluster] name`.
    pub cluster: String,
    /// The `catalyst` binary (the hooks, the sandbox's network).
    pub catalyst: PathBuf,
}

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Worker(#[from] WorkerError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("the worker's name `{0}` must be letters, digits, `-` or `_`")]
    Name(String),
}

/// The attempts a worker runs, by dispatch: their step and what stops them.
type Running = Arc<Mutex<HashMap<String, (BeadId, CancellationToken)>>>;

/// Serves until `shutdown`; running attempts are then stopped and their ends sent (without
/// an outcome: they run again elsewhere).
pub async fn serve(opts: WorkerOptions, shutdown: CancellationToken) -> Result<(), ServeError> {
    if !subject_token(&opts.name) {
        return Err(ServeError::Name(opts.name.clone()));
    }
    let daemon = Verifier::new(&opts.daemon_key)?;
    opts.link.check()?;
    let (signer, made) = Signer::load_or_make(&opts.key_file)?;
    if made {
        tracing::info!(path = %opts.key_file.display(), "made the worker's key");
    }
    tracing::info!(
        key = %signer.public_key(),
        "the worker's key: the daemon's `[cluster] workers` lists it as `{} = \"{}\"`",
        opts.name,
        signer.public_key()
    );
    // A spare worktree per slot, up to four, as the daemon keeps per agent.
    let spares = opts.slots.clamp(1, 4);
    let worker = Worker::open(
        &opts.name,
        &opts.remote,
        &opts.workdir,
        &opts.catalyst,
        spares,
    )
    .await?
    .with_profiles(opts.profiles.clone(), opts.allow_unconfined)?;
    let worker = Arc::new(worker);
    let client = opts.link.connect().await?;
    let js = jetstream::new(client.clone());
    let subjects = Subjects::new(&opts.cluster);
    let speaker = Arc::new(Speaker {
        client: client.clone(),
        js: js.clone(),
        subjects: subjects.clone(),
        signer,
        name: opts.name.clone(),
    });
    let running: Running = Arc::default();
    let trouble = Arc::new(Mutex::new(Trouble::default()));
    tokio::spawn(say_present(
        speaker.clone(),
        opts.clone(),
        running.clone(),
        trouble.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(follow_cancels(
        client.clone(),
        subjects.clone(),
        daemon.clone(),
        running.clone(),
        shutdown.clone(),
    ));
    tracing::info!(name = %opts.name, slots = opts.slots, "worker serving");
    let slots = Arc::new(Semaphore::new(opts.slots.max(1)));
    let taker = Arc::new(Taker {
        speaker,
        daemon,
        refused: AtomicU64::new(0),
        worker,
        running,
        slots: slots.clone(),
        shutdown: shutdown.clone(),
        trouble,
    });
    // One taker per model's consumer, so an idle model never delays another's orders. New
    // consumers are looked for every few seconds (a formula may name a model the daemon did
    // not know at its start), and often while there are none yet.
    let mut following = HashSet::new();
    loop {
        for (name, consumer) in model_consumers(&js, &subjects, &opts.models, &following).await {
            following.insert(name);
            tokio::spawn(take_orders(taker.clone(), consumer));
        }
        // Models named on the command line are all followed once: nothing new can come.
        if !opts.models.is_empty() && following.len() == opts.models.len() {
            shutdown.cancelled().await;
            break;
        }
        let again = if following.is_empty() {
            LOOK_SOON
        } else {
            LOOK_AGAIN
        };
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(again) => {}
        }
    }
    // Let the attempts that were stopped send their ends.
    let _ = tokio::time::timeout(
        Duration::from_secs(30),
        slots.acquire_many(opts.slots.max(1) as u32),
    )
    .await;
    Ok(())
}

/// What a worker's takers share: where orders come from and ends go, whose orders they take,
/// the workspace that runs them, the attempts running and the slots left.
struct Taker {
    speaker: Arc<Speaker>,
    /// The daemon's key: orders signed with another are refused.
    daemon: Verifier,
    /// Orders refused since the start.
    refused: AtomicU64,
    worker: Arc<Worker>,
    running: Running,
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
    trouble: Arc<Mutex<Trouble>>,
}

/// Takes the orders of one model's consumer while a slot is free, until shutdown. An order
/// that arrives once every slot has been taken (by another model's order meanwhile) goes back
/// to the queue, for another worker or for later.
async fn take_orders(taker: Arc<Taker>, consumer: consumer::PullConsumer) {
    loop {
        // Nothing is asked for while the worker waits after an attempt it could not prepare.
        if let Some(wait) = taker.waits() {
            tokio::select! {
                () = taker.shutdown.cancelled() => return,
                () = tokio::time::sleep(wait) => continue,
            }
        }
        // A slot free before asking: the request is not sent while every slot is busy.
        tokio::select! {
            () = taker.shutdown.cancelled() => return,
            free = taker.slots.acquire() => match free {
                Ok(free) => drop(free),
                Err(_) => return,
            },
        }
        let fetched = consumer
            .fetch()
            .max_messages(1)
            .expires(FETCH_WAIT)
            .messages()
            .await;
        let mut messages = match fetched {
            Ok(messages) => messages,
            Err(e) => {
                tracing::debug!(error = %e, "cannot ask for an order; asking again");
                tokio::select! {
                    () = taker.shutdown.cancelled() => return,
                    () = tokio::time::sleep(RETRY_AFTER) => continue,
                }
            }
        };
        let message = tokio::select! {
            () = taker.shutdown.cancelled() => return,
            next = messages.next() => match next {
                Some(Ok(message)) => message,
                _ => continue,
            },
        };
        let permit = match taker.slots.clone().try_acquire_owned() {
            Ok(permit) if taker.waits().is_none() => permit,
            _ => {
                if let Err(e) = message.ack_with(jetstream::AckKind::Nak(None)).await {
                    tracing::warn!(error = %e, "cannot give an order back; it comes back after its wait");
                }
                continue;
            }
        };
        taker.clone().start(message, permit).await;
    }
}

impl Taker {
    /// Logs an order that is not the daemon's, which nothing runs.
    fn refuse(&self, subject: &str, refusal: &Refusal) {
        let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(%subject, %refusal, refused, "refused an order: it is not the daemon's; nothing runs");
    }

    /// How long the worker still takes no orders after an attempt it could not prepare.
    fn waits(&self) -> Option<Duration> {
        self.trouble
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .wait(Instant::now())
    }

    /// Runs the order of `message` in the slot `permit` holds, and sends its end.
    async fn start(self: Arc<Self>, message: jetstream::Message, permit: OwnedSemaphorePermit) {
        let order: AttemptOrder =
            match trust::open_from(&message.payload, Kind::Order, &self.daemon) {
                Ok(order) => order,
                Err(refusal) => {
                    self.refuse(&message.subject, &refusal);
                    // Off the queue for good: nobody is to run it.
                    let _ = message.ack_with(jetstream::AckKind::Term).await;
                    return;
                }
            };
        // Held before it is taken off the queue: the daemon knows who runs it.
        self.speaker.lease(&order.dispatch, 1).await;
        if let Err(e) = message.ack().await {
            tracing::warn!(error = %e, "cannot take the order off the queue");
        }
        let cancel = self.shutdown.child_token();
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(order.dispatch.clone(), (order.step.clone(), cancel.clone()));
        tokio::spawn(async move {
            let renew = self.speaker.renew_lease(&order);
            let end = tokio::select! {
                end = self.worker.run(&order, cancel) => end,
                () = renew => unreachable!("renewing never ends"),
            };
            self.running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&order.dispatch);
            if let Some(Outcome::Unavailable { reason, .. }) = &end.outcome {
                tracing::warn!(step = %order.step, %reason, "cannot prepare the attempt here; it runs again elsewhere");
            }
            self.trouble
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .note(end.outcome.as_ref(), Instant::now());
            self.speaker.send_end(&end).await;
            self.worker.finish(&order).await;
            drop(permit);
        });
    }
}

/// The consumers of the models this worker takes that it does not follow yet: those named,
/// made if the daemon has not yet; else every model consumer the daemon made.
async fn model_consumers(
    js: &jetstream::Context,
    subjects: &Subjects,
    models: &[String],
    following: &HashSet<String>,
) -> Vec<(String, consumer::PullConsumer)> {
    let Ok(stream) = js.get_stream(subjects.attempts_stream()).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if models.is_empty() {
        let prefix = subjects.model_consumer("");
        let mut names = stream.consumer_names();
        let mut found = Vec::new();
        while let Some(Ok(name)) = names.next().await {
            if name.starts_with(&prefix) && !following.contains(&name) {
                found.push(name);
            }
        }
        for name in found {
            if let Ok(c) = stream.get_consumer::<consumer::pull::Config>(&name).await {
                out.push((name, c));
            }
        }
    } else {
        for model in models {
            let name = subjects.model_consumer(model);
            if following.contains(&name) {
                continue;
            }
            let config = model_consumer(subjects, model);
            match retry(&name, || {
                stream.get_or_create_consumer(&name, config.clone())
            })
            .await
            {
                Ok(c) => out.push((name, c)),
                Err(e) => tracing::warn!(error = %e, "cannot follow a model's orders"),
            }
        }
    }
    out
}

/// Says the worker is there every [`PRESENCE`], with what it runs and its trouble.
async fn say_present(
    speaker: Arc<Speaker>,
    opts: WorkerOptions,
    running: Running,
    trouble: Arc<Mutex<Trouble>>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(PRESENCE);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let steps = running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|(step, _)| step.clone())
            .collect();
        let beat = WorkerBeat {
            name: opts.name.clone(),
            slots: opts.slots,
            models: opts.models.clone(),
            running: steps,
            trouble: trouble
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .reason(Instant::now()),
        };
        let payload = speaker.signer.seal(Kind::Presence, &beat);
        let subject = speaker.subjects.worker(&speaker.name);
        let _ = speaker.client.publish(subject, payload.into()).await;
    }
}

/// Stops the attempts the daemon cancels (in a message signed with its key).
async fn follow_cancels(
    client: async_nats::Client,
    subjects: Subjects,
    daemon: Verifier,
    running: Running,
    shutdown: CancellationToken,
) {
    let Ok(mut cancels) = client.subscribe(subjects.cancels()).await else {
        tracing::error!("cannot follow cancels");
        return;
    };
    loop {
        let message = tokio::select! {
            () = shutdown.cancelled() => return,
            next = cancels.next() => match next {
                Some(m) => m,
                None => return,
            },
        };
        let dispatch: String = match trust::open_from(&message.payload, Kind::Cancel, &daemon) {
            Ok(dispatch) => dispatch,
            Err(refusal) => {
                tracing::warn!(%refusal, "refused a cancel: it is not the daemon's");
                continue;
            }
        };
        if let Some((step, cancel)) = running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&dispatch)
        {
            tracing::info!(%step, "the daemon cancelled the attempt");
            cancel.cancel();
        }
    }
}
