//! Control requests: one handler per method. Each validates its input, builds events, writes
//! them, and answers only once they are durable. The queries are here; the changes are in
//! [`change`].

mod board;
mod change;

use crate::domain::id::BeadId;
use crate::domain::model::{Bead, DepType, Status, StepMeta};
use crate::domain::state::Stuck;
use crate::protocol::{
    Answer, BeadList, BeadSummary, BlockedBead, DispatchHold, ErrorCode, HeldMerge, IdParams,
    ListParams, Method, ModelPauseView, RpcError, RunningStep, ShowAnswer, StatusAnswer,
    StepDetail, StepView,
};

use super::route::BLOCKED_COMMENT;
use super::{Engine, Handled};

/// The most blocked beads `status` lists (the counts cover them all).
const BLOCKED_SHOWN: usize = 20;

/// `status`'s warning in cluster mode while no worker is there.
const NO_WORKER: &str = "no worker has said it is there in the last 30 s: agent attempts wait \
     until one connects (`catalyst worker --nats …` on a machine listed in `[cluster] workers`; \
     `catalyst ctl workers` lists those seen)";

impl Engine {
    /// Answers a control request. The methods a connection serves itself never come here
    /// (see `daemon::server`); one that did is a bug, answered as one.
    pub(super) fn request(&mut self, method: Method) -> Handled<Answer> {
        use Method as M;
        // Agents still running in the shutdown grace period need their hooks answered.
        if self.shutdown.stopping
            && !matches!(
                method,
                M::Status | M::Ready | M::List(_) | M::Show(_) | M::Hook(_) | M::Export
            )
        {
            return Err(RpcError::new(
                ErrorCode::ShuttingDown,
                "the daemon is stopping",
            ));
        }
        Ok(match method {
            M::Status => Answer::Status(Box::new(self.status())),
            M::Ready => Answer::Beads(self.ready_list()),
            M::List(p) => Answer::Beads(self.checked_list(&p)?),
            M::Show(p) => Answer::Show(Box::new(self.show(&IdParams { id: p.id })?)),
            M::Submit(beads) => Answer::Submitted(self.submit(beads)?),
            M::Update(p) => Answer::Updated(self.update(*p)?),
            M::Comment(p) => Answer::Commented(self.add_comment(p)?),
            M::Close(p) => Answer::StatusChanged(self.close(p)?),
            M::Reopen(p) => Answer::StatusChanged(self.reopen(&p)?),
            M::Approve(p) => Answer::Approved(self.approve(p)?),
            M::Reject(p) => Answer::Rejected(self.reject(p)?),
            M::Retry(p) => Answer::Retried(self.retry(&p)?),
            M::Cancel(p) => Answer::Cancelled(self.cancel(p)?),
            M::Pause(p) => Answer::Paused(self.pause(p, true)),
            M::Resume(p) => Answer::Paused(self.pause(p, false)),
            // Served by the engine's reload task (see `Engine::handle`).
            M::Reload => {
                return Err(RpcError::internal(
                    "a reload is served by the engine's reload task",
                ))
            }
            M::Hook(p) => Answer::Hook(self.hook(p)?),
            M::Import(p) => Answer::Imported(self.import(p.beads)?),
            M::Export => Answer::Exported(self.export()),
            M::Subscribe(_) | M::Logs(_) | M::Shutdown | M::Workers => {
                return Err(RpcError::internal(format!(
                    "`{}` is served by the connection, not the engine",
                    method.name()
                )))
            }
        })
    }

    /// Sends a client its answer once the batch's events are durable.
    pub(super) fn answer(
        &mut self,
        reply: tokio::sync::oneshot::Sender<Handled<Answer>>,
        answer: Handled<Answer>,
    ) {
        self.answers_client();
        // A client that hung up does not need its answer.
        self.tasks.after_sync(move || {
            let _ = reply.send(answer);
        });
    }

    fn bead(&self, id: &str) -> Handled<Bead> {
        BeadId::new(id).map_err(|e| RpcError::bad_request(e.to_string()))?;
        self.store
            .state()
            .get(id)
            .cloned()
            .ok_or_else(|| RpcError::not_found(format!("bead `{id}` does not exist")))
    }

    /// The work bead `id` names: itself, or the bead a step id belongs to (`ctl status` prints
    /// a waiting step's id, and people answer with what they read).
    fn work_bead(&self, id: &str) -> Handled<Bead> {
        let bead = self.bead(id)?;
        match bead.step_meta() {
            Some(meta) => self.bead(meta.bead.as_str()),
            None => Ok(bead),
        }
    }

    fn status(&self) -> StatusAnswer {
        let mut by_status = std::collections::BTreeMap::<&str, u64>::new();
        let mut steps = 0;
        let mut blocked = Vec::new();
        for bead in self.store.state().beads() {
            if bead.is_step() {
                steps += 1;
                continue;
            }
            *by_status.entry(bead.status.as_str()).or_insert(0) += 1;
            if bead.status == Status::Blocked {
                blocked.push(bead);
            }
        }
        let beads = by_status
            .into_iter()
            .map(|(status, n)| (status.to_owned(), n))
            .collect();
        let running = self
            .dispatch
            .running
            .values()
            .map(|r| RunningStep {
                bead: Some(r.work.clone()),
                ..self.running_step(r)
            })
            .collect();
        let waiting: Vec<(BeadId, StepMeta)> = self
            .active
            .iter()
            .flat_map(|w| self.store.state().waiting_approval(w.as_str()))
            .map(|(step, meta)| (step.id.clone(), meta))
            .collect();
        let held_merges = waiting
            .iter()
            .filter_map(|(step, m)| {
                let hold = m.hold.as_ref().filter(|h| !h.approved)?;
                Some(HeldMerge {
                    bead: m.bead.clone(),
                    step: step.clone(),
                    commit: hold.commit.clone(),
                    files: hold.files.clone(),
                })
            })
            .collect();
        let waiting_approval = waiting.into_iter().map(|(step, _)| step).collect();
        let active = self.list(&ListParams {
            status: Some("in_progress".into()),
            steps: false,
            ..Default::default()
        });
        StatusAnswer {
            active: active.beads,
            beads,
            paused: self.dispatch.paused,
            paused_models: self.dispatch.paused_models.keys().cloned().collect(),
            pid: std::process::id(),
            ready: self.store.state().ready_count(crate::daemon::clock::now()) as u64,
            running,
            seq: self.store.state().seq(),
            journal_syncs: self.store.syncs(),
            steps,
            stopping: self.shutdown.stopping,
            storage_error: self.storage.error.clone(),
            refused_reload: self.refused_reload.clone(),
            cluster_warning: self
                .remote
                .as_ref()
                .filter(|remote| remote.workers_seen() == 0)
                .map(|_| NO_WORKER.to_owned()),
            budget_stop: self.budget_stop().map(Into::into),
            spent_today_usd: (self.store.state().spending()).today(&crate::daemon::clock::now()),
            spent_total_usd: self.store.state().spending().total_usd,
            version: env!("CARGO_PKG_VERSION").into(),
            waiting_approval,
            held_merges,
            pull_requests: self.waiting_pull_requests(),
            forge_paused: self.forge_pause(),
            workspace: self.paths.workspace.clone(),
            blocked: latest_blocked(blocked),
            holds: self
                .holds
                .iter()
                .map(|(scope, h)| DispatchHold {
                    scope,
                    cause: h.cause,
                    reason: h.reason.clone(),
                    help: h.cause.help().to_owned(),
                    until: h.until_wall,
                })
                .collect(),
            model_pauses: self
                .dispatch
                .paused_models
                .iter()
                .map(|(model, p)| ModelPauseView {
                    model: model.clone(),
                    reason: p.reason.clone(),
                    until: p.until_wall,
                })
                .collect(),
        }
    }

    fn running_step(&self, r: &super::Running) -> RunningStep {
        RunningStep {
            attempt: r.attempt,
            bead: None,
            elapsed_ms: r.started.elapsed().as_millis() as u64,
            model: r.model.clone(),
            step: r.step.clone(),
            worker: r.worker.clone(),
            waiting_for_slot: r
                .in_slot
                .as_ref()
                .is_some_and(|s| !s.load(std::sync::atomic::Ordering::Relaxed)),
            waiting_for_worker: r.remote && r.worker.is_none(),
        }
    }

    /// One line of `list`: the bead and its molecule's progress.
    fn summary(&self, bead: &Bead) -> BeadSummary {
        let steps: Vec<&Bead> = self.store.state().steps(bead.id.as_str()).collect();
        let done = steps.iter().filter(|s| s.status == Status::Closed).count();
        let current = steps
            .iter()
            .find(|s| s.status == Status::InProgress || s.status == Status::Blocked)
            .and_then(|s| s.step_meta())
            .map(|m| m.step);
        let state = self.store.state();
        let waiting_for: Vec<BeadId> = if bead.is_step() || bead.status.is_closed() {
            Vec::new()
        } else {
            state.open_blockers(bead.id.as_str()).cloned().collect()
        };
        let stuck_on = waiting_for
            .iter()
            .filter_map(|id| Some((id.clone(), Stuck::of(state.get(id.as_str())?)?)))
            .collect();
        BeadSummary {
            close_reason: bead.close_reason.clone(),
            closed_at: bead.closed_at,
            cost_usd: Some(crate::domain::state::spent(bead)).filter(|c| *c > 0.0),
            created_at: bead.created_at,
            current,
            done: done as u64,
            formula: self.formula_name(bead),
            id: bead.id.clone(),
            priority: bead.priority,
            running: self
                .dispatch
                .running_of(&bead.id)
                .min_by_key(|r| r.started)
                .map(|r| self.running_step(r)),
            status: bead.status.clone(),
            stuck_on,
            title: bead.title.clone(),
            total: steps.len() as u64,
            waiting_for,
        }
    }

    fn ready_list(&self) -> BeadList {
        let beads = self
            .store
            .state()
            .ready(crate::daemon::clock::now())
            .map(|b| self.summary(b))
            .collect();
        BeadList { beads, total: None }
    }

    /// [`Engine::list`], refusing a status no bead can have: a typo would list nothing.
    fn checked_list(&self, p: &ListParams) -> Handled<BeadList> {
        if let Some(status) = &p.status {
            let standard = ["open", "in_progress", "blocked", "deferred", "closed"];
            let known = standard.contains(&status.as_str())
                || self
                    .store
                    .state()
                    .beads()
                    .any(|b| b.status.as_str() == status);
            if !known {
                return Err(RpcError::bad_request(format!(
                    "unknown status `{}` (one of: {})",
                    status.chars().take(64).collect::<String>(),
                    standard.join(", ")
                )));
            }
        }
        Ok(self.list(p))
    }

    fn list(&self, p: &ListParams) -> BeadList {
        let search = p.search.as_deref().map(crate::protocol::Search::new);
        let state = self.store.state();
        let now = crate::daemon::clock::now();
        let matching = state
            .beads()
            .filter(|b| p.steps || !b.is_step())
            .filter(|b| p.status.as_deref().is_none_or(|s| b.status.as_str() == s))
            .filter(|b| {
                p.lane
                    .is_none_or(|lane| !b.is_step() && state.lane(b, now) == lane)
            })
            .filter(|b| {
                search
                    .as_ref()
                    .is_none_or(|s| s.matches(b.id.as_str(), &b.title))
            });
        if p.offset.is_none() && p.limit.is_none() {
            let beads = matching.map(|b| self.summary(b)).collect();
            return BeadList { beads, total: None };
        }
        // Only the page's rows are built; the rest are counted.
        let (skip, take) = (
            usize::try_from(p.offset.unwrap_or(0)).unwrap_or(usize::MAX),
            usize::try_from(p.limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX),
        );
        let mut total = 0u64;
        let mut beads = Vec::new();
        for (i, bead) in matching.enumerate() {
            total += 1;
            if i >= skip && beads.len() < take {
                beads.push(self.summary(bead));
            }
        }
        BeadList {
            beads,
            total: Some(total),
        }
    }

    /// A bead with its steps. The attempts of each step (`show --runs`) are read from the run
    /// folders by the connection ([`crate::daemon::audit`]), not here: the engine does no file
    /// I/O while it answers.
    fn show(&self, p: &IdParams) -> Handled<ShowAnswer> {
        let bead = self.bead(&p.id)?;
        let steps = self
            .store
            .state()
            .steps(bead.id.as_str())
            .map(|s| StepView {
                id: s.id.clone(),
                status: s.status.clone(),
                title: s.title.clone(),
                detail: s.step_meta().map(|m| StepDetail {
                    model: m
                        .model
                        .clone()
                        .or_else(|| self.loaded.config.role_model(m.role)),
                    step: m.step,
                    role: m.role,
                    needs: s
                        .dependencies
                        .iter()
                        .filter(|d| d.dep_type == DepType::Blocks)
                        .filter_map(|d| d.depends_on_id.bead().cloned())
                        .collect(),
                    instructions: m.fixes.as_ref().and(s.description.clone()),
                    fixes: m.fixes,
                    attempts: m.attempts,
                    uncounted: m.uncounted,
                    summary: m.summary,
                    phase: m.phase,
                    runs: None,
                }),
            })
            .collect();
        Ok(ShowAnswer::new(self.summary(&bead), bead, steps))
    }
}

/// Blocked work beads for `status`, the latest first, at most [`BLOCKED_SHOWN`], with why (the
/// daemon's last `BLOCKED` comment).
fn latest_blocked(mut blocked: Vec<&Bead>) -> Vec<BlockedBead> {
    blocked.sort_by_key(|b| std::cmp::Reverse(b.updated_at));
    blocked
        .into_iter()
        .take(BLOCKED_SHOWN)
        .map(|b| BlockedBead {
            id: b.id.clone(),
            title: b.title.clone(),
            reason: blocked_reason(b),
        })
        .collect()
}

/// Why `bead` is blocked: the daemon's last `BLOCKED` comment on it.
pub(crate) fn blocked_reason(bead: &Bead) -> Option<String> {
    bead.comments.iter().rev().find_map(|c| {
        c.text
            .strip_prefix(BLOCKED_COMMENT)
            .map(|r| r.trim().to_owned())
    })
}
