//! Tests of [`super`]: profiles and the mapping of run reports to outcomes, by tables.

mod outcome;
mod profile;
mod transcript;

/// An agent's final message ending in a STEP-RESULT block.
pub(crate) fn block(status: &str, verdict: Option<&str>, summary: &str) -> String {
    let verdict = verdict.map_or(String::new(), |v| format!("VERDICT: {v}\n"));
    format!("Work is done.\n\n---STEP-RESULT---\nSTATUS: {status}\n{verdict}SUMMARY: {summary}\n---END-RESULT---\n")
}
