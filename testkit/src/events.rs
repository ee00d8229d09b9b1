//! The daemon's events as the tests read them: the one place that subscribes, replays and
//! waits, so that the event type can change in one place.

use std::time::Duration;

use catalyst::cli::client::Client;
use catalyst::protocol::{Method, SubscribeParams};

use crate::process::DaemonLog;
use crate::TIMEOUT;

/// One event, as the control socket sends it.
pub type Event = serde_json::Value;

/// A subscription to the daemon's events (`subscribe` with `follow`).
pub struct Events {
    client: Client,
    /// A subprocess daemon's log, quoted when a wait fails.
    log: Option<DaemonLog>,
}

impl Events {
    /// Subscribes on `client` from `since`, to the event types `types` (all when empty).
    pub(crate) async fn open(
        mut client: Client,
        since: u64,
        types: &[&str],
        log: Option<DaemonLog>,
    ) -> Events {
        let types = (!types.is_empty()).then(|| types.iter().map(|t| t.to_string()).collect());
        let params = SubscribeParams {
            since: Some(since),
            bead: None,
            types,
            follow: true,
        };
        client
            .call(&Method::Subscribe(params))
            .await
            .expect("subscribe");
        Events { client, log }
    }

    /// The next event; `None` once the daemon has closed the stream.
    pub async fn next(&mut self) -> Option<Event> {
        self.client.next_value().await.expect("event stream")
    }

    /// Reads events until one matches `pred` (`what` names it in the failure), within
    /// [`TIMEOUT`], and returns it.
    pub async fn wait_for(&mut self, what: &str, pred: impl Fn(&Event) -> bool) -> Event {
        let events = self
            .follow_until(what, TIMEOUT, |events| events.last().is_some_and(&pred))
            .await;
        events.last().cloned().expect("the matching event")
    }

    /// Reads events until `done` says the events read so far are enough, within `timeout`,
    /// and returns them.
    pub async fn follow_until(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&[Event]) -> bool,
    ) -> Vec<Event> {
        let mut events = Vec::new();
        let found = tokio::time::timeout(timeout, async {
            while let Some(event) = self.next().await {
                events.push(event);
                if done(&events) {
                    return true;
                }
            }
            false
        })
        .await;
        let log = self.log.as_ref().map(DaemonLog::tail).unwrap_or_default();
        match found {
            Ok(true) => events,
            Ok(false) => panic!("the event stream ended before {what}\n{log}"),
            Err(_) => panic!("timed out waiting for {what}\n{log}"),
        }
    }

    /// The connection, for reading the stream in a way of one's own.
    pub fn into_client(self) -> Client {
        self.client
    }
}

/// Every event so far, through `subscribe` without `follow`.
pub(crate) async fn replay(client: Client) -> Vec<Event> {
    client.replay(0).await.expect("replay the journal")
}
