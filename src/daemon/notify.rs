//! Posting notices to webhooks (`[[webhooks]]`, docs/notifications.md).
//!
//! One task per webhook follows the journal's published events from where that webhook was
//! left (the state's `notified`, or the end of the journal for a new one), posts each notice
//! it takes in order, tries again after a doubling wait, and tells the engine how it went; the
//! engine records `notify.sent` or `notify.failed`. A webhook that is down delays only its own
//! notices, and gives each up after its tries: nothing else waits for it. A notice posted just
//! before the daemon stopped, and not yet recorded, is posted again after the restart; the
//! body's `seq` lets a receiver see that it has it.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::daemon::follow::{Filter, Follower, Journal};
use crate::domain::config::webhook::Webhook;
use crate::domain::event::Event;
use crate::domain::notify::{self, NoticeKind};

/// How long one post may take.
const POST_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait between two tries.
const MAX_WAIT: Duration = Duration::from_secs(600);

/// How a notice went, for the engine to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    pub hook: String,
    /// The seq of the event the notice is of.
    pub event: u64,
    pub kind: NoticeKind,
    pub tries: u32,
    /// The last try's error, when every try failed.
    pub error: Option<String>,
}

/// The webhooks' posters, started again as a whole when the webhooks change.
pub struct Notifier<T> {
    journal: Journal,
    /// The name bodies give.
    workspace: String,
    tx: mpsc::Sender<T>,
    /// The daemon's stop.
    stop: CancellationToken,
    /// The running posters' stop: a child of the daemon's.
    running: CancellationToken,
}

impl<T: From<Delivered> + Send + 'static> Notifier<T> {
    pub fn new(
        journal: Journal,
        workspace: String,
        tx: mpsc::Sender<T>,
        stop: CancellationToken,
    ) -> Notifier<T> {
        Notifier {
            journal,
            workspace,
            running: stop.child_token(),
            tx,
            stop,
        }
    }

    /// Stops the posters running and starts one per webhook of `hooks`, each where it was
    /// left (`notified`), or, without a record there, at `seq`, the journal's end. A notice a
    /// stopped poster posted but nobody recorded yet is posted again; its `seq` says so.
    pub fn start(&mut self, hooks: &[Webhook], notified: &BTreeMap<String, u64>, seq: u64) {
        self.running.cancel();
        self.running = self.stop.child_token();
        start(
            hooks,
            notified,
            seq,
            &self.journal,
            &self.workspace,
            self.tx.clone(),
            self.running.clone(),
        );
    }
}

/// Starts a task per webhook. `notified` is where each was left, `seq` the journal's end
/// (where a webhook without a record starts), `workspace` the name bodies give.
fn start<T: From<Delivered> + Send + 'static>(
    hooks: &[Webhook],
    notified: &BTreeMap<String, u64>,
    seq: u64,
    journal: &Journal,
    workspace: &str,
    tx: mpsc::Sender<T>,
    stop: CancellationToken,
) {
    if hooks.is_empty() {
        return;
    }
    let client = match reqwest::Client::builder()
        .timeout(POST_TIMEOUT)
        .user_agent(concat!("catalyst/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "cannot make the webhooks' HTTP client: no notice is posted");
            return;
        }
    };
    for hook in hooks {
        let since = notified.get(&hook.name).copied().unwrap_or(seq);
        tracing::info!(webhook = %hook.name, since, "posting notices");
        let poster = Poster {
            hook: hook.clone(),
            client: client.clone(),
            workspace: workspace.to_owned(),
            tx: tx.clone(),
            stop: stop.clone(),
        };
        tokio::spawn(poster.run(Follower::new(
            journal.clone(),
            since,
            Filter {
                bead: None,
                types: Some(notify::SOURCE_TYPES.map(str::to_owned).to_vec()),
            },
        )));
    }
}

/// One webhook's task.
struct Poster<T> {
    hook: Webhook,
    client: reqwest::Client,
    workspace: String,
    tx: mpsc::Sender<T>,
    stop: CancellationToken,
}

impl<T: From<Delivered>> Poster<T> {
    async fn run(self, mut follower: Follower) {
        loop {
            let lines = tokio::select! {
                lines = follower.read() => lines,
                () = self.stop.cancelled() => return,
            };
            let lines = match lines {
                Ok(lines) => lines,
                Err(e) => {
                    tracing::warn!(webhook = %self.hook.name, error = %e, "cannot read the journal; trying again in a second");
                    if self.pause(Duration::from_secs(1)).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            if lines.is_empty() {
                tokio::select! {
                    alive = follower.changed() => if !alive { return },
                    () = self.stop.cancelled() => return,
                }
                continue;
            }
            for (_, line) in lines {
                let event: Event = match serde_json::from_str(&line) {
                    Ok(event) => event,
                    Err(e) => {
                        tracing::warn!(webhook = %self.hook.name, error = %e, "a journal line that is no event; skipped");
                        continue;
                    }
                };
                let Some(notice) = notify::notice(&event) else {
                    continue;
                };
                if !self.hook.notices.contains(&notice.kind) {
                    continue;
                }
                let body = notify::body(&notice, &event, self.hook.format, &self.workspace);
                let Ok((tries, result)) = self.post(&body).await else {
                    return;
                };
                let delivered = Delivered {
                    hook: self.hook.name.clone(),
                    event: notice.seq,
                    kind: notice.kind,
                    tries,
                    error: result.err(),
                };
                if self.tx.send(T::from(delivered)).await.is_err() {
                    return;
                }
            }
        }
    }

    /// Posts `body` until the webhook takes it or the tries run out: the tries made, and the
    /// last error if none went through. `Err` when the daemon stops meanwhile.
    async fn post(&self, body: &serde_json::Value) -> Result<(u32, Result<(), String>), ()> {
        let mut wait = Duration::from_secs(self.hook.retry_secs);
        let mut tries = 0;
        loop {
            tries += 1;
            let error = match self.client.post(&self.hook.url).json(body).send().await {
                Ok(response) if response.status().is_success() => return Ok((tries, Ok(()))),
                Ok(response) => format!("the webhook answered {}", response.status()),
                // Without the URL, which may be the webhook's secret.
                Err(e) => e.without_url().to_string(),
            };
            if tries >= self.hook.tries {
                return Ok((tries, Err(error)));
            }
            tracing::warn!(webhook = %self.hook.name, tries, error, "a notice was not taken; trying again in {}s", wait.as_secs());
            self.pause(wait).await?;
            wait = (wait * 2).min(MAX_WAIT);
        }
    }

    /// Waits `wait`; `Err` when the daemon stops first.
    async fn pause(&self, wait: Duration) -> Result<(), ()> {
        tokio::select! {
            () = tokio::time::sleep(wait) => Ok(()),
            () = self.stop.cancelled() => Err(()),
        }
    }
}
