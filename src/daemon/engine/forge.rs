//! The forge (`[forge]`, docs/forge.md): a bead's merge as a pull request, followed until
//! people merge or close it, and labelled issues as beads, with their state written back.
//!
//! One forge task runs at a time. It pushes the branches of the merge steps waiting for the
//! forge and opens or updates their pull requests, writes what issues are owed, and, every
//! `poll_secs`, reads the news of the open pull requests and the labelled issues. The engine
//! decides from its report ([`crate::domain::forge::judge`]) and records; a forge that is
//! rate-limited or down pauses forge work only, with a `forge.paused` record.
//!
//! Nothing the forge says is acted on twice: a pull request's reviews, comments and failing
//! checks are marked seen in the bead's forge link, an issue becomes a bead once (its number
//! is in the bead's link), and each write to an issue is recorded once it is done. The
//! daemon's own writes (comments, labels) are never read back as news, so they cannot loop.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use crate::daemon::forge::{fetch, push, Forge, ForgeError, NewPullRequest, PushError, Token};
use crate::daemon::worktree::{transport, BranchMerge, Repo};
use crate::domain::config::forge::ForgeConfig;
use crate::domain::event::EventBody;
use crate::domain::forge::{self, Issue, IssueWrite, PullRequestLink, PullRequestNews, Verdict};
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, Phase, Status};
use crate::domain::router::Outcome;
use crate::protocol::{BeadInput, ForgePause, WaitingPullRequest};

use super::error::EngineError;
use super::{Engine, Input};

/// The first wait after the forge failed without saying how long (an outage); it doubles
/// with each failure after it, up to [`MAX_OUTAGE_WAIT`].
const OUTAGE_WAIT: Duration = Duration::from_secs(30);
const MAX_OUTAGE_WAIT: Duration = Duration::from_secs(15 * 60);

/// The engine's forge: the client, and where forge work is.
#[derive(Debug)]
pub struct ForgeWork {
    client: Forge,
    token: Token,
    config: ForgeConfig,
    /// The repository the bead branches are pushed from.
    repo: PathBuf,
    /// The file the token was read from.
    token_file: PathBuf,
    /// A forge task is running.
    busy: bool,
    /// When the next look at pull requests and issues is due.
    next_poll: Instant,
    /// Forge work waits until then (a rate limit, an outage), and how many failures in a row.
    paused: Option<(Instant, u32)>,
    /// What the last pause said, for `status`.
    pause_said: Option<ForgePause>,
    /// The refusals of the whole poll in a row since forge work last went on.
    refusals: u32,
    /// The forge's target branch as last fetched (a ref of the repository), once fetched:
    /// where new beads start, since the forge merges.
    start_point: Option<String>,
}

/// Where the forge's target branch is fetched to: `refs/catalyst/forge/<target>`.
const FETCHED_TARGET: &str = "refs/catalyst/forge/";

impl ForgeWork {
    /// The forge of `config`, its token read from `token_file` (relative to `workspace`).
    pub fn new(config: &ForgeConfig, workspace: &Path) -> Result<ForgeWork, ForgeError> {
        let token_file = token_path(config, workspace);
        let token = Token::read(&token_file)?;
        let client = Forge::new(config, token.clone())?;
        Ok(ForgeWork {
            client,
            token,
            token_file,
            config: config.clone(),
            repo: workspace.to_owned(),
            busy: false,
            next_poll: Instant::now(),
            paused: None,
            pause_said: None,
            refusals: 0,
            start_point: None,
        })
    }

    /// When the engine must look at the forge again, if no input comes before.
    pub(super) fn wake(&self) -> Option<Instant> {
        if self.busy {
            return None;
        }
        // A pause over leaves the next poll (pushes due start on the engine's next turn).
        Some(match self.paused {
            Some((until, _)) if until > Instant::now() => until,
            _ => self.next_poll,
        })
    }

    /// The file the token was read from: agents and gates must see it empty.
    pub(super) fn token_file(&self) -> &Path {
        &self.token_file
    }

    fn may_start(&self, now: Instant) -> bool {
        !self.busy && self.paused.is_none_or(|(until, _)| until <= now)
    }
}

/// The token file's path: relative to the workspace when not absolute.
pub fn token_path(config: &ForgeConfig, workspace: &Path) -> PathBuf {
    workspace.join(&config.token_file)
}

/// What one forge task does.
#[derive(Debug, Default)]
struct ForgeJob {
    pushes: Vec<PushJob>,
    writes: Vec<WriteJob>,
    polls: Vec<PollJob>,
    /// The label of the issues to take, when they are looked at.
    issues: Option<String>,
    /// The target branch to fetch from the forge, when pull requests merge there.
    fetch: Option<String>,
}

#[derive(Debug)]
struct PushJob {
    work: BeadId,
    step: BeadId,
    pull: NewPullRequest,
    /// The bead's pull request, once it has one.
    link: Option<PullRequestLink>,
}

#[derive(Debug)]
struct WriteJob {
    work: BeadId,
    issue: u64,
    write: IssueWrite,
    /// The pull request's link, for the comment.
    url: String,
}

#[derive(Debug)]
struct PollJob {
    work: BeadId,
    step: BeadId,
    number: u64,
}

/// What a forge task did, for the engine to decide and record.
#[derive(Debug, Default)]
pub struct ForgeReport {
    pushed: Vec<Pushed>,
    /// Pushes or pull requests the forge refused: (work, step, why).
    refused: Vec<(BeadId, BeadId, String)>,
    written: Vec<(WriteJob, Option<String>)>,
    news: Vec<Polled>,
    /// Branches the forge's target conflicts with: nothing was pushed.
    conflicts: Vec<Conflicted>,
    /// The labelled issues, when they were looked at.
    issues: Option<Vec<Issue>>,
    /// Whether this task looked at pull requests and issues.
    polled: bool,
    /// The ref the forge's target branch was fetched to.
    fetched: Option<String>,
    /// The forge is rate-limited or down: what was left undone waits.
    paused: Option<ForgeError>,
}

/// What a waiting pull request says.
#[derive(Debug)]
struct Polled {
    work: BeadId,
    step: BeadId,
    news: PullRequestNews,
    /// The forge cannot merge it, and the forge's target as fetched is not in its branch.
    outdated: bool,
}

/// A branch the forge's target conflicts with, and where each stood.
#[derive(Debug)]
struct Conflicted {
    work: BeadId,
    step: BeadId,
    target: String,
    target_tip: String,
    branch_tip: String,
    files: Vec<String>,
}

#[derive(Debug)]
struct Pushed {
    work: BeadId,
    step: BeadId,
    number: u64,
    url: String,
    head: String,
}

impl Engine {
    /// Hands bead merges and labelled issues to the forge from now on (`[forge]`).
    pub fn set_forge(&mut self, forge: ForgeWork) {
        self.forge = Some(forge);
    }

    /// Whether bead merges go to the forge as pull requests.
    pub(super) fn merges_on_forge(&self) -> bool {
        self.forge.as_ref().is_some_and(|f| f.config.pull_requests)
    }

    /// Starts the forge task when there is forge work and the forge may be asked.
    pub(super) fn start_forge(&mut self) {
        let now = Instant::now();
        let Some(forge) = self.forge.as_ref().filter(|f| f.may_start(now)) else {
            return;
        };
        let poll = forge.next_poll <= now;
        let mut job = ForgeJob {
            pushes: if forge.config.pull_requests {
                self.push_jobs()
            } else {
                Vec::new()
            },
            ..Default::default()
        };
        if poll {
            job.writes = self.write_jobs();
            job.polls = self.poll_jobs();
            job.issues = forge.config.issue_label.clone();
            job.fetch = forge
                .config
                .pull_requests
                .then(|| self.loaded.config.target_branch.clone());
        }
        // Branches are brought up to date with the forge's target before they are pushed.
        let up_to = self.fetched_target();
        let git = self
            .repo
            .clone()
            .with_identity_of(&self.loaded.config.merge);
        let Some(forge) = self.forge.as_mut() else {
            return;
        };
        if poll {
            forge.next_poll = now + Duration::from_secs(forge.config.poll_secs);
        }
        if job.pushes.is_empty()
            && job.writes.is_empty()
            && job.polls.is_empty()
            && job.issues.is_none()
            && job.fetch.is_none()
        {
            return;
        }
        forge.busy = true;
        let task = Task {
            client: forge.client.clone(),
            token: forge.token.clone(),
            remote: forge.config.remote(),
            repo: forge.repo.clone(),
            blocked_label: forge.config.blocked_label.clone(),
            git,
            up_to,
            target_branch: self.loaded.config.target_branch.clone(),
        };
        self.tasks
            .spawn(async move { Input::ForgeDone(Box::new(task.run(job, poll).await)) });
    }

    /// The beads whose merge waits for people on the forge, with their pull requests.
    pub(super) fn waiting_pull_requests(&self) -> Vec<WaitingPullRequest> {
        let state = self.store.state();
        let mut waiting: Vec<WaitingPullRequest> = self
            .active
            .iter()
            .filter(|w| state.waiting_pull_request(w.as_str()))
            .filter_map(|w| {
                let pr = forge::link(state.get(w.as_str())?)?.pull_request?;
                Some(WaitingPullRequest {
                    bead: w.clone(),
                    number: pr.number,
                    url: pr.url,
                })
            })
            .collect();
        waiting.sort_by(|a, b| a.bead.cmp(&b.bead));
        waiting
    }

    /// Where a bead's branch starts: the forge's target as last fetched when the forge merges
    /// (and agents run here: a worker fetches from the cluster's remote), else the local
    /// target branch.
    pub(super) fn start_point(&self) -> String {
        self.fetched_target()
            .unwrap_or_else(|| self.loaded.config.target_branch.clone())
    }

    /// The forge's target as last fetched, when beads start from it (see `start_point`).
    fn fetched_target(&self) -> Option<String> {
        self.forge
            .as_ref()
            .filter(|f| f.config.pull_requests && self.remote.is_none())
            .and_then(|f| f.start_point.clone())
    }

    /// Forge work waiting, and why, while it does.
    pub(super) fn forge_pause(&self) -> Option<ForgePause> {
        self.forge.as_ref()?.pause_said.clone()
    }

    /// The merge steps waiting for the forge: their branch is pushed and their pull request
    /// opened or brought up to date.
    fn push_jobs(&self) -> Vec<PushJob> {
        let state = self.store.state();
        let target = &self.loaded.config.target_branch;
        self.active
            .iter()
            .filter(|w| !self.dispatch.busy(w))
            .filter_map(|w| {
                let work = state.get(w.as_str())?;
                let step = state.steps(w.as_str()).find(|s| {
                    s.status == Status::InProgress
                        && s.step_meta().and_then(|m| m.phase) == Some(Phase::Merging)
                })?;
                let steps: Vec<&Bead> = state.steps(w.as_str()).collect();
                let body =
                    forge::pull_request_body(work, &steps, crate::domain::state::spent(work));
                Some(PushJob {
                    work: w.clone(),
                    step: step.id.clone(),
                    pull: NewPullRequest {
                        head: crate::daemon::worktree::branch_name(w),
                        base: target.clone(),
                        title: forge::pull_request_title(work),
                        body,
                        draft: false,
                    },
                    link: forge::link(work).and_then(|l| l.pull_request),
                })
            })
            .collect()
    }

    /// The open pull requests of merge steps waiting for them.
    fn poll_jobs(&self) -> Vec<PollJob> {
        let state = self.store.state();
        self.active
            .iter()
            .filter_map(|w| {
                state.steps(w.as_str()).find_map(|s| {
                    let meta = s.step_meta()?;
                    match meta.phase {
                        Some(Phase::PullRequest { number }) if s.status == Status::InProgress => {
                            Some(PollJob {
                                work: w.clone(),
                                step: s.id.clone(),
                                number,
                            })
                        }
                        _ => None,
                    }
                })
            })
            .collect()
    }

    /// The work beads with a forge link (made from an issue, or with a pull request), and
    /// their links.
    fn forge_links(&self) -> impl Iterator<Item = (&Bead, forge::ForgeLink)> {
        self.store
            .state()
            .beads()
            .filter(|b| {
                b.metadata
                    .as_ref()
                    .is_some_and(|m| m.contains_key(forge::FORGE_KEY))
            })
            .filter_map(|b| Some((b, forge::link(b)?)))
    }

    /// The writes issues are owed, over every bead made from one.
    fn write_jobs(&self) -> Vec<WriteJob> {
        self.forge_links()
            .flat_map(|(b, link)| {
                let url = link
                    .pull_request
                    .as_ref()
                    .map(|p| p.url.clone())
                    .unwrap_or_default();
                let issue = link.issue.unwrap_or_default();
                let merged = crate::domain::state::merged(b).is_some();
                forge::owed_writes(b, &link, merged)
                    .into_iter()
                    .map(move |write| WriteJob {
                        work: b.id.clone(),
                        issue,
                        write,
                        url: url.clone(),
                    })
            })
            .collect()
    }

    /// The forge task ended: record what it did and decide from what it read.
    pub(super) fn forge_done(&mut self, report: ForgeReport) -> Result<(), EngineError> {
        let now = crate::daemon::clock::now();
        let was_paused = self.forge.as_ref().is_some_and(|f| f.paused.is_some());
        if let Some(forge) = self.forge.as_mut() {
            forge.busy = false;
        }
        if let (Some(fetched), Some(forge)) = (report.fetched, self.forge.as_mut()) {
            forge.start_point = Some(fetched);
        }
        let mut events = Vec::new();
        if report.paused.is_none() && was_paused && (report.polled || !report.pushed.is_empty()) {
            if let Some(forge) = self.forge.as_mut() {
                forge.paused = None;
                forge.refusals = 0;
                forge.pause_said = None;
            }
            tracing::info!("the forge answers again: forge work goes on");
            events.push(EventBody::ForgeResumed {});
        }
        for pushed in report.pushed {
            // The bead may have been cancelled while its branch was pushed.
            if !self.waits_for_push(&pushed.step) {
                continue;
            }
            tracing::info!(bead = %pushed.work, number = pushed.number, url = %pushed.url, "pushed; the pull request waits for review");
            events.push(EventBody::ForgePushed {
                bead: pushed.work,
                step: pushed.step,
                number: pushed.number,
                url: pushed.url,
                head: pushed.head,
            });
        }
        for (job, error) in report.written {
            if let Some(e) = &error {
                tracing::warn!(bead = %job.work, issue = job.issue, write = job.write.as_str(), error = %e, "cannot write to the issue; given up");
            }
            events.push(EventBody::ForgeIssueWritten {
                bead: job.work,
                issue: job.issue,
                write: job.write,
                error,
            });
        }
        self.record(events)?;
        for (work, step, reason) in report.refused {
            let reason = format!("the forge refused the pull request: {reason}");
            tracing::error!(bead = %work, "{reason}");
            self.block_bead(&work, Some(&step), &reason)?;
        }
        for polled in report.news {
            self.pull_request_news(&polled)?;
        }
        for c in report.conflicts {
            if !self.waits_for_push(&c.step) {
                continue;
            }
            let tips = (c.target_tip.as_str(), c.branch_tip.as_str());
            self.branch_conflicts(&c.work, &c.step, &c.target, tips, c.files)?;
        }
        if let Some(issues) = report.issues {
            self.take_issues(issues)?;
        }
        if let Some(error) = report.paused {
            self.pause_forge(&error, now)?;
        }
        Ok(())
    }

    /// Whether merge step `step` still waits for its push (in progress, phase `merging`).
    fn waits_for_push(&self, step: &BeadId) -> bool {
        self.store.state().get(step.as_str()).is_some_and(|s| {
            s.status == Status::InProgress
                && s.step_meta().and_then(|m| m.phase) == Some(Phase::Merging)
        })
    }

    /// Forge work waits: until the rate limit's end, or a doubling wait for an outage.
    fn pause_forge(
        &mut self,
        error: &ForgeError,
        now: crate::domain::time::Timestamp,
    ) -> Result<(), EngineError> {
        let Some(forge) = self.forge.as_mut() else {
            return Ok(());
        };
        let failures = forge.paused.map_or(0, |(_, n)| n) + 1;
        let wait = match error {
            ForgeError::RateLimited { until } => (*until - now.to_utc())
                .to_std()
                .unwrap_or_default()
                .max(Duration::from_secs(1)),
            _ => OUTAGE_WAIT
                .saturating_mul(1 << (failures - 1).min(8))
                .min(MAX_OUTAGE_WAIT),
        };
        forge.paused = Some((Instant::now() + wait, failures));
        let until = crate::domain::time::Timestamp::from_utc(
            now.to_utc() + chrono::Duration::from_std(wait).unwrap_or_default(),
        );
        let reason = error.to_string();
        forge.pause_said = Some(ForgePause {
            until,
            reason: reason.clone(),
        });
        tracing::warn!(%until, "{reason}; forge work waits, local work goes on");
        let refusals = if error.is_transient() {
            0
        } else {
            forge.refusals += 1;
            forge.refusals
        };
        self.record(vec![EventBody::ForgePaused {
            until,
            reason,
            refusals,
        }])
        .map(drop)
    }

    /// Acts on what a bead's pull request says now.
    fn pull_request_news(&mut self, polled: &Polled) -> Result<(), EngineError> {
        let Polled {
            work,
            step,
            news,
            outdated,
        } = polled;
        let state = self.store.state();
        let (Some(work), Some(step)) = (
            state.get(work.as_str()).cloned(),
            state.get(step.as_str()).cloned(),
        ) else {
            return Ok(());
        };
        let Some(meta) = step.step_meta() else {
            return Ok(());
        };
        // Only a step still waiting for this pull request: the news may be older than a
        // record since.
        let number = news.pull_request.number;
        if step.status != Status::InProgress || meta.phase != Some(Phase::PullRequest { number }) {
            return Ok(());
        }
        let Some(link) = forge::link(&work).and_then(|l| l.pull_request) else {
            return Ok(());
        };
        let url = &news.pull_request.html_url;
        match forge::judge(&link, news) {
            Verdict::Waiting if *outdated => {
                tracing::info!(bead = %work.id, number, "the forge cannot merge the pull request: merging its target into the branch");
                self.record(vec![EventBody::ForgeOutdated {
                    bead: work.id.clone(),
                    step: step.id.clone(),
                    number,
                }])
                .map(drop)
            }
            Verdict::Waiting => Ok(()),
            Verdict::Merged => {
                tracing::info!(bead = %work.id, number, "the pull request was merged");
                let target = self.loaded.config.target_branch.clone();
                let merged = format!("merged by pull request #{number} ({url})");
                let mut events = vec![
                    EventBody::MergeCompleted {
                        bead: work.id.clone(),
                        target,
                        from: link.head.clone(),
                        to: news.pull_request.head_sha.clone(),
                    },
                    EventBody::BeadStatus {
                        id: step.id.clone(),
                        status: Status::Closed,
                        reason: Some(merged.clone()),
                    },
                ];
                events.extend(self.close_if_done(&work, &step.id, Some(merged)));
                self.apply_decision(&work.id, events)
            }
            Verdict::Closed => {
                tracing::info!(bead = %work.id, number, "the pull request was closed without a merge: the bead is cancelled");
                let reason = format!("pull request #{number} was closed without a merge ({url})");
                self.finish_cancel(&work, Some(reason), Vec::new())
            }
            Verdict::Changes {
                instructions,
                seen_review,
                seen_comment,
                answered_checks,
            } => {
                tracing::info!(bead = %work.id, number, "the pull request asks for changes: a fix step follows");
                let mut events = vec![EventBody::ForgeFeedback {
                    bead: work.id.clone(),
                    number,
                    seen_review,
                    seen_comment,
                    answered_checks,
                }];
                let outcome = Outcome::PullRequestChanges { instructions };
                events.extend(self.route(&work, &step, &meta, meta.attempts, &outcome));
                self.apply_decision(&work.id, events)
            }
        }
    }

    /// The labelled issues no bead was made from yet become beads.
    fn take_issues(&mut self, issues: Vec<Issue>) -> Result<(), EngineError> {
        let known: std::collections::HashSet<u64> = self
            .forge_links()
            .filter_map(|(_, link)| link.issue)
            .collect();
        let inputs: Vec<BeadInput> = issues
            .into_iter()
            .filter(|i| !known.contains(&i.number))
            .map(issue_input)
            .collect();
        if inputs.is_empty() {
            return Ok(());
        }
        let (ids, events) = match self.submission(inputs, false) {
            Ok(made) => made,
            Err(e) => {
                tracing::error!(error = %e.message, "cannot make beads of the forge's issues");
                return Ok(());
            }
        };
        tracing::info!(beads = ?ids, "issues became beads");
        self.record(events).map(drop)
    }
}

/// The bead an issue becomes: its title, body, labels and assignee, and its number in the
/// bead's forge link.
fn issue_input(issue: Issue) -> BeadInput {
    let description = format!(
        "{}\n\n(issue #{}: {})",
        issue.body.trim(),
        issue.number,
        issue.html_url
    );
    let link = forge::ForgeLink {
        issue: Some(issue.number),
        ..Default::default()
    };
    let mut metadata = crate::domain::model::JsonMap::new();
    metadata.insert(
        forge::FORGE_KEY.into(),
        serde_json::to_value(&link).unwrap_or_default(),
    );
    BeadInput {
        title: issue.title,
        description: Some(description.trim_start().to_owned()),
        labels: issue.labels,
        assignee: issue.assignee,
        metadata: Some(metadata),
        ..Default::default()
    }
}

/// What the forge task needs of the engine's forge.
struct Task {
    client: Forge,
    token: Token,
    remote: String,
    repo: PathBuf,
    blocked_label: String,
    /// The repository's branches, for merging the forge's target into them.
    git: Repo,
    /// The forge's target as last fetched, when branches are brought up to date with it.
    up_to: Option<String>,
    /// The branch pull requests go into, whose protection says which checks are required.
    target_branch: String,
}

impl Task {
    /// Does `job` in order; the first sign that the forge is rate-limited or down ends it,
    /// and what was left waits for the pause to end.
    async fn run(self, job: ForgeJob, polled: bool) -> ForgeReport {
        let mut report = ForgeReport {
            polled,
            ..Default::default()
        };
        if let Err(e) = self.work(job, &mut report).await {
            report.paused = Some(e);
        }
        report
    }

    async fn work(&self, job: ForgeJob, report: &mut ForgeReport) -> Result<(), ForgeError> {
        // The forge's target first: branches are brought up to date with the newest one.
        if let Some(target) = job.fetch {
            let into = format!("{FETCHED_TARGET}{target}");
            match fetch(&self.repo, &self.remote, &target, &into, Some(&self.token)).await {
                Ok(()) => report.fetched = Some(into),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot fetch the forge's `{target}`; new beads start from the last one fetched")
                }
            }
        }
        let up_to = report.fetched.clone().or_else(|| self.up_to.clone());
        for push in job.pushes {
            if let Some(target) = &up_to {
                if let Some(conflict) = self.target_conflict(&push, target).await {
                    report.conflicts.push(conflict);
                    continue;
                }
            }
            match self.push(&push).await {
                Ok(pushed) => report.pushed.push(pushed),
                Err(e) if e.is_transient() => return Err(e),
                Err(e) => report.refused.push((push.work, push.step, e.to_string())),
            }
        }
        for write in job.writes {
            match self.write(&write).await {
                Ok(()) => report.written.push((write, None)),
                Err(e) if e.is_transient() => return Err(e),
                Err(e) => {
                    let error = e.to_string();
                    report.written.push((write, Some(error)));
                }
            }
        }
        let mut polled = Vec::new();
        for poll in job.polls {
            match self.news(poll.number).await {
                Ok(news) => polled.push((poll, news)),
                Err(e) if e.is_transient() => return Err(e),
                Err(e) => {
                    tracing::warn!(bead = %poll.work, number = poll.number, error = %e, "cannot read the pull request")
                }
            }
        }
        // The checks the target's protection requires: read once, and only when some check
        // fails, since only then do they matter.
        let failing = polled.iter().any(|(_, n)| !n.checks.failing().is_empty());
        let required = match failing {
            false => None,
            true => match self.client.required_checks(&self.target_branch).await {
                Ok(required) => required,
                Err(e) if e.is_transient() => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the checks `{}` requires; every failing check asks for a fix", self.target_branch);
                    None
                }
            },
        };
        for (poll, mut news) in polled {
            news.required = required.clone();
            let outdated = news.pull_request.mergeable == Some(false)
                && match &up_to {
                    Some(target) => !self.has(&poll.work, target).await,
                    None => false,
                };
            report.news.push(Polled {
                work: poll.work,
                step: poll.step,
                news,
                outdated,
            });
        }
        if let Some(label) = job.issues {
            report.issues = Some(self.client.labelled_issues(&label).await?);
        }
        Ok(())
    }

    /// Gives the conflict of the forge's `target` with the bead's branch, for the merge agent:
    /// a branch git can merge is pushed as it is (the forge merges it), but for a pull request
    /// the forge could not merge (`outdated`), whose branch the daemon merges the target into,
    /// as the local merge does. A branch that cannot be merged for another reason is pushed as
    /// it is: the forge shows what is wrong.
    async fn target_conflict(&self, job: &PushJob, target: &str) -> Option<Conflicted> {
        let (git, work, into) = (self.git.clone(), job.work.clone(), target.to_owned());
        let update = job.link.as_ref().is_some_and(|l| l.outdated);
        let merged = tokio::task::spawn_blocking(move || {
            let files = if update {
                match git.merge_target_into_branch(&work, &into)? {
                    BranchMerge::Conflict { files } => files,
                    _ => Vec::new(),
                }
            } else {
                git.conflicts_with(&work, &into)?
            };
            if files.is_empty() {
                return Ok(None);
            }
            let tips = (git.target_head(&into)?, git.head(&work)?);
            Ok::<_, crate::daemon::worktree::GitError>(Some((files, tips)))
        })
        .await;
        match merged {
            Ok(Ok(None)) => None,
            Ok(Ok(Some((files, (target_tip, branch_tip))))) => Some(Conflicted {
                work: job.work.clone(),
                step: job.step.clone(),
                target: target.to_owned(),
                target_tip: target_tip.to_string(),
                branch_tip: branch_tip.to_string(),
                files,
            }),
            Ok(Err(e)) => {
                tracing::warn!(bead = %job.work, error = %e, "cannot merge the forge's `{target}` into the bead's branch; pushing it as it is");
                None
            }
            Err(e) => {
                tracing::warn!(bead = %job.work, error = %e, "the merge of the forge's target stopped; pushing the branch as it is");
                None
            }
        }
    }

    /// Whether the bead's branch has `target`'s tip (a branch that cannot be read counts as
    /// having it: nothing is done about it).
    async fn has(&self, work: &BeadId, target: &str) -> bool {
        let (git, work, target) = (self.git.clone(), work.clone(), target.to_owned());
        tokio::task::spawn_blocking(move || git.branch_has(&work, &target))
            .await
            .map_or(true, |has| has.unwrap_or(true))
    }

    /// Pushes the bead's branch and opens its pull request, or brings it up to date.
    async fn push(&self, job: &PushJob) -> Result<Pushed, ForgeError> {
        let branch = &job.pull.head;
        let tip_ref = format!("refs/heads/{branch}^{{commit}}");
        let head = transport::git_with(&self.repo, &["rev-parse", "--verify", &tip_ref], &[])
            .await
            .map_err(|e| ForgeError::Refused {
                operation: "push",
                status: 0,
                message: format!("the bead's branch `{branch}` cannot be read: {}", e.detail),
            })?;
        let head = head.trim().to_owned();
        let lease = job.link.as_ref().map(|l| l.head.as_str());
        push(
            &self.repo,
            &self.remote,
            branch,
            branch,
            lease,
            Some(&self.token),
        )
        .await
        .map_err(|e| match e {
            PushError::Failed { ref stderr, .. } if unreachable(stderr) => {
                ForgeError::Unavailable {
                    reason: e.to_string(),
                }
            }
            e => ForgeError::Refused {
                operation: "push",
                status: 0,
                message: e.to_string(),
            },
        })?;
        // Without a link, a pull request from the branch may still be open: opened just
        // before a crash that lost its record. It is taken up rather than opened twice.
        let number = match &job.link {
            Some(link) => Some(link.number),
            None => self
                .client
                .open_pull_request_from(branch)
                .await?
                .map(|pr| pr.number),
        };
        let pr = match number {
            None => self.client.create_pull_request(&job.pull).await?,
            Some(number) => {
                self.client
                    .update_pull_request(number, Some(&job.pull.title), Some(&job.pull.body))
                    .await?
            }
        };
        Ok(Pushed {
            work: job.work.clone(),
            step: job.step.clone(),
            number: pr.number,
            url: pr.html_url,
            head,
        })
    }

    async fn write(&self, job: &WriteJob) -> Result<(), ForgeError> {
        match job.write {
            IssueWrite::Linked => {
                let body = format!(
                    "catalyst is working on this as bead `{}`: {}",
                    job.work, job.url
                );
                self.client.comment(job.issue, &body).await.map(drop)
            }
            IssueWrite::Blocked => self.client.add_label(job.issue, &self.blocked_label).await,
            IssueWrite::Unblocked => {
                self.client
                    .remove_label(job.issue, &self.blocked_label)
                    .await
            }
            IssueWrite::Closed => self.client.close_issue(job.issue).await,
        }
    }

    /// A pull request, its reviews, comments on lines and its head's checks.
    async fn news(&self, number: u64) -> Result<PullRequestNews, ForgeError> {
        let pull_request = self.client.pull_request(number).await?;
        if pull_request.merged || pull_request.state == forge::PrState::Closed {
            return Ok(PullRequestNews {
                pull_request,
                reviews: Vec::new(),
                comments: Vec::new(),
                checks: Default::default(),
                required: None,
            });
        }
        let (reviews, comments) = self.client.reviews_and_comments(number).await?;
        let checks = self.client.checks(&pull_request.head_sha).await?;
        Ok(PullRequestNews {
            pull_request,
            reviews,
            comments,
            checks,
            required: None,
        })
    }
}

/// Whether git's words say the remote could not be reached (rather than refused the push).
fn unreachable(stderr: &str) -> bool {
    [
        "Could not resolve host",
        "Connection refused",
        "Connection timed out",
        "The requested URL returned error: 5",
    ]
    .iter()
    .any(|s| stderr.contains(s))
}
