//! `catalyst demo`: one bead through the whole workflow, in a temporary repository, with
//! stub agents (this very binary's hidden `__stub-claude` subcommand), so that it works on a
//! fresh machine with nothing installed but the Rust toolchain.
//!
//! The review rejects once, so the run shows the fix loop: refine, implement, review, fix,
//! review, then the daemon's merge moving the target branch to the bead's commit (git merges
//! it, so no merge agent runs; its rule below is there for a conflict).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cli::client::Client;
use crate::daemon::{self, Paths};
use crate::domain::event::EventBody;
use crate::domain::model::Status;
use crate::protocol::{BeadInput, ShowParams, StreamLine, SubscribeParams};

/// What the demo's stub agents do.
const SCENARIO: &str = r#"
[[rule]]
role = "refine"
responses = [{ text = "Plan: add greet() to hello.py and a test for it.", summary = "planned greet() with a test" }]

[[rule]]
role = "implement"
responses = [{ write = { "hello.py" = "def greet(name):\n    return 'hello ' + name\n" }, summary = "added greet()" }]

[[rule]]
role = "review"
responses = [
  { verdict = "REJECTED", summary = "greet() has no test", instructions = ["add test_hello.py with a test for greet()"] },
  { verdict = "APPROVED", summary = "greet() is tested" },
]

[[rule]]
role = "fix"
responses = [{ write = { "test_hello.py" = "from hello import greet\n\ndef test_greet():\n    assert greet('a') == 'hello a'\n" }, summary = "added test_hello.py" }]

[[rule]]
role = "merge"
responses = [{ summary = "branch is up to date with main" }]
"#;

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("demo: cannot {action} in `{}`: {source}", path.display())]
    Git {
        action: &'static str,
        path: PathBuf,
        source: git2::Error,
    },
    #[error("demo: the daemon task failed: {0}")]
    DaemonTask(#[source] tokio::task::JoinError),
    #[error("demo: the bead ended {0}")]
    Ended(String),
    #[error(transparent)]
    Daemon(#[from] daemon::DaemonError),
    #[error(transparent)]
    Client(#[from] crate::cli::client::ClientError),
    #[error("demo: cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("demo: cannot make a temporary folder: {0}")]
    TempDir(#[source] std::io::Error),
    #[error("demo: cannot find this program's path: {0}")]
    CurrentExe(#[source] std::io::Error),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Makes the folders up to `path` and writes `contents` there.
fn write_file(path: &Path, contents: &str) -> Result<(), DemoError> {
    let failed = |source| DemoError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    std::fs::write(path, contents).map_err(failed)
}

fn make_dir(path: &Path) -> Result<(), DemoError> {
    std::fs::create_dir_all(path).map_err(|source| DemoError::Write {
        path: path.to_owned(),
        source,
    })
}

/// The error of git `action` in the repository at `path`.
fn git<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(git2::Error) -> DemoError + 'a {
    move |source| DemoError::Git {
        action,
        path: path.to_owned(),
        source,
    }
}

/// Creates a repository with one commit on `main`.
pub fn init_repo(dir: &Path) -> Result<(), DemoError> {
    let repo = git2::Repository::init(dir).map_err(git("create a repository", dir))?;
    write_file(&dir.join("README.md"), "# demo\n")?;
    let mut index = repo.index().map_err(git("write the index", dir))?;
    index
        .add_path(Path::new("README.md"))
        .map_err(git("add README.md", dir))?;
    index.write().map_err(git("write the index", dir))?;
    let tree = repo
        .find_tree(index.write_tree().map_err(git("write the tree", dir))?)
        .map_err(git("write the tree", dir))?;
    let sig =
        git2::Signature::now("demo", "demo@localhost").map_err(git("make a signature", dir))?;
    repo.commit(
        Some("refs/heads/main"),
        &sig,
        &sig,
        "initial commit",
        &tree,
        &[],
    )
    .map_err(git("commit", dir))?;
    repo.set_head("refs/heads/main")
        .map_err(git("point HEAD at main", dir))?;
    Ok(())
}

/// `config` (from [`stub_config`]) with its stub profile and its gates unconfined, for a
/// machine without bubblewrap; whoever calls it says so. A profile already unconfined is left
/// as it is. The stub agent is catalyst's own program, so it may run unconfined under a root
/// daemon too (`allow_unconfined_root`).
pub fn unconfined(config: &str) -> String {
    const FORMAT: &str = "format = \"claude-stream-json\", ";
    const UNCONFINED: &str = "format = \"claude-stream-json\", sandbox = \"none\", ";
    if config.contains(UNCONFINED) {
        return config.to_owned();
    }
    format!(
        "allow_unconfined_root = true\ngate_sandbox = \"none\"\n{}",
        config.replacen(FORMAT, UNCONFINED, 1)
    )
}

/// The config that runs `agent` (argv prefix) as a Claude Code stand-in with `scenario`,
/// logging its invocations to `log`.
pub fn stub_config(agent: &[String], scenario: &Path, log: &Path) -> String {
    let mut command: Vec<String> = agent.to_vec();
    command.extend(
        [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "{model}",
            "--settings",
            "{settings}",
        ]
        .map(str::to_owned),
    );
    let command = command
        .iter()
        .map(|c| toml_string(c))
        .collect::<Vec<_>>()
        .join(", ");
    // The stub writes its response counts next to the scenario, and its log.
    let mut folders: Vec<&Path> = [scenario.parent(), log.parent()]
        .into_iter()
        .flatten()
        .collect();
    folders.dedup();
    let writable = folders
        .iter()
        .map(|dir| toml_string(&dir.display().to_string()))
        .collect::<Vec<_>>()
        .join(", ");
    // Only top-level keys (the profile as an inline table), so callers may append more keys
    // and tables after it.
    format!(
        "agent = \"stub\"\nstall_timeout_secs = 60\nagent_timeout_secs = 120\ngrace_secs = 2\n\
         profiles = {{ stub = {{ command = [{command}], format = \"claude-stream-json\", \
         stdin = \"conversation\", \
         writable = [{writable}], \
         env = {{ STUB_CLAUDE_SCENARIO = {}, STUB_CLAUDE_LOG = {} }} }} }}\n",
        toml_string(&scenario.display().to_string()),
        toml_string(&log.display().to_string()),
    )
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// Runs the demo, printing to `out`. `keep` leaves the temporary repository in place.
pub async fn run(out: &mut impl Write, keep: bool) -> Result<(), DemoError> {
    let dir = tempfile::Builder::new()
        .prefix("catalyst-demo-")
        .tempdir()
        .map_err(DemoError::TempDir)?;
    let root: PathBuf = dir.path().to_owned();
    let repo_dir = root.join("repo");
    make_dir(&repo_dir)?;
    init_repo(&repo_dir)?;
    let paths = Paths::new(&repo_dir);
    make_dir(&paths.state)?;
    // The stub's scenario, response counts and log in a folder of their own: the only one
    // outside the worktree the sandboxed agents may write.
    let scenario = root.join("stub").join("scenario.toml");
    write_file(&scenario, SCENARIO)?;
    let exe = std::env::current_exe()
        .map_err(DemoError::CurrentExe)?
        .display()
        .to_string();
    // The agents' hooks run this very binary (`catalyst hook …`), whatever it is called.
    let mut config = format!(
        "catalyst_bin = {}\n{}",
        toml_string(&exe),
        stub_config(
            &[exe.clone(), "__stub-claude".into()],
            &scenario,
            &root.join("stub").join("agents.log"),
        )
    );
    if !daemon::sandbox::available() {
        // Said, not silent: the demo's agents are the built-in stub, so it can run without
        // the sandbox a real agent needs.
        writeln!(
            out,
            "note: bubblewrap (`bwrap`) is not installed, so this demo runs its stub agents and its gates unconfined (`sandbox = \"none\"`, `gate_sandbox = \"none\"`); install it to see them sandboxed, as every real agent is"
        )?;
        config = unconfined(&config);
    }
    write_file(&paths.config(), &config)?;
    writeln!(out, "demo repository: {}", repo_dir.display())?;

    let shutdown = CancellationToken::new();
    let bound = daemon::bind(&paths)?;
    let daemon = tokio::spawn(bound.run(shutdown.clone(), paths.clone()));
    let mut client = Client::connect(&paths.socket()).await?;
    let mut events = Client::connect(&paths.socket()).await?;
    events
        .subscribe(SubscribeParams {
            since: Some(0),
            bead: None,
            types: None,
            follow: true,
        })
        .await?;
    let submitted = client
        .submit(vec![BeadInput {
            title: "Add a greet() function".into(),
            description: Some("hello.py needs greet(name) returning 'hello <name>'.".into()),
            acceptance_criteria: Some("greet() exists and has a test".into()),
            ..Default::default()
        }])
        .await?;
    let id = submitted
        .ids
        .first()
        .map(ToString::to_string)
        .unwrap_or_default();
    writeln!(out, "submitted {id}; events:")?;
    let finished =
        tokio::time::timeout(Duration::from_secs(300), follow(&mut events, &id, out)).await;
    let status = match finished {
        Ok(status) => status?,
        Err(_) => "timed out".into(),
    };
    writeln!(out, "\nbead {id} is {status}")?;
    report(&mut client, &id, &repo_dir, out).await?;
    shutdown.cancel();
    match daemon.await {
        Ok(result) => result?,
        Err(e) => return Err(DemoError::DaemonTask(e)),
    }
    if !keep {
        writeln!(
            out,
            "the demo repository goes now; `catalyst demo --keep` keeps it to look at"
        )?;
    }
    if keep {
        let kept = dir.keep();
        let repo = kept.join("repo");
        writeln!(out, "kept {}", kept.display())?;
        writeln!(
            out,
            "its workspace is {}; `catalystd --workspace {} --web 127.0.0.1:7400` shows it in a browser",
            repo.display(),
            repo.display()
        )?;
    }
    if status != "closed" {
        return Err(DemoError::Ended(status));
    }
    Ok(())
}

/// Prints events until the bead closes or blocks; returns its final status.
async fn follow(events: &mut Client, id: &str, out: &mut impl Write) -> Result<String, DemoError> {
    while let Some(StreamLine::Event(event)) = events.next_event().await? {
        writeln!(out, "{}", crate::render::render_event(&event))?;
        if let EventBody::BeadStatus {
            id: about, status, ..
        } = &event.body
        {
            if about.to_string() == id && matches!(status, Status::Closed | Status::Blocked) {
                return Ok(status.to_string());
            }
        }
    }
    Ok("unknown (the event stream ended)".into())
}

/// The bead's steps and `main`'s log, once the bead has ended.
async fn report(
    client: &mut Client,
    id: &str,
    repo: &Path,
    out: &mut impl Write,
) -> Result<(), DemoError> {
    let shown = client
        .show(ShowParams {
            id: id.to_owned(),
            runs: false,
        })
        .await?;
    for step in &shown.steps {
        let detail = step.detail.as_ref();
        writeln!(
            out,
            "  {:<14} {:<8} {}",
            detail.map_or("", |d| &d.step),
            step.status.to_string(),
            detail.and_then(|d| d.summary.as_deref()).unwrap_or("")
        )?;
    }
    writeln!(out, "\n`main` now:")?;
    for line in git_log(repo)? {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}

fn git_log(path: &Path) -> Result<Vec<String>, DemoError> {
    let repo = git2::Repository::open(path).map_err(git("open the repository", path))?;
    let mut walk = repo.revwalk().map_err(git("read the log of main", path))?;
    walk.push_ref("refs/heads/main")
        .map_err(git("read the log of main", path))?;
    let mut lines = Vec::new();
    for oid in walk.flatten() {
        let commit = repo
            .find_commit(oid)
            .map_err(git("read the log of main", path))?;
        lines.push(format!(
            "{} {}",
            &oid.to_string()[..10],
            commit.summary().ok().flatten().unwrap_or("")
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::Config;

    /// The stub profile the README's tour gives people to paste is the one the demo and the
    /// tests run.
    #[test]
    fn the_readme_stub_profile_is_the_one_the_demo_runs() {
        let readme = include_str!("../../README.md");
        let section = &readme[readme
            .find("## Five minutes with the stub agent")
            .expect("the README's tour with the stub agent")..];
        let block = section
            .split("```toml\n")
            .nth(2)
            .and_then(|rest| rest.split("```").next())
            .expect("the profile block, after the scenario");
        let readme = Config::parse(block, "README.md").expect("the README's profile");
        let folder = Path::new("/home/me/stub");
        let demo = stub_config(
            &["catalyst".into(), "__stub-claude".into()],
            &folder.join("scenario.toml"),
            &folder.join("agents.log"),
        );
        let demo = Config::parse(&demo, "demo").expect("the demo's profile");
        assert_eq!(readme.agent, demo.agent);
        assert_eq!(readme.profile(), demo.profile());
    }

    /// Unconfining twice (a bench on a machine without bubblewrap) still parses.
    #[test]
    fn unconfining_an_unconfined_config_changes_nothing() {
        let config = stub_config(
            &["catalyst".into(), "__stub-claude".into()],
            Path::new("/s/scenario.toml"),
            Path::new("/s/agents.log"),
        );
        let once = unconfined(&config);
        assert_ne!(once, config);
        assert_eq!(unconfined(&once), once);
        Config::parse(&unconfined(&once), "twice").expect("an unconfined config parses");
    }
}
