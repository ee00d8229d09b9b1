//! Response counts kept across processes, so a sequence of responses advances one step per
//! invocation even when the daemon runs several agents at once.
//!
//! The state is a small JSON object (`{"rule-0": 2, "rule-1/cat-3": 1}`) in one file, read and
//! rewritten in place while an exclusive `flock` is held: parallel invocations queue on the
//! lock, so each one takes a distinct count.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

use crate::error::Error;

/// Returns how many times `key` was taken before, and counts this time.
pub fn take(state: &Path, key: &str) -> Result<u64, Error> {
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
    let mut counts: BTreeMap<String, u64> = if text.trim().is_empty() {
        BTreeMap::new()
    } else {
        serde_json::from_str(&text)
            .map_err(|e| fail(format!("not a JSON object of counts: {e}")))?
    };
    let slot = counts.entry(key.to_string()).or_insert(0);
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
    fn counts_per_key() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("s.state");
        assert_eq!(take(&state, "rule-0").expect("take"), 0);
        assert_eq!(take(&state, "rule-0").expect("take"), 1);
        assert_eq!(take(&state, "rule-1").expect("take"), 0);
        assert_eq!(take(&state, "rule-0").expect("take"), 2);
    }

    #[test]
    fn a_corrupt_state_file_is_an_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        let state = dir.path().join("s.state");
        std::fs::write(&state, "not json").expect("write");
        assert!(matches!(take(&state, "k"), Err(Error::State { .. })));
    }
}
