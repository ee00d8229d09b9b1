//! The daemon's stop as the engine sees it: from the stop signal on, nothing new starts;
//! running attempts may finish within the shutdown grace period, and at its end their agents
//! are stopped.

use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Default)]
pub(super) struct Shutdown {
    /// The stop signal came: no new steps, no reloads.
    pub(super) stopping: bool,
    /// When the grace period ends, until it has.
    deadline: Option<Instant>,
}

impl Shutdown {
    /// The stop signal came at `now`: the grace period of `grace` begins.
    pub(super) fn begin(&mut self, grace: Duration, now: Instant) {
        self.stopping = true;
        self.deadline = Some(now + grace);
    }

    /// When the engine must wake to end the grace period.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether the grace period is over at `now`; true once, so the agents are stopped once.
    pub(super) fn grace_over(&mut self, now: Instant) -> bool {
        let over = self.deadline.is_some_and(|t| t <= now);
        if over {
            self.deadline = None;
        }
        over
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_period_ends_once_at_its_deadline() {
        let mut shutdown = Shutdown::default();
        let now = Instant::now();
        assert!(!shutdown.stopping && shutdown.deadline().is_none());
        assert!(!shutdown.grace_over(now), "no stop, no grace period");
        shutdown.begin(Duration::from_secs(30), now);
        assert!(shutdown.stopping);
        assert_eq!(shutdown.deadline(), Some(now + Duration::from_secs(30)));
        assert!(!shutdown.grace_over(now + Duration::from_secs(29)));
        assert!(shutdown.grace_over(now + Duration::from_secs(30)));
        assert!(!shutdown.grace_over(now + Duration::from_secs(31)), "once");
        assert!(shutdown.stopping, "still stopping after the grace period");
        assert!(shutdown.deadline().is_none());
    }
}
