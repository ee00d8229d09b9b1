//! `catalyst demo`: one bead through the whole workflow, in a temporary repository, with
//! stub agents (this very binary's hidden `__stub-claude` subcommand), so that it works on a
//! fresh machine with nothing installed but the Rust toolchain.
//!
//! The review rejects once, so the run shows the fix loop: refine, implement, review, fix,
//! review, merge, and the target branch moving to the merged commit.

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
    #[error("demo: {0}")]
    Setup(String),
    #[error(transparent)]
    Daemon(#[from] daemon::DaemonError),
    #[error(transparent)]
    Client(#[from] crate::cli::client::ClientError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

fn setup<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> DemoError + '_ {
    move |e| DemoError::Setup(format!("{what}: {e}"))
}

/// Creates a repository with one commit on `main`.
pub fn init_repo(dir: &Path) -> Result<(), DemoError> {
    let repo = git2::Repository::init(dir).map_err(setup("git init"))?;
    std::fs::write(dir.join("README.md"), "# demo\n")?;
    let mut index = repo.index().map_err(setup("index"))?;
    index
        .add_path(Path::new("README.md"))
        .map_err(setup("git add"))?;
    index.write().map_err(setup("index"))?;
    let tree = repo
        .find_tree(index.write_tree().map_err(setup("tree"))?)
        .map_err(setup("tree"))?;
    let sig = git2::Signature::now("demo", "demo@localhost").map_err(setup("signature"))?;
    repo.commit(
        Some("refs/heads/main"),
        &sig,
        &sig,
        "initial commit",
        &tree,
        &[],
    )
    .map_err(setup("commit"))?;
    repo.set_head("refs/heads/main").map_err(setup("HEAD"))?;
    Ok(())
}

/// The config that runs `agent` (argv prefix) as a Claude Code stand-in with `scenario`,
/// logging its invocations to `log`.
pub fn stub_config(agent: &[String], scenario: &Path, log: &Path) -> String {
    let mut command: Vec<String> = agent.to_vec();
    command.extend(
        [
            "-p",
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
    // Only top-level keys (the profile as an inline table), so callers may append more keys
    // and tables after it.
    format!(
        "agent = \"stub\"\nstall_timeout_secs = 60\nagent_timeout_secs = 120\ngrace_secs = 2\n\
         profiles = {{ stub = {{ command = [{command}], format = \"claude-stream-json\", \
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
        .tempdir()?;
    let root: PathBuf = dir.path().to_owned();
    let repo_dir = root.join("repo");
    std::fs::create_dir_all(&repo_dir)?;
    init_repo(&repo_dir)?;
    let paths = Paths::new(&repo_dir);
    std::fs::create_dir_all(&paths.state)?;
    let scenario = root.join("scenario.toml");
    std::fs::write(&scenario, SCENARIO)?;
    let exe = std::env::current_exe()?.display().to_string();
    // The agents' hooks run this very binary (`catalyst hook …`), whatever it is called.
    let config = format!(
        "catalyst_bin = {}\n{}",
        toml_string(&exe),
        stub_config(
            &[exe.clone(), "__stub-claude".into()],
            &scenario,
            &root.join("agents.log"),
        )
    );
    std::fs::write(paths.config(), config)?;
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
        Err(e) => return Err(DemoError::Setup(format!("the daemon task failed: {e}"))),
    }
    if keep {
        let kept = dir.keep();
        writeln!(out, "kept {}", kept.display())?;
    }
    if status != "closed" {
        return Err(DemoError::Setup(format!("the bead ended {status}")));
    }
    Ok(())
}

/// Prints events until the bead closes or blocks; returns its final status.
async fn follow(events: &mut Client, id: &str, out: &mut impl Write) -> Result<String, DemoError> {
    while let Some(StreamLine::Event(event)) = events.next_event().await? {
        writeln!(out, "{}", crate::cli::render::render_event(&event))?;
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

fn git_log(repo: &Path) -> Result<Vec<String>, DemoError> {
    let repo = git2::Repository::open(repo).map_err(setup("open"))?;
    let mut walk = repo.revwalk().map_err(setup("log"))?;
    walk.push_ref("refs/heads/main").map_err(setup("log"))?;
    let mut lines = Vec::new();
    for oid in walk.flatten() {
        let commit = repo.find_commit(oid).map_err(setup("log"))?;
        lines.push(format!(
            "{} {}",
            &oid.to_string()[..10],
            commit.summary().ok().flatten().unwrap_or("")
        ));
    }
    Ok(lines)
}
