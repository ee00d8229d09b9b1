//! Why a formula could not be poured: shared by pouring and variable resolution.

use crate::domain::id::IdError;

/// Why a formula could not be poured for a bead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PourError {
    #[error("formula `{formula}` needs a value for {} (no default)", backticked(.names))]
    MissingVars { formula: String, names: Vec<String> },
    #[error("formula `{formula}` has no var `{name}`")]
    UnknownVar { formula: String, name: String },
    #[error("formula `{formula}`: var `{name}` is built in and cannot be given a value")]
    BuiltinVar { formula: String, name: String },
    #[error(
        "formula `{formula}`: `{value}` is not an allowed value of var `{name}` (allowed: {})",
        backticked(.allowed)
    )]
    NotAllowed {
        formula: String,
        name: String,
        value: String,
        allowed: Vec<String>,
    },
    #[error(
        "formula `{formula}`: `{value}` does not match the pattern `{pattern}` of var `{name}`"
    )]
    NoMatch {
        formula: String,
        name: String,
        value: String,
        pattern: String,
    },
    /// The step bead's id `<bead>.<step>` is not a valid id (for example, too long).
    #[error("formula `{formula}`: step `{step}`: {source}")]
    StepId {
        formula: String,
        step: String,
        source: IdError,
    },
    /// A bead that did not come from a person gave a value for a var used in a gate's command.
    #[error("formula `{formula}`: var `{name}` is used in a gate's command, so only a person's `ctl submit` (or the formula's default) may give it a value; this bead came from the inbox, an import or a followed beads file")]
    CommandVarNotByPerson { formula: String, name: String },
    /// The formula did not pass [`super::Formula::check`].
    #[error("formula `{formula}` cannot be poured: {problem}")]
    Invalid { formula: String, problem: String },
}

/// Why a workflow could not be expanded or have an aspect applied: the formula named is not
/// of the kind asked for, or does not fit the workflow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComposeError {
    #[error("`{0}` is not an expansion formula (`type = \"expansion\"`)")]
    NotExpansion(String),
    #[error("expansion `{0}` has no `[[template]]`")]
    NoTemplate(String),
    #[error("no step `{target}` to expand with `{expansion}`")]
    NoStep { target: String, expansion: String },
    #[error("`{0}` is not an aspect formula (`type = \"aspect\"`)")]
    NotAspect(String),
    #[error("aspect `{aspect}`: bad glob `{pattern}`: {message}")]
    BadGlob {
        aspect: String,
        pattern: String,
        message: String,
    },
    /// An aspect asked for by name is not in the set.
    #[error("unknown aspect `{0}`")]
    UnknownAspect(String),
}

fn backticked(names: &[String]) -> String {
    let names: Vec<_> = names.iter().map(|n| format!("`{n}`")).collect();
    names.join(", ")
}
