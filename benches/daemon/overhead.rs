//! The `overhead` row: beads of one agent step and the merge through the daemon against the
//! floor, the same work done for each bead without it; unconfined (the target) and in the
//! default sandbox; with the CPU each run used.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use catalyst::daemon::worktree::{MergeGuard, MergeOutcome, Repo};
use catalyst::domain::id::BeadId;
use catalyst::domain::model::Role;
use catalyst::domain::prompt::{PromptSet, PromptVars};
use catalyst_testkit::{catalyst_bin, procfs, TestDaemon, Workspace};
use serde_json::Value;

use crate::git::default_landing;
use crate::{median, row, runtime, stop, workspace};

/// How many times the floor and the two daemon runs are measured, one after the other: this
/// machine's speed drifts by a tenth or more within minutes, so a ratio is taken within each
/// round and the rows print the medians.
const ROUNDS: usize = 5;

pub fn overhead(quick: bool) {
    let n = if quick { 50 } else { 500 };
    let rounds = if quick { 1 } else { ROUNDS };
    let rt = runtime();
    let per_bead = |d: Duration| d.as_secs_f64() * 1e3 / n as f64;
    let mut measured: Vec<Round> = Vec::new();
    for round in 1..=rounds {
        let cpu = Cpu::now();
        let floor = floor_run(&workspace("max_agents = 2"), n);
        let floor = (floor, cpu.since());
        let daemon = |sandbox: bool| {
            let ws = workspace("max_agents = 2");
            if !sandbox {
                unconfine(&ws);
            }
            let cpu = Cpu::now();
            let took = rt.block_on(async { catalyst_run(ws.start().await, n, 0).await });
            (took, cpu.since())
        };
        let (none, sandboxed) = (daemon(false), daemon(true));
        println!(
            "  round {round}: the floor {:.2?} ({:.2}ms CPU a bead), sandbox none {:.2?} ({:.2}ms; {:.2}x), default sandbox {:.2?} ({:.2}ms; {:.2}x)",
            floor.0,
            per_bead(floor.1),
            none.0,
            per_bead(none.1),
            ratio(none.0, floor.0),
            sandboxed.0,
            per_bead(sandboxed.1),
            ratio(sandboxed.0, floor.0),
        );
        measured.push([floor, none, sandboxed]);
    }
    let of_rounds = if rounds > 1 {
        format!(", median of {rounds} rounds")
    } else {
        String::new()
    };
    let floor_time = median(&each(&measured, |m| m[0].0.as_secs_f64()));
    let floor_cpu = median(&each(&measured, |m| per_bead(m[0].1)));
    for (which, how) in [(1, "sandbox none"), (2, "default sandbox")] {
        let time = median(&each(&measured, |m| m[which].0.as_secs_f64()));
        let cpu = median(&each(&measured, |m| per_bead(m[which].1)));
        let times = median(&each(&measured, |m| ratio(m[which].0, m[0].0)));
        let cpus = median(&each(&measured, |m| ratio(m[which].1, m[0].1)));
        // No target: an instant agent makes the daemon's share look large; the `cpu` row
        // holds what an attempt costs the daemon.
        let goal = "-";
        row(
            &format!("overhead: {n} beads (one agent step, merge), max_agents 2, {how}{of_rounds}"),
            format!("{time:.2}s"),
            goal,
            &format!("same work without the daemon: {floor_time:.2}s"),
            times,
        );
        row(
            &format!("overhead: CPU per bead (every process, user + system), {how}"),
            format!("{cpu:.2}ms"),
            "-",
            &format!("the floor: {floor_cpu:.2}ms"),
            cpus,
        );
    }
}

/// One round: the floor, the daemon unconfined, the daemon in the default sandbox; each as
/// (wall time, CPU).
type Round = [(Duration, Duration); 3];

/// A figure of each round.
fn each(rounds: &[Round], figure: impl Fn(&Round) -> f64) -> Vec<f64> {
    rounds.iter().map(figure).collect()
}

fn ratio(ours: Duration, floor: Duration) -> f64 {
    ours.as_secs_f64() / floor.as_secs_f64()
}

/// CPU time used so far by this process and the children it has waited for (the agents, the
/// hooks they ran, git), user and system, as `/proc` counts it.
struct Cpu(procfs::Cpu);

impl Cpu {
    fn now() -> Cpu {
        Cpu(procfs::cpu(std::process::id()).expect("this process's /proc stat"))
    }

    fn since(&self) -> Duration {
        let used = Cpu::now().0.since(&self.0);
        Duration::from_secs_f64((used.own() + used.children).max(0.0))
    }
}

/// Runs the workspace's stub agents outside the sandbox, as a config with `sandbox = "none"`
/// does.
pub fn unconfine(ws: &Workspace) {
    let config = std::fs::read_to_string(ws.paths.config()).expect("config");
    std::fs::write(ws.paths.config(), catalyst::cli::demo::unconfined(&config)).expect("config");
}

/// Submits `n` beads to `daemon` through the socket, with `subscribers` clients following
/// every event, waits until every worktree is removed, and stops it.
pub async fn catalyst_run(daemon: TestDaemon, n: usize, subscribers: usize) -> Duration {
    let mut client = daemon.client().await;
    let mut done = daemon.subscribe_types(0, &["worktree.removed"]).await;
    let mut streams = Vec::new();
    for _ in 0..subscribers {
        let (lines, write) = daemon.subscribe(0).await.into_client().into_lines();
        let read = lines.into_inner().into_inner();
        let stream = read.reunite(write).expect("one stream").into_std();
        streams.push(stream.expect("a socket"));
    }
    let readers = (!streams.is_empty()).then(|| std::thread::spawn(move || lean_readers(streams)));
    let took = crate::run_beads(&mut client, &mut done, n).await;
    stop(daemon).await;
    if let Some(readers) = readers {
        readers.join().expect("the readers ended with the daemon");
    }
    took
}

/// Reads every subscription to its end and does nothing with the bytes, so that what is
/// measured is the daemon serving them, not a hundred clients splitting and parsing lines on
/// the same two cores. One thread follows them all, as one client program following many
/// streams would: a burst of writes to every subscriber is one wake-up of it, not one of a
/// runtime's worker per subscriber.
fn lean_readers(streams: Vec<std::os::unix::net::UnixStream>) {
    use tokio::io::AsyncReadExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut readers = tokio::task::JoinSet::new();
        for stream in streams {
            let mut stream = tokio::net::UnixStream::from_std(stream).expect("a socket");
            readers.spawn(async move {
                let mut buf = vec![0u8; 1 << 16];
                while stream.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            });
        }
        while readers.join_next().await.is_some() {}
    });
}

/// The floor: the same work for each bead without the daemon, two beads at a time.
fn floor_run(ws: &Workspace, n: usize) -> Duration {
    let repo = Repo::open(&ws.repo, &ws.paths.worktrees()).expect("repo");
    let prompts = PromptSet::builtin();
    std::fs::write(ws.root.join("settings.json"), "{}").expect("settings");
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let (repo, next, prompts) = (repo.clone(), next.clone(), &prompts);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return;
                }
                floor_bead(ws, &repo, prompts, i);
            });
        }
    });
    start.elapsed()
}

/// One bead of the floor: a worktree, the merge prompt, the stub agent, commit, merge, remove.
fn floor_bead(ws: &Workspace, repo: &Repo, prompts: &PromptSet, i: usize) {
    let bead = BeadId::new(&format!("floor-{i}")).expect("id");
    let tree = repo.create(&bead, "main").expect("create");
    let vars = PromptVars {
        bead_id: bead.clone(),
        step_id: bead.step("merge").expect("step"),
        step: "merge".into(),
        role: Role::Merge,
        model: "opus".into(),
        attempt: 1,
        iteration: 0,
        worktree: tree.path.clone(),
        branch: tree.branch.clone(),
        target_branch: "main".into(),
        context_md: ws.root.join("context.md"),
        context_json: ws.root.join("context.json"),
        run_dir: ws.root.clone(),
        result_contract: prompts.contract().to_owned(),
    };
    let prompt = prompts.render("merge", &vars).expect("prompt");
    let summary = run_stub(ws, &tree.path, &bead, &prompt);
    repo.commit_all(&bead, &format!("{bead} merge: {summary}"))
        .expect("commit");
    let merged = repo
        .merge_into_target(&bead, "main", &MergeGuard::none(), &default_landing())
        .expect("merge");
    assert!(
        matches!(
            merged,
            MergeOutcome::Merged { .. } | MergeOutcome::AlreadyMerged
        ),
        "{merged:?}"
    );
    repo.remove(&bead).expect("remove");
}

/// Runs stub-claude as the daemon would, and returns its result's summary.
fn run_stub(ws: &Workspace, worktree: &Path, bead: &BeadId, prompt: &str) -> String {
    let mut child = Command::new(catalyst_bin())
        .args([
            "__stub-claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "opus",
            "--settings",
        ])
        .arg(ws.root.join("settings.json"))
        .current_dir(worktree)
        .env("STUB_CLAUDE_SCENARIO", &ws.scenario)
        .env("STUB_CLAUDE_LOG", ws.root.join("floor.log"))
        .env("CATALYST_ROLE", "merge")
        .env("CATALYST_BEAD", bead.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("stub");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(prompt.as_bytes()).expect("prompt");
    drop(stdin);
    let out = child.wait_with_output().expect("stub output");
    let text = String::from_utf8_lossy(&out.stdout);
    let last: Value =
        serde_json::from_str(text.lines().last().expect("a result line")).expect("json");
    let result = catalyst::domain::result::parse(
        last["result"].as_str().expect("result"),
        Some(Role::Merge),
    )
    .expect("valid block");
    result.summary
}
