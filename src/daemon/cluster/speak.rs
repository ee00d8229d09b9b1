//! What a worker says: its leases, its ends and its presence, each signed with its key and
//! sent on its own subject (`<name>.lease.<worker>`, `<name>.end.<worker>`,
//! `<name>.worker.<worker>`), so that a NATS server's permissions can keep each worker to
//! its own.

use std::time::Duration;

use async_nats::jetstream;

use super::link::publish_once;
use super::trust::Signer;
use crate::domain::cluster::{AttemptEnd, AttemptOrder, Kind, Lease, Subjects};

/// What a worker sends, signed with its key, each on its own subject.
pub(super) struct Speaker {
    pub(super) client: async_nats::Client,
    pub(super) js: jetstream::Context,
    pub(super) subjects: Subjects,
    pub(super) signer: Signer,
    pub(super) name: String,
}

impl Speaker {
    /// Says the worker holds `dispatch`, the `seq`th time.
    pub(super) async fn lease(&self, dispatch: &str, seq: u64) {
        let lease = Lease {
            dispatch: dispatch.to_owned(),
            worker: self.name.clone(),
            seq,
        };
        let payload = self.signer.seal(Kind::Lease, &lease);
        let subject = self.subjects.lease(&self.name);
        if let Err(e) = self.client.publish(subject, payload.into()).await {
            tracing::warn!(error = %e, "cannot renew a lease");
        }
    }

    /// Renews the order's lease every third of it, forever (dropped when the attempt ends).
    pub(super) async fn renew_lease(&self, order: &AttemptOrder) {
        let every = Duration::from_secs(order.lease_secs.max(1)) / 3;
        let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
        // The first tick is at once; the lease taken with the order was the first.
        let mut seq = 1;
        loop {
            tick.tick().await;
            seq += 1;
            self.lease(&order.dispatch, seq).await;
        }
    }

    /// Sends an attempt's end, trying again until JetStream takes it (once: its id is its
    /// dispatch, its worker and the start of its signature, which nobody else can make
    /// ahead of it to have the real end dropped as a duplicate).
    pub(super) async fn send_end(&self, end: &AttemptEnd) {
        let signed = self.signer.sign(Kind::End, end);
        let id = format!(
            "{}/{}/{}",
            end.dispatch,
            end.worker,
            signed.sig.chars().take(16).collect::<String>()
        );
        let payload = serde_json::to_vec(&signed).unwrap_or_default();
        let subject = self.subjects.end(&self.name);
        let sent = publish_once(&self.js, "sending an attempt's end", subject, &id, payload).await;
        match sent {
            Ok(_) => {
                tracing::info!(step = %end.step, attempt = end.attempt, "sent the attempt's end")
            }
            Err(e) => {
                tracing::error!(step = %end.step, error = %e, "cannot send an attempt's end; the daemon runs it again when the lease runs out")
            }
        }
    }
}
