//! A bead's life on a forge, decided without talking to one: what the daemon keeps of a
//! bead's pull request and issue (its [`ForgeLink`], in the work bead's metadata, folded from
//! the journal), what a pull request's state, reviews and checks mean for the bead
//! ([`judge`]), the text of a pull request, and which writes to an issue are owed
//! ([`owed_writes`]). The daemon's forge client (`crate::daemon::forge`) gives the forge's
//! objects in the shapes of [`types`].

mod types;

use serde::{Deserialize, Serialize};

use crate::domain::model::{Bead, Status};

pub use types::{
    CheckRun, Checks, CommitStatus, Issue, NewPullRequest, PrState, PullRequest, Review,
    ReviewComment, ReviewState,
};

/// The work bead's metadata key for its [`ForgeLink`].
pub const FORGE_KEY: &str = "catalyst_forge";

/// What the daemon keeps of a work bead on the forge.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeLink {
    /// The issue the bead was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<u64>,
    /// The pull request its merge opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequestLink>,
    /// The writes to the issue already done (or given up), each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written: Vec<IssueWrite>,
}

/// A bead's pull request, and how far the daemon has acted on what people said on it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequestLink {
    pub number: u64,
    pub url: String,
    /// The commit of the bead's branch last pushed: the lease of the next push.
    pub head: String,
    /// The newest review whose request for changes was answered (or seen and needed none).
    #[serde(default)]
    pub seen_review: u64,
    /// The newest comment on a line that was answered (or seen).
    #[serde(default)]
    pub seen_comment: u64,
    /// The head commit (the forge's) whose failing checks got a fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_checks: Option<String>,
    /// The forge could not merge it while its branch lacked the forge's target
    /// (`forge.outdated`): the next push merges the target in first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outdated: bool,
}

/// A write to a bead's issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueWrite {
    /// A comment with the pull request's link.
    Linked,
    /// The blocked label.
    Blocked,
    /// The blocked label taken off: the bead went on after a person's retry.
    Unblocked,
    /// Closed: the bead's work was merged.
    Closed,
}

impl IssueWrite {
    pub fn as_str(self) -> &'static str {
        match self {
            IssueWrite::Linked => "linked",
            IssueWrite::Blocked => "blocked",
            IssueWrite::Unblocked => "unblocked",
            IssueWrite::Closed => "closed",
        }
    }
}

/// The forge link of a work bead, if it has one.
pub fn link(bead: &Bead) -> Option<ForgeLink> {
    let value = bead.metadata.as_ref()?.get(FORGE_KEY)?;
    serde_json::from_value(value.clone()).ok()
}

/// Changes the forge link of a work bead (making one when it has none).
pub fn modify_link(bead: &mut Bead, change: impl FnOnce(&mut ForgeLink)) {
    let mut forge = link(bead).unwrap_or_default();
    change(&mut forge);
    let value = serde_json::to_value(&forge).unwrap_or_default();
    bead.metadata
        .get_or_insert_with(Default::default)
        .insert(FORGE_KEY.into(), value);
}

/// What the forge says of a pull request now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequestNews {
    pub pull_request: PullRequest,
    pub reviews: Vec<Review>,
    pub comments: Vec<ReviewComment>,
    /// Of the pull request's head commit.
    pub checks: Checks,
    /// The checks the target branch's protection requires, when it names any: only those
    /// failing ask for a fix. `None`: every failing check does.
    pub required: Option<Vec<String>>,
}

/// What a pull request's news mean for its bead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Merged on the forge: the bead's merge is done.
    Merged,
    /// Closed without a merge: the bead is cancelled.
    Closed,
    /// People asked for changes, or checks failed: a fix step with `instructions`. The marks
    /// are what the link keeps afterwards, so the same words never ask twice.
    Changes {
        instructions: String,
        seen_review: u64,
        seen_comment: u64,
        answered_checks: Option<String>,
    },
    /// Nothing new to act on (approved, checks pending or passing, or no one has looked).
    Waiting,
}

/// What the news of a bead's pull request mean, given what was already acted on (`link`).
///
/// A review asking for changes, or commenting with words, and comments on lines (unless
/// their review approved) become a fix, once each: the link's marks move past them. Failing
/// checks of the head commit become a fix once per head, and only when no review does:
/// the fix's push starts the checks again anyway.
pub fn judge(link: &PullRequestLink, news: &PullRequestNews) -> Verdict {
    let pr = &news.pull_request;
    if pr.merged {
        return Verdict::Merged;
    }
    if pr.state == PrState::Closed {
        return Verdict::Closed;
    }
    let approved: Vec<u64> = news
        .reviews
        .iter()
        .filter(|r| r.state == ReviewState::Approved)
        .map(|r| r.id)
        .collect();
    let reviews: Vec<&Review> = news
        .reviews
        .iter()
        .filter(|r| r.id > link.seen_review)
        .filter(|r| match r.state {
            ReviewState::ChangesRequested => true,
            ReviewState::Commented => !r.body.trim().is_empty(),
            _ => false,
        })
        .collect();
    // A comment of a review not among the reviews read was written between the two reads:
    // it waits for the next read, which gives its review's words with it.
    let known: Vec<&ReviewComment> = news
        .comments
        .iter()
        .filter(|c| {
            c.review_id
                .is_none_or(|r| news.reviews.iter().any(|review| review.id == r))
        })
        .collect();
    let comments: Vec<&ReviewComment> = known
        .iter()
        .copied()
        .filter(|c| c.id > link.seen_comment)
        .filter(|c| !c.review_id.is_some_and(|r| approved.contains(&r)))
        .collect();
    let seen_review = news
        .reviews
        .iter()
        .map(|r| r.id)
        .fold(link.seen_review, u64::max);
    let seen_comment = known.iter().map(|c| c.id).fold(link.seen_comment, u64::max);
    let failing: Vec<String> = news
        .checks
        .failing()
        .into_iter()
        .filter(|name| news.required.as_ref().is_none_or(|r| r.contains(name)))
        .collect();
    let checks_news = !failing.is_empty() && link.answered_checks.as_deref() != Some(&pr.head_sha);
    if reviews.is_empty() && comments.is_empty() && !checks_news {
        return Verdict::Waiting;
    }
    let mut text = format!("Pull request #{} asks for changes.\n", pr.number);
    for review in &reviews {
        let who = review.author.as_deref().unwrap_or("a reviewer");
        let what = match review.state {
            ReviewState::ChangesRequested => "requested changes",
            _ => "commented",
        };
        text.push_str(&format!("\nReview by {who} ({what}):\n"));
        if !review.body.trim().is_empty() {
            text.push_str(review.body.trim());
            text.push('\n');
        }
    }
    if !comments.is_empty() {
        text.push_str("\nComments on lines:\n");
        for comment in &comments {
            let line = comment
                .line
                .map_or_else(|| "an outdated line".to_owned(), |l| format!("line {l}"));
            text.push_str(&format!(
                "- `{}`, {line}: {}\n",
                comment.path,
                comment.body.trim()
            ));
        }
    }
    let answered_checks = if checks_news {
        text.push_str(&format!(
            "\nChecks failing on {}: {}\n",
            short(&pr.head_sha),
            failing.join(", ")
        ));
        Some(pr.head_sha.clone())
    } else {
        link.answered_checks.clone()
    };
    Verdict::Changes {
        instructions: text,
        seen_review,
        seen_comment,
        answered_checks,
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// The title of a bead's pull request.
pub fn pull_request_title(work: &Bead) -> String {
    format!("{} ({})", work.title, work.id)
}

/// The body of a bead's pull request: the bead, its steps with what each said, and what its
/// agents cost. `steps` in the molecule's order.
pub fn pull_request_body(work: &Bead, steps: &[&Bead], cost_usd: f64) -> String {
    let mut body = format!("Bead `{}`: {}\n", work.id, work.title);
    if let Some(description) = work.description.as_deref().filter(|d| !d.trim().is_empty()) {
        body.push('\n');
        body.push_str(description.trim());
        body.push('\n');
    }
    if let Some(issue) = link(work).and_then(|l| l.issue) {
        body.push_str(&format!("\nCloses #{issue}\n"));
    }
    body.push_str("\n### Steps\n");
    for step in steps {
        let Some(meta) = step.step_meta() else {
            continue;
        };
        let status = match step.status {
            Status::Closed => "done",
            Status::InProgress => "in progress",
            ref other => other.as_str(),
        };
        body.push_str(&format!("- **{}** ({}, {status})", meta.step, meta.role));
        if let Some(summary) = meta.summary.as_deref().filter(|s| !s.trim().is_empty()) {
            body.push_str(": ");
            body.push_str(summary.trim());
        }
        body.push('\n');
    }
    body.push_str(&format!(
        "\nAgents' cost: ${cost_usd:.2}\n\n_Opened by catalyst; reviews here come back to it as fixes._\n"
    ));
    body
}

/// The writes a work bead's issue is owed now, in order: the pull request's link once it has
/// one, the blocked label while it is blocked and off again once it is not, and closing once
/// its work is `merged`. A written `Unblocked` takes `Blocked` out of the written ones
/// ([`note_written`]), so a bead blocked again is labelled again.
pub fn owed_writes(work: &Bead, link: &ForgeLink, merged: bool) -> Vec<IssueWrite> {
    if link.issue.is_none() {
        return Vec::new();
    }
    let blocked = work.status == Status::Blocked;
    let labelled = link.written.contains(&IssueWrite::Blocked);
    [
        (IssueWrite::Linked, link.pull_request.is_some()),
        (IssueWrite::Blocked, blocked),
        (IssueWrite::Unblocked, labelled && !blocked),
        (IssueWrite::Closed, work.status == Status::Closed && merged),
    ]
    .into_iter()
    .filter(|(write, due)| *due && !link.written.contains(write))
    .map(|(write, _)| write)
    .collect()
}

/// What the link keeps once `write` is done: the label's removal undoes its writing.
pub fn note_written(link: &mut ForgeLink, write: IssueWrite) {
    match write {
        IssueWrite::Unblocked => link.written.retain(|w| *w != IssueWrite::Blocked),
        write if !link.written.contains(&write) => link.written.push(write),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
