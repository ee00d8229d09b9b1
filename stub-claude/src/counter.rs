//! Response counts kept across processes, so a sequence of responses advances one step per
//! invocation even when the daemon runs several agents at once.
//!
//! Counts are kept per run: a run is the catalyst workspace an invocation works for (see
//! [`run_of`]), so two workspaces following one scenario each start at its first response,
//! while a daemon restarted on the same workspace goes on where it stopped. The state is a
//! small JSON object of counts per run (`{"/src/repo": {"rule-0": 2, "rule-1/cat-3": 1}}`)
//! in one file, read and rewritten in place while an exclusive `flock` is held: parallel
//! invocations queue on the lock, so each one takes a distinct count.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::error::Error;

/// The state folder's name in a catalyst workspace (catalyst's `daemon::paths::STATE_DIR`).
const STATE_DIR: &str = ".catalyst";

/// Counts by run, then by rule key.
type Counts = BTreeMap<String, BTreeMap<String, u64>>;

/// The run an invocation belongs to, from catalyst's `CATALYST_CONTEXT`: the context file lies
/// in the attempt's run folder, `<workspace>/.catalyst/runs/<bead>/<step>/<attempt>/`, so the
/// run is the workspace above the nearest `.catalyst`. That file is in every agent's
/// environment and survives a restart of the daemon, and unlike the workspace's state folder,
/// which a sandboxed agent cannot write, it needs nothing from the sandbox. An invocation
/// outside catalyst (no such file) is the run `""`: one run per state file, as when a person
/// runs the stub by hand.
pub fn run_of(context: Option<&Path>) -> String {
    let Some(workspace) = context
        .into_iter()
        .flat_map(Path::ancestors)
        .find(|dir| dir.file_name().is_some_and(|name| name == STATE_DIR))
        .and_then(Path::parent)
    else {
        return String::new();
    };
    // One spelling per workspace, whichever path the daemon was given.
    let workspace: PathBuf = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_owned());
    workspace.display().to_string()
}

/// Returns how many times `key` was taken before in `run`, and counts this time.
pub fn take(state: &Path, run: &str, key: &str) -> Result<u64, Error> {
    let fail = |message: String| Error::State {
        path: state.to_path_buf(),
        message,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(state)
        .map_err(|e| fail(e.to_string()))?;
    let mut file = Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, errno)| fail(format!("flock: {errno}")))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| fail(e.to_string()))?;
    let mut counts: Counts = if text.trim().is_empty() {
        Counts::new()
    } else {
        serde_json::from_str(&text).map_err(|e| {
            fail(format!(
                "not a JSON object of counts per run ({e}); delete it to start over"
            ))
        })?
    };
    let slot = counts
        .entry(run.to_owned())
        .or_default()
        .entry(key.to_owned())
        .or_insert(0);
    let taken = *slot;
    *slot += 1;
    let json = serde_json::to_string(&counts).map_err(|e| fail(e.to_string()))?;
    file.set_len(0).map_err(|e| fail(e.to_string()))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| fail(e.to_string()))?;
    file.write_all(json.as_bytes())
        .map_err(|e| fail(e.to_string()))?;
    // The lock is released when `file` drops, after the write is in the file.
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_run_and_key() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("s.state");
        assert_eq!(take(&state, "/a", "rule-0").expect("take"), 0);
        assert_eq!(take(&state, "/a", "rule-0").expect("take"), 1);
        assert_eq!(take(&state, "/a", "rule-1").expect("take"), 0);
        assert_eq!(take(&state, "/b", "rule-0").expect("take"), 0);
        assert_eq!(take(&state, "/a", "rule-0").expect("take"), 2);
    }

    #[test]
    fn a_corrupt_state_file_is_an_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("s.state");
        std::fs::write(&state, "not json").expect("write");
        assert!(matches!(take(&state, "", "k"), Err(Error::State { .. })));
    }

    #[test]
    fn the_run_is_the_workspace_above_the_context_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = dir.path().canonicalize().expect("canonical").join("repo");
        let run_dir = workspace.join(".catalyst/runs/cat-1/cat-1.review/2");
        std::fs::create_dir_all(&run_dir).expect("run folder");
        let context = run_dir.join("context.md");
        assert_eq!(run_of(Some(&context)), workspace.display().to_string());
        // The same workspace through a symlink is the same run.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&workspace, &link).expect("symlink");
        let through_link = link.join(".catalyst/runs/cat-1/cat-1.review/2/context.md");
        assert_eq!(run_of(Some(&through_link)), workspace.display().to_string());
        assert_eq!(run_of(None), "");
        assert_eq!(run_of(Some(Path::new("/elsewhere/context.md"))), "");
    }
}
