//! The attempts the daemon waits for, and what it takes back for them: leases and ends,
//! each from a listed worker under its key ([`Admit`]), and only from the worker whose lease
//! the daemon took first for that attempt. Anything else is refused and recorded; a refused
//! end leaves its attempt waiting for the real one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer;
use futures::StreamExt;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::admit::Admit;
use super::trust::Refusal;
use crate::domain::cluster::{AttemptEnd, Kind, Lease};

/// How long an end that came before any lease of its attempt was heard waits for one (the
/// worker sends its lease first, but leases and ends reach the daemon by different ways).
const LEASE_FIRST: Duration = Duration::from_secs(2);

/// An attempt the daemon waits for.
pub(super) struct Waiting {
    pub(super) end: oneshot::Sender<AttemptEnd>,
    /// The worker that holds it (the first whose lease was taken) and when it last renewed.
    pub(super) leases: watch::Sender<Option<(String, Instant)>>,
    /// The holder's last lease's `seq`: one not above it is a lease heard again.
    pub(super) seq: u64,
    /// The order's sequence in the attempts stream, once JetStream stored it.
    pub(super) queued: Option<u64>,
}

/// The attempts waiting, by dispatch.
pub(super) type Waitings = Arc<Mutex<HashMap<String, Waiting>>>;

/// Takes a lease that came on `subject`: the first taken for an attempt holds it, and only
/// its later leases (not one heard again) renew it; a lease of another worker is refused.
pub(super) fn take_lease(waiting: &Waitings, admit: &Admit, subject: &str, payload: &[u8]) {
    let lease: Lease = match admit.check(subject, payload, Kind::Lease, |l: &Lease| &l.worker) {
        Ok(lease) => lease,
        Err(refusal) => return admit.refuse(subject, Kind::Lease, &refusal),
    };
    let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
    let Some(w) = waiting.get_mut(&lease.dispatch) else {
        return;
    };
    let holder = w.leases.borrow().as_ref().map(|(h, _)| h.clone());
    match holder {
        Some(holder) if holder != lease.worker => {
            drop(waiting);
            let refusal = Refusal::NotTheHolder {
                worker: lease.worker,
                dispatch: lease.dispatch,
                holder,
            };
            admit.refuse(subject, Kind::Lease, &refusal);
        }
        Some(_) if lease.seq <= w.seq => {
            tracing::debug!(dispatch = %lease.dispatch, "a lease heard again: ignored");
        }
        _ => {
            w.seq = lease.seq;
            w.leases.send_replace(Some((lease.worker, Instant::now())));
        }
    }
}

/// Reads ends as they come and hands each to the attempt waiting for it, if it comes from the
/// worker holding that attempt; an end no attempt waits for is dropped, and one [`Admit`] or
/// the holder refuses is recorded and dropped, leaving the attempt to wait for its real end.
/// Each is acknowledged once handled.
pub(super) async fn take_ends(
    reader: consumer::PullConsumer,
    waiting: Waitings,
    admit: Arc<Admit>,
    shutdown: CancellationToken,
) {
    loop {
        let mut messages = match reader.messages().await {
            Ok(messages) => messages,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the attempts' ends; trying again");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        loop {
            let message = tokio::select! {
                () = shutdown.cancelled() => return,
                next = messages.next() => match next {
                    Some(Ok(m)) => m,
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "reading ends");
                        continue;
                    }
                    None => break,
                },
            };
            let subject = message.subject.as_str();
            match admit.check(subject, &message.payload, Kind::End, |e: &AttemptEnd| {
                &e.worker
            }) {
                Ok(end) => match hand_end(&waiting, end).await {
                    Ok(()) => {}
                    Err(refusal) => admit.refuse(subject, Kind::End, &refusal),
                },
                Err(refusal) => admit.refuse(subject, Kind::End, &refusal),
            }
            if let Err(e) = message.ack().await {
                tracing::warn!(error = %e, "cannot acknowledge an end");
            }
        }
    }
}

/// Hands `end` (from a listed worker, under its key) to the attempt waiting for it, if its
/// worker holds that attempt's lease. An end heard before any lease of its attempt waits a
/// moment for one ([`LEASE_FIRST`]); with none, its worker is taken for the holder.
async fn hand_end(
    waiting: &Mutex<HashMap<String, Waiting>>,
    end: AttemptEnd,
) -> Result<(), Refusal> {
    let leases = waiting
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&end.dispatch)
        .map(|w| w.leases.subscribe());
    let Some(mut leases) = leases else {
        tracing::info!(
            dispatch = %end.dispatch, worker = %end.worker,
            "an end no attempt waits for (superseded, or from before a restart): ignored"
        );
        return Ok(());
    };
    let _ = tokio::time::timeout(LEASE_FIRST, leases.wait_for(Option::is_some)).await;
    let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
    let Some(w) = waiting.get(&end.dispatch) else {
        return Ok(());
    };
    let holder = w.leases.borrow().as_ref().map(|(h, _)| h.clone());
    if let Some(holder) = holder.filter(|h| *h != end.worker) {
        return Err(Refusal::NotTheHolder {
            worker: end.worker,
            dispatch: end.dispatch,
            holder,
        });
    }
    if let Some(w) = waiting.remove(&end.dispatch) {
        let _ = w.end.send(end);
    }
    Ok(())
}
