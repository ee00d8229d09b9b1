//! `catalystd`'s command line. The binary parses it; `catalyst man` writes its man page from
//! the same definition, so the page cannot drift from the flags.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (no colour when stderr is not a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Parser)]
#[command(
    name = "catalystd",
    version,
    about = "catalyst's daemon: runs a workspace's beads through their formulas",
    long_about = "catalyst's daemon: runs a workspace's beads through their formulas.\n\n\
        It keeps its state under `<workspace>/.catalyst/` and serves `catalyst ctl` on \
        `.catalyst/catalystd.sock`. SIGTERM and SIGINT stop it (running agents get \
        `shutdown_grace_secs`); SIGHUP reloads config, prompts and formulas."
)]
pub struct Args {
    /// The git repository whose beads the daemon runs; state lives in `<workspace>/.catalyst/`.
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log level (overridden by RUST_LOG).
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Serve the web dashboard on this address, e.g. `127.0.0.1:7400` (over `[web] listen`);
    /// its link, with the access token, is logged at start.
    #[arg(long, value_name = "ADDR")]
    pub web: Option<String>,
}
