//! sd_notify: telling systemd (or any manager that sets `NOTIFY_SOCKET`) how the daemon is.
//!
//! - `READY=1` once the engine answers its first [`Summary`]: the engine answers only after
//!   recovery, and the socket is bound before the engine starts, so a manager that starts a
//!   dependent unit on READY finds the daemon usable.
//! - `STATUS=…` with the summary's counts whenever the journal moves, at most once a second
//!   (a busy daemon writes many events a second; the manager needs the gist).
//! - `WATCHDOG=1` every half `WATCHDOG_USEC`, and only while the engine answers: a wedged
//!   engine stops the pings and the manager restarts the daemon.
//! - `STOPPING=1` when shutdown begins; status lines go on while running agents finish.
//!
//! Without `NOTIFY_SOCKET` nothing is sent and no task runs. Agents inherit the variable;
//! units use `NotifyAccess=main` so that only the daemon's own messages count.

use std::time::Duration;

use sd_notify::NotifyState;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::daemon::engine::{EngineHandle, Summary};

/// At most one `STATUS=` line per this long.
const STATUS_INTERVAL: Duration = Duration::from_secs(1);

/// Where notifications go, read once from the environment.
#[derive(Clone, Debug)]
pub struct Notifier {
    enabled: bool,
    /// Half of `WATCHDOG_USEC`: how often to ping.
    watchdog: Option<Duration>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and `WATCHDOG_USEC` (with `WATCHDOG_PID`, when set, naming us).
    pub fn from_env() -> Notifier {
        let enabled = std::env::var_os("NOTIFY_SOCKET").is_some_and(|s| !s.is_empty());
        Notifier {
            enabled,
            watchdog: sd_notify::watchdog_enabled()
                .filter(|d| enabled && !d.is_zero())
                .map(|d| d / 2),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Sends `states`; a failure is logged, never fatal (a manager that went away must not
    /// stop the daemon).
    pub fn send(&self, states: &[NotifyState]) {
        if !self.enabled {
            return;
        }
        if let Err(e) = sd_notify::notify(states) {
            tracing::warn!(error = %e, "cannot notify the service manager");
        }
    }

    /// Tells the manager a reload begins (`RELOADING=1` with the monotonic time systemd 253+
    /// expects); [`Notifier::reloaded`] ends it.
    pub fn reloading(&self) {
        match NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(_) => self.send(&[NotifyState::Reloading]),
        }
    }

    pub fn reloaded(&self, outcome: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(outcome)]);
    }
}

/// Runs the notifications for a daemon whose engine is `engine` until the engine stops.
pub async fn run(notifier: Notifier, engine: EngineHandle, shutdown: CancellationToken) {
    if !notifier.enabled {
        return;
    }
    // The first answer comes after recovery.
    let Some(first) = engine.summary().await else {
        return;
    };
    let mut shown = first.to_string();
    notifier.send(&[NotifyState::Ready, NotifyState::Status(&shown)]);
    tracing::debug!(status = %shown, "notified the service manager: ready");
    let mut seq = engine.seq.clone();
    let mut stopping = false;
    let mut last_status = Instant::now();
    let ping_every = notifier.watchdog;
    let mut next_ping = ping_every.map(|d| Instant::now() + d);
    loop {
        enum Wake {
            Stop,
            Changed,
            Ping,
        }
        let wake = tokio::select! {
            () = shutdown.cancelled(), if !stopping => Wake::Stop,
            changed = seq.changed() => match changed {
                Ok(()) => Wake::Changed,
                Err(_) => return,
            },
            () = sleep_until(next_ping) => Wake::Ping,
        };
        match wake {
            Wake::Stop => {
                stopping = true;
                notifier.send(&[NotifyState::Stopping]);
            }
            Wake::Changed => {
                // Coalesce a burst of events into one status line.
                let due = last_status + STATUS_INTERVAL;
                if Instant::now() < due {
                    tokio::select! {
                        () = tokio::time::sleep_until(due) => {}
                        () = shutdown.cancelled(), if !stopping => {
                            stopping = true;
                            notifier.send(&[NotifyState::Stopping]);
                        }
                    }
                }
                seq.borrow_and_update();
            }
            Wake::Ping => {}
        }
        let wait = ping_every.unwrap_or(STATUS_INTERVAL);
        let summary: Option<Summary> = match tokio::time::timeout(wait, engine.summary()).await {
            Ok(Some(s)) => Some(s),
            Ok(None) => return,
            Err(_) => {
                tracing::warn!(
                    waited_ms = wait.as_millis() as u64,
                    "the engine did not answer: no watchdog ping"
                );
                None
            }
        };
        let Some(summary) = summary else {
            next_ping = ping_every.map(|d| Instant::now() + d);
            continue;
        };
        let line = summary.to_string();
        let mut states = Vec::new();
        if matches!(wake, Wake::Ping) {
            states.push(NotifyState::Watchdog);
            next_ping = ping_every.map(|d| Instant::now() + d);
        }
        if line != shown {
            states.push(NotifyState::Status(&line));
            last_status = Instant::now();
        }
        notifier.send(&states);
        if line != shown {
            shown = line;
        }
    }
}

async fn sleep_until(when: Option<Instant>) {
    match when {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
