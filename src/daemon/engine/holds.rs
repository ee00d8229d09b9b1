//! Dispatching held back by a failure no retry of a step can fix (see
//! [`crate::domain::agent::unavailable`]): the agent's steps after a refused key, an unreachable
//! API or an agent that cannot run; every step after the daemon could not prepare one. A hold
//! lasts `pause_secs`, doubling while the same scope fails again without a run going through
//! in between (capped at `max_pause_secs`), or until a person's `resume`.
//!
//! A spending limit reached holds agent attempts back too; it is worked out from the journal
//! each time (see `Engine::budget_stop`), and what is kept here is only which stop was
//! journaled, so that `budget.reached` is written once for each.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::domain::budget::BudgetScope;
use crate::domain::time::Timestamp;
use crate::domain::unavailable::{PauseScope, Unavailable};

/// A spending stop: its limit and when it ends (`None`: not before a person raises it).
pub(super) type BudgetStopKey = (BudgetScope, Option<Timestamp>);

/// One scope held back.
#[derive(Clone, Debug)]
pub(super) struct Hold {
    pub(super) cause: Unavailable,
    pub(super) reason: String,
    pub(super) until: Instant,
    pub(super) until_wall: Timestamp,
}

/// The first and the longest dispatch pause after the daemon could not prepare a step because
/// a disk is full, in seconds: the storage retry's own waits, which is how the daemon waits
/// for room when the journal is what cannot be written. Nothing says when room comes back (a
/// person deleting files, a clean-up), and each try spends no attempt.
pub(super) const DISK_FULL_PAUSE: (u64, u64) = (
    super::storage::STORAGE_RETRY_FIRST.as_secs(),
    super::storage::STORAGE_RETRY_MAX.as_secs(),
);

/// The first and the longest pause for `cause` given its `reason`: the config's, but
/// [`DISK_FULL_PAUSE`] for a preparation that found a disk full.
pub(super) fn pause_range(cause: Unavailable, reason: &str, first: u64, max: u64) -> (u64, u64) {
    if cause == Unavailable::Preparation && crate::domain::unavailable::disk_full(reason) {
        DISK_FULL_PAUSE
    } else {
        (first, max)
    }
}

/// Pause lengths that double while the same thing keeps failing: the length last used per key
/// is kept after its pause ends, and forgotten once a run of that key goes through.
#[derive(Debug)]
pub(super) struct Backoff<K> {
    last: HashMap<K, u64>,
}

impl<K> Default for Backoff<K> {
    fn default() -> Self {
        Backoff {
            last: HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq> Backoff<K> {
    /// The next pause's length for `key`: `first`, or twice the last one, at most `max`.
    pub(super) fn next(&self, key: &K, first: u64, max: u64) -> u64 {
        match self.last.get(key) {
            Some(last) => last.saturating_mul(2).min(max),
            None => first,
        }
    }

    pub(super) fn started(&mut self, key: K, secs: u64) {
        self.last.insert(key, secs);
    }

    /// A run of `key` went through: its next pause starts from the shortest length again.
    pub(super) fn went_through(&mut self, key: &K) {
        self.last.remove(key);
    }
}

#[derive(Debug, Default)]
pub(super) struct Holds {
    active: BTreeMap<PauseScope, Hold>,
    pub(super) backoff: Backoff<PauseScope>,
    /// The spending stop last journaled as reached.
    budget_said: Option<BudgetStopKey>,
}

impl Holds {
    /// Holds `cause`'s scope back for `secs`, until `until_wall`.
    pub(super) fn start(
        &mut self,
        cause: Unavailable,
        reason: String,
        secs: u64,
        until_wall: Timestamp,
    ) {
        let scope = cause.scope();
        self.backoff.started(scope, secs);
        let hold = Hold {
            cause,
            reason,
            until: Instant::now() + Duration::from_secs(secs),
            until_wall,
        };
        tracing::warn!(
            %scope,
            %cause,
            reason = %hold.reason,
            secs,
            help = cause.help(),
            "dispatching paused"
        );
        self.active.insert(scope, hold);
    }

    /// Whether steps of `scope` may not start now (a hold of every step holds agents too).
    pub(super) fn holds(&self, scope: PauseScope) -> bool {
        self.active.contains_key(&PauseScope::All)
            || (scope == PauseScope::Agent && self.active.contains_key(&PauseScope::Agent))
    }

    pub(super) fn earliest(&self) -> Option<Instant> {
        self.active.values().map(|h| h.until).min()
    }

    /// Ends the holds whose time is up.
    pub(super) fn expire(&mut self, now: Instant) {
        self.active.retain(|scope, h| {
            let keep = h.until > now;
            if !keep {
                tracing::info!(%scope, cause = %h.cause, "dispatching resumes: the pause is over");
            }
            keep
        });
    }

    /// Ends every hold (a person's `resume`), or those `keep` rejects.
    pub(super) fn release(&mut self, keep: impl Fn(&Hold) -> bool) {
        self.active.retain(|scope, h| {
            let kept = keep(h);
            if !kept {
                tracing::info!(%scope, cause = %h.cause, "dispatching resumes");
            }
            kept
        });
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (PauseScope, &Hold)> {
        self.active.iter().map(|(s, h)| (*s, h))
    }

    /// Whether `stop` still has to be journaled: it is not the one last journaled (a stop
    /// that ended and came back, or a day's stop on the next day, is said again).
    pub(super) fn budget_news(&self, stop: BudgetStopKey) -> bool {
        self.budget_said != Some(stop)
    }

    /// `stop` is in the journal now.
    pub(super) fn budget_journaled(&mut self, stop: BudgetStopKey) {
        self.budget_said = Some(stop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_back_off_until_a_run_goes_through() {
        let mut holds = Holds::default();
        let now = crate::daemon::clock::now();
        assert_eq!(holds.backoff.next(&PauseScope::Agent, 60, 200), 60);
        holds.start(Unavailable::Auth, "401".into(), 60, now.after_secs(60));
        assert_eq!(holds.backoff.next(&PauseScope::Agent, 60, 200), 120);
        holds.start(Unavailable::Auth, "401".into(), 120, now.after_secs(120));
        assert_eq!(holds.backoff.next(&PauseScope::Agent, 60, 200), 200);
        assert_eq!(
            holds.backoff.next(&PauseScope::All, 60, 200),
            60,
            "each scope backs off on its own"
        );
        holds.backoff.went_through(&PauseScope::Agent);
        assert_eq!(holds.backoff.next(&PauseScope::Agent, 60, 200), 60);
    }

    #[test]
    fn a_hold_of_every_step_holds_agents_and_an_agent_hold_only_agents() {
        let mut holds = Holds::default();
        let now = crate::daemon::clock::now();
        holds.start(
            Unavailable::Connection,
            "refused".into(),
            60,
            now.after_secs(60),
        );
        assert!(holds.holds(PauseScope::Agent));
        assert!(!holds.holds(PauseScope::All));
        holds.release(|_| false);
        assert!(!holds.holds(PauseScope::Agent));
        holds.start(
            Unavailable::Preparation,
            "no branch".into(),
            60,
            now.after_secs(60),
        );
        assert!(holds.holds(PauseScope::Agent) && holds.holds(PauseScope::All));
        holds.expire(Instant::now() + Duration::from_secs(61));
        assert!(!holds.holds(PauseScope::All), "over once its time is up");
    }

    #[test]
    fn a_spending_stop_is_news_once_until_another_stop_comes() {
        let mut holds = Holds::default();
        let today = crate::daemon::clock::now();
        let daily = (BudgetScope::Daily, Some(today.after_secs(3600)));
        assert!(holds.budget_news(daily));
        assert!(holds.budget_news(daily), "news until it is journaled");
        holds.budget_journaled(daily);
        assert!(!holds.budget_news(daily));
        let tomorrow = (BudgetScope::Daily, Some(today.after_secs(90_000)));
        assert!(holds.budget_news(tomorrow), "the next day's stop");
        assert!(holds.budget_news((BudgetScope::Total, None)));
    }

    #[test]
    fn a_full_disk_pauses_dispatching_for_seconds_not_minutes() {
        let full = "cannot prepare the worktree: failed to write out file: No space left on device";
        let (first, max) = pause_range(Unavailable::Preparation, full, 60, 3600);
        assert_eq!((first, max), DISK_FULL_PAUSE);
        let mut backoff = Backoff::default();
        let mut pauses = Vec::new();
        // Even after a long pause of another cause, the next is at most the short maximum.
        backoff.started(PauseScope::All, 60);
        for _ in 0..3 {
            let secs = backoff.next(&PauseScope::All, first, max);
            backoff.started(PauseScope::All, secs);
            pauses.push(secs);
        }
        assert_eq!(pauses, [15, 15, 15]);
        backoff.went_through(&PauseScope::All);
        assert_eq!(backoff.next(&PauseScope::All, first, max), 1);
        assert_eq!(
            pause_range(Unavailable::Preparation, "no branch `main`", 60, 3600),
            (60, 3600)
        );
        assert_eq!(
            pause_range(Unavailable::Connection, full, 60, 3600),
            (60, 3600),
            "only the daemon's own preparation"
        );
    }
}
