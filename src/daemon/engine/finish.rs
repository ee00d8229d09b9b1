//! What the engine does when an attempt ends: the router decides (see `route`), the engine
//! writes the decision as one group of events, and effects (the merge, the worktree's
//! removal) start only after that group is durable.

use crate::daemon::runner::StepDone;
use crate::domain::event::EventBody;
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Phase, Role, Status, StepMeta};
use crate::domain::router::Outcome;

use super::error::EngineError;
use super::route::{block_events, Attempt, PauseOrder, Routed};
use super::{Engine, Now};
use crate::domain::unavailable::PauseScope;

impl Engine {
    pub(super) fn step_done(&mut self, done: &StepDone) -> Result<(), EngineError> {
        let model = self.dispatch.ended(&done.step, done.attempt);
        let state = self.store.state();
        let (Some(step), Some(work)) = (
            state.get(done.step.as_str()).cloned(),
            state.get(done.work.as_str()).cloned(),
        ) else {
            tracing::error!(step = %done.step, "a step finished that the store does not know");
            return Ok(());
        };
        let Some(meta) = step.step_meta() else {
            return Ok(());
        };
        // Only the attempt the journal says is running may end: an attempt whose end is
        // already recorded (handled again after a failed write) is not recorded twice.
        if !matches!(meta.phase, Some(Phase::Running { attempt, .. }) if attempt == done.attempt) {
            tracing::debug!(step = %done.step, attempt = done.attempt, "the attempt's end is already recorded");
            return self.over_budget(&done.work);
        }
        // The hooks' last decisions, then the attempt's end, in one group.
        let mut finished = tool_events(done);
        finished.push(finished_event(done));
        if let Some(reason) = self.cancelling.get(&done.work).cloned() {
            if self.dispatch.busy(&done.work) {
                // Steps that ran beside it are still stopping; the last one cancels the bead.
                return self.record(finished).map(drop);
            }
            self.finish_cancel(&work, reason, finished)?;
            self.cancelling.remove(&done.work);
            return Ok(());
        }
        let Some(outcome) = &done.outcome else {
            // Interrupted (by shutdown, a lost lease, a worker that could not prepare it): not
            // an attempt. It runs again from its starting commit.
            let mut events = tool_events(done);
            events.extend(interrupted_events(done));
            if let Some(text) = &done.comment {
                events.push(self.comment(&work, text.clone()));
            }
            self.record(events)?;
            return Ok(());
        };
        if !matches!(outcome, Outcome::UsageLimit { .. }) {
            if let Some(model) = &model {
                self.dispatch.model_went_through(model);
            }
        }
        match outcome {
            Outcome::Unavailable { cause, .. } if cause.scope() == PauseScope::All => {}
            Outcome::Unavailable { .. } => self.holds.backoff.went_through(&PauseScope::All),
            _ => {
                self.holds.backoff.went_through(&PauseScope::All);
                if model.is_some() {
                    self.holds.backoff.went_through(&PauseScope::Agent);
                }
            }
        }
        if step.status != Status::InProgress || work.status != Status::InProgress {
            // A person closed, reopened or blocked it meanwhile: record the attempt only.
            self.record(finished)?;
            return Ok(());
        }
        let now = Now::read();
        let attempt = Attempt {
            work: &work,
            step: &step,
            meta: &meta,
            number: done.attempt,
            outcome,
            answer: done.answer,
        };
        let mut routed = self.routed(&attempt, now.wall);
        let at = finished.len();
        routed.events.splice(0..0, finished);
        if let Some(text) = &done.comment {
            let comment = super::route::comment_at(&work, text.clone(), now.wall);
            routed.events.insert(at, comment);
        }
        self.apply_routed(&work.id, routed, now)?;
        self.over_budget(&work.id)
    }

    /// The router's decision for an outcome, as events, for a request that adds its own
    /// events before recording them; a model pause it asks for starts at once.
    pub(super) fn route(
        &mut self,
        work: &Bead,
        step: &Bead,
        meta: &StepMeta,
        attempt: u32,
        outcome: &Outcome,
    ) -> Vec<EventBody> {
        let now = Now::read();
        let at = Attempt {
            work,
            step,
            meta,
            number: attempt,
            outcome,
            answer: None,
        };
        let routed = self.routed(&at, now.wall);
        if let Some(pause) = routed.pause {
            self.start_pause(pause, now);
        }
        routed.events
    }

    /// Writes a routed decision, then starts the model pause it asks for.
    pub(super) fn apply_routed(
        &mut self,
        work: &BeadId,
        routed: Routed,
        now: Now,
    ) -> Result<(), EngineError> {
        self.apply_decision(work, routed.events)?;
        if let Some(pause) = routed.pause {
            self.start_pause(pause, now);
        }
        Ok(())
    }

    fn start_pause(&mut self, pause: PauseOrder, now: Now) {
        match pause {
            PauseOrder::Model {
                model,
                reason,
                secs,
                until,
            } => {
                self.dispatch
                    .pause_model(model, reason, secs, until, now.mono);
            }
            PauseOrder::Dispatch {
                cause,
                reason,
                secs,
                until,
            } => self.holds.start(cause, reason, secs, until),
        }
    }

    /// Writes a decision's events and keeps the engine's indexes in step with them.
    pub(super) fn apply_decision(
        &mut self,
        work: &BeadId,
        events: Vec<EventBody>,
    ) -> Result<(), EngineError> {
        self.record(events)?;
        let status = self
            .store
            .state()
            .get(work.as_str())
            .map(|b| b.status.clone());
        match status {
            Some(Status::InProgress) => {}
            Some(Status::Closed) => {
                self.active.remove(work);
                if self.merged(work) {
                    self.start_removal(work);
                }
            }
            _ => {
                self.active.remove(work);
            }
        }
        Ok(())
    }

    /// Whether the bead's merge step (if it has one) completed: only then may its branch go.
    fn merged(&self, work: &BeadId) -> bool {
        self.store.state().steps(work.as_str()).any(|s| {
            s.status == Status::Closed && s.step_meta().is_some_and(|m| m.role == Role::Merge)
        })
    }

    pub(super) fn block_bead(
        &mut self,
        work: &BeadId,
        step: Option<&BeadId>,
        reason: &str,
    ) -> Result<(), EngineError> {
        let Some(bead) = self.store.state().get(work.as_str()).cloned() else {
            return Ok(());
        };
        let events = block_events(&bead, step, reason, crate::daemon::clock::now());
        self.apply_decision(work, events)
    }

    /// Blocks a bead whose agents have spent more than the budget.
    fn over_budget(&mut self, work: &BeadId) -> Result<(), EngineError> {
        self.spending_limit_reached()?;
        let Some(budget) = self.loaded.config.budget() else {
            return Ok(());
        };
        let Some(bead) = self.store.state().get(work.as_str()) else {
            return Ok(());
        };
        let spent = crate::domain::state::spent(bead);
        if spent > budget && bead.status == Status::InProgress {
            let reason = format!("over budget: agents spent ${spent:.2} of ${budget:.2}");
            return self.block_bead(work, None, &reason);
        }
        Ok(())
    }

    /// Records `budget.reached` the first time spending reaches the day's or the total's limit
    /// (once for each stop): from then on no agent attempt starts (see
    /// [`Engine::budget_stop`]).
    fn spending_limit_reached(&mut self) -> Result<(), EngineError> {
        let Some(stop) = self.budget_stop() else {
            return Ok(());
        };
        let said = (stop.scope, stop.until);
        if !self.holds.budget_news(said) {
            return Ok(());
        }
        tracing::warn!(help = stop.help(), "{}", stop.reason());
        self.record(vec![EventBody::BudgetReached {
            scope: stop.scope,
            spent_usd: stop.spent_usd,
            budget_usd: stop.budget_usd,
            until: stop.until,
        }])?;
        self.holds.budget_journaled(said);
        Ok(())
    }

    /// The spending limit that holds agent attempts back now, if any.
    pub(super) fn budget_stop(&self) -> Option<crate::domain::budget::BudgetStop> {
        let now = crate::daemon::clock::now();
        let limits = self.loaded.config.spending_limits();
        crate::domain::budget::stop(&limits, self.store.state().spending(), &now)
    }

    /// Closes a cancelled bead once its agent has stopped, and removes its worktree.
    pub(super) fn finish_cancel(
        &mut self,
        work: &Bead,
        reason: Option<String>,
        mut events: Vec<EventBody>,
    ) -> Result<(), EngineError> {
        let reason = format!(
            "{}{}",
            crate::domain::model::CANCELLED,
            reason.map(|r| format!(": {r}")).unwrap_or_default()
        );
        events.push(EventBody::BeadStatus {
            id: work.id.clone(),
            status: Status::Closed,
            reason: Some(reason),
        });
        self.record(events)?;
        self.active.remove(&work.id);
        self.start_removal(&work.id);
        Ok(())
    }
}

/// The decisions the attempt's hooks made on their own that were not recorded yet.
fn tool_events(done: &StepDone) -> Vec<EventBody> {
    done.tool_records
        .iter()
        .map(|r| super::tool_calls::agent_tool(&done.work, &done.step, r.clone()))
        .collect()
}

fn finished_event(done: &StepDone) -> EventBody {
    EventBody::StepFinished {
        bead: done.work.clone(),
        step: done.step.clone(),
        attempt: done.attempt,
        exit: done.exit.clone(),
        duration_ms: done.duration_ms,
        cost_usd: done.cost_usd,
        commit: done.commit.as_ref().map(|c| c.to_string()),
    }
}

/// An attempt stopped by a shutdown: not counted, and the step is open again.
fn interrupted_events(done: &StepDone) -> Vec<EventBody> {
    vec![
        EventBody::StepInterrupted {
            bead: done.work.clone(),
            step: done.step.clone(),
            attempt: done.attempt,
            reset_to: done.base.as_ref().map(|c| c.to_string()),
        },
        EventBody::BeadStatus {
            id: done.step.clone(),
            status: Status::Open,
            reason: None,
        },
    ]
}
