//! The journal's events. Each journal line is one [`Event`]: `{"seq":N,"ts":"…","type":"…",…}`.
//!
//! The store's state is the fold of these events, so an event must carry everything its effect
//! needs (ids, values, its own timestamp): replaying a journal on another day gives the same
//! state. Events that only report what happened (dispatches, tool decisions) leave the bead
//! state alone and exist for the event stream and the audit trail.

use serde::{Deserialize, Deserializer, Serialize};

use crate::domain::id::BeadId;
use crate::domain::model::{is_zero, Bead, Comment, Counters, Dependency, JsonMap, Phase, Status};
use crate::domain::result::{ResultStatus, Verdict};
use crate::domain::router::Decision;
use crate::domain::time::Timestamp;
use crate::domain::unavailable::{PauseScope, Unavailable};

/// What a notice is about. A webhook takes the kinds it lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// A step waits for a person's `approve` (an approval step, or a merge held for its
    /// workflow files).
    Approval,
    /// The daemon blocked a bead: a person decides what comes next.
    Blocked,
    /// Dispatching paused on a failure no retry fixes (a key refused, an API unreachable).
    Paused,
    /// The agents' spending reached the daily or total budget.
    Budget,
    /// A bead's work reached the target branch.
    Merged,
}

impl NoticeKind {
    pub const ALL: [NoticeKind; 5] = [
        NoticeKind::Approval,
        NoticeKind::Blocked,
        NoticeKind::Paused,
        NoticeKind::Budget,
        NoticeKind::Merged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Approval => "approval",
            NoticeKind::Blocked => "blocked",
            NoticeKind::Paused => "paused",
            NoticeKind::Budget => "budget",
            NoticeKind::Merged => "merged",
        }
    }
}

impl std::fmt::Display for NoticeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One journal line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the journal, from 1, without gaps.
    pub seq: u64,
    /// When the event was recorded; the same for every event of one group commit.
    pub ts: Timestamp,
    /// Set on every event of a group commit but the last, so that replay can drop a group that
    /// was only partly written when the machine went down.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
    #[serde(flatten)]
    pub body: EventBody,
}

/// What happened. The `type` tag is the event's name in the event stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum EventBody {
    /// A bead entered the store (submitted, dropped in the inbox, imported, followed).
    /// `by_person`: a person submitted it on the control socket (`ctl submit`, the web form),
    /// so its formula vars may choose a gate's command ([`crate::domain::model::VARS_BY_PERSON_KEY`]).
    #[serde(rename = "bead.created")]
    BeadCreated {
        bead: Box<Bead>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_person: bool,
    },
    /// Fields of a bead changed (not its status: see `bead.status`).
    ///
    /// Like every event about a bead, it names it `bead` (journals written when the bead
    /// events said `id` read as well).
    #[serde(rename = "bead.updated")]
    BeadUpdated {
        #[serde(rename = "bead", alias = "id")]
        id: BeadId,
        patch: Box<BeadPatch>,
    },
    #[serde(rename = "bead.status")]
    BeadStatus {
        #[serde(rename = "bead", alias = "id")]
        id: BeadId,
        status: Status,
        /// Why: the close reason when closing, what blocked it when blocking.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    #[serde(rename = "bead.comment")]
    BeadComment {
        #[serde(rename = "bead", alias = "id")]
        id: BeadId,
        comment: Comment,
    },
    /// A work bead's formula was poured: the bead becomes `in_progress` and gains its steps.
    #[serde(rename = "molecule.poured")]
    MoleculePoured {
        bead: BeadId,
        formula: String,
        steps: Vec<Bead>,
    },
    /// A fix step was created at run time for a rejected review, a failed gate or a rejection by
    /// a person.
    #[serde(rename = "fix.created")]
    FixCreated {
        bead: BeadId,
        /// The step the fix answers; it runs again once the fix closes.
        fixes: BeadId,
        iteration: u32,
        step: Box<Bead>,
    },
    /// An attempt of a step is about to start. Recorded before the agent (or gate) is spawned.
    #[serde(rename = "step.dispatched")]
    StepDispatched {
        bead: BeadId,
        step: BeadId,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// A worker on another machine took an attempt (`[cluster]`): the attempt was handed out
    /// at its `step.dispatched`, and runs on `worker` from now on.
    #[serde(rename = "step.started")]
    StepStarted {
        bead: BeadId,
        step: BeadId,
        attempt: u32,
        worker: String,
    },
    /// An attempt ended: how the process ended, what it cost, the daemon's commit.
    #[serde(rename = "step.finished")]
    StepFinished {
        bead: BeadId,
        step: BeadId,
        attempt: u32,
        /// `exit code 0`, `killed by SIGKILL`, `timed out after 600s`, …
        exit: String,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// The commit the daemon made of the agent's work, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
    },
    /// What the router made of an attempt.
    #[serde(rename = "step.result")]
    StepResult {
        bead: BeadId,
        step: BeadId,
        attempt: u32,
        /// `finished`, `malformed`, `failed`, `usage_limit`, `gate_passed`, …
        outcome: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ResultStatus>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verdict: Option<Verdict>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        decision: Decision,
        /// The step's counters after the decision.
        counters: Counters,
        /// Where the step goes on from here while it stays in progress.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        phase: Option<Phase>,
    },
    /// The step runs again (after a failed attempt, a usage limit, or a person's `retry`).
    #[serde(rename = "step.retry")]
    StepRetry {
        bead: BeadId,
        step: BeadId,
        reason: String,
        /// Whether the failed attempt counts against the step's attempts.
        counted: bool,
        /// A person asked: the step's counters start over.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        manual: bool,
        /// The next attempt does not start before this (the router's backoff).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_before: Option<Timestamp>,
    },
    /// The step's next attempt runs with the escalation model.
    #[serde(rename = "step.escalated")]
    StepEscalated {
        bead: BeadId,
        step: BeadId,
        model: String,
        reason: String,
        /// The escalated attempt does not start before this.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_before: Option<Timestamp>,
    },
    /// The daemon stopped while an attempt ran; the attempt does not count and the step runs
    /// again from `reset_to`.
    #[serde(rename = "step.interrupted")]
    StepInterrupted {
        bead: BeadId,
        step: BeadId,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reset_to: Option<String>,
    },
    #[serde(rename = "gate.waiting")]
    GateWaiting { bead: BeadId, step: BeadId },
    #[serde(rename = "gate.passed")]
    GatePassed {
        bead: BeadId,
        step: BeadId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    #[serde(rename = "gate.failed")]
    GateFailed {
        bead: BeadId,
        step: BeadId,
        output: String,
    },
    /// The target branch moved to the bead's branch.
    #[serde(rename = "merge.completed")]
    MergeCompleted {
        bead: BeadId,
        target: String,
        from: String,
        to: String,
    },
    /// A merge step whose branch the daemon merges itself: no agent runs unless the target
    /// cannot be merged into the branch cleanly.
    #[serde(rename = "merge.started")]
    MergeStarted { bead: BeadId, step: BeadId },
    /// The target could not be moved (yet): not up to date, or a dirty checkout. With `step`,
    /// the daemon could not merge the target into the branch itself (`files` conflict): the
    /// step goes to the merge agent.
    #[serde(rename = "merge.conflict")]
    MergeConflict {
        bead: BeadId,
        target: String,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<BeadId>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<String>,
    },
    /// The bead's change touches workflow files: its merge waits for a person's approval of
    /// the branch tip `commit`.
    #[serde(rename = "merge.held")]
    MergeHeld {
        bead: BeadId,
        step: BeadId,
        commit: String,
        files: Vec<String>,
    },
    /// A person approved the held change at `commit`; the merge goes on.
    #[serde(rename = "merge.approved")]
    MergeApproved {
        bead: BeadId,
        step: BeadId,
        commit: String,
    },
    /// A closed bead's worktree and branch were removed.
    #[serde(rename = "worktree.removed")]
    WorktreeRemoved { bead: BeadId },
    /// A hook decision about an agent's tool use.
    #[serde(rename = "agent.tool")]
    AgentTool {
        bead: BeadId,
        step: BeadId,
        tool: String,
        allowed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// What the call was about: the file or the command, on one short line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
    /// A model reported a usage limit; it gets no new steps until `until`.
    #[serde(rename = "model.paused")]
    ModelPaused {
        model: String,
        until: Timestamp,
        reason: String,
    },
    /// A failure no retry of the step can fix (a refused key, an unreachable API, an agent that
    /// cannot run, a step the daemon cannot prepare): no step of `scope` starts until `until`
    /// or a person's `resume`. `help` says what a person can do.
    #[serde(rename = "dispatch.paused")]
    DispatchPaused {
        scope: PauseScope,
        cause: Unavailable,
        until: Timestamp,
        reason: String,
        help: String,
    },
    /// The agents' spending reached `daily_budget_usd` (`scope` `daily`, until the next UTC
    /// day) or `total_budget_usd` (`total`, until the limit is raised): no agent attempt
    /// starts meanwhile.
    #[serde(rename = "budget.reached")]
    BudgetReached {
        scope: crate::domain::budget::BudgetScope,
        spent_usd: f64,
        budget_usd: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<Timestamp>,
    },
    /// `store` names the store: made when its journal is new (the first event) and the same
    /// at every start after; the daemon's branches carry it (docs/worktrees.md). Journals
    /// written before store ids have none until the next start records one.
    /// A message on the cluster's subjects that the daemon did not take (`[cluster]`): not
    /// signed, signed by a key it does not trust for its sender, or from a worker that does
    /// not hold the attempt it speaks of. `from` is the sender its subject names, `what` the
    /// kind of message (`end`, `lease`, `presence`).
    #[serde(rename = "cluster.refused")]
    ClusterRefused {
        from: String,
        what: String,
        reason: String,
    },
    /// The bead's branch was pushed to the forge and its pull request opened or brought up
    /// to date: its merge step waits for the pull request (`[forge]`).
    #[serde(rename = "forge.pushed")]
    ForgePushed {
        bead: BeadId,
        step: BeadId,
        number: u64,
        url: String,
        /// The commit pushed.
        head: String,
    },
    /// The bead's pull request asked for changes (reviews, comments on lines, failing
    /// checks); the fix step follows. The marks are how far that was acted on.
    #[serde(rename = "forge.feedback")]
    ForgeFeedback {
        bead: BeadId,
        number: u64,
        seen_review: u64,
        seen_comment: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answered_checks: Option<String>,
    },
    /// The forge cannot merge pull request `number`, and its target as fetched has moved on
    /// from the branch: the merge step goes back to `merging`, where the target is merged into
    /// the branch (by the daemon, or its merge agent for a conflict) and pushed again.
    #[serde(rename = "forge.outdated")]
    ForgeOutdated {
        bead: BeadId,
        step: BeadId,
        number: u64,
    },
    /// A write to the bead's forge issue was done, or given up with `error`: never again.
    #[serde(rename = "forge.issue_written")]
    ForgeIssueWritten {
        bead: BeadId,
        issue: u64,
        write: crate::domain::forge::IssueWrite,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Forge work (pushes, pull requests, issues) waits until `until`: the forge's rate limit,
    /// an outage, or a refusal of the whole poll (a revoked token, a missing permission).
    /// `refusals`: how many refusals in a row this pause is, since forge work last went on
    /// (0: not a refusal); the first is a notice, since only a person can end them. Local work
    /// goes on.
    #[serde(rename = "forge.paused")]
    ForgePaused {
        until: Timestamp,
        reason: String,
        #[serde(default, skip_serializing_if = "is_zero")]
        refusals: u32,
    },
    /// The forge answered again after a pause.
    #[serde(rename = "forge.resumed")]
    ForgeResumed {},
    /// A webhook took the notice of event `event` (its seq), at the `tries`th try.
    #[serde(rename = "notify.sent")]
    NotifySent {
        hook: String,
        event: u64,
        kind: NoticeKind,
        tries: u32,
    },
    /// A webhook did not take the notice of event `event` in `tries` tries; the notifier went
    /// on to the next. `error` is the last try's.
    #[serde(rename = "notify.failed")]
    NotifyFailed {
        hook: String,
        event: u64,
        kind: NoticeKind,
        tries: u32,
        error: String,
    },
    #[serde(rename = "daemon.started")]
    DaemonStarted {
        pid: u32,
        version: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        store: Option<String>,
    },
    #[serde(rename = "daemon.stopping")]
    DaemonStopping {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl EventBody {
    /// Every event's `type` name, in the order of [`EventBody`].
    pub const KINDS: [&'static str; 37] = [
        "bead.created",
        "bead.updated",
        "bead.status",
        "bead.comment",
        "molecule.poured",
        "fix.created",
        "step.dispatched",
        "step.started",
        "step.finished",
        "step.result",
        "step.retry",
        "step.escalated",
        "step.interrupted",
        "gate.waiting",
        "gate.passed",
        "gate.failed",
        "merge.completed",
        "merge.started",
        "merge.conflict",
        "merge.held",
        "merge.approved",
        "worktree.removed",
        "agent.tool",
        "model.paused",
        "dispatch.paused",
        "budget.reached",
        "cluster.refused",
        "forge.pushed",
        "forge.feedback",
        "forge.outdated",
        "forge.issue_written",
        "forge.paused",
        "forge.resumed",
        "notify.sent",
        "notify.failed",
        "daemon.started",
        "daemon.stopping",
    ];

    /// The event's `type` name.
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::BeadCreated { .. } => "bead.created",
            EventBody::BeadUpdated { .. } => "bead.updated",
            EventBody::BeadStatus { .. } => "bead.status",
            EventBody::BeadComment { .. } => "bead.comment",
            EventBody::MoleculePoured { .. } => "molecule.poured",
            EventBody::FixCreated { .. } => "fix.created",
            EventBody::StepDispatched { .. } => "step.dispatched",
            EventBody::StepStarted { .. } => "step.started",
            EventBody::StepFinished { .. } => "step.finished",
            EventBody::StepResult { .. } => "step.result",
            EventBody::StepRetry { .. } => "step.retry",
            EventBody::StepEscalated { .. } => "step.escalated",
            EventBody::StepInterrupted { .. } => "step.interrupted",
            EventBody::GateWaiting { .. } => "gate.waiting",
            EventBody::GatePassed { .. } => "gate.passed",
            EventBody::GateFailed { .. } => "gate.failed",
            EventBody::MergeCompleted { .. } => "merge.completed",
            EventBody::MergeStarted { .. } => "merge.started",
            EventBody::MergeConflict { .. } => "merge.conflict",
            EventBody::MergeHeld { .. } => "merge.held",
            EventBody::MergeApproved { .. } => "merge.approved",
            EventBody::WorktreeRemoved { .. } => "worktree.removed",
            EventBody::AgentTool { .. } => "agent.tool",
            EventBody::ModelPaused { .. } => "model.paused",
            EventBody::DispatchPaused { .. } => "dispatch.paused",
            EventBody::BudgetReached { .. } => "budget.reached",
            EventBody::ClusterRefused { .. } => "cluster.refused",
            EventBody::ForgePushed { .. } => "forge.pushed",
            EventBody::ForgeFeedback { .. } => "forge.feedback",
            EventBody::ForgeOutdated { .. } => "forge.outdated",
            EventBody::ForgeIssueWritten { .. } => "forge.issue_written",
            EventBody::ForgePaused { .. } => "forge.paused",
            EventBody::ForgeResumed {} => "forge.resumed",
            EventBody::NotifySent { .. } => "notify.sent",
            EventBody::NotifyFailed { .. } => "notify.failed",
            EventBody::DaemonStarted { .. } => "daemon.started",
            EventBody::DaemonStopping { .. } => "daemon.stopping",
        }
    }

    /// The bead the event is about, for filtering a subscription by bead.
    pub fn bead(&self) -> Option<&BeadId> {
        match self {
            EventBody::BeadCreated { bead, .. } => Some(&bead.id),
            EventBody::BeadUpdated { id, .. }
            | EventBody::BeadStatus { id, .. }
            | EventBody::BeadComment { id, .. } => Some(id),
            EventBody::MoleculePoured { bead, .. }
            | EventBody::FixCreated { bead, .. }
            | EventBody::StepDispatched { bead, .. }
            | EventBody::StepStarted { bead, .. }
            | EventBody::StepFinished { bead, .. }
            | EventBody::StepResult { bead, .. }
            | EventBody::StepRetry { bead, .. }
            | EventBody::StepEscalated { bead, .. }
            | EventBody::StepInterrupted { bead, .. }
            | EventBody::GateWaiting { bead, .. }
            | EventBody::GatePassed { bead, .. }
            | EventBody::GateFailed { bead, .. }
            | EventBody::MergeCompleted { bead, .. }
            | EventBody::MergeStarted { bead, .. }
            | EventBody::MergeConflict { bead, .. }
            | EventBody::MergeHeld { bead, .. }
            | EventBody::MergeApproved { bead, .. }
            | EventBody::WorktreeRemoved { bead }
            | EventBody::ForgePushed { bead, .. }
            | EventBody::ForgeFeedback { bead, .. }
            | EventBody::ForgeOutdated { bead, .. }
            | EventBody::ForgeIssueWritten { bead, .. }
            | EventBody::AgentTool { bead, .. } => Some(bead),
            EventBody::ModelPaused { .. }
            | EventBody::DispatchPaused { .. }
            | EventBody::BudgetReached { .. }
            | EventBody::ClusterRefused { .. }
            | EventBody::ForgePaused { .. }
            | EventBody::ForgeResumed {}
            | EventBody::NotifySent { .. }
            | EventBody::NotifyFailed { .. }
            | EventBody::DaemonStarted { .. }
            | EventBody::DaemonStopping { .. } => None,
        }
    }
}

/// A change to a bead's fields. Absent fields are left alone; for the optional fields an
/// explicit `null` clears the value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BeadPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "double_option"
    )]
    pub description: Option<Option<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "double_option"
    )]
    pub design: Option<Option<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "double_option"
    )]
    pub acceptance_criteria: Option<Option<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "double_option"
    )]
    pub notes: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_type: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "double_option"
    )]
    pub assignee: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// Keys merged into `metadata`; a `null` value removes the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "double_option"
    )]
    pub defer_until: Option<Option<Timestamp>>,
    /// Dependencies added to the bead (an edge already present is not added twice).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_dependencies: Vec<Dependency>,
    /// Beads it no longer waits for: its `blocks` and `conditional-blocks` dependencies on them
    /// (what `after` adds) are removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop_after: Vec<BeadId>,
}

/// Distinguishes a field set to `null` (`Some(None)`) from an absent one (`None`).
fn double_option<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_line_shape() {
        let ev = Event {
            seq: 7,
            ts: Timestamp::parse("2026-01-26T02:02:08Z").unwrap(),
            more: false,
            body: EventBody::BeadStatus {
                id: BeadId::new("cat-1").unwrap(),
                status: Status::Closed,
                reason: Some("done".into()),
            },
        };
        let line = serde_json::to_string(&ev).unwrap();
        assert_eq!(
            line,
            r#"{"seq":7,"ts":"2026-01-26T02:02:08Z","type":"bead.status","bead":"cat-1","status":"closed","reason":"done"}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), ev);
    }

    #[test]
    fn patch_null_clears_and_absent_keeps() {
        let p: BeadPatch = serde_json::from_str(r#"{"notes":null,"title":"t"}"#).unwrap();
        assert_eq!(p.notes, Some(None));
        assert_eq!(p.design, None);
        assert_eq!(p.title.as_deref(), Some("t"));
    }

    #[test]
    fn unknown_event_type_is_an_error() {
        let err =
            serde_json::from_str::<Event>(r#"{"seq":1,"ts":"2026-01-26T02:02:08Z","type":"nope"}"#)
                .unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn every_listed_kind_is_an_event_type_and_its_own_kind() {
        let mut seen = std::collections::HashSet::new();
        for kind in EventBody::KINDS {
            assert!(seen.insert(kind), "`{kind}` is listed twice");
            // Fields are missing, but the type is known: serde names the field, not the type.
            let err = serde_json::from_value::<EventBody>(serde_json::json!({ "type": kind }))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(!err.contains("unknown variant"), "`{kind}`: {err}");
        }
        let stopping = EventBody::DaemonStopping { reason: None };
        assert!(EventBody::KINDS.contains(&stopping.kind()));
    }

    #[test]
    fn the_kinds_are_the_types_the_journals_document_lists() {
        // Subscriptions are checked against the kinds: a type missing here cannot be followed.
        let documented: Vec<&str> = include_str!("../../docs/journal.md")
            .lines()
            .filter_map(|l| l.strip_prefix("| `")?.split_once('`'))
            .map(|(kind, _)| kind)
            .filter(|kind| kind.contains('.'))
            .collect();
        assert_eq!(documented, EventBody::KINDS);
    }

    #[test]
    fn bead_events_name_their_bead_bead_and_read_journals_that_said_id() {
        let status = EventBody::BeadStatus {
            id: BeadId::new("cat-1").expect("id"),
            status: Status::Closed,
            reason: None,
        };
        let written = serde_json::to_value(&status).expect("serialize");
        assert_eq!(written["bead"], "cat-1");
        assert!(written.get("id").is_none(), "{written}");
        for old in [
            r#"{"type":"bead.status","id":"cat-1","status":"closed"}"#,
            r#"{"type":"bead.comment","id":"cat-1","comment":{"id":1,"issue_id":"cat-1","author":"a","text":"t","created_at":"2026-01-01T00:00:00Z"}}"#,
            r#"{"type":"bead.updated","id":"cat-1","patch":{}}"#,
        ] {
            let read: EventBody = serde_json::from_str(old).expect(old);
            assert_eq!(read.bead().map(BeadId::as_str), Some("cat-1"), "{old}");
        }
    }
}
