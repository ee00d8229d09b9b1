//! `ctl status` for people: like `systemctl status`, the daemon in a few lines, then what needs
//! a person (paused dispatching and why, blocked beads with the command that helps, approvals),
//! what runs, and the last events.

use std::fmt::Write as _;

use crate::domain::event::Event;
use crate::protocol::StatusAnswer;

use super::style::Paint;
use super::{render_beads, render_event_with};

/// The whole status; `recent` are the last events, oldest first.
pub fn render_status(s: &StatusAnswer, recent: &[Event], paint: Paint) -> String {
    let waiting = s.running.iter().filter(|r| r.waiting_for_slot).count();
    let for_worker = s.running.iter().filter(|r| r.waiting_for_worker).count();
    let mut out = format!(
        "catalystd {} (pid {}) on {}{}\nseq {}  ready {}  running {}{}{}{}\n",
        s.version,
        s.pid,
        s.workspace.display(),
        if s.stopping {
            "\nSTOPPING: no new steps; running agents get the grace period"
        } else {
            ""
        },
        s.seq,
        s.ready,
        s.running.len() - waiting - for_worker,
        match (waiting, for_worker) {
            (0, 0) => String::new(),
            (n, 0) => format!("  waiting for an agent slot {n}"),
            (0, w) => format!("  waiting for a worker {w}"),
            (n, w) => format!("  waiting for an agent slot {n}  waiting for a worker {w}"),
        },
        if s.paused {
            "  PAUSED (catalyst ctl resume)"
        } else {
            ""
        },
        s.storage_error
            .as_ref()
            .map(|e| format!("\nSTORAGE ERROR: {e}"))
            .unwrap_or_default(),
    );
    let parts: Vec<String> = s.beads.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(out, "beads: {}", parts.join(", "));
    if s.spent_total_usd > 0.0 {
        let _ = writeln!(
            out,
            "spent: ${:.2} today (UTC), ${:.2} in all",
            s.spent_today_usd, s.spent_total_usd
        );
    }
    let attention = needs_a_person(s);
    if !attention.is_empty() {
        let _ = write!(out, "\nNeeds a person:\n{attention}");
    }
    if !s.running.is_empty() {
        out.push_str("\nRunning:\n");
        for r in &s.running {
            let on = r
                .worker
                .as_deref()
                .map(|w| format!(" on {w}"))
                .unwrap_or_default();
            let waits = if r.waiting_for_slot {
                " waiting for an agent slot"
            } else if r.waiting_for_worker {
                " waiting for a worker"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  {} attempt {} ({}){on}{waits} for {}s",
                r.step,
                r.attempt,
                r.model.as_deref().unwrap_or("gate"),
                r.elapsed_ms / 1000
            );
        }
    }
    if !s.active.is_empty() {
        out.push('\n');
        out.push_str(&render_beads(&s.active, paint));
    }
    if !recent.is_empty() {
        out.push_str("\nRecent events:\n");
        for e in recent {
            let _ = writeln!(out, "  {}", render_event_with(e, paint));
        }
    }
    out
}

/// Paused dispatching and models, refused workflow files, blocked beads and approvals, each
/// with what to run.
fn needs_a_person(s: &StatusAnswer) -> String {
    let mut out = String::new();
    if let Some(warning) = &s.cluster_warning {
        let _ = writeln!(out, "  cluster: {warning}");
    }
    if let Some(stop) = &s.budget_stop {
        let _ = writeln!(
            out,
            "  {}{}\n    what to do: {}",
            stop.reason,
            stop.stop
                .until
                .map(|u| format!(" until {u}"))
                .unwrap_or_default(),
            stop.help
        );
    }
    if let Some(refused) = &s.refused_reload {
        for file in &refused.files {
            let _ = writeln!(
                out,
                "  reload at {} refused `{}`: {}\n    what it held before stays in force; fix it, then: catalyst ctl reload",
                refused.at, file.file, file.reason
            );
        }
    }
    if let Some(pause) = &s.forge_paused {
        let _ = writeln!(
            out,
            "  forge work paused until {}: {}\n    local work goes on; pushes, pull requests and issues wait",
            pause.until, pause.reason
        );
    }
    for h in &s.holds {
        let what = match h.scope {
            crate::domain::unavailable::PauseScope::Agent => "agent steps",
            crate::domain::unavailable::PauseScope::All => "all steps",
        };
        let _ = writeln!(
            out,
            "  dispatching of {what} paused ({}) until {}: {}\n    what to do: {}",
            h.cause, h.until, h.reason, h.help
        );
    }
    for p in &s.model_pauses {
        let until = p
            .until
            .as_ref()
            .map_or_else(|| "resumed".to_owned(), ToString::to_string);
        let _ = writeln!(
            out,
            "  model {} paused until {until}: {}\n    resume now: catalyst ctl resume --model {}",
            p.model, p.reason, p.model
        );
    }
    for b in &s.blocked {
        let _ = writeln!(
            out,
            "  blocked {}  {}: {}\n    see why: catalyst ctl show {}   run again: catalyst ctl retry {}",
            b.id,
            b.title,
            b.reason.as_deref().unwrap_or("no reason recorded"),
            b.id,
            b.id
        );
    }
    let blocked_total = s.beads.get("blocked").copied().unwrap_or(0);
    if blocked_total > s.blocked.len() as u64 {
        let _ = writeln!(
            out,
            "  … {} more blocked: catalyst ctl list --status blocked",
            blocked_total - s.blocked.len() as u64
        );
    }
    for w in &s.waiting_approval {
        match s.held_merges.iter().find(|h| h.step == *w) {
            Some(h) => {
                let _ = writeln!(
                    out,
                    "  waiting for approval: {w}: its change touches workflow files: {}\n    see it: git diff HEAD...{}   approve: catalyst ctl approve {}   send back: catalyst ctl reject {} --reason \"…\"",
                    h.files.join(", "),
                    h.commit.get(..12).unwrap_or(&h.commit),
                    h.bead,
                    h.bead
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "  waiting for approval: {w}\n    approve: catalyst ctl approve {w}   send back: catalyst ctl reject {w} --reason \"…\""
                );
            }
        }
    }
    for pr in &s.pull_requests {
        let _ = writeln!(
            out,
            "  waiting for review: {}: pull request #{} {}",
            pr.bead, pr.number, pr.url
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `status` of an idle daemon but for `running`, rendered without colour.
    fn rendered(running: serde_json::Value) -> String {
        let status: StatusAnswer = serde_json::from_value(serde_json::json!({
            "active": [], "beads": {}, "journal_syncs": 0, "paused": false,
            "paused_models": [], "pid": 1, "ready": 0, "seq": 1, "steps": 1,
            "stopping": false, "storage_error": null, "version": "0", "waiting_approval": [],
            "workspace": "/w", "running": running,
        }))
        .expect("a status answer");
        render_status(&status, &[], Paint::OFF)
    }

    #[test]
    fn a_running_step_names_the_worker_that_runs_it() {
        let text = rendered(serde_json::json!([
            {"attempt": 1, "elapsed_ms": 12000, "model": "sonnet",
             "step": "cat-3.implement", "worker": "build-7"},
            {"attempt": 2, "elapsed_ms": 1000, "model": null, "step": "cat-4.checks"}
        ]));
        assert!(
            text.contains("cat-3.implement attempt 1 (sonnet) on build-7 for 12s"),
            "{text}"
        );
        assert!(
            text.contains("cat-4.checks attempt 2 (gate) for 1s"),
            "{text}"
        );
    }

    #[test]
    fn a_step_dispatched_ahead_of_its_agent_slot_is_not_counted_as_running() {
        let text = rendered(serde_json::json!([
            {"attempt": 1, "elapsed_ms": 12000, "model": "sonnet", "step": "cat-3.implement"},
            {"attempt": 1, "elapsed_ms": 2000, "model": "haiku", "step": "cat-5.review",
             "waiting_for_slot": true}
        ]));
        assert!(
            text.contains("running 1  waiting for an agent slot 1\n"),
            "{text}"
        );
        assert!(
            text.contains("cat-5.review attempt 1 (haiku) waiting for an agent slot for 2s"),
            "{text}"
        );
        assert!(
            text.contains("cat-3.implement attempt 1 (sonnet) for 12s"),
            "{text}"
        );
    }
}
