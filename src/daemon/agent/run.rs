//! Running one agent to its end: prepare the run folder, spawn, watch the clocks, stop the
//! group, and put the report together.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::events::{Parsed, StderrScanner, StdoutParser, TurnEnd};
use super::group::{signal_group, GroupGuard};
use super::output::{pump, CappedFile, StreamStats};
use super::spawn::{self, ChildSetup};
use super::{NetPlan, RunSpec, SandboxSpec, PROMPT_FILE, STDERR_FILE, STDOUT_FILE};
use crate::daemon::cgroup::AttemptGroup;
use crate::daemon::clock;
use crate::daemon::netproxy::{self, NetGuard, Route};
use crate::domain::agent::conversation::{user_message, Conversation, Reply};
use crate::domain::agent::profile::{OutputFormat, ProfileError, StdinMode, Vars};
use crate::domain::agent::report::{Exit, RunReport};
use crate::domain::agent::sandbox::{bwrap_args, Confinement, SANDBOX_NET_COMMAND};
use crate::domain::unavailable::{Hindrance, Unavailable};

/// How long the output readers may go on after the group is killed. Killed processes close
/// their pipes at once; only a process that left the group can keep one open, and its output
/// is not waited for longer than this.
const MIN_DRAIN: Duration = Duration::from_secs(2);

/// An agent that has been spawned.
struct Running {
    child: Child,
    pgid: Pid,
    group: GroupGuard,
    stdin: Option<JoinHandle<()>>,
    stdout: JoinHandle<(StreamStats, StdoutParser)>,
    stderr: JoinHandle<(StreamStats, StderrScanner)>,
    activity: Arc<Notify>,
    drain: CancellationToken,
    /// Fired by the stdout parser when the output shows a failure no retry fixes.
    hopeless: CancellationToken,
    /// The outside end of a `model-only` network, stopped when the run ends.
    net: Option<NetGuard>,
    /// The attempt's control group (its process limit); dropped after the group is killed.
    limit: Option<AttemptGroup>,
}

/// Why supervision ended.
enum Ended {
    Exited(std::io::Result<ExitStatus>),
    Stopped(Exit),
}

pub(super) async fn run(spec: RunSpec, cancel: CancellationToken) -> RunReport {
    let started = crate::daemon::clock::now();
    let clock = Instant::now();
    if cancel.is_cancelled() {
        // Shutting down already: starting an agent only to stop it would waste its grace.
        return RunReport::empty(Exit::Cancelled, clock::now());
    }
    let mut report = match start(&spec).await {
        Ok(running) => supervise(running, &spec, cancel).await,
        Err(reason) => {
            tracing::warn!(worktree = %spec.worktree.display(), %reason, "cannot start agent");
            let mut report = RunReport::empty(Exit::SpawnFailed(reason.to_string()), clock::now());
            report.unavailable = Some(Hindrance::new(reason.cause(), reason.to_string()));
            report
        }
    };
    report.started = started;
    report.duration_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
    report
}

/// Writes the prompt, opens the output files and spawns the agent with its readers.
async fn start(spec: &RunSpec) -> Result<Running, StartError> {
    let prepared = prepare(spec).await?;
    let env = agent_env(spec);
    let mut net = None;
    let argv = match &spec.sandbox {
        Some(sandbox) => {
            let mut inner = prepared.argv.clone();
            // Looked up here as outside, so that an agent CLI that is not installed is a
            // paused profile with its name, not an exit code 127 from inside the sandbox that
            // costs an attempt.
            if let Some(first) = inner.first_mut() {
                let found = resolve(first, &env)
                    .ok_or_else(|| StartError::NotFound(first.to_string_lossy().into_owned()))?;
                *first = found.into_os_string();
            }
            if let Some(plan) = &sandbox.net {
                let (guard, through) = network(plan, &spec.run_dir, inner)?;
                net = Some(guard);
                inner = through;
            }
            let net_sockets = net.as_ref().and_then(NetGuard::outside_dir);
            confined(sandbox, spec, net_sockets, &inner)
        }
        None => prepared.argv.clone(),
    };
    let Some((program_arg, args)) = argv.split_first() else {
        return Err(ProfileError::EmptyCommand.into());
    };
    let program = program_arg.to_string_lossy().into_owned();
    let piped = prepared.stdin != StdinMode::Null;
    let limit = spec.max_processes.and_then(spawn::process_limit);
    let mut setup = ChildSetup::default().die_with_daemon().nice(spec.nice);
    if let Some(group) = &limit {
        setup = setup.join(group).map_err(|source| StartError::Spawn {
            program: program.clone(),
            source,
        })?;
    }
    let mut command = spawn::process(program_arg, setup, piped);
    command.envs(env).args(args).current_dir(&spec.worktree);
    let child = spawn::spawn(command).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => StartError::NotFound(program.clone()),
        _ => StartError::Spawn {
            program: program.clone(),
            source: e,
        },
    })?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| StartError::NoPid(program.clone()))?;
    let pgid = Pid::from_raw(pid);
    let group = GroupGuard::new(pgid);
    tracing::info!(pid, program = %program, model = %spec.model, "agent started");
    // A daemon that dies now leaves this group running; the next start reads the pid file
    // and kills the group before it re-runs the step. Not fsynced: only a power cut loses it,
    // and that kills the group too.
    if let Err(e) = crate::daemon::fsutil::write_replace(
        &spec.run_dir.join(super::PID_FILE),
        format!("{pid}\n").as_bytes(),
    ) {
        tracing::warn!(error = %e, "cannot write the agent's pid file");
    }
    let mut running = attach(child, pgid, group, spec, prepared)?;
    running.net = net;
    running.limit = limit;
    Ok(running)
}

/// What the agent's environment adds to the daemon's, in order (a later value of a name
/// wins): the profile's, the step's, the proxy's for a `model-only` network.
fn agent_env(spec: &RunSpec) -> Vec<(OsString, OsString)> {
    let model_only = spec.sandbox.as_ref().is_some_and(|s| s.net.is_some());
    let pair = |(k, v): (&str, &str)| (OsString::from(k), OsString::from(v));
    let proxy = model_only.then(proxy_env).into_iter().flatten();
    spec.profile
        .env
        .iter()
        .map(|(k, v)| pair((k, v)))
        .chain(spec.env.iter().map(|(k, v)| pair((k, v))))
        .chain(proxy.map(|(k, v)| (OsString::from(k), OsString::from(v))))
        .collect()
}

/// The program the agent's command names, as `execvp` would find it with the agent's `PATH`.
fn resolve(program: &OsStr, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    let set = env.iter().rev().find(|(k, _)| k == "PATH");
    let path = set
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"));
    crate::daemon::fsutil::find_program_in(program, path.as_deref())
}

/// Where the HTTPS proxy listens inside an attempt's network namespace.
const PROXY_INSIDE: &str = "127.0.0.1:3128";

/// The environment that sends the agent's HTTPS through the proxy; loopback (a forwarded
/// model API) goes direct.
fn proxy_env() -> [(&'static str, String); 5] {
    let proxy = format!("http://{PROXY_INSIDE}");
    let direct = "localhost,127.0.0.1,::1".to_owned();
    [
        ("HTTPS_PROXY", proxy.clone()),
        ("https_proxy", proxy.clone()),
        ("ALL_PROXY", proxy),
        ("NO_PROXY", direct.clone()),
        ("no_proxy", direct),
    ]
}

/// Starts the outside end of a `model-only` network and returns it with `argv` run through
/// the forwarder's `__sandbox-net`, which carries the loopback ports inside to it.
fn network(
    plan: &NetPlan,
    run_dir: &Path,
    argv: Vec<OsString>,
) -> Result<(NetGuard, Vec<OsString>), StartError> {
    let mut routes = vec![Route::Proxy(plan.hosts.clone())];
    routes.extend(plan.forwards.iter().map(|a| Route::Forward(*a)));
    let dir = run_dir.join(NET_DIR);
    let (guard, sockets) =
        netproxy::start(&dir, routes, plan.refused.clone()).map_err(|source| {
            StartError::Create {
                path: dir.clone(),
                source,
            }
        })?;
    let listens = std::iter::once(PROXY_INSIDE.to_owned())
        .chain(plan.forwards.iter().map(ToString::to_string));
    let mut through: Vec<OsString> =
        vec![plan.forwarder.clone().into(), SANDBOX_NET_COMMAND.into()];
    for (listen, socket) in listens.zip(&sockets) {
        through.push("--listen".into());
        let mut spec = OsString::from(format!("{listen}="));
        spec.push(socket);
        through.push(spec);
    }
    through.push("--".into());
    through.extend(argv);
    Ok((guard, through))
}

/// The sockets of an attempt's network, in its run folder.
const NET_DIR: &str = "net";

/// `argv` run inside the attempt's sandbox: `bwrap`, its arguments, then `argv`.
fn confined(
    sandbox: &SandboxSpec,
    spec: &RunSpec,
    net_sockets: Option<&Path>,
    argv: &[OsString],
) -> Vec<OsString> {
    let mut out = vec![sandbox.bwrap.clone().into_os_string()];
    // A secret file that is gone needs no cover, and bwrap could not make one on the
    // read-only root.
    let hidden: Vec<PathBuf> = sandbox
        .hidden
        .iter()
        .filter(|p| p.exists())
        .cloned()
        .collect();
    out.extend(bwrap_args(&Confinement {
        worktree: &spec.worktree,
        run_dir: &spec.run_dir,
        state: &sandbox.state,
        socket: sandbox.socket.as_deref(),
        net_sockets,
        git: sandbox.git.as_ref(),
        writable: &sandbox.writable,
        readable: &sandbox.readable,
        hidden: &hidden,
        network: sandbox.network,
    }));
    out.extend(argv.iter().cloned());
    out
}

/// What an agent's start needs ready before it spawns.
struct Prepared {
    argv: Vec<OsString>,
    stdin: StdinMode,
    stdout: CappedFile,
    stderr: CappedFile,
}

/// Checks the worktree, makes the run folder, writes the prompt, builds the command line and
/// opens the output files.
async fn prepare(spec: &RunSpec) -> Result<Prepared, StartError> {
    if !spec.worktree.is_dir() {
        return Err(StartError::NoWorktree(spec.worktree.clone()));
    }
    // In place: a folder and three small files, each cheaper than a hand-off to a blocking
    // thread and back.
    let run_dir = &spec.run_dir;
    std::fs::create_dir_all(run_dir).map_err(|source| StartError::RunFolder {
        path: run_dir.clone(),
        source,
    })?;
    let prompt_file = run_dir.join(PROMPT_FILE);
    crate::daemon::fsutil::write_input(&prompt_file, spec.prompt.as_bytes()).map_err(|source| {
        StartError::Write {
            path: prompt_file.clone(),
            source,
        }
    })?;

    let argv = spec.profile.argv(&Vars {
        model: &spec.model,
        settings: spec.settings_path.as_deref(),
        worktree: &spec.worktree,
        run_dir,
        prompt_file: &prompt_file,
        prompt: &spec.prompt,
    })?;
    if argv.is_empty() {
        return Err(ProfileError::EmptyCommand.into());
    }
    Ok(Prepared {
        argv,
        stdin: spec.profile.stdin,
        stdout: open_capped(&run_dir.join(STDOUT_FILE), spec.output_cap)?,
        stderr: open_capped(&run_dir.join(STDERR_FILE), spec.output_cap)?,
    })
}

/// Feeds the prompt to a spawned agent (when the profile says so), holds its conversation
/// (when it has one) and starts the readers of its output.
fn attach(
    mut child: Child,
    pgid: Pid,
    group: GroupGuard,
    spec: &RunSpec,
    prepared: Prepared,
) -> Result<Running, StartError> {
    let hopeless = CancellationToken::new();
    let mut parser = StdoutParser::new(spec.profile.format, spec.output_cap, hopeless.clone());
    let pipe = child.stdin.take();
    let stdin = match (pipe, prepared.stdin) {
        (Some(mut pipe), StdinMode::Prompt) => {
            let prompt = spec.prompt.clone();
            Some(tokio::spawn(async move {
                // An agent may exit without reading all of its stdin; that is its business.
                if let Err(e) = pipe.write_all(prompt.as_bytes()).await {
                    tracing::debug!(error = %e, "agent did not read the whole prompt");
                }
            }))
        }
        (Some(pipe), StdinMode::Conversation) => {
            let (turns, ends) = tokio::sync::mpsc::unbounded_channel();
            parser = parser.with_turns(turns);
            let talk = Talk {
                conversation: spec.conversation.clone(),
                run_dir: spec.run_dir.clone(),
            };
            Some(tokio::spawn(talk.hold(pipe, spec.prompt.clone(), ends)))
        }
        _ => None,
    };
    let activity = Arc::new(Notify::new());
    let drain = CancellationToken::new();
    let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(StartError::NoPipes);
    };
    let stdout = tokio::spawn(pump(
        out,
        prepared.stdout,
        parser,
        activity.clone(),
        drain.clone(),
    ));
    let stderr = tokio::spawn(pump(
        err,
        prepared.stderr,
        StderrScanner::new(),
        activity.clone(),
        drain.clone(),
    ));
    Ok(Running {
        child,
        pgid,
        group,
        stdin,
        stdout,
        stderr,
        activity,
        drain,
        hopeless,
        net: None,
        limit: None,
    })
}

/// The daemon's end of a [`StdinMode::Conversation`]: the prompt as the first user message,
/// then a reply to each `result` (see [`Conversation`]).
struct Talk {
    /// `None`: every answer stands; stdin is closed at the first `result`.
    conversation: Option<Conversation>,
    /// The run folder, whose tool log records a message sent back as an `agent.tool` event.
    run_dir: PathBuf,
}

impl Talk {
    async fn hold(
        mut self,
        mut pipe: ChildStdin,
        prompt: String,
        mut ends: tokio::sync::mpsc::UnboundedReceiver<TurnEnd>,
    ) {
        if let Err(e) = pipe.write_all(user_message(&prompt).as_bytes()).await {
            tracing::debug!(error = %e, "agent did not read the whole prompt");
            return;
        }
        while let Some(end) = ends.recv().await {
            let reply = match &mut self.conversation {
                Some(c) => c.on_result(end.message.as_deref(), end.is_error),
                None => Reply::Close,
            };
            let Reply::SendBack { line, record } = reply else {
                break;
            };
            if let Err(e) = crate::daemon::rundir::append_tool_record(&self.run_dir, &record) {
                tracing::warn!(error = %e, "cannot log the message sent back to the agent");
            }
            if let Err(e) = pipe.write_all(line.as_bytes()).await {
                tracing::debug!(error = %e, "agent did not read the message sent back");
                break;
            }
        }
        // Dropping the pipe closes the agent's stdin: it ends with its last answer.
    }
}

/// Why an agent could not start. The text is the run's `spawn_failed` exit, in the journal.
#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    #[error("worktree `{}` is not a directory", .0.display())]
    NoWorktree(PathBuf),
    #[error("cannot create run folder `{}`: {source}", path.display())]
    RunFolder { path: PathBuf, source: io::Error },
    #[error("cannot write `{}`: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot create `{}`: {source}", path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("cannot run `{0}`: not found (is it installed and on PATH?)")]
    NotFound(String),
    #[error("cannot run `{program}`: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("`{0}` exited before its pid could be read")]
    NoPid(String),
    #[error("the agent's output pipes were not set up")]
    NoPipes,
}

impl StartError {
    /// Which failure it is: the agent's command (not installed, not runnable, a broken
    /// profile) or the daemon's own preparation (the run folder, the worktree).
    fn cause(&self) -> Unavailable {
        match self {
            StartError::Profile(_)
            | StartError::NotFound(_)
            | StartError::Spawn { .. }
            | StartError::NoPid(_) => Unavailable::Config,
            StartError::NoWorktree(_)
            | StartError::RunFolder { .. }
            | StartError::Write { .. }
            | StartError::Create { .. }
            | StartError::NoPipes => Unavailable::Preparation,
        }
    }
}

fn open_capped(path: &Path, cap: u64) -> Result<CappedFile, StartError> {
    CappedFile::create(path, cap).map_err(|source| StartError::Create {
        path: path.to_owned(),
        source,
    })
}

/// Waits for the agent to exit, or stops it on a timeout, a stall or cancellation; then kills
/// what is left of its group and collects its output.
async fn supervise(mut r: Running, spec: &RunSpec, cancel: CancellationToken) -> RunReport {
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let mut stall_at = tokio::time::Instant::now() + spec.stall_timeout;
    let ended = loop {
        tokio::select! {
            biased;
            status = r.child.wait() => break Ended::Exited(status),
            () = cancel.cancelled() => break Ended::Stopped(Exit::Cancelled),
            () = r.hopeless.cancelled() => break Ended::Stopped(Exit::Hopeless),
            () = tokio::time::sleep_until(deadline) => {
                break Ended::Stopped(Exit::TimedOut { after_ms: millis(spec.timeout) });
            }
            () = tokio::time::sleep_until(stall_at) => {
                break Ended::Stopped(Exit::Stalled { after_ms: millis(spec.stall_timeout) });
            }
            () = r.activity.notified() => {
                stall_at = tokio::time::Instant::now() + spec.stall_timeout;
            }
        }
    };
    let exit = match ended {
        Ended::Exited(Ok(status)) => exit_of(status, spec.sandbox.is_some()),
        Ended::Exited(Err(e)) => Exit::WaitFailed(e.to_string()),
        Ended::Stopped(why) => {
            tracing::info!(pgid = r.pgid.as_raw(), reason = %why, "stopping agent");
            stop(&mut r.child, r.pgid, spec.grace).await;
            why
        }
    };
    // The leader is gone, but what it started may not be: a background server or test runner
    // would keep the worktree busy (and the output pipes open) into the next step. The group id
    // stays reserved while any member lives; once none does, this finds no group (ESRCH).
    r.group.kill();
    if let Some(stdin) = r.stdin.take() {
        stdin.abort();
    }
    let drain = spec.grace.max(MIN_DRAIN);
    let stop_readers = r.drain.clone();
    let (stdout, stderr) = (r.stdout, r.stderr);
    let readers = async move { tokio::join!(stdout, stderr) };
    tokio::pin!(readers);
    let (out, err) = match tokio::time::timeout(drain, &mut readers).await {
        Ok(done) => done,
        Err(_) => {
            tracing::warn!(
                pgid = r.pgid.as_raw(),
                "agent output still open after its group was killed; a process left the group"
            );
            stop_readers.cancel();
            readers.await
        }
    };
    let pid = u32::try_from(r.pgid.as_raw()).unwrap_or(0);
    report(spec, exit, pid, out, err).await
}

/// SIGTERM to the group, `grace` to exit, then SIGKILL.
async fn stop(child: &mut Child, pgid: Pid, grace: Duration) {
    if let Err(e) = signal_group(pgid, Signal::SIGTERM) {
        tracing::warn!(pgid = pgid.as_raw(), error = %e, "cannot send SIGTERM to the agent's group");
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        tracing::info!(
            pgid = pgid.as_raw(),
            "agent ignored SIGTERM; sending SIGKILL"
        );
        if let Err(e) = signal_group(pgid, Signal::SIGKILL) {
            tracing::warn!(pgid = pgid.as_raw(), error = %e, "cannot send SIGKILL to the agent's group");
        }
        if let Err(e) = child.wait().await {
            tracing::warn!(pgid = pgid.as_raw(), error = %e, "cannot reap the agent");
        }
    }
}

type Reader<T> = Result<(StreamStats, T), tokio::task::JoinError>;

async fn report(
    spec: &RunSpec,
    exit: Exit,
    pid: u32,
    out: Reader<StdoutParser>,
    err: Reader<StderrScanner>,
) -> RunReport {
    let (out_stats, parser) = match out {
        Ok((stats, parser)) => (stats, Some(parser)),
        Err(e) => {
            tracing::error!(error = %e, "agent stdout reader failed");
            (StreamStats::default(), None)
        }
    };
    let (err_stats, stderr_limit, stderr_unavailable) = match err {
        Ok((stats, scanner)) => (stats, scanner.usage_limit, scanner.unavailable),
        Err(e) => {
            tracing::error!(error = %e, "agent stderr reader failed");
            (StreamStats::default(), None, None)
        }
    };
    let (mut parsed, tail) = parser.map(StdoutParser::finish).unwrap_or_default();
    if spec.profile.format == OutputFormat::Text {
        parsed.final_message = text_message(spec, out_stats, tail).await;
    }
    // A CLI that gave up on its own (a non-zero exit or a reported error) may have said why on
    // stderr only; a run that was killed or exited 0 is not judged by its stderr.
    let gave_up = matches!(exit, Exit::Code(c) if c != 0) || parsed.is_error;
    if parsed.usage_limit.is_none() && gave_up {
        parsed.usage_limit = stderr_limit;
    }
    if parsed.unavailable.is_none() && gave_up && parsed.final_message.is_none() {
        parsed.unavailable = stderr_unavailable;
    }
    let Parsed {
        final_message,
        is_error,
        error,
        usage_limit,
        unavailable,
        cost_usd,
        usage,
    } = parsed;
    RunReport {
        pid,
        final_message,
        is_error,
        error,
        usage_limit,
        unavailable,
        cost_usd,
        usage,
        stdout_bytes: out_stats.total,
        stderr_bytes: err_stats.total,
        truncated: out_stats.truncated || err_stats.truncated,
        // `run` sets the clock fields.
        ..RunReport::empty(exit, clock::now())
    }
}

/// A `text` agent's final message: its whole stdout, read back from the file, or the last
/// [`super::events::TEXT_TAIL`] bytes when the file was cut at the cap (a result block is at
/// the end). `None` when it printed nothing.
async fn text_message(
    spec: &RunSpec,
    stats: StreamStats,
    tail: Option<super::output::Tail>,
) -> Option<String> {
    let text = match tail {
        Some(tail) if stats.truncated => tail.into_text(),
        _ => {
            let path = spec.run_dir.join(STDOUT_FILE);
            match tokio::fs::read(&path).await {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read back agent output");
                    return None;
                }
            }
        }
    };
    (!text.trim().is_empty()).then_some(text)
}

/// How the agent ended. Inside the sandbox the agent is not bubblewrap's process but its
/// child, and bubblewrap exits with 128 plus the signal's number when a signal ended the agent,
/// as a shell does; that code is read back as the signal.
fn exit_of(status: ExitStatus, sandboxed: bool) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) if sandboxed && code > 128 => {
            match nix::sys::signal::Signal::try_from(code - 128) {
                Ok(signal) => Exit::Signal(signal as i32),
                Err(_) => Exit::Code(code),
            }
        }
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        // Neither a code nor a signal cannot happen for a reaped process on Unix.
        (None, None) => Exit::WaitFailed(format!("unknown exit status {status}")),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
