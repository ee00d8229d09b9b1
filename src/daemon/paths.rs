//! Where a workspace's files live (docs/files.md).

use std::path::{Path, PathBuf};

use crate::domain::id::BeadId;

/// The state folder's name inside a workspace.
pub const STATE_DIR: &str = ".catalyst";

/// Socket paths longer than this do not fit `sockaddr_un` on every platform.
pub(crate) const MAX_SOCKET_PATH: usize = 100;

/// The files and folders of one workspace.
#[derive(Clone, Debug)]
pub struct Paths {
    /// The git repository the daemon works on.
    pub workspace: PathBuf,
    /// `<workspace>/.catalyst`.
    pub state: PathBuf,
}

impl Paths {
    /// The workspace `dir` lies in, as git finds its repository: the nearest of `dir` and its
    /// parents that holds a state folder. A bead's worktree lies inside its workspace's state
    /// folder, so from there it is that workspace too.
    pub fn discover(dir: &Path) -> Option<PathBuf> {
        dir.ancestors()
            .find(|d| d.join(STATE_DIR).is_dir())
            .map(Path::to_path_buf)
    }

    pub fn new(workspace: &Path) -> Paths {
        Paths {
            workspace: workspace.to_owned(),
            state: workspace.join(STATE_DIR),
        }
    }

    pub fn config(&self) -> PathBuf {
        self.state.join("config.toml")
    }

    pub fn prompts(&self) -> PathBuf {
        self.state.join("agent_prompts.toml")
    }

    /// Folders whose `*.formula.toml` files add to or override the built-in formulas.
    pub fn formula_dirs(&self) -> Vec<PathBuf> {
        vec![
            self.workspace.join(".beads").join("formulas"),
            self.state.join("formulas"),
        ]
    }

    pub fn inbox(&self) -> PathBuf {
        self.state.join("inbox")
    }

    /// Where bad inbox files are moved, each with a `.why` file next to it.
    pub fn rejected(&self) -> PathBuf {
        self.state.join("inbox-rejected")
    }

    pub fn runs(&self) -> PathBuf {
        self.state.join("runs")
    }

    pub fn worktrees(&self) -> PathBuf {
        self.state.join("worktrees")
    }

    /// The bead whose merge into the target is in flight: `merge/merging`, present only
    /// during a merge. In a folder of its own so that writing and removing it wakes none of
    /// the state folder's watches.
    pub fn merge_marker(&self) -> PathBuf {
        self.state.join("merge").join("merging")
    }

    /// Where daemons before `merge/` wrote the merge marker: `merging`, moved into `merge/` at
    /// start-up.
    pub fn older_merge_marker(&self) -> PathBuf {
        self.state.join("merging")
    }

    pub fn lock(&self) -> PathBuf {
        self.state.join("catalystd.lock")
    }

    /// The web dashboard's access token (mode 0600), written at each start.
    pub fn web_token(&self) -> PathBuf {
        self.state.join("web.token")
    }

    /// The run folder of one attempt: `runs/<bead>/<step>/<attempt>`.
    pub fn run_dir(&self, bead: &BeadId, step: &str, attempt: u32) -> PathBuf {
        self.runs()
            .join(bead.as_str())
            .join(step)
            .join(attempt.to_string())
    }

    /// `.catalyst/catalystd.sock`, or a name under `$XDG_RUNTIME_DIR` (else the temp folder)
    /// derived from the workspace path when that path is too long for a Unix socket.
    pub fn socket(&self) -> PathBuf {
        let local = self.state.join("catalystd.sock");
        if local.as_os_str().len() <= MAX_SOCKET_PATH {
            return local;
        }
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        base.join(format!(
            "catalyst-{:016x}.sock",
            fnv1a(local.as_os_str().as_encoded_bytes())
        ))
    }
}

/// A stable hash (the same in the daemon and in `catalyst ctl`, across builds).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Appends `.catalyst/` to a git exclude file (`info/exclude` of a repository's common
/// folder) unless a line already excludes it, so git never shows the state folder. Returns
/// whether it added the line.
pub fn exclude_state_dir(exclude: &Path) -> std::io::Result<bool> {
    let text = match std::fs::read_to_string(exclude) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let wanted = [".catalyst", ".catalyst/", "/.catalyst", "/.catalyst/"];
    if text.lines().any(|l| wanted.contains(&l.trim())) {
        return Ok(false);
    }
    let mut new = text;
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(&format!("{STATE_DIR}/\n"));
    if let Some(dir) = exclude.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::daemon::fsutil::write_atomic(exclude, new.as_bytes())?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exclude_line_is_added_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("info").join("exclude");
        assert!(exclude_state_dir(&file).unwrap());
        assert!(!exclude_state_dir(&file).unwrap());
        std::fs::write(&file, "# git's own comment\n/.catalyst").unwrap();
        assert!(!exclude_state_dir(&file).unwrap());
        std::fs::write(&file, "target/").unwrap();
        assert!(exclude_state_dir(&file).unwrap());
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "target/\n.catalyst/\n"
        );
    }

    #[test]
    fn a_long_workspace_path_gets_a_short_socket_path() {
        let short = Paths::new(Path::new("/w"));
        assert_eq!(short.socket(), Path::new("/w/.catalyst/catalystd.sock"));
        let long = Paths::new(&Path::new("/").join("x".repeat(200)));
        let sock = long.socket();
        assert!(sock.as_os_str().len() < 108, "{}", sock.display());
        assert_eq!(sock, long.socket(), "stable");
    }

    #[test]
    fn the_workspace_is_found_from_a_subfolder_and_from_a_worktree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("repo");
        let worktree = ws
            .join(STATE_DIR)
            .join("worktrees")
            .join("cat-1")
            .join("src");
        std::fs::create_dir_all(&worktree).expect("mkdir");
        std::fs::create_dir_all(ws.join("src/deep")).expect("mkdir");
        assert_eq!(Paths::discover(&ws.join("src/deep")), Some(ws.clone()));
        assert_eq!(Paths::discover(&worktree), Some(ws.clone()));
        assert_eq!(Paths::discover(&ws), Some(ws));
        assert_eq!(Paths::discover(dir.path()), None);
    }
}
