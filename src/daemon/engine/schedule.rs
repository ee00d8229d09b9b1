//! Scheduling: pouring ready work beads, dispatching ready steps within the concurrency
//! limits, and starting the daemon's own git work (merges, worktree removal).
//!
//! Order: steps of molecules already in progress first (finishing work beats starting it),
//! then new beads; both by priority, then age. A bead's steps run one at a time in its
//! worktree; when several of its agent steps are ready at once (a convoy's legs), they run
//! side by side, each in a worktree of its own, and their work is merged into the bead's
//! branch as each one finishes.

use std::collections::BTreeMap;

use tokio::time::Instant;

use crate::domain::event::EventBody;
use crate::domain::formula::{pour, ASPECT_LABEL};
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Role, Status, StepMeta};
use crate::domain::time::Timestamp;
use crate::domain::unavailable::PauseScope;

use super::{Engine, Input, Running};
use crate::daemon::runner::{self, GateJob, GitTaskError, JobError, JobSources, StepJob};
use crate::domain::model::{vars_by_person, VARS_KEY};

/// Agent steps dispatched beyond `max_agents`, made ready to start the moment an agent slot
/// frees (see [`Engine::agent_limit`]).
const PREPARED_AHEAD: usize = 2;

impl Engine {
    /// Starts whatever can start now. Nothing starts while the journal cannot be written:
    /// the storage retry timer resumes scheduling once it can.
    pub(super) fn schedule(&mut self) {
        if self.dispatch.paused
            || self.shutdown.stopping
            || self.storage.error.is_some()
            || self.intake.recovering()
        {
            return;
        }
        self.start_merges();
        self.start_forge();
        if !self.holds.holds(PauseScope::All) {
            self.dispatch_active();
        }
        self.pour_ready();
    }

    /// How many agent steps may be dispatched at once: `max_agents`, and up to
    /// [`PREPARED_AHEAD`] more whose worktree and run folder are made ready while earlier
    /// agents run; the engine's agent slots (`runner::AgentSlots`) keep the agents themselves
    /// to `max_agents` (none ahead for attempts sent to workers, which prepare their own).
    fn agent_limit(&self) -> usize {
        let max = self.loaded.config.max_agents;
        let ahead = if self.remote.is_some() {
            0
        } else {
            PREPARED_AHEAD.min(max)
        };
        max + ahead
    }

    fn agent_slot_free(&self) -> bool {
        self.dispatch.agents_running() < self.agent_limit()
    }

    /// Whether one more agent of `model` may start now.
    fn model_free(&self, model: &str) -> bool {
        if self.dispatch.model_paused(model) || self.holds.holds(PauseScope::Agent) {
            return false;
        }
        match self.loaded.config.model_limit(model) {
            Some(limit) => self.dispatch.running_with(model) < limit,
            None => true,
        }
    }

    /// The model name a step's next attempt runs with.
    pub(super) fn model_for(&self, meta: &StepMeta) -> String {
        meta.next_model
            .clone()
            .or_else(|| meta.model.clone())
            .or_else(|| self.loaded.config.role_model(meta.role))
            .unwrap_or_else(|| "sonnet".into())
    }

    fn dispatch_active(&mut self) {
        // Found again by this pass, as it looks at the ready steps anyway.
        self.dispatch.pass_begins();
        let state = self.store.state();
        let mut order: Vec<(u8, Timestamp, BeadId)> = self
            .active
            .iter()
            .filter(|w| !self.git.merging(w))
            .filter(|w| self.dispatch.running_of(w).all(|r| r.side))
            .filter_map(|w| state.get(w.as_str()))
            .filter(|b| b.status == Status::InProgress)
            .map(|b| (b.priority, b.created_at, b.id.clone()))
            .collect();
        order.sort();
        for (_, _, work) in order {
            if !self.dispatch_ready_steps(&work) && !self.agent_slot_free() {
                break;
            }
        }
    }

    /// Starts what of `work`'s molecule can run now. Returns whether something started.
    ///
    /// With nothing running for the bead and one step ready, that step runs in the bead's
    /// worktree. With several agent steps ready at once (none of them a merge), or while steps
    /// already run side by side, each ready agent step starts in a worktree of its own, within
    /// the agent limits; steps that need the bead's worktree (gates, merges) wait until those
    /// are done.
    fn dispatch_ready_steps(&mut self, work: &BeadId) -> bool {
        let now = crate::daemon::clock::now();
        let mut ready: Vec<Bead> = Vec::new();
        for step in self.store.state().ready_steps(work.as_str()) {
            if self.dispatch.running.contains_key(&step.id) {
                continue;
            }
            match step.step_meta().and_then(|m| m.not_before) {
                // Backing off after a failed attempt: the engine's timer wakes for it.
                Some(at) if at > now => {
                    self.dispatch.passed_over(at);
                }
                _ => ready.push(step.clone()),
            }
        }
        let beside = |s: &Bead| {
            s.step_meta()
                .is_some_and(|m| m.role.is_agent() && m.role != Role::Merge)
        };
        let side = self.dispatch.busy(work) || ready.iter().filter(|s| beside(s)).count() > 1;
        if !side {
            return ready
                .first()
                .is_some_and(|step| self.dispatch_step(work, step, false));
        }
        let mut started = false;
        for step in ready.iter().filter(|s| beside(s)) {
            started |= self.dispatch_step(work, step, true);
        }
        started
    }

    /// Starts `step` if it can run now (`side`: in a worktree of its own). Returns whether it
    /// started.
    fn dispatch_step(&mut self, work: &BeadId, step: &Bead, side: bool) -> bool {
        let Some(meta) = step.step_meta() else {
            return false;
        };
        match meta.role {
            Role::Approval => {
                self.wait_for_approval(work, step);
                false
            }
            Role::Gate => self.start_gate(work, step, &meta),
            Role::Merge if !meta.merge_agent => {
                self.merge_without_agent(work, step);
                false
            }
            _ => {
                let model = self.model_for(&meta);
                if !self.agent_slot_free()
                    || !self.model_free(&model)
                    || self.budget_stop().is_some()
                {
                    return false;
                }
                self.start_agent(work, step, &meta, model, side)
            }
        }
    }

    /// A merge step goes to the daemon's merge first: git merges the target into the branch
    /// when it can, and the merge agent runs only for a conflict.
    fn merge_without_agent(&mut self, work: &BeadId, step: &Bead) {
        let started = EventBody::MergeStarted {
            bead: work.clone(),
            step: step.id.clone(),
        };
        // Not written: the storage error stops scheduling, and this runs again after.
        if self.record(vec![started]).is_ok() {
            self.start_merges();
        }
    }

    fn wait_for_approval(&mut self, work: &BeadId, step: &Bead) {
        // Not written: the storage error stops scheduling, and this runs again after.
        let _ = self.record(vec![
            EventBody::BeadStatus {
                id: step.id.clone(),
                status: Status::InProgress,
                reason: None,
            },
            EventBody::GateWaiting {
                bead: work.clone(),
                step: step.id.clone(),
            },
        ]);
    }

    fn start_agent(
        &mut self,
        work: &BeadId,
        step: &Bead,
        meta: &StepMeta,
        model: String,
        side: bool,
    ) -> bool {
        let attempt = meta.attempts + 1;
        let dispatched = EventBody::StepDispatched {
            bead: work.clone(),
            step: step.id.clone(),
            attempt,
            model: Some(model.clone()),
        };
        if self.record(vec![dispatched]).is_err() {
            return false;
        }
        let job = match self.step_job(work, step, meta, attempt, &model, side) {
            Ok(job) => job,
            Err(e) => {
                tracing::error!(step = %step.id, error = %e, "cannot prepare the step");
                let done = match e.unavailable() {
                    Some(cause) => runner::StepDone::unavailable(
                        work,
                        &step.id,
                        meta.role,
                        attempt,
                        cause,
                        e.to_string(),
                    ),
                    None => {
                        runner::StepDone::failed(work, &step.id, meta.role, attempt, e.to_string())
                    }
                };
                let result = self.step_done(&done);
                self.keep_if_unwritten(result, Input::StepDone(Box::new(done)));
                return false;
            }
        };
        tracing::info!(bead = %work, step = %step.id, attempt, %model, side, "dispatched");
        let model_name = model.clone();
        let cancel = self.tasks.agents.child_token();
        // A merge agent resolves conflicts where the merge happens: here.
        let remote = self.remote.clone().filter(|_| meta.role != Role::Merge);
        self.dispatch.running.insert(
            step.id.clone(),
            Running {
                work: work.clone(),
                side,
                step: step.id.clone(),
                attempt,
                model: Some(model),
                started: Instant::now(),
                cancel: cancel.clone(),
                stop_blocked: false,
                remote: remote.is_some(),
                worker: None,
                in_slot: remote.is_none().then(|| job.in_slot()),
            },
        );
        let (work, id, role) = (work.clone(), step.id.clone(), meta.role);
        let failed = move |why| runner::StepDone::failed(&work, &id, role, attempt, why);
        match remote {
            Some(remote) => {
                let tx = self.tasks.tx.clone();
                let step = step.id.clone();
                let started = move |worker: String| {
                    let _ = tx.try_send(Input::StepStarted {
                        step,
                        attempt,
                        worker,
                    });
                };
                let run = runner::run_on_worker(job, cancel, remote, model_name, started);
                self.tasks.attempt(run, failed);
            }
            None => {
                let ask = super::input::hook_asker(self.tasks.tx.clone());
                self.tasks
                    .attempt(runner::run_agent_step(job, cancel, ask), failed);
            }
        }
        true
    }

    /// A worker took the attempt `attempt` of `step`: recorded, and shown in `status`, if
    /// that attempt still runs.
    pub(super) fn step_started(&mut self, step: &BeadId, attempt: u32, worker: String) {
        let Some(running) = self
            .dispatch
            .running
            .get_mut(step)
            .filter(|r| r.attempt == attempt)
        else {
            return;
        };
        running.worker = Some(worker.clone());
        let started = EventBody::StepStarted {
            bead: running.work.clone(),
            step: step.clone(),
            attempt,
            worker,
        };
        // Not written: the storage error is reported; the attempt runs on.
        let _ = self.record(vec![started]);
    }

    fn start_gate(&mut self, work: &BeadId, step: &Bead, meta: &StepMeta) -> bool {
        let attempt = meta.attempts + 1;
        let config = &self.loaded.config;
        let sandbox = if meta.unconfined {
            if nix::unistd::geteuid().is_root() && !config.allow_unconfined_root {
                let reason = format!(
                    "gate `{}` says `sandbox = \"none\"`, and the daemon runs as root, so its commands would hold every capability; take that line out of the formula, run the daemon as an unprivileged user, or set `allow_unconfined_root = true`",
                    meta.step
                );
                let _ = self.block_bead(work, Some(&step.id), &reason);
                return false;
            }
            tracing::warn!(step = %step.id, "this gate runs unconfined (`sandbox = \"none\"` in its formula)");
            None
        } else {
            self.loaded.gate_sandbox.clone()
        };
        let dispatched = EventBody::StepDispatched {
            bead: work.clone(),
            step: step.id.clone(),
            attempt,
            model: None,
        };
        if self.record(vec![dispatched]).is_err() {
            return false;
        }
        let config = &self.loaded.config;
        let job = GateJob {
            sandbox,
            work: work.clone(),
            step: step.id.clone(),
            attempt,
            commands: meta.run.clone(),
            repo: self.repo.clone(),
            target: self.start_point(),
            run_dir: self.paths.run_dir(work, &meta.step, attempt),
            timeout: std::time::Duration::from_secs(
                meta.timeout.unwrap_or(config.gate_timeout_secs),
            ),
            grace: config.grace(),
            output_cap: config.output_cap_bytes,
            max_processes: config.process_limit(),
            nice: config.agent_nice,
            reset_to: meta.reset_to.clone(),
        };
        let cancel = self.tasks.agents.child_token();
        self.dispatch.running.insert(
            step.id.clone(),
            Running {
                work: work.clone(),
                side: false,
                step: step.id.clone(),
                attempt,
                model: None,
                started: Instant::now(),
                cancel: cancel.clone(),
                stop_blocked: false,
                remote: false,
                worker: None,
                in_slot: None,
            },
        );
        let (work, id, role) = (work.clone(), step.id.clone(), meta.role);
        self.tasks
            .attempt(runner::run_gate_step(job, cancel), move |why| {
                runner::StepDone::failed(&work, &id, role, attempt, why)
            });
        true
    }

    /// Pours ready work beads while there is room for their first step.
    fn pour_ready(&mut self) {
        let free = self
            .agent_limit()
            .saturating_sub(self.dispatch.agents_running());
        if free == 0 {
            return;
        }
        // One pass over the ready list: beads without a formula are not catalyst's work and
        // are passed over; a bead that does not pour is blocked and leaves the list.
        let now = crate::daemon::clock::now();
        let candidates: Vec<(Bead, String)> = self
            .store
            .state()
            .ready(now)
            .filter(|b| !self.dispatch.busy(&b.id))
            // The formula first: a bead without one is passed over without being copied.
            .filter_map(|b| self.formula_name(b).map(|name| (b.clone(), name)))
            .take(free)
            .collect();
        for (bead, name) in candidates {
            if !self.agent_slot_free() {
                return;
            }
            self.pour_bead(&bead, &name);
        }
    }

    /// The formula a work bead runs: its `formula:<name>` label, else the configured default.
    pub(super) fn formula_name(&self, bead: &Bead) -> Option<String> {
        bead.formula_label()
            .map(str::to_owned)
            .or_else(|| Some(self.loaded.config.default_formula.clone()).filter(|d| !d.is_empty()))
    }

    /// Pours `bead`'s formula and dispatches its first step. A bead whose formula is unknown
    /// or does not pour is blocked with the reason.
    fn pour_bead(&mut self, bead: &Bead, name: &str) -> bool {
        if self.store.state().steps(bead.id.as_str()).next().is_some() {
            // Poured before (a reopened bead): run what is left of the molecule.
            let resumed = self.record(vec![EventBody::BeadStatus {
                id: bead.id.clone(),
                status: Status::InProgress,
                reason: None,
            }]);
            if resumed.is_ok() {
                self.active.insert(bead.id.clone());
                self.dispatch_ready_steps(&bead.id);
            }
            return resumed.is_ok();
        }
        let poured = match self.loaded.formulas.get(name) {
            None => Err(self.unknown_formula(name)),
            Some(formula) => {
                let vars = formula_vars(bead);
                // The config's aspects, then the bead's own (`aspect:<name>` labels).
                let mut aspects = self.loaded.config.aspects.clone();
                aspects.extend(
                    bead.labels
                        .iter()
                        .filter_map(|l| l.strip_prefix(ASPECT_LABEL))
                        .map(str::to_owned),
                );
                self.loaded
                    .formulas
                    .with_aspects(formula, &aspects)
                    .map_err(|e| e.to_string())
                    .and_then(|f| {
                        f.check_command_vars(&vars, vars_by_person(bead))
                            .and_then(|()| {
                                let vars = f.with_workspace_vars(vars, &self.loaded.config.vars);
                                pour(&f, bead, &vars, crate::daemon::clock::now())
                            })
                            .map_err(|e| e.to_string())
                    })
            }
        };
        let steps = match poured {
            Ok(steps) => steps,
            Err(reason) => {
                let reason = format!("cannot pour the formula: {reason}");
                let _ = self.block_bead(&bead.id, None, &reason);
                return false;
            }
        };
        let event = EventBody::MoleculePoured {
            bead: bead.id.clone(),
            formula: name.to_owned(),
            steps,
        };
        if self.record(vec![event]).is_err() {
            return false;
        }
        self.active.insert(bead.id.clone());
        self.dispatch_ready_steps(&bead.id);
        true
    }

    /// Removes a closed bead's worktree and branch in the background.
    pub(super) fn start_removal(&mut self, work: &BeadId) {
        if !self.git.removal_starts(work) {
            return;
        }
        let repo = self.repo.clone();
        let (work, lost) = (work.clone(), work.clone());
        self.tasks.blocking(
            move || {
                let result = repo.remove(&work).map_err(Into::into);
                Input::Removed { work, result }
            },
            |e| Input::Removed {
                work: lost,
                result: Err(GitTaskError::Panicked(e)),
            },
        );
    }

    /// When the earliest step that dispatch passed over for its backoff may start, as an
    /// instant for the engine's timer.
    pub(super) fn next_retry(&self) -> Option<Instant> {
        let now = crate::daemon::clock::now();
        let at = self.dispatch.next_retry(now)?;
        let wait = (at.to_utc() - now.to_utc()).to_std().unwrap_or_default();
        Some(Instant::now() + wait)
    }

    /// The earliest `defer_until` still ahead, as an instant for the engine's timer.
    pub(super) fn next_defer(&self) -> Option<Instant> {
        let now = crate::daemon::clock::now();
        let at = self.store.state().next_defer(now)?;
        let wait = (at.to_utc() - now.to_utc()).to_std().unwrap_or_default();
        Some(Instant::now() + wait)
    }

    /// Builds what an agent step's task needs.
    fn step_job(
        &self,
        work: &BeadId,
        step: &Bead,
        meta: &StepMeta,
        attempt: u32,
        model: &str,
        side: bool,
    ) -> Result<StepJob, JobError> {
        let settings = self.hook_settings(meta.role);
        let target = self.start_point();
        let from = JobSources {
            target: &target,
            state: self.store.state(),
            paths: &self.paths,
            repo: &self.repo,
            config: &self.loaded.config,
            prompts: &self.loaded.prompts,
            settings: &settings,
            sandbox: self.loaded.sandbox.as_deref(),
            slots: &self.slots,
        };
        StepJob::build(from, work, step, meta, attempt, model, side)
    }
}

/// A work bead's formula variables from `metadata.formula_vars` (strings only).
fn formula_vars(bead: &Bead) -> BTreeMap<String, String> {
    bead.metadata
        .as_ref()
        .and_then(|m| m.get(VARS_KEY))
        .and_then(|v| v.as_object())
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}
