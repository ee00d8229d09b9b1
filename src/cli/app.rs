//! `catalyst`'s command tree: its flags, what each command calls in the library, and its exit
//! code, decided in one place ([`main`]). The `catalyst` binary is this `main`.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{CommandFactory, Parser, Subcommand};

use crate::cli::ctl::CtlArgs;
use crate::domain::agent::sandbox::SANDBOX_NET_COMMAND;
use crate::domain::model::Role;
use crate::domain::prompt::PromptSet;

#[derive(Parser)]
#[command(
    name = "catalyst",
    version,
    about = "Drive coding agents through workflows"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Talk to the running daemon (`catalyst ctl status`, `submit`, `events -f`, …).
    Ctl(Box<CtlArgs>),
    /// One bead through refine, implement, review (rejected once), fix, review and merge, in a
    /// temporary repository with stub agents.
    Demo {
        /// Keep the temporary repository.
        #[arg(long)]
        keep: bool,
    },
    /// Work with formulas (`*.formula.toml`).
    #[command(subcommand)]
    Formula(FormulaCmd),
    /// Work with agents' STEP-RESULT blocks.
    #[command(subcommand)]
    Result(ResultCmd),
    /// Claude Code's hook handler: reads the hook's JSON on stdin, asks the daemon named by
    /// `CATALYST_SOCKET` about the step `CATALYST_STEP`, and answers in Claude Code's format.
    /// A tool call is denied when the daemon cannot be asked. Run by agents, not people.
    #[command(hide = true)]
    Hook {
        /// The hook event Claude Code runs it for.
        #[arg(value_enum)]
        event: crate::cli::hook::HookEvent,
    },
    /// Run agent attempts for a daemon on another machine (`[cluster]` in its config): take
    /// them from NATS JetStream, at most `--slots` at once, in a clone of the shared git
    /// remote under `--workdir`, and send each one's end and commit back.
    Worker(Box<WorkerArgs>),
    /// Print the public key of the cluster key whose seed is in FILE, making FILE (readable
    /// by its owner only) with a new key when it does not exist: for a worker's `--key-file`
    /// (the daemon's `[cluster] workers` lists the key) or the daemon's `[cluster] key_file`
    /// (workers take it as `--daemon-key`).
    ClusterKey {
        /// The seed file.
        file: PathBuf,
    },
    /// Set up a repository for catalystd: `.catalyst/config.toml`, `.git/info/exclude`, and
    /// which agent CLIs are on PATH.
    Init {
        /// The repository (default: the current folder).
        dir: Option<PathBuf>,
        /// Also copy the built-in prompts and formulas into `.catalyst/` for editing.
        #[arg(long)]
        with_prompts: bool,
    },
    /// Run catalystd as a systemd or launchd service.
    #[command(subcommand)]
    Service(ServiceCmd),
    /// Print a shell completion script (`catalyst completions bash > ...`).
    Completions {
        /// The shell the script is for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Add the beads of a beads export file (`bd export`'s JSONL; `-` for stdin) to the store:
    /// through the daemon when it runs, on the store directly when it does not.
    Import {
        /// The export file (`-`: stdin).
        file: PathBuf,
        /// The workspace (default: the current folder).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// Write every bead of the store as beads export lines (to FILE, or stdout).
    Export {
        /// The file to write (default, or `-`: stdout).
        file: Option<PathBuf>,
        /// The workspace (default: the current folder).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// Print a man page (`catalyst(1)` or `catalystd(1)`), or write them all into a folder.
    Man {
        /// The page to print.
        #[arg(value_enum, default_value = "catalyst")]
        page: ManPage,
        /// Write `catalyst.1`, one `catalyst-<command>.1` per subcommand and `catalystd.1`
        /// into this folder instead (e.g. `~/.local/share/man/man1`).
        #[arg(long, conflicts_with = "page")]
        dir: Option<PathBuf>,
    },
}

/// `catalyst worker`'s flags.
#[derive(clap::Args, Debug)]
struct WorkerArgs {
    /// NATS servers (`tls://host:4222`; `nats://` on this machine), repeated or separated
    /// by commas.
    #[arg(long, required = true, value_delimiter = ',')]
    nats: Vec<String>,
    /// A file holding the token the NATS servers ask for (the daemon's `[cluster]
    /// token_file`), so it is not on the command line.
    #[arg(long, group = "nats_login")]
    nats_token_file: Option<PathBuf>,
    /// A NATS credentials file (`.creds`) to log in with.
    #[arg(long, group = "nats_login")]
    nats_creds: Option<PathBuf>,
    /// A file holding the seed of the worker's NATS nkey user (`SU…`) to log in with.
    #[arg(long, group = "nats_login")]
    nats_nkey: Option<PathBuf>,
    /// CA certificates (PEM) the servers' TLS certificates are checked against, besides
    /// the system's.
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// Speak plain `nats://` to servers off this machine (orders and ends then cross the
    /// network in clear).
    #[arg(long)]
    insecure: bool,
    /// The daemon's public key (`U…`, which it logs at start): only orders and cancels
    /// signed with it are taken.
    #[arg(long, required = true)]
    daemon_key: String,
    /// The seed file of the worker's own key, which signs its leases and ends (made when
    /// missing; the daemon's `[cluster] workers` lists its public key under `--name`).
    #[arg(long, required = true)]
    key_file: PathBuf,
    /// A TOML file whose `[profiles.<name>]` tables (as in the daemon's config) are the
    /// profiles orders may name besides the built-in `claude` and `codex`.
    #[arg(long)]
    profiles: Option<PathBuf>,
    /// Let a profile with `sandbox = "none"` run its agents unconfined.
    #[arg(long)]
    allow_unconfined: bool,
    /// The git repository the daemon and its workers share (its `[cluster] remote`).
    #[arg(long)]
    repo: String,
    /// The folder the worker keeps its clone, worktrees and run folders in.
    #[arg(long)]
    workdir: PathBuf,
    /// Attempts run at once.
    #[arg(long, default_value_t = 1)]
    slots: usize,
    /// The models it takes attempts of, separated by commas (default: every model).
    #[arg(long, value_delimiter = ',')]
    models: Vec<String>,
    /// Its name in `ctl workers`, the events and the daemon's `[cluster] workers`: letters,
    /// digits, `-` or `_` (default: the host name).
    #[arg(long)]
    name: Option<String>,
    /// The daemon's `[cluster] name`.
    #[arg(long, default_value = "catalyst")]
    cluster_name: String,
}

/// The man pages `catalyst man` prints.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ManPage {
    /// The command line.
    Catalyst,
    /// The daemon.
    Catalystd,
}

#[derive(Subcommand)]
enum ServiceCmd {
    /// Write the service file for this platform (systemd unit or launchd agent) and print the
    /// command that enables it.
    Install(ServiceArgs),
    /// Remove the service file (refused while the service is enabled).
    Uninstall(ServiceArgs),
}

#[derive(clap::Args)]
struct ServiceArgs {
    /// The workspace the daemon runs on (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// A per-user service (`systemctl --user`) instead of the system template unit.
    #[arg(long)]
    user: bool,
    /// systemd or launchd (default: launchd on macOS, systemd elsewhere).
    #[arg(long, value_enum)]
    platform: Option<crate::cli::service::Platform>,
    /// The catalystd binary (default: next to this one, else on PATH).
    #[arg(long)]
    catalystd: Option<PathBuf>,
    /// Write the file into this folder instead of the service manager's.
    #[arg(long)]
    unit_dir: Option<PathBuf>,
    /// The user a system service runs as (default: the invoking user, `$SUDO_USER` under sudo).
    #[arg(long)]
    run_as: Option<String>,
}

impl ServiceArgs {
    fn spec(&self) -> anyhow::Result<crate::cli::service::Spec> {
        Ok(crate::cli::service::Spec::resolve(
            self.platform,
            self.user,
            self.workspace.as_deref(),
            self.catalystd.as_deref(),
            self.unit_dir.as_deref(),
            self.run_as.as_deref(),
        )?)
    }
}

#[derive(Subcommand)]
enum FormulaCmd {
    /// Check formulas: prints one `file: step: problem` line per problem and exits 1 if any.
    Check {
        /// Formula files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// A prompts file whose templates formulas may name (the built-in prompts otherwise).
        #[arg(long)]
        prompts: Option<PathBuf>,
    },
    /// Print the molecule a workflow pours, as a tree of steps, with its expansions and the
    /// expansions and aspects given applied: the workspace's formulas (found from the current
    /// folder, or --workspace), else the built-in ones.
    #[command(visible_alias = "pour")]
    Show {
        /// The formula's name.
        name: String,
        /// A variable's value, as `NAME=VALUE` (repeatable).
        #[arg(long = "var", value_parser = parse_var)]
        vars: Vec<(String, String)>,
        /// Replace a step by an expansion's chain, as `STEP=EXPANSION` (repeatable, in order,
        /// before the aspects).
        #[arg(long = "expand", value_parser = parse_var)]
        expand: Vec<(String, String)>,
        /// An aspect formula to apply (repeatable, in order).
        #[arg(long = "aspect")]
        aspects: Vec<String>,
        /// The workspace whose formulas to read.
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
}

/// `NAME=VALUE`.
fn parse_var(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("`{text}` is not NAME=VALUE"))
}

#[derive(Subcommand)]
enum ResultCmd {
    /// Parse an agent's final message from stdin and print the result as JSON. A malformed
    /// block prints the reason on stderr and exits 1.
    Parse {
        /// The step's role (a review needs a VERDICT).
        #[arg(long, value_parser = parse_role)]
        role: Option<Role>,
    },
}

fn parse_role(s: &str) -> Result<Role, String> {
    Role::parse(s).ok_or_else(|| {
        let names: Vec<_> = Role::ALL.iter().map(|r| r.as_str()).collect();
        format!("unknown role `{s}` (one of: {})", names.join(", "))
    })
}

/// How a command ended, when it did not fail outright.
enum Outcome {
    Ok,
    /// The command ran and found problems in its input (already reported).
    Problems,
    /// The command's exit code is part of its answer (`catalyst hook`).
    Code(u8),
}

/// The hidden subcommand that makes this binary a stand-in `claude` for the demo and tests.
const STUB_CLAUDE: &str = "__stub-claude";

/// Runs `catalyst` with this process's arguments.
pub fn main() -> ExitCode {
    let mut args = std::env::args();
    match args.nth(1).as_deref() {
        Some(STUB_CLAUDE) => {
            let code = stub_claude::run(args.collect());
            return ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
        Some(SANDBOX_NET_COMMAND) => {
            return ExitCode::from(crate::cli::sandbox_net::main(&args.collect::<Vec<_>>()))
        }
        // Run on every tool call of every agent: answered before the command line parser
        // and the async runtime are built (a malformed call falls through to clap's error).
        Some("hook") => {
            let event = args.next().and_then(|arg| {
                crate::cli::hook::HookEvent::ALL
                    .into_iter()
                    .find(|e| e.arg() == arg)
            });
            if let (Some(event), None) = (event, args.next()) {
                return match hook(event) {
                    Ok(code) => ExitCode::from(code),
                    Err(e) => {
                        eprintln!("catalyst: {e:#}");
                        ExitCode::from(2)
                    }
                };
            }
        }
        _ => {}
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Problems) => ExitCode::from(1),
        Ok(Outcome::Code(code)) => ExitCode::from(code),
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("catalyst: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The runtime a daemon runs on in this process (`catalyst demo`, `catalyst worker`): the one
/// `catalystd` runs on.
fn daemon_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    crate::daemon::sched::runtime().context("cannot start the async runtime")
}

fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Ctl(args) => {
            use crate::cli::client::ClientError;
            use crate::cli::ctl::CtlError;
            match runtime()?.block_on(crate::cli::ctl::run(*args, &mut io::stdout().lock())) {
                Ok(()) => Ok(Outcome::Ok),
                // The daemon answered, with an error (`not_found`, `conflict`, …): exit 1.
                Err(CtlError::Client(ClientError::Rpc(e))) => {
                    eprintln!("catalyst: {}: {}", e.code, e.message);
                    Ok(Outcome::Problems)
                }
                Err(CtlError::Refused(why)) => {
                    eprintln!("catalyst: {why}");
                    Ok(Outcome::Problems)
                }
                Err(e) => Err(e.into()),
            }
        }
        Command::Demo { keep } => {
            if std::env::var_os("RUST_LOG").is_some() {
                tracing_subscriber::fmt()
                    .with_writer(io::stderr)
                    .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                    .init();
            }
            daemon_runtime()?.block_on(crate::cli::demo::run(&mut io::stdout().lock(), keep))?;
            Ok(Outcome::Ok)
        }
        Command::Formula(FormulaCmd::Check { files, prompts }) => formula_check(&files, prompts),
        Command::Formula(FormulaCmd::Show {
            name,
            vars,
            expand,
            aspects,
            workspace,
        }) => {
            let workspace = workspace.or_else(|| {
                std::env::current_dir()
                    .ok()
                    .and_then(|d| crate::daemon::Paths::discover(&d))
            });
            let req = crate::cli::formula::Show {
                name,
                vars,
                expand,
                aspects,
                workspace,
            };
            match crate::cli::formula::show(&req) {
                Ok(tree) => {
                    print!("{tree}");
                    Ok(Outcome::Ok)
                }
                Err(e) => {
                    eprintln!("catalyst formula show: {e}");
                    Ok(Outcome::Problems)
                }
            }
        }
        Command::Result(ResultCmd::Parse { role }) => result_parse(role),
        Command::Init { dir, with_prompts } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from("."));
            crate::cli::init::run(&dir, with_prompts, &mut io::stdout().lock())?;
            Ok(Outcome::Ok)
        }
        Command::Service(ServiceCmd::Install(args)) => {
            crate::cli::service::install(&args.spec()?, &mut io::stdout().lock())?;
            Ok(Outcome::Ok)
        }
        Command::Service(ServiceCmd::Uninstall(args)) => {
            let spec = crate::cli::service::Spec::resolve_for_removal(
                args.platform,
                args.user,
                args.workspace.as_deref(),
                args.unit_dir.as_deref(),
            )?;
            crate::cli::service::uninstall(&spec, &mut io::stdout().lock())?;
            Ok(Outcome::Ok)
        }
        Command::Import { file, workspace } => import(&file, workspace),
        Command::Export { file, workspace } => export(file, workspace),
        Command::Completions { shell } => {
            // clap_complete panics when its writer fails; a buffer cannot, and a closed pipe
            // is then an ordinary error (not one at all, see `main`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "catalyst", &mut script);
            io::stdout().lock().write_all(&script)?;
            Ok(Outcome::Ok)
        }
        Command::Man { page, dir } => {
            use crate::cli::man::{self, Program};
            let daemon = crate::cli::catalystd::Args::command;
            match dir {
                Some(dir) => {
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("cannot create `{}`", dir.display()))?;
                    man::write_all(Cli::command(), daemon(), &dir).with_context(|| {
                        format!("cannot write man pages into `{}`", dir.display())
                    })?;
                }
                None => {
                    let (command, program) = match page {
                        ManPage::Catalyst => (Cli::command(), Program::Catalyst),
                        ManPage::Catalystd => (daemon(), Program::Catalystd),
                    };
                    // Rendered into a buffer first, like the completions: a closed pipe is
                    // then one write error, which `main` takes for what it is.
                    let text = man::page(command, program)?;
                    io::stdout().lock().write_all(&text)?;
                }
            }
            Ok(Outcome::Ok)
        }
        Command::Hook { event } => hook(event).map(Outcome::Code),
        Command::ClusterKey { file } => {
            let (signer, _) = crate::daemon::cluster::trust::Signer::load_or_make(&file)?;
            writeln!(io::stdout().lock(), "{}", signer.public_key())?;
            Ok(Outcome::Ok)
        }
        Command::Worker(args) => {
            let WorkerArgs {
                nats,
                nats_token_file,
                nats_creds,
                nats_nkey,
                tls_ca,
                insecure,
                daemon_key,
                key_file,
                profiles,
                allow_unconfined,
                repo,
                workdir,
                slots,
                models,
                name,
                cluster_name,
            } = *args;
            tracing_subscriber::fmt()
                .with_writer(io::stderr)
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| "info".into()),
                )
                .init();
            // The host name, as one subject token: the daemon lists workers by name.
            let name = name.unwrap_or_else(|| {
                let host = nix::unistd::gethostname()
                    .ok()
                    .and_then(|h| h.into_string().ok())
                    .unwrap_or_else(|| "worker".into());
                crate::domain::cluster::token(host.split('.').next().unwrap_or("worker"))
            });
            let profiles = match profiles {
                Some(file) => crate::daemon::cluster::worker::read_profiles(&file)?,
                None => Default::default(),
            };
            let link = crate::daemon::cluster::link::Link {
                urls: nats,
                token_file: nats_token_file,
                credentials_file: nats_creds,
                nkey_file: nats_nkey,
                tls_ca_file: tls_ca,
                insecure,
            };
            let opts = crate::daemon::cluster::serve::WorkerOptions {
                link,
                daemon_key,
                key_file,
                profiles,
                allow_unconfined,
                remote: repo,
                workdir,
                slots,
                models,
                name,
                cluster: cluster_name,
                catalyst: std::env::current_exe().context("cannot find this program")?,
            };
            let rt = daemon_runtime()?;
            rt.block_on(async {
                let shutdown = tokio_util::sync::CancellationToken::new();
                let stop = shutdown.clone();
                tokio::spawn(async move {
                    use tokio::signal::unix::{signal, SignalKind};
                    let (Ok(mut term), Ok(mut int)) = (
                        signal(SignalKind::terminate()),
                        signal(SignalKind::interrupt()),
                    ) else {
                        return;
                    };
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                    stop.cancel();
                });
                crate::daemon::cluster::serve::serve(opts, shutdown).await
            })?;
            Ok(Outcome::Ok)
        }
    }
}

/// The workspace's paths and its socket.
fn workspace_paths(workspace: Option<PathBuf>) -> anyhow::Result<crate::daemon::Paths> {
    let dir = match workspace {
        Some(w) => w,
        None => std::env::current_dir().context("cannot read the current folder")?,
    };
    Ok(crate::daemon::Paths::new(&dir))
}

/// `catalyst hook`: its exit code is part of its answer (2 denies a tool call or blocks a
/// stop). A failure before the daemon is asked is an error, which exits 2 as well: a tool
/// call is then denied.
fn hook(event: crate::cli::hook::HookEvent) -> anyhow::Result<u8> {
    let mut input = Vec::new();
    io::stdin()
        .read_to_end(&mut input)
        .context("cannot read the hook input")?;
    let env = crate::cli::hook::HookEnv::from_process();
    let out = match crate::cli::hook::run_local(event, &input, &env) {
        Some(out) => out,
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?
            .block_on(crate::cli::hook::run(event, &input, &env)),
    };
    // Claude Code reads the answer from these streams; if they are gone there is no one to
    // tell, and the exit code still carries the decision.
    let _ = io::stdout().write_all(out.stdout.as_bytes());
    let _ = io::stderr().write_all(out.stderr.as_bytes());
    Ok(out.code)
}

fn import(file: &std::path::Path, workspace: Option<PathBuf>) -> anyhow::Result<Outcome> {
    use crate::cli::beads::{import_file, Mode};
    let paths = workspace_paths(workspace)?;
    let done = runtime()?.block_on(import_file(&paths, &paths.socket(), file))?;
    let r = &done.report;
    let mut out = io::stdout().lock();
    let how = match done.mode {
        Mode::Daemon => "through the daemon",
        Mode::Offline => "into the store (no daemon running)",
    };
    writeln!(
        out,
        "imported {} beads {how}; {} unchanged",
        r.created, r.unchanged
    )?;
    for (kind, n) in &done.skipped {
        writeln!(out, "skipped {n} `{kind}` lines")?;
    }
    for id in &r.conflicts {
        writeln!(
            out,
            "conflict: `{id}` is already in the store with other content (left as it is)"
        )?;
    }
    for (id, why) in &r.invalid {
        writeln!(out, "refused `{id}`: {why}")?;
    }
    Ok(if r.is_clean() {
        Outcome::Ok
    } else {
        Outcome::Problems
    })
}

fn export(file: Option<PathBuf>, workspace: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let paths = workspace_paths(workspace)?;
    let (beads, _) = runtime()?.block_on(crate::cli::beads::export(&paths, &paths.socket()))?;
    match file.filter(|f| f.as_os_str() != "-") {
        Some(file) => {
            crate::daemon::fsutil::write_atomic_with(&file, |w| {
                crate::domain::beads::jsonl::write(&beads, w)
            })
            .with_context(|| format!("cannot write `{}`", file.display()))?;
            eprintln!("exported {} beads to {}", beads.len(), file.display());
        }
        None => {
            let mut out = io::BufWriter::new(io::stdout().lock());
            crate::domain::beads::jsonl::write(&beads, &mut out)?;
            out.flush()?;
        }
    }
    Ok(Outcome::Ok)
}

fn formula_check(files: &[PathBuf], prompts: Option<PathBuf>) -> anyhow::Result<Outcome> {
    let prompts = match prompts {
        Some(path) => crate::daemon::load::prompts(&path)?,
        None => PromptSet::builtin(),
    };
    let mut out = io::stdout().lock();
    let problems = crate::cli::formula::check(files, &prompts);
    for problem in &problems {
        writeln!(out, "{problem}")?;
    }
    // Warnings are printed; only errors fail the check.
    let clean = problems.iter().all(|p| p.warning);
    Ok(if clean {
        Outcome::Ok
    } else {
        Outcome::Problems
    })
}

fn result_parse(role: Option<Role>) -> anyhow::Result<Outcome> {
    let mut bytes = Vec::new();
    io::stdin()
        .read_to_end(&mut bytes)
        .context("cannot read the message from stdin")?;
    // Agents can print anything; invalid UTF-8 is replaced rather than refused.
    let message = String::from_utf8_lossy(&bytes);
    match crate::domain::result::parse(&message, role) {
        Ok(result) => {
            let mut out = io::stdout().lock();
            serde_json::to_writer_pretty(&mut out, &result)?;
            writeln!(out)?;
            Ok(Outcome::Ok)
        }
        Err(reason) => {
            eprintln!("malformed: {reason}");
            Ok(Outcome::Problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument of `command` and its subcommands (hidden ones too) that has no help
    /// text, and every subcommand without a description, as `catalyst ctl logs: --attempt`.
    fn undocumented(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in command.get_arguments() {
            let generated = matches!(arg.get_id().as_str(), "help" | "version");
            if !generated && arg.get_help().is_none() && arg.get_long_help().is_none() {
                let name = match arg.get_long() {
                    Some(long) => format!("--{long}"),
                    None => arg.get_id().to_string().to_uppercase(),
                };
                missing.push(format!("{path}: {name}"));
            }
        }
        for sub in command.get_subcommands() {
            let sub_path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                missing.push(format!("{sub_path}: no description"));
            }
            undocumented(sub, &sub_path, missing);
        }
    }

    #[test]
    fn every_command_flag_and_argument_of_both_binaries_has_help() {
        let mut missing = Vec::new();
        for command in [Cli::command(), crate::cli::catalystd::Args::command()] {
            command.clone().debug_assert();
            undocumented(&command, command.get_name(), &mut missing);
        }
        assert!(
            missing.is_empty(),
            "arguments without help text:\n{}",
            missing.join("\n")
        );
    }
}
