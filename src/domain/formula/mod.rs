//! Formulas: beads' `*.formula.toml` workflow templates, checked, and poured into molecules.
//!
//! A formula is a small DAG of steps. catalyst reads the beads format (`formula`, `description`,
//! `version`, `type`, `vars`, `[[steps]]` with `id`, `title`, `description`, `notes`,
//! `priority`, `needs`/`depends_on`, `labels`, `metadata`) plus its own step keys (`role`,
//! `model`, `prompt`, `run`, `approval`, `timeout`, `max_fix_iterations`, `max_attempts`, `tools`,
//! `recheck`), and Gas City's v2 keys that map onto them (`opt_model`, `[steps.retry]`, and
//! `[steps.check]` as a gate after its step).
//!
//! Every key of beads' workflow format is read. Keys catalyst acts on are used; keys that only
//! matter to beads' or Gas Town's runtime (`phase`, `waits_for`, `on_complete`, `[compose]`
//! `bond_points`, …) are kept on the formula or the step bead with one warning each; a key
//! neither knows is an error, with its file and step, never silently ignored. Composition
//! (`extends`, `[compose]`, `expand`, aspects) is decided here, in the pure core, when the
//! formulas are read ([`FormulaSet::compose`]).
//!
//! The life of a formula:
//! 1. [`Formula::parse`] turns TOML into a [`Formula`], refusing unknown keys and wrong types;
//!    nested steps, loops and gates are unrolled into plain steps.
//! 2. [`Formula::check`] finds every semantic problem at once (ids, `needs`, cycles, roles,
//!    prompts, gate commands, vars), so a user fixes a file in one round.
//!    [`Formula::load`] does both.
//! 3. [`pour`] turns a checked formula and a work bead into the step beads of a molecule:
//!    Go-template actions in step text are rendered with the bead's values (`template`),
//!    and a workflow without a merge step gets one unless it says `merge = false`
//!    ([`Formula::merge_plan`]).
//!
//! [`FormulaSet`] holds the built-in formulas plus those found in a workspace's folders.

mod check;
mod compose;
mod condition;
mod convoy;
mod error;
mod parse;
mod pour;
mod range;
mod reader;
mod set;
#[cfg(test)]
mod shapes;
mod template;
mod text_check;
mod v2;
mod vars;

use std::collections::BTreeMap;
use std::fmt;

use crate::domain::model::{JsonMap, MergeStrategy, Role};

pub use check::MAX_STEP_ID_LEN;
pub use compose::{apply_aspect, expand_step, unmatched_pointcuts, ASPECT_LABEL};
pub use error::ComposeError;
pub(crate) use parse::toml_error;
pub use pour::{pour, MergePlan, PourError, ADDED_MERGE_ID};
pub use set::{FormulaSet, BUILTIN as BUILTIN_FILES, BUILTIN_DIR};
pub use vars::{placeholders, substitute, BUILTIN_VARS};

/// The extension of formula files, as in beads.
pub const FORMULA_EXT: &str = ".formula.toml";

/// A parsed formula. Fields hold the file's values with beads' defaults applied; whether they
/// make sense together is [`Formula::check`]'s job.
#[derive(Clone, Debug, PartialEq)]
pub struct Formula {
    /// The `formula` key: the name a bead's `formula:<name>` label refers to.
    pub name: String,
    pub description: String,
    /// beads' schema version (1 when absent).
    pub version: u32,
    /// Declared variables by name.
    pub vars: BTreeMap<String, VarDef>,
    /// Steps in file order.
    pub steps: Vec<Step>,
    /// Where the formula was read from, as shown in messages.
    pub file: String,
    /// Top-level keys of beads or Gas Town that catalyst keeps but does not act on (`pour`,
    /// `phase`, `execution`, …), as read.
    pub kept: JsonMap,
    /// What loading it warned about; none keeps it from being used.
    pub warnings: Vec<Problem>,
    /// What the formula is: a workflow to pour, or a part other formulas are composed from.
    pub kind: Kind,
    /// An expansion's `[[template]]`: the steps that replace the step it is applied to.
    pub template: Vec<Step>,
    /// An aspect's `[[advice]]`.
    pub advice: Vec<Advice>,
    /// An aspect's `[[pointcuts]]`: advice applies only to a step one of them matches (all
    /// steps when there are none).
    pub pointcuts: Vec<Pointcut>,
    /// beads' `extends`: the formulas whose vars, steps and `[compose]` rules this one takes,
    /// its own steps replacing theirs of the same id.
    pub extends: Vec<String>,
    /// beads' `[compose]` rules, applied when the formula is composed with the others.
    pub compose: Compose,
    /// catalyst's `merge`: `Some(false)` keeps a workflow without a merge step from getting
    /// one when it is poured (its work stays on the bead's branch); absent, a workflow without
    /// a merge step is poured with one added ([`Formula::merge_plan`]).
    pub merge: Option<bool>,
}

/// One of an aspect's `[[pointcuts]]`: a step matches when it meets every criterion given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pointcut {
    /// A glob on step ids.
    pub glob: Option<String>,
    /// The step's beads `type` (`task`, `bug`, …).
    pub issue_type: Option<String>,
    /// A label the step carries.
    pub label: Option<String>,
}

/// beads' `[compose]`: how a workflow is put together from other formulas, decided when the
/// formulas are read, before any bead is poured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Compose {
    /// `[[compose.expand]]` (one step, `target`) and `[[compose.map]]` (every step a glob,
    /// `select`, matches), in file order: each replaced by an expansion's template.
    pub expand: Vec<ExpandRule>,
    /// `[[compose.branch]]`: fork-join wiring.
    pub branch: Vec<Branch>,
    /// `aspects`: aspect formulas applied to the workflow, after its expansions.
    pub aspects: Vec<String>,
}

impl Compose {
    pub fn is_empty(&self) -> bool {
        self.expand.is_empty() && self.branch.is_empty() && self.aspects.is_empty()
    }
}

/// Replaces the steps `select` matches by the template of expansion `with`.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpandRule {
    /// A step id (`compose.expand`'s `target`) or a glob on step ids (`compose.map`'s `select`).
    pub select: String,
    /// Whether `select` is a glob (`compose.map`).
    pub glob: bool,
    pub with: String,
    pub vars: BTreeMap<String, String>,
}

/// `[[compose.branch]]`: each of `steps` needs `from`, and `join` needs all of them.
#[derive(Clone, Debug, PartialEq)]
pub struct Branch {
    pub from: String,
    pub steps: Vec<String>,
    pub join: String,
}

/// beads' formula `type`. A Gas Town `convoy` is read as the workflow it pours into.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    #[default]
    Workflow,
    /// Steps that replace one step of a workflow (`[[template]]`).
    Expansion,
    /// Steps inserted before and after the steps of a workflow that match (`[[advice]]`).
    Aspect,
}

/// One `[[advice]]` of an aspect: steps to run before and after each step `target` (a glob on
/// step ids) matches. `around`'s `before` and `after` are added to these.
#[derive(Clone, Debug, PartialEq)]
pub struct Advice {
    pub target: String,
    pub before: Vec<Step>,
    pub after: Vec<Step>,
}

/// A declared variable (`[vars]`). beads allows `name = "default"` or a table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VarDef {
    pub description: String,
    pub default: Option<String>,
    pub required: bool,
    /// beads' `enum`: the allowed values; empty allows any.
    pub allowed: Vec<String>,
    /// A regular expression every value must match whole. Required of a var used in a gate's
    /// `run`, whose commands the daemon itself executes.
    pub pattern: Option<String>,
}

/// One step of a formula, which becomes one step bead when poured.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Unique within the formula; the step bead is `<bead>.<id>`.
    pub id: String,
    /// May hold `{{var}}` placeholders, as may `description`, `notes` and `run`.
    pub title: String,
    pub description: String,
    pub notes: String,
    /// The step bead's priority; the work bead's priority when absent.
    pub priority: Option<u8>,
    /// Steps that must close before this one is ready: `needs` and `depends_on` merged, in
    /// order, without duplicates.
    pub needs: Vec<String>,
    pub labels: Vec<String>,
    /// beads' free-form step metadata, copied onto the step bead.
    pub metadata: JsonMap,
    /// `role`, or `approval` for `approval = true`, or `task` when neither is given (so plain
    /// beads formulas run with the generic agent role).
    pub role: Role,
    pub model: Option<String>,
    /// A prompt template other than the role's own.
    pub prompt: Option<String>,
    /// Gate commands (role `gate` only).
    pub run: Vec<String>,
    /// Seconds the agent or gate may run.
    pub timeout: Option<u64>,
    /// Gate steps only: `sandbox = "none"` runs the gate's commands outside the sandbox (the
    /// per-gate opt-out, logged each time it runs).
    pub unconfined: bool,
    pub max_fix_iterations: Option<u32>,
    /// Tools the agent may use, replacing the role's default policy.
    pub tools: Option<Vec<String>>,
    /// Merge steps only: the gate and review steps to run again on the merged code when the
    /// daemon had to merge the target into the branch (it moved on since they ran).
    pub recheck: Vec<String>,
    /// Merge steps only: how the bead lands on the target, replacing the config's
    /// `[merge] strategy`.
    pub merge_strategy: Option<MergeStrategy>,
    /// Gas Town's `output`: a file (relative to the worktree) the step must leave behind; the
    /// agent is told in its context, and a `DONE` without it is not believed.
    pub output: Option<String>,
    /// beads' step `type` (`task` unless given), the step bead's issue type.
    pub issue_type: String,
    /// beads' inline expansion: this step is replaced by the expansion formula's template.
    pub expand: Option<String>,
    /// Values for the expansion's variables.
    pub expand_vars: BTreeMap<String, String>,
    /// beads' `condition`: the step is poured only when it holds for the bead's variables.
    pub condition: Option<String>,
    /// beads' step `gate`: what beads waits for before the step runs (`human`, or a timer, a
    /// CI run, … described). An approval step `gate-<id>` is put before the step when the
    /// formula is read: a person approves, whatever the gate waits for.
    pub gate: Option<String>,
    /// Failed attempts on the step's own model before the escalated one, replacing `[router]
    /// max_attempts` (catalyst's `max_attempts`, or Gas City's `[steps.retry] max_attempts`).
    pub max_attempts: Option<u32>,
    /// Gas City's `[steps.check]`: a script run after the step. A gate step `check-<id>` is
    /// put after the step when the formula is read (see [`compose::gates`]).
    pub check: Option<Check>,
    /// beads' nested steps; [`compose::flatten`] lifts them into the formula's steps when it
    /// is read, so a formula's `steps` never hold any.
    pub children: Vec<Step>,
}

/// A script the daemon runs in the worktree after a step (Gas City's `[steps.check]`): exit 0
/// passes; 75 says it could not run, so it runs again later without a fix; any other exit
/// sends its output to a fix, at most `max_attempts` times in all.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// The script, relative to the worktree or absolute.
    pub path: String,
    pub max_attempts: Option<u32>,
    /// Seconds the script may run.
    pub timeout: Option<u64>,
}

impl Step {
    /// A step of `role` with nothing but an id, a title, a description and `needs`.
    pub(crate) fn new(id: &str, role: Role, title: &str, description: String) -> Step {
        Step {
            id: id.to_owned(),
            title: title.to_owned(),
            description,
            notes: String::new(),
            priority: None,
            needs: Vec::new(),
            labels: Vec::new(),
            metadata: JsonMap::new(),
            role,
            model: None,
            prompt: None,
            run: Vec::new(),
            timeout: None,
            unconfined: false,
            max_fix_iterations: None,
            tools: None,
            recheck: Vec::new(),
            merge_strategy: None,
            output: None,
            issue_type: "task".to_owned(),
            expand: None,
            expand_vars: BTreeMap::new(),
            condition: None,
            gate: None,
            max_attempts: None,
            check: None,
            children: Vec::new(),
        }
    }

    /// The prompt template an agent step renders: `prompt`, else the role's own. `None` for
    /// gate and approval steps, which spawn no agent.
    pub fn prompt_name(&self) -> Option<&str> {
        self.role
            .is_agent()
            .then(|| self.prompt.as_deref().unwrap_or(self.role.as_str()))
    }
}

/// One thing wrong with a formula file. Problems are collected, not returned one at a time, so
/// that `catalyst formula check` shows everything to fix in one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    /// The step the problem is in (its id, or `steps[N]` when it has no usable id); `None` for
    /// the formula as a whole.
    pub step: Option<String>,
    pub message: String,
    /// A warning does not keep the formula from loading (`formula check` still exits 0).
    pub warning: bool,
}

impl Problem {
    pub fn formula(file: &str, message: impl Into<String>) -> Problem {
        Problem {
            file: file.to_owned(),
            step: None,
            message: message.into(),
            warning: false,
        }
    }

    pub(crate) fn step(file: &str, step: &str, message: impl Into<String>) -> Problem {
        Problem {
            file: file.to_owned(),
            step: Some(step.to_owned()),
            message: message.into(),
            warning: false,
        }
    }

    /// The same, as a warning.
    pub(crate) fn warn(self) -> Problem {
        Problem {
            warning: true,
            ..self
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let warning = if self.warning { "warning: " } else { "" };
        match &self.step {
            Some(step) => write!(f, "{}: {}: {warning}{}", self.file, step, self.message),
            None => write!(f, "{}: {warning}{}", self.file, self.message),
        }
    }
}

impl std::error::Error for Problem {}

impl Formula {
    /// Parses and checks a formula: the whole validation a file goes through before catalyst
    /// uses it. All problems are returned, structural and semantic together.
    ///
    /// `has_prompt` says whether a prompt template of that name exists (see
    /// [`Formula::check`]).
    pub fn load(
        text: &str,
        file: &str,
        has_prompt: &dyn Fn(&str) -> bool,
    ) -> Result<Formula, Vec<Problem>> {
        let (formula, mut problems) = parse::parse(text, file);
        let Some(mut formula) = formula else {
            return Err(problems);
        };
        problems.extend(formula.check(has_prompt));
        if problems.iter().any(|p| !p.warning) {
            Err(problems)
        } else {
            formula.warnings = problems;
            Ok(formula)
        }
    }

    /// Parses a formula without the semantic checks. Refuses TOML errors, wrong value types,
    /// unknown roles and keys catalyst does not support (by name).
    pub fn parse(text: &str, file: &str) -> Result<Formula, Vec<Problem>> {
        match parse::parse(text, file) {
            (Some(mut formula), problems) if problems.iter().all(|p| p.warning) => {
                formula.warnings = problems;
                Ok(formula)
            }
            (_, problems) => Err(problems),
        }
    }

    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }
}

/// Whether `s` is a valid formula name or step id: `[a-z0-9][a-z0-9_-]*`.
///
/// Both become parts of bead ids, labels and paths; step ids may not hold a dot because the dot
/// separates a bead from its step.
pub(crate) fn is_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_display_file_then_step() {
        let p = Problem::step("f.formula.toml", "review", "unknown key `loop`");
        assert_eq!(p.to_string(), "f.formula.toml: review: unknown key `loop`");
        let p = Problem::formula("f.formula.toml", "no steps");
        assert_eq!(p.to_string(), "f.formula.toml: no steps");
    }

    #[test]
    fn names_are_lowercase_id_components() {
        for ok in ["a", "0", "mol-feature", "lint_2"] {
            assert!(is_name(ok), "{ok}");
        }
        for bad in ["", "A", "-a", "_a", "a.b", "a b", "é"] {
            assert!(!is_name(bad), "{bad}");
        }
    }
}
