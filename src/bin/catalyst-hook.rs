//! `catalyst-hook <event>`: Claude Code's hook handler, as small as it can be, since it runs
//! on every tool call of every agent. It answers from the attempt's policy file
//! ([`catalyst::cli::hook::run_local`]); when there is none (the attempt is over) it hands
//! the call to `catalyst hook <event>` next to it, which asks the daemon. Exit codes and
//! output are Claude Code's (docs/agents.md#hooks).
//!
//! The forwarder of a `model-only` network (`__sandbox-net`), which every such attempt starts,
//! is here too, for the same reason.
//!
//! It has no Rust `main`: the C `main` below skips the standard library's start-up, whose
//! guard page for the main thread's stack asks glibc for the stack's bounds, and glibc reads
//! and parses `/proc/self/maps` for that, a noticeable part of what a Rust program that does
//! nothing costs to start and exit (the `hook` row of docs/benchmarks.md measures it). What
//! that start-up did that the program relies on is done here: `SIGPIPE` ignored (a closed
//! pipe is an error, not a death), stdout
//! flushed before exiting, and a panic turned into exit code 101. A stack overflow kills the
//! process with `SIGSEGV` without the standard library's message.
// `unsafe` here: its C `main`, which skips the standard library's start-up; each block says why
// it is sound.
#![allow(unsafe_code)]
#![no_main]

use std::io::{self, Read, Write};
use std::process::Stdio;

use catalyst::cli::hook::{run_local, HookEnv, HookEvent};
use catalyst::domain::agent::sandbox::SANDBOX_NET_COMMAND;

/// The process's entry point, called by the C runtime. `std::env::args` works without the
/// standard library's start-up: on glibc it records the arguments before `main`.
#[no_mangle]
pub extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    // SAFETY: no other thread exists yet, and ignoring a signal installs no handler.
    unsafe {
        let _ = nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigIgn,
        );
    }
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    let _ = io::stdout().flush();
    code.into()
}

fn run() -> u8 {
    let first = std::env::args_os().nth(1);
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
        return 2;
    };
    let mut input = Vec::new();
    if let Err(e) = io::stdin().read_to_end(&mut input) {
        eprintln!("catalyst: cannot read the hook input: {e}");
        return 2;
    }
    let env = HookEnv::from_process();
    let out = match run_local(event, &input, &env) {
        Some(out) => out,
        None => return ask_the_daemon(event, &input),
    };
    // Claude Code reads the answer from these streams; the exit code carries it too.
    let _ = io::stdout().write_all(out.stdout.as_bytes());
    let _ = io::stderr().write_all(out.stderr.as_bytes());
    out.code
}

/// Runs `catalyst hook <event>` beside this program with the same input, and answers as it
/// does. A `catalyst` that cannot be run denies (exit 2).
fn ask_the_daemon(event: HookEvent, input: &[u8]) -> u8 {
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
            return 2;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input);
    }
    match child.wait() {
        Ok(status) => status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(2),
        Err(_) => 2,
    }
}
