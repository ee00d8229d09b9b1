//! `catalystd`: the daemon's entry point.
//!
//! This version opens the workspace's store (recovering it from its snapshot and journal, as
//! start-up always will) and reports what it found; scheduling agents arrives with the engine.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use catalyst::store::Store;
use catalyst::time::Timestamp;

#[derive(Parser)]
#[command(version, about = "catalyst's daemon")]
struct Args {
    /// The git repository whose beads the daemon runs; state lives in `<workspace>/.catalyst/`.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let dir = args.workspace.join(".catalyst");
    match Store::open(&dir) {
        Ok((store, report)) => {
            let state = store.state();
            let ready = state.ready(Timestamp::now()).count();
            tracing::info!(
                beads = state.len(),
                ready,
                seq = state.seq(),
                replayed = report.replayed,
                "store recovered"
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("catalystd: {e}");
            ExitCode::FAILURE
        }
    }
}
