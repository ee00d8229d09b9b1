//! A worker's side of an attempt, without NATS: an order run in the worker's own clone of
//! the shared remote, exactly as a local attempt runs, and its commit pushed back.

use std::path::Path;
use std::process::Command;

use catalyst::daemon::cluster::worker::Worker;
use catalyst::domain::agent::attempt::AttemptPolicy;
use catalyst::domain::cluster::{attempt_ref, base_ref, AgentAsk, AttemptOrder, Limits, Marker};
use catalyst::domain::context::{Context, StepInfo};
use catalyst::domain::id::BeadId;
use catalyst::domain::model::{Bead, Role};
use catalyst::domain::policy::Access;
use catalyst::domain::router::Outcome;
use catalyst_testkit::Workspace;
use tokio_util::sync::CancellationToken;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

const WRITES_HELLO: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "hello.txt" = "hello from a worker\n" }, summary = "wrote hello.txt" }]
"#;

/// An implement order for `cat-1` starting at `base`, as a daemon whose agent is the stub would
/// make it.
pub fn order(base: &str) -> AttemptOrder {
    let work = BeadId::new("cat-1").expect("id");
    let step = BeadId::new("cat-1.implement").expect("id");
    let ts = catalyst::domain::time::Timestamp::parse("2026-11-26T00:00:00Z").expect("ts");
    let bead = Bead::new(work.clone(), "Say hello", ts);
    AttemptOrder {
        dispatch: "d-1".into(),
        work: work.clone(),
        step: step.clone(),
        tree: work.clone(),
        step_name: "implement".into(),
        role: Role::Implement,
        attempt: 1,
        model: "sonnet".into(),
        base: base.into(),
        base_ref: base_ref(&work, "implement", 1),
        target: "main".into(),
        prompt: format!(
            "Implement the bead in {}. Read {} first.\n",
            Marker::Worktree.text(),
            Marker::ContextMd.text()
        ),
        context: Context {
            bead: (&bead).into(),
            step: StepInfo {
                id: step.clone(),
                step: "implement".into(),
                role: Role::Implement,
                title: "Implement: Say hello".into(),
                description: None,
                formula: Some("feature".into()),
                attempt: 1,
                iteration: 0,
                fixes: None,
                output: None,
            },
            earlier_steps: Vec::new(),
            feedback: Vec::new(),
            comments: Vec::new(),
            change: None,
        },
        change: None,
        policy: AttemptPolicy {
            bead: work,
            step,
            role: Role::Implement,
            attempt: 1,
            access: Access::Worktree,
            tools: None,
            worktree: "/on/the/daemon/worktree".into(),
            target_branch: "main".into(),
            context: "/on/the/daemon/context.md".into(),
            contract: "end with a result block".into(),
        },
        agent: AgentAsk {
            profile: "stub".into(),
            max_turns: Some(20),
            budget_left_usd: None,
            tools: None,
        },
        model_id: "sonnet".into(),
        limits: Limits {
            timeout_secs: 120,
            stall_timeout_secs: 120,
            grace_secs: 2,
            output_cap_bytes: 1 << 20,
            max_file_bytes: 1 << 20,
            max_processes: None,
            nice: 0,
        },
        lease_secs: 30,
        author: None,
        committer: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_runs_an_order_in_its_own_clone_and_pushes_the_commit_back() {
    let ws = Workspace::new(WRITES_HELLO, "");
    let remote = ws.root.join("remote.git");
    git(
        &ws.root,
        &["init", "--quiet", "--bare", remote.to_str().expect("utf-8")],
    );
    let remote_url = remote.display().to_string();
    git(&ws.repo, &["push", "--quiet", &remote_url, "main"]);
    let base = git(&ws.repo, &["rev-parse", "main"]);
    let work = BeadId::new("cat-1").expect("id");
    let start = format!("{base}:{}", base_ref(&work, "implement", 1));
    git(&ws.repo, &["push", "--quiet", &remote_url, &start]);

    let workdir = ws.root.join("worker");
    let worker = Worker::open(
        "w1",
        &remote_url,
        &workdir,
        &catalyst_testkit::catalyst_bin(),
        1,
    )
    .await
    .expect("the worker's workspace")
    // The daemon's profiles: its config holds the stub's.
    .with_profiles(
        catalyst::daemon::cluster::worker::read_profiles(&ws.paths.config()).expect("profiles"),
        !catalyst_testkit::sandboxed(),
    )
    .expect("sandboxed profiles");
    let order = order(&base);
    let end = worker.run(&order, CancellationToken::new()).await;

    assert_eq!((end.dispatch.as_str(), end.worker.as_str()), ("d-1", "w1"));
    match &end.outcome {
        Some(Outcome::Finished { result, .. }) => {
            assert_eq!(result.summary, "wrote hello.txt")
        }
        other => panic!("finished, not {other:?}; stderr: {}", end.stderr),
    }
    let commit = end
        .commit
        .clone()
        .expect("the worker committed the agent's work");
    let pushed = git(&remote, &["rev-parse", &attempt_ref(&work, "implement", 1)]);
    assert_eq!(pushed, commit, "pushed to the attempt's ref");
    assert_eq!(
        git(&remote, &["rev-parse", &format!("{commit}^")]),
        base,
        "on the base"
    );
    let message = git(&remote, &["log", "-1", "--format=%B", &commit]);
    assert!(message.contains("Catalyst-Step: implement/1"), "{message}");
    let hello = git(&remote, &["show", &format!("{commit}:hello.txt")]);
    assert_eq!(hello, "hello from a worker");
    assert!(
        end.report.is_some() && end.stdout.contains("STEP-RESULT"),
        "{}",
        end.stdout
    );

    // The worker's own paths went into the prompt, and nothing of the daemon's.
    let run_dir = worker.paths().run_dir(&work, "implement", 1);
    let prompt = std::fs::read_to_string(run_dir.join("prompt.md")).expect("prompt");
    let worktree = worker.paths().worktrees().join("cat-1");
    assert!(prompt.contains(&worktree.display().to_string()), "{prompt}");
    assert!(!prompt.contains('\u{27e6}'), "no marker left: {prompt}");

    // Once its end is sent, the attempt leaves nothing behind on the worker but a spare
    // worktree: not its run folder, not the bead's worktree or branch.
    worker.finish(&order).await;
    assert!(!run_dir.exists(), "the run folder went");
    assert!(
        !worker.paths().runs().join("cat-1").exists(),
        "the bead's folder of runs went"
    );
    assert!(!worktree.exists(), "the bead's worktree went");
    let clone = worker.paths().workspace.clone();
    let branches = git(&clone, &["branch", "--list", "catalyst/*"]);
    assert_eq!(branches, "", "the bead's branch went");
    let spares: Vec<_> = std::fs::read_dir(worker.paths().worktrees())
        .expect("the worktrees folder")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(spares.len(), 1, "kept as the one spare: {spares:?}");
}

/// An order names a profile; a worker runs only its own, so one it lacks is handed back as
/// its trouble (the daemon runs the attempt elsewhere), and nothing runs here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_hands_back_an_order_for_a_profile_it_does_not_have() {
    let ws = Workspace::new(WRITES_HELLO, "");
    let remote = ws.root.join("remote.git");
    git(
        &ws.root,
        &["init", "--quiet", "--bare", remote.to_str().expect("utf-8")],
    );
    let remote_url = remote.display().to_string();
    git(&ws.repo, &["push", "--quiet", &remote_url, "main"]);
    let base = git(&ws.repo, &["rev-parse", "main"]);
    // The built-in profiles only: not the daemon's `stub`.
    let worker = Worker::open(
        "w1",
        &remote_url,
        &ws.root.join("worker"),
        &catalyst_testkit::catalyst_bin(),
        1,
    )
    .await
    .expect("the worker's workspace");
    let end = worker.run(&order(&base), CancellationToken::new()).await;
    match &end.outcome {
        Some(Outcome::Unavailable { reason, .. }) => assert!(
            reason.contains("profile `stub` is not one of this worker's (`claude`, `codex`)"),
            "{reason}"
        ),
        other => panic!("handed back, not {other:?}"),
    }
    assert!(ws.invocations().is_empty(), "no agent ran");
}
