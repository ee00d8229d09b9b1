//! Files the daemon writes into an attempt's run folder for the agent to read.

use std::io;
use std::path::Path;

use serde::Deserialize;

use crate::daemon::fsutil::write_input;
use crate::domain::agent::attempt::{ToolRecord, TOOL_LOG_FILE};
use crate::domain::context::Context;
use crate::domain::result::StepResult;
use crate::domain::router::Outcome;

/// Writes `context.md` and `context.json` into `run_dir`, which must exist, before the agent
/// starts (in place: see [`write_input`]).
pub fn write_context(run_dir: &Path, ctx: &Context) -> io::Result<()> {
    for (name, bytes) in ctx.files() {
        write_input(&run_dir.join(name), &bytes)?;
    }
    Ok(())
}

/// Appends `record` to the attempt's tool log in `run_dir` ([`TOOL_LOG_FILE`]), one line
/// written whole, for the daemon to record as an `agent.tool` event: a hook's own decision,
/// or a final message the daemon sent back.
pub fn append_tool_record(run_dir: &Path, record: &ToolRecord) -> io::Result<()> {
    use std::io::Write;
    let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(run_dir.join(TOOL_LOG_FILE))?
        .write_all(&line)
}

/// The result block an attempt's `result.json` (`written`, as read from it) records, when
/// its agent finished with one.
pub fn finished_result(written: &serde_json::Value) -> Option<StepResult> {
    #[derive(Deserialize)]
    struct Written {
        outcome: Option<Outcome>,
    }
    match Written::deserialize(written).ok()?.outcome? {
        Outcome::Finished { result, .. } => Some(result),
        _ => None,
    }
}
