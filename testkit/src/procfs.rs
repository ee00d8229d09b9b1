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
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        let zombie = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim().starts_with('Z'))
            })
            .unwrap_or(true);
        if zombie {
            continue;
        }
        let Ok(environ) = std::fs::read(dir.join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|v| v == var.as_bytes()) {
            let cmdline = std::fs::read(dir.join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            found.push((pid, cmdline));
        }
    }
    found
}
