//! The daemon's own git work as the engine tracks it: one merge into the target at a time
//! (over the beads it picks among), the worktree removals under way, and when to try merging
//! again after a dirty target, a held lock or a merge that could not start. The engine
//! decides and runs the git work (see `merge.rs`); this is what those decisions read.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use crate::domain::id::BeadId;

#[derive(Debug, Default)]
pub(super) struct Merges {
    /// Beads among which the merge in flight picked one (merges run one at a time).
    merging: HashSet<BeadId>,
    removing: HashSet<BeadId>,
    /// When to try merging again.
    retry: Option<Instant>,
}

impl Merges {
    /// Whether a merge may start: none runs, and none waits for its retry.
    pub(super) fn may_start(&self) -> bool {
        self.merging.is_empty() && self.retry.is_none()
    }

    /// A merge started, picking among `beads`.
    pub(super) fn started(&mut self, beads: impl IntoIterator<Item = BeadId>) {
        self.merging = beads.into_iter().collect();
    }

    /// The merge in flight ended.
    pub(super) fn ended(&mut self) {
        self.merging.clear();
    }

    /// Whether the merge in flight may merge `work` (its steps wait until it is done).
    pub(super) fn merging(&self, work: &BeadId) -> bool {
        self.merging.contains(work)
    }

    /// Whether no merge runs.
    pub(super) fn idle(&self) -> bool {
        self.merging.is_empty()
    }

    /// Merges wait `wait` from `now` before the next one is tried.
    pub(super) fn retry_in(&mut self, now: Instant, wait: Duration) {
        self.retry = Some(now + wait);
    }

    /// When the engine must wake to try merging again.
    pub(super) fn retry_at(&self) -> Option<Instant> {
        self.retry
    }

    /// Ends the wait if its time is up at `now`.
    pub(super) fn expire(&mut self, now: Instant) {
        if self.retry.is_some_and(|t| t <= now) {
            self.retry = None;
        }
    }

    /// Whether `work`'s removal is to start now: false when one is under way already.
    pub(super) fn removal_starts(&mut self, work: &BeadId) -> bool {
        self.removing.insert(work.clone())
    }

    /// `work`'s removal ended, however it went.
    pub(super) fn removal_ended(&mut self, work: &BeadId) {
        self.removing.remove(work);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_merge_at_a_time_and_none_while_waiting_to_retry() {
        let mut merges = Merges::default();
        let (one, two) = (
            BeadId::new("cat-1").expect("id"),
            BeadId::new("cat-2").expect("id"),
        );
        assert!(merges.may_start() && merges.idle());
        merges.started([one.clone()]);
        assert!(!merges.may_start() && !merges.idle());
        assert!(merges.merging(&one) && !merges.merging(&two));
        merges.ended();
        let now = Instant::now();
        merges.retry_in(now, Duration::from_secs(5));
        assert!(merges.idle() && !merges.may_start(), "waiting to retry");
        assert_eq!(merges.retry_at(), Some(now + Duration::from_secs(5)));
        merges.expire(now + Duration::from_secs(4));
        assert!(!merges.may_start());
        merges.expire(now + Duration::from_secs(5));
        assert!(merges.may_start() && merges.retry_at().is_none());
    }

    #[test]
    fn a_removal_under_way_is_not_started_twice() {
        let mut merges = Merges::default();
        let one = BeadId::new("cat-1").expect("id");
        assert!(merges.removal_starts(&one));
        assert!(!merges.removal_starts(&one));
        merges.removal_ended(&one);
        assert!(merges.removal_starts(&one), "again once the first ended");
    }
}
