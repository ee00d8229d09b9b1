//! The requests that change beads: each checks its input against the state, writes its events
//! and answers once they are durable.

use std::collections::HashSet;

use crate::domain::event::EventBody;
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Comment, CommentId, DepType, Dependency, Phase, Role, Status};
use crate::domain::router::Outcome;
use crate::domain::time::Timestamp;
use crate::protocol::{
    ApproveParams, Approved, BeadInput, Cancelled, CloseParams, CommentParams, Commented, IdParams,
    PauseParams, PauseState, RejectParams, Rejected, Retried, RpcError, StatusChanged, Submitted,
    UpdateParams, Updated,
};

use crate::daemon::engine::{Engine, Handled};

impl Engine {
    pub(super) fn submit(&mut self, inputs: Vec<BeadInput>) -> Handled<Submitted> {
        let (ids, events) = self.submission(inputs, true)?;
        let written = self.record_for_client(events)?;
        Ok(Submitted {
            ids,
            seq: written.last().map(|e| e.seq),
        })
    }

    /// The beads of a submission, checked and filled in, and the events that create them.
    /// `by_person`: it came on the control socket, not from a file (the inbox).
    pub(in crate::daemon::engine) fn submission(
        &mut self,
        inputs: Vec<BeadInput>,
        by_person: bool,
    ) -> Handled<(Vec<BeadId>, Vec<EventBody>)> {
        let now = crate::daemon::clock::now();
        let mut beads = Vec::with_capacity(inputs.len());
        let mut taken = HashSet::new();
        for input in inputs {
            let bead = self.bead_from_input(input, now, &taken)?;
            taken.insert(bead.id.clone());
            beads.push(bead);
        }
        let ids: Vec<BeadId> = beads.iter().map(|b| b.id.clone()).collect();
        let events = beads
            .into_iter()
            .map(|b| EventBody::BeadCreated {
                bead: Box::new(b),
                by_person,
            })
            .collect();
        Ok((ids, events))
    }

    /// Checks a submitted bead and fills in what the daemon owns: id, timestamps, status.
    fn bead_from_input(
        &mut self,
        input: BeadInput,
        now: Timestamp,
        taken: &HashSet<BeadId>,
    ) -> Handled<Bead> {
        let bad = |m: String| RpcError::bad_request(m);
        if input.title.trim().is_empty() {
            return Err(bad("a bead needs a title".into()));
        }
        let id = match &input.id {
            Some(id) => {
                let id = BeadId::new(id).map_err(|e| bad(e.to_string()))?;
                if self.store.state().contains(id.as_str()) || taken.contains(&id) {
                    return Err(RpcError::conflict(format!("bead `{id}` already exists")));
                }
                let twin = self.store.state().case_twin(id.as_str()).or_else(|| {
                    let same = |t: &&BeadId| t.as_str().eq_ignore_ascii_case(id.as_str());
                    taken.iter().find(same)
                });
                if let Some(twin) = twin {
                    return Err(RpcError::conflict(format!(
                        "bead `{twin}` already exists, and ids may not differ only in case"
                    )));
                }
                id
            }
            None => self.new_id(taken)?,
        };
        let mut bead = Bead::new(id.clone(), input.title, now);
        bead.description = input.description;
        bead.design = input.design;
        bead.acceptance_criteria = input.acceptance_criteria;
        bead.notes = input.notes;
        if let Some(p) = input.priority {
            if p > crate::domain::model::MAX_PRIORITY {
                return Err(bad(format!("priority {p} is not 0–4")));
            }
            bead.priority = p;
        }
        if let Some(t) = input.issue_type {
            bead.issue_type = t;
        }
        bead.assignee = input.assignee;
        bead.labels = input.labels;
        if let Some(formula) = input.formula {
            if self.loaded.formulas.get(&formula).is_none() {
                return Err(bad(self.unknown_formula(&formula)));
            }
            bead.labels.retain(|l| !l.starts_with("formula:"));
            bead.labels.push(format!("formula:{formula}"));
        }
        bead.metadata = input.metadata;
        for after in input.after {
            let target = BeadId::new(&after).map_err(|e| bad(e.to_string()))?;
            if !self.store.state().contains(target.as_str()) && !taken.contains(&target) {
                return Err(RpcError::not_found(format!(
                    "`after` names bead `{target}`, which does not exist"
                )));
            }
            bead.dependencies
                .push(Dependency::new(id.clone(), target, DepType::Blocks, now));
        }
        Ok(bead)
    }

    /// `<prefix>-<n in base 36>`, one more than the highest such id in the store.
    fn new_id(&mut self, taken: &HashSet<BeadId>) -> Handled<BeadId> {
        let prefix = format!("{}-", self.loaded.config.prefix);
        if self.intake.next_number == 0 {
            self.intake.next_number = self
                .store
                .state()
                .beads()
                .filter_map(|b| u64::from_str_radix(b.id.as_str().strip_prefix(&prefix)?, 36).ok())
                .max()
                .unwrap_or(0)
                + 1;
        }
        loop {
            let id = BeadId::new(&format!("{prefix}{}", base36(self.intake.next_number)))
                .map_err(|e| RpcError::internal(e.to_string()))?;
            self.intake.next_number += 1;
            let state = self.store.state();
            let free = !state.contains(id.as_str())
                && state.case_twin(id.as_str()).is_none()
                && !self.intake.branch_beads.contains(&id);
            if free && !taken.contains(&id) {
                return Ok(id);
            }
        }
    }

    pub(super) fn update(&mut self, p: UpdateParams) -> Handled<Updated> {
        let bead = self.bead(&p.id)?;
        for target in &p.set.drop_after {
            let waits = bead
                .dependencies
                .iter()
                .any(|d| d.dep_type.is_blocking() && d.depends_on_id.bead() == Some(target));
            if !waits {
                return Err(RpcError::bad_request(format!(
                    "`{}` does not wait for `{target}`",
                    bead.id
                )));
            }
        }
        self.record_for_client(vec![EventBody::BeadUpdated {
            id: bead.id,
            patch: Box::new(p.set),
        }])?;
        Ok(Updated { updated: p.id })
    }

    pub(super) fn add_comment(&mut self, p: CommentParams) -> Handled<Commented> {
        let bead = self.bead(&p.id)?;
        let id = bead
            .comments
            .iter()
            .filter_map(|c| match c.id {
                CommentId::Int(n) => Some(n),
                _ => None,
            })
            .max()
            .unwrap_or(0)
            + 1;
        let comment = Comment {
            id: CommentId::Int(id),
            issue_id: bead.id.clone(),
            author: p.author.unwrap_or_else(|| "human".into()),
            text: p.text,
            created_at: crate::daemon::clock::now(),
            extra: Default::default(),
        };
        self.record_for_client(vec![EventBody::BeadComment {
            id: bead.id,
            comment,
        }])?;
        Ok(Commented { comment: id })
    }

    fn set_status(
        &mut self,
        id: &BeadId,
        status: Status,
        reason: Option<String>,
    ) -> Handled<StatusChanged> {
        self.record_for_client(vec![EventBody::BeadStatus {
            id: id.clone(),
            status: status.clone(),
            reason,
        }])?;
        Ok(StatusChanged {
            id: id.clone(),
            status,
        })
    }

    pub(super) fn close(&mut self, p: CloseParams) -> Handled<StatusChanged> {
        let bead = self.bead(&p.id)?;
        if self.dispatch.busy(&bead.id) {
            return Err(RpcError::conflict(format!(
                "`{}` has a step running; use `cancel` to stop it",
                bead.id
            )));
        }
        let answer = self.set_status(&bead.id, Status::Closed, p.reason)?;
        self.active.remove(&bead.id);
        Ok(answer)
    }

    pub(super) fn reopen(&mut self, p: &IdParams) -> Handled<StatusChanged> {
        let bead = self.bead(&p.id)?;
        if bead.status != Status::Closed {
            return Err(RpcError::conflict(format!(
                "`{}` is {}, not closed",
                bead.id, bead.status
            )));
        }
        self.set_status(&bead.id, Status::Open, None)
    }

    /// The step of `work` that waits for a person.
    fn waiting_approval(&self, work: &Bead) -> Handled<Bead> {
        self.store
            .state()
            .steps(work.id.as_str())
            .find(|s| s.step_meta().and_then(|m| m.phase) == Some(Phase::WaitingApproval))
            .cloned()
            .ok_or_else(|| {
                RpcError::conflict(format!("`{}` is not waiting for an approval", work.id))
            })
    }

    pub(super) fn approve(&mut self, p: ApproveParams) -> Handled<Approved> {
        let work = self.work_bead(&p.id)?;
        let step = self.waiting_approval(&work)?;
        let meta = step
            .step_meta()
            .ok_or_else(|| RpcError::internal("step without metadata"))?;
        if let Some(hold) = meta.hold.as_ref().filter(|_| meta.role == Role::Merge) {
            // A merge held for its workflow files: the approval covers that commit, and the
            // daemon's merge goes on.
            let mut events = vec![EventBody::MergeApproved {
                bead: work.id.clone(),
                step: step.id.clone(),
                commit: hold.commit.clone(),
            }];
            if let Some(text) = &p.comment {
                events.push(self.comment(&work, format!("[approved] {text}")));
            }
            self.apply_decision(&work.id, events)
                .map_err(|_| self.not_written())?;
            return Ok(Approved { approved: step.id });
        }
        let mut events = vec![EventBody::GatePassed {
            bead: work.id.clone(),
            step: step.id.clone(),
            by: Some("human".into()),
        }];
        if let Some(text) = &p.comment {
            events.push(self.comment(&work, format!("[approved] {text}")));
        }
        events.extend(self.route(
            &work,
            &step,
            &meta,
            meta.attempts,
            &Outcome::Approved { comment: p.comment },
        ));
        self.apply_decision(&work.id, events)
            .map_err(|_| self.not_written())?;
        Ok(Approved { approved: step.id })
    }

    pub(super) fn reject(&mut self, p: RejectParams) -> Handled<Rejected> {
        if p.reason.trim().is_empty() {
            return Err(RpcError::bad_request("a rejection needs a reason"));
        }
        let work = self.work_bead(&p.id)?;
        let step = self.waiting_approval(&work)?;
        let meta = step
            .step_meta()
            .ok_or_else(|| RpcError::internal("step without metadata"))?;
        // The person's words as a comment; the route's own comment numbers after it.
        let rejected = self.comment(&work, format!("[rejected] {}", p.reason));
        let mut work = work;
        if let EventBody::BeadComment { comment, .. } = &rejected {
            work.comments.push(comment.clone());
        }
        let mut events = vec![rejected];
        events.extend(self.route(
            &work,
            &step,
            &meta,
            meta.attempts,
            &Outcome::ApprovalRejected { reason: p.reason },
        ));
        self.apply_decision(&work.id, events)
            .map_err(|_| self.not_written())?;
        Ok(Rejected { rejected: step.id })
    }

    /// Gives a blocked bead another go: its blocked step starts over with fresh counters.
    pub(super) fn retry(&mut self, p: &IdParams) -> Handled<Retried> {
        let work = self.work_bead(&p.id)?;
        if work.status != Status::Blocked {
            return Err(RpcError::conflict(format!(
                "`{}` is {}, not blocked",
                work.id, work.status
            )));
        }
        let mut events = Vec::new();
        let has_steps = self.store.state().steps(work.id.as_str()).next().is_some();
        for step in self
            .store
            .state()
            .steps(work.id.as_str())
            .filter(|s| s.status == Status::Blocked)
        {
            events.push(EventBody::StepRetry {
                bead: work.id.clone(),
                step: step.id.clone(),
                reason: "a person asked to retry".into(),
                counted: false,
                manual: true,
                not_before: None,
            });
            events.push(EventBody::BeadStatus {
                id: step.id.clone(),
                status: Status::Open,
                reason: None,
            });
        }
        let status = if has_steps {
            Status::InProgress
        } else {
            Status::Open
        };
        events.push(EventBody::BeadStatus {
            id: work.id.clone(),
            status,
            reason: None,
        });
        self.record_for_client(events)?;
        if has_steps {
            self.active.insert(work.id.clone());
        }
        Ok(Retried { retried: work.id })
    }

    /// Stops a bead for good: its agent is stopped, the bead closed as cancelled, and its
    /// worktree and branch removed (the one case where an unmerged branch goes).
    pub(super) fn cancel(&mut self, p: CloseParams) -> Handled<Cancelled> {
        let work = self.bead(&p.id)?;
        if work.status == Status::Closed {
            return Err(RpcError::conflict(format!(
                "`{}` is already closed",
                work.id
            )));
        }
        if self.dispatch.busy(&work.id) {
            for running in self.dispatch.running_of(&work.id) {
                running.cancel.cancel();
            }
            self.cancelling.insert(work.id.clone(), p.reason);
            return Ok(Cancelled::Cancelling(work.id));
        }
        self.finish_cancel(&work, p.reason, Vec::new())
            .map_err(|_| self.not_written())?;
        Ok(Cancelled::Cancelled(work.id))
    }

    pub(super) fn pause(&mut self, p: PauseParams, pause: bool) -> PauseState {
        match p.model {
            None => {
                self.dispatch.paused = pause;
                if !pause {
                    self.holds.release(|_| false);
                }
            }
            Some(model) if pause => {
                self.dispatch.paused_models.insert(
                    model,
                    crate::daemon::engine::Pause {
                        until: tokio::time::Instant::now()
                            + std::time::Duration::from_secs(365 * 24 * 3600),
                        until_wall: None,
                        reason: "paused by a person".into(),
                    },
                );
            }
            Some(model) => {
                self.dispatch.paused_models.remove(&model);
            }
        }
        PauseState {
            paused: self.dispatch.paused,
            paused_models: self.dispatch.paused_models.keys().cloned().collect(),
        }
    }
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}
