//! What travels between the daemon and a `catalyst worker` on another machine: an agent
//! attempt to run ([`AttemptOrder`]), and its end ([`AttemptEnd`]). Only attempts travel; the
//! journal, routing, gates and merges stay with the daemon.
//!
//! An order holds everything the worker needs and nothing that names a place on the daemon's
//! machine: the prompt comes rendered with [`Marker`]s where the worker's own paths go, the
//! context with the earlier steps' final messages and the change under review filled in, and
//! the attempt's policy as the daemon worked it out. It names the agent's profile rather
//! than carrying a command line ([`AgentAsk`]): a worker runs only profiles of its own.
//!
//! Every message travels [`Signed`]: orders and cancels by the daemon's key, leases, ends and
//! presence by the worker's (docs/cluster.md, "Securing a cluster").

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::domain::agent::attempt::{AttemptPolicy, ToolRecord};
use crate::domain::agent::profile::AgentProfile;
use crate::domain::agent::report::RunReport;
use crate::domain::context::Context;
use crate::domain::id::BeadId;
use crate::domain::model::Role;
use crate::domain::router::Outcome;

/// A path of the worker's in a prompt the daemon rendered: the worker puts its own in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Worktree,
    RunDir,
    ContextMd,
    ContextJson,
}

impl Marker {
    pub const ALL: [Marker; 4] = [
        Marker::Worktree,
        Marker::RunDir,
        Marker::ContextMd,
        Marker::ContextJson,
    ];

    /// The text standing for the path: nothing a template or a path would hold by itself.
    pub fn text(self) -> &'static str {
        match self {
            Marker::Worktree => "\u{27e6}catalyst:worktree\u{27e7}",
            Marker::RunDir => "\u{27e6}catalyst:run_dir\u{27e7}",
            Marker::ContextMd => "\u{27e6}catalyst:context_md\u{27e7}",
            Marker::ContextJson => "\u{27e6}catalyst:context_json\u{27e7}",
        }
    }
}

/// The paths a worker runs an attempt with, put in for the [`Marker`]s.
#[derive(Clone, Copy, Debug)]
pub struct WorkerPaths<'a> {
    pub worktree: &'a Path,
    pub run_dir: &'a Path,
    pub context_md: &'a Path,
    pub context_json: &'a Path,
}

impl WorkerPaths<'_> {
    /// `text` with each marker replaced by its path.
    pub fn fill(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for marker in Marker::ALL {
            let path = match marker {
                Marker::Worktree => self.worktree,
                Marker::RunDir => self.run_dir,
                Marker::ContextMd => self.context_md,
                Marker::ContextJson => self.context_json,
            };
            out = out.replace(marker.text(), &path.display().to_string());
        }
        out
    }
}

/// One agent attempt for a worker to run. Unknown fields are refused: an order in another
/// shape (one that carries a command line, say) is not run in part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptOrder {
    /// Names this hand-out of the attempt: leases and the end carry it back, and an end whose
    /// dispatch is not the one the daemon waits for is ignored.
    pub dispatch: String,
    pub work: BeadId,
    pub step: BeadId,
    /// Whose branch the agent works on: the bead's, or the step's own beside others.
    pub tree: BeadId,
    /// The step's name in its formula.
    pub step_name: String,
    pub role: Role,
    pub attempt: u32,
    /// The model as the config names it (caps and subjects go by it).
    pub model: String,
    /// The starting commit.
    pub base: String,
    /// A ref of the shared remote that holds `base`: the one the daemon pushed it to
    /// (`refs/catalyst/bases/<bead>/<step>/<attempt>`), or the ref an earlier attempt's
    /// commit came by, when `base` is that commit.
    pub base_ref: String,
    pub target: String,
    /// The rendered prompt, with [`Marker`]s for the worker's paths.
    pub prompt: String,
    pub context: Context,
    /// The whole patch under review, for a step that judges the change.
    pub change: Option<String>,
    /// The attempt's tool policy; the worker puts in its own worktree and context paths.
    pub policy: AttemptPolicy,
    /// The agent's profile by name, with its caps and tool list for this attempt.
    pub agent: AgentAsk,
    /// The id passed to the agent CLI.
    pub model_id: String,
    pub limits: Limits,
    /// How long the worker holds the attempt without renewing its [`Lease`].
    pub lease_secs: u64,
    /// Whom the attempt's commit names, `Name <email>`: the author and committer of the
    /// daemon's own commits (`[merge] author` and `committer`, the author else the daemon's
    /// repository's user), so that the history does not depend on the machine that ran the
    /// agent. Absent: the worker's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committer: Option<String>,
}

/// The agent an order asks for: a profile of the worker's own by name, and what is per
/// attempt. The command line, environment and sandbox stay the worker's: whoever can publish
/// an order can at most choose among the programs the worker's owner allowed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentAsk {
    /// The profile's name (`claude`, `codex`, or one of the worker's `profiles`).
    pub profile: String,
    /// Claude Code's `--max-turns`.
    pub max_turns: Option<u32>,
    /// What is left of the bead's budget (Claude Code's `--max-budget-usd`).
    pub budget_left_usd: Option<f64>,
    /// The role's tool list (Claude Code's `--tools`); `None`: the profile's own.
    pub tools: Option<Vec<String>>,
}

impl AgentAsk {
    /// `base` (the profile this ask names) with this attempt's caps and tools, as the daemon
    /// builds a local attempt's command.
    pub fn apply(&self, base: AgentProfile) -> AgentProfile {
        let profile = base.with_caps(self.max_turns, self.budget_left_usd);
        match &self.tools {
            Some(tools) => profile.with_tools(tools),
            None => profile,
        }
    }
}

/// The limits an attempt runs under, as the daemon's config sets them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub timeout_secs: u64,
    pub stall_timeout_secs: u64,
    pub grace_secs: u64,
    pub output_cap_bytes: u64,
    pub max_file_bytes: u64,
    pub max_processes: Option<u32>,
    pub nice: u32,
}

/// How an attempt ended on a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptEnd {
    pub dispatch: String,
    pub worker: String,
    pub step: BeadId,
    pub attempt: u32,
    /// `None`: the worker stopped it (a cancel, or the worker shutting down).
    pub outcome: Option<Outcome>,
    pub exit: String,
    pub duration_ms: u64,
    pub cost_usd: Option<f64>,
    /// The worker's commit of the agent's work, pushed to
    /// `refs/catalyst/attempts/<bead>/<step>/<attempt>`; its parent is the order's base.
    pub commit: Option<String>,
    pub comment: Option<String>,
    pub tool_records: Vec<ToolRecord>,
    pub report: Option<RunReport>,
    /// The end of the agent's stdout and stderr (the run folder's files on the worker).
    pub stdout: String,
    pub stderr: String,
}

/// A worker holds an attempt: sent when it takes the order and every third of the lease
/// while the agent runs. An attempt not renewed within the lease is taken back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub dispatch: String,
    pub worker: String,
    /// Counts up with each renewal: a lease heard again (replayed) renews nothing.
    pub seq: u64,
}

/// What a message is, signed with it, so that a signature over one kind never passes for
/// another (a lease's for an end, say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Order,
    Cancel,
    Lease,
    End,
    Presence,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Order => "order",
            Kind::Cancel => "cancel",
            Kind::Lease => "lease",
            Kind::End => "end",
            Kind::Presence => "presence",
        }
    }

    /// The bytes a signature of a message of this kind covers: a prefix naming catalyst and
    /// the kind, then the whole message as sent.
    pub fn signed_bytes(self, body: &str) -> Vec<u8> {
        format!("catalyst-cluster/1 {}\n{body}", self.as_str()).into_bytes()
    }
}

/// A message with its signer's public key (an nkey, `U…`) and the Ed25519 signature of
/// [`Kind::signed_bytes`] (base64url, no padding). `body` is the message's JSON as signed,
/// kept as text so that the bytes checked are the bytes signed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signed {
    pub key: String,
    pub sig: String,
    pub body: String,
}

/// A worker says it is there, every few seconds, for `ctl workers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerBeat {
    pub name: String,
    pub slots: usize,
    /// The models it takes attempts of; empty: every model.
    pub models: Vec<String>,
    /// The steps it runs now.
    pub running: Vec<BeadId>,
    /// Why it takes no orders for now: the last attempt it could not prepare (its fetch, its
    /// worktree, its run folder or its sandbox failed here), while it waits to try again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trouble: Option<String>,
}

/// The names of a daemon's streams, consumers and subjects in NATS, all under its
/// `[cluster] name`.
#[derive(Clone, Debug)]
pub struct Subjects {
    name: String,
}

impl Subjects {
    pub fn new(name: &str) -> Subjects {
        Subjects {
            name: name.to_owned(),
        }
    }

    /// The work-queue stream of orders.
    pub fn attempts_stream(&self) -> String {
        format!("{}-attempts", self.name)
    }

    /// The work-queue stream of attempts' ends.
    pub fn ends_stream(&self) -> String {
        format!("{}-ends", self.name)
    }

    /// The orders for `model`.
    pub fn attempt(&self, model: &str) -> String {
        format!("{}.attempt.{}", self.name, token(model))
    }

    /// Every order.
    pub fn attempts(&self) -> String {
        format!("{}.attempt.>", self.name)
    }

    /// The consumer workers share for `model`'s orders.
    pub fn model_consumer(&self, model: &str) -> String {
        format!("{}-model-{}", self.name, token(model))
    }

    /// The ends of attempts, each on its worker's subject.
    pub fn ends(&self) -> String {
        format!("{}.end.*", self.name)
    }

    /// The ends `worker` sends: a NATS server's permissions can keep each worker to its own.
    pub fn end(&self, worker: &str) -> String {
        format!("{}.end.{}", self.name, token(worker))
    }

    /// The daemon's consumer of ends.
    pub fn ends_consumer(&self) -> String {
        format!("{}-daemon", self.name)
    }

    /// Leases (core NATS), each on its worker's subject.
    pub fn leases(&self) -> String {
        format!("{}.lease.*", self.name)
    }

    /// The leases `worker` sends.
    pub fn lease(&self, worker: &str) -> String {
        format!("{}.lease.{}", self.name, token(worker))
    }

    /// Cancels of attempts (core NATS).
    pub fn cancels(&self) -> String {
        format!("{}.cancel", self.name)
    }

    /// Workers' presence (core NATS), each on its worker's subject.
    pub fn workers(&self) -> String {
        format!("{}.worker.*", self.name)
    }

    /// The presence messages `worker` sends.
    pub fn worker(&self, worker: &str) -> String {
        format!("{}.worker.{}", self.name, token(worker))
    }
}

/// The worker a subject of [`Subjects::end`], [`Subjects::lease`] or [`Subjects::worker`]
/// belongs to: its last token.
pub fn sender_of(subject: &str) -> &str {
    subject.rsplit('.').next().unwrap_or_default()
}

/// `text` as one subject token: what is not a letter, digit, `-` or `_` becomes `_`.
pub fn token(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Where catalyst's refs live in the shared remote.
pub const REFS: &str = "refs/catalyst/";
const ATTEMPT_REFS: &str = "refs/catalyst/attempts/";
const BASE_REFS: &str = "refs/catalyst/bases/";

/// The ref a worker pushes an attempt's commit to.
pub fn attempt_ref(work: &BeadId, step_name: &str, attempt: u32) -> String {
    format!("{ATTEMPT_REFS}{work}/{step_name}/{attempt}")
}

/// The ref the daemon pushes an attempt's starting commit to.
pub fn base_ref(work: &BeadId, step_name: &str, attempt: u32) -> String {
    format!("{BASE_REFS}{work}/{step_name}/{attempt}")
}

/// The bead whose attempt or start `reference` holds (see [`attempt_ref`], [`base_ref`]), for
/// a ref catalyst made in the shared remote.
pub fn bead_of_ref(reference: &str) -> Option<&str> {
    let rest = reference
        .strip_prefix(ATTEMPT_REFS)
        .or_else(|| reference.strip_prefix(BASE_REFS))?;
    rest.split('/').next().filter(|bead| !bead.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_bead_of_a_ref_is_read_back_from_attempt_and_start_refs_only() {
        let work = BeadId::new("cat-7").unwrap();
        assert_eq!(
            bead_of_ref(&attempt_ref(&work, "implement", 2)),
            Some("cat-7")
        );
        assert_eq!(bead_of_ref(&base_ref(&work, "review", 1)), Some("cat-7"));
        assert_eq!(bead_of_ref("refs/heads/main"), None);
        assert_eq!(bead_of_ref("refs/catalyst/attempts/"), None);
    }

    #[test]
    fn markers_become_the_workers_paths() {
        let (wt, run) = (PathBuf::from("/w/tree"), PathBuf::from("/w/runs/1"));
        let (md, json) = (run.join("context.md"), run.join("context.json"));
        let paths = WorkerPaths {
            worktree: &wt,
            run_dir: &run,
            context_md: &md,
            context_json: &json,
        };
        let text = format!(
            "Worktree: {} · read {} (or {}); records in {}",
            Marker::Worktree.text(),
            Marker::ContextMd.text(),
            Marker::ContextJson.text(),
            Marker::RunDir.text()
        );
        assert_eq!(
            paths.fill(&text),
            "Worktree: /w/tree · read /w/runs/1/context.md (or /w/runs/1/context.json); records in /w/runs/1"
        );
    }

    #[test]
    fn subjects_keep_a_model_to_one_token() {
        let s = Subjects::new("cat");
        assert_eq!(s.attempt("claude-opus-4.1"), "cat.attempt.claude-opus-4_1");
        assert_eq!(s.model_consumer("a b"), "cat-model-a_b");
    }

    #[test]
    fn a_workers_messages_go_on_subjects_that_name_it() {
        let s = Subjects::new("cat");
        assert_eq!(s.end("build-7"), "cat.end.build-7");
        assert_eq!(s.lease("build-7"), "cat.lease.build-7");
        assert_eq!(s.worker("build-7"), "cat.worker.build-7");
        assert_eq!(sender_of(&s.end("build-7")), "build-7");
        assert_eq!(s.ends(), "cat.end.*");
    }

    #[test]
    fn an_order_that_carries_a_command_line_does_not_parse() {
        let ask = AgentAsk {
            profile: "claude".into(),
            max_turns: Some(3),
            budget_left_usd: None,
            tools: Some(vec!["Read".into()]),
        };
        let profile = ask.apply(AgentProfile::claude());
        assert!(profile
            .command
            .ends_with(&["--tools".into(), "Read".into()]));
        let json = r#"{"profile":"x","max_turns":null,"budget_left_usd":null,"tools":null,"command":["sh"]}"#;
        assert!(serde_json::from_str::<AgentAsk>(json).is_err());
    }

    #[test]
    fn refs_name_the_attempt() {
        let work = BeadId::new("cat-7").expect("id");
        assert_eq!(
            attempt_ref(&work, "fix-1", 2),
            "refs/catalyst/attempts/cat-7/fix-1/2"
        );
        assert_eq!(
            base_ref(&work, "review", 1),
            "refs/catalyst/bases/cat-7/review/1"
        );
    }
}
