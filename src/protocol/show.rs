//! The answer to `show`: a bead, its progress, its steps and (with `runs`) every attempt of
//! every step, for the audit trail.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::response::{double_option, sorted, BeadSummary, RunningStep};
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Phase, Role, Status};
use crate::domain::result::{ResultStatus, Verdict};
use crate::domain::router::OutcomeKind;
use crate::domain::state::Stuck;
use crate::domain::time::Timestamp;

/// `show`: the fields of the bead's [`BeadSummary`], the bead itself and its steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShowAnswer {
    #[serde(serialize_with = "sorted")]
    pub bead: Bead,
    pub close_reason: Option<String>,
    pub closed_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    pub created_at: Timestamp,
    pub current: Option<String>,
    pub done: u64,
    pub formula: Option<String>,
    pub id: BeadId,
    pub priority: u8,
    pub running: Option<RunningStep>,
    pub status: Status,
    pub steps: Vec<StepView>,
    /// See [`BeadSummary::stuck_on`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stuck_on: BTreeMap<BeadId, Stuck>,
    pub title: String,
    pub total: u64,
    /// See [`BeadSummary::waiting_for`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<BeadId>,
}

impl ShowAnswer {
    pub fn new(summary: BeadSummary, bead: Bead, steps: Vec<StepView>) -> ShowAnswer {
        ShowAnswer {
            bead,
            close_reason: summary.close_reason,
            closed_at: summary.closed_at,
            cost_usd: summary.cost_usd,
            created_at: summary.created_at,
            current: summary.current,
            done: summary.done,
            formula: summary.formula,
            id: summary.id,
            priority: summary.priority,
            running: summary.running,
            status: summary.status,
            steps,
            stuck_on: summary.stuck_on,
            title: summary.title,
            total: summary.total,
            waiting_for: summary.waiting_for,
        }
    }
}

/// One step of a `show`: its bead's id, title and status, and what catalyst knows of it when
/// it is a step of a formula.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(from = "FlatStep")]
pub struct StepView {
    pub id: BeadId,
    pub status: Status,
    pub title: String,
    pub detail: Option<StepDetail>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct StepDetail {
    /// The step's name in its formula.
    pub step: String,
    pub role: Role,
    /// Attempts dispatched, and of them those that counted none (`uncounted`).
    pub attempts: u32,
    pub uncounted: u32,
    pub summary: Option<String>,
    /// For a fix step: what it was asked to fix (a review's INSTRUCTIONS, a gate's output, a
    /// person's reason).
    pub instructions: Option<String>,
    pub phase: Option<Phase>,
    /// The model the step runs with: its own, else its role's.
    pub model: Option<String>,
    /// The steps it runs after (`blocks` edges within the molecule).
    pub needs: Vec<BeadId>,
    /// For a fix step, the step whose rejection it fixes (which runs again after it).
    pub fixes: Option<BeadId>,
    /// Every attempt, with `show --runs`.
    pub runs: Option<Vec<RunRecord>>,
}

/// A step's keys, in alphabetical order: `id`, `status` and `title` always, the others only
/// for a step of a formula, and `runs` only with `show --runs`.
impl Serialize for StepView {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        let detail = self.detail.as_ref();
        if let Some(d) = detail {
            map.serialize_entry("attempts", &d.attempts)?;
            if let Some(fixes) = &d.fixes {
                map.serialize_entry("fixes", fixes)?;
            }
        }
        map.serialize_entry("id", &self.id)?;
        if let Some(instructions) = detail.and_then(|d| d.instructions.as_ref()) {
            map.serialize_entry("instructions", instructions)?;
        }
        if let Some(d) = detail {
            map.serialize_entry("model", &d.model)?;
            if !d.needs.is_empty() {
                map.serialize_entry("needs", &d.needs)?;
            }
            let phase = serde_json::to_value(&d.phase).map_err(serde::ser::Error::custom)?;
            map.serialize_entry("phase", &phase)?;
            map.serialize_entry("role", &d.role)?;
            if let Some(runs) = &d.runs {
                map.serialize_entry("runs", runs)?;
            }
        }
        map.serialize_entry("status", &self.status)?;
        if let Some(d) = detail {
            map.serialize_entry("step", &d.step)?;
            map.serialize_entry("summary", &d.summary)?;
        }
        map.serialize_entry("title", &self.title)?;
        if let Some(d) = detail.filter(|d| d.uncounted > 0) {
            map.serialize_entry("uncounted", &d.uncounted)?;
        }
        map.end()
    }
}

#[derive(Deserialize)]
struct FlatStep {
    id: BeadId,
    status: Status,
    title: String,
    #[serde(default)]
    step: Option<String>,
    role: Option<Role>,
    #[serde(default)]
    attempts: u32,
    #[serde(default)]
    uncounted: u32,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    phase: Option<Phase>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    needs: Vec<BeadId>,
    #[serde(default)]
    fixes: Option<BeadId>,
    #[serde(default)]
    runs: Option<Vec<RunRecord>>,
}

impl From<FlatStep> for StepView {
    fn from(f: FlatStep) -> StepView {
        let detail = match (f.step, f.role) {
            (Some(step), Some(role)) => Some(StepDetail {
                step,
                role,
                attempts: f.attempts,
                uncounted: f.uncounted,
                summary: f.summary,
                instructions: f.instructions,
                phase: f.phase,
                model: f.model,
                needs: f.needs,
                fixes: f.fixes,
                runs: f.runs,
            }),
            _ => None,
        };
        StepView {
            id: f.id,
            status: f.status,
            title: f.title,
            detail,
        }
    }
}

/// One attempt of a step, from its run folder and the journal. The run folder's records are
/// given as stored (`report`, `result`) and flattened for people (`exit` … `commit`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub attempt: u32,
    /// A gate's commands, with their output files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<GateCommand>>,
    /// The commit the daemon made of the attempt's work.
    pub commit: Option<String>,
    pub cost_usd: Option<f64>,
    /// When the attempt was dispatched, from the journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatched_at: Option<Timestamp>,
    pub duration_ms: Option<u64>,
    /// Why the daemon counted the attempt as failed (it retried, escalated or blocked after
    /// it), from the journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// How the process ended: `exit code 0`, `killed by SIGKILL`, …
    pub exit: Option<String>,
    pub files: RunFiles,
    /// What a rejecting review asked to be fixed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<String>,
    /// The model the attempt was dispatched with (`null` for a gate), from the journal.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "double_option"
    )]
    pub model: Option<Option<String>>,
    /// `finished`, `malformed`, `gate_failed`, …
    pub outcome: Option<OutcomeKind>,
    pub reason: Option<String>,
    /// The run's `report.json`, as stored: kept whole, with the fields of the version that
    /// wrote it, since the audit trail is what the files say.
    pub report: Value,
    /// The daemon's `result.json`, as stored (see `report`).
    pub result: Value,
    pub run_dir: PathBuf,
    /// The agent's result block's `STATUS`.
    pub status: Option<ResultStatus>,
    pub summary: Option<String>,
    pub verdict: Option<Verdict>,
}

/// The files of a run folder a person may look at, those that exist.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFiles {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_json: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<PathBuf>,
}

/// One command of a gate's attempt, as its `result.json` records it, with its files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateCommand {
    pub command: String,
    /// `command-<n>` in the run folder.
    pub dir: PathBuf,
    pub duration_ms: u64,
    pub exit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<RunFiles>,
}
