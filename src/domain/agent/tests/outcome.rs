//! [`outcome`]: how each kind of run reaches the router, case by case.

use crate::domain::model::Role;
use crate::domain::result::{ResultStatus, Verdict};
use crate::domain::router::Outcome;

use super::block;
use crate::domain::agent::outcome::outcome;
use crate::domain::agent::report::{Exit, RunReport};
use crate::domain::time::Timestamp;

fn report(exit: Exit) -> RunReport {
    let started = Timestamp::parse("2026-01-26T02:02:08.123456Z").expect("timestamp");
    RunReport::empty(exit, started)
}

fn finished(message: &str) -> RunReport {
    RunReport {
        final_message: Some(message.into()),
        ..report(Exit::Code(0))
    }
}

fn failed(reason: &str) -> Option<Outcome> {
    Some(Outcome::Failed {
        reason: reason.into(),
    })
}

fn malformed(reason: &str) -> Option<Outcome> {
    Some(Outcome::Malformed {
        reason: reason.into(),
    })
}

#[test]
fn failures_name_exactly_what_happened() {
    let limited = RunReport {
        usage_limit: Some("Claude AI usage limit reached".into()),
        ..report(Exit::Code(1))
    };
    let agent_error = RunReport {
        is_error: true,
        error: Some("API Error: 500 Internal server error".into()),
        final_message: Some(block("DONE", None, "ignored")),
        ..report(Exit::Code(1))
    };
    let error_without_words = RunReport {
        is_error: true,
        ..report(Exit::Code(0))
    };
    let cases: Vec<(RunReport, Option<Outcome>)> = vec![
        (report(Exit::Cancelled), None),
        (
            report(Exit::SpawnFailed("cannot run `claude`: not found".into())),
            failed("could not start the agent: cannot run `claude`: not found"),
        ),
        (
            report(Exit::WaitFailed("EINTR".into())),
            failed("lost track of the agent: EINTR"),
        ),
        (report(Exit::Code(3)), failed("exit code 3")),
        (report(Exit::Signal(11)), failed("killed by SIGSEGV")),
        (report(Exit::Signal(99)), failed("killed by signal 99")),
        (
            report(Exit::TimedOut { after_ms: 600_000 }),
            failed("timed out after 600s"),
        ),
        (
            report(Exit::TimedOut { after_ms: 1500 }),
            failed("timed out after 1.5s"),
        ),
        (
            report(Exit::Stalled { after_ms: 120_000 }),
            failed("no output for 120s"),
        ),
        (
            report(Exit::Stalled { after_ms: 250 }),
            failed("no output for 250ms"),
        ),
        (
            agent_error,
            failed("agent reported an error: API Error: 500 Internal server error"),
        ),
        (
            error_without_words,
            failed("agent reported an error: no details"),
        ),
        (
            limited.clone(),
            Some(Outcome::UsageLimit {
                reason: "Claude AI usage limit reached".into(),
            }),
        ),
        (
            RunReport {
                exit: Exit::TimedOut { after_ms: 1000 },
                ..limited
            },
            Some(Outcome::UsageLimit {
                reason: "Claude AI usage limit reached".into(),
            }),
        ),
        (
            RunReport {
                final_message: Some(block("DONE", None, "but crashed")),
                ..report(Exit::Code(2))
            },
            failed("exit code 2"),
        ),
        (report(Exit::Code(0)), malformed("no final message")),
        (
            finished("I did it, trust me."),
            malformed("no `---STEP-RESULT---` block"),
        ),
    ];
    for (report, want) in cases {
        assert_eq!(
            outcome(&report, Role::Implement, true),
            want,
            "{:?}",
            report.exit
        );
    }
}

#[test]
fn a_clean_exit_is_judged_by_its_result_block_and_role() {
    let review = finished(&block("DONE", Some("REJECTED"), "needs a test"));
    match outcome(&review, Role::Review, false) {
        Some(Outcome::Finished {
            result,
            worktree_changed,
        }) => {
            assert_eq!(result.status, ResultStatus::Done);
            assert_eq!(result.verdict, Some(Verdict::Rejected));
            assert_eq!(result.summary, "needs a test");
            assert!(!worktree_changed);
        }
        other => panic!("{other:?}"),
    }
    // The same block without a verdict is malformed for a review only.
    let plain = finished(&block("DONE", None, "done"));
    assert_eq!(
        outcome(&plain, Role::Review, false),
        malformed("missing `VERDICT` (required for a review step)")
    );
    assert!(matches!(
        outcome(&plain, Role::Implement, true),
        Some(Outcome::Finished {
            worktree_changed: true,
            ..
        })
    ));
}

#[test]
fn reports_serialize_for_the_run_folder_and_read_back() {
    let r = RunReport {
        final_message: Some("hi".into()),
        cost_usd: Some(0.5),
        usage: Some(serde_json::json!({"input_tokens": 3})),
        started: crate::domain::time::Timestamp::parse("2026-01-26T02:02:08.123456Z").unwrap(),
        ..report(Exit::TimedOut { after_ms: 5000 })
    };
    let text = serde_json::to_string(&r).unwrap();
    assert!(
        text.contains(r#""exit":{"timed_out":{"after_ms":5000}}"#),
        "{text}"
    );
    let back: RunReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
    for (exit, json) in [
        (Exit::Code(0), r#"{"code":0}"#),
        (Exit::Signal(9), r#"{"signal":9}"#),
        (Exit::Cancelled, r#""cancelled""#),
        (Exit::SpawnFailed("x".into()), r#"{"spawn_failed":"x"}"#),
    ] {
        assert_eq!(serde_json::to_string(&exit).unwrap(), json);
    }
}
