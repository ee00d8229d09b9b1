//! The `chain` row: beads each after the previous, against pueue's tasks each `--after` the
//! previous.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use catalyst::protocol::{BeadInput, Method, PauseParams};

use crate::{count_events, row, runtime, stop, target, workspace};

pub fn chain(quick: bool) {
    let n = if quick { 20 } else { 200 };
    let Some((pueue, pueued)) = pueue_bin() else {
        println!("chain: skipped: pueue 4.0.4 is not built (run benches/pueue.sh)");
        return;
    };
    let unconfined = runtime().block_on(catalyst_chain(n, false));
    let confined = runtime().block_on(catalyst_chain(n, true));
    let theirs = pueue_chain(&pueue, &pueued, n);
    for (how, ours) in [("default sandbox", confined), ("sandbox none", unconfined)] {
        let faster = theirs.as_secs_f64() / ours.as_secs_f64();
        // The target holds for the default configuration; unconfined is a row for comparison.
        let goal = match how {
            "default sandbox" => target(">= 19x faster", faster >= 19.0),
            _ => "-".to_owned(),
        };
        row(
            &format!("chain: {n} beads each after the previous, {how}, {faster:.1}x faster"),
            format!("{ours:.2?}"),
            &goal,
            &format!("pueue 4.0.4, {n} tasks each --after the previous: {theirs:.2?}"),
            ours.as_secs_f64() / theirs.as_secs_f64(),
        );
    }
}

/// Submits the chain paused, then times it from the resume to the last bead closed; with
/// `sandbox` false the agents run unconfined.
async fn catalyst_chain(n: usize, sandbox: bool) -> Duration {
    let ws = workspace("max_agents = 2");
    if !sandbox {
        crate::overhead::unconfine(&ws);
    }
    let daemon = ws.start().await;
    let mut client = daemon.client().await;
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
    let mut closed = daemon.subscribe_types(0, &["bead.status"]).await;
    let last = format!("chain-{}", n - 1);
    let start = Instant::now();
    client
        .call(&Method::Resume(PauseParams { model: None }))
        .await
        .expect("resume");
    count_events(&mut closed, "the chain done", 1, |e| {
        e["id"] == last.as_str() && e["status"] == "closed"
    })
    .await;
    let took = start.elapsed();
    stop(daemon).await;
    took
}

fn pueue_bin() -> Option<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-cache/pueue-4.0.4/bin");
    let (pueue, pueued) = (root.join("pueue"), root.join("pueued"));
    (pueue.exists() && pueued.exists()).then_some((pueue, pueued))
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
    let run = |args: &[&str]| pueue_until_it_answers(pueue, &config, args);
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

/// Runs `pueue args…` until it succeeds (pueued answers once its socket is up), and returns
/// its stdout.
fn pueue_until_it_answers(pueue: &Path, config: &Path, args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new(pueue)
            .arg("--config")
            .arg(config)
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
}
