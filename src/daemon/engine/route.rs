//! From an attempt's outcome to events: the router decides, and this turns its decision into
//! one group of events, computed from the state and the time passed in. Nothing here changes
//! the engine; the caller records the events and then applies what they imply.

use crate::domain::event::EventBody;
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Comment, CommentId, Phase, Role, Status, StepMeta};
use crate::domain::router::{self, BlockCause, Decision, FixSource, Outcome};
use crate::domain::time::Timestamp;
use crate::domain::unavailable::Unavailable;

use super::Engine;

/// The author of the daemon's comments.
pub const DAEMON: &str = "catalyst";

pub(crate) use crate::domain::notify::BLOCKED_COMMENT;

/// A decision as events, and the pause it asks for.
#[derive(Debug)]
pub(super) struct Routed {
    pub(super) events: Vec<EventBody>,
    pub(super) pause: Option<PauseOrder>,
}

/// What a requeue pauses; `secs` is already the backed-off length, ending at `until`.
#[derive(Debug)]
pub(super) enum PauseOrder {
    /// A model, after a usage limit.
    Model {
        model: String,
        reason: String,
        secs: u64,
        until: Timestamp,
    },
    /// Dispatching, after a failure no retry fixes.
    Dispatch {
        cause: Unavailable,
        reason: String,
        secs: u64,
        until: Timestamp,
    },
}

/// What one routing is about.
pub(super) struct Attempt<'a> {
    pub(super) work: &'a Bead,
    pub(super) step: &'a Bead,
    pub(super) meta: &'a StepMeta,
    pub(super) number: u32,
    pub(super) outcome: &'a Outcome,
    /// The checksum of the agent's answer (`router::answer_sum`), when it gave one.
    pub(super) answer: Option<u32>,
}

impl Engine {
    /// The router's decision for an outcome, as events, at `now`.
    pub(super) fn routed(&self, at: &Attempt<'_>, now: Timestamp) -> Routed {
        let meta = at.meta;
        let config = &self.loaded.config.router;
        // A step's own limit replaces the config's.
        let config = match meta.max_attempts {
            Some(max_attempts) => std::borrow::Cow::Owned(router::RouterConfig {
                max_attempts,
                ..config.clone()
            }),
            None => std::borrow::Cow::Borrowed(config),
        };
        let decision = router::route(
            meta.role,
            at.outcome,
            at.answer,
            &meta.counters,
            meta.max_fix_iterations,
            &config,
        );
        let phase = match (&decision, meta.role) {
            (Decision::Close, Role::Merge) => Some(Phase::Merging),
            _ => None,
        };
        // One line per decision, so that the daemon's log (`journalctl -u`) tells the story.
        tracing::info!(
            bead = %at.work.id,
            step = %at.step.id,
            attempt = at.number,
            outcome = outcome_kind(at.outcome),
            "{}",
            decided(&decision, &meta.step)
        );
        let mut events = result_events(at, &decision, phase.clone());
        let summary = match at.outcome {
            Outcome::Finished { result, .. } => Some(result.summary.clone()),
            _ => None,
        };
        let mut pause = None;
        match decision {
            Decision::Close if phase.is_some() => {}
            Decision::Requeue { reason } => {
                let order = self.pause_order(at.outcome, meta, &reason, now);
                events.push(match &order {
                    PauseOrder::Model { model, until, .. } => EventBody::ModelPaused {
                        model: model.clone(),
                        until: *until,
                        reason: reason.clone(),
                    },
                    PauseOrder::Dispatch { cause, until, .. } => EventBody::DispatchPaused {
                        scope: cause.scope(),
                        cause: *cause,
                        until: *until,
                        reason: reason.clone(),
                        help: cause.help().to_owned(),
                    },
                });
                events.push(EventBody::StepRetry {
                    bead: at.work.id.clone(),
                    step: at.step.id.clone(),
                    reason,
                    counted: false,
                    manual: false,
                    not_before: None,
                });
                events.push(step_status(at.step, Status::Open, None));
                pause = Some(order);
            }
            decision => events.extend(self.decision_events(at, decision, summary, now)),
        }
        Routed { events, pause }
    }

    /// The events of a decision other than a requeue.
    fn decision_events(
        &self,
        at: &Attempt<'_>,
        decision: Decision,
        summary: Option<String>,
        now: Timestamp,
    ) -> Vec<EventBody> {
        let (work, step, meta) = (at.work, at.step, at.meta);
        let mut events = Vec::new();
        match decision {
            Decision::Close => {
                events.push(step_status(step, Status::Closed, summary.clone()));
                events.extend(self.close_if_done(work, &step.id, summary));
            }
            Decision::CloseAndRerunFixed => {
                events.push(step_status(step, Status::Closed, summary));
                if let Some(fixed) = &meta.fixes {
                    events.push(EventBody::BeadStatus {
                        id: fixed.clone(),
                        status: Status::Open,
                        reason: None,
                    });
                    // The fixed code must pass again what it passed before the rejection: the
                    // gates and reviews the fixed step comes after run again, in their order.
                    for again in self.checks_before(fixed) {
                        events.push(EventBody::BeadStatus {
                            id: again,
                            status: Status::Open,
                            reason: None,
                        });
                    }
                }
            }
            Decision::CreateFix {
                iteration,
                source,
                instructions,
            } => events.extend(self.create_fix(at, iteration, source, instructions, now)),
            Decision::Retry {
                attempt,
                max_attempts,
                reason,
                delay_secs,
            } => {
                let text = format!(
                    "[daemon] RETRY {} attempt {attempt}/{max_attempts}{}: {reason}",
                    meta.step,
                    in_secs(delay_secs)
                );
                events.push(EventBody::StepRetry {
                    bead: work.id.clone(),
                    step: step.id.clone(),
                    reason,
                    counted: true,
                    manual: false,
                    not_before: (delay_secs > 0).then(|| now.after_secs(delay_secs)),
                });
                events.push(step_status(step, Status::Open, None));
                events.push(comment_at(work, text, now));
            }
            Decision::Escalate {
                attempt,
                model,
                reason,
                delay_secs,
            } => {
                let text = format!(
                    "[daemon] RETRY {} attempt {attempt} with `{model}` (escalated){}: {reason}",
                    meta.step,
                    in_secs(delay_secs)
                );
                events.push(EventBody::StepEscalated {
                    bead: work.id.clone(),
                    step: step.id.clone(),
                    model,
                    reason,
                    not_before: (delay_secs > 0).then(|| now.after_secs(delay_secs)),
                });
                events.push(step_status(step, Status::Open, None));
                events.push(comment_at(work, text, now));
            }
            Decision::Block { cause, reason } => {
                let reason = block_reason(cause, &meta.step, &reason);
                events.extend(block_events(work, Some(&step.id), &reason, now));
            }
            Decision::Requeue { .. } => {
                debug_assert!(false, "a requeue is turned into events by `routed`");
            }
        }
        events
    }

    /// The closed gate and review steps that step `of` comes after (through `blocks`
    /// dependencies, transitively): what a fix for `of` must pass again.
    fn checks_before(&self, of: &BeadId) -> Vec<BeadId> {
        let state = self.store.state();
        let mut seen = std::collections::HashSet::new();
        let mut todo = vec![of.clone()];
        let mut found = Vec::new();
        while let Some(id) = todo.pop() {
            let Some(bead) = state.get(id.as_str()) else {
                continue;
            };
            for dep in &bead.dependencies {
                let crate::domain::id::DepTarget::Bead(before) = &dep.depends_on_id else {
                    continue;
                };
                if dep.dep_type != crate::domain::model::DepType::Blocks
                    || !seen.insert(before.clone())
                {
                    continue;
                }
                let Some(step) = state.get(before.as_str()) else {
                    continue;
                };
                let is_check = step
                    .step_meta()
                    .is_some_and(|m| matches!(m.role, Role::Gate | Role::Review));
                if is_check && step.status == Status::Closed {
                    found.push(before.clone());
                }
                todo.push(before.clone());
            }
        }
        found
    }

    /// Closes the work bead when `closing` was its last open step.
    pub(super) fn close_if_done(
        &self,
        work: &Bead,
        closing: &BeadId,
        summary: Option<String>,
    ) -> Vec<EventBody> {
        let open = self
            .store
            .state()
            .steps(work.id.as_str())
            .any(|s| s.id != *closing && s.status != Status::Closed);
        if open {
            return Vec::new();
        }
        let mut reason = summary.unwrap_or_else(|| "done".into());
        // A formula that says `merge = false` leaves the work where it is: the reason says
        // where, for `ctl show` and the board.
        let merges = self
            .store
            .state()
            .steps(work.id.as_str())
            .any(|s| s.step_meta().is_some_and(|m| m.role == Role::Merge));
        if !merges {
            reason = format!(
                "{reason} (not merged: the work is on branch `{}`)",
                crate::daemon::worktree::branch_name(&work.id)
            );
        }
        vec![EventBody::BeadStatus {
            id: work.id.clone(),
            status: Status::Closed,
            reason: Some(reason),
        }]
    }

    fn create_fix(
        &self,
        at: &Attempt<'_>,
        iteration: u32,
        source: FixSource,
        instructions: String,
        now: Timestamp,
    ) -> Vec<EventBody> {
        let (work, step, meta) = (at.work, at.step, at.meta);
        // Fix ids count per bead: a gate's fix-1 and a review's fix-1 must not collide.
        let number = self
            .store
            .state()
            .steps(work.id.as_str())
            .filter(|s| s.step_meta().is_some_and(|m| m.role == Role::Fix))
            .count()
            + 1;
        let name = format!("fix-{number}");
        let fix = match fix_bead(at, &name, iteration, instructions, now) {
            Ok(fix) => fix,
            Err(e) => {
                let reason = format!("cannot create a fix step: {e}");
                return block_events(work, Some(&step.id), &reason, now);
            }
        };
        let what = match source {
            FixSource::Review => "review rejected",
            FixSource::Gate => "checks failed",
            FixSource::Approval => "approval rejected",
            FixSource::PullRequest => "pull request asked for changes",
        };
        vec![
            EventBody::FixCreated {
                bead: work.id.clone(),
                fixes: step.id.clone(),
                iteration,
                step: Box::new(fix),
            },
            comment_at(
                work,
                format!(
                    "[daemon] FIX_ITERATION: {iteration} ({what} at {}; {name})",
                    meta.step
                ),
                now,
            ),
        ]
    }

    /// What a requeue for `outcome` pauses: dispatching for a failure no retry fixes, else the
    /// step's model.
    /// How long, from `now`: a model pauses from `pause_secs`, doubling each time it hits its
    /// limit again before one of its runs went through (capped at `max_pause_secs`); dispatching
    /// backs off the same way per scope.
    fn pause_order(
        &self,
        outcome: &Outcome,
        meta: &StepMeta,
        reason: &str,
        now: Timestamp,
    ) -> PauseOrder {
        let (first, max) = (
            self.loaded.config.pause_secs,
            self.loaded.config.max_pause_secs,
        );
        match outcome {
            Outcome::Unavailable { cause, .. } => {
                let (first, max) = super::holds::pause_range(*cause, reason, first, max);
                let secs = self.holds.backoff.next(&cause.scope(), first, max);
                PauseOrder::Dispatch {
                    cause: *cause,
                    reason: reason.to_owned(),
                    secs,
                    until: now.after_secs(secs),
                }
            }
            _ => {
                let model = self.model_for(meta);
                let secs = self.dispatch.model_pause_secs(&model, first, max);
                PauseOrder::Model {
                    model,
                    reason: reason.to_owned(),
                    secs,
                    until: now.after_secs(secs),
                }
            }
        }
    }

    /// A comment by the daemon on a bead, now.
    pub(super) fn comment(&self, bead: &Bead, text: String) -> EventBody {
        comment_at(bead, text, crate::daemon::clock::now())
    }
}

/// The step's result event, and the gate's own event for a gate's outcome.
fn result_events(at: &Attempt<'_>, decision: &Decision, phase: Option<Phase>) -> Vec<EventBody> {
    let (status, verdict, summary) = match at.outcome {
        Outcome::Finished { result, .. } => (
            Some(result.status),
            result.verdict,
            Some(result.summary.clone()),
        ),
        _ => (None, None, None),
    };
    let (bead, step) = (at.work.id.clone(), at.step.id.clone());
    let mut events = vec![EventBody::StepResult {
        bead: bead.clone(),
        step: step.clone(),
        attempt: at.number,
        outcome: outcome_kind(at.outcome).into(),
        status,
        verdict,
        summary,
        decision: decision.clone(),
        counters: router::counters_after(at.meta.counters, decision, at.answer),
        phase,
    }];
    match at.outcome {
        Outcome::GatePassed => events.push(EventBody::GatePassed {
            bead,
            step,
            by: None,
        }),
        Outcome::GateFailed { output } => events.push(EventBody::GateFailed {
            bead,
            step,
            output: output.clone(),
        }),
        _ => {}
    }
    events
}

/// The fix step `name` for the step of `at`, carrying the instructions.
fn fix_bead(
    at: &Attempt<'_>,
    name: &str,
    iteration: u32,
    instructions: String,
    now: Timestamp,
) -> Result<Bead, crate::domain::id::IdError> {
    let work = at.work;
    let id = work.id.step(name)?;
    let mut fix = Bead::new(id, format!("Fix: {}", work.id), now);
    fix.description = Some(instructions);
    fix.priority = work.priority;
    fix.dependencies.push(crate::domain::model::Dependency::new(
        fix.id.clone(),
        work.id.clone(),
        crate::domain::model::DepType::ParentChild,
        now,
    ));
    fix.set_step_meta(&StepMeta {
        formula: at.meta.formula.clone(),
        fixes: Some(at.step.id.clone()),
        iteration: Some(iteration),
        ..StepMeta::new(name.to_owned(), Role::Fix, work.id.clone())
    });
    Ok(fix)
}

fn step_status(step: &Bead, status: Status, reason: Option<String>) -> EventBody {
    EventBody::BeadStatus {
        id: step.id.clone(),
        status,
        reason,
    }
}

/// Events that block a step (if any) and its work bead, with the reason as a comment.
pub(super) fn block_events(
    work: &Bead,
    step: Option<&BeadId>,
    reason: &str,
    now: Timestamp,
) -> Vec<EventBody> {
    let mut events = Vec::new();
    if let Some(step) = step {
        events.push(EventBody::BeadStatus {
            id: step.clone(),
            status: Status::Blocked,
            reason: Some(reason.to_owned()),
        });
    }
    events.push(EventBody::BeadStatus {
        id: work.id.clone(),
        status: Status::Blocked,
        reason: Some(reason.to_owned()),
    });
    events.push(comment_at(work, format!("{BLOCKED_COMMENT} {reason}"), now));
    events
}

/// A comment by the daemon on a bead, numbered after its last one.
pub(super) fn comment_at(bead: &Bead, text: String, now: Timestamp) -> EventBody {
    EventBody::BeadComment {
        id: bead.id.clone(),
        comment: Comment {
            id: CommentId::Int(next_comment_id(bead)),
            issue_id: bead.id.clone(),
            author: DAEMON.into(),
            text,
            created_at: now,
            extra: Default::default(),
        },
    }
}

fn next_comment_id(bead: &Bead) -> i64 {
    bead.comments
        .iter()
        .filter_map(|c| match &c.id {
            CommentId::Int(n) => Some(*n),
            CommentId::Str(_) => None,
        })
        .max()
        .unwrap_or(0)
        + 1
}

/// A decision about step `step` in a few words, for the log.
fn decided(decision: &Decision, step: &str) -> String {
    match decision {
        Decision::Close => "step done".to_owned(),
        Decision::CloseAndRerunFixed => "fix done; the fixed step runs again".to_owned(),
        Decision::CreateFix {
            iteration, source, ..
        } => format!("fix {iteration} created ({source:?} rejected)"),
        Decision::Retry {
            attempt,
            max_attempts,
            reason,
            delay_secs,
        } => format!(
            "retry{}, attempt {attempt} of {max_attempts}: {reason}",
            in_secs(*delay_secs)
        ),
        Decision::Escalate { model, reason, .. } => {
            format!("escalated to {model}: {reason}")
        }
        Decision::Requeue { reason } => format!("requeued, no attempt spent: {reason}"),
        Decision::Block { cause, reason } => {
            format!("blocked: {}", block_reason(*cause, step, reason))
        }
    }
}

/// " in 20s" for a retry that waits; nothing for one that does not.
fn in_secs(delay_secs: u64) -> String {
    if delay_secs == 0 {
        String::new()
    } else {
        format!(" in {delay_secs}s")
    }
}

fn outcome_kind(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Finished { .. } => "finished",
        Outcome::Malformed { .. } => "malformed",
        Outcome::Failed { .. } => "failed",
        Outcome::UsageLimit { .. } => "usage_limit",
        Outcome::Unavailable { .. } => "unavailable",
        Outcome::GatePassed => "gate_passed",
        Outcome::GateFailed { .. } => "gate_failed",
        Outcome::Approved { .. } => "approved",
        Outcome::ApprovalRejected { .. } => "approval_rejected",
        Outcome::PullRequestChanges { .. } => "pull_request_changes",
    }
}

fn block_reason(cause: BlockCause, step: &str, reason: &str) -> String {
    let what = match cause {
        BlockCause::AgentBlocked => "the agent reported BLOCKED",
        BlockCause::AgentError => "the agent reported ERROR",
        BlockCause::FixLimit => "fix limit reached",
        BlockCause::AttemptsExhausted => "no valid result",
        BlockCause::SameAnswer => "the same answer again",
        BlockCause::WrongOutcome => "internal",
    };
    format!("{step}: {what}: {reason}")
}
