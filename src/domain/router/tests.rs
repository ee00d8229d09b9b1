//! Table-driven tests of [`super`].

use super::*;
use Role::*;

/// The default table without the backoff, whose delays have tests of their own.
fn config() -> RouterConfig {
    RouterConfig {
        retry_delay_secs: 0,
        ..RouterConfig::default()
    }
}

fn finished(status: ResultStatus, verdict: Option<Verdict>, changed: bool) -> Outcome {
    Outcome::Finished {
        result: StepResult {
            status,
            verdict,
            summary: "the summary".into(),
            instructions: vec!["add a test".into(), "fix auth.go:45".into()],
            message: String::new(),
        },
        worktree_changed: changed,
    }
}

fn done(changed: bool) -> Outcome {
    finished(ResultStatus::Done, None, changed)
}

fn review(verdict: Verdict) -> Outcome {
    finished(ResultStatus::Done, Some(verdict), false)
}

fn counters(failed_attempts: u32, escalated: bool, fix_iterations: u32) -> Counters {
    Counters {
        failed_attempts,
        escalated,
        fix_iterations,
        last_answer: None,
    }
}

fn fresh() -> Counters {
    Counters::default()
}

fn fix(iteration: u32, source: FixSource, instructions: &str) -> Decision {
    Decision::CreateFix {
        iteration,
        source,
        instructions: instructions.into(),
    }
}

fn retry(attempt: u32, reason: &str) -> Decision {
    Decision::Retry {
        attempt,
        max_attempts: 5,
        reason: reason.into(),
        delay_secs: 0,
    }
}

fn block(cause: BlockCause, reason: &str) -> Decision {
    Decision::Block {
        cause,
        reason: reason.into(),
    }
}

const REVIEW_FIX: &str = "- add a test\n- fix auth.go:45";
const NO_CHANGES: &str = "no changes: the agent reported DONE but the worktree did not change";

#[test]
fn a_blocked_gate_says_the_end_of_its_output() {
    let output: String = (1..=30).map(|n| format!("line {n}\n")).collect();
    let decision = route(
        Role::Gate,
        &Outcome::GateFailed { output },
        None,
        &counters(0, false, 2),
        Some(3),
        &RouterConfig::default(),
    );
    let Decision::Block { reason, .. } = decision else {
        panic!("{decision:?}");
    };
    assert!(reason.ends_with("; last: line 11\nline 12\nline 13\nline 14\nline 15\nline 16\nline 17\nline 18\nline 19\nline 20\nline 21\nline 22\nline 23\nline 24\nline 25\nline 26\nline 27\nline 28\nline 29\nline 30"), "{reason}");
    assert_eq!(last_lines("a\nb\n", 5), "a\nb");
    assert_eq!(last_lines("a\nb\nc", 2), "b\nc");
}

#[test]
fn the_routing_table() {
    use BlockCause::*;
    use ResultStatus::{Blocked, Error};
    let cases: Vec<(&str, Role, Outcome, Counters, Decision)> = vec![
        ("review approved", Review, review(Verdict::Approved), fresh(), Decision::Close),
        (
            "first rejection creates fix-1 with the instructions",
            Review,
            review(Verdict::Rejected),
            fresh(),
            fix(1, FixSource::Review, REVIEW_FIX),
        ),
        (
            "second rejection creates fix-2",
            Review,
            review(Verdict::Rejected),
            counters(0, false, 1),
            fix(2, FixSource::Review, REVIEW_FIX),
        ),
        (
            "third rejection blocks and says why",
            Review,
            review(Verdict::Rejected),
            counters(0, false, 2),
            block(
                FixLimit,
                "the review rejected the work 3 times (the limit is 3); last: the summary\n\
                 - add a test\n- fix auth.go:45",
            ),
        ),
        (
            "a review DONE without a verdict is retried like malformed output",
            Review,
            done(false),
            fresh(),
            retry(2, "missing `VERDICT` (required for a review step)"),
        ),
        ("fix DONE closes and reruns the fixed step", Fix, done(true), fresh(), Decision::CloseAndRerunFixed),
        ("fix DONE without change is not believed", Fix, done(false), fresh(), retry(2, NO_CHANGES)),
        ("implement DONE closes", Implement, done(true), fresh(), Decision::Close),
        ("implement DONE without change is not believed", Implement, done(false), fresh(), retry(2, NO_CHANGES)),
        ("refine DONE needs no change", Refine, done(false), fresh(), Decision::Close),
        ("merge DONE may be a no-op", Merge, done(false), fresh(), Decision::Close),
        ("task DONE may be a check", Task, done(false), fresh(), Decision::Close),
        ("gate passed", Gate, Outcome::GatePassed, fresh(), Decision::Close),
        (
            "gate failure creates a fix with the output",
            Gate,
            Outcome::GateFailed { output: "test x failed".into() },
            counters(0, false, 1),
            fix(2, FixSource::Gate, "test x failed"),
        ),
        (
            "gate failure at the limit blocks",
            Gate,
            Outcome::GateFailed { output: "test x failed".into() },
            counters(0, false, 2),
            block(FixLimit, "the gate failed 3 times (the limit is 3); last: test x failed"),
        ),
        (
            "approved by a person",
            Approval,
            Outcome::Approved { comment: Some("ship it".into()) },
            fresh(),
            Decision::Close,
        ),
        (
            "a person's rejection creates a fix with the reason",
            Approval,
            Outcome::ApprovalRejected { reason: "rename the flag".into() },
            fresh(),
            fix(1, FixSource::Approval, "rename the flag"),
        ),
        (
            "a person's rejection of a merge held for its workflow files creates a fix",
            Merge,
            Outcome::ApprovalRejected { reason: "keep the formulas as they are".into() },
            fresh(),
            fix(1, FixSource::Approval, "keep the formulas as they are"),
        ),
        (
            "a person's rejection at the limit blocks",
            Approval,
            Outcome::ApprovalRejected { reason: "still wrong".into() },
            counters(0, false, 2),
            block(
                FixLimit,
                "the approval was rejected 3 times (the limit is 3); last: still wrong",
            ),
        ),
        ("BLOCKED blocks with the summary", Implement, finished(Blocked, None, true), fresh(), block(AgentBlocked, "the summary")),
        ("ERROR blocks with the summary", Merge, finished(Error, None, false), fresh(), block(AgentError, "the summary")),
        (
            "a blocked reviewer blocks, whatever its verdict",
            Review,
            finished(Blocked, Some(Verdict::Rejected), false),
            counters(0, false, 2),
            block(AgentBlocked, "the summary"),
        ),
        (
            "malformed output is retried",
            Implement,
            Outcome::Malformed { reason: "missing `SUMMARY`".into() },
            counters(1, false, 0),
            retry(3, "missing `SUMMARY`"),
        ),
        (
            "a crash is retried",
            Review,
            Outcome::Failed { reason: "killed by SIGKILL".into() },
            fresh(),
            retry(2, "killed by SIGKILL"),
        ),
        (
            "a gate that cannot run is retried",
            Gate,
            Outcome::Failed { reason: "timed out after 600s".into() },
            fresh(),
            retry(2, "timed out after 600s"),
        ),
        (
            "the fifth failure escalates",
            Fix,
            Outcome::Failed { reason: "stalled".into() },
            counters(4, false, 0),
            Decision::Escalate { attempt: 6, model: "opus".into(), reason: "stalled".into(), delay_secs: 0 },
        ),
        (
            "a failed escalated attempt blocks",
            Fix,
            Outcome::Malformed { reason: "no `---STEP-RESULT---` block".into() },
            counters(5, true, 0),
            block(
                AttemptsExhausted,
                "gave up after 6 failed attempts, the last with `opus`: no `---STEP-RESULT---` block",
            ),
        ),
        (
            "a usage limit requeues whatever the counters",
            Implement,
            Outcome::UsageLimit { reason: "5-hour limit reached".into() },
            counters(4, true, 2),
            Decision::Requeue { reason: "5-hour limit reached".into() },
        ),
        (
            "a gate outcome for a review is an engine bug, shown to a person",
            Review,
            Outcome::GatePassed,
            fresh(),
            block(WrongOutcome, "a gate pass cannot end a step of role `review`"),
        ),
        (
            "an agent result for a gate is an engine bug",
            Gate,
            done(true),
            fresh(),
            block(WrongOutcome, "an agent result cannot end a step of role `gate`"),
        ),
        (
            "an approval for an agent step is an engine bug",
            Implement,
            Outcome::Approved { comment: None },
            fresh(),
            block(WrongOutcome, "an approval cannot end a step of role `implement`"),
        ),
    ];
    for (name, role, outcome, counters, want) in cases {
        assert_eq!(
            route(role, &outcome, None, &counters, None, &config()),
            want,
            "{name}"
        );
    }
}

/// Feeds each decision's counters into the next outcome, as the engine does.
fn run(
    role: Role,
    outcomes: &[Outcome],
    max_fix: Option<u32>,
    config: &RouterConfig,
) -> Vec<Decision> {
    let mut counters = Counters::default();
    outcomes
        .iter()
        .map(|outcome| {
            let decision = route(role, outcome, None, &counters, max_fix, config);
            counters = counters_after(counters, &decision, None);
            decision
        })
        .collect()
}

#[test]
fn five_failed_attempts_then_one_escalated_then_blocked() {
    let failure = Outcome::Failed {
        reason: "exit 1".into(),
    };
    let decisions = run(Implement, &vec![failure; 7], None, &config());
    let kinds: Vec<_> = decisions.iter().map(short).collect();
    assert_eq!(
        kinds,
        [
            "retry 2",
            "retry 3",
            "retry 4",
            "retry 5",
            "escalate 6",
            "block",
            "block"
        ]
    );
}

#[test]
fn a_usage_limit_counts_no_attempt() {
    let failure = Outcome::Failed {
        reason: "exit 1".into(),
    };
    let limit = Outcome::UsageLimit {
        reason: "limit".into(),
    };
    let outcomes = [failure.clone(), limit.clone(), limit, failure];
    let kinds: Vec<_> = run(Implement, &outcomes, None, &config())
        .iter()
        .map(short)
        .collect();
    assert_eq!(kinds, ["retry 2", "requeue", "requeue", "retry 3"]);
}

#[test]
fn rejections_create_fix_1_and_fix_2_then_block() {
    let rejected = review(Verdict::Rejected);
    let kinds: Vec<_> = run(Review, &vec![rejected; 3], None, &config())
        .iter()
        .map(short)
        .collect();
    assert_eq!(kinds, ["fix 1", "fix 2", "block"]);
}

#[test]
fn a_step_limit_overrides_the_config() {
    let rejected = review(Verdict::Rejected);
    let kinds: Vec<_> = run(Review, &vec![rejected.clone(); 5], Some(5), &config())
        .iter()
        .map(short)
        .collect();
    assert_eq!(kinds, ["fix 1", "fix 2", "fix 3", "fix 4", "block"]);
    let kinds: Vec<_> = run(Review, &[rejected], Some(1), &config())
        .iter()
        .map(short)
        .collect();
    assert_eq!(kinds, ["block"]);
}

#[test]
fn gate_failures_and_rejections_by_a_person_route_like_review_rejections() {
    let gate = Outcome::GateFailed {
        output: "lint failed".into(),
    };
    let person = Outcome::ApprovalRejected {
        reason: "no".into(),
    };
    let rejected = review(Verdict::Rejected);
    for (role, outcome) in [(Gate, gate), (Approval, person), (Review, rejected)] {
        let kinds: Vec<_> = run(role, &vec![outcome; 3], None, &config())
            .iter()
            .map(short)
            .collect();
        assert_eq!(kinds, ["fix 1", "fix 2", "block"], "{role}");
    }
}

#[test]
fn a_fix_starts_a_new_round_of_attempts() {
    let failure = Outcome::Failed {
        reason: "exit 1".into(),
    };
    let mut outcomes = vec![failure.clone(); 4];
    outcomes.push(review(Verdict::Rejected));
    outcomes.push(failure);
    let kinds: Vec<_> = run(Review, &outcomes, None, &config())
        .iter()
        .map(short)
        .collect();
    assert_eq!(
        kinds,
        ["retry 2", "retry 3", "retry 4", "retry 5", "fix 1", "retry 2"]
    );
}

#[test]
fn an_empty_escalation_model_blocks_instead_of_escalating() {
    let config = RouterConfig {
        max_attempts: 2,
        escalation_model: String::new(),
        ..RouterConfig::default()
    };
    let failure = Outcome::Malformed {
        reason: "missing `STATUS`".into(),
    };
    let decisions = run(Task, &vec![failure; 2], None, &config);
    assert_eq!(
        decisions,
        [
            Decision::Retry {
                attempt: 2,
                max_attempts: 2,
                reason: "missing `STATUS`".into(),
                delay_secs: 10,
            },
            block(
                BlockCause::AttemptsExhausted,
                "gave up after 2 failed attempts: missing `STATUS`"
            ),
        ]
    );
}

/// A gate command that could not run (exit 75) is a failed attempt, not a rejection: it
/// starts no fix, and since a gate runs no model there is nothing to escalate to.
#[test]
fn a_gate_that_could_not_run_is_retried_without_a_fix_or_an_escalation() {
    let config = RouterConfig {
        max_attempts: 3,
        ..RouterConfig::default()
    };
    let failure = Outcome::Failed {
        reason: "could not run".into(),
    };
    let decisions = run(Gate, &vec![failure; 3], None, &config);
    assert_eq!(
        decisions,
        [
            Decision::Retry {
                attempt: 2,
                max_attempts: 3,
                reason: "could not run".into(),
                delay_secs: 10,
            },
            Decision::Retry {
                attempt: 3,
                max_attempts: 3,
                reason: "could not run".into(),
                delay_secs: 20,
            },
            block(
                BlockCause::AttemptsExhausted,
                "gave up after 3 failed attempts: could not run"
            ),
        ]
    );
}

#[test]
fn a_rejection_without_instructions_passes_on_the_summary() {
    let outcome = Outcome::Finished {
        result: StepResult {
            status: ResultStatus::Done,
            verdict: Some(Verdict::Rejected),
            summary: "no tests".into(),
            instructions: vec![],
            message: String::new(),
        },
        worktree_changed: false,
    };
    let decision = route(Review, &outcome, None, &fresh(), None, &config());
    assert_eq!(decision, fix(1, FixSource::Review, "no tests"));
}

#[test]
fn outcomes_and_decisions_serialize_tagged_by_type() {
    let outcome = Outcome::GateFailed { output: "x".into() };
    let json = serde_json::to_value(&outcome).expect("serializes");
    assert_eq!(
        json,
        serde_json::json!({"type": "gate_failed", "output": "x"})
    );
    assert_eq!(
        serde_json::from_value::<Outcome>(json).expect("deserializes"),
        outcome
    );
    let decision = fix(1, FixSource::Gate, "x");
    let json = serde_json::to_value(&decision).expect("serializes");
    let want = serde_json::json!({"type": "create_fix", "iteration": 1, "source": "gate", "instructions": "x"});
    assert_eq!(json, want);
    assert_eq!(
        serde_json::from_value::<Decision>(json).expect("deserializes"),
        decision
    );
    let partial: RouterConfig =
        serde_json::from_str(r#"{"max_attempts": 2}"#).expect("deserializes");
    assert_eq!(
        partial,
        RouterConfig {
            max_attempts: 2,
            ..RouterConfig::default()
        }
    );
}

fn short(d: &Decision) -> String {
    match d {
        Decision::Close => "close".into(),
        Decision::CloseAndRerunFixed => "close and rerun".into(),
        Decision::CreateFix { iteration, .. } => format!("fix {iteration}"),
        Decision::Retry { attempt, .. } => format!("retry {attempt}"),
        Decision::Escalate { attempt, .. } => format!("escalate {attempt}"),
        Decision::Requeue { .. } => "requeue".into(),
        Decision::Block { .. } => "block".into(),
    }
}

#[test]
fn retries_wait_longer_each_time() {
    let failure = Outcome::Failed {
        reason: "exit 1".into(),
    };
    let delays: Vec<u64> = run(Implement, &vec![failure; 6], None, &RouterConfig::default())
        .iter()
        .map(|d| match d {
            Decision::Retry { delay_secs, .. } | Decision::Escalate { delay_secs, .. } => {
                *delay_secs
            }
            _ => u64::MAX,
        })
        .collect();
    assert_eq!(delays, [10, 20, 40, 80, 160, u64::MAX]);
    let slow = RouterConfig {
        retry_delay_secs: 600,
        ..RouterConfig::default()
    };
    assert_eq!(slow.retry_delay(3), MAX_RETRY_DELAY_SECS, "capped");
    assert_eq!(slow.retry_delay(u32::MAX), MAX_RETRY_DELAY_SECS);
}

/// Routes `outcomes` with each attempt's answer, as the engine does.
fn run_answers(outcomes: &[(Outcome, Option<u32>)]) -> Vec<Decision> {
    let mut counters = Counters::default();
    outcomes
        .iter()
        .map(|(outcome, answer)| {
            let decision = route(Implement, outcome, *answer, &counters, None, &config());
            counters = counters_after(counters, &decision, *answer);
            decision
        })
        .collect()
}

#[test]
fn the_same_answer_again_is_not_escalated_to_a_stronger_model() {
    let unchanged = done(false);
    let same = Some(answer_sum("DONE, nothing to change", false));
    let decisions = run_answers(&vec![(unchanged.clone(), same); 5]);
    let kinds: Vec<_> = decisions.iter().map(short).collect();
    assert_eq!(kinds, ["retry 2", "retry 3", "retry 4", "retry 5", "block"]);
    let Decision::Block { cause, reason } = &decisions[4] else {
        unreachable!()
    };
    assert_eq!(*cause, BlockCause::SameAnswer);
    assert!(reason.contains("the same answer") && reason.contains("`opus` was not tried"));
    assert!(reason.ends_with(NO_CHANGES), "{reason}");

    // Answers that differ still get the stronger model.
    let varied: Vec<_> = (0..5)
        .map(|n| {
            (
                unchanged.clone(),
                Some(answer_sum(&format!("try {n}"), false)),
            )
        })
        .collect();
    assert_eq!(short(&run_answers(&varied)[4]), "escalate 6");
    // As does a failure without an answer (a crash), however often it repeats.
    let crash = Outcome::Failed {
        reason: "exit code 1".into(),
    };
    assert_eq!(
        short(&run_answers(&vec![(crash, None); 5])[4]),
        "escalate 6"
    );
}

#[test]
fn an_answer_sum_tells_apart_the_message_and_whether_the_worktree_changed() {
    assert_eq!(answer_sum("a", false), answer_sum("a", false));
    assert_ne!(answer_sum("a", false), answer_sum("a", true));
    assert_ne!(answer_sum("a", false), answer_sum("b", false));
}
