//! The operating-system sandbox around an agent attempt (docs/agents.md#the-sandbox): what a
//! profile asks for, and the bubblewrap command line that gives it.
//!
//! Inside the sandbox the root file system is read-only; the attempt may write only its bead's
//! worktree, its run folder, a private `/tmp` and the agent CLI's own state (the profile's
//! `writable` paths). The shared repository stays read-only whole: the worktree's admin folder
//! and its branch ref are private copies mounted over the real ones, new objects go to a
//! private object folder (git's `GIT_OBJECT_DIRECTORY`, the shared store as its alternate),
//! and the worktree's `.git` file is mounted read-only, so no agent can make git read a
//! config, hook or fsmonitor of its own. The daemon imports and checks the commits afterwards. The daemon's state folder
//! (journal, other worktrees, other run folders) is hidden behind an empty file system, except
//! the control socket, which `catalyst hook` needs. The agent gets its own PID namespace and dies
//! with its parent; with a network policy other than `open` it gets its own network namespace.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The namespaces and privileges of every bubblewrap sandbox: its own user namespace with every
/// capability dropped (bubblewrap keeps them all for a daemon started as root, and a root agent
/// could then remount `/`, unmount the private `/tmp` or the hidden state folder, and leave its
/// mounts), its own PID, IPC and UTS namespaces, and death with its parent. bubblewrap always
/// sets `no_new_privs`, so nothing the agent executes gains a capability back.
pub const BWRAP_NAMESPACES: [&str; 8] = [
    "--unshare-user",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
];

/// The hidden subcommand of `catalyst-hook` and `catalyst` that is the first process of a
/// `model-only` network namespace (see `cli::sandbox_net`).
pub const SANDBOX_NET_COMMAND: &str = "__sandbox-net";

/// How a profile's agent is confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxKind {
    /// Bubblewrap (`bwrap`): the default on Linux.
    Bwrap,
    /// No confinement by the operating system: the hooks' tool policy is all there is.
    None,
}

impl Default for SandboxKind {
    fn default() -> SandboxKind {
        if cfg!(target_os = "linux") {
            SandboxKind::Bwrap
        } else {
            SandboxKind::None
        }
    }
}

/// What the agent may reach on the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// Only its model API, through the daemon's proxy.
    #[default]
    ModelOnly,
    /// Whatever the daemon's host reaches.
    Open,
    /// Nothing but its own loopback.
    None,
}

/// The git paths one attempt's sandbox exposes, found by the daemon for the bead. Each pair is
/// a real folder and the attempt's private copy mounted over it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitMounts {
    /// The repository's git folder (`.git`), read-only: mounted again in case the private
    /// `/tmp` or the hidden state folder covers it.
    pub common: PathBuf,
    /// The worktree's `.git` file, mounted read-only over itself: an agent that could replace
    /// it (with a folder holding a config of its own) would run its fsmonitor or hooks in a
    /// person's `git status`, or point the daemon's commit at another checkout.
    pub dot_git: PathBuf,
    /// The worktree's admin folder (`.git/worktrees/<name>`: its HEAD, index and logs).
    pub admin: (PathBuf, PathBuf),
    /// The private object folder the agent's git writes new objects to
    /// ([`GIT_OBJECT_DIRECTORY`](GitMounts::env)); it lies in the run folder.
    pub objects: PathBuf,
    /// The folder of the bead branches' refs (`.git/refs/heads/catalyst`), and the private
    /// copy mounted over it, which holds only this bead's ref.
    pub refs: (PathBuf, PathBuf),
    /// The same for their reflogs (`.git/logs/refs/heads/catalyst`).
    pub logs: (PathBuf, PathBuf),
}

impl GitMounts {
    /// The environment that sends the agent's new objects to its private folder, the shared
    /// store read through it as an alternate.
    pub fn env(&self) -> [(String, String); 2] {
        let shared = self.common.join("objects");
        [
            (
                "GIT_OBJECT_DIRECTORY".to_owned(),
                self.objects.display().to_string(),
            ),
            (
                "GIT_ALTERNATE_OBJECT_DIRECTORIES".to_owned(),
                shared.display().to_string(),
            ),
        ]
    }
}

/// Everything one attempt's sandbox is made from.
#[derive(Clone, Debug)]
pub struct Confinement<'a> {
    pub worktree: &'a Path,
    pub run_dir: &'a Path,
    /// The daemon's state folder (`.catalyst`), hidden.
    pub state: &'a Path,
    /// The attempt's own socket, reachable inside; none for a gate.
    pub socket: Option<&'a Path>,
    /// The folder of the attempt's network sockets, when it is not in the run folder (a run
    /// folder whose path is too long for a socket address), reachable inside.
    pub net_sockets: Option<&'a Path>,
    /// `None` when the worktree is not a linked git worktree (a gate's scratch folder).
    pub git: Option<&'a GitMounts>,
    /// Paths the agent may write besides the above (the profile's and the config's), already
    /// expanded; those that do not exist are skipped.
    pub writable: &'a [PathBuf],
    /// Folders the private `/tmp` or the hidden state folder would cover but the agent must
    /// read: where its program and `catalyst` are installed, when that is under `/tmp`.
    pub readable: &'a [PathBuf],
    /// Files shown empty inside: the daemon's secrets (the forge's token).
    pub hidden: &'a [PathBuf],
    pub network: Network,
}

/// The `bwrap` arguments that confine a command, up to and including the `--` before it. Later
/// mounts go over earlier ones, so the order is: the read-only root, the private and hidden
/// folders, then what is writable inside them.
pub fn bwrap_args(c: &Confinement<'_>) -> Vec<OsString> {
    let mut args = Args::default();
    args.flags(&BWRAP_NAMESPACES);
    if c.network != Network::Open {
        args.flags(&["--unshare-net"]);
    }
    args.pair("--ro-bind", Path::new("/"), Path::new("/"));
    args.one("--dev", Path::new("/dev"));
    args.one("--proc", Path::new("/proc"));
    args.one("--tmpfs", Path::new("/tmp"));
    args.one("--tmpfs", c.state);
    for path in c.readable {
        args.pair("--ro-bind-try", path, path);
    }
    if let Some(sockets) = c.net_sockets {
        args.bind(sockets);
    }
    args.bind(c.worktree);
    args.bind(c.run_dir);
    // The hooks decide from the attempt's policy: the agent may read it, never change it.
    let policy = c.run_dir.join(super::attempt::POLICY_FILE);
    args.pair("--ro-bind-try", &policy, &policy);
    if let Some(git) = c.git {
        args.pair("--ro-bind", &git.common, &git.common);
        args.pair("--bind", &git.admin.1, &git.admin.0);
        args.pair("--bind", &git.refs.1, &git.refs.0);
        args.pair("--bind", &git.logs.1, &git.logs.0);
        args.pair("--ro-bind", &git.dot_git, &git.dot_git);
    }
    for path in c.writable {
        args.pair("--bind-try", path, path);
    }
    if let Some(socket) = c.socket {
        args.bind(socket);
    }
    // Last: a folder bound above (a program's install folder under `/tmp`, a writable path)
    // must not bring a secret back.
    for secret in c.hidden {
        args.pair("--ro-bind-try", Path::new("/dev/null"), secret);
    }
    args.one("--chdir", c.worktree);
    args.flags(&["--"]);
    args.0
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }

    fn one(&mut self, flag: &str, path: &Path) {
        self.0.push(flag.into());
        self.0.push(path.into());
    }

    fn pair(&mut self, flag: &str, from: &Path, to: &Path) {
        self.0.push(flag.into());
        self.0.push(from.into());
        self.0.push(to.into());
    }

    fn bind(&mut self, path: &Path) {
        self.pair("--bind", path, path);
    }
}

/// `path` with a leading `~/` replaced by the `HOME` that `var` gives, and a whole `$NAME`
/// by that variable; `None` when what it names is not set.
pub fn expand_path(path: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(name) = path.strip_prefix('$') {
        return var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    }
    let home = || var("HOME").filter(|v| !v.is_empty()).map(PathBuf::from);
    match path.strip_prefix("~/") {
        Some(rest) => home().map(|h| h.join(rest)),
        None if path == "~" => home(),
        None => Some(PathBuf::from(path)),
    }
}

/// Where a model API base URL (`http://127.0.0.1:8080/v1`, `https://api.example.com`) points:
/// its host and port, and whether the host is this machine's loopback.
pub fn url_endpoint(url: &str) -> Option<(String, u16, bool)> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
            (h.to_owned(), p.parse().ok()?)
        }
        _ => (authority.to_owned(), default_port),
    };
    if host.is_empty() {
        return None;
    }
    let loopback = host == "localhost" || host.starts_with("127.") || host == "[::1]";
    Some((host, port, loopback))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(c: &Confinement<'_>) -> Vec<String> {
        bwrap_args(c)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn position(args: &[String], window: &[&str]) -> usize {
        args.windows(window.len())
            .position(|w| w == window)
            .unwrap_or_else(|| panic!("{window:?} in {args:?}"))
    }

    #[test]
    fn the_state_folder_is_hidden_before_the_run_folder_and_socket_inside_it_are_bound() {
        let git = GitMounts {
            common: "/r/.git".into(),
            dot_git: "/r/.catalyst/worktrees/cat-1/.git".into(),
            admin: ("/r/.git/worktrees/cat-1".into(), "/run/admin".into()),
            objects: "/run/objects".into(),
            refs: ("/r/.git/refs/heads/catalyst".into(), "/run/refs".into()),
            logs: (
                "/r/.git/logs/refs/heads/catalyst".into(),
                "/run/logs".into(),
            ),
        };
        let writable = [PathBuf::from("/home/u/.claude")];
        let c = Confinement {
            worktree: Path::new("/r/.catalyst/worktrees/cat-1"),
            run_dir: Path::new("/r/.catalyst/runs/cat-1/implement/1"),
            state: Path::new("/r/.catalyst"),
            socket: Some(Path::new("/r/.catalyst/catalystd.sock")),
            net_sockets: Some(Path::new("/tmp/catalyst-net-x")),
            git: Some(&git),
            writable: &writable,
            readable: &[PathBuf::from("/tmp/ci/target")],
            hidden: &[PathBuf::from("/tmp/ci/target/github-token")],
            network: Network::ModelOnly,
        };
        let a = args(&c);
        let root = position(&a, &["--ro-bind", "/", "/"]);
        let hidden = position(&a, &["--tmpfs", "/r/.catalyst"]);
        let run = position(
            &a,
            &[
                "--bind",
                "/r/.catalyst/runs/cat-1/implement/1",
                "/r/.catalyst/runs/cat-1/implement/1",
            ],
        );
        let socket = position(
            &a,
            &[
                "--bind",
                "/r/.catalyst/catalystd.sock",
                "/r/.catalyst/catalystd.sock",
            ],
        );
        let tree = position(
            &a,
            &[
                "--bind",
                "/r/.catalyst/worktrees/cat-1",
                "/r/.catalyst/worktrees/cat-1",
            ],
        );
        assert!(root < hidden && hidden < run && hidden < socket && hidden < tree);
        position(&a, &["--bind", "/run/refs", "/r/.git/refs/heads/catalyst"]);
        position(&a, &["--bind-try", "/home/u/.claude", "/home/u/.claude"]);
        let readable = position(&a, &["--ro-bind-try", "/tmp/ci/target", "/tmp/ci/target"]);
        assert!(
            position(&a, &["--tmpfs", "/tmp"]) < readable,
            "over the private /tmp"
        );
        // A secret under a folder bound back (the install folder, a writable one) stays covered.
        let writable = position(&a, &["--bind-try", "/home/u/.claude", "/home/u/.claude"]);
        let secret = position(
            &a,
            &["--ro-bind-try", "/dev/null", "/tmp/ci/target/github-token"],
        );
        assert!(
            [root, hidden, run, socket, tree, readable, writable]
                .iter()
                .all(|&p| p < secret),
            "a secret is covered over every other mount"
        );
        assert!(
            position(&a, &["--tmpfs", "/tmp"])
                < position(
                    &a,
                    &["--bind", "/tmp/catalyst-net-x", "/tmp/catalyst-net-x"]
                ),
            "the short socket folder over the private /tmp"
        );
        assert!(a.contains(&"--unshare-net".to_owned()));
        position(&a, &["--unshare-user", "--cap-drop", "ALL"]);
        assert_eq!(a.last().map(String::as_str), Some("--"));
        let common = position(&a, &["--ro-bind", "/r/.git", "/r/.git"]);
        let admin = position(&a, &["--bind", "/run/admin", "/r/.git/worktrees/cat-1"]);
        assert!(
            common < admin,
            "the private parts go over the read-only git folder"
        );
        assert!(
            !a.iter().any(|x| x == "/r/.git/objects"),
            "the shared objects stay read-only"
        );
        let dot_git = position(
            &a,
            &[
                "--ro-bind",
                "/r/.catalyst/worktrees/cat-1/.git",
                "/r/.catalyst/worktrees/cat-1/.git",
            ],
        );
        assert!(
            tree < dot_git,
            "the .git file read-only over the writable worktree"
        );
        assert!(!a
            .iter()
            .any(|x| x == "/r/.git/config" || x == "/r/.git/hooks"));
    }

    #[test]
    fn only_an_open_network_keeps_the_hosts_network() {
        let c = |network| Confinement {
            worktree: Path::new("/w"),
            run_dir: Path::new("/run"),
            state: Path::new("/s"),
            socket: None,
            net_sockets: None,
            git: None,
            writable: &[],
            readable: &[],
            hidden: &[],
            network,
        };
        assert!(!args(&c(Network::Open)).contains(&"--unshare-net".to_owned()));
        assert!(args(&c(Network::None)).contains(&"--unshare-net".to_owned()));
    }

    #[test]
    fn a_tilde_is_the_agents_home_and_a_dollar_its_variable() {
        let env = |name: &str| match name {
            "HOME" => Some("/home/u".to_owned()),
            "CODEX_HOME" => Some("/srv/codex".to_owned()),
            _ => None,
        };
        let none = |_: &str| None;
        assert_eq!(
            expand_path("~/.claude", &env),
            Some("/home/u/.claude".into())
        );
        assert_eq!(expand_path("$CODEX_HOME", &env), Some("/srv/codex".into()));
        assert_eq!(expand_path("~/.claude", &none), None);
        assert_eq!(expand_path("$CODEX_HOME", &none), None);
        assert_eq!(expand_path("/opt/x", &none), Some("/opt/x".into()));
    }

    #[test]
    fn a_base_url_names_its_host_and_port() {
        assert_eq!(
            url_endpoint("http://127.0.0.1:8080/v1"),
            Some(("127.0.0.1".into(), 8080, true))
        );
        assert_eq!(
            url_endpoint("https://api.example.com"),
            Some(("api.example.com".into(), 443, false))
        );
        assert_eq!(
            url_endpoint("http://localhost/x"),
            Some(("localhost".into(), 80, true))
        );
        assert_eq!(url_endpoint("ftp://x"), None);
        assert_eq!(url_endpoint("nonsense"), None);
    }
}
