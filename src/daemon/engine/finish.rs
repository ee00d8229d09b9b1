//! What the engine does when an attempt ends: the router decides, the engine turns the
//! decision into one group of events, and effects (the merge, the worktree's removal) start
//! only after that group is durable.

use std::time::Duration;

use tokio::time::Instant;

use crate::daemon::worktree::MergeOutcome;
use crate::domain::event::EventBody;
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Comment, CommentId, Counters, Phase, Role, Status, StepMeta};
use crate::domain::router::{self, BlockCause, Decision, FixSource, Outcome};
use crate::domain::time::Timestamp;

use super::{Engine, MergeFailure, Pause};
use crate::daemon::runner::{StepDone, TARGET_FILE};

/// The author of the daemon's comments.
pub const DAEMON: &str = "catalyst";

impl Engine {
    pub(super) fn step_done(&mut self, done: StepDone) {
        let mut model = None;
        if self
            .running
            .get(&done.work)
            .is_some_and(|r| r.step == done.step && r.attempt == done.attempt)
        {
            model = self.running.remove(&done.work).and_then(|r| r.model);
        }
        let state = self.store.state();
        let (Some(step), Some(work)) = (
            state.get(done.step.as_str()).cloned(),
            state.get(done.work.as_str()).cloned(),
        ) else {
            tracing::error!(step = %done.step, "a step finished that the store does not know");
            return;
        };
        let Some(meta) = step.step_meta() else { return };
        // Only the attempt the journal says is running may end: an attempt whose end is
        // already recorded (handled again after a failed write) is not recorded twice.
        if !matches!(meta.phase, Some(Phase::Running { attempt, .. }) if attempt == done.attempt) {
            tracing::debug!(step = %done.step, attempt = done.attempt, "the attempt's end is already recorded");
            self.over_budget(&done.work);
            return;
        }
        let finished = EventBody::StepFinished {
            bead: done.work.clone(),
            step: done.step.clone(),
            attempt: done.attempt,
            exit: done.exit.clone(),
            duration_ms: done.duration_ms,
            cost_usd: done.cost_usd,
            commit: done.commit.as_ref().map(|c| c.to_string()),
        };
        if let Some(reason) = self.cancelling.get(&done.work).cloned() {
            if self.finish_cancel(&work, reason, vec![finished]) {
                self.cancelling.remove(&done.work);
            }
            return;
        }
        let Some(outcome) = done.outcome else {
            // Interrupted by shutdown: not an attempt. It runs again from its starting commit.
            self.record(vec![
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
            ]);
            return;
        };
        if !matches!(outcome, Outcome::UsageLimit { .. }) {
            if let Some(model) = &model {
                self.model_backoff.remove(model);
            }
        }
        if step.status != Status::InProgress || work.status != Status::InProgress {
            // A person closed, reopened or blocked it meanwhile: record the attempt only.
            self.record(vec![finished]);
            return;
        }
        let mut events = vec![finished];
        events.extend(self.route(&work, &step, &meta, done.attempt, &outcome));
        if self.apply_decision(&work.id, events) {
            self.over_budget(&work.id);
        }
    }

    /// The router's decision for an outcome, as events.
    pub(super) fn route(
        &mut self,
        work: &Bead,
        step: &Bead,
        meta: &StepMeta,
        attempt: u32,
        outcome: &Outcome,
    ) -> Vec<EventBody> {
        let config = self.loaded.config.clone();
        let decision = router::route(
            meta.role,
            outcome,
            &meta.counters,
            meta.max_fix_iterations,
            &config.router,
        );
        let counters = router::counters_after(meta.counters, &decision);
        let (status, verdict, summary) = match outcome {
            Outcome::Finished { result, .. } => (
                Some(result.status),
                result.verdict,
                Some(result.summary.clone()),
            ),
            _ => (None, None, None),
        };
        let phase = match (&decision, meta.role) {
            (Decision::Close, Role::Merge) => Some(Phase::Merging),
            _ => None,
        };
        let mut events = vec![EventBody::StepResult {
            bead: work.id.clone(),
            step: step.id.clone(),
            attempt,
            outcome: outcome_kind(outcome).into(),
            status,
            verdict,
            summary: summary.clone(),
            decision: decision.clone(),
            counters,
            phase: phase.clone(),
        }];
        match outcome {
            Outcome::GatePassed => events.push(EventBody::GatePassed {
                bead: work.id.clone(),
                step: step.id.clone(),
                by: None,
            }),
            Outcome::GateFailed { output } => events.push(EventBody::GateFailed {
                bead: work.id.clone(),
                step: step.id.clone(),
                output: output.clone(),
            }),
            _ => {}
        }
        let step_status = |status: Status, reason: Option<String>| EventBody::BeadStatus {
            id: step.id.clone(),
            status,
            reason,
        };
        match decision {
            Decision::Close if phase.is_some() => {}
            Decision::Close => {
                events.push(step_status(Status::Closed, summary.clone()));
                events.extend(self.close_if_done(work, &step.id, summary));
            }
            Decision::CloseAndRerunFixed => {
                events.push(step_status(Status::Closed, summary));
                if let Some(fixed) = &meta.fixes {
                    events.push(EventBody::BeadStatus {
                        id: fixed.clone(),
                        status: Status::Open,
                        reason: None,
                    });
                }
            }
            Decision::CreateFix {
                iteration,
                source,
                instructions,
            } => {
                events.extend(self.create_fix(work, step, meta, iteration, source, instructions));
            }
            Decision::Retry {
                attempt,
                max_attempts,
                reason,
            } => {
                events.push(EventBody::StepRetry {
                    bead: work.id.clone(),
                    step: step.id.clone(),
                    reason: reason.clone(),
                    counted: true,
                    manual: false,
                });
                events.push(step_status(Status::Open, None));
                events.push(self.comment(
                    work,
                    format!(
                        "[daemon] RETRY {} attempt {attempt}/{max_attempts}: {reason}",
                        meta.step
                    ),
                ));
            }
            Decision::Escalate {
                attempt,
                model,
                reason,
            } => {
                events.push(EventBody::StepEscalated {
                    bead: work.id.clone(),
                    step: step.id.clone(),
                    model: model.clone(),
                    reason: reason.clone(),
                });
                events.push(step_status(Status::Open, None));
                events.push(self.comment(
                    work,
                    format!(
                        "[daemon] RETRY {} attempt {attempt} with `{model}` (escalated): {reason}",
                        meta.step
                    ),
                ));
            }
            Decision::Requeue { reason } => {
                let model = self.model_for(meta);
                events.extend(self.pause_model(&model, &reason));
                events.push(EventBody::StepRetry {
                    bead: work.id.clone(),
                    step: step.id.clone(),
                    reason,
                    counted: false,
                    manual: false,
                });
                events.push(step_status(Status::Open, None));
            }
            Decision::Block { cause, reason } => {
                events.extend(self.block_events(
                    work,
                    Some(&step.id),
                    &block_reason(cause, &meta.step, &reason),
                ));
            }
        }
        events
    }

    /// Writes a decision's events and keeps the engine's indexes in step with them. Returns
    /// whether the events were written.
    pub(super) fn apply_decision(&mut self, work: &BeadId, events: Vec<EventBody>) -> bool {
        if self.record(events).is_none() {
            return false;
        }
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
        true
    }

    /// Whether the bead's merge step (if it has one) completed: only then may its branch go.
    fn merged(&self, work: &BeadId) -> bool {
        self.store.state().steps(work.as_str()).any(|s| {
            s.status == Status::Closed && s.step_meta().is_some_and(|m| m.role == Role::Merge)
        })
    }

    /// Closes the work bead when `closing` was its last open step.
    fn close_if_done(
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
        vec![EventBody::BeadStatus {
            id: work.id.clone(),
            status: Status::Closed,
            reason: Some(summary.unwrap_or_else(|| "done".into())),
        }]
    }

    fn create_fix(
        &self,
        work: &Bead,
        step: &Bead,
        meta: &StepMeta,
        iteration: u32,
        source: FixSource,
        instructions: String,
    ) -> Vec<EventBody> {
        // Fix ids count per bead: a gate's fix-1 and a review's fix-1 must not collide.
        let number = self
            .store
            .state()
            .steps(work.id.as_str())
            .filter(|s| s.step_meta().is_some_and(|m| m.role == Role::Fix))
            .count()
            + 1;
        let name = format!("fix-{number}");
        let now = crate::daemon::clock::now();
        let built = work.id.step(&name).map(|id| {
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
                step: name.clone(),
                role: Role::Fix,
                model: None,
                bead: work.id.clone(),
                formula: meta.formula.clone(),
                prompt: None,
                run: Vec::new(),
                timeout: None,
                max_fix_iterations: None,
                tools: None,
                fixes: Some(step.id.clone()),
                iteration: Some(iteration),
                attempts: 0,
                counters: Counters::default(),
                phase: None,
                next_model: None,
                reset_to: None,
                summary: None,
            });
            fix
        });
        let fix = match built {
            Ok(fix) => fix,
            Err(e) => {
                return self.block_events(
                    work,
                    Some(&step.id),
                    &format!("cannot create a fix step: {e}"),
                )
            }
        };
        let what = match source {
            FixSource::Review => "review rejected",
            FixSource::Gate => "checks failed",
            FixSource::Approval => "approval rejected",
        };
        vec![
            EventBody::FixCreated {
                bead: work.id.clone(),
                fixes: step.id.clone(),
                iteration,
                step: Box::new(fix),
            },
            self.comment(
                work,
                format!(
                    "[daemon] FIX_ITERATION: {iteration} ({what} at {}; {name})",
                    meta.step
                ),
            ),
        ]
    }

    /// Events that block a step (if any) and its work bead, with the reason as a comment.
    pub(super) fn block_events(
        &self,
        work: &Bead,
        step: Option<&BeadId>,
        reason: &str,
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
        events.push(self.comment(work, format!("[daemon] BLOCKED: {reason}")));
        events
    }

    pub(super) fn block_bead(&mut self, work: &BeadId, step: Option<&BeadId>, reason: &str) {
        let Some(bead) = self.store.state().get(work.as_str()).cloned() else {
            return;
        };
        let events = self.block_events(&bead, step, reason);
        self.apply_decision(work, events);
    }

    /// A comment by the daemon on a bead.
    pub(super) fn comment(&self, bead: &Bead, text: String) -> EventBody {
        EventBody::BeadComment {
            id: bead.id.clone(),
            comment: Comment {
                id: CommentId::Int(next_comment_id(bead)),
                issue_id: bead.id.clone(),
                author: DAEMON.into(),
                text,
                created_at: crate::daemon::clock::now(),
                extra: Default::default(),
            },
        }
    }

    /// Pauses a model after a usage limit. The pause doubles each time the model hits its
    /// limit again before one of its runs went through (exponential backoff, capped at
    /// `max_pause_secs`); such a run starts the next pause from `pause_secs` again.
    fn pause_model(&mut self, model: &str, reason: &str) -> Vec<EventBody> {
        let config = &self.loaded.config;
        let secs = match self.model_backoff.get(model) {
            Some(last) => last.saturating_mul(2).min(config.max_pause_secs),
            None => config.pause_secs,
        };
        self.model_backoff.insert(model.to_owned(), secs);
        let until =
            Timestamp::from_utc(chrono::Utc::now() + chrono::Duration::seconds(secs as i64));
        self.paused_models.insert(
            model.to_owned(),
            Pause {
                until: Instant::now() + Duration::from_secs(secs),
            },
        );
        vec![EventBody::ModelPaused {
            model: model.to_owned(),
            until,
            reason: reason.to_owned(),
        }]
    }

    /// Blocks a bead whose agents have spent more than the budget.
    fn over_budget(&mut self, work: &BeadId) {
        let Some(budget) = self.loaded.config.budget_usd else {
            return;
        };
        let Some(bead) = self.store.state().get(work.as_str()).cloned() else {
            return;
        };
        let spent = bead
            .metadata
            .as_ref()
            .and_then(|m| m.get(crate::domain::state::COST_KEY))
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0);
        if spent > budget && bead.status == Status::InProgress {
            self.block_bead(
                work,
                None,
                &format!("over budget: agents spent ${spent:.2} of ${budget:.2}"),
            );
        }
    }

    /// The daemon's fast-forward of the target ended.
    pub(super) fn merge_done(
        &mut self,
        work: BeadId,
        step: BeadId,
        result: Result<MergeOutcome, MergeFailure>,
    ) {
        self.merging.remove(&work);
        // A merge that must wait keeps its marker (it goes first when it is tried again, and
        // files an interrupted checkout cut short stay recognizable); any other outcome ends
        // the merge. If the outcome is not recorded, the bead stays in phase `merging` and
        // merges again; a stale marker is dropped by `start_merges`.
        let waits = matches!(result, Ok(MergeOutcome::TargetDirty { .. }))
            || matches!(&result, Err(e) if e.transient);
        if !waits {
            let marker = self.paths.state.join(super::schedule::MERGING_FILE);
            if let Err(e) = std::fs::remove_file(&marker) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %marker.display(), error = %e, "cannot remove the merge marker");
                }
            }
        }
        let state = self.store.state();
        let (Some(bead), Some(step_bead)) = (
            state.get(work.as_str()).cloned(),
            state.get(step.as_str()).cloned(),
        ) else {
            return;
        };
        let target = self.loaded.config.target_branch.clone();
        match result {
            Ok(MergeOutcome::Merged { from, to }) => {
                self.finish_merge(&bead, &step_bead, target, from.to_string(), to.to_string());
            }
            Ok(MergeOutcome::AlreadyMerged) => {
                let head = self
                    .repo
                    .head(&work)
                    .map(|c| c.to_string())
                    .unwrap_or_default();
                self.finish_merge(&bead, &step_bead, target, head.clone(), head);
            }
            Ok(MergeOutcome::NotUpToDate { target: t, branch }) => {
                let Some(meta) = step_bead.step_meta() else {
                    return;
                };
                let run_dir = self.paths.run_dir(&work, &meta.step, meta.attempts);
                let at_start = std::fs::read_to_string(run_dir.join(TARGET_FILE)).ok();
                if at_start.is_some_and(|s| s.trim() != t.as_str()) {
                    // Another bead's merge moved the target after this merge agent began: it
                    // lost a race, it did not fail. It runs again, not counted.
                    let reason = format!(
                        "`{target}` moved on to {t} while the merge agent worked; bringing the branch up to date again"
                    );
                    let events = vec![
                        EventBody::MergeConflict {
                            bead: work.clone(),
                            target,
                            reason: reason.clone(),
                        },
                        EventBody::StepRetry {
                            bead: work.clone(),
                            step: step.clone(),
                            reason,
                            counted: false,
                            manual: false,
                        },
                        EventBody::BeadStatus {
                            id: step.clone(),
                            status: Status::Open,
                            reason: None,
                        },
                    ];
                    self.apply_decision(&work, events);
                    return;
                }
                let reason = format!(
                    "`{target}` ({t}) is not an ancestor of the bead's branch ({branch}): the merge step must bring the branch up to date"
                );
                let mut events = vec![EventBody::MergeConflict {
                    bead: work.clone(),
                    target,
                    reason: reason.clone(),
                }];
                events.extend(self.route(
                    &bead,
                    &step_bead,
                    &meta,
                    meta.attempts,
                    &Outcome::Failed { reason },
                ));
                self.apply_decision(&work, events);
            }
            Ok(MergeOutcome::TargetDirty { files }) => {
                let secs = self.loaded.config.dirty_target_retry_secs;
                self.dirty_retry = Some(Instant::now() + Duration::from_secs(secs));
                let reason = format!(
                    "`{target}` is checked out with uncommitted changes ({}); waiting, trying again in {secs}s",
                    files.join(", ")
                );
                tracing::warn!(bead = %work, "{reason}");
                self.record(vec![EventBody::MergeConflict {
                    bead: work,
                    target,
                    reason,
                }]);
            }
            Err(e) if e.transient => {
                let secs = self.loaded.config.dirty_target_retry_secs;
                self.dirty_retry = Some(Instant::now() + Duration::from_secs(secs));
                let reason = format!(
                    "cannot move `{target}` yet: {}; trying again in {secs}s",
                    e.message
                );
                tracing::warn!(bead = %work, "{reason}");
                self.record(vec![EventBody::MergeConflict {
                    bead: work,
                    target,
                    reason,
                }]);
            }
            Err(e) => {
                let reason = format!("cannot move `{target}`: {}", e.message);
                tracing::error!(bead = %work, "{reason}");
                self.block_bead(&work, Some(&step), &reason);
            }
        }
    }

    fn finish_merge(&mut self, work: &Bead, step: &Bead, target: String, from: String, to: String) {
        let summary = step.step_meta().and_then(|m| m.summary);
        let mut events = vec![
            EventBody::MergeCompleted {
                bead: work.id.clone(),
                target: target.clone(),
                from,
                to,
            },
            EventBody::BeadStatus {
                id: step.id.clone(),
                status: Status::Closed,
                reason: Some(format!("merged into `{target}`")),
            },
        ];
        events.extend(self.close_if_done(
            work,
            &step.id,
            summary.or(Some(format!("merged into `{target}`"))),
        ));
        self.apply_decision(&work.id, events);
    }

    /// Closes a cancelled bead once its agent has stopped, and removes its worktree. Returns
    /// whether the cancellation was written.
    pub(super) fn finish_cancel(
        &mut self,
        work: &Bead,
        reason: Option<String>,
        mut events: Vec<EventBody>,
    ) -> bool {
        let reason = format!(
            "cancelled{}",
            reason.map(|r| format!(": {r}")).unwrap_or_default()
        );
        events.push(EventBody::BeadStatus {
            id: work.id.clone(),
            status: Status::Closed,
            reason: Some(reason),
        });
        if self.record(events).is_none() {
            return false;
        }
        self.active.remove(&work.id);
        self.start_removal(&work.id);
        true
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

fn outcome_kind(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Finished { .. } => "finished",
        Outcome::Malformed { .. } => "malformed",
        Outcome::Failed { .. } => "failed",
        Outcome::UsageLimit { .. } => "usage_limit",
        Outcome::GatePassed => "gate_passed",
        Outcome::GateFailed { .. } => "gate_failed",
        Outcome::Approved { .. } => "approved",
        Outcome::ApprovalRejected { .. } => "approval_rejected",
    }
}

fn block_reason(cause: BlockCause, step: &str, reason: &str) -> String {
    let what = match cause {
        BlockCause::AgentBlocked => "the agent reported BLOCKED",
        BlockCause::AgentError => "the agent reported ERROR",
        BlockCause::FixLimit => "fix limit reached",
        BlockCause::AttemptsExhausted => "no valid result",
        BlockCause::WrongOutcome => "internal",
    };
    format!("{step}: {what}: {reason}")
}
