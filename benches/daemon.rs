//! Daemon benchmarks: the orchestrator's own cost against the floor and against pueue,
//! dispatch latency, event fan-out, and a 100,000-bead store's start-up, memory and idle CPU.
//! Every row prints its figure, its target and its ratio to a baseline measured in this run.
//!
//! Run: `cargo bench --bench daemon` (all rows), `cargo bench --bench daemon -- ROW…` with
//! ROW one of `overhead chain latency fanout scale`, and `--quick` for small sizes.
//! The `chain` row needs pueue 4.0.4, which `benches/pueue.sh` builds from crates.io into
//! `target/bench-cache/`; without it the row says so and is skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use catalyst::cli::client::Client;
use catalyst::daemon::worktree::{MergeOutcome, Repo};
use catalyst::daemon::{self, Paths};
use catalyst::domain::id::BeadId;
use catalyst::domain::prompt::{PromptSet, PromptVars};
use catalyst::protocol::{BeadInput, Method, PauseParams, SubscribeParams};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The same allocator as `catalystd` (the scale row compares its start-up with `Store::open`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CATALYST: &str = env!("CARGO_BIN_EXE_catalyst");
const CATALYSTD: &str = env!("CARGO_BIN_EXE_catalystd");
const WAIT: Duration = Duration::from_secs(600);

/// A formula of one merge step: the agent runs, the daemon commits, fast-forwards the target
/// and removes the worktree, the same work the floor program does.
const ONE_STEP: &str =
    "formula = \"one\"\n[[steps]]\nid = \"merge\"\ntitle = \"Merge\"\nrole = \"merge\"\n";

struct Workspace {
    /// Removed on drop, unless `BENCH_KEEP` is set (then kept for a look at the journal).
    _dir: Option<tempfile::TempDir>,
    root: PathBuf,
    repo: PathBuf,
    paths: Paths,
}

impl Workspace {
    fn new(config_extra: &str) -> Workspace {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical");
        let repo = root.join("repo");
        std::fs::create_dir_all(&repo).expect("repo");
        catalyst::cli::demo::init_repo(&repo).expect("init");
        let paths = Paths::new(&repo);
        std::fs::create_dir_all(paths.state.join("formulas")).expect("state");
        std::fs::write(
            paths.state.join("formulas").join("one.formula.toml"),
            ONE_STEP,
        )
        .expect("formula");
        std::fs::write(root.join("scenario.toml"), "").expect("scenario");
        let config = catalyst::cli::demo::stub_config(
            &[CATALYST.to_owned(), "__stub-claude".to_owned()],
            &root.join("scenario.toml"),
            &root.join("agents.log"),
        );
        std::fs::write(
            paths.config(),
            format!("{config}\ndefault_formula = \"one\"\n{config_extra}\n"),
        )
        .expect("config");
        let dir = if std::env::var_os("BENCH_KEEP").is_some() {
            eprintln!("keeping {}", dir.keep().display());
            None
        } else {
            Some(dir)
        };
        Workspace {
            _dir: dir,
            root,
            repo,
            paths,
        }
    }

    /// Runs the daemon in-process on this workspace.
    async fn start(&self) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let shutdown = CancellationToken::new();
        let (paths, token) = (self.paths.clone(), shutdown.clone());
        // Bound before the task starts, so the bench's clients connect without retrying.
        let bound = daemon::bind(&paths).expect("lock and bind");
        let task = tokio::spawn(async move {
            if let Err(e) = bound.run(token, paths).await {
                eprintln!("daemon failed: {e}");
            }
        });
        (shutdown, task)
    }
}

async fn connect(paths: &Paths) -> Client {
    let deadline = Instant::now() + WAIT;
    loop {
        match Client::connect(&paths.socket()).await {
            Ok(mut c) => {
                if c.call(&Method::Status).await.is_ok() {
                    return c;
                }
            }
            Err(e) if Instant::now() > deadline => panic!("cannot connect: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

async fn subscribe(paths: &Paths, since: u64, types: &[&str]) -> Client {
    let mut c = connect(paths).await;
    let types = (!types.is_empty()).then(|| types.iter().map(|t| t.to_string()).collect());
    c.call(&Method::Subscribe(SubscribeParams {
        since: Some(since),
        bead: None,
        types,
        follow: true,
    }))
    .await
    .expect("subscribe");
    c
}

/// Reads events until `n` have matched `pred`.
async fn count_events(sub: &mut Client, n: usize, pred: impl Fn(&Value) -> bool) {
    let mut seen = 0;
    while seen < n {
        let e = sub
            .next_value()
            .await
            .expect("events")
            .expect("stream open");
        if pred(&e) {
            seen += 1;
        }
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn row(name: &str, value: String, target: &str, baseline: &str, ratio: f64) {
    println!("{name:<48} {value:>14}  target {target:<16} {ratio:>7.2}x  baseline: {baseline}");
}

/// Submits `n` beads through the socket and waits until every worktree is removed.
async fn catalyst_run(ws: &Workspace, n: usize, subscribers: usize) -> Duration {
    let (shutdown, task) = ws.start().await;
    let mut client = connect(&ws.paths).await;
    let mut done = subscribe(&ws.paths, 0, &["worktree.removed"]).await;
    let mut others = Vec::new();
    for _ in 0..subscribers {
        let mut sub = subscribe(&ws.paths, 0, &[]).await;
        others.push(tokio::spawn(async move {
            while let Ok(Some(_)) = sub.next_value().await {}
        }));
    }
    let beads: Vec<BeadInput> = (0..n)
        .map(|i| BeadInput {
            title: format!("bead {i}"),
            ..Default::default()
        })
        .collect();
    let start = Instant::now();
    client.call(&Method::Submit(beads)).await.expect("submit");
    tokio::time::timeout(WAIT, count_events(&mut done, n, |_| true))
        .await
        .expect("all merged");
    let took = start.elapsed();
    shutdown.cancel();
    let _ = task.await;
    for o in others {
        o.abort();
    }
    took
}

/// The floor: the same work for each bead without the daemon, two beads at a time.
fn floor_run(ws: &Workspace, n: usize) -> Duration {
    let repo = Repo::open(&ws.repo, &ws.paths.worktrees()).expect("repo");
    let prompts = PromptSet::builtin();
    let settings = ws.root.join("settings.json");
    std::fs::write(&settings, "{}").expect("settings");
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let (repo, next, prompts, settings) = (repo.clone(), next.clone(), &prompts, &settings);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return;
                }
                let bead = BeadId::new(&format!("floor-{i}")).expect("id");
                let tree = repo.create(&bead, "main").expect("create");
                let vars = PromptVars {
                    bead_id: bead.clone(),
                    step_id: bead.step("merge").expect("step"),
                    step: "merge".into(),
                    role: catalyst::domain::model::Role::Merge,
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
                let mut child = Command::new(CATALYST)
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
                    .arg(settings)
                    .current_dir(&tree.path)
                    .env("STUB_CLAUDE_SCENARIO", ws.root.join("scenario.toml"))
                    .env("STUB_CLAUDE_LOG", ws.root.join("floor.log"))
                    .env("CATALYST_ROLE", "merge")
                    .env("CATALYST_BEAD", bead.as_str())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("stub");
                {
                    use std::io::Write;
                    let mut stdin = child.stdin.take().expect("stdin");
                    stdin.write_all(prompt.as_bytes()).expect("prompt");
                }
                let out = child.wait_with_output().expect("stub output");
                let text = String::from_utf8_lossy(&out.stdout);
                let last: Value = serde_json::from_str(text.lines().last().expect("a result line"))
                    .expect("json");
                let result = catalyst::domain::result::parse(
                    last["result"].as_str().expect("result"),
                    Some(catalyst::domain::model::Role::Merge),
                )
                .expect("valid block");
                repo.commit_all(&bead, &format!("{bead} merge: {}", result.summary))
                    .expect("commit");
                let merged = repo.merge_into_target(&bead, "main").expect("merge");
                assert!(
                    matches!(
                        merged,
                        MergeOutcome::Merged { .. } | MergeOutcome::AlreadyMerged
                    ),
                    "{merged:?}"
                );
                repo.remove(&bead).expect("remove");
            });
        }
    });
    start.elapsed()
}

fn overhead(quick: bool) {
    let n = if quick { 50 } else { 500 };
    let rt = runtime();
    let floor = floor_run(&Workspace::new("max_agents = 2"), n);
    let ws = Workspace::new("max_agents = 2");
    let ours = rt.block_on(catalyst_run(&ws, n, 0));
    row(
        &format!("overhead: {n} one-step beads, max_agents 2"),
        format!("{:.2?}", ours),
        "<= 1.2x floor",
        &format!("same work without the daemon: {floor:.2?}"),
        ours.as_secs_f64() / floor.as_secs_f64(),
    );
}

fn pueue_bin() -> Option<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-cache/pueue-4.0.4/bin");
    let (pueue, pueued) = (root.join("pueue"), root.join("pueued"));
    (pueue.exists() && pueued.exists()).then_some((pueue, pueued))
}

fn chain(quick: bool) {
    let n = if quick { 20 } else { 200 };
    let Some((pueue, pueued)) = pueue_bin() else {
        println!("chain: skipped: pueue 4.0.4 is not built (run benches/pueue.sh)");
        return;
    };
    let rt = runtime();
    let ws = Workspace::new("max_agents = 2");
    let ours = rt.block_on(async {
        let (shutdown, task) = ws.start().await;
        let mut client = connect(&ws.paths).await;
        client
            .call(&Method::Pause(PauseParams { model: None }))
            .await
            .expect("pause");
        let beads: Vec<BeadInput> = (0..n)
            .map(|i| BeadInput {
                id: Some(format!("chain-{i}")),
                title: format!("link {i}"),
                after: if i == 0 {
                    vec![]
                } else {
                    vec![format!("chain-{}", i - 1)]
                },
                ..Default::default()
            })
            .collect();
        client.call(&Method::Submit(beads)).await.expect("submit");
        let mut closed = subscribe(&ws.paths, 0, &["bead.status"]).await;
        let last = format!("chain-{}", n - 1);
        let start = Instant::now();
        client
            .call(&Method::Resume(PauseParams { model: None }))
            .await
            .expect("resume");
        tokio::time::timeout(
            WAIT,
            count_events(&mut closed, 1, |e| {
                e["id"] == last.as_str() && e["status"] == "closed"
            }),
        )
        .await
        .expect("chain done");
        let took = start.elapsed();
        shutdown.cancel();
        let _ = task.await;
        took
    });
    let theirs = pueue_chain(&pueue, &pueued, n);
    row(
        &format!("chain: {n} beads each after the previous"),
        format!("{ours:.2?}"),
        ">= 5x faster",
        &format!("pueue 4.0.4, {n} tasks each --after the previous: {theirs:.2?}"),
        ours.as_secs_f64() / theirs.as_secs_f64(),
    );
}

/// pueue with its own config, socket and state in a temporary folder.
fn pueue_chain(pueue: &Path, pueued: &Path, n: usize) -> Duration {
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("pueue.yml");
    std::fs::create_dir_all(dir.path().join("run")).expect("pueue runtime dir");
    std::fs::create_dir_all(dir.path().join("data")).expect("pueue data dir");
    std::fs::write(
        &config,
        format!(
            "shared:\n  pueue_directory: {0}/data\n  runtime_directory: {0}/run\n  use_unix_socket: true\ndaemon:\n  default_parallel_tasks: 1\n",
            dir.path().display()
        ),
    )
    .expect("pueue config");
    let mut daemon = Command::new(pueued)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pueued");
    let run = |args: &[&str]| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new(pueue)
                .arg("--config")
                .arg(&config)
                .args(args)
                .output()
                .expect("pueue");
            if out.status.success() {
                return String::from_utf8_lossy(&out.stdout).trim().to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "pueue {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    run(&["pause"]);
    let mut prev: Option<String> = None;
    for _ in 0..n {
        let mut args = vec!["add", "--print-task-id"];
        if let Some(p) = &prev {
            args.extend(["--after", p.as_str()]);
        }
        args.extend(["--", "true"]);
        prev = Some(run(&args));
    }
    let start = Instant::now();
    run(&["start"]);
    run(&["wait"]);
    let took = start.elapsed();
    let _ = daemon.kill();
    let _ = daemon.wait();
    took
}

fn latency(quick: bool) {
    let n = if quick { 20 } else { 200 };
    let rt = runtime();
    let ws = Workspace::new("max_agents = 64");
    rt.block_on(async {
        let (shutdown, task) = ws.start().await;
        let mut client = connect(&ws.paths).await;
        let mut rtt = Vec::new();
        for _ in 0..n {
            let t = Instant::now();
            client.call(&Method::Status).await.expect("status");
            rtt.push(t.elapsed());
        }
        rtt.sort();
        let mut dispatched = subscribe(&ws.paths, 0, &["step.dispatched"]).await;
        let mut inbox = Vec::new();
        for i in 0..n {
            let id = format!("inbox-{i}");
            let tmp = ws.paths.inbox().join(format!(".{id}.tmp"));
            std::fs::write(&tmp, format!("{{\"id\":\"{id}\",\"title\":\"t\"}}")).expect("write");
            let t = Instant::now();
            std::fs::rename(&tmp, ws.paths.inbox().join(format!("{id}.json"))).expect("rename");
            count_events(&mut dispatched, 1, |e| e["bead"] == id.as_str()).await;
            inbox.push(t.elapsed());
        }
        let mut submit = Vec::new();
        for i in 0..n {
            let id = format!("submit-{i}");
            let input = BeadInput {
                id: Some(id.clone()),
                title: "t".into(),
                ..Default::default()
            };
            client
                .call(&Method::Submit(vec![input]))
                .await
                .expect("submit");
            let t = Instant::now();
            count_events(&mut dispatched, 1, |e| e["bead"] == id.as_str()).await;
            submit.push(t.elapsed());
        }
        inbox.sort();
        submit.sort();
        let base = percentile(&rtt, 50);
        for (what, v) in [
            ("inbox file renamed in", &inbox),
            ("ctl submit answered", &submit),
        ] {
            for p in [50, 99] {
                row(
                    &format!("latency: {what} -> step.dispatched p{p}"),
                    format!("{:.2?}", percentile(v, p)),
                    if p == 99 { "<= 50ms" } else { "-" },
                    &format!("status round trip p50: {base:.2?}"),
                    percentile(v, p).as_secs_f64() / base.as_secs_f64(),
                );
            }
        }
        shutdown.cancel();
        let _ = task.await;
    });
}

fn fanout(quick: bool) {
    let (subscribers, events) = if quick { (20, 1_000) } else { (100, 10_000) };
    let rt = runtime();
    let ws = Workspace::new("max_agents = 2");
    rt.block_on(async {
        let (shutdown, task) = ws.start().await;
        let mut client = connect(&ws.paths).await;
        client
            .call(&Method::Pause(PauseParams { model: None }))
            .await
            .expect("pause");
        let seq = client.call(&Method::Status).await.expect("status")["seq"]
            .as_u64()
            .unwrap_or(0);
        let mut tasks = Vec::new();
        for _ in 0..subscribers {
            // A lean reader (raw lines, the `ts` field cut out by hand): a hundred clients share
            // the bench machine's two cores with the daemon, so the clients' own JSON parsing
            // would otherwise be what is measured.
            let sub = subscribe(&ws.paths, seq, &[]).await;
            tasks.push(tokio::spawn(
                async move { lean_latencies(sub, events).await },
            ));
        }
        for batch in 0..events / 100 {
            let beads: Vec<BeadInput> = (0..100)
                .map(|i| BeadInput {
                    title: format!("fan {batch}-{i}"),
                    ..Default::default()
                })
                .collect();
            client.call(&Method::Submit(beads)).await.expect("submit");
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(
                tokio::time::timeout(WAIT, t)
                    .await
                    .expect("delivered")
                    .expect("task"),
            );
        }
        all.sort();
        let base = percentile(&all, 50);
        row(
            &format!("fan-out: {subscribers} subscribers x {events} events, p99"),
            format!("{:.2?}", percentile(&all, 99)),
            "<= 10ms",
            &format!("p50: {base:.2?}"),
            percentile(&all, 99).as_secs_f64() / base.as_secs_f64(),
        );
        shutdown.cancel();
        let _ = task.await;
    });
    let n = if quick { 20 } else { 100 };
    let alone = rt.block_on(catalyst_run(&Workspace::new("max_agents = 2"), n, 0));
    let watched = rt.block_on(catalyst_run(
        &Workspace::new("max_agents = 2"),
        n,
        subscribers,
    ));
    row(
        &format!("fan-out: {n} beads dispatched with {subscribers} subscribers"),
        format!("{watched:.2?}"),
        "<= 1.1x",
        &format!("without subscribers: {alone:.2?}"),
        watched.as_secs_f64() / alone.as_secs_f64(),
    );
}

/// Receive delays of the next `events` events on a subscription, from their `ts` to now.
async fn lean_latencies(sub: Client, events: usize) -> Vec<Duration> {
    let (mut lines, _hang_up_on_drop) = sub.into_lines();
    let mut lat = Vec::with_capacity(events);
    while lat.len() < events {
        let line = lines.next_line().await.expect("event").expect("open");
        let now = chrono::Utc::now();
        let ts = line
            .split_once("\"ts\":\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(ts, _)| ts)
            .expect("ts");
        let ts = catalyst::domain::time::Timestamp::parse(ts).expect("ts");
        lat.push((now - ts.to_utc()).to_std().unwrap_or_default());
    }
    lat
}

/// Reads a `/proc/<pid>/status` field in kB.
fn proc_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .trim_end_matches(" kB")
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// utime + stime of a process, in seconds.
fn proc_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0);
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    ticks as f64 / hz
}

mod workload {
    include!("workload.rs");
}

fn scale(quick: bool) {
    let n: u64 = if quick { 10_000 } else { 100_000 };
    let idle_secs = if quick { 5 } else { 60 };
    // Beads without a formula label, and no default formula: a store to load, not work to do.
    let ws = Workspace::new("");
    let config = std::fs::read_to_string(ws.paths.config())
        .expect("config")
        .replace("default_formula = \"one\"", "default_formula = \"\"");
    std::fs::write(ws.paths.config(), config).expect("config");
    workload::write_journal(&ws.paths.state.join("journal.jsonl"), n);
    let replay = {
        let t = Instant::now();
        let (store, _) = catalyst::daemon::store::Store::open(&ws.paths.state).expect("open");
        assert_eq!(store.state().len() as u64, n);
        t.elapsed()
    };
    let rt = runtime();
    let start = Instant::now();
    let mut child = Command::new(CATALYSTD)
        .arg("--workspace")
        .arg(&ws.repo)
        .arg("--log-level")
        .arg("warn")
        .spawn()
        .expect("catalystd");
    rt.block_on(connect(&ws.paths));
    let startup = start.elapsed();
    let rss = proc_kb(child.id(), "VmRSS:");
    let before = proc_cpu(child.id());
    std::thread::sleep(Duration::from_secs(idle_secs));
    let idle_cpu = proc_cpu(child.id()) - before;
    let _ = child.kill();
    let _ = child.wait();
    row(
        &format!("scale: catalystd start-up, {n} beads"),
        format!("{startup:.2?}"),
        "<= 1s",
        &format!("Store::open alone: {replay:.2?}"),
        startup.as_secs_f64() / replay.as_secs_f64(),
    );
    row(
        &format!("scale: resident memory, {n} beads"),
        format!("{:.1} MB", rss as f64 / 1024.0),
        "<= 200 MB",
        "200 MB",
        rss as f64 / 1024.0 / 200.0,
    );
    row(
        &format!("scale: CPU while idle for {idle_secs}s"),
        format!("{:.3}s", idle_cpu),
        "~ 0",
        &format!("{idle_secs}s of wall time"),
        idle_cpu / idle_secs as f64,
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let quick = args.iter().any(|a| a == "--quick");
    let rows: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let all = rows.is_empty();
    let want = |r: &str| all || rows.contains(&r);
    println!(
        "catalyst daemon benchmarks{}",
        if quick { " (quick)" } else { "" }
    );
    if want("overhead") {
        overhead(quick);
    }
    if want("chain") {
        chain(quick);
    }
    if want("latency") {
        latency(quick);
    }
    if want("fanout") {
        fanout(quick);
    }
    if want("scale") {
        scale(quick);
    }
}
