//! The store's state as the fold of journal events, and the queries the daemon asks of it.
//!
//! [`State::check_group`] decides whether events may be applied without changing anything, so
//! that a group of events is validated before it is written; [`State::apply`] then cannot fail
//! for a checked event. Replay applies the same way, so a journal produces the same state every time.
//! The checks live in `check`, the readiness index in [`ready`], the board's lanes in `lane`.

use std::collections::BTreeMap;

use crate::domain::event::{BeadPatch, Event, EventBody};
use crate::domain::forge;
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, MergeHold, Phase, Status, StepMeta};
use crate::domain::router::Decision;

/// The work bead's metadata key for the total cost its agents reported, in US dollars.
pub const COST_KEY: &str = "catalyst_cost_usd";

/// The work bead's metadata key for its merge: the target branch and its tips before and after
/// (`{"target", "from", "to"}`), so what was merged can be shown once the branch is gone.
pub const MERGE_KEY: &str = "catalyst_merge";

/// The target branch and its tips before and after a work bead's merge, as recorded under
/// [`MERGE_KEY`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Merged {
    pub target: String,
    pub from: String,
    pub to: String,
}

/// The merge of a work bead, when it was merged.
pub fn merged(bead: &Bead) -> Option<Merged> {
    let value = bead.metadata.as_ref()?.get(MERGE_KEY)?;
    serde_json::from_value(value.clone()).ok()
}

/// What the agents of a work bead have reported spending, in US dollars.
pub fn spent(bead: &Bead) -> f64 {
    bead.metadata
        .as_ref()
        .and_then(|m| m.get(COST_KEY))
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0)
}
use crate::domain::budget::Spending;
use crate::domain::time::Timestamp;

mod check;
mod lane;
pub mod ready;

use check::{check_new_bead, Created};
pub use lane::Lane;
use ready::Graph;

/// Why a bead that others wait for will not get done by itself: it needs a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stuck {
    /// Its status is `blocked`.
    Blocked,
    /// `cancel` closed it: it will not merge.
    Cancelled,
    /// Closed before its molecule finished: its branch was not merged.
    Unmerged,
}

impl Stuck {
    /// Why `bead`, which a dependent waits for, is stuck, or `None` while it is on its way.
    pub fn of(bead: &Bead) -> Option<Stuck> {
        match &bead.status {
            Status::Blocked => Some(Stuck::Blocked),
            _ if bead.is_cancelled() => Some(Stuck::Cancelled),
            Status::Closed => Some(Stuck::Unmerged),
            _ => None,
        }
    }
}

/// Why an event cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("bead `{0}` does not exist")]
    NotFound(BeadId),
    #[error("bead `{0}` already exists")]
    Exists(BeadId),
    #[error("bead `{id}`: {problem}")]
    Invalid { id: BeadId, problem: String },
}

/// All beads, with readiness maintained as events arrive.
#[derive(Debug, Default)]
pub struct State {
    graph: Graph,
    /// The seq of the last event applied.
    seq: u64,
    /// The store's id, from the first `daemon.started` that named one.
    store: Option<String>,
    /// What the agents reported spending, by UTC day and in total.
    spending: Spending,
    /// By webhook name, the seq of the last event whose notice it was sent (or given up on):
    /// where its notifier goes on after a restart.
    notified: BTreeMap<String, u64>,
}

impl State {
    pub fn seq(&self) -> u64 {
        self.seq
    }

    pub fn get(&self, id: &str) -> Option<&Bead> {
        self.graph.bead(id)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.get(id).is_some()
    }

    /// Number of beads (steps included).
    /// The store's id: `None` for a store whose journal predates store ids, until the daemon
    /// starts on it again.
    pub fn store_id(&self) -> Option<&str> {
        self.store.as_deref()
    }

    /// What the agents reported spending.
    pub fn spending(&self) -> &Spending {
        &self.spending
    }

    /// By webhook name, the seq of the last event it was notified of.
    pub fn notified(&self) -> &BTreeMap<String, u64> {
        &self.notified
    }

    /// Sets what a snapshot recorded of the webhooks' progress.
    pub(crate) fn set_notified(&mut self, notified: BTreeMap<String, u64>) {
        self.notified = notified;
    }

    /// Sets the spending a snapshot recorded; for a snapshot written before it did, the total
    /// of what the beads record (the days before are not known).
    pub(crate) fn set_spending(&mut self, spending: Option<Spending>) {
        self.spending = spending.unwrap_or_else(|| Spending {
            total_usd: self.beads().map(spent).sum(),
            days: Default::default(),
        });
    }

    pub(crate) fn set_store_id(&mut self, store: Option<String>) {
        self.store = store;
    }

    pub fn len(&self) -> usize {
        self.graph.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every bead, in the order they entered the store (what export and snapshots write), not
    /// where a dependency first named it.
    pub fn beads(&self) -> impl Iterator<Item = &Bead> + '_ {
        self.graph.beads()
    }

    /// Work beads ready to be dispatched at `now`, by priority (0 first), then age, then id.
    /// Step beads are never in this list: they run as steps of their molecule.
    pub fn ready(&self, now: Timestamp) -> impl Iterator<Item = &Bead> + '_ {
        self.graph.ready(now)
    }

    /// Whether `id` is among the beads [`State::ready`] gives at `now`.
    pub fn is_ready(&self, id: &str, now: Timestamp) -> bool {
        self.graph
            .slot(id)
            .is_some_and(|s| self.graph.is_ready(s, now))
    }

    /// How many beads [`State::ready`] gives at `now` (without visiting them).
    pub fn ready_count(&self, now: Timestamp) -> usize {
        self.graph.ready_count(now)
    }

    /// The earliest `defer_until` after `now` among beads that are otherwise ready: when the
    /// ready list will next grow without an event.
    pub fn next_defer(&self, now: Timestamp) -> Option<Timestamp> {
        self.graph.deferred_after(now)
    }

    /// The step beads of `work`'s molecule, in the order they were created.
    pub fn steps<'a>(&'a self, work: &str) -> impl Iterator<Item = &'a Bead> + 'a {
        let children = self
            .graph
            .slot(work)
            .map(|s| self.graph.node(s).children.as_slice())
            .unwrap_or_default();
        children
            .iter()
            .filter_map(|c| self.graph.node(*c).bead.as_ref())
            .filter(|b| b.is_step())
    }

    /// The steps of `work`'s molecule that can run now: open, and nothing they need is open.
    pub fn ready_steps<'a>(&'a self, work: &str) -> impl Iterator<Item = &'a Bead> + 'a {
        self.steps(work).filter(|b| {
            b.status == Status::Open
                && self
                    .graph
                    .slot(b.id.as_str())
                    .is_some_and(|s| !self.graph.is_held(s))
        })
    }

    /// Whether `id` is held back by an open blocker, its own `blocked` status or a held-back
    /// ancestor.
    pub fn is_held(&self, id: &str) -> bool {
        self.graph.slot(id).is_some_and(|s| self.graph.is_held(s))
    }

    /// What `id` waits for: the beads its `blocks` (and `conditional-blocks`) dependencies name
    /// that exist and are not done (closed, not cancelled, every step closed: see
    /// [`ready`]), in the order the dependencies were added. A bead submitted `--after`
    /// another waits for it this way, until that one merged.
    pub fn open_blockers<'a>(&'a self, id: &str) -> impl Iterator<Item = &'a BeadId> + 'a {
        self.get(id)
            .into_iter()
            .flat_map(|b| b.dependencies.iter())
            .filter(|d| d.dep_type.is_blocking())
            .filter_map(|d| d.depends_on_id.bead())
            .filter(|target| {
                self.graph
                    .slot(target.as_str())
                    .is_some_and(|s| self.graph.holds_dependents(s))
            })
    }

    /// A bead whose id differs from `id` only in case: the store refuses such a pair, since on
    /// a case-insensitive file system they would share a worktree and a branch.
    pub fn case_twin(&self, id: &str) -> Option<&BeadId> {
        self.graph.case_twin(id)
    }

    /// Rebuilds readiness from scratch (what start-up from a snapshot does).
    pub fn recompute_readiness(&mut self) {
        self.graph.recompute();
    }

    /// Room for `n` more beads, allocated at once: loading a store bead by bead would otherwise
    /// copy its tables into fresh memory at every doubling (most of a snapshot start's time
    /// went to the kernel zeroing those pages).
    pub(crate) fn reserve(&mut self, n: usize) {
        self.graph.reserve(n);
    }

    /// Adds beads read from a snapshot or an import without per-bead propagation; call
    /// [`State::recompute_readiness`] afterwards.
    pub(crate) fn load_bead(&mut self, bead: Bead) -> Result<(), ApplyError> {
        if self.contains(bead.id.as_str()) {
            return Err(ApplyError::Exists(bead.id));
        }
        check_new_bead(&bead)?;
        self.graph.insert(bead, false);
        Ok(())
    }

    pub(crate) fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// Applies one event. The event is checked first, so a failure leaves the state unchanged.
    /// Takes the event by value so that replay moves beads into the store instead of copying.
    pub fn apply(&mut self, event: Event) -> Result<(), ApplyError> {
        self.check(&event.body, &mut Created::default())?;
        let ts = event.ts;
        match event.body {
            EventBody::BeadCreated {
                mut bead,
                by_person,
            } => {
                crate::domain::model::mark_vars_origin(&mut bead, by_person);
                self.graph.insert(*bead, true);
            }
            EventBody::BeadUpdated { id, patch } => self.apply_patch(&id, *patch, ts),
            EventBody::BeadStatus { id, status, reason } => {
                self.set_status(&id, status, reason, ts);
            }
            EventBody::BeadComment { id, comment } => {
                self.modify(&id, |b| {
                    b.comments.push(comment);
                    b.updated_at = ts;
                });
            }
            EventBody::MoleculePoured { bead, steps, .. } => {
                self.set_status(&bead, Status::InProgress, None, ts);
                for step in steps {
                    self.graph.insert(step, true);
                }
            }
            EventBody::FixCreated { step, fixes, .. } => {
                let fix = step.id.clone();
                self.graph.insert(*step, true);
                self.modify_meta(&fixes, |m| m.phase = Some(Phase::WaitingFix { fix }));
            }
            EventBody::StepDispatched {
                step,
                attempt,
                model,
                ..
            } => {
                self.set_status(&step, Status::InProgress, None, ts);
                self.modify_meta(&step, |m| {
                    m.attempts = attempt;
                    m.phase = Some(Phase::Running { attempt, model });
                });
            }
            EventBody::StepFinished {
                bead,
                step,
                cost_usd,
                ..
            } => {
                self.modify_meta(&step, |m| m.reset_to = None);
                if let Some(cost) = cost_usd.filter(|c| c.is_finite() && *c > 0.0) {
                    self.spending.add(cost, &ts);
                    self.modify(&bead, |b| {
                        let meta = b.metadata.get_or_insert_with(Default::default);
                        let total = meta.get(COST_KEY).and_then(|v| v.as_f64()).unwrap_or(0.0);
                        meta.insert(COST_KEY.into(), serde_json::Value::from(total + cost));
                    });
                }
            }
            EventBody::StepResult {
                step,
                summary,
                decision,
                counters,
                phase,
                ..
            } => {
                self.modify_meta(&step, |m| {
                    m.counters = counters;
                    if summary.is_some() {
                        m.summary = summary;
                    }
                    m.phase = phase;
                    m.next_model = match decision {
                        Decision::Escalate { model, .. } => Some(model),
                        _ => None,
                    };
                });
            }
            EventBody::StepRetry {
                step,
                manual,
                counted,
                not_before,
                ..
            } => {
                self.modify_meta(&step, |m| {
                    if manual {
                        m.counters = Default::default();
                        m.next_model = None;
                    } else if !counted {
                        m.uncounted = m.uncounted.saturating_add(1);
                    }
                    m.not_before = not_before;
                });
            }
            EventBody::StepEscalated {
                step, not_before, ..
            } => {
                self.modify_meta(&step, |m| m.not_before = not_before);
            }
            EventBody::StepInterrupted { step, reset_to, .. } => {
                self.modify_meta(&step, |m| {
                    m.phase = None;
                    m.uncounted = m.uncounted.saturating_add(1);
                    if reset_to.is_some() {
                        m.reset_to = reset_to;
                    }
                });
            }
            EventBody::GateWaiting { step, .. } => {
                self.modify_meta(&step, |m| m.phase = Some(Phase::WaitingApproval));
            }
            EventBody::MergeHeld {
                step,
                commit,
                files,
                ..
            } => {
                self.modify_meta(&step, |m| {
                    m.phase = Some(Phase::WaitingApproval);
                    m.hold = Some(MergeHold {
                        commit,
                        files,
                        approved: false,
                    });
                });
            }
            EventBody::MergeStarted { step, .. } => {
                self.set_status(&step, Status::InProgress, None, ts);
                self.modify_meta(&step, |m| m.phase = Some(Phase::Merging));
            }
            EventBody::MergeConflict {
                step: Some(step), ..
            } => {
                self.set_status(&step, Status::Open, None, ts);
                self.modify_meta(&step, |m| {
                    m.phase = None;
                    m.merge_agent = true;
                });
            }
            EventBody::MergeApproved { step, commit, .. } => {
                self.modify_meta(&step, |m| {
                    m.phase = Some(Phase::Merging);
                    if let Some(hold) = m.hold.as_mut().filter(|h| h.commit == commit) {
                        hold.approved = true;
                    }
                });
            }
            EventBody::MergeCompleted {
                bead,
                target,
                from,
                to,
            } => {
                let merged = Merged { target, from, to };
                self.modify(&bead, |b| {
                    let meta = b.metadata.get_or_insert_with(Default::default);
                    let value = serde_json::to_value(&merged).unwrap_or_default();
                    meta.insert(MERGE_KEY.into(), value);
                });
            }
            EventBody::ForgePushed {
                bead,
                step,
                number,
                url,
                head,
            } => {
                self.set_status(&step, Status::InProgress, None, ts);
                // A push ends a merge: a later conflict with the forge's target is a new one,
                // and the merge agent gets a turn for it.
                self.modify_meta(&step, |m| {
                    m.phase = Some(Phase::PullRequest { number });
                    m.merge_agent = false;
                });
                self.modify(&bead, |b| {
                    forge::modify_link(b, |link| {
                        let same = link.pull_request.take().filter(|p| p.number == number);
                        link.pull_request = Some(forge::PullRequestLink {
                            number,
                            url,
                            head,
                            outdated: false,
                            ..same.unwrap_or_default()
                        });
                    })
                });
            }
            EventBody::ForgeFeedback {
                bead,
                number,
                seen_review,
                seen_comment,
                answered_checks,
            } => {
                self.modify(&bead, |b| {
                    forge::modify_link(b, |link| {
                        if let Some(pr) = link.pull_request.as_mut().filter(|p| p.number == number)
                        {
                            pr.seen_review = seen_review;
                            pr.seen_comment = seen_comment;
                            pr.answered_checks = answered_checks;
                        }
                    })
                });
            }
            EventBody::ForgeOutdated { bead, step, number } => {
                let waiting = Some(Phase::PullRequest { number });
                if self.get(step.as_str()).and_then(|s| s.step_meta()?.phase) == waiting {
                    self.modify_meta(&step, |m| m.phase = Some(Phase::Merging));
                    self.modify(&bead, |b| {
                        forge::modify_link(b, |link| {
                            if let Some(pr) = link.pull_request.as_mut() {
                                pr.outdated = true;
                            }
                        })
                    });
                }
            }
            EventBody::ForgeIssueWritten { bead, write, .. } => {
                self.modify(&bead, |b| {
                    forge::modify_link(b, |link| forge::note_written(link, write))
                });
            }
            EventBody::StepStarted { .. }
            | EventBody::ForgePaused { .. }
            | EventBody::ForgeResumed {}
            | EventBody::GatePassed { .. }
            | EventBody::GateFailed { .. }
            | EventBody::MergeConflict { step: None, .. }
            | EventBody::WorktreeRemoved { .. }
            | EventBody::AgentTool { .. }
            | EventBody::ModelPaused { .. }
            | EventBody::DispatchPaused { .. }
            | EventBody::BudgetReached { .. }
            | EventBody::ClusterRefused { .. }
            | EventBody::DaemonStopping { .. } => {}
            EventBody::NotifySent { hook, event, .. }
            | EventBody::NotifyFailed { hook, event, .. } => {
                self.notified.insert(hook, event);
            }
            EventBody::DaemonStarted { store, .. } => {
                if self.store.is_none() {
                    self.store = store;
                }
            }
        }
        self.seq = event.seq;
        Ok(())
    }

    /// Changes catalyst's metadata of a step bead (nothing happens to a bead without it).
    fn modify_meta(&mut self, id: &BeadId, change: impl FnOnce(&mut StepMeta)) {
        self.modify(id, |b| {
            if let Some(mut meta) = b.step_meta() {
                change(&mut meta);
                b.set_step_meta(&meta);
            }
        });
    }

    fn modify(&mut self, id: &BeadId, change: impl FnOnce(&mut Bead)) {
        if let Some(slot) = self.graph.slot(id.as_str()) {
            self.graph.update(slot, change);
        }
    }

    /// Sets a status with the timestamps beads keeps: `started_at` on the first move to
    /// `in_progress`, `closed_at` and `close_reason` exactly while closed.
    fn set_status(&mut self, id: &BeadId, status: Status, reason: Option<String>, ts: Timestamp) {
        self.modify(id, |b| {
            if status == Status::InProgress && b.started_at.is_none() {
                b.started_at = Some(ts);
            }
            if status.is_closed() {
                b.closed_at = Some(ts);
                b.close_reason = reason;
            } else {
                b.closed_at = None;
                b.close_reason = None;
            }
            // A phase describes an in-progress step; it ends with the status.
            if status != Status::InProgress {
                if let Some(mut meta) = b.step_meta().filter(|m| m.phase.is_some()) {
                    meta.phase = None;
                    b.set_step_meta(&meta);
                }
            }
            b.status = status;
            b.updated_at = ts;
        });
    }

    fn apply_patch(&mut self, id: &BeadId, patch: BeadPatch, ts: Timestamp) {
        let Some(slot) = self.graph.slot(id.as_str()) else {
            return;
        };
        for dep in &patch.add_dependencies {
            if let Some(target) = dep.depends_on_id.bead() {
                self.graph.add_edge(slot, target, &dep.dep_type, true);
            }
        }
        for target in &patch.drop_after {
            self.graph.remove_blocker(slot, target);
        }
        self.graph.update(slot, |b| {
            let p = patch;
            if let Some(v) = p.title {
                b.title = v;
            }
            if let Some(v) = p.description {
                b.description = v;
            }
            if let Some(v) = p.design {
                b.design = v;
            }
            if let Some(v) = p.acceptance_criteria {
                b.acceptance_criteria = v;
            }
            if let Some(v) = p.notes {
                b.notes = v;
            }
            if let Some(v) = p.priority {
                b.priority = v;
            }
            if let Some(v) = p.issue_type {
                b.issue_type = v;
            }
            if let Some(v) = p.assignee {
                b.assignee = v;
            }
            if let Some(v) = p.labels {
                b.labels = v;
            }
            if let Some(v) = p.defer_until {
                b.defer_until = v;
            }
            if let Some(changes) = p.metadata {
                let meta = b.metadata.get_or_insert_with(Default::default);
                for (k, v) in changes {
                    if v.is_null() {
                        meta.remove(&k);
                    } else {
                        meta.insert(k, v);
                    }
                }
            }
            for dep in p.add_dependencies {
                let present = b
                    .dependencies
                    .iter()
                    .any(|d| d.depends_on_id == dep.depends_on_id && d.dep_type == dep.dep_type);
                if !present {
                    b.dependencies.push(dep);
                }
            }
            b.dependencies.retain(|d| {
                !(d.dep_type.is_blocking()
                    && d.depends_on_id
                        .bead()
                        .is_some_and(|t| p.drop_after.contains(t)))
            });
            b.updated_at = ts;
        });
    }
}

#[cfg(test)]
impl State {
    pub(crate) fn graph_fingerprint(&self) -> Vec<ready::Fingerprint> {
        self.graph.fingerprint()
    }
}
