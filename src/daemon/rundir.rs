//! Files the daemon writes into an attempt's run folder for the agent to read.

use std::io;
use std::path::Path;

use crate::daemon::fsutil::write_replace;
use crate::domain::context::Context;

/// Writes `context.md` and `context.json` into `run_dir`, which must exist, each by a rename
/// (not fsynced: run-folder records, see [`write_replace`]).
pub fn write_context(run_dir: &Path, ctx: &Context) -> io::Result<()> {
    for (name, bytes) in ctx.files() {
        write_replace(&run_dir.join(name), &bytes)?;
    }
    Ok(())
}
