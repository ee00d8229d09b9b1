//! [`Workspace`]: a temporary git repository set up for a daemon, and what a test reads from it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use catalyst::daemon::Paths;
use stub_claude::Invocation;

use crate::events::Event;
use crate::{procfs, repo};

/// A git repository with `main` in a temporary folder, set up for a daemon: `.catalyst/` with
/// a config whose agents are stub-claude following [`Workspace::scenario`] (or agents of the
/// test's own, see [`WorkspaceBuilder::agent_config`]).
///
/// Clones share the folder, which is removed when the last one goes (kept when
/// `CATALYST_KEEP_TEST_DIRS` is set). A [`crate::TestDaemon`] holds a clone and derefs to it.
#[derive(Clone)]
pub struct Workspace {
    _dir: Option<Arc<tempfile::TempDir>>,
    /// The test's own files: the scenario, the stub's log, the daemon's log.
    pub root: PathBuf,
    /// The repository, `<root>/repo` unless [`WorkspaceBuilder::repo_in`] said otherwise.
    pub repo: PathBuf,
    pub paths: Paths,
    /// The stub-claude scenario (TOML); tests may rewrite it before agents run.
    pub scenario: PathBuf,
    /// The stub's invocation log.
    pub log: PathBuf,
    /// `catalystd`'s stderr, appended by every start of a subprocess daemon.
    pub daemon_log: PathBuf,
}

/// Writes the agent part of a workspace's config, given the workspace's root.
type AgentConfig = Box<dyn FnOnce(&Path) -> String>;

/// How a [`Workspace`] is set up; [`Workspace::new`] and [`Workspace::bare`] cover most tests.
pub struct WorkspaceBuilder {
    scenario: String,
    scenario_file: Option<PathBuf>,
    config: String,
    agent_config: Option<AgentConfig>,
    repo_in: Option<PathBuf>,
    bare: bool,
    keep: bool,
}

impl WorkspaceBuilder {
    /// The stub-claude scenario (default: empty, every agent succeeds at once).
    pub fn scenario(mut self, scenario: &str) -> Self {
        self.scenario = scenario.to_owned();
        self
    }

    /// The stub follows the scenario file at `path` (another workspace's, say) instead of
    /// one of its own; its folder must be one the stub may write (a [`Workspace::scenario`]'s
    /// is). [`WorkspaceBuilder::scenario`] is then unused.
    pub fn scenario_file(mut self, path: &Path) -> Self {
        self.scenario_file = Some(path.to_owned());
        self
    }

    /// Config keys added to the agents' config: top-level keys (those given here replace the
    /// same keys of the stub's config) and tables.
    pub fn config(mut self, extra: &str) -> Self {
        self.config = extra.to_owned();
        self
    }

    /// The agents' config made by `config(root)` instead of the stub's (for real agents),
    /// `root` being [`Workspace::root`].
    pub fn agent_config(mut self, config: impl FnOnce(&Path) -> String + 'static) -> Self {
        self.agent_config = Some(Box::new(config));
        self
    }

    /// The repository is made in `parent/repo` (a mount the test owns, say) instead of next to
    /// the test's files.
    pub fn repo_in(mut self, parent: &Path) -> Self {
        self.repo_in = Some(parent.to_owned());
        self
    }

    /// Only the repository and the scenario: no `.catalyst/`, no config.
    pub fn bare(mut self) -> Self {
        self.bare = true;
        self
    }

    /// Keeps the temporary folder after the test (and says where it is).
    pub fn keep(mut self, keep: bool) -> Self {
        self.keep = keep;
        self
    }

    pub fn build(self) -> Workspace {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let repo = self.repo_in.as_deref().unwrap_or(&root).join("repo");
        std::fs::create_dir_all(&repo).expect("repo dir");
        catalyst::cli::demo::init_repo(&repo).expect("init repo");
        // The stub's files in a folder of their own, the only one outside the worktree that
        // the sandboxed agents may write (see `stub_config`).
        let stub = root.join("stub");
        std::fs::create_dir_all(&stub).expect("stub dir");
        let scenario = match self.scenario_file {
            Some(path) => path,
            None => {
                let scenario = stub.join("scenario.toml");
                std::fs::write(&scenario, &self.scenario).expect("scenario");
                scenario
            }
        };
        let dir = if self.keep {
            eprintln!("keeping {}", dir.keep().display());
            None
        } else {
            Some(Arc::new(dir))
        };
        let ws = Workspace {
            _dir: dir,
            paths: Paths::new(&repo),
            repo,
            scenario,
            log: stub.join("agents.log"),
            daemon_log: root.join("daemon.log"),
            root,
        };
        if !self.bare {
            std::fs::create_dir_all(&ws.paths.state).expect("state dir");
            // Hooks run `catalyst_bin`; an in-process daemon has no `catalyst` next to it.
            let bin = toml::Value::String(crate::catalyst_bin().display().to_string());
            let agents = match self.agent_config {
                Some(config) => config(&ws.root),
                None => ws.stub_config(),
            };
            // Retries start at once: a test waits for events, not for the router's backoff
            // (tests of the backoff set their own).
            let base = format!("catalyst_bin = {bin}\n{agents}\n{NO_RETRY_DELAY}");
            std::fs::write(ws.paths.config(), merge_config(&self.config, &base)).expect("config");
        }
        ws
    }
}

/// The `[router]` table of every test workspace's config.
const NO_RETRY_DELAY: &str = "[router]\nretry_delay_secs = 0\n";

impl Workspace {
    pub fn builder() -> WorkspaceBuilder {
        WorkspaceBuilder {
            scenario: String::new(),
            scenario_file: None,
            config: String::new(),
            agent_config: None,
            repo_in: None,
            bare: false,
            keep: std::env::var_os("CATALYST_KEEP_TEST_DIRS").is_some(),
        }
    }

    /// A workspace whose agents follow `scenario`, with `extra` config keys.
    pub fn new(scenario: &str, extra: &str) -> Workspace {
        Workspace::builder()
            .scenario(scenario)
            .config(extra)
            .build()
    }

    /// A repository without any catalyst set-up, and a scenario for when it gets one.
    pub fn bare(scenario: &str) -> Workspace {
        Workspace::builder().scenario(scenario).bare().build()
    }

    /// The config keys that make stub-claude (`catalyst __stub-claude`) the agent.
    pub fn stub_config(&self) -> String {
        let agent = [
            crate::catalyst_bin().display().to_string(),
            "__stub-claude".to_owned(),
        ];
        let config = catalyst::cli::demo::stub_config(&agent, &self.scenario, &self.log);
        if crate::sandboxed() {
            config
        } else {
            catalyst::cli::demo::unconfined(&config)
        }
    }

    /// A path in the stub's own folder, which a sandboxed agent sees (the rest of the temporary
    /// folder is behind the sandbox's private `/tmp`): where a test puts the file a scenario's
    /// `wait_for` waits on.
    pub fn stub_file(&self, name: &str) -> PathBuf {
        self.scenario
            .parent()
            .expect("the stub's folder")
            .join(name)
    }

    /// Adds `text` at the end of the config (a table of its own, such as `[cluster]`).
    pub fn append_config(&self, text: &str) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(self.paths.config())
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .expect("the config");
    }

    /// Replaces the scenario.
    pub fn set_scenario(&self, scenario: &str) {
        std::fs::write(&self.scenario, scenario).expect("scenario");
    }

    /// Installs `.catalyst/formulas/<name>.formula.toml` (read at start or on a reload).
    pub fn write_formula(&self, name: &str, text: &str) {
        let dir = self.paths.state.join("formulas");
        std::fs::create_dir_all(&dir).expect("formulas dir");
        std::fs::write(dir.join(format!("{name}.formula.toml")), text).expect("formula");
    }

    /// The journal, read from its file.
    pub fn journal(&self) -> Vec<Event> {
        let text = std::fs::read_to_string(self.paths.state.join("journal.jsonl"))
            .expect("read the journal");
        text.lines()
            .map(|l| serde_json::from_str(l).expect("journal line"))
            .collect()
    }

    /// The agents that ran, in start order.
    pub fn invocations(&self) -> Vec<Invocation> {
        stub_claude::invocations(&self.log).expect("read the stub log")
    }

    /// The roles of the agents run for `bead`, in start order.
    pub fn roles_of(&self, bead: &str) -> Vec<String> {
        self.invocations()
            .into_iter()
            .filter(|i| i.bead.as_deref() == Some(bead))
            .map(|i| i.role().to_owned())
            .collect()
    }

    /// The run folder of an attempt: `runs/<bead>/<step>/<attempt>/`.
    pub fn run_dir(&self, bead: &str, step: &str, attempt: u32) -> PathBuf {
        self.paths
            .runs()
            .join(bead)
            .join(step)
            .join(attempt.to_string())
    }

    /// The file `path` on the `main` branch, if present.
    pub fn file_on_main(&self, path: &str) -> Option<String> {
        repo::file_on_main(&self.repo, path)
    }

    /// Every file on `main` with its content, sorted by path.
    pub fn files_on_main(&self) -> Vec<(String, String)> {
        repo::files_on_main(&self.repo)
    }

    /// Commit messages on `main`, newest first.
    pub fn main_log(&self) -> Vec<String> {
        repo::main_log(&self.repo)
    }

    pub fn branch_exists(&self, bead: &str) -> bool {
        repo::branch_exists(&self.repo, bead)
    }

    pub fn worktree_exists(&self, bead: &str) -> bool {
        self.paths.worktrees().join(bead).exists()
    }

    /// Processes still alive that were started for this workspace's agents: the stub and
    /// everything it started inherit `STUB_CLAUDE_SCENARIO=<this scenario>`.
    pub fn agent_processes(&self) -> Vec<(i32, String)> {
        let var = format!("STUB_CLAUDE_SCENARIO={}", self.scenario.display());
        procfs::processes_with_env(&var)
    }
}

/// `base` with `extra`: top-level keys of both first (those `extra` sets, like the timeouts,
/// replace the base's, since TOML refuses a key given twice), then the tables of both (a
/// table `extra` has replaces the base's table of the same name).
fn merge_config(extra: &str, base: &str) -> String {
    if extra.trim().is_empty() {
        return base.to_owned();
    }
    let split = |text: &str| -> (Vec<String>, Vec<String>) {
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with('['))
            .unwrap_or(lines.len());
        (lines[..at].to_vec(), lines[at..].to_vec())
    };
    let key = |line: &str| line.split_once('=').map(|(k, _)| k.trim().to_owned());
    let (extra_top, extra_tables) = split(extra);
    let (base_top, base_tables) = split(base);
    let overridden: Vec<String> = extra_top.iter().filter_map(|l| key(l)).collect();
    let mut out = extra_top;
    out.extend(
        base_top
            .into_iter()
            .filter(|l| !key(l).is_some_and(|k| overridden.contains(&k))),
    );
    let header = |line: &str| {
        let line = line.trim();
        (line.starts_with('[') && line.ends_with(']')).then(|| line.to_owned())
    };
    let replaced: Vec<String> = extra_tables.iter().filter_map(|l| header(l)).collect();
    out.extend(extra_tables);
    let mut keep = true;
    for line in base_tables {
        if let Some(name) = header(&line) {
            keep = !replaced.contains(&name);
        }
        if keep {
            out.push(line);
        }
    }
    out.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::merge_config;

    #[test]
    fn extra_keys_replace_the_base_and_tables_come_last() {
        let base = "a = 1\nb = 2\n[t]\nx = 1\n";
        let merged = merge_config("b = 3\nc = 4\n[u]\ny = 2", base);
        assert_eq!(merged, "b = 3\nc = 4\na = 1\n[u]\ny = 2\n[t]\nx = 1\n");
        let parsed: toml::Table = merged.parse().expect("valid TOML");
        assert_eq!(parsed["b"].as_integer(), Some(3));
        assert_eq!(merge_config("", base), base);
    }

    #[test]
    fn a_table_of_the_extra_replaces_the_base_table_of_that_name() {
        let base = "a = 1\n[router]\nretry_delay_secs = 0\n[t]\nx = 1\n";
        let merged = merge_config("[router]\nretry_delay_secs = 1", base);
        assert_eq!(
            merged,
            "a = 1\n[router]\nretry_delay_secs = 1\n[t]\nx = 1\n"
        );
    }
}
