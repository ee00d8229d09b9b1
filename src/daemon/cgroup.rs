//! A process limit per attempt: each agent runs in a control group of its own whose `pids.max`
//! is the config's `max_processes`, so a fork bomb stops at the limit instead of filling the
//! machine's process table. A PID namespace (the sandbox's) hides other processes but does not
//! limit how many an agent starts, and `RLIMIT_NPROC` does not bind a daemon running as root.
//!
//! The daemon needs a pids controller it may create groups in: cgroup v1's `pids` hierarchy
//! (writable by root), or its own cgroup v2 group with `pids` available (a systemd service with
//! `Delegate=yes`, or a user session's delegated `user@.service`). In v2 a group with
//! processes cannot hand controllers to child groups, so the daemon first moves itself into a
//! leaf `catalystd` beside the attempts' groups. Where neither exists, the limit is off and the
//! daemon says so once.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Attempt groups are named `catalyst-<daemon pid>-<n>`.
const PREFIX: &str = "catalyst-";

/// The leaf a cgroup v2 daemon moves itself into.
const DAEMON_LEAF: &str = "catalystd";

/// How many emptied attempt groups are kept for later attempts.
const KEPT: usize = 8;

/// Where attempt groups are made.
#[derive(Debug)]
pub struct PidsRoot {
    dir: PathBuf,
    version: Version,
    /// Groups whose attempts ended with nothing left in them, for the next attempts: making
    /// and removing a group per attempt cost a tenth of a millisecond of the kernel's time.
    kept: Mutex<Vec<Kept>>,
}

/// An emptied group kept for reuse.
#[derive(Debug)]
struct Kept {
    dir: PathBuf,
    join: File,
    limit: u32,
    /// Its `pids.events` count when it was emptied.
    refused: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

static ROOT: OnceLock<Result<PidsRoot, String>> = OnceLock::new();

/// The daemon's pids controller, found (and, for v2, prepared) once per process; the error
/// says why there is none.
pub fn pids() -> Result<&'static PidsRoot, &'static str> {
    ROOT.get_or_init(|| {
        let found = find();
        if let Ok(root) = &found {
            sweep(&root.dir);
        }
        found
    })
    .as_ref()
    .map_err(String::as_str)
}

/// Logs whether agents' process counts can be limited: once at load, so a machine where they
/// cannot says so where people look.
pub fn report(limit: Option<u32>) {
    match (limit, pids()) {
        (None, _) => {
            tracing::warn!("`max_processes = 0`: agents may start any number of processes")
        }
        (Some(limit), Ok(root)) => {
            tracing::debug!(limit, dir = %root.dir.display(), version = ?root.version, "agents' processes are limited by a control group");
        }
        (Some(_), Err(why)) => {
            tracing::warn!("agents' process counts cannot be limited on this machine ({why}); a fork bomb in an agent is stopped only by the time limits");
        }
    }
}

/// Removes the groups kept for later attempts: the daemon is stopping.
pub fn release_kept() {
    if let Some(Ok(root)) = ROOT.get() {
        let kept = std::mem::take(&mut *root.kept.lock().unwrap_or_else(|e| e.into_inner()));
        for group in kept {
            remove(group.dir);
        }
    }
}

/// One attempt's control group; dropping it kills what is left in it, then keeps it for a
/// later attempt when it is empty, or removes it.
#[derive(Debug)]
pub struct AttemptGroup {
    root: &'static PidsRoot,
    dir: PathBuf,
    /// The file a process joins the group by ([`AttemptGroup::join_path`]), kept open so the
    /// child can join between `fork` and `exec`; taken only by `drop`, which hands it to the
    /// kept group.
    join: Option<File>,
    limit: u32,
    /// The group's `pids.events` count when this attempt took it: the count is the group's,
    /// and a kept group serves several attempts.
    refused_before: u64,
}

impl PidsRoot {
    /// A group allowing `limit` processes (threads count too): one kept from an earlier
    /// attempt, else a new one.
    pub fn create(&'static self, limit: u32) -> io::Result<AttemptGroup> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner()).pop();
        if let Some(kept) = kept {
            if kept.limit == limit
                || fs::write(kept.dir.join("pids.max"), limit.to_string()).is_ok()
            {
                return Ok(AttemptGroup {
                    root: self,
                    dir: kept.dir,
                    join: Some(kept.join),
                    limit,
                    refused_before: kept.refused,
                });
            }
            remove(kept.dir);
        }
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = self.dir.join(name);
        fs::create_dir(&dir)?;
        let group = AttemptGroup {
            root: self,
            join: Some(
                OpenOptions::new()
                    .write(true)
                    .open(join_file(&dir, self.version))?,
            ),
            dir,
            limit,
            refused_before: 0,
        };
        fs::write(group.dir.join("pids.max"), limit.to_string())?;
        Ok(group)
    }
}

impl AttemptGroup {
    /// A handle on the group's join file ([`AttemptGroup::join_path`]) for a child to join
    /// it by, between `fork` and `exec`, writing [`JOIN_SELF`] (see
    /// `agent::spawn::ChildSetup`); closed on `exec`.
    pub fn joiner(&self) -> io::Result<File> {
        self.join
            .as_ref()
            .expect("the join file is open while the group lives")
            .try_clone()
    }

    /// The file a single-threaded process joins the group by, writing [`JOIN_SELF`] there:
    /// the group's `tasks` in cgroup v1, its `cgroup.procs` in v2.
    ///
    /// Moving a whole process (v1's `cgroup.procs`) takes the kernel's write lock on every
    /// process's group membership, which first waits for an RCU grace period (milliseconds),
    /// during which every `fork`, `exec` and `exit` on the machine waits too. Moving the
    /// calling thread itself (`0` written to v1's `tasks`) needs no such lock, and for a
    /// process of one thread it moves the process, in a small fraction of that. Cgroup v2 takes
    /// the lock either way (unless mounted with `favordynmods`).
    pub fn join_path(&self) -> PathBuf {
        join_file(&self.dir, self.root.version)
    }

    /// How many times a fork failed at the limit (`pids.events`) since this attempt took the
    /// group, if the kernel says.
    pub fn refused_forks(&self) -> Option<u64> {
        refused_count(&self.dir).map(|n| self.since_taken(n))
    }

    /// The part of the group's refused-fork `count` that is this attempt's.
    fn since_taken(&self, count: u64) -> u64 {
        count.saturating_sub(self.refused_before)
    }
}

impl Drop for AttemptGroup {
    fn drop(&mut self) {
        let refused = refused_count(&self.dir);
        if let Some(n) = refused.map(|n| self.since_taken(n)).filter(|n| *n > 0) {
            tracing::warn!(
                refused = n,
                "the attempt reached its process limit (`max_processes`)"
            );
        }
        let dir = std::mem::take(&mut self.dir);
        // A group found empty stays empty: only the daemon's own processes join a group.
        if let (Some(0), Some(refused), Some(join)) = (kill_all(&dir), refused, self.join.take()) {
            let mut kept = self.root.kept.lock().unwrap_or_else(|e| e.into_inner());
            if kept.len() < KEPT {
                kept.push(Kept {
                    dir,
                    join,
                    limit: self.limit,
                    refused,
                });
                return;
            }
        }
        remove(dir);
    }
}

/// A group's `pids.events` count of forks refused at its limit.
fn refused_count(dir: &Path) -> Option<u64> {
    let events = fs::read_to_string(dir.join("pids.events")).ok()?;
    events
        .lines()
        .find_map(|l| l.strip_prefix("max "))
        .and_then(|n| n.trim().parse().ok())
}

/// What a process writes to its group's [`AttemptGroup::join_path`] to join it: `0`, the
/// writer itself.
pub const JOIN_SELF: &[u8] = b"0";

fn join_file(dir: &Path, version: Version) -> PathBuf {
    dir.join(match version {
        Version::V1 => "tasks",
        Version::V2 => "cgroup.procs",
    })
}

/// Kills what is left in a group and removes it; a group whose processes are still being
/// reaped is removed from a thread that tries again for a few seconds.
fn remove(dir: PathBuf) {
    kill_all(&dir);
    if fs::remove_dir(&dir).is_ok() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("catalyst-cgroup-remove".into())
        .spawn(move || {
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(50));
                kill_all(&dir);
                if fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    return;
                }
            }
            tracing::warn!(dir = %dir.display(), "cannot remove an attempt's control group");
        });
}

/// SIGKILLs every process in the group at `dir`, and says how many there were (`None`: the
/// group cannot be read).
fn kill_all(dir: &Path) -> Option<usize> {
    let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) else {
        return None;
    };
    let mut found = 0;
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        found += 1;
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    Some(found)
}

/// Removes the attempt groups of daemons that are gone (killed before they could).
fn sweep(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if owner != std::process::id() && !Path::new(&format!("/proc/{owner}")).exists() {
            remove(entry.path());
        }
    }
}

fn find() -> Result<PidsRoot, String> {
    if !cfg!(target_os = "linux") {
        return Err("control groups exist only on Linux".into());
    }
    let cgroups = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let mounts = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mounts = parse_mounts(&mounts);
    let mut why = Vec::new();
    for (controllers, path) in parse_cgroups(&cgroups) {
        let (version, mount) = if controllers.is_empty() {
            (Version::V2, mounts.iter().find(|m| m.fstype == "cgroup2"))
        } else if controllers.split(',').any(|c| c == "pids") {
            (
                Version::V1,
                mounts
                    .iter()
                    .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "pids")),
            )
        } else {
            continue;
        };
        let Some(mount) = mount else {
            continue;
        };
        let relative = Path::new(path)
            .strip_prefix(&mount.root)
            .unwrap_or(Path::new(path));
        let dir = mount
            .point
            .join(relative.strip_prefix("/").unwrap_or(relative));
        let prepared = match version {
            Version::V1 => probe(&dir),
            Version::V2 => delegate(&dir),
        };
        match prepared {
            Ok(dir) => {
                return Ok(PidsRoot {
                    dir,
                    version,
                    kept: Mutex::new(Vec::new()),
                })
            }
            Err(e) => why.push(e),
        }
    }
    if why.is_empty() {
        why.push("no pids controller is mounted".into());
    }
    Err(why.join("; "))
}

/// Checks that a group can be made in `dir`.
fn probe(dir: &Path) -> Result<PathBuf, String> {
    let test = dir.join(format!("{PREFIX}{}-probe", std::process::id()));
    fs::create_dir(&test)
        .map_err(|e| format!("cannot create a control group in {}: {e}", dir.display()))?;
    let _ = fs::remove_dir(&test);
    Ok(dir.to_owned())
}

/// Prepares the daemon's own cgroup v2 group: moves the daemon into the leaf
/// [`DAEMON_LEAF`] and hands the pids controller to the groups beside it.
fn delegate(dir: &Path) -> Result<PathBuf, String> {
    let available = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    if !available.split_whitespace().any(|c| c == "pids") {
        return Err(format!(
            "the pids controller is not available in {} (run catalystd as a service with `Delegate=yes`)",
            dir.display()
        ));
    }
    let enabled = |dir: &Path| {
        fs::read_to_string(dir.join("cgroup.subtree_control"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|c| c == "pids")
    };
    // Already prepared (a second daemon in this process, or the daemon restarted in place).
    let parent = dir.parent().filter(|_| dir.ends_with(DAEMON_LEAF));
    if let Some(parent) = parent.filter(|p| enabled(p)) {
        return Ok(parent.to_owned());
    }
    let leaf = dir.join(DAEMON_LEAF);
    let cannot = |what: &str, e: io::Error| format!("cannot {what} in {}: {e}", dir.display());
    match fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(cannot("create a control group", e)),
    }
    fs::write(leaf.join("cgroup.procs"), std::process::id().to_string())
        .map_err(|e| cannot("move the daemon into its own control group", e))?;
    if !enabled(dir) {
        fs::write(dir.join("cgroup.subtree_control"), "+pids")
            .map_err(|e| cannot("enable the pids controller", e))?;
    }
    Ok(dir.to_owned())
}

/// One line of `/proc/self/mountinfo`, the fields used here.
#[derive(Debug, PartialEq)]
struct Mount {
    root: PathBuf,
    point: PathBuf,
    fstype: String,
    options: String,
}

fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fields: Vec<&str> = before.split(' ').collect();
            let mut rest = after.split(' ');
            Some(Mount {
                root: PathBuf::from(unescape(fields.get(3)?)),
                point: PathBuf::from(unescape(fields.get(4)?)),
                fstype: rest.next()?.to_owned(),
                options: rest.nth(1).unwrap_or_default().to_owned(),
            })
        })
        .collect()
}

/// `/proc/self/cgroup` as (controllers, path): `""` for the v2 line `0::/path`.
fn parse_cgroups(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            Some((parts.next()?, parts.next()?))
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as octal escapes (`\040`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 4 <= bytes.len()
            && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit)
        {
            let code =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::agent::ChildSetup;
    use tokio::process::Command;

    #[test]
    fn mountinfo_and_cgroup_lines_are_read() {
        let mounts = parse_mounts(
            "35 25 0:30 / /sys/fs/cgroup/pids rw,relatime shared:12 - cgroup cgroup rw,pids\n\
             36 25 0:31 /user.slice /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n\
             37 25 0:32 / /mnt/a\\040b rw - ext4 /dev/sda1 rw\n",
        );
        assert_eq!(mounts.len(), 3);
        assert_eq!(mounts[0].fstype, "cgroup");
        assert_eq!(mounts[0].options, "rw,pids");
        assert_eq!(mounts[1].root, PathBuf::from("/user.slice"));
        assert_eq!(mounts[2].point, PathBuf::from("/mnt/a b"));
        assert_eq!(
            parse_cgroups("8:pids:/docker/x\n0::/user.slice/a.scope\n"),
            [("pids", "/docker/x"), ("", "/user.slice/a.scope")]
        );
    }

    /// A root of its own over the machine's, so that no other test takes its kept groups.
    fn own_root() -> Option<&'static PidsRoot> {
        let Ok(root) = pids() else {
            println!("SKIPPED: no control group for process limits here");
            return None;
        };
        Some(Box::leak(Box::new(PidsRoot {
            dir: root.dir.clone(),
            version: root.version,
            kept: Mutex::new(Vec::new()),
        })))
    }

    fn limit_of(group: &AttemptGroup) -> String {
        let max = fs::read_to_string(group.dir.join("pids.max")).expect("pids.max");
        max.trim().to_owned()
    }

    #[test]
    fn an_emptied_group_is_kept_and_serves_the_next_attempt_with_its_limit() {
        let Some(root) = own_root() else { return };
        let group = root.create(8).expect("create a group");
        let dir = group.dir.clone();
        assert_eq!(limit_of(&group), "8");
        assert_eq!(group.refused_forks(), Some(0));
        drop(group);
        assert!(dir.exists(), "an empty group is kept");
        let again = root.create(16).expect("take the kept group");
        assert_eq!(again.dir, dir, "the kept group serves the next attempt");
        assert_eq!(limit_of(&again), "16");
        let other = root.create(16).expect("create a second group");
        assert_ne!(other.dir, dir);
        let other_dir = other.dir.clone();
        drop((again, other));
        for kept in root.kept.lock().expect("kept").drain(..) {
            remove(kept.dir);
        }
        assert!(!dir.exists() && !other_dir.exists());
    }

    #[tokio::test]
    async fn a_kept_group_counts_only_the_next_attempts_refused_forks() {
        let Some(root) = own_root() else { return };
        let group = root.create(1).expect("create a group");
        let mut command = Command::new("sh");
        command.args(["-c", "true & wait"]);
        ChildSetup::default()
            .join(&group)
            .expect("the join file")
            .apply(&mut command);
        let _ = command.status().await.expect("sh ran");
        let refused = group.refused_forks().expect("pids.events");
        assert!(refused > 0, "a fork over the limit of 1 was not refused");
        let dir = group.dir.clone();
        drop(group);
        let again = root.create(1).expect("take the kept group");
        assert_eq!(again.dir, dir);
        assert_eq!(
            refused_count(&dir),
            Some(refused),
            "the group's own count stays"
        );
        assert_eq!(
            again.refused_forks(),
            Some(0),
            "this attempt refused nothing"
        );
        drop(again);
        for kept in root.kept.lock().expect("kept").drain(..) {
            remove(kept.dir);
        }
    }

    #[tokio::test]
    async fn a_group_with_a_process_left_is_removed_not_kept() {
        let Some(root) = own_root() else { return };
        let group = root.create(8).expect("create a group");
        let mut command = Command::new("sleep");
        command.arg("30").kill_on_drop(true);
        ChildSetup::default()
            .join(&group)
            .expect("the join file")
            .apply(&mut command);
        let mut child = command.spawn().expect("spawn");
        let dir = group.dir.clone();
        drop(group);
        assert!(root.kept.lock().expect("kept").is_empty());
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("the process left in the group was killed")
            .expect("wait");
        assert!(!status.success());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        // Removed by the thread that tries again every 50 ms; looked at every 5 ms.
        while dir.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{} is left",
                dir.display()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_process_joins_its_group_by_the_join_file() {
        let Ok(root) = pids() else {
            println!("SKIPPED: no control group for process limits here");
            return;
        };
        let group = root.create(8).expect("create a group");
        let mut command = Command::new("sleep");
        command.arg("30").kill_on_drop(true);
        ChildSetup::default()
            .join(&group)
            .expect("the join file")
            .apply(&mut command);
        let child = command.spawn().expect("spawn");
        let pid = child.id().expect("pid").to_string();
        let members = fs::read_to_string(group.dir.join("cgroup.procs")).expect("cgroup.procs");
        assert!(
            members.lines().any(|l| l.trim() == pid),
            "{pid} is not in the group: {members:?}"
        );
        let own = fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("its cgroup");
        let name = group
            .dir
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(own.contains(&name), "{own}");
    }
}
