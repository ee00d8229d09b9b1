//! What catalyst records on a step bead: its role, phase and router counters.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::domain::id::BeadId;

/// The key under `metadata` where catalyst keeps a step's metadata.
pub const STEP_META_KEY: &str = "catalyst";

/// What catalyst records on a step bead (`metadata.catalyst`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepMeta {
    /// The step's id within its formula (`review`, `fix-1`, …).
    pub step: String,
    pub role: Role,
    /// The model the step runs with; `None` for gate and approval steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The work bead this step belongs to.
    pub bead: BeadId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// A prompt template name other than the role's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Gate commands, for `gate` steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run: Vec<String>,
    /// Seconds an agent or gate may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// A gate whose formula says `sandbox = "none"`: its commands run unconfined.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unconfined: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fix_iterations: Option<u32>,
    /// Failed attempts on the step's own model before the escalated one, replacing `[router]
    /// max_attempts` for this step (a formula's `max_attempts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Tools offered on this step's agent command line, replacing the role's list (the role's
    /// access still applies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// For a fix step: the step whose rejection or failure it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixes: Option<BeadId>,
    /// For a fix step: which round of fixes it is (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
    /// Attempts dispatched so far (run folders `1`, `2`, …).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempts: u32,
    /// Of `attempts`, those that counted none against the step: requeued after a usage limit
    /// or a failure no retry fixes, a lost merge race, interrupted by a daemon stop.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub uncounted: u32,
    /// The router's counters for this step.
    #[serde(default, skip_serializing_if = "Counters::is_zero")]
    pub counters: Counters,
    /// Where the step is while its bead status is `in_progress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The model of the next attempt when it differs from `model` (the escalation model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_model: Option<String>,
    /// The next attempt does not start before this: the router's backoff after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<crate::domain::time::Timestamp>,
    /// The commit the next attempt must start from, set when an attempt was interrupted after
    /// it may have moved the branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_to: Option<String>,
    /// The SUMMARY of the last result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// For a merge step: the change to workflow files that waits (or waited) for a person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<MergeHold>,
    /// For a merge step: the daemon could not merge the target into the branch itself, so
    /// the merge agent runs (until then the daemon merges without one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merge_agent: bool,
    /// For a merge step: the steps (by name) that run again when the daemon merged the target
    /// into the branch, before the target moves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recheck: Vec<String>,
    /// For a merge step: how the bead lands on the target, when the formula says (else the
    /// config's `[merge] strategy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MergeStrategy>,
    /// A file (relative to the worktree) the step must leave behind (the formula's `output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// A merge held because the bead's change touches workflow files (formulas, prompts, the
/// state folder, CI or hook files): it waits for `ctl approve` of exactly that commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeHold {
    /// The bead's branch tip that was held.
    pub commit: String,
    /// The workflow files its change touches.
    pub files: Vec<String>,
    /// A person approved `commit`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
}

impl MergeHold {
    /// The commit a person approved, if any.
    pub fn approved_commit(&self) -> Option<&str> {
        self.approved.then_some(self.commit.as_str())
    }
}

impl StepMeta {
    /// The metadata of a new step of `role` named `step` in `bead`'s molecule: no model,
    /// formula, commands, attempts or counters yet.
    pub fn new(step: String, role: Role, bead: BeadId) -> StepMeta {
        StepMeta {
            step,
            role,
            model: None,
            bead,
            formula: None,
            prompt: None,
            run: Vec::new(),
            timeout: None,
            unconfined: false,
            max_fix_iterations: None,
            max_attempts: None,
            tools: None,
            fixes: None,
            iteration: None,
            attempts: 0,
            uncounted: 0,
            counters: Counters::default(),
            phase: None,
            next_model: None,
            not_before: None,
            reset_to: None,
            summary: None,
            hold: None,
            merge_agent: false,
            recheck: Vec::new(),
            strategy: None,
            output: None,
        }
    }
}

/// How a finished bead lands on the target branch. Whichever it is, the tree that lands is the
/// bead's branch tip, which already contains the target: what was reviewed and checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeStrategy {
    /// A merge commit on the target, the target's tip as its first parent and the bead's
    /// branch as its second (`git merge --no-ff`): `git log --first-parent` shows one commit
    /// per bead.
    #[default]
    Merge,
    /// One new commit on the target with the bead's whole change (`git merge --squash`).
    Squash,
    /// The bead's own commits replayed on the target, which then fast-forwards: a linear
    /// history. A bead whose commits do not replay cleanly one by one (the merge step
    /// resolved a conflict) lands as one squashed commit instead.
    Rebase,
}

impl MergeStrategy {
    pub const ALL: [MergeStrategy; 3] = [
        MergeStrategy::Merge,
        MergeStrategy::Squash,
        MergeStrategy::Rebase,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MergeStrategy::Merge => "merge",
            MergeStrategy::Squash => "squash",
            MergeStrategy::Rebase => "rebase",
        }
    }

    pub fn parse(s: &str) -> Option<MergeStrategy> {
        MergeStrategy::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

impl fmt::Display for MergeStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `n` is zero: a count serialized only when it is not.
pub fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// Where a step is while it is `in_progress`. Folded from the journal, so it survives a crash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// An attempt is running (or was, when the daemon stopped).
    Running {
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// Rejected (or failed); waits for its fix step to close, then runs again.
    WaitingFix { fix: BeadId },
    /// The daemon merges: it brings the branch up to date with the target when git can, and
    /// moves the target branch (after the merge agent, if a conflict needed one).
    Merging,
    /// Waits for a person (`ctl approve` / `ctl reject`).
    WaitingApproval,
    /// The bead's pull request is open on the forge: the merge step waits for it to be
    /// merged, closed, or asked for changes.
    PullRequest { number: u64 },
}

/// What a step does. Agent roles spawn an agent; `gate` runs commands in the daemon; `approval`
/// waits for a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Refine,
    Implement,
    Review,
    Fix,
    Merge,
    Task,
    Gate,
    Approval,
}

impl Role {
    pub const ALL: [Role; 8] = [
        Role::Refine,
        Role::Implement,
        Role::Review,
        Role::Fix,
        Role::Merge,
        Role::Task,
        Role::Gate,
        Role::Approval,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Refine => "refine",
            Role::Implement => "implement",
            Role::Review => "review",
            Role::Fix => "fix",
            Role::Merge => "merge",
            Role::Task => "task",
            Role::Gate => "gate",
            Role::Approval => "approval",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s))
    }

    /// Whether the step is carried out by an agent (and so needs a prompt and a model).
    pub fn is_agent(self) -> bool {
        !matches!(self, Role::Gate | Role::Approval)
    }

    /// Whether the role changes files; a read-only role's DONE needs no change in the worktree.
    pub fn writes(self) -> bool {
        matches!(self, Role::Implement | Role::Fix | Role::Merge | Role::Task)
    }

    /// The model a role runs with unless the formula or config says otherwise.
    pub fn default_model(self) -> Option<&'static str> {
        match self {
            Role::Refine | Role::Implement | Role::Fix | Role::Task => Some("sonnet"),
            Role::Review => Some("haiku"),
            Role::Merge => Some("opus"),
            Role::Gate | Role::Approval => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the engine remembers about one step between its runs (the router reads it and says
/// what it becomes after a decision: `router::counters_after`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Failed attempts in the current round, before the outcome being routed. A round starts
    /// when the step is first dispatched and again each time it re-runs after a fix. Usage-limit
    /// requeues and interruptions are not failures.
    pub failed_attempts: u32,
    /// Whether the escalated attempt has been used in this round.
    pub escalated: bool,
    /// How many fix steps this step has caused so far (each rejection adds one).
    pub fix_iterations: u32,
    /// A checksum of the final message of the last failed attempt in this round, with
    /// whether it changed the worktree: an attempt that answers exactly the same is one no
    /// stronger model is tried for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_answer: Option<u32>,
}

impl Counters {
    pub fn is_zero(&self) -> bool {
        *self == Counters::default()
    }
}
