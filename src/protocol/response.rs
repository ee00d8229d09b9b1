//! Response lines and the answer of each method.
//!
//! The answers were first written as JSON objects, whose keys serde_json prints in
//! alphabetical order; so that the wire stays the same, the fields of every answer are declared
//! in alphabetical order, and the stored records they carry (beads, import reports) are printed
//! with their keys sorted ([`sorted`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::error::RpcError;
use crate::domain::beads::import::ImportReport;
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Status};
use crate::domain::state::{Lane, Stuck};
use crate::domain::time::Timestamp;
use crate::domain::unavailable::{PauseScope, Unavailable};

/// One response line: `result` on success, `error` otherwise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response<T = Value> {
    /// The request's id; `null` when the request had none or could not be read.
    pub id: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<T>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

impl<T> Response<T> {
    pub fn ok(id: Value, result: T) -> Response<T> {
        Response {
            id,
            result: Some(result),
            error: None,
        }
    }

    pub fn err(id: Value, error: RpcError) -> Response<T> {
        Response {
            id,
            result: None,
            error: Some(error),
        }
    }

    pub fn answer(id: Value, answer: Result<T, RpcError>) -> Response<T> {
        match answer {
            Ok(result) => Response::ok(id, result),
            Err(error) => Response::err(id, error),
        }
    }
}

/// Serializes `value` with the keys of its objects in alphabetical order, as a
/// [`serde_json::Value`] prints them.
pub fn sorted<T: Serialize, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
}

/// Tells a key given as `null` (`Some(None)`) from an absent one (`None`).
pub fn double_option<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// `status`: the daemon, its beads and what runs now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusAnswer {
    /// The work beads in progress, as `list` gives them.
    pub active: Vec<BeadSummary>,
    /// Work beads by status.
    pub beads: BTreeMap<String, u64>,
    /// Blocked work beads, the latest first, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedBead>,
    /// Dispatching held back after a failure no retry fixes, with what to do about it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<DispatchHold>,
    /// Agent attempts held back because spending reached `daily_budget_usd` or
    /// `total_budget_usd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_stop: Option<BudgetStopView>,
    /// What the agents reported spending in this UTC day and over the store's life, in US
    /// dollars.
    #[serde(default)]
    pub spent_today_usd: f64,
    #[serde(default)]
    pub spent_total_usd: f64,
    /// The paused models of `paused_models`, with why and until when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_pauses: Vec<ModelPauseView>,
    pub paused: bool,
    pub paused_models: Vec<String>,
    pub pid: u32,
    pub ready: u64,
    pub running: Vec<RunningStep>,
    pub seq: u64,
    /// How many times the daemon fsynced the journal since it started: inputs that arrive
    /// together share one (`seq` counts the events).
    #[serde(default)]
    pub journal_syncs: u64,
    /// Step beads, of every status.
    pub steps: u64,
    pub stopping: bool,
    /// Set in cluster mode while no worker has said it is there: agent attempts wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_warning: Option<String>,
    /// The last reload that refused files, until one takes them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_reload: Option<RefusedReload>,
    pub storage_error: Option<String>,
    pub version: String,
    pub waiting_approval: Vec<BeadId>,
    /// The merge steps among `waiting_approval` that wait because their bead's change touches
    /// workflow files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_merges: Vec<HeldMerge>,
    /// The pull requests on the forge that bead merges wait for people to review and merge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_requests: Vec<WaitingPullRequest>,
    /// Forge work waits (a rate limit, an outage, a refusal of every call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge_paused: Option<ForgePause>,
    pub workspace: PathBuf,
}

/// A bead whose merge waits for its pull request on the forge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingPullRequest {
    pub bead: BeadId,
    pub number: u64,
    pub url: String,
}

/// Forge work waiting, as the last `forge.paused` said.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgePause {
    pub until: crate::domain::time::Timestamp,
    pub reason: String,
}

/// A blocked work bead in `status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedBead {
    pub id: BeadId,
    pub title: String,
    /// The daemon's last `BLOCKED` comment, or the reason a person gave.
    pub reason: Option<String>,
}

/// Dispatching held back (see the `dispatch.paused` event).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatchHold {
    pub scope: PauseScope,
    pub cause: Unavailable,
    pub reason: String,
    pub help: String,
    pub until: Timestamp,
}

/// Agent attempts held by a spending limit, with why and what to do, in words.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetStopView {
    #[serde(flatten)]
    pub stop: crate::domain::budget::BudgetStop,
    pub reason: String,
    pub help: String,
}

impl From<crate::domain::budget::BudgetStop> for BudgetStopView {
    fn from(stop: crate::domain::budget::BudgetStop) -> BudgetStopView {
        BudgetStopView {
            reason: stop.reason(),
            help: stop.help().to_owned(),
            stop,
        }
    }
}

/// A paused model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelPauseView {
    pub model: String,
    pub reason: String,
    /// `None` when a person paused it (until they resume it).
    pub until: Option<Timestamp>,
}

/// A merge that waits for a person because the bead's change touches workflow files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldMerge {
    pub bead: BeadId,
    pub step: BeadId,
    /// The branch tip an approval covers.
    pub commit: String,
    pub files: Vec<String>,
}

/// The board's columns (an engine answer the dashboard asks for, not a socket method): each
/// lane with how many work beads it holds and the first of them as cards.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BoardAnswer {
    /// Every lane, in [`Lane::ALL`]'s order.
    pub lanes: Vec<LaneCards>,
}

/// One column of the board: the ready beads in dispatch order, the others most recently
/// changed first, at most as many as were asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneCards {
    pub cards: Vec<Card>,
    pub lane: Lane,
    /// How many work beads the lane holds.
    pub total: u64,
}

/// A work bead on the board: its `list` line and what its lane needs said about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Card {
    /// Its steps that wait for a person's approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Approval>,
    #[serde(flatten)]
    pub bead: BeadSummary,
    /// Why it is blocked (the daemon's last `BLOCKED` comment), when its status is `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_reason: Option<String>,
}

/// A step that waits for a person's approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// For a merge held because the change touches workflow files: those files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_files: Vec<String>,
    /// The step's name in its formula.
    pub name: String,
    pub step: BeadId,
}

/// A step whose agent (or gate) runs now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunningStep {
    pub attempt: u32,
    /// The work bead; only in `status`, where the running steps are listed on their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bead: Option<BeadId>,
    pub elapsed_ms: u64,
    /// `None` for a gate.
    pub model: Option<String>,
    pub step: BeadId,
    /// The worker on another machine that runs it (`[cluster]`), once one took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Its worktree and run folder are ready and its agent waits for one of the `max_agents`
    /// agent slots (steps are dispatched a little ahead of their turn): no agent runs yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waiting_for_slot: bool,
    /// Handed to the cluster's workers and not taken by one yet: no agent runs yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waiting_for_worker: bool,
}

/// One line of `list`: a bead and its molecule's progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeadSummary {
    pub close_reason: Option<String>,
    pub closed_at: Option<Timestamp>,
    /// What its agents reported spending, in US dollars, when they reported anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    pub created_at: Timestamp,
    /// The step in progress or blocked, by its name in the formula.
    pub current: Option<String>,
    pub done: u64,
    pub formula: Option<String>,
    pub id: BeadId,
    pub priority: u8,
    pub running: Option<RunningStep>,
    pub status: Status,
    /// Those of `waiting_for` that will not get done by themselves, and why: a person must
    /// retry, reopen or finish them, or drop the dependency.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stuck_on: BTreeMap<BeadId, Stuck>,
    pub title: String,
    pub total: u64,
    /// The beads a work bead that is not closed waits for (`--after`, `blocks`): those not
    /// done yet (a cancelled one, or one closed before its merge, is not done).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<BeadId>,
}

/// `workers`: whether agents run on other machines, and the workers that said they were
/// there lately.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkersAnswer {
    /// Whether `[cluster]` is on; without it agents run on the daemon's machine.
    pub cluster: bool,
    pub workers: Vec<WorkerView>,
}

/// A worker, as its last presence message said.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerView {
    pub name: String,
    pub slots: usize,
    /// Empty: every model.
    pub models: Vec<String>,
    /// The steps it runs.
    pub running: Vec<BeadId>,
    /// How long ago it last said it was there.
    pub seen_ms: u64,
    /// Why it takes no orders for now (it could not prepare its last attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trouble: Option<String>,
}

/// `list` and `ready`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeadList {
    pub beads: Vec<BeadSummary>,
    /// How many beads matched before `offset` and `limit`; only when the request had either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// `submit`: the new beads' ids and the seq of the last event written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Submitted {
    pub ids: Vec<BeadId>,
    pub seq: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Updated {
    pub updated: String,
}

/// `comment`: the new comment's id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Commented {
    pub comment: i64,
}

/// `close` and `reopen`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusChanged {
    pub id: BeadId,
    pub status: Status,
}

/// `approve`: the approval step that passed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Approved {
    pub approved: BeadId,
}

/// `reject`: the approval step that was rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    pub rejected: BeadId,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Retried {
    pub retried: BeadId,
}

/// `cancel`: done at once, or once the running agent has stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cancelled {
    Cancelling(BeadId),
    Cancelled(BeadId),
}

/// `pause` and `resume`: what is paused now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PauseState {
    pub paused: bool,
    pub paused_models: Vec<String>,
}

/// `reload`: whether every file was taken, and those that were not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reloaded {
    pub reloaded: bool,
    /// Files the reload refused, with why; what each held before stays in force.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedFile>,
}

/// A workflow file (the config, the prompts, a formula) that a reload refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedFile {
    pub file: String,
    pub reason: String,
}

/// The last reload that refused files, in `status` until a reload takes every file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedReload {
    pub at: crate::domain::time::Timestamp,
    pub files: Vec<RefusedFile>,
}

/// `shutdown`, answered by the connection before the daemon stops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stopping {
    pub stopping: bool,
}

/// The daemon's answer to a `hook` request, which `catalyst hook` turns into Claude Code's
/// hook output.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookAnswer {
    /// `SessionStart`: text added to the agent's context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    /// `PreToolUse`: allow or deny the call. `Stop`: allow or block the stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<HookDecision>,
    /// Why, for the agent (a denial or block) or for the log (an allow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl HookAnswer {
    /// The answer to a tool call of an agent in `role`, decided `verdict`.
    pub fn for_tool(
        verdict: &crate::domain::policy::Permission,
        role: crate::domain::model::Role,
    ) -> HookAnswer {
        use crate::domain::policy::Permission;
        let (decision, reason) = match verdict {
            Permission::Allow => (
                HookDecision::Allow,
                format!("allowed by catalyst's `{role}` policy"),
            ),
            Permission::Deny(reason) => (HookDecision::Deny, format!("catalyst: {reason}")),
        };
        HookAnswer {
            decision: Some(decision),
            reason: Some(reason),
            additional_context: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    Allow,
    Deny,
    Block,
}

/// `import`: what became of the beads sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Imported(#[serde(serialize_with = "sorted")] pub ImportReport);

/// `export`: every bead of the store, in the order they entered it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exported {
    #[serde(serialize_with = "sorted")]
    pub beads: Vec<Bead>,
    pub seq: u64,
}
