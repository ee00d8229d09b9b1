//! `catalystd`: the daemon's entry point: flags, logging, signals, then the daemon library.
// `unsafe` here: mimalloc's `mi_collect`, after loading a large journal; each block says why it
// is sound.
#![allow(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use catalyst::cli::catalystd::{Args, LogFormat};
use catalyst::cli::client::Client;
use catalyst::daemon::sdnotify::Notifier;
use catalyst::daemon::{self, Paths};

/// Replaying a large journal is allocation-bound (every bead is a handful of small strings and
/// vectors); mimalloc makes start-up about a quarter faster than glibc's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Gives mimalloc's freed pages back to the operating system (after loading a large journal).
fn release_freed_memory() {
    // SAFETY: `mi_collect` takes no pointers; it may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

fn main() -> ExitCode {
    daemon::release_freed_memory_with(release_freed_memory);
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&args.log_level));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    // Before the store is loaded, which is most of what the daemon ever allocates.
    daemon::without_transparent_huge_pages();
    let workspace = match std::fs::canonicalize(&args.workspace) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("catalystd: workspace `{}`: {e}", args.workspace.display());
            return ExitCode::from(2);
        }
    };
    let runtime = match daemon::sched::runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("catalystd: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let paths = Paths::new(&workspace);
    let result = runtime.block_on(async {
        let shutdown = CancellationToken::new();
        tokio::spawn(signals(shutdown.clone(), paths.clone()));
        daemon::bind(&paths)?
            .with_web(args.web.clone())
            .run(shutdown, paths)
            .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("catalystd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM and SIGINT stop the daemon gracefully; SIGHUP reloads config, prompts and formulas
/// (through the daemon's own control socket, as `catalyst ctl reload` would).
async fn signals(shutdown: CancellationToken, paths: Paths) {
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                let notifier = Notifier::from_env();
                notifier.reloading();
                let reloaded = match Client::connect(&paths.socket()).await {
                    Ok(mut c) => c.reload().await,
                    Err(e) => Err(e),
                };
                match reloaded {
                    Ok(_) => notifier.reloaded("reloaded config, prompts and formulas"),
                    Err(e) => {
                        tracing::error!(error = %e, "SIGHUP: reload refused; the old files stay in force");
                        notifier.reloaded(&format!("reload refused: {e}"));
                    }
                }
            }
        }
    }
    shutdown.cancel();
}
