//! Config, prompts and formulas: read at start, replaced file by file on reload.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::daemon::agent::SandboxSpec;
use crate::daemon::runner::{gate_sandbox_template, sandbox_template};
use crate::daemon::sandbox::Confined;
use crate::daemon::Paths;
use crate::domain::config::{Config, ConfigError};
use crate::domain::formula::FormulaSet;
use crate::domain::prompt::PromptSet;
use crate::domain::workflow::WorkflowFiles;
use crate::protocol::RefusedFile;

use super::error::LoadError;
use super::{Engine, Input};

/// Config, prompts and formulas, replaced file by file on reload.
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
}

/// What `config.toml` decides beyond the config itself, resolved when it is read.
struct FromConfig {
    config: Config,
    catalyst: PathBuf,
    hook: Option<PathBuf>,
    sandbox: Option<Arc<SandboxSpec>>,
    gate_sandbox: Option<Arc<SandboxSpec>>,
    workflow_files: Option<Arc<WorkflowFiles>>,
}

impl Loaded {
    /// Reads the workspace's config, prompts and formulas, as at start: any problem refuses
    /// the whole set, and the daemon does not start on it.
    pub fn load(paths: &Paths) -> Result<Loaded, LoadError> {
        let config = from_config(paths)?;
        let prompts = prompts(paths)?;
        let (formulas, errors) = formulas(paths, &prompts);
        if !errors.is_empty() {
            let lines: Vec<String> = errors
                .iter()
                .map(|r| format!("{}: {}", r.file, r.reason))
                .collect();
            return Err(LoadError::Formulas(lines.join("; ")));
        }
        if let Err(message) = aspects_known(&config.config, &formulas) {
            return Err(LoadError::Formulas(message));
        }
        Ok(Loaded::assemble(config, prompts, formulas))
    }

    /// Reads them again for a reload, file by file: a file with a problem is refused (and
    /// returned, with why) while what it held before stays in force, and the other files'
    /// changes take effect. A formula file that does not load keeps its formulas as they were.
    pub fn reload(paths: &Paths, previous: &Loaded) -> (Loaded, Vec<RefusedFile>) {
        let mut refused = Vec::new();
        let config_file = paths.config().display().to_string();
        let mut refuse = |file: String, reason: String| {
            tracing::error!(%file, %reason, "reload refused this file; what it held before stays in force");
            refused.push(RefusedFile { file, reason });
        };
        let prompts = match prompts(paths) {
            Ok(prompts) => prompts,
            Err(e) => {
                refuse(paths.prompts().display().to_string(), e.to_string());
                (*previous.prompts).clone()
            }
        };
        let (mut formulas, errors) = formulas(paths, &prompts);
        for error in errors {
            // The formulas that file gave before stay, unless another file gives them now.
            for kept in previous.formulas.iter().filter(|f| f.file == error.file) {
                if formulas.get(&kept.name).is_none() {
                    formulas.insert(kept.clone());
                }
            }
            refuse(error.file, error.reason);
        }
        let config = match from_config(paths) {
            Ok(config) => match aspects_known(&config.config, &formulas) {
                Ok(()) => Some(config),
                Err(reason) => {
                    refuse(config_file, reason);
                    None
                }
            },
            Err(e) => {
                refuse(config_file, e.to_string());
                None
            }
        };
        let loaded = match config {
            Some(config) => Loaded::assemble(config, prompts, formulas),
            None => Loaded {
                prompts: Arc::new(prompts),
                formulas: Arc::new(formulas),
                ..previous.clone()
            },
        };
        (loaded, refused)
    }

    fn assemble(from: FromConfig, prompts: PromptSet, formulas: FormulaSet) -> Loaded {
        Loaded {
            config: Arc::new(from.config),
            prompts: Arc::new(prompts),
            formulas: Arc::new(formulas),
            hook: from.hook.map(Arc::new),
            catalyst: Arc::new(from.catalyst),
            sandbox: from.sandbox,
            gate_sandbox: from.gate_sandbox,
            workflow_files: from.workflow_files,
        }
    }
}

/// Reads `config.toml` and what it decides: the sandboxes (refused when the daemon's user
/// may not run them as configured) and the workflow files.
fn from_config(paths: &Paths) -> Result<FromConfig, LoadError> {
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
    let mut gate_sandbox = gate_sandbox_template(&config, paths).map(Arc::new);
    if let Some(forge) = &config.forge {
        let token = super::forge::token_path(forge, &paths.workspace);
        hide([&mut sandbox, &mut gate_sandbox], &token);
    }
    if config.budget().is_none() {
        tracing::warn!("`budget_usd = 0`: beads have no spending limit");
    }
    if config.daily_budget_usd == 0.0 {
        tracing::warn!("`daily_budget_usd = 0`: the agents' spending in a day has no limit");
    }
    let workflow_files = config
        .workflow_files()
        .map_err(|e| ConfigError::Invalid {
            path: paths.config().display().to_string(),
            message: e.to_string(),
        })?
        .map(Arc::new);
    if workflow_files.is_none() {
        tracing::warn!("`workflow_files = []`: a bead may change formulas, prompts and CI files without an approval");
    }
    crate::daemon::cgroup::report(config.process_limit());
    if config.turn_limit().is_none() {
        tracing::warn!("`max_turns = 0`: Claude Code attempts have no turn limit");
    }
    Ok(FromConfig {
        config,
        catalyst,
        hook,
        sandbox,
        gate_sandbox,
        workflow_files,
    })
}

/// The workspace's prompts file over the built-in prompts.
fn prompts(paths: &Paths) -> Result<PromptSet, LoadError> {
    let file = paths.prompts();
    if file.exists() {
        Ok(crate::daemon::load::prompts(&file)?)
    } else {
        Ok(PromptSet::builtin())
    }
}

/// The formulas that load, and the files that do not (one entry a file, its problems
/// `; `-separated); warnings are logged.
fn formulas(paths: &Paths, prompts: &PromptSet) -> (FormulaSet, Vec<RefusedFile>) {
    let (set, problems) =
        crate::daemon::load::formulas(&paths.workspace, &paths.formula_dirs(), &|name| {
            prompts.has(name)
        });
    let mut refused: Vec<RefusedFile> = Vec::new();
    for problem in problems {
        if problem.warning {
            tracing::warn!("{problem}");
            continue;
        }
        let reason = match &problem.step {
            Some(step) => format!("{step}: {}", problem.message),
            None => problem.message.clone(),
        };
        match refused.iter_mut().find(|r| r.file == problem.file) {
            Some(file) => {
                file.reason.push_str("; ");
                file.reason.push_str(&reason);
            }
            None => refused.push(RefusedFile {
                file: problem.file,
                reason,
            }),
        }
    }
    (set, refused)
}

/// The config's `aspects` name aspect formulas that loaded.
fn aspects_known(config: &Config, formulas: &FormulaSet) -> Result<(), String> {
    for name in &config.aspects {
        match formulas.get(name) {
            Some(f) if f.kind == crate::domain::formula::Kind::Aspect => {}
            Some(_) => {
                return Err(format!(
                    "`aspects` names `{name}`, which is not an aspect formula"
                ))
            }
            None => {
                return Err(format!(
                    "`aspects` names `{name}`, which is not a known formula"
                ))
            }
        }
    }
    Ok(())
}

/// Keeps the forge's token the daemon's: agents and gates see the file `token` empty.
fn hide(sandboxes: [&mut Option<Arc<SandboxSpec>>; 2], token: &std::path::Path) {
    for spec in sandboxes.into_iter().flatten() {
        if !spec.hidden.iter().any(|h| h == token) {
            Arc::make_mut(spec).hidden.push(token.to_owned());
        }
    }
}

impl Engine {
    /// Why no formula is named `name`: its file did not load at the last reload (named, with
    /// the reason), or there is none (the known ones listed).
    pub(super) fn unknown_formula(&self, name: &str) -> String {
        let file_name = format!("{name}{}", crate::domain::formula::FORMULA_EXT);
        let refused = self.refused_reload.iter().flat_map(|r| &r.files).find(|r| {
            std::path::Path::new(&r.file)
                .file_name()
                .is_some_and(|f| f.to_str() == Some(file_name.as_str()))
        });
        match refused {
            Some(file) => format!(
                "formula `{name}` did not load: `{}`: {} (fix the file, then `catalyst ctl reload`)",
                file.file, file.reason
            ),
            None => {
                let known: Vec<&str> = self.loaded.formulas.names().collect();
                format!("unknown formula `{name}` (known: {})", known.join(", "))
            }
        }
    }

    /// Starts the webhooks' posters, and starts them again when a reload changes them.
    pub fn set_notifier(&mut self, mut notifier: crate::daemon::notify::Notifier<Input>) {
        let state = self.store.state();
        notifier.start(&self.loaded.config.webhooks, state.notified(), state.seq());
        self.notifier = Some(notifier);
    }

    /// Puts newly read config, prompts and formulas in force.
    pub(super) fn replace_loaded(&mut self, mut loaded: Loaded) {
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
        if loaded.config.webhooks != self.loaded.config.webhooks {
            if let Some(notifier) = self.notifier.as_mut() {
                // A webhook as it was goes on where it was left; a new or changed one starts
                // with the next notice, not with those it was not set to hear.
                let state = self.store.state();
                let (old, new) = (&self.loaded.config.webhooks, &loaded.config.webhooks);
                let unchanged = |name: &str| {
                    let was = old.iter().find(|h| h.name == name);
                    was.is_some() && was == new.iter().find(|h| h.name == name)
                };
                let kept: BTreeMap<String, u64> = state
                    .notified()
                    .iter()
                    .filter(|(name, _)| unchanged(name))
                    .map(|(name, seq)| (name.clone(), *seq))
                    .collect();
                notifier.start(&loaded.config.webhooks, &kept, state.seq());
                tracing::info!("`webhooks` changed: posting to them as they are now");
            }
        }
        if loaded.config.forge != self.loaded.config.forge {
            tracing::warn!("`[forge]` changed: the daemon uses it as changed after a restart");
        }
        // The token the daemon holds stays hidden whatever the new config names.
        if let Some(forge) = self.forge.as_ref() {
            hide(
                [&mut loaded.sandbox, &mut loaded.gate_sandbox],
                forge.token_file(),
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
