//! One event on one line, for `ctl events` and the live view.

use super::style::{self, Paint};
use crate::domain::event::{Event, EventBody};
use crate::domain::router::Decision;

/// One event on one line for people: `seq  time  type  subject  details`, the time local.
pub fn render_event(e: &Event) -> String {
    render_event_with(e, Paint::OFF)
}

/// [`render_event`], with the type painted by what it says (failures red, ends green).
pub fn render_event_with(e: &Event, paint: Paint) -> String {
    let kind = e.body.kind();
    let time = super::time::clock(&e.ts);
    let subject = subject(&e.body);
    let detail = detail(&e.body);
    let kind = paint.paint(kind_style(&e.body), &format!("{kind:<16}"));
    format!("{}  {time}  {kind} {subject:<22} {detail}", e.seq)
}

fn kind_style(body: &EventBody) -> anstyle::Style {
    use EventBody as B;
    match body {
        B::StepDispatched { .. } => style::CYAN,
        B::MergeCompleted { .. } | B::GatePassed { .. } | B::MergeApproved { .. } => style::GREEN,
        B::GateFailed { .. } | B::MergeConflict { .. } | B::ModelPaused { .. } => style::RED,
        B::AgentTool { allowed: false, .. } => style::RED,
        B::GateWaiting { .. } | B::MergeHeld { .. } | B::StepEscalated { .. } => style::YELLOW,
        B::AgentTool { .. } => style::DIM,
        _ => style::PLAIN,
    }
}

/// What the event is about: the step, else the bead, else the model.
fn subject(body: &EventBody) -> String {
    use EventBody as B;
    match body {
        B::BeadCreated { bead, .. } => bead.id.to_string(),
        B::BeadUpdated { id, .. } | B::BeadStatus { id, .. } | B::BeadComment { id, .. } => {
            id.to_string()
        }
        B::StepDispatched { step, .. }
        | B::StepStarted { step, .. }
        | B::StepFinished { step, .. }
        | B::StepResult { step, .. }
        | B::StepRetry { step, .. }
        | B::StepEscalated { step, .. }
        | B::StepInterrupted { step, .. }
        | B::GateWaiting { step, .. }
        | B::GatePassed { step, .. }
        | B::GateFailed { step, .. }
        | B::MergeHeld { step, .. }
        | B::MergeApproved { step, .. }
        | B::MergeStarted { step, .. }
        | B::ForgePushed { step, .. }
        | B::ForgeOutdated { step, .. }
        | B::AgentTool { step, .. } => step.to_string(),
        B::MoleculePoured { bead, .. }
        | B::FixCreated { bead, .. }
        | B::MergeCompleted { bead, .. }
        | B::MergeConflict { bead, .. }
        | B::ForgeFeedback { bead, .. }
        | B::ForgeIssueWritten { bead, .. }
        | B::WorktreeRemoved { bead } => bead.to_string(),
        B::ModelPaused { model, .. } => model.clone(),
        B::DispatchPaused { scope, cause, .. } => format!("{scope} ({cause})"),
        B::ClusterRefused { from, what, .. } => format!("{what} from {from}"),
        B::BudgetReached { scope, .. } => format!("{scope:?} budget").to_lowercase(),
        B::NotifySent { hook, kind, .. } | B::NotifyFailed { hook, kind, .. } => {
            format!("{kind} to {hook}")
        }
        B::ForgePaused { .. } | B::ForgeResumed {} => "forge".into(),
        B::DaemonStarted { .. } | B::DaemonStopping { .. } => String::new(),
    }
}

fn detail(body: &EventBody) -> String {
    use EventBody as B;
    match body {
        B::BeadCreated { bead, .. } => format!("{:?}", bead.title),
        B::BeadStatus { status, reason, .. } => format!(
            "-> {status}{}",
            reason
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
        B::BeadComment { comment, .. } => comment.text.clone(),
        B::MoleculePoured { formula, steps, .. } => {
            let names: Vec<String> = steps
                .iter()
                .filter_map(|s| s.step_meta())
                .map(|m| m.step)
                .collect();
            format!("{formula} ({})", names.join(" -> "))
        }
        B::StepDispatched { attempt, model, .. } => format!(
            "attempt {attempt} model {}",
            model.as_deref().unwrap_or("-")
        ),
        B::StepStarted {
            attempt, worker, ..
        } => format!("attempt {attempt} on worker {worker}"),
        B::StepFinished {
            attempt,
            exit,
            duration_ms,
            ..
        } => format!("attempt {attempt}: {exit} in {duration_ms} ms"),
        B::StepResult {
            outcome,
            status,
            verdict,
            decision,
            ..
        } => format!(
            "{outcome} {} {} -> {}",
            lower(status.as_ref()),
            lower(verdict.as_ref()),
            decision_name(decision)
        ),
        B::FixCreated {
            step, iteration, ..
        } => format!("{} (iteration {iteration})", step.id),
        B::AgentTool {
            tool,
            allowed,
            reason,
            target,
            ..
        } => format!(
            "{tool} {}{}{}",
            if *allowed { "allowed" } else { "DENIED" },
            target
                .as_ref()
                .map(|t| format!(" `{t}`"))
                .unwrap_or_default(),
            reason
                .as_ref()
                .filter(|_| !allowed)
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        B::MergeCompleted {
            target, from, to, ..
        } => format!("`{target}` {} -> {}", short(from), short(to)),
        B::MergeHeld { commit, files, .. } => format!(
            "{} changes workflow files: {}; waiting for `ctl approve`",
            short(commit),
            files.join(", ")
        ),
        B::MergeApproved { commit, .. } => format!("{} approved", short(commit)),
        B::StepRetry { reason, .. }
        | B::StepEscalated { reason, .. }
        | B::MergeConflict { reason, .. }
        | B::ModelPaused { reason, .. }
        | B::DispatchPaused { reason, .. }
        | B::ClusterRefused { reason, .. } => first_line(reason),
        B::DaemonStopping { reason } => reason.as_deref().map(first_line).unwrap_or_default(),
        B::BudgetReached {
            spent_usd,
            budget_usd,
            until,
            ..
        } => format!(
            "agents spent ${spent_usd:.2} of ${budget_usd:.2}; no agent attempt starts{}",
            until
                .map(|u| format!(" until {u}"))
                .unwrap_or_else(|| " until the limit is raised".into())
        ),
        B::GateFailed { output, .. } => first_line(output),
        B::ForgePushed {
            number, url, head, ..
        } => format!("{} pushed; pull request #{number} {url}", short(head)),
        B::ForgeFeedback { number, .. } => {
            format!("pull request #{number} asked for changes")
        }
        B::ForgeOutdated { number, .. } => {
            format!("pull request #{number} cannot be merged: merging the forge's target")
        }
        B::ForgeIssueWritten {
            issue,
            write,
            error,
            ..
        } => match error {
            None => format!("issue #{issue}: {}", write.as_str()),
            Some(e) => format!(
                "issue #{issue}: {} given up: {}",
                write.as_str(),
                first_line(e)
            ),
        },
        B::ForgePaused { until, reason, .. } => {
            format!("until {until}: {}", first_line(reason))
        }
        B::NotifySent { event, tries, .. } => format!("event {event}, try {tries}"),
        B::NotifyFailed {
            event,
            tries,
            error,
            ..
        } => format!(
            "event {event}, given up after {tries} tries: {}",
            first_line(error)
        ),
        B::BeadUpdated { .. }
        | B::StepInterrupted { .. }
        | B::GateWaiting { .. }
        | B::GatePassed { .. }
        | B::WorktreeRemoved { .. }
        | B::MergeStarted { .. }
        | B::ForgeResumed {}
        | B::DaemonStarted { .. } => String::new(),
    }
}

/// A result status or verdict as the event spells it (`done`, `rejected`), or nothing.
fn lower(v: Option<&impl std::fmt::Display>) -> String {
    v.map(|v| v.to_string().to_lowercase()).unwrap_or_default()
}

/// The decision's `type` in the event.
fn decision_name(d: &Decision) -> &'static str {
    match d {
        Decision::Close => "close",
        Decision::CloseAndRerunFixed => "close_and_rerun_fixed",
        Decision::CreateFix { .. } => "create_fix",
        Decision::Retry { .. } => "retry",
        Decision::Escalate { .. } => "escalate",
        Decision::Requeue { .. } => "requeue",
        Decision::Block { .. } => "block",
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_owned()
}

fn short(commit: &str) -> String {
    commit.chars().take(10).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::id::BeadId;
    use crate::domain::time::Timestamp;

    fn event(seq: u64, body: EventBody) -> Event {
        Event {
            seq,
            ts: Timestamp::parse("2026-01-01T10:00:00Z").expect("a time"),
            more: false,
            body,
        }
    }

    fn id(s: &str) -> BeadId {
        BeadId::new(s).expect("an id")
    }

    #[test]
    fn tool_decisions_read_as_one_line() {
        let denied = event(
            7,
            EventBody::AgentTool {
                bead: id("cat-1"),
                step: id("cat-1.review"),
                tool: "Write".into(),
                allowed: false,
                reason: Some("read-only".into()),
                target: Some("notes.txt".into()),
            },
        );
        let line = render_event(&denied);
        assert!(
            line.ends_with("cat-1.review           Write DENIED `notes.txt`: read-only"),
            "{line}"
        );
        let allowed = event(
            8,
            EventBody::AgentTool {
                bead: id("cat-1"),
                step: id("cat-1.implement"),
                tool: "Bash".into(),
                allowed: true,
                reason: Some("read-only command".into()),
                target: Some("cargo test".into()),
            },
        );
        assert!(render_event(&allowed).ends_with("Bash allowed `cargo test`"));
    }

    #[test]
    fn the_seq_and_time_lead() {
        let line = render_event(&event(
            12,
            EventBody::StepDispatched {
                bead: id("cat-1"),
                step: id("cat-1.checks"),
                attempt: 1,
                model: None,
            },
        ));
        let ts = Timestamp::parse("2026-01-01T10:00:00Z").expect("a time");
        let time = crate::render::time::clock(&ts);
        assert_eq!(
            line,
            format!("12  {time}  step.dispatched  cat-1.checks           attempt 1 model -")
        );
    }
}
