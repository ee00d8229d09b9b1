//! Config, prompts and formulas: read at start, replaced together on reload.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::daemon::agent::{shim_bin, Launcher, SandboxSpec};
use crate::daemon::runner::{gate_sandbox_template, sandbox_template};
use crate::daemon::sandbox::Confined;
use crate::daemon::Paths;
use crate::domain::config::{Config, ConfigError};
use crate::domain::formula::FormulaSet;
use crate::domain::prompt::PromptSet;
use crate::domain::workflow::WorkflowFiles;

use super::error::LoadError;
use super::Engine;

/// Config, prompts and formulas, replaced together on reload.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub config: Arc<Config>,
    pub prompts: Arc<PromptSet>,
    pub formulas: Arc<FormulaSet>,
    /// The `catalyst` binary the hooks and the sandbox's network run, resolved at load.
    pub catalyst: Arc<PathBuf>,
    /// `catalyst-hook` beside it, which the hooks run when it is there.
    pub hook: Option<Arc<PathBuf>>,
    /// The configured profile's sandbox, resolved at load (see `runner::sandbox_template`).
    pub sandbox: Option<Arc<SandboxSpec>>,
    /// The gates' sandbox (`gate_sandbox`), the same for every gate; `None` when it is off.
    pub gate_sandbox: Option<Arc<SandboxSpec>>,
    /// The files a bead may change only with a person's approval; None when that is off.
    pub workflow_files: Option<Arc<WorkflowFiles>>,
    /// Starts agents' processes ahead of their attempts, with `catalyst-shim` (else
    /// `catalyst-hook`, else `catalyst`); a reload starts afresh.
    pub launcher: Arc<Launcher>,
}

impl Loaded {
    /// Reads the workspace's config, prompts and formulas. Any problem refuses the whole set,
    /// so a broken edit never half-applies.
    pub fn load(paths: &Paths) -> Result<Loaded, LoadError> {
        let config = crate::daemon::load::config(&paths.config())?;
        let catalyst = crate::daemon::load::catalyst_bin(&config);
        let hook = crate::daemon::load::hook_bin(&catalyst);
        let mut sandbox = None;
        if let Ok(profile) = config.profile() {
            let agents = Confined::Agents(&config.agent);
            crate::daemon::sandbox::check(agents, profile.sandbox, config.allow_unconfined_root)?;
            sandbox = sandbox_template(&profile, paths, &catalyst).map(Arc::new);
        }
        crate::daemon::sandbox::check(
            Confined::Gates,
            config.gate_sandbox,
            config.allow_unconfined_root,
        )?;
        let gate_sandbox = gate_sandbox_template(&config, paths).map(Arc::new);
        if config.budget().is_none() {
            tracing::warn!("`budget_usd = 0`: beads have no spending limit");
        }
        let workflow_files = config
            .workflow_files()
            .map_err(|message| ConfigError::Invalid {
                path: paths.config().display().to_string(),
                message,
            })?
            .map(Arc::new);
        if workflow_files.is_none() {
            tracing::warn!("`workflow_files = []`: a bead may change formulas, prompts and CI files without an approval");
        }
        crate::daemon::cgroup::report(config.process_limit());
        if config.turn_limit().is_none() {
            tracing::warn!("`max_turns = 0`: Claude Code attempts have no turn limit");
        }
        let prompts_file = paths.prompts();
        let prompts = if prompts_file.exists() {
            crate::daemon::load::prompts(&prompts_file)?
        } else {
            PromptSet::builtin()
        };
        let (formulas, problems) =
            crate::daemon::load::formulas(&paths.workspace, &paths.formula_dirs(), &|name| {
                prompts.has(name)
            });
        let (warnings, errors): (Vec<_>, Vec<_>) = problems.iter().partition(|p| p.warning);
        if !errors.is_empty() {
            let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(LoadError::Formulas(lines.join("; ")));
        }
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        for name in &config.aspects {
            match formulas.get(name) {
                Some(f) if f.kind == crate::domain::formula::Kind::Aspect => {}
                Some(_) => {
                    return Err(LoadError::Formulas(format!(
                        "`aspects` names `{name}`, which is not an aspect formula"
                    )))
                }
                None => {
                    return Err(LoadError::Formulas(format!(
                        "`aspects` names `{name}`, which is not a known formula"
                    )))
                }
            }
        }
        let launcher = Arc::new(Launcher::new(
            shim_bin::program(
                &paths.shim_dir(),
                hook.clone().unwrap_or_else(|| catalyst.clone()),
            ),
            config.agent_nice,
            config.process_limit(),
        ));
        Ok(Loaded {
            config: Arc::new(config),
            prompts: Arc::new(prompts),
            formulas: Arc::new(formulas),
            launcher,
            hook: hook.map(Arc::new),
            catalyst: Arc::new(catalyst),
            sandbox,
            gate_sandbox,
            workflow_files,
        })
    }
}

impl Engine {
    /// Puts newly read config, prompts and formulas in force.
    pub(super) fn replace_loaded(&mut self, loaded: Loaded) {
        if loaded.config.target_branch != self.loaded.config.target_branch {
            tracing::warn!(
                "`target_branch` changed: beads already poured keep merging into the new one"
            );
        }
        if loaded.config.beads.watch != self.loaded.config.beads.watch {
            tracing::warn!(
                "`beads.watch` changed: the daemon follows the new file after a restart"
            );
        }
        let profile = loaded.config.profile().ok();
        if profile != self.loaded.config.profile().ok() {
            // A changed profile is checked as at start: a program that is not installed is
            // said now, not at the first dispatch.
            if let Some(profile) = profile {
                tokio::task::spawn_blocking(move || {
                    match crate::daemon::preflight::agent_cli(&profile) {
                        Ok(fine) => tracing::info!("{fine}"),
                        Err(problem) => tracing::warn!("{problem}"),
                    }
                });
            }
        }
        self.slots.resize(loaded.config.max_agents);
        self.loaded = loaded;
        tracing::info!("reloaded config, prompts and formulas");
    }

    /// The `--settings` JSON for an agent of `role`: the hooks that ask the daemon. The same
    /// for every role, since the daemon knows the step's role when a hook asks.
    pub(super) fn hook_settings(&self, _role: crate::domain::model::Role) -> Value {
        crate::domain::agent::settings::settings(
            &self.loaded.catalyst,
            self.loaded.hook.as_deref().map(PathBuf::as_path),
        )
    }
}
