//! `catalyst init [DIR]`: everything a repository needs before `catalystd` runs on it, and
//! nothing it does not. Safe to run again: files that exist are kept, never overwritten.
//!
//! - `.catalyst/config.toml` with every key commented out at its default
//!   ([`crate::domain::config::template`]), so the file documents the keys without pinning
//!   today's defaults.
//! - `.catalyst/` in `.git/info/exclude` (the common dir's, so linked worktrees share it):
//!   the state folder must never be committed, and `.gitignore` belongs to the project.
//! - With `--with-prompts`, the built-in prompts and formulas copied for editing.
//! - Which agent CLIs are on PATH, and whether the program of the agent profile the config
//!   names (by default `claude`) is there.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::daemon::paths::STATE_DIR;
use crate::daemon::Paths;
use crate::domain::config::Config;

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("`{0}` is not the top folder of a git repository (run `git init` there first)")]
    NotARepo(PathBuf),
    #[error("{action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> InitError + 'a {
    move |source| InitError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// The agent CLIs catalyst has profiles for.
pub const AGENT_CLIS: [&str; 2] = ["claude", "codex"];

/// What `init` found and did, one line each, for people.
pub fn run(dir: &Path, with_prompts: bool, out: &mut impl Write) -> Result<(), InitError> {
    let dir = dir.canonicalize().map_err(io("cannot open", dir))?;
    let repo = git2::Repository::open(&dir).map_err(|_| InitError::NotARepo(dir.clone()))?;
    if repo.is_bare()
        || repo
            .workdir()
            .and_then(|w| w.canonicalize().ok())
            .is_none_or(|w| w != dir)
    {
        return Err(InitError::NotARepo(dir));
    }
    let paths = Paths::new(&dir);
    let say = |out: &mut dyn Write, line: String| -> Result<(), InitError> {
        writeln!(out, "{line}").map_err(io("cannot write to", Path::new("stdout")))
    };
    crate::daemon::fsutil::create_dir_durable(&paths.state)
        .map_err(io("cannot create", &paths.state))?;
    write_new(
        &paths.config(),
        crate::domain::config::template::commented().as_bytes(),
        out,
    )?;

    let exclude = repo.commondir().join("info").join("exclude");
    let added =
        crate::daemon::paths::exclude_state_dir(&exclude).map_err(io("cannot update", &exclude))?;
    if added {
        say(
            out,
            format!("added `{STATE_DIR}/` to {}", exclude.display()),
        )?;
    } else {
        say(
            out,
            format!("`{STATE_DIR}/` is already in {}", exclude.display()),
        )?;
    }

    if with_prompts {
        write_new(
            &paths.prompts(),
            crate::domain::prompt::BUILTIN.as_bytes(),
            out,
        )?;
        let formulas = paths.state.join("formulas");
        std::fs::create_dir_all(&formulas).map_err(io("cannot create", &formulas))?;
        for (name, text) in crate::domain::formula::BUILTIN_FILES {
            write_new(&formulas.join(name), text.as_bytes(), out)?;
        }
    }

    for cli in AGENT_CLIS {
        match crate::daemon::fsutil::find_on_path(cli) {
            Some(path) => say(out, format!("found `{cli}` at {}", path.display()))?,
            None => say(out, format!("`{cli}` is not on PATH"))?,
        }
    }
    // The config in place, new or kept, says which agent the daemon will run.
    match crate::daemon::load::config(&paths.config()) {
        Ok(config) => {
            match crate::daemon::preflight::target_branch(&dir, &config.target_branch) {
                Ok(fine) => say(out, fine)?,
                Err(problem) => say(out, problem.to_string())?,
            }
            match missing_agent(&config, &|program| {
                crate::daemon::fsutil::find_program(program).is_some()
            }) {
                Some(line) => say(out, line)?,
                None => {
                    if let Ok(profile) = config.profile() {
                        match crate::daemon::preflight::agent_cli(&profile) {
                            Ok(fine) => say(out, fine)?,
                            Err(problem) => say(out, problem.to_string())?,
                        }
                    }
                }
            }
        }
        Err(e) => say(
            out,
            format!("{e}; catalystd refuses this config until it is fixed"),
        )?,
    }
    say(
        out,
        format!(
            "next: `catalystd --workspace {0}`, or `catalyst service install --workspace {0} --user`",
            dir.display()
        ),
    )?;
    Ok(())
}

/// Writes `path` atomically unless it exists, and says which.
fn write_new(path: &Path, bytes: &[u8], out: &mut impl Write) -> Result<(), InitError> {
    let shown = path.display();
    let line = if path.exists() {
        format!("kept {shown}")
    } else {
        crate::daemon::fsutil::write_atomic(path, bytes).map_err(io("cannot write", path))?;
        format!("wrote {shown}")
    };
    writeln!(out, "{line}").map_err(io("cannot write to", Path::new("stdout")))
}

/// What to do when the program the configured agent profile runs cannot be found (`found`
/// says whether it can); `None` when it can.
fn missing_agent(config: &Config, found: &dyn Fn(&str) -> bool) -> Option<String> {
    let profile = match config.profile() {
        Ok(profile) => profile,
        Err(e) => return Some(e.to_string()),
    };
    let program = profile.command.first()?;
    if found(program) {
        return None;
    }
    let place = if program.contains('/') {
        "an executable file"
    } else {
        "on PATH"
    };
    Some(format!(
        "the agent profile `{}` runs `{program}`, which is not {place}: install it, or set `agent` in .catalyst/config.toml",
        config.agent
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_configured_agents_program_is_asked_for() {
        let on_path = |present: &'static [&'static str]| move |p: &str| present.contains(&p);
        let default = Config::default();
        assert_eq!(
            missing_agent(&default, &on_path(&["codex"])).as_deref(),
            Some("the agent profile `claude` runs `claude`, which is not on PATH: install it, or set `agent` in .catalyst/config.toml")
        );
        assert_eq!(missing_agent(&default, &on_path(&["claude"])), None);
        let codex = Config::parse("agent = \"codex\"\n", "c.toml").unwrap();
        assert_eq!(
            missing_agent(&codex, &on_path(&["codex"])),
            None,
            "no word about claude"
        );
        let mine = Config::parse(
            "agent = \"mine\"\n[profiles.mine]\ncommand = [\"/opt/agent/bin/run\"]\n",
            "c.toml",
        )
        .unwrap();
        assert_eq!(
            missing_agent(&mine, &on_path(&["claude", "codex"])).as_deref(),
            Some("the agent profile `mine` runs `/opt/agent/bin/run`, which is not an executable file: install it, or set `agent` in .catalyst/config.toml")
        );
        assert_eq!(
            missing_agent(&mine, &on_path(&["/opt/agent/bin/run"])),
            None
        );
    }
}
