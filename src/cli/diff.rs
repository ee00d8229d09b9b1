//! `ctl diff BEAD`: what the bead's branch changes against the target branch, from where it
//! left it (`git diff <target>...catalyst/<bead>`), as a stat then a unified patch.
//!
//! Read by the client, from the workspace's repository, with the code that puts the change
//! into a reviewer's context ([`Repo::branch_diff`]). A patch can be larger than a control
//! line may be (1 MiB), and reading it has no business in the engine's task; the daemon is
//! asked only what it alone knows: whether the bead exists, which work bead a step belongs
//! to, and how the bead ended when its branch is gone. The target branch is the workspace
//! config's `target_branch`. A merged bead's branch is gone; its diff is then what the merge
//! brought to the target, from the tips the daemon recorded.

use std::io::Write;
use std::path::Path;

use crate::cli::client::Client;
use crate::cli::error::CtlError;
use crate::daemon::audit::{self, DiffError};
use crate::daemon::worktree::{branch_name, BranchDiff};
use crate::daemon::Paths;
use crate::protocol::ShowParams;
use crate::render::render_diff;
use crate::render::style::Paint;

/// The stat's width, as `git diff --stat` uses on a terminal of 80 columns.
const STAT_WIDTH: usize = 80;

/// Prints `bead`'s diff (a step id means its bead's). `workspace` is the daemon's workspace.
pub async fn run(
    client: &mut Client,
    workspace: &Path,
    bead: &str,
    json: bool,
    out: &mut impl Write,
) -> Result<(), CtlError> {
    let mut show = client
        .show(ShowParams {
            id: bead.into(),
            runs: false,
        })
        .await?;
    if let Some(meta) = show.bead.step_meta() {
        show = client
            .show(ShowParams {
                id: meta.bead.to_string(),
                runs: false,
            })
            .await?;
    }
    let paths = Paths::new(workspace);
    let target = crate::daemon::load::config(&paths.config())
        .map_err(|e| CtlError::Failed(format!("cannot read the workspace's config: {e}")))?
        .target_branch;
    let diff = {
        let show = show.clone();
        tokio::task::spawn_blocking(move || audit::diff(&paths, &show, STAT_WIDTH))
            .await
            .map_err(|e| CtlError::Failed(format!("reading the diff failed: {e}")))?
    };
    let BranchDiff { stat, patch, .. } = diff.map_err(|e| match e {
        DiffError::NoBranch(why) => CtlError::Refused(why),
        DiffError::Failed(e) => CtlError::Failed(e),
    })?;
    if json {
        let value = serde_json::json!({
            "bead": show.id,
            "branch": branch_name(&show.id),
            "patch": patch,
            "stat": stat,
            "target": target,
        });
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )?;
        return Ok(());
    }
    if patch.is_empty() {
        eprintln!(
            "`{}` changes nothing against `{target}` yet",
            branch_name(&show.id)
        );
        return Ok(());
    }
    out.write_all(render_diff(&stat, &patch, Paint::for_stdout()).as_bytes())?;
    Ok(())
}
