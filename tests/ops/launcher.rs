//! Agents run in processes started ahead of their attempts (clones of the daemon on x86-64
//! Linux, `catalyst __exec` shims elsewhere): the agent is that process itself once it has
//! the command line, with its niceness, the step's environment and the prompt on stdin.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use catalyst::daemon::agent::{run_launched, Launcher, RunSpec};
use catalyst::domain::agent::profile::{AgentProfile, OutputFormat, StdinMode};
use catalyst_testkit::catalyst_bin;
use catalyst_testkit::poll::eventually;
use tokio_util::sync::CancellationToken;

/// What the processes started ahead at `NICE` above this process look like while they wait:
/// this process's children that are still `shim` (this test's own link to `catalyst`), or
/// still clones of this process, named after the thread that started them. Only this test
/// starts them at that niceness, so no other test's count.
fn started_ahead(shim: &Path) -> Vec<u32> {
    let shim = shim.as_os_str().as_bytes();
    let own = std::process::id().to_string();
    let nice = niceness(&std::fs::read_to_string("/proc/self/stat").expect("stat")) + NICE;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
            let parent = status.lines().find_map(|l| l.strip_prefix("PPid:"))?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            if parent.trim() != own || niceness(&stat) != nice.min(19) {
                return None;
            }
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let program = cmdline.split(|b| *b == 0).next()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            (program == shim || comm.trim() == "catalyst-agent-").then_some(pid)
        })
        .collect()
}

/// The niceness this test's launcher adds.
const NICE: i32 = 3;

/// The niceness field of a `/proc/<pid>/stat` line.
fn niceness(stat: &str) -> i32 {
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    fields[16].parse().expect("niceness")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_in_a_process_started_before_its_attempt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (worktree, run_dir) = (dir.path().join("tree"), dir.path().join("run"));
    std::fs::create_dir_all(&worktree).expect("worktree");
    let shim = dir.path().join("shim");
    std::os::unix::fs::symlink(catalyst_bin(), &shim).expect("link");
    let launcher = Launcher::new(shim.clone(), NICE as u32, None);
    let early = launcher.take();
    // The one taken and the two started for the attempts after it.
    let waiting = eventually("three processes waiting", async || {
        let found = started_ahead(&shim);
        (found.len() == 3).then_some(found)
    })
    .await;
    let script = "echo $$; cut -d')' -f2 /proc/self/stat; echo \"$CATALYST_STEP\"; cat";
    let spec = RunSpec {
        profile: AgentProfile {
            command: vec!["sh".into(), "-c".into(), script.into()],
            format: OutputFormat::Text,
            stdin: StdinMode::Prompt,
            ..AgentProfile::shell()
        },
        model: "sonnet".into(),
        prompt: "the prompt".into(),
        worktree,
        run_dir,
        env: vec![("CATALYST_STEP".into(), "cat-1.work".into())],
        settings_path: None,
        timeout: Duration::from_secs(60),
        stall_timeout: Duration::from_secs(60),
        grace: Duration::from_secs(5),
        output_cap: 1024 * 1024,
        max_processes: None,
        nice: NICE as u32,
        sandbox: None,
        conversation: None,
    };
    let report = run_launched(spec, CancellationToken::new(), early).await;
    let out = report.final_message.expect("output");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let pid: u32 = lines[0].parse().expect("pid");
    assert!(
        waiting.contains(&pid),
        "the agent ran in a process started before its attempt: {pid} not in {waiting:?}"
    );
    let own = niceness(&std::fs::read_to_string("/proc/self/stat").expect("stat"));
    assert_eq!(niceness(&format!("){}", lines[1])), (own + NICE).min(19));
    assert_eq!(
        lines[2], "cat-1.work",
        "the step's environment came in the message"
    );
    assert_eq!(
        lines[3], "the prompt",
        "the prompt followed the message on stdin"
    );
    drop(launcher);
    eventually(
        "the waiting processes gone with their launcher",
        async || started_ahead(&shim).is_empty().then_some(()),
    )
    .await;
}
