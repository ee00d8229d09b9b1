//! `catalyst-hook <event>`: Claude Code's hook handler, as small as it can be, since it runs
//! on every tool call of every agent. It answers from the attempt's policy file
//! ([`catalyst::cli::hook::run_local`]); when there is none (the attempt is over) it hands
//! the call to `catalyst hook <event>` next to it, which asks the daemon. Exit codes and
//! output are Claude Code's (docs/agents.md#hooks).
//!
//! The two other programs an attempt starts are here too, for the same reason: the shim that
//! becomes the agent (`__exec`) and the forwarder of a `model-only` network (`__sandbox-net`).

use std::io::{self, Read, Write};
use std::process::{ExitCode, Stdio};

use catalyst::cli::hook::{run_local, HookEnv, HookEvent};
use catalyst::daemon::agent::shim;
use catalyst::domain::agent::sandbox::SANDBOX_NET_COMMAND;

fn main() -> ExitCode {
    let first = std::env::args_os().nth(1);
    if first.as_ref().is_some_and(|a| a == shim::EXEC_COMMAND) {
        return shim::main(&std::env::args_os().skip(2).collect::<Vec<_>>());
    }
    if first.is_some_and(|a| a == SANDBOX_NET_COMMAND) {
        return catalyst::cli::sandbox_net::main(&std::env::args().skip(2).collect::<Vec<_>>());
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let event = match args.as_slice() {
        [arg] => HookEvent::ALL.into_iter().find(|e| e.arg() == arg),
        _ => None,
    };
    let Some(event) = event else {
        eprintln!("usage: catalyst-hook pre-tool-use|stop|session-start");
        return ExitCode::from(2);
    };
    let mut input = Vec::new();
    if let Err(e) = io::stdin().read_to_end(&mut input) {
        eprintln!("catalyst: cannot read the hook input: {e}");
        return ExitCode::from(2);
    }
    let env = HookEnv::from_process();
    let out = match run_local(event, &input, &env) {
        Some(out) => out,
        None => return ask_the_daemon(event, &input),
    };
    // Claude Code reads the answer from these streams; the exit code carries it too.
    let _ = io::stdout().write_all(out.stdout.as_bytes());
    let _ = io::stderr().write_all(out.stderr.as_bytes());
    ExitCode::from(out.code)
}

/// Runs `catalyst hook <event>` beside this program with the same input, and answers as it
/// does. A `catalyst` that cannot be run denies (exit 2).
fn ask_the_daemon(event: HookEvent, input: &[u8]) -> ExitCode {
    let catalyst = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("catalyst")))
        .unwrap_or_else(|| "catalyst".into());
    let child = std::process::Command::new(&catalyst)
        .args(["hook", event.arg()])
        .stdin(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            eprintln!("catalyst: cannot run `{}`: {e}", catalyst.display());
            return ExitCode::from(2);
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input);
    }
    match child.wait() {
        Ok(status) => ExitCode::from(
            status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(2),
        ),
        Err(_) => ExitCode::from(2),
    }
}
