//! What `/proc` says about processes.

/// A `kB` figure from `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
pub fn vm_kb(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Processes still alive (not zombies) whose environment holds `var` (`NAME=value`), with
/// their command lines.
pub fn processes_with_env(var: &str) -> Vec<(i32, String)> {
    catalyst::daemon::agent::pids_with_env(|v| v == var.as_bytes())
        .into_iter()
        .filter_map(|pid| {
            let dir = std::path::Path::new("/proc").join(pid.to_string());
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            if rest.trim().starts_with('Z') {
                return None;
            }
            let cmdline = std::fs::read(dir.join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            Some((pid, cmdline))
        })
        .collect()
}

/// CPU time a process used, from `/proc/<pid>/stat`, in seconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu {
    /// Its own user time.
    pub user: f64,
    /// Its own system time.
    pub system: f64,
    /// User and system time of the children it has reaped.
    pub children: f64,
}

impl Cpu {
    /// Its own user and system time.
    pub fn own(&self) -> f64 {
        self.user + self.system
    }

    /// What was used from `earlier` to this.
    pub fn since(&self, earlier: &Cpu) -> Cpu {
        Cpu {
            user: self.user - earlier.user,
            system: self.system - earlier.system,
            children: self.children - earlier.children,
        }
    }
}

/// What `pid` has used so far; `None` when it is gone.
pub fn cpu(pid: u32) -> Option<Cpu> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    // After the command: state is field 3, utime 14, stime 15, cutime 16, cstime 17.
    let ticks: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let secs = |i: usize| ticks.get(i).copied().unwrap_or(0) as f64 / hz;
    Some(Cpu {
        user: secs(0),
        system: secs(1),
        children: secs(2) + secs(3),
    })
}
