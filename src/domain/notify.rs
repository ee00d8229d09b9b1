//! Notices: the journal's events a person is told about by webhook (`[[webhooks]]`,
//! docs/notifications.md). Each is decided from one event alone, so the daemon's notifier can
//! follow the journal like any subscriber, and a notice is the same whenever it is sent.

use serde_json::{json, Value};

use crate::domain::budget::{BudgetScope, BudgetStop};
pub use crate::domain::config::webhook::Format;
pub use crate::domain::event::NoticeKind;
use crate::domain::event::{Event, EventBody};
use crate::domain::id::BeadId;

/// The comment the daemon puts on a work bead it blocks, before the reason. A `bead.status`
/// alone does not tell a work bead from one of its steps; this comment is only ever on the
/// work bead, and carries the reason.
pub const BLOCKED_COMMENT: &str = "[daemon] BLOCKED:";

/// The event types a notice may come from, for the notifier's subscription.
pub const SOURCE_TYPES: [&str; 7] = [
    "gate.waiting",
    "merge.held",
    "bead.comment",
    "dispatch.paused",
    "forge.paused",
    "budget.reached",
    "merge.completed",
];

/// One thing to tell.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub kind: NoticeKind,
    /// The event's seq: a receiver that sees a seq again after a daemon crash knows it has it.
    pub seq: u64,
    pub bead: Option<BeadId>,
    /// One line for a person.
    pub text: String,
}

/// The notice `event` gives, if any.
pub fn notice(event: &Event) -> Option<Notice> {
    let (kind, bead, text) = match &event.body {
        EventBody::GateWaiting { bead, step } => (
            NoticeKind::Approval,
            Some(bead),
            format!("{bead} waits for a person: `catalyst ctl approve {step}` (or `reject`)"),
        ),
        EventBody::MergeHeld {
            bead, step, files, ..
        } => (
            NoticeKind::Approval,
            Some(bead),
            format!(
                "{bead} changes workflow files ({}): its merge waits for `catalyst ctl approve {step}`",
                files.join(", ")
            ),
        ),
        EventBody::BeadComment { id, comment } => {
            let reason = comment.text.strip_prefix(BLOCKED_COMMENT)?.trim();
            (NoticeKind::Blocked, Some(id), format!("{id} is blocked: {reason}"))
        }
        EventBody::MergeCompleted {
            bead, target, to, ..
        } => (
            NoticeKind::Merged,
            Some(bead),
            format!("{bead} merged into {target} at {}", short(to)),
        ),
        EventBody::DispatchPaused {
            scope,
            until,
            reason,
            help,
            ..
        } => (
            NoticeKind::Paused,
            None,
            format!("dispatching ({scope} steps) is paused until {until}: {reason}; {help}"),
        ),
        // The first refusal in a row: only a person ends them. Rate limits and outages end
        // by themselves, and each refusal after the first would say the same again.
        EventBody::ForgePaused {
            until,
            reason,
            refusals: 1,
        } => (
            NoticeKind::Paused,
            None,
            format!(
                "forge work is paused until {until}, and tried again later: {reason}; check the forge token and its permissions"
            ),
        ),
        EventBody::BudgetReached {
            scope,
            spent_usd,
            budget_usd,
            until,
        } => {
            let stop = BudgetStop {
                scope: *scope,
                spent_usd: *spent_usd,
                budget_usd: *budget_usd,
                until: *until,
            };
            let raise = match scope {
                BudgetScope::Daily => "until the next UTC day, or raise `daily_budget_usd`",
                BudgetScope::Total => "until `total_budget_usd` is raised",
            };
            (NoticeKind::Budget, None, format!("{} ({raise})", stop.reason()))
        }
        _ => return None,
    };
    Some(Notice {
        kind,
        seq: event.seq,
        bead: bead.cloned(),
        text,
    })
}

/// A commit id as people read it.
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// The body posted for `notice` (from `event`), from the daemon of `workspace`.
pub fn body(notice: &Notice, event: &Event, format: Format, workspace: &str) -> Value {
    match format {
        Format::Json => json!({
            "kind": notice.kind,
            "seq": notice.seq,
            "bead": notice.bead,
            "text": notice.text,
            "workspace": workspace,
            "event": event,
        }),
        Format::Slack => json!({ "text": format!("catalyst ({workspace}): {}", notice.text) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::model::{Comment, CommentId};
    use crate::domain::time::Timestamp;
    use crate::domain::unavailable::{PauseScope, Unavailable};

    fn at(seq: u64, body: EventBody) -> Event {
        Event {
            seq,
            ts: Timestamp::parse("2026-11-29T07:00:00Z").expect("time"),
            more: false,
            body,
        }
    }

    fn id(s: &str) -> BeadId {
        BeadId::new(s).expect("id")
    }

    fn comment(bead: &str, text: &str) -> EventBody {
        EventBody::BeadComment {
            id: id(bead),
            comment: Comment {
                id: CommentId::Int(1),
                issue_id: id(bead),
                author: "catalyst".into(),
                text: text.into(),
                created_at: Timestamp::parse("2026-11-29T07:00:00Z").expect("time"),
                extra: Default::default(),
            },
        }
    }

    #[test]
    fn each_event_a_person_needs_to_hear_of_gives_one_notice() {
        let cases = [
            (
                EventBody::GateWaiting {
                    bead: id("cat-1"),
                    step: id("cat-1.approve"),
                },
                Some((NoticeKind::Approval, "cat-1 waits for a person: `catalyst ctl approve cat-1.approve`")),
            ),
            (
                EventBody::MergeHeld {
                    bead: id("cat-2"),
                    step: id("cat-2.merge"),
                    commit: "abc".into(),
                    files: vec!["formulas/x.formula.toml".into()],
                },
                Some((NoticeKind::Approval, "cat-2 changes workflow files (formulas/x.formula.toml)")),
            ),
            (
                comment("cat-3", "[daemon] BLOCKED: gave up after 5 failed attempts"),
                Some((NoticeKind::Blocked, "cat-3 is blocked: gave up after 5 failed attempts")),
            ),
            (comment("cat-3", "[daemon] RETRY implement attempt 2/5"), None),
            (
                EventBody::MergeCompleted {
                    bead: id("cat-4"),
                    target: "main".into(),
                    from: "1111111111111111".into(),
                    to: "2222222222222222222".into(),
                },
                Some((NoticeKind::Merged, "cat-4 merged into main at 222222222222")),
            ),
            (
                EventBody::DispatchPaused {
                    scope: PauseScope::Agent,
                    cause: Unavailable::Auth,
                    until: Timestamp::parse("2026-11-29T07:01:00Z").expect("time"),
                    reason: "the API refused the key".into(),
                    help: "log in again".into(),
                },
                Some((NoticeKind::Paused, "dispatching (agent steps) is paused until 2026-11-29T07:01:00Z: the API refused the key; log in again")),
            ),
            (
                EventBody::BudgetReached {
                    scope: BudgetScope::Total,
                    spent_usd: 10.5,
                    budget_usd: 10.0,
                    until: None,
                },
                Some((NoticeKind::Budget, "the total spending reached its limit: agents spent $10.50 of $10.00")),
            ),
            (
                EventBody::ForgePaused {
                    until: Timestamp::parse("2026-11-29T07:01:00Z").expect("time"),
                    reason: "the forge refused `list issues` (401): Bad credentials".into(),
                    refusals: 1,
                },
                Some((NoticeKind::Paused, "forge work is paused until 2026-11-29T07:01:00Z, and tried again later: the forge refused `list issues` (401): Bad credentials; check the forge token")),
            ),
            (
                EventBody::ForgePaused {
                    until: Timestamp::parse("2026-11-29T07:03:00Z").expect("time"),
                    reason: "the forge refused `list issues` (401): Bad credentials".into(),
                    refusals: 2,
                },
                None,
            ),
            (
                EventBody::ForgePaused {
                    until: Timestamp::parse("2026-11-29T07:01:00Z").expect("time"),
                    reason: "the forge's rate limit is used up".into(),
                    refusals: 0,
                },
                None,
            ),
            (EventBody::WorktreeRemoved { bead: id("cat-5") }, None),
        ];
        for (body, want) in cases {
            let kind = body.kind();
            let got = notice(&at(7, body));
            match (got, want) {
                (None, None) => {}
                (Some(n), Some((want_kind, text))) => {
                    assert_eq!(n.kind, want_kind, "{kind}");
                    assert_eq!(n.seq, 7);
                    assert!(n.text.starts_with(text), "{kind}: {}", n.text);
                }
                (got, want) => panic!("{kind}: {got:?} instead of {want:?}"),
            }
        }
    }

    #[test]
    fn every_source_type_is_an_event_type() {
        for t in SOURCE_TYPES {
            assert!(crate::domain::event::EventBody::KINDS.contains(&t), "{t}");
        }
    }

    #[test]
    fn the_slack_body_is_one_line_of_text_and_the_json_body_carries_the_event() {
        let event = at(3, comment("cat-3", "[daemon] BLOCKED: over budget"));
        let n = notice(&event).expect("a notice");
        assert_eq!(
            body(&n, &event, Format::Slack, "repo"),
            json!({"text": "catalyst (repo): cat-3 is blocked: over budget"})
        );
        let json = body(&n, &event, Format::Json, "repo");
        assert_eq!(json["kind"], "blocked");
        assert_eq!(json["seq"], 3);
        assert_eq!(json["bead"], "cat-3");
        assert_eq!(json["event"]["type"], "bead.comment");
    }
}
