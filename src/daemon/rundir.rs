//! Files the daemon writes into an attempt's run folder for the agent to read.

use std::io;
use std::path::Path;

use serde::Deserialize;

use crate::daemon::fsutil::write_input;
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
