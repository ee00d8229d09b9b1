//! `catalyst ctl`: every control method as a subcommand. People get tables and progress bars;
//! scripts get JSON with `--json`.

use std::io::{Read, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::cli::client::{Client, ClientError};
pub use crate::cli::error::CtlError;
use crate::daemon::Paths;
use crate::domain::event::BeadPatch;
use crate::domain::id::BeadId;
use crate::domain::model::{JsonMap, VARS_KEY};
use crate::protocol::{
    ApproveParams, BeadInput, CloseParams, CommentParams, IdParams, ListParams, Method,
    PauseParams, PauseState, RejectParams, ShowParams, StreamLine, SubscribeParams, UpdateParams,
};
use crate::render::style::Paint;
use crate::render::{compact, render_beads, render_event_with, render_show, render_status};

#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The workspace whose daemon to talk to (default: the one the current folder is in, found
    /// like git finds its repository).
    #[arg(long, global = true)]
    pub workspace: Option<PathBuf>,
    /// The control socket (default: the workspace's).
    #[arg(long, global = true)]
    pub socket: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(Debug, Subcommand)]
pub enum CtlCommand {
    /// The daemon, its beads and what runs now.
    Status,
    /// Beads ready to start.
    Ready,
    /// Beads, with their progress.
    List {
        /// Only beads with this status (open, in_progress, blocked, deferred, closed).
        #[arg(long)]
        status: Option<String>,
        /// Include step beads.
        #[arg(long)]
        steps: bool,
        /// Only beads whose id or title contains this, in any case.
        #[arg(long)]
        search: Option<String>,
        /// Skip this many of the beads that match.
        #[arg(long)]
        offset: Option<u64>,
        /// At most this many beads.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// One bead, its steps and (with --runs) every attempt.
    Show {
        /// The bead (or step) to show.
        bead: String,
        /// Every attempt of every step: model, exit, duration, cost, result and its files.
        #[arg(long)]
        runs: bool,
    },
    /// Submit a bead.
    Submit(SubmitArgs),
    /// Change a bead's fields.
    Update {
        /// The bead to change.
        bead: String,
        /// The new title.
        #[arg(long)]
        title: Option<String>,
        /// The new priority: 0 (highest) to 4.
        #[arg(long)]
        priority: Option<u8>,
        /// Read the description from a file (`-` for stdin).
        #[arg(long)]
        description_file: Option<PathBuf>,
        /// The new acceptance criteria.
        #[arg(long)]
        acceptance: Option<String>,
        /// Replace the labels.
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Stop waiting for this bead (repeatable): drop the dependency `--after` added, e.g.
        /// on a bead that was cancelled.
        #[arg(long, value_name = "BEAD")]
        drop_after: Vec<BeadId>,
    },
    /// Add a comment.
    Comment {
        /// The bead to comment on.
        bead: String,
        /// The comment.
        text: String,
        /// Who says it (default: `human`).
        #[arg(long)]
        author: Option<String>,
    },
    /// Close a bead.
    Close {
        /// The bead to close.
        bead: String,
        /// Why, kept as the bead's close reason.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Reopen a closed bead.
    Reopen {
        /// The bead to reopen.
        bead: String,
    },
    /// Approve a bead waiting at an approval step, or a merge held for its workflow files.
    Approve {
        /// The bead, or the waiting step `ctl status` names.
        bead: String,
        /// A comment recorded with the approval.
        #[arg(long)]
        comment: Option<String>,
    },
    /// Reject a bead waiting at an approval step or a held merge: a fix step gets the reason.
    Reject {
        /// The bead, or the waiting step `ctl status` names.
        bead: String,
        /// What to change: the fix step's instructions.
        #[arg(long)]
        reason: String,
    },
    /// Run a blocked bead's blocked step again, with fresh counters.
    Retry {
        /// The blocked bead, or its blocked step.
        bead: String,
    },
    /// Stop a bead for good: its agent is stopped and its worktree and branch removed.
    Cancel {
        /// The bead to cancel.
        bead: String,
        /// Why, kept in its close reason (`cancelled: <reason>`).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Stop dispatching (everything, or one model).
    Pause {
        /// Pause only this model (as the config names it, e.g. `opus`).
        #[arg(long)]
        model: Option<String>,
    },
    /// Resume dispatching: what `pause` stopped, and a pause after a refused key, an
    /// unreachable API or a step the daemon could not prepare (or one model with --model).
    Resume {
        /// Resume only this model (paused by `pause --model` or after a usage limit).
        #[arg(long)]
        model: Option<String>,
    },
    /// The event stream: replay from --since, and with -f follow it live.
    Events {
        /// Start after this seq (default 0: the whole journal).
        #[arg(long)]
        since: Option<u64>,
        /// Keep following new events.
        #[arg(short, long)]
        follow: bool,
        /// Only the events of this bead and its steps.
        #[arg(long)]
        bead: Option<String>,
        /// Only events of this type, e.g. `step.finished` (repeatable).
        #[arg(long = "type")]
        types: Vec<String>,
    },
    /// What an agent did: its messages, tool calls and their results, and how the run ended,
    /// headed by step, attempt and model; -f follows it and the attempts after it.
    Logs {
        /// A step (`<bead>.<step>`), or a bead: its running step, else the one that ran last.
        #[arg(value_name = "BEAD|STEP")]
        target: String,
        /// Which attempt (default: the latest).
        #[arg(long)]
        attempt: Option<u32>,
        /// The agent's stderr instead of its stdout.
        #[arg(long)]
        stderr: bool,
        /// The output as the agent wrote it (stream-json for Claude Code), without headers.
        #[arg(long)]
        raw: bool,
        /// Follow the attempt as it runs, then the next attempts, until the bead is closed.
        #[arg(short, long)]
        follow: bool,
    },
    /// What a bead's branch changes against the target branch, from where it left it (as
    /// `git diff <target>...catalyst/<bead>`): a stat, then the patch.
    Diff {
        /// The bead (a step id means its bead).
        bead: String,
    },
    /// A live view: beads with progress bars, running agents, waiting approvals and the latest
    /// events, following the event stream (q or Ctrl-C quits).
    Watch,
    /// Re-read config, prompts and formulas.
    Reload,
    /// Stop the daemon (running agents get the grace period); it answers `status` as
    /// `stopping` meanwhile.
    Shutdown {
        /// Return only once the daemon has stopped.
        #[arg(long)]
        wait: bool,
    },
    /// The workers on other machines that run its agents (`[cluster]`): slots, models, what
    /// each runs, and when it last said it was there.
    Workers,
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The bead's title (or `--title`).
    #[arg(value_name = "TITLE", required_unless_present = "title")]
    pub title_arg: Option<String>,
    /// The bead's title.
    #[arg(long, conflicts_with = "title_arg")]
    pub title: Option<String>,
    /// Read the description from a file (`-` for stdin).
    #[arg(long)]
    pub description_file: Option<PathBuf>,
    /// The description.
    #[arg(long)]
    pub description: Option<String>,
    /// The acceptance criteria.
    #[arg(long)]
    pub acceptance: Option<String>,
    /// The formula to run (default: the workspace's default formula).
    #[arg(long)]
    pub formula: Option<String>,
    /// 0 (highest) to 4.
    #[arg(long)]
    pub priority: Option<u8>,
    /// A label (repeatable).
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// Start only after this bead is merged (repeatable).
    #[arg(long)]
    pub after: Vec<String>,
    /// A formula variable, `KEY=VALUE` (repeatable), kept in the bead's
    /// `metadata.formula_vars`; the formula's `[vars]` check it when the bead is poured.
    #[arg(long = "var", value_name = "KEY=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// Use this id instead of a generated one.
    #[arg(long)]
    pub id: Option<String>,
}

fn read_text(path: &PathBuf) -> Result<String, CtlError> {
    let failed = |source| CtlError::ReadInput {
        path: path.clone(),
        source,
    };
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(failed)?;
        return Ok(text);
    }
    std::fs::read_to_string(path).map_err(failed)
}

impl CtlArgs {
    /// `--workspace`, else the workspace the current folder is in (found as git finds its
    /// repository); `None` when only `--socket` names the daemon.
    fn workspace(&self) -> Option<PathBuf> {
        if let Some(w) = &self.workspace {
            return Some(w.clone());
        }
        if self.socket.is_some() {
            return None;
        }
        let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Some(Paths::discover(&here).unwrap_or(here))
    }

    fn socket(&self) -> PathBuf {
        match (&self.socket, self.workspace()) {
            (Some(s), _) => s.clone(),
            (None, Some(workspace)) => Paths::new(&workspace).socket(),
            (None, None) => Paths::new(std::path::Path::new(".")).socket(),
        }
    }
}

/// Runs one `ctl` command, writing to `out`.
pub async fn run(args: CtlArgs, out: &mut impl Write) -> Result<(), CtlError> {
    let mut client = Client::connect(&args.socket()).await?;
    let method = match &args.command {
        CtlCommand::Events {
            since,
            follow,
            bead,
            types,
        } => {
            let params = SubscribeParams {
                since: Some(since.unwrap_or(0)),
                bead: bead.clone(),
                types: (!types.is_empty()).then(|| types.clone()),
                follow: *follow,
            };
            return events(client, &args.socket(), out, args.json, params).await;
        }
        CtlCommand::Logs {
            target,
            attempt,
            stderr,
            raw,
            follow,
        } => {
            let request = crate::cli::logs::LogsRequest {
                target: target.clone(),
                attempt: *attempt,
                stderr: *stderr,
                raw: *raw,
                follow: *follow,
            };
            return crate::cli::logs::run(client, &args.socket(), request, out).await;
        }
        CtlCommand::Watch => {
            return Ok(crate::cli::live::run(client, &args.socket(), out).await?);
        }
        CtlCommand::Status if !args.json => {
            let status = client.status().await?;
            let recent = recent_events(&mut client, status.seq, STATUS_EVENTS).await?;
            let text = render_status(&status, &recent, Paint::for_stdout());
            out.write_all(text.as_bytes())?;
            return Ok(());
        }
        CtlCommand::Shutdown { wait: true } => {
            client.shutdown().await?;
            writeln!(out, "stopping: running agents get the grace period")?;
            out.flush()?;
            wait_until_gone(&args.socket()).await;
            writeln!(out, "stopped")?;
            return Ok(());
        }
        CtlCommand::Diff { bead } => {
            let workspace = match args.workspace() {
                Some(w) => w,
                None => client.status().await?.workspace,
            };
            return crate::cli::diff::run(&mut client, &workspace, bead, args.json, out).await;
        }
        other => method_for(other)?,
    };
    if args.json {
        let result = client.call(&method).await?;
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&result).unwrap_or_default()
        )?;
        return Ok(());
    }
    let text = render(&mut client, method, Paint::for_stdout()).await?;
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// Waits until the daemon behind `socket` no longer answers a connection: it has stopped.
async fn wait_until_gone(socket: &std::path::Path) {
    while Client::connect(socket).await.is_ok() {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Sends `method` and words its answer for people. The methods that have no words of their
/// own print their answer as the daemon sent it, on one line.
async fn render(client: &mut Client, method: Method, paint: Paint) -> Result<String, ClientError> {
    Ok(match method {
        Method::Ready => render_beads(&client.ready().await?.beads, paint),
        Method::List(p) => render_beads(&client.list(p).await?.beads, paint),
        Method::Show(p) => render_show(&client.show(p).await?, paint),
        Method::Submit(beads) => {
            let submitted = client.submit(beads).await?;
            let ids: Vec<String> = submitted.ids.iter().map(ToString::to_string).collect();
            format!("submitted {}\n", ids.join(" "))
        }
        Method::Workers => crate::render::render_workers(&client.workers().await?, paint),
        Method::Reload => {
            client.reload().await?;
            "reloaded config, prompts and formulas\n".to_owned()
        }
        Method::Shutdown => {
            client.shutdown().await?;
            "stopping: running agents get the grace period\n".to_owned()
        }
        Method::Pause(p) => pause_state(&client.pause(p).await?),
        Method::Resume(p) => pause_state(&client.resume(p).await?),
        other => format!("{}\n", compact(&client.call(&other).await?)),
    })
}

fn pause_state(state: &PauseState) -> String {
    let mut text = if state.paused {
        "dispatching is paused (`catalyst ctl resume` goes on)".to_owned()
    } else {
        "dispatching runs".to_owned()
    };
    if !state.paused_models.is_empty() {
        text.push_str(&format!(
            "; paused models: {}",
            state.paused_models.join(", ")
        ));
    }
    text.push('\n');
    text
}

fn method_for(command: &CtlCommand) -> Result<Method, CtlError> {
    Ok(match command {
        CtlCommand::Status => Method::Status,
        CtlCommand::Ready => Method::Ready,
        CtlCommand::List {
            status,
            steps,
            search,
            offset,
            limit,
        } => Method::List(ListParams {
            status: status.clone(),
            steps: *steps,
            search: search.clone(),
            offset: *offset,
            limit: *limit,
            lane: None,
        }),
        CtlCommand::Show { bead, runs } => Method::Show(ShowParams {
            id: bead.clone(),
            runs: *runs,
        }),
        CtlCommand::Submit(s) => submit_method(s)?,
        CtlCommand::Update { .. } => update_method(command)?,
        CtlCommand::Comment { bead, text, author } => Method::Comment(CommentParams {
            id: bead.clone(),
            text: text.clone(),
            author: author.clone(),
        }),
        CtlCommand::Close { bead, reason } => Method::Close(CloseParams {
            id: bead.clone(),
            reason: reason.clone(),
        }),
        CtlCommand::Reopen { bead } => Method::Reopen(IdParams { id: bead.clone() }),
        CtlCommand::Approve { bead, comment } => Method::Approve(ApproveParams {
            id: bead.clone(),
            comment: comment.clone(),
        }),
        CtlCommand::Reject { bead, reason } => Method::Reject(RejectParams {
            id: bead.clone(),
            reason: reason.clone(),
        }),
        CtlCommand::Retry { bead } => Method::Retry(IdParams { id: bead.clone() }),
        CtlCommand::Cancel { bead, reason } => Method::Cancel(CloseParams {
            id: bead.clone(),
            reason: reason.clone(),
        }),
        CtlCommand::Pause { model } => Method::Pause(PauseParams {
            model: model.clone(),
        }),
        CtlCommand::Resume { model } => Method::Resume(PauseParams {
            model: model.clone(),
        }),
        CtlCommand::Reload => Method::Reload,
        CtlCommand::Shutdown { .. } => Method::Shutdown,
        CtlCommand::Workers => Method::Workers,
        CtlCommand::Events { .. }
        | CtlCommand::Logs { .. }
        | CtlCommand::Watch
        | CtlCommand::Diff { .. } => {
            unreachable!("handled by run")
        }
    })
}

/// `--var KEY=VALUE`: the value may hold `=` and be empty, the key may not.
fn parse_var(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.to_owned(), value.to_owned())),
        Some(_) => Err("the variable's name is empty; expected KEY=VALUE".into()),
        None => Err("expected KEY=VALUE, e.g. `--var test_command=cargo test`".into()),
    }
}

/// `metadata.formula_vars` from the `--var`s, or no metadata without them.
fn formula_vars(vars: &[(String, String)]) -> Result<Option<JsonMap>, CtlError> {
    if vars.is_empty() {
        return Ok(None);
    }
    let mut values = JsonMap::new();
    for (key, value) in vars {
        if values.insert(key.clone(), value.as_str().into()).is_some() {
            return Err(CtlError::Usage(format!("`--var {key}=…` is given twice")));
        }
    }
    let mut metadata = JsonMap::new();
    metadata.insert(VARS_KEY.into(), values.into());
    Ok(Some(metadata))
}

fn submit_method(s: &SubmitArgs) -> Result<Method, CtlError> {
    let description = match (&s.description_file, &s.description) {
        (Some(path), _) => Some(read_text(path)?),
        (None, d) => d.clone(),
    };
    Ok(Method::Submit(vec![BeadInput {
        id: s.id.clone(),
        title: s
            .title
            .clone()
            .or_else(|| s.title_arg.clone())
            .unwrap_or_default(),
        description,
        acceptance_criteria: s.acceptance.clone(),
        priority: s.priority,
        labels: s.labels.clone(),
        formula: s.formula.clone(),
        after: s.after.clone(),
        metadata: formula_vars(&s.vars)?,
        ..Default::default()
    }]))
}

fn update_method(command: &CtlCommand) -> Result<Method, CtlError> {
    let CtlCommand::Update {
        bead,
        title,
        priority,
        description_file,
        acceptance,
        labels,
        drop_after,
    } = command
    else {
        unreachable!("called for `update` only")
    };
    let description = description_file.as_ref().map(read_text).transpose()?;
    Ok(Method::Update(Box::new(UpdateParams {
        id: bead.clone(),
        set: BeadPatch {
            title: title.clone(),
            priority: *priority,
            description: description.map(Some),
            acceptance_criteria: acceptance.clone().map(Some),
            labels: (!labels.is_empty()).then(|| labels.clone()),
            drop_after: drop_after.clone(),
            ..Default::default()
        },
    })))
}

/// Prints the event stream: for people one line per event, for scripts each event as JSON
/// with its keys in alphabetical order.
/// `ctl events`: the events `params` asks for. Following (`-f`), a stream the daemon ends
/// (it stopped) is taken up again once it answers at `socket` again, from the event after the
/// last one printed, so a restart loses and repeats nothing.
async fn events(
    mut client: Client,
    socket: &std::path::Path,
    out: &mut impl Write,
    json: bool,
    mut params: SubscribeParams,
) -> Result<(), CtlError> {
    let paint = Paint::for_stdout();
    loop {
        client.subscribe(params.clone()).await?;
        loop {
            let line = match client.next_event().await {
                Ok(Some(line)) => line,
                // The daemon went away mid-stream: as an end, for a follower to take up again.
                Ok(None) => break,
                Err(ClientError::Io { .. }) if params.follow => break,
                Err(e) => return Err(e.into()),
            };
            let StreamLine::Event(event) = line else {
                break;
            };
            params.since = Some(event.seq);
            if json {
                let value = serde_json::to_value(&event)
                    .map_err(|e| ClientError::Protocol(format!("an event: {e}")))?;
                writeln!(out, "{value}")?;
            } else {
                writeln!(out, "{}", render_event_with(&event, paint))?;
            }
            out.flush()?;
        }
        if !params.follow {
            return Ok(());
        }
        eprintln!("catalyst: the daemon stopped; following again once it is back");
        client = reconnect(socket).await;
    }
}

/// A connection to the daemon at `socket`, once it answers again.
async fn reconnect(socket: &std::path::Path) -> Client {
    loop {
        if let Ok(client) = Client::connect(socket).await {
            return client;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// How many of the last events `ctl status` shows.
const STATUS_EVENTS: u64 = 10;

/// The last `count` events up to `seq`, oldest first.
pub(crate) async fn recent_events(
    client: &mut Client,
    seq: u64,
    count: u64,
) -> Result<Vec<crate::domain::event::Event>, ClientError> {
    client
        .subscribe(SubscribeParams {
            since: Some(seq.saturating_sub(count)),
            bead: None,
            types: None,
            follow: false,
        })
        .await?;
    let mut events = Vec::new();
    while let Some(StreamLine::Event(event)) = client.next_event().await? {
        events.push(*event);
    }
    Ok(events)
}
