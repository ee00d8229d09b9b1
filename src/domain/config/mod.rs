//! The daemon's configuration: `<workspace>/.catalyst/config.toml`, every key optional.
//!
//! Loading is strict: an unknown key is an error naming it (a typo must not silently fall back
//! to a default), and values are checked so that a bad config is refused at load or reload time
//! rather than discovered by a running step.
//!
//! [`template`] is the commented file `catalyst init` writes, made from the defaults here.

pub mod cluster;
pub mod forge;
pub mod merge;
pub mod template;
pub mod web;
pub mod webhook;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::domain::agent::profile::{AgentProfile, ProfileConfig};
use crate::domain::model::Role;
use crate::domain::policy::RolePolicy;
use crate::domain::router::RouterConfig;
use crate::domain::workflow::{WorkflowFiles, WorkflowFilesError};

/// The whole configuration with defaults filled in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Prefix of new bead ids (`<prefix>-<base36>`).
    pub prefix: String,
    /// The branch beads are merged into.
    pub target_branch: String,
    /// The formula of a work bead without a `formula:<name>` label. Empty: such beads are not
    /// dispatched.
    pub default_formula: String,
    /// Agents running at once, over all beads.
    pub max_agents: usize,
    /// The agent profile steps run with (a key of `profiles`, or `claude`, `codex`).
    pub agent: String,
    /// Agent profiles by name: new ones, and changes to the built-in `claude` and `codex`
    /// (a profile named after one keeps what it does not set; see [`ProfileConfig::resolve`]).
    #[serde(deserialize_with = "profiles_over_builtins")]
    pub profiles: BTreeMap<String, AgentProfile>,
    /// Per-model settings, by the model name steps use (`sonnet`, `haiku`, `opus`, …).
    pub models: BTreeMap<String, ModelConfig>,
    /// The model each role runs with, overriding the built-in defaults.
    pub role_models: BTreeMap<Role, String>,
    /// Seconds an agent step may run.
    pub agent_timeout_secs: u64,
    /// Seconds an agent may go without printing anything before it counts as stalled.
    pub stall_timeout_secs: u64,
    /// Seconds between SIGTERM and SIGKILL when stopping an agent or gate.
    pub grace_secs: u64,
    /// Seconds a gate's commands may run in all (a formula step's `timeout` replaces it).
    pub gate_timeout_secs: u64,
    /// Seconds running agents get to finish after SIGTERM/SIGINT before they are stopped (the
    /// step is then interrupted and runs again after the restart).
    pub shutdown_grace_secs: u64,
    /// Bytes of each agent output stream kept in the run folder.
    pub output_cap_bytes: u64,
    /// The largest file the daemon commits of an agent's work: an attempt that leaves a larger
    /// one fails (with a comment on the bead), and the file is never read.
    pub max_file_bytes: u64,
    /// Seconds a model is paused after it reports a usage limit (doubling on each repeat, up
    /// to `max_pause_secs`).
    pub pause_secs: u64,
    pub max_pause_secs: u64,
    /// Seconds to wait before trying again to merge into a target branch whose checkout has
    /// uncommitted changes.
    pub dirty_target_retry_secs: u64,
    /// Retries, escalation and fix limits.
    pub router: RouterConfig,
    /// How beads land on the target, and whom the daemon's commits name.
    pub merge: merge::MergeConfig,
    /// US dollars the agents may spend on one bead (from the cost they report); the bead is
    /// blocked once it is exceeded, and a Claude Code attempt is stopped by its CLI when it
    /// reaches what is left (`--max-budget-usd`). `0`: no limit.
    pub budget_usd: f64,
    /// US dollars all agents may spend in one UTC day: once reached, no agent attempt starts
    /// until the next day (running ones are stopped by their CLI at the limit). `0`: no limit.
    pub daily_budget_usd: f64,
    /// US dollars all agents may spend over the store's life: once reached, no agent attempt
    /// starts until the limit is raised. `0`: no limit.
    pub total_budget_usd: f64,
    /// The most turns one attempt of a Claude Code agent may take (`--max-turns`); an attempt
    /// that reaches it fails and is retried like any failure. `0`: no limit.
    pub max_turns: u32,
    /// The most processes (threads included) one agent attempt or gate may have at once,
    /// enforced by a control group where the machine offers one. `0`: no limit.
    pub max_processes: u32,
    /// The scheduling niceness of agents and gates (0–19, as `nice`): their processes yield
    /// the CPU to the daemon's own work, so answers and dispatches stay prompt while agents
    /// build. `0`: the daemon's own priority.
    pub agent_nice: u32,
    /// Tool policies by agent role, replacing the built-in ones (`refine` and `review`
    /// read-only with `Read Grep Glob Bash`, the others writing inside the worktree).
    pub tool_policy: BTreeMap<Role, RolePolicy>,
    /// The `catalyst` binary the agents' hooks run (`catalyst hook …`). None: the `catalyst`
    /// next to the running executable, else the first on `PATH`.
    pub catalyst_bin: Option<PathBuf>,
    /// Following a beads export file and writing statuses back.
    pub beads: crate::domain::beads::BeadsConfig,
    /// Files that decide what the daemon runs (`.gitignore`-like patterns from the
    /// repository's root): a bead whose change touches one waits for a person's approval
    /// before its merge. The followed beads file is always one. `[]`: no bead waits.
    pub workflow_files: Vec<String>,
    /// Aspect formulas applied, in order, to every bead's formula when it is poured (a bead
    /// adds its own with `aspect:<name>` labels).
    pub aspects: Vec<String>,
    /// The web dashboard (off unless `listen` is set).
    pub web: web::WebConfig,
    /// Agents on other machines (off unless `nats` is set).
    pub cluster: cluster::ClusterConfig,
    /// Lets a daemon running as root run a profile with `sandbox = "none"`, whose agents then
    /// hold every capability, and gates unconfined. Off: such a config is refused.
    pub allow_unconfined_root: bool,
    /// How gates' commands are confined: `bwrap` (the default on Linux) runs them in the
    /// agents' sandbox; `none` runs them with the daemon's rights (logged at every load). A
    /// formula's gate may say `sandbox = "none"` for itself.
    pub gate_sandbox: crate::domain::agent::sandbox::SandboxKind,
    /// What a sandboxed gate reaches on the network: `none` (the default) or `open`.
    pub gate_network: crate::domain::agent::sandbox::Network,
    /// Paths a sandboxed gate may write besides the worktree and a private `/tmp` (a build
    /// tool's cache, such as `~/.cargo`); those that do not exist are skipped.
    pub gate_writable: Vec<String>,
    /// Values for formula vars in this workspace (`test_command = "cargo test"`), used by
    /// every formula that declares the var, unless the bead gives its own.
    pub vars: BTreeMap<String, String>,
    /// Where notices of what needs a person, and of merges, are posted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<webhook::Webhook>,
    /// The forge merges go to as pull requests and whose labelled issues become beads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forge: Option<forge::ForgeConfig>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// The id passed to the agent CLI (`{model}`); defaults to the model's name.
    pub id: Option<String>,
    /// Agents of this model running at once. None: only `max_agents` applies.
    pub max_concurrent: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            prefix: "cat".into(),
            target_branch: "main".into(),
            default_formula: "feature".into(),
            max_agents: 4,
            agent: "claude".into(),
            profiles: BTreeMap::new(),
            models: BTreeMap::new(),
            role_models: BTreeMap::new(),
            agent_timeout_secs: 30 * 60,
            stall_timeout_secs: 5 * 60,
            grace_secs: 10,
            gate_timeout_secs: 30 * 60,
            shutdown_grace_secs: 30,
            output_cap_bytes: 16 << 20,
            max_file_bytes: 50 << 20,
            pause_secs: 60,
            max_pause_secs: 60 * 60,
            dirty_target_retry_secs: 30,
            router: RouterConfig::default(),
            merge: merge::MergeConfig::default(),
            budget_usd: DEFAULT_BUDGET_USD,
            daily_budget_usd: DEFAULT_DAILY_BUDGET_USD,
            total_budget_usd: 0.0,
            max_turns: DEFAULT_MAX_TURNS,
            max_processes: DEFAULT_MAX_PROCESSES,
            agent_nice: DEFAULT_AGENT_NICE,
            tool_policy: BTreeMap::new(),
            catalyst_bin: None,
            beads: crate::domain::beads::BeadsConfig::default(),
            workflow_files: crate::domain::workflow::DEFAULT_WORKFLOW_FILES
                .map(String::from)
                .to_vec(),
            aspects: Vec::new(),
            web: web::WebConfig::default(),
            cluster: cluster::ClusterConfig::default(),
            allow_unconfined_root: false,
            gate_sandbox: crate::domain::agent::sandbox::SandboxKind::default(),
            gate_network: crate::domain::agent::sandbox::Network::None,
            gate_writable: Vec::new(),
            vars: BTreeMap::new(),
            webhooks: Vec::new(),
            forge: None,
        }
    }
}

/// The longest timeout or pause a config may set: a year, far from any deadline overflow.
const MAX_SECS: u64 = 365 * DAY_SECS;
const DAY_SECS: u64 = 24 * 60 * 60;
/// The largest per-bead budget, in US dollars.
const MAX_BUDGET_USD: f64 = 1_000_000.0;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read `{path}`: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("`{path}`: {message}")]
    Invalid { path: String, message: String },
}

/// The config's `agent` names neither a built-in profile nor one of its `profiles`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`agent` names an unknown profile `{0}`")]
pub struct UnknownProfile(pub String);

/// The default budget of one bead, in US dollars: a few implement/review/fix rounds of a
/// mid-sized change with the default models, and a stop for an agent caught in a loop.
pub const DEFAULT_BUDGET_USD: f64 = 10.0;

/// The default spending of all agents in one UTC day, in US dollars: ten beads at their full
/// default budget, a stop for a day gone wrong before the bill shows it.
pub const DEFAULT_DAILY_BUDGET_USD: f64 = 100.0;

/// The default turn limit of one Claude Code attempt.
pub const DEFAULT_MAX_TURNS: u32 = 100;

/// The default process limit of one attempt: room for an agent CLI, its shells and a parallel
/// build (threads count too), far below a machine's process table.
pub const DEFAULT_MAX_PROCESSES: u32 = 1024;

/// Agents and gates run at this niceness unless the config says otherwise.
pub const DEFAULT_AGENT_NICE: u32 = 10;

impl Config {
    /// The budget of one bead, unless it is off (`budget_usd = 0`).
    pub fn budget(&self) -> Option<f64> {
        (self.budget_usd > 0.0).then_some(self.budget_usd)
    }

    /// The spending limits: the bead's, the day's and the total's, each unless it is off.
    pub fn spending_limits(&self) -> crate::domain::budget::Limits {
        let positive = |usd: f64| (usd > 0.0).then_some(usd);
        crate::domain::budget::Limits {
            bead: self.budget(),
            daily: positive(self.daily_budget_usd),
            total: positive(self.total_budget_usd),
        }
    }

    /// The turn limit of one attempt, unless it is off (`max_turns = 0`).
    pub fn turn_limit(&self) -> Option<u32> {
        (self.max_turns > 0).then_some(self.max_turns)
    }

    /// The files a bead may change only with a person's approval: `workflow_files`, and the
    /// followed beads file when it lies inside the repository. None when the list is empty.
    pub fn workflow_files(&self) -> Result<Option<WorkflowFiles>, WorkflowFilesError> {
        if self.workflow_files.is_empty() {
            return Ok(None);
        }
        let mut patterns = self.workflow_files.clone();
        if let Some(watch) = self.beads.watch.as_deref().and_then(inside_repository) {
            patterns.push(format!("/{watch}"));
        }
        WorkflowFiles::new(&patterns).map(Some)
    }

    /// The process limit of one attempt, unless it is off (`max_processes = 0`).
    pub fn process_limit(&self) -> Option<u32> {
        (self.max_processes > 0).then_some(self.max_processes)
    }

    /// Parses a config file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        config.check().map_err(|message| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        })?;
        Ok(config)
    }

    /// Why the config cannot work, as the message of [`ConfigError::Invalid`]: each part
    /// checks itself with its own error, whose text is all this needs of it.
    fn check(&self) -> Result<(), String> {
        if crate::domain::id::BeadId::new(&format!("{}-0", self.prefix)).is_err()
            || self.prefix.contains('.')
        {
            return Err(format!(
                "`prefix` `{}` would not make valid ids",
                self.prefix
            ));
        }
        for (key, usd) in [
            ("budget_usd", self.budget_usd),
            ("daily_budget_usd", self.daily_budget_usd),
            ("total_budget_usd", self.total_budget_usd),
        ] {
            if !(usd.is_finite() && (0.0..=MAX_BUDGET_USD).contains(&usd)) {
                return Err(format!(
                    "`{key}` must be a number of dollars from 0 (no limit) to {MAX_BUDGET_USD}, not {usd}"
                ));
            }
        }
        self.check_ranges()?;
        webhook::check(&self.webhooks)?;
        if let Some(forge) = &self.forge {
            forge::check(forge)?;
        }
        if self.gate_network == crate::domain::agent::sandbox::Network::ModelOnly {
            return Err("`gate_network` is `none` or `open`: a gate talks to no model".to_owned());
        }
        if self.target_branch.is_empty() || git_ref_unsafe(&self.target_branch) {
            return Err(format!(
                "`target_branch` `{}` is not a branch name",
                self.target_branch
            ));
        }
        self.workflow_files().map_err(|e| e.to_string())?;
        for (name, profile) in &self.profiles {
            profile
                .validate()
                .map_err(|e| format!("`profiles.{name}`: {e}"))?;
        }
        self.profile().map_err(|e| e.to_string())?;
        for (role, policy) in &self.tool_policy {
            if !role.is_agent() {
                return Err(format!(
                    "`tool_policy.{role}`: `{role}` steps run no agent, so they have no tool policy"
                ));
            }
            if policy.tools.iter().flatten().any(|t| t.trim().is_empty()) {
                return Err(format!("`tool_policy.{role}.tools` holds an empty name"));
            }
        }
        if self
            .catalyst_bin
            .as_ref()
            .is_some_and(|b| b.as_os_str().is_empty())
        {
            return Err("`catalyst_bin` is empty".into());
        }
        self.beads.check().map_err(|e| e.to_string())?;
        self.cluster.check().map_err(|e| e.to_string())?;
        self.merge.check().map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Every number in its range: a value out of it is refused by name (a reload keeps the old
    /// config), never left to overflow a deadline or mean nothing.
    fn check_ranges(&self) -> Result<(), String> {
        let ranges: [(&str, u64, u64, u64); 17] = [
            ("max_agents", self.max_agents as u64, 1, 1024),
            ("agent_timeout_secs", self.agent_timeout_secs, 1, MAX_SECS),
            ("stall_timeout_secs", self.stall_timeout_secs, 1, MAX_SECS),
            ("gate_timeout_secs", self.gate_timeout_secs, 1, MAX_SECS),
            ("grace_secs", self.grace_secs, 0, DAY_SECS),
            ("shutdown_grace_secs", self.shutdown_grace_secs, 0, DAY_SECS),
            ("output_cap_bytes", self.output_cap_bytes, 1024, 1 << 40),
            ("max_file_bytes", self.max_file_bytes, 1, 1 << 40),
            ("pause_secs", self.pause_secs, 1, MAX_SECS),
            (
                "max_pause_secs",
                self.max_pause_secs,
                self.pause_secs,
                MAX_SECS,
            ),
            (
                "dirty_target_retry_secs",
                self.dirty_target_retry_secs,
                1,
                DAY_SECS,
            ),
            ("max_turns", self.max_turns.into(), 0, 100_000),
            ("max_processes", self.max_processes.into(), 0, 1 << 22),
            ("agent_nice", self.agent_nice.into(), 0, 19),
            (
                "router.max_attempts",
                self.router.max_attempts.into(),
                1,
                100,
            ),
            (
                "router.max_fix_iterations",
                self.router.max_fix_iterations.into(),
                1,
                100,
            ),
            (
                "router.retry_delay_secs",
                self.router.retry_delay_secs,
                0,
                crate::domain::router::MAX_RETRY_DELAY_SECS,
            ),
        ];
        for (key, value, low, high) in ranges {
            if !(low..=high).contains(&value) {
                return Err(format!("`{key}` must be from {low} to {high}, not {value}"));
            }
        }
        for (name, model) in &self.models {
            if let Some(n) = model.max_concurrent.filter(|&n| !(1..=1024).contains(&n)) {
                return Err(format!(
                    "`models.{name}.max_concurrent` must be from 1 to 1024, not {n}"
                ));
            }
        }
        Ok(())
    }

    /// The agent profile steps run with.
    pub fn profile(&self) -> Result<AgentProfile, UnknownProfile> {
        self.profiles
            .get(&self.agent)
            .cloned()
            .or_else(|| AgentProfile::builtin(&self.agent))
            .ok_or_else(|| UnknownProfile(self.agent.clone()))
    }

    /// The model name a role runs with (before the formula's own `model` key).
    pub fn role_model(&self, role: Role) -> Option<String> {
        self.role_models
            .get(&role)
            .cloned()
            .or_else(|| role.default_model().map(str::to_owned))
    }

    /// The models agents run with unless a formula names others: each agent role's, the
    /// escalation model, and every model configured.
    pub fn known_models(&self) -> BTreeSet<String> {
        let roles = Role::ALL
            .into_iter()
            .filter_map(|role| self.role_model(role));
        let escalation = Some(self.router.escalation_model.clone()).filter(|m| !m.is_empty());
        roles
            .chain(escalation)
            .chain(self.models.keys().cloned())
            .collect()
    }

    /// The id passed to the agent CLI for a model name.
    pub fn model_id<'a>(&'a self, model: &'a str) -> &'a str {
        self.models
            .get(model)
            .and_then(|m| m.id.as_deref())
            .unwrap_or(model)
    }

    /// The tool policy of an agent role: the configured one, else the built-in one.
    /// A configured policy without `tools` keeps the role's default list.
    pub fn role_policy(&self, role: Role) -> RolePolicy {
        let default = RolePolicy::default_for(role);
        match self.tool_policy.get(&role) {
            Some(p) => RolePolicy {
                access: p.access,
                tools: p.tools.clone().or(default.tools),
            },
            None => default,
        }
    }

    /// How many agents of `model` may run at once, if limited.
    pub fn model_limit(&self, model: &str) -> Option<usize> {
        self.models.get(model).and_then(|m| m.max_concurrent)
    }

    pub fn agent_timeout(&self) -> Duration {
        Duration::from_secs(self.agent_timeout_secs)
    }

    pub fn stall_timeout(&self) -> Duration {
        Duration::from_secs(self.stall_timeout_secs)
    }

    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.grace_secs)
    }
}

/// The config's `[profiles.<name>]` tables, each resolved with its name, which decides whether
/// it extends a built-in profile.
fn profiles_over_builtins<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, AgentProfile>, D::Error> {
    BTreeMap::<String, ProfileConfig>::deserialize(deserializer)?
        .into_iter()
        .map(|(name, profile)| match profile.resolve(&name) {
            Ok(profile) => Ok((name, profile)),
            Err(e) => Err(serde::de::Error::custom(format!("`profiles.{name}`: {e}"))),
        })
        .collect()
}

/// Branch names that git would refuse or that could escape `refs/heads/`.
fn git_ref_unsafe(name: &str) -> bool {
    name.contains("..")
        || name.starts_with(['-', '/'])
        || name.ends_with(['/', '.'])
        || name.ends_with(".lock")
        || name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
}

/// A relative path that stays inside the repository, `/`-separated; None for any other.
fn inside_repository(path: &std::path::Path) -> Option<String> {
    use std::path::Component;
    let mut parts = Vec::new();
    for part in path.components() {
        match part {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests;
