//! What the engine knows of the attempts it dispatched and what holds new ones back: the
//! attempts running, a person's pause, the models paused after a usage limit (with the pause
//! lengths that double while a model keeps hitting it), and when the earliest step passed over
//! for its retry delay may start. The engine decides what to start; this is the bookkeeping
//! those decisions read and change, kept apart so it can be tested without an engine.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::holds::Backoff;
use crate::domain::id::BeadId;
use crate::domain::time::Timestamp;

/// A step attempt that is running. A bead runs one step at a time in its worktree, or several
/// at once, each in a worktree of its own (see `Engine::dispatch_ready_steps`).
#[derive(Debug)]
pub(super) struct Running {
    pub(super) work: BeadId,
    pub(super) step: BeadId,
    /// Whether it runs in a worktree of its own beside the bead's (`side`), not in the bead's.
    pub(super) side: bool,
    pub(super) attempt: u32,
    /// The model, for agent steps (gates count against no model).
    pub(super) model: Option<String>,
    pub(super) started: Instant,
    pub(super) cancel: CancellationToken,
    /// Whether the `Stop` hook has sent this attempt's agent back once already.
    pub(super) stop_blocked: bool,
    /// Sent to the workers on other machines (`[cluster]`).
    pub(super) remote: bool,
    /// The worker on another machine running it, once one took it (`[cluster]`).
    pub(super) worker: Option<String>,
    /// For an agent attempt of this daemon's: set once its agent has an agent slot (it may
    /// have been dispatched ahead of its turn and wait for one).
    pub(super) in_slot: Option<Arc<AtomicBool>>,
}

/// A model that reported a usage limit (or a person paused).
#[derive(Debug, Clone)]
pub(super) struct Pause {
    pub(super) until: Instant,
    /// `None` when a person paused it.
    pub(super) until_wall: Option<Timestamp>,
    pub(super) reason: String,
}

#[derive(Debug, Default)]
pub(super) struct Dispatch {
    /// By step.
    pub(super) running: HashMap<BeadId, Running>,
    /// A person paused all dispatching.
    pub(super) paused: bool,
    pub(super) paused_models: HashMap<String, Pause>,
    /// The pause length last used per model, kept after the pause ends so that a model that
    /// hits its limit again soon after waits twice as long; forgotten after a run of the model
    /// that did not hit it.
    model_backoff: Backoff<String>,
    /// The earliest `not_before` of a ready step that dispatch passed over (see
    /// [`Dispatch::next_retry`]); found again by each dispatch pass.
    retry_wake: Option<Timestamp>,
}

impl Dispatch {
    /// The attempts running for `work`.
    pub(super) fn running_of<'a>(
        &'a self,
        work: &'a BeadId,
    ) -> impl Iterator<Item = &'a Running> + 'a {
        self.running.values().filter(move |r| &r.work == work)
    }

    /// Whether anything runs for `work`.
    pub(super) fn busy(&self, work: &BeadId) -> bool {
        self.running_of(work).next().is_some()
    }

    /// Agent attempts running, over every model (gates take no agent).
    pub(super) fn agents_running(&self) -> usize {
        self.running.values().filter(|r| r.model.is_some()).count()
    }

    /// Attempts of `model` running.
    pub(super) fn running_with(&self, model: &str) -> usize {
        self.running
            .values()
            .filter(|r| r.model.as_deref() == Some(model))
            .count()
    }

    /// Takes the attempt that ended out of the running ones, unless the running attempt of
    /// `step` is another (a later one, started after the end was sent). Returns its model.
    pub(super) fn ended(&mut self, step: &BeadId, attempt: u32) -> Option<String> {
        if self.running.get(step).is_some_and(|r| r.attempt == attempt) {
            self.running.remove(step).and_then(|r| r.model)
        } else {
            None
        }
    }

    pub(super) fn model_paused(&self, model: &str) -> bool {
        self.paused_models.contains_key(model)
    }

    /// The next usage-limit pause's length for `model`: `first`, or twice the last one, at
    /// most `max`.
    pub(super) fn model_pause_secs(&self, model: &String, first: u64, max: u64) -> u64 {
        self.model_backoff.next(model, first, max)
    }

    /// Pauses `model` for `secs` from `now`, until `until` on the wall clock.
    pub(super) fn pause_model(
        &mut self,
        model: String,
        reason: String,
        secs: u64,
        until: Timestamp,
        now: Instant,
    ) {
        self.model_backoff.started(model.clone(), secs);
        self.paused_models.insert(
            model,
            Pause {
                until: now + Duration::from_secs(secs),
                until_wall: Some(until),
                reason,
            },
        );
    }

    /// A run of `model` went through without hitting its limit: its next pause starts from the
    /// shortest length again.
    pub(super) fn model_went_through(&mut self, model: &String) {
        self.model_backoff.went_through(model);
    }

    /// Ends the model pauses whose time is up.
    pub(super) fn expire(&mut self, now: Instant) {
        self.paused_models.retain(|_, p| p.until > now);
    }

    /// When the first model pause ends.
    pub(super) fn earliest_pause(&self) -> Option<Instant> {
        self.paused_models.values().map(|p| p.until).min()
    }

    /// A dispatch pass begins: it finds the steps waiting for their retry delay again.
    pub(super) fn pass_begins(&mut self) {
        self.retry_wake = None;
    }

    /// A ready step was passed over until `at`, its retry delay.
    pub(super) fn passed_over(&mut self, at: Timestamp) {
        self.retry_wake = Some(self.retry_wake.map_or(at, |w| w.min(at)));
    }

    /// When the earliest step passed over may start, if that is after `now`: one already due
    /// waits for the next dispatch pass, not for a timer.
    pub(super) fn next_retry(&self, now: Timestamp) -> Option<Timestamp> {
        self.retry_wake.filter(|at| *at > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(work: &str, step: &str, attempt: u32, model: Option<&str>) -> Running {
        Running {
            work: BeadId::new(work).expect("id"),
            step: BeadId::new(step).expect("id"),
            side: false,
            attempt,
            model: model.map(str::to_owned),
            started: Instant::now(),
            cancel: CancellationToken::new(),
            stop_blocked: false,
            remote: false,
            worker: None,
            in_slot: None,
        }
    }

    fn start(dispatch: &mut Dispatch, run: Running) {
        dispatch.running.insert(run.step.clone(), run);
    }

    #[test]
    fn attempts_are_counted_by_bead_by_model_and_as_agents() {
        let mut dispatch = Dispatch::default();
        start(&mut dispatch, running("cat-1", "cat-1.a", 1, Some("opus")));
        start(
            &mut dispatch,
            running("cat-1", "cat-1.b", 1, Some("sonnet")),
        );
        start(&mut dispatch, running("cat-2", "cat-2.gate", 1, None));
        let one = BeadId::new("cat-1").expect("id");
        let three = BeadId::new("cat-3").expect("id");
        assert_eq!(dispatch.running_of(&one).count(), 2);
        assert!(dispatch.busy(&one) && !dispatch.busy(&three));
        assert_eq!(dispatch.agents_running(), 2, "a gate runs no agent");
        assert_eq!(dispatch.running_with("opus"), 1);
        assert_eq!(dispatch.running_with("haiku"), 0);
    }

    #[test]
    fn only_the_attempt_running_ends() {
        let mut dispatch = Dispatch::default();
        start(&mut dispatch, running("cat-1", "cat-1.a", 2, Some("opus")));
        let step = BeadId::new("cat-1.a").expect("id");
        assert_eq!(
            dispatch.ended(&step, 1),
            None,
            "an earlier attempt's late end"
        );
        assert!(dispatch.running.contains_key(&step));
        assert_eq!(dispatch.ended(&step, 2).as_deref(), Some("opus"));
        assert!(dispatch.running.is_empty());
        assert_eq!(dispatch.ended(&step, 2), None, "ended once");
    }

    #[test]
    fn a_model_that_keeps_hitting_its_limit_waits_twice_as_long_each_time() {
        let mut dispatch = Dispatch::default();
        let (opus, now) = ("opus".to_owned(), Instant::now());
        let wall = crate::daemon::clock::now();
        assert_eq!(dispatch.model_pause_secs(&opus, 60, 200), 60);
        dispatch.pause_model(opus.clone(), "limit".into(), 60, wall.after_secs(60), now);
        assert!(dispatch.model_paused("opus") && !dispatch.model_paused("sonnet"));
        assert_eq!(
            dispatch.earliest_pause(),
            Some(now + Duration::from_secs(60))
        );
        assert_eq!(dispatch.model_pause_secs(&opus, 60, 200), 120);
        dispatch.expire(now + Duration::from_secs(61));
        assert!(!dispatch.model_paused("opus"), "over once its time is up");
        assert_eq!(
            dispatch.model_pause_secs(&opus, 60, 200),
            120,
            "the length is kept after the pause ends"
        );
        dispatch.model_went_through(&opus);
        assert_eq!(dispatch.model_pause_secs(&opus, 60, 200), 60);
    }

    #[test]
    fn the_retry_timer_is_the_earliest_step_passed_over_and_still_ahead() {
        let mut dispatch = Dispatch::default();
        let now = crate::daemon::clock::now();
        assert_eq!(dispatch.next_retry(now), None);
        dispatch.passed_over(now.after_secs(30));
        dispatch.passed_over(now.after_secs(10));
        dispatch.passed_over(now.after_secs(20));
        assert_eq!(dispatch.next_retry(now), Some(now.after_secs(10)));
        assert_eq!(
            dispatch.next_retry(now.after_secs(10)),
            None,
            "one due now waits for the next pass"
        );
        dispatch.pass_begins();
        assert_eq!(dispatch.next_retry(now), None);
    }
}
