//! The routing table (docs/routing.md): what the daemon does when a step ends.
//!
//! [`route`] is a pure function of the step's role, how the step ended ([`Outcome`]), the step's
//! [`Counters`] and the [`RouterConfig`]. It reads no clock, file or state, so the table is
//! tested case by case here, and the engine is left with carrying out a [`Decision`]: writing
//! its events and comments, then acting on them. No model is ever asked what happens next.
//!
//! The engine's side of the contract:
//! - It passes the counters of the step that ended (a gate's own, a review's own, a fix's own),
//!   and after carrying out a decision it stores [`counters_after`] for that step.
//! - Interruptions (a daemon restart while the step ran) are not outcomes: the engine re-queues
//!   those steps itself and never routes them, so they count no attempt.
//! - A decision applies to the step that ended; where the engine acts on other beads (the
//!   fixed step, the work bead) the variant's documentation says so.

use serde::{Deserialize, Serialize};

use crate::domain::model::{is_zero, Counters, Role};
use crate::domain::result::{Malformed, ResultStatus, StepResult, Verdict};
use crate::domain::unavailable::Unavailable;

/// The limits of the table, from the daemon config (`[router]` or similar).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouterConfig {
    /// Attempts with the step's own model before escalating (counting the first).
    pub max_attempts: u32,
    /// The model of the one extra attempt after `max_attempts` failures. Empty turns escalation
    /// off: the step is blocked instead.
    pub escalation_model: String,
    /// The rejection (or failed gate run) that blocks the bead instead of asking for another fix.
    /// With 3, rejections one and two create `fix-1` and `fix-2` and the third blocks. A
    /// formula step's `max_fix_iterations` overrides it (see [`route`]).
    pub max_fix_iterations: u32,
    /// Seconds before the first retry of a failed attempt, doubling for each further one (at
    /// most [`MAX_RETRY_DELAY_SECS`]). `0`: retries start at once.
    pub retry_delay_secs: u64,
}

/// The longest wait before a retry.
pub const MAX_RETRY_DELAY_SECS: u64 = 15 * 60;

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            max_attempts: 5,
            escalation_model: "opus".into(),
            max_fix_iterations: 3,
            retry_delay_secs: 10,
        }
    }
}

impl RouterConfig {
    /// The wait before the attempt after `failed` failed ones: `retry_delay_secs`, doubled for
    /// each failure after the first.
    pub fn retry_delay(&self, failed: u32) -> u64 {
        let doublings = failed.saturating_sub(1).min(32);
        self.retry_delay_secs
            .saturating_mul(1u64 << doublings)
            .min(MAX_RETRY_DELAY_SECS)
    }
}

/// The counters after the engine has carried out `decision` for this step; `answer` is the
/// [`answer_sum`] of the attempt that ended, if it gave a final message.
///
/// A fix starts a new round: the step re-runs on changed code, so the attempts it failed
/// before the fix no longer count against it.
pub fn counters_after(counters: Counters, decision: &Decision, answer: Option<u32>) -> Counters {
    match decision {
        Decision::Retry { .. } => Counters {
            failed_attempts: counters.failed_attempts.saturating_add(1),
            last_answer: answer,
            ..counters
        },
        Decision::Escalate { .. } => Counters {
            failed_attempts: counters.failed_attempts.saturating_add(1),
            escalated: true,
            last_answer: answer,
            ..counters
        },
        Decision::CreateFix { iteration, .. } => Counters {
            failed_attempts: 0,
            escalated: false,
            fix_iterations: *iteration,
            last_answer: None,
        },
        Decision::Close
        | Decision::CloseAndRerunFixed
        | Decision::Requeue { .. }
        | Decision::Block { .. } => counters,
    }
}

/// How a step ended, as the engine observed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, strum::EnumDiscriminants)]
#[serde(tag = "type", rename_all = "snake_case")]
#[strum_discriminants(
    name(OutcomeKind),
    doc = "Which kind of [`Outcome`] it was, named as its `type` tag (a run record's `outcome`).",
    derive(Serialize, Deserialize, strum::IntoStaticStr, strum::Display),
    serde(rename_all = "snake_case"),
    strum(serialize_all = "snake_case")
)]
pub enum Outcome {
    /// An agent exited cleanly with a valid result block. `worktree_changed` says whether the
    /// worktree differs from the commit the step started on (committed or not).
    Finished {
        result: StepResult,
        worktree_changed: bool,
    },
    /// An agent exited cleanly but its final message had no valid block; `reason` is the
    /// parser's [`Malformed`] text.
    Malformed { reason: String },
    /// The agent (or the gate's command runner) crashed, was killed by a signal, exited
    /// non-zero, timed out or stalled.
    Failed { reason: String },
    /// The agent reported a rate or usage limit.
    UsageLimit { reason: String },
    /// A failure no retry of the step can fix: a refused key, an unreachable API, an agent
    /// that cannot run as configured, a step the daemon could not prepare.
    Unavailable { cause: Unavailable, reason: String },
    /// Every gate command succeeded.
    GatePassed,
    /// A gate command failed; `output` is what the fix agent needs to see (already capped by
    /// the engine, which the router passes on unchanged).
    GateFailed { output: String },
    /// A person approved.
    Approved { comment: Option<String> },
    /// A person rejected, saying why.
    ApprovalRejected { reason: String },
    /// The bead's pull request asked for changes (reviews, comments on lines, failing
    /// checks); `instructions` says which.
    PullRequestChanges { instructions: String },
}

impl Outcome {
    /// A short name for messages.
    fn kind(&self) -> &'static str {
        match self {
            Outcome::Finished { .. } => "an agent result",
            Outcome::Malformed { .. } => "malformed agent output",
            Outcome::Failed { .. } => "a failure",
            Outcome::UsageLimit { .. } => "a usage limit",
            Outcome::Unavailable { .. } => "an unavailable agent",
            Outcome::GatePassed => "a gate pass",
            Outcome::GateFailed { .. } => "a gate failure",
            Outcome::Approved { .. } => "an approval",
            Outcome::ApprovalRejected { .. } => "an approval rejection",
            Outcome::PullRequestChanges { .. } => "a pull request's request for changes",
        }
    }
}

/// What asked for a fix; decides the fix's context heading and comment wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FixSource {
    /// A review rejected; the instructions are the reviewer's INSTRUCTIONS.
    Review,
    /// A gate failed; the instructions are the commands' output.
    Gate,
    /// A person rejected; the instructions are their reason.
    Approval,
    /// The bead's pull request asked for changes; the instructions are the reviews, comments
    /// and failing checks.
    PullRequest,
}

/// Why a step and its bead were blocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockCause {
    /// The agent reported `STATUS: BLOCKED`.
    AgentBlocked,
    /// The agent reported `STATUS: ERROR`.
    AgentError,
    /// The step was rejected (or its gate failed) as many times as allowed.
    FixLimit,
    /// Every attempt, the escalated one included, failed.
    AttemptsExhausted,
    /// The attempts failed with the very same answer, so a stronger model was not tried.
    SameAnswer,
    /// The outcome cannot happen for the step's role (a gate result for a review, say). This is
    /// an engine bug; blocking shows it to a person instead of guessing or crashing the daemon.
    WrongOutcome,
}

/// What the engine does next with the step that ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Decision {
    /// Close the step; its dependents may become ready. When it was the molecule's last open
    /// step, the engine closes the work bead too.
    Close,
    /// Close this fix step and queue the step it fixes (`StepMeta::fixes`, still in_progress)
    /// to run again.
    CloseAndRerunFixed,
    /// Create fix step `<bead>.fix-<iteration>` titled `Fix: <bead>`, with a
    /// `[daemon] FIX_ITERATION: <iteration>` comment and `instructions` in its context. The
    /// step that ended stays in_progress and runs again when the fix closes.
    CreateFix {
        /// 1-based; `Counters::fix_iterations + 1`.
        iteration: u32,
        source: FixSource,
        instructions: String,
    },
    /// Run the step again with the same model, after `delay_secs`; comment `[daemon] RETRY`
    /// with the attempt and the reason.
    Retry {
        /// The attempt about to start, 1-based, counting only failed attempts of this round (the
        /// engine's run folders, which also count requeues, may number differently).
        attempt: u32,
        max_attempts: u32,
        reason: String,
        #[serde(default, skip_serializing_if = "is_zero")]
        delay_secs: u64,
    },
    /// Run the step once more with `model` (the escalated attempt), after `delay_secs`.
    Escalate {
        attempt: u32,
        model: String,
        reason: String,
        #[serde(default, skip_serializing_if = "is_zero")]
        delay_secs: u64,
    },
    /// Queue the step again without counting an attempt, and pause the step's model (a usage
    /// limit) or dispatching (an unavailable agent) with backoff (the engine owns the clock,
    /// so it picks the delay).
    Requeue { reason: String },
    /// Mark the step and its work bead blocked, with `reason` as the comment.
    Block { cause: BlockCause, reason: String },
}

/// Routes a step's outcome (docs/routing.md).
///
/// `step_max_fix_iterations` is the formula step's `max_fix_iterations`, which replaces the
/// config's when set. The table:
/// - review DONE + APPROVED → [`Decision::Close`]; DONE + REJECTED → a fix until the limit,
///   then [`Decision::Block`]; DONE without a verdict → retried like malformed output.
/// - fix DONE → [`Decision::CloseAndRerunFixed`].
/// - implement or fix DONE with no change in the worktree → retried like malformed output:
///   an agent that claims work it did not do is not believed. Only these two roles must
///   change something: refine and review are read-only, a merge is a no-op when the branch is
///   already up to date, and a `task` step may be a check that changes nothing.
/// - any other DONE, a passed gate, an approval → [`Decision::Close`].
/// - BLOCKED or ERROR (any role) → [`Decision::Block`] with the SUMMARY as the reason.
/// - a failed gate, a person's rejection, or a merge step's pull request asking for changes
///   → like a rejected review, with the output, the reason or the reviews as the
///   instructions.
/// - malformed output or a failure → [`Decision::Retry`] (after a delay that doubles each
///   time) while fewer than `max_attempts` attempts have failed, then one
///   [`Decision::Escalate`], then [`Decision::Block`]. When the attempt's `answer` (its
///   [`answer_sum`]) is the one the attempt before gave, the escalation is not tried: the
///   same answer again says the step cannot succeed as it stands, and a more expensive model
///   would only cost more; the step blocks. A gate (whose command could not run) has no
///   model to escalate to, and blocks.
/// - a usage limit, or a failure no retry can fix ([`Outcome::Unavailable`]) →
///   [`Decision::Requeue`].
pub fn route(
    role: Role,
    outcome: &Outcome,
    answer: Option<u32>,
    counters: &Counters,
    step_max_fix_iterations: Option<u32>,
    config: &RouterConfig,
) -> Decision {
    let max_fix = step_max_fix_iterations.unwrap_or(config.max_fix_iterations);
    let again = Again {
        role,
        counters,
        config,
        same_answer: answer.is_some() && answer == counters.last_answer,
    };
    match outcome {
        Outcome::UsageLimit { reason } | Outcome::Unavailable { reason, .. } => Decision::Requeue {
            reason: reason.clone(),
        },
        Outcome::Failed { reason } => again.retry(reason.clone()),
        Outcome::Malformed { reason } if role.is_agent() => again.retry(reason.clone()),
        Outcome::Finished {
            result,
            worktree_changed,
        } if role.is_agent() => finished(role, result, *worktree_changed, &again, max_fix),
        Outcome::GatePassed if role == Role::Gate => Decision::Close,
        Outcome::GateFailed { output } if role == Role::Gate => {
            // A person reading why the bead blocked sees the end of what failed.
            let tail = last_lines(output, GATE_TAIL_LINES);
            reject(
                FixSource::Gate,
                output.clone(),
                Some(tail),
                counters,
                max_fix,
            )
        }
        Outcome::Approved { .. } if role == Role::Approval => Decision::Close,
        // A merge held for its workflow files is rejected like an approval step: the fix
        // answers the person, and the merge step runs again.
        Outcome::ApprovalRejected { reason } if matches!(role, Role::Approval | Role::Merge) => {
            reject(
                FixSource::Approval,
                reason.clone(),
                Some(reason.as_str()),
                counters,
                max_fix,
            )
        }
        Outcome::PullRequestChanges { instructions } if role == Role::Merge => reject(
            FixSource::PullRequest,
            instructions.clone(),
            Some(instructions.as_str()),
            counters,
            max_fix,
        ),
        other => Decision::Block {
            cause: BlockCause::WrongOutcome,
            reason: format!("{} cannot end a step of role `{role}`", other.kind()),
        },
    }
}

fn finished(
    role: Role,
    result: &StepResult,
    worktree_changed: bool,
    again: &Again<'_>,
    max_fix: u32,
) -> Decision {
    let counters = again.counters;
    let cause = match result.status {
        ResultStatus::Done => None,
        ResultStatus::Blocked => Some(BlockCause::AgentBlocked),
        ResultStatus::Error => Some(BlockCause::AgentError),
    };
    if let Some(cause) = cause {
        let summary = result.summary.trim();
        let reason = if summary.is_empty() {
            format!("the agent reported {} without a summary", result.status)
        } else {
            summary.to_owned()
        };
        return Decision::Block { cause, reason };
    }
    match role {
        Role::Review => match result.verdict {
            Some(Verdict::Approved) => Decision::Close,
            Some(Verdict::Rejected) => {
                // At the fix limit no fix step carries the instructions: the reason does.
                let last = if result.instructions.is_empty() {
                    result.summary.clone()
                } else {
                    format!("{}\n{}", result.summary, review_instructions(result))
                };
                reject(
                    FixSource::Review,
                    review_instructions(result),
                    Some(&last),
                    counters,
                    max_fix,
                )
            }
            None => again.retry(Malformed::MissingVerdict.to_string()),
        },
        Role::Implement | Role::Fix if !worktree_changed => again
            .retry("no changes: the agent reported DONE but the worktree did not change".into()),
        Role::Fix => Decision::CloseAndRerunFixed,
        _ => Decision::Close,
    }
}

/// A rejection of any kind: another fix while under the limit, else block.
/// How many lines of a failing gate's output a block reason ends with.
const GATE_TAIL_LINES: usize = 20;

/// The last `n` lines of `text` (all of it when it has fewer).
fn last_lines(text: &str, n: usize) -> &str {
    let text = text.trim_end();
    match text.rmatch_indices('\n').nth(n.saturating_sub(1)) {
        Some((i, _)) => &text[i + 1..],
        None => text,
    }
}

fn reject(
    source: FixSource,
    instructions: String,
    last: Option<&str>,
    counters: &Counters,
    max_fix: u32,
) -> Decision {
    let rejection = counters.fix_iterations.saturating_add(1);
    if rejection < max_fix {
        return Decision::CreateFix {
            iteration: rejection,
            source,
            instructions,
        };
    }
    let what = match source {
        FixSource::Review => "the review rejected the work",
        FixSource::Gate => "the gate failed",
        FixSource::Approval => "the approval was rejected",
        FixSource::PullRequest => "the pull request asked for changes",
    };
    let mut reason = format!("{what} {} (the limit is {max_fix})", times(rejection));
    if let Some(last) = last.map(str::trim).filter(|l| !l.is_empty()) {
        reason.push_str("; last: ");
        reason.push_str(last);
    }
    Decision::Block {
        cause: BlockCause::FixLimit,
        reason,
    }
}

/// What a retry is decided from.
struct Again<'a> {
    role: Role,
    counters: &'a Counters,
    config: &'a RouterConfig,
    /// The attempt answered exactly as the failed one before it.
    same_answer: bool,
}

impl Again<'_> {
    /// Malformed output or a failure: same model (after a delay), then the escalation model
    /// once unless the answer repeated or the step runs no model (a gate), then block.
    fn retry(&self, reason: String) -> Decision {
        let config = self.config;
        let failed = self.counters.failed_attempts.saturating_add(1);
        let next = failed.saturating_add(1);
        let delay_secs = config.retry_delay(failed);
        if self.counters.escalated {
            Decision::Block {
                cause: BlockCause::AttemptsExhausted,
                reason: format!(
                    "gave up after {failed} failed attempts, the last with `{}`: {reason}",
                    config.escalation_model
                ),
            }
        } else if failed < config.max_attempts {
            Decision::Retry {
                attempt: next,
                max_attempts: config.max_attempts,
                reason,
                delay_secs,
            }
        } else if config.escalation_model.is_empty() || !self.role.is_agent() {
            Decision::Block {
                cause: BlockCause::AttemptsExhausted,
                reason: format!("gave up after {failed} failed attempts: {reason}"),
            }
        } else if self.same_answer {
            Decision::Block {
                cause: BlockCause::SameAnswer,
                reason: format!(
                    "gave up after {failed} failed attempts, the last two with the same answer, \
                     so `{}` was not tried: {reason}",
                    config.escalation_model
                ),
            }
        } else {
            Decision::Escalate {
                attempt: next,
                model: config.escalation_model.clone(),
                reason,
                delay_secs,
            }
        }
    }
}

/// A checksum of an attempt's answer: its final message, and whether it changed the
/// worktree. Two attempts with the same sum answered the same.
pub fn answer_sum(final_message: &str, worktree_changed: bool) -> u32 {
    crc32c::crc32c_append(
        crc32c::crc32c(final_message.as_bytes()),
        &[worktree_changed as u8],
    )
}

/// The review's INSTRUCTIONS as a list for the fix agent; its SUMMARY when it gave none, so a
/// fix never starts with nothing to go on.
fn review_instructions(result: &StepResult) -> String {
    if result.instructions.is_empty() {
        return result.summary.clone();
    }
    result
        .instructions
        .iter()
        .map(|i| format!("- {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn times(n: u32) -> String {
    match n {
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}

#[cfg(test)]
mod tests;
