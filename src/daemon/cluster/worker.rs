//! A worker's side of an attempt: the order's starting commit fetched from the shared remote
//! into the worker's own workspace (a clone of it), the attempt run exactly as the daemon runs
//! a local one ([`runner::run_agent_step`]: same profile, hooks, sandbox, limits, judgement and
//! commit trailer), and the commit pushed back to `refs/catalyst/attempts/…` for the daemon
//! to take.
//!
//! The hooks' tool decisions are made on the worker, from the attempt's policy, as the local
//! hook makes them; the records the daemon journals as `agent.tool` come back with the end.
//!
//! The agent's command line is the worker's own: an order names one of its profiles (the
//! built-in ones and those it was given), and a profile that runs unconfined is refused
//! unless the worker's owner allowed it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::daemon::agent::SandboxSpec;
use crate::daemon::runner::hook_socket::Ask;
use crate::daemon::runner::{self, StepDone, WorkerSources, REPORT_FILE};
use crate::daemon::worktree::transport::{self as git, GitCommandError};
use crate::daemon::worktree::{GitError, Repo};
use crate::daemon::Paths;
use crate::domain::agent::attempt::ToolRecord;
use crate::domain::agent::profile::{AgentProfile, BUILTIN_PROFILES};
use crate::domain::agent::report::RunReport;
use crate::domain::agent::sandbox::SandboxKind;
use crate::domain::cluster::{attempt_ref, AttemptEnd, AttemptOrder};
use crate::domain::id::BeadId;
use crate::domain::unavailable::Unavailable;
use crate::protocol::{HookAnswer, HookDecision, HookParams, RpcError, TOOL_USED_EVENT};

/// The most of an attempt's stdout and of its stderr sent back with its end (the whole files
/// stay in the worker's run folder).
pub const OUTPUT_TAIL: usize = 256 * 1024;

/// The worker's own HEAD: a branch never made, so no branch a fetch moves is checked out.
const WORKER_HEAD: &str = "refs/heads/catalyst-worker";

/// Why a worker cannot start.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("cannot make the work folder `{path}`: {source}")]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot clone the shared remote: {0}")]
    Clone(#[from] GitCommandError),
    #[error(transparent)]
    Repo(#[from] GitError),
    #[error("profile `{0}` has `sandbox = \"none\"`: a worker runs its agents sandboxed; start it with `--allow-unconfined` to run that profile unconfined")]
    Unconfined(String),
}

/// Why a worker's `--profiles` file cannot be used; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ProfilesFileError {
    #[error("cannot read the profiles file `{}`: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the profiles file `{}`: {source}", .path.display())]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("the profiles file `{}`: `profiles.{name}`: {source}", .path.display())]
    Profile {
        path: PathBuf,
        name: String,
        source: crate::domain::agent::profile::ProfileError,
    },
}

/// A worker's workspace: a clone of the shared remote in `<workdir>/repo`, whose
/// `.catalyst/` holds the attempts' worktrees and run folders as a daemon's does.
pub struct Worker {
    pub name: String,
    remote: String,
    paths: Paths,
    repo: Repo,
    catalyst: PathBuf,
    settings: Value,
    /// The last profile's sandbox (orders of one daemon share one profile).
    sandbox: Mutex<Option<(AgentProfile, Option<SandboxSpec>)>>,
    /// The target branches fetched since the worker started.
    targets: tokio::sync::Mutex<std::collections::HashSet<String>>,
    /// Attempts running, by bead: a bead's worktree goes once none of its attempts runs here.
    active: tokio::sync::Mutex<HashMap<BeadId, usize>>,
    /// The profiles orders may name: the built-in ones, and those the worker was given.
    profiles: BTreeMap<String, AgentProfile>,
}

impl Worker {
    /// Opens the workspace in `workdir`, cloning `remote` the first time. Its own HEAD is a
    /// branch that is never made, so fetches may move every other one. `catalyst` is the
    /// binary the hooks and the sandbox's network run (`catalyst worker`
    /// passes itself). Up to `spares` finished worktrees are kept to make the next ones from
    /// (see [`Repo::with_spares`]).
    pub async fn open(
        name: &str,
        remote: &str,
        workdir: &Path,
        catalyst: &Path,
        spares: usize,
    ) -> Result<Worker, WorkerError> {
        let folder = |source| WorkerError::Folder {
            path: workdir.to_owned(),
            source,
        };
        std::fs::create_dir_all(workdir).map_err(folder)?;
        let clone = workdir.join("repo");
        if !clone.join(".git").exists() {
            let parent = workdir.to_owned();
            let target = clone.display().to_string();
            git::git(
                &parent,
                &["clone", "--quiet", "--no-checkout", remote, &target],
            )
            .await?;
        }
        git::git(&clone, &["symbolic-ref", "HEAD", WORKER_HEAD]).await?;
        let paths = Paths::new(&clone);
        std::fs::create_dir_all(&paths.state).map_err(folder)?;
        let exclude = clone.join(".git").join("info").join("exclude");
        crate::daemon::paths::exclude_state_dir(&exclude).map_err(folder)?;
        let repo = Repo::open(&paths.workspace, &paths.worktrees())?.with_spares(spares);
        let catalyst = catalyst.to_owned();
        let hook = crate::daemon::load::hook_bin(&catalyst);
        let settings = crate::domain::agent::settings::settings(&catalyst, hook.as_deref());
        Ok(Worker {
            name: name.to_owned(),
            remote: remote.to_owned(),
            paths,
            repo,
            catalyst,
            settings,
            sandbox: Mutex::default(),
            targets: tokio::sync::Mutex::default(),
            active: tokio::sync::Mutex::default(),
            profiles: builtin_profiles(),
        })
    }

    /// The worker with `profiles` besides the built-in ones (one of the same name replaces
    /// it). A profile with `sandbox = "none"` is refused unless `allow_unconfined`, and logged
    /// when allowed.
    pub fn with_profiles(
        mut self,
        profiles: BTreeMap<String, AgentProfile>,
        allow_unconfined: bool,
    ) -> Result<Worker, WorkerError> {
        self.profiles.extend(profiles);
        for (name, profile) in &self.profiles {
            if profile.sandbox == SandboxKind::None {
                if !allow_unconfined {
                    return Err(WorkerError::Unconfined(name.clone()));
                }
                tracing::warn!(profile = %name, "`--allow-unconfined`: this profile's agents run unconfined");
            }
        }
        Ok(self)
    }

    /// The worker's workspace (the clone).
    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// Runs `order` until it ends or `cancel` fires (an end without an outcome). Its worktree
    /// and run folder stay until [`Worker::finish`].
    pub async fn run(&self, order: &AttemptOrder, cancel: CancellationToken) -> AttemptEnd {
        *self
            .active
            .lock()
            .await
            .entry(order.work.clone())
            .or_default() += 1;
        let profile = self
            .profiles
            .get(&order.agent.profile)
            .map(|base| order.agent.apply(base.clone()));
        let mut done = match profile {
            None => unavailable(
                order,
                format!(
                    "profile `{}` is not one of this worker's ({})",
                    order.agent.profile,
                    self.profiles
                        .keys()
                        .map(|p| format!("`{p}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Some(profile) => match missing_program(&profile) {
                Some(program) => unavailable(
                    order,
                    format!("`{program}` is not installed on this worker (not found on its PATH)"),
                ),
                None => match self.fetch(order).await {
                    Ok(()) => self.run_fetched(order, &profile, cancel).await,
                    Err(e) => unavailable(order, format!("cannot fetch the starting commit: {e}")),
                },
            },
        };
        if let Some(commit) = &done.commit {
            let reference = attempt_ref(&order.work, &order.step_name, order.attempt);
            let pushed = git::push(
                &self.paths.workspace,
                &self.remote,
                commit.as_str(),
                &reference,
            )
            .await;
            if let Err(e) = pushed {
                done = unavailable(order, format!("cannot push the attempt's commit: {e}"));
            }
        }
        self.end(order, done)
    }

    /// Forgets a run of `order` once its end is sent: its run folder goes, and the bead's
    /// worktree and branch too unless another of its attempts runs here (the daemon holds
    /// every record, and the worker would otherwise keep a worktree per bead it ever ran, each
    /// making the next worktree slower to add). A bead's next step here starts again from
    /// its start commit, as on any other worker.
    pub async fn finish(&self, order: &AttemptOrder) {
        let run_dir = self
            .paths
            .run_dir(&order.work, &order.step_name, order.attempt);
        if let Err(e) = std::fs::remove_dir_all(&run_dir) {
            tracing::warn!(path = %run_dir.display(), error = %e, "cannot remove an attempt's run folder");
        }
        // Held while the worktree goes, so no attempt of the bead starts in it meanwhile.
        let mut active = self.active.lock().await;
        let left = active.get_mut(&order.work).map(|n| {
            *n = n.saturating_sub(1);
            *n
        });
        if left.is_some_and(|n| n > 0) {
            return;
        }
        active.remove(&order.work);
        let (repo, work) = (self.repo.clone(), order.work.clone());
        if let Err(e) = runner::git(move || repo.remove(&work)).await {
            tracing::warn!(bead = %order.work, error = %e, "cannot remove the bead's worktree");
        }
        // The bead's folders of run folders, once empty.
        let bead_runs = self.paths.runs().join(order.work.as_str());
        for dir in run_dir.ancestors().skip(1) {
            if !dir.starts_with(&bead_runs) || std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }

    /// The order's starting commit (and, the first time, the target branch) from the shared
    /// remote, unless the clone has it already (this worker made it, or fetched it for an
    /// earlier attempt). The attempt's worktree is then reset to it.
    async fn fetch(&self, order: &AttemptOrder) -> Result<(), GitCommandError> {
        let have = crate::daemon::worktree::CommitId::parse(&order.base)
            .is_ok_and(|c| self.repo.has_commit(&c));
        let base = (!have).then(|| format!("+{0}:{0}", order.base_ref));
        // The target branch only makes new branches, which the base's branch never needs:
        // fetched once, for a worktree made from nothing, before any attempt of that target
        // goes on (they wait for it here).
        let mut targets = self.targets.lock().await;
        if targets.contains(&order.target) {
            drop(targets);
            return match base {
                Some(base) => git::fetch(&self.paths.workspace, &self.remote, &[base]).await,
                None => Ok(()),
            };
        }
        let target = format!("refs/heads/{}", order.target);
        let mut refspecs = vec![format!("+{target}:{target}")];
        refspecs.extend(base);
        git::fetch(&self.paths.workspace, &self.remote, &refspecs).await?;
        targets.insert(order.target.clone());
        Ok(())
    }

    async fn run_fetched(
        &self,
        order: &AttemptOrder,
        profile: &AgentProfile,
        cancel: CancellationToken,
    ) -> StepDone {
        let sandbox = self.sandbox(profile);
        let sources = WorkerSources {
            paths: &self.paths,
            repo: &self.repo,
            settings: &self.settings,
            profile,
            sandbox: sandbox.as_ref(),
        };
        let job = runner::job_from_order(order, sources);
        let told = Arc::new(Mutex::new(Vec::new()));
        let mut done = runner::run_agent_step(job, cancel, ask(told.clone())).await;
        let mut records = std::mem::take(&mut *told.lock().unwrap_or_else(|e| e.into_inner()));
        records.append(&mut done.tool_records);
        done.tool_records = records;
        done
    }

    /// The sandbox `profile` asks for on this machine, worked out once per profile (it reads
    /// the environment and looks programs up on `PATH`), as the daemon does at load.
    fn sandbox(&self, profile: &AgentProfile) -> Option<SandboxSpec> {
        let mut last = self.sandbox.lock().unwrap_or_else(|e| e.into_inner());
        match &*last {
            Some((known, spec)) if known == profile => spec.clone(),
            _ => {
                let spec = runner::sandbox_template(profile, &self.paths, &self.catalyst);
                *last = Some((profile.clone(), spec.clone()));
                spec
            }
        }
    }

    /// The attempt's end as the daemon gets it.
    fn end(&self, order: &AttemptOrder, done: StepDone) -> AttemptEnd {
        let run_dir = self
            .paths
            .run_dir(&order.work, &order.step_name, order.attempt);
        let report = std::fs::read(run_dir.join(REPORT_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice::<RunReport>(&b).ok());
        AttemptEnd {
            dispatch: order.dispatch.clone(),
            worker: self.name.clone(),
            step: order.step.clone(),
            attempt: order.attempt,
            outcome: done.outcome,
            exit: done.exit,
            duration_ms: done.duration_ms,
            cost_usd: done.cost_usd,
            commit: done.commit.map(|c| c.to_string()),
            comment: done.comment,
            tool_records: done.tool_records,
            report,
            stdout: tail(&run_dir.join(crate::daemon::agent::STDOUT_FILE)),
            stderr: tail(&run_dir.join(crate::daemon::agent::STDERR_FILE)),
        }
    }
}

/// The built-in profiles by name.
fn builtin_profiles() -> BTreeMap<String, AgentProfile> {
    BUILTIN_PROFILES
        .iter()
        .filter_map(|name| Some(((*name).to_owned(), AgentProfile::builtin(name)?)))
        .collect()
}

/// The profiles of a worker's `--profiles` file: its `[profiles.<name>]` tables, as a daemon's
/// config writes them (a profile named after a built-in one changes what it sets of it).
/// Other keys are left alone, so a copy of the daemon's own config will do.
pub fn read_profiles(path: &Path) -> Result<BTreeMap<String, AgentProfile>, ProfilesFileError> {
    #[derive(serde::Deserialize)]
    struct File {
        #[serde(default)]
        profiles: BTreeMap<String, crate::domain::agent::profile::ProfileConfig>,
    }
    let text = std::fs::read_to_string(path).map_err(|source| ProfilesFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let file: File = toml::from_str(&text).map_err(|source| ProfilesFileError::Parse {
        path: path.to_owned(),
        source,
    })?;
    file.profiles
        .into_iter()
        .map(|(name, config)| {
            let profile = config
                .resolve(&name)
                .map_err(|source| ProfilesFileError::Profile {
                    path: path.to_owned(),
                    name: name.clone(),
                    source,
                })?;
            Ok((name, profile))
        })
        .collect()
}

/// A program the order's attempt needs that this machine does not have: the agent's command,
/// and `bwrap` when its profile sandboxes it. Missing, the attempt could not start here; it is
/// this worker's trouble (the daemon hands the attempt to another), where a daemon whose own
/// agent CLI is missing pauses its agents instead.
fn missing_program(profile: &AgentProfile) -> Option<String> {
    use crate::daemon::fsutil::{find_program, find_program_in};
    let agent = profile.command.first()?;
    // The agent is looked up on its profile's `PATH` when it sets one, as its start does.
    let path = (profile.env.get("PATH").map(std::ffi::OsString::from))
        .or_else(|| std::env::var_os("PATH"));
    if find_program_in(agent.as_ref(), path.as_deref()).is_none() {
        return Some(agent.clone());
    }
    let sandboxed = profile.sandbox != SandboxKind::None;
    let bwrap = crate::daemon::sandbox::BWRAP;
    (sandboxed && find_program(bwrap).is_none()).then(|| bwrap.to_owned())
}

/// The attempt failed before its agent ran, for a reason of the worker's (not counted).
fn unavailable(order: &AttemptOrder, reason: String) -> StepDone {
    StepDone::unavailable(
        &order.work,
        &order.step,
        order.role,
        order.attempt,
        Unavailable::Preparation,
        reason,
    )
}

/// How the attempt's hooks are answered when they ask (the local hook decides from the
/// policy file while the attempt runs): the records of the decisions it made are kept for
/// the end; a straggler's tool call, after the attempt, is denied; its stop allowed.
fn ask(told: Arc<Mutex<Vec<ToolRecord>>>) -> Ask {
    Arc::new(move |params: HookParams| {
        let told = told.clone();
        Box::pin(async move {
            match params.event.as_str() {
                TOOL_USED_EVENT => {
                    let records: Vec<ToolRecord> =
                        serde_json::from_value(params.payload["records"].clone())
                            .map_err(|e| RpcError::bad_request(e.to_string()))?;
                    told.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(records);
                    Ok(HookAnswer::default())
                }
                "PreToolUse" => Ok(HookAnswer {
                    decision: Some(HookDecision::Deny),
                    reason: Some("the attempt is over: its agent may not use tools".into()),
                    ..Default::default()
                }),
                _ => Ok(HookAnswer {
                    decision: Some(HookDecision::Allow),
                    ..Default::default()
                }),
            }
        })
    })
}

/// The last [`OUTPUT_TAIL`] bytes of a file, as text.
fn tail(path: &Path) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return String::new();
    };
    let from = bytes.len().saturating_sub(OUTPUT_TAIL);
    String::from_utf8_lossy(&bytes[from..]).into_owned()
}
