//! `catalyst worker`: takes agent attempts from NATS, at most `slots` at once, runs each in
//! its workspace ([`Worker`]) and sends its end back; says it is there every few seconds;
//! holds each attempt by renewing its lease while it runs, and stops one the daemon cancels.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::bus::{model_consumer, retry, ClusterError};
use super::trouble::Trouble;
use super::worker::{Worker, WorkerError};
use crate::domain::cluster::{AttemptOrder, Lease, Subjects, WorkerBeat};
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
    pub nats: Vec<String>,
    /// A file holding the NATS servers' token (`--nats-token-file`).
    pub nats_token_file: Option<PathBuf>,
    /// The shared git remote.
    pub remote: String,
    pub workdir: PathBuf,
    pub slots: usize,
    /// The models it takes attempts of; empty: every model the daemon hands out.
    pub models: Vec<String>,
    pub name: String,
    /// The daemon's `[cluster] name`.
    pub cluster: String,
    /// The `catalyst` binary (the hooks, the shim, the sandbox's network).
    pub catalyst: PathBuf,
}

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Worker(#[from] WorkerError),
}

/// The attempts a worker runs, by dispatch: their step and what stops them.
type Running = Arc<Mutex<HashMap<String, (BeadId, CancellationToken)>>>;

/// Serves until `shutdown`; running attempts are then stopped and their ends sent (without
/// an outcome: they run again elsewhere).
pub async fn serve(opts: WorkerOptions, shutdown: CancellationToken) -> Result<(), ServeError> {
    let client = super::bus::connect(&opts.nats, opts.nats_token_file.as_deref()).await?;
    let js = jetstream::new(client.clone());
    let subjects = Subjects::new(&opts.cluster);
    // A spare worktree per slot, up to four, as the daemon keeps per agent.
    let spares = opts.slots.clamp(1, 4);
    let worker = Arc::new(
        Worker::open(
            &opts.name,
            &opts.remote,
            &opts.workdir,
            &opts.catalyst,
            spares,
        )
        .await?,
    );
    let running: Running = Arc::default();
    let trouble = Arc::new(Mutex::new(Trouble::default()));
    tokio::spawn(say_present(
        client.clone(),
        subjects.clone(),
        opts.clone(),
        running.clone(),
        trouble.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(follow_cancels(
        client.clone(),
        subjects.clone(),
        running.clone(),
        shutdown.clone(),
    ));
    tracing::info!(name = %opts.name, slots = opts.slots, "worker serving");
    let slots = Arc::new(Semaphore::new(opts.slots.max(1)));
    let taker = Arc::new(Taker {
        client,
        js: js.clone(),
        subjects: subjects.clone(),
        worker,
        running,
        slots: slots.clone(),
        name: opts.name.clone(),
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

/// What a worker's takers share: where orders come from and ends go, the workspace that runs
/// them, the attempts running and the slots left.
struct Taker {
    client: async_nats::Client,
    js: jetstream::Context,
    subjects: Subjects,
    worker: Arc<Worker>,
    running: Running,
    slots: Arc<Semaphore>,
    name: String,
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
    /// How long the worker still takes no orders after an attempt it could not prepare.
    fn waits(&self) -> Option<Duration> {
        self.trouble
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .wait(Instant::now())
    }

    /// Runs the order of `message` in the slot `permit` holds, and sends its end.
    async fn start(self: Arc<Self>, message: jetstream::Message, permit: OwnedSemaphorePermit) {
        let order: AttemptOrder = match serde_json::from_slice(&message.payload) {
            Ok(order) => order,
            Err(e) => {
                tracing::warn!(error = %e, "an order that does not parse: dropped");
                let _ = message.ack_with(jetstream::AckKind::Term).await;
                return;
            }
        };
        // Held before it is taken off the queue: the daemon knows who runs it.
        lease(&self.client, &self.subjects, &order.dispatch, &self.name).await;
        if let Err(e) = message.ack().await {
            tracing::warn!(error = %e, "cannot take the order off the queue");
        }
        let cancel = self.shutdown.child_token();
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(order.dispatch.clone(), (order.step.clone(), cancel.clone()));
        tokio::spawn(async move {
            let renew = renew_lease(&self.client, &self.subjects, &order, &self.name);
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
            send_end(&self.js, &self.subjects, &end).await;
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

async fn lease(client: &async_nats::Client, subjects: &Subjects, dispatch: &str, worker: &str) {
    let lease = Lease {
        dispatch: dispatch.to_owned(),
        worker: worker.to_owned(),
    };
    let payload = serde_json::to_vec(&lease).unwrap_or_default();
    if let Err(e) = client.publish(subjects.leases(), payload.into()).await {
        tracing::warn!(error = %e, "cannot renew a lease");
    }
}

/// Renews the order's lease every third of it, forever (dropped when the attempt ends).
async fn renew_lease(
    client: &async_nats::Client,
    subjects: &Subjects,
    order: &AttemptOrder,
    name: &str,
) {
    let every = Duration::from_secs(order.lease_secs.max(1)) / 3;
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    loop {
        tick.tick().await;
        lease(client, subjects, &order.dispatch, name).await;
    }
}

/// Sends an attempt's end, trying again until JetStream takes it (once, by its dispatch).
async fn send_end(
    js: &jetstream::Context,
    subjects: &Subjects,
    end: &crate::domain::cluster::AttemptEnd,
) {
    let payload = serde_json::to_vec(end).unwrap_or_default();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        "Nats-Msg-Id",
        format!("{}/{}", end.dispatch, end.worker).as_str(),
    );
    let sent = retry("sending an attempt's end", || async {
        js.publish_with_headers(subjects.ends(), headers.clone(), payload.clone().into())
            .await?
            .await
            .map_err(async_nats::Error::from)
    })
    .await;
    match sent {
        Ok(_) => tracing::info!(step = %end.step, attempt = end.attempt, "sent the attempt's end"),
        Err(e) => {
            tracing::error!(step = %end.step, error = %e, "cannot send an attempt's end; the daemon runs it again when the lease runs out")
        }
    }
}

async fn say_present(
    client: async_nats::Client,
    subjects: Subjects,
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
        let payload = serde_json::to_vec(&beat).unwrap_or_default();
        let _ = client.publish(subjects.workers(), payload.into()).await;
    }
}

async fn follow_cancels(
    client: async_nats::Client,
    subjects: Subjects,
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
        let dispatch = String::from_utf8_lossy(&message.payload).into_owned();
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
