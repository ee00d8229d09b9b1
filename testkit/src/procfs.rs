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
