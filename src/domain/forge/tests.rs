use super::*;
use crate::domain::id::BeadId;
use crate::domain::time::Timestamp;

fn pr(state: PrState, merged: bool) -> PullRequest {
    PullRequest {
        number: 7,
        state,
        merged,
        draft: false,
        title: "t".into(),
        body: String::new(),
        head_ref: "catalyst/cat-1".into(),
        head_sha: "a".repeat(40),
        base_ref: "main".into(),
        mergeable: Some(true),
        html_url: "https://example.org/pull/7".into(),
    }
}

fn review(id: u64, state: ReviewState, body: &str) -> Review {
    Review {
        id,
        state,
        body: body.into(),
        author: Some("ada".into()),
    }
}

fn comment(id: u64, review: u64, body: &str) -> ReviewComment {
    ReviewComment {
        id,
        review_id: Some(review),
        path: "src/lib.rs".into(),
        line: Some(3),
        body: body.into(),
    }
}

fn news(reviews: Vec<Review>, comments: Vec<ReviewComment>, checks: Checks) -> PullRequestNews {
    PullRequestNews {
        pull_request: pr(PrState::Open, false),
        reviews,
        comments,
        checks,
        required: None,
    }
}

fn failing_check() -> Checks {
    Checks {
        statuses: Vec::new(),
        runs: vec![CheckRun {
            name: "test".into(),
            status: "completed".into(),
            conclusion: Some("failure".into()),
        }],
    }
}

#[test]
fn merged_and_closed_pull_requests_end_the_bead() {
    let link = PullRequestLink::default();
    let mut n = news(Vec::new(), Vec::new(), Checks::default());
    n.pull_request = pr(PrState::Closed, true);
    assert_eq!(judge(&link, &n), Verdict::Merged);
    n.pull_request = pr(PrState::Closed, false);
    assert_eq!(judge(&link, &n), Verdict::Closed);
}

#[test]
fn a_request_for_changes_asks_once_with_its_words_and_lines() {
    let link = PullRequestLink::default();
    let n = news(
        vec![
            review(10, ReviewState::ChangesRequested, "Name the constant."),
            review(11, ReviewState::Commented, ""),
        ],
        vec![comment(20, 10, "use `LIMIT` here")],
        Checks::default(),
    );
    let Verdict::Changes {
        instructions,
        seen_review,
        seen_comment,
        answered_checks,
    } = judge(&link, &n)
    else {
        panic!("changes expected");
    };
    assert!(instructions.contains("Review by ada (requested changes):\nName the constant."));
    assert!(instructions.contains("- `src/lib.rs`, line 3: use `LIMIT` here"));
    assert_eq!((seen_review, seen_comment, answered_checks), (11, 20, None));
    // The same news again, with the marks moved: nothing to do.
    let seen = PullRequestLink {
        seen_review,
        seen_comment,
        ..link
    };
    assert_eq!(judge(&seen, &n), Verdict::Waiting);
}

#[test]
fn comments_of_a_review_written_between_the_reads_wait_for_their_review() {
    // The comments were listed after a review was written that the reviews read before
    // missed: nothing is asked yet, and no mark moves past those comments.
    let early = news(Vec::new(), vec![comment(20, 10, "why?")], Checks::default());
    let link = PullRequestLink::default();
    assert_eq!(judge(&link, &early), Verdict::Waiting);
    // The next read has the review: its words and its comment ask together.
    let late = news(
        vec![review(10, ReviewState::ChangesRequested, "Say why.")],
        vec![comment(20, 10, "why?")],
        Checks::default(),
    );
    let Verdict::Changes {
        instructions,
        seen_comment,
        ..
    } = judge(&link, &late)
    else {
        panic!("changes expected");
    };
    assert!(instructions.contains("Say why."), "{instructions}");
    assert!(instructions.contains("line 3: why?"), "{instructions}");
    assert_eq!(seen_comment, 20);
}

#[test]
fn an_approval_and_its_line_comments_ask_for_nothing() {
    let n = news(
        vec![review(10, ReviewState::Approved, "Looks good")],
        vec![comment(20, 10, "nit: a comma")],
        Checks::default(),
    );
    assert_eq!(judge(&PullRequestLink::default(), &n), Verdict::Waiting);
}

#[test]
fn failing_checks_ask_once_per_head_commit() {
    let n = news(Vec::new(), Vec::new(), failing_check());
    let Verdict::Changes {
        instructions,
        answered_checks,
        ..
    } = judge(&PullRequestLink::default(), &n)
    else {
        panic!("changes expected");
    };
    assert!(
        instructions.contains("Checks failing on aaaaaaaaaaaa: test"),
        "{instructions}"
    );
    let answered = PullRequestLink {
        answered_checks,
        ..Default::default()
    };
    assert_eq!(judge(&answered, &n), Verdict::Waiting);
    let mut moved = n.clone();
    moved.pull_request.head_sha = "b".repeat(40);
    assert!(matches!(judge(&answered, &moved), Verdict::Changes { .. }));
}

#[test]
fn when_the_target_requires_checks_only_those_failing_ask() {
    let mut checks = failing_check();
    checks.statuses.push(CommitStatus {
        context: "ci/lint".into(),
        state: "failure".into(),
    });
    let mut n = news(Vec::new(), Vec::new(), checks);
    n.required = Some(vec!["ci/build".into(), "ci/lint".into()]);
    let Verdict::Changes { instructions, .. } = judge(&PullRequestLink::default(), &n) else {
        panic!("changes expected");
    };
    assert!(instructions.contains(": ci/lint\n"), "{instructions}");
    assert!(
        !instructions.contains("test"),
        "`test` is not required: {instructions}"
    );
    // Only checks nobody requires fail: nothing to fix.
    n.required = Some(vec!["ci/build".into()]);
    assert_eq!(judge(&PullRequestLink::default(), &n), Verdict::Waiting);
}

#[test]
fn an_issue_is_owed_its_link_its_label_and_its_closing_once_each() {
    let mut work = Bead::new(BeadId::new("cat-1").unwrap(), "x", at());
    let mut link = ForgeLink {
        issue: Some(3),
        ..Default::default()
    };
    assert!(owed_writes(&work, &link, false).is_empty());
    link.pull_request = Some(PullRequestLink::default());
    work.status = Status::Blocked;
    assert_eq!(
        owed_writes(&work, &link, false),
        [IssueWrite::Linked, IssueWrite::Blocked]
    );
    link.written = vec![IssueWrite::Linked, IssueWrite::Blocked];
    assert!(owed_writes(&work, &link, false).is_empty());
    link.written = vec![IssueWrite::Linked];
    work.status = Status::Closed;
    assert!(
        owed_writes(&work, &link, false).is_empty(),
        "closed, not merged"
    );
    assert_eq!(owed_writes(&work, &link, true), [IssueWrite::Closed]);
    assert!(
        owed_writes(&work, &ForgeLink::default(), true).is_empty(),
        "no issue"
    );
}

#[test]
fn the_blocked_label_comes_off_when_the_bead_goes_on_and_back_if_it_blocks_again() {
    let mut work = Bead::new(BeadId::new("cat-1").unwrap(), "x", at());
    let mut link = ForgeLink {
        issue: Some(3),
        ..Default::default()
    };
    work.status = Status::Blocked;
    assert_eq!(owed_writes(&work, &link, false), [IssueWrite::Blocked]);
    note_written(&mut link, IssueWrite::Blocked);
    assert!(owed_writes(&work, &link, false).is_empty());
    // A person retries: the bead goes on, and the label is owed off.
    work.status = Status::Open;
    assert_eq!(owed_writes(&work, &link, false), [IssueWrite::Unblocked]);
    note_written(&mut link, IssueWrite::Unblocked);
    assert!(link.written.is_empty(), "{:?}", link.written);
    assert!(owed_writes(&work, &link, false).is_empty());
    // Blocked again: labelled again.
    work.status = Status::Blocked;
    assert_eq!(owed_writes(&work, &link, false), [IssueWrite::Blocked]);
    // Merged while labelled: the label comes off before the issue closes.
    note_written(&mut link, IssueWrite::Blocked);
    work.status = Status::Closed;
    assert_eq!(
        owed_writes(&work, &link, true),
        [IssueWrite::Unblocked, IssueWrite::Closed]
    );
}

#[test]
fn the_link_round_trips_through_the_beads_metadata() {
    let mut work = Bead::new(BeadId::new("cat-1").unwrap(), "x", at());
    assert_eq!(link(&work), None);
    modify_link(&mut work, |l| l.issue = Some(4));
    modify_link(&mut work, |l| l.written.push(IssueWrite::Linked));
    assert_eq!(
        link(&work),
        Some(ForgeLink {
            issue: Some(4),
            pull_request: None,
            written: vec![IssueWrite::Linked],
        })
    );
}

fn at() -> Timestamp {
    Timestamp::parse("2026-11-29T10:00:00Z").unwrap()
}
