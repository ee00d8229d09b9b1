//! Crash recovery under a kill storm: a workload of 20 beads with fix loops,
//! retries, escalation and dependent beads runs once without interruption and once while
//! `catalystd` is killed with SIGKILL at random moments and restarted. Both runs must end the
//! same, nothing recorded as finished may run again, every merge lands once, and no agent or
//! worktree may outlive its purpose.
//!
//! `kill_storm_10` runs in the normal suite; `kill_storm_100` is the long version:
//! `cargo test --test reliability kill_storm_100 -- --ignored --nocapture` (`CATALYST_KILLS=N`
//! for another count). Both print their seed; `CATALYST_KILL_SEED=<seed>` replays the same kill
//! moments.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use catalyst::protocol::{BeadInput, ListParams, Method};
use serde_json::Value;

use catalyst_testkit::poll::poll;
use catalyst_testkit::{Lcg, Workspace, TIMEOUT};

/// The workload's beads: (id, kind, after).
const BEADS: [(&str, Kind, Option<&str>); 20] = [
    ("cat-p01", Kind::Plain, None),
    ("cat-p02", Kind::Plain, None),
    ("cat-p03", Kind::Plain, None),
    ("cat-p04", Kind::Plain, None),
    ("cat-p05", Kind::Plain, None),
    ("cat-p06", Kind::Plain, None),
    ("cat-p07", Kind::Plain, None),
    ("cat-p08", Kind::Plain, None),
    ("cat-p09", Kind::Plain, None),
    ("cat-p10", Kind::Plain, None),
    ("cat-f1", Kind::FixOnce, None),
    ("cat-f2", Kind::FixOnce, None),
    ("cat-f3", Kind::FixOnce, None),
    ("cat-r1", Kind::AlwaysRejected, None),
    ("cat-t1", Kind::MalformedThenGood, None),
    ("cat-t2", Kind::CrashThenGood, None),
    ("cat-m1", Kind::NeverValid, None),
    ("cat-d1", Kind::Plain, Some("cat-p01")),
    ("cat-d2", Kind::FixOnce, Some("cat-d1")),
    ("cat-d3", Kind::Plain, Some("cat-f1")),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// refine, implement, review, merge.
    Plain,
    /// The review rejects until the fix's file is in the worktree: one fix, then merged.
    FixOnce,
    /// The review always rejects: two fixes, then blocked at the fix limit.
    AlwaysRejected,
    /// The implementer answers without a result block twice, then does the work.
    MalformedThenGood,
    /// The implementer dies by SIGKILL once, then does the work.
    CrashThenGood,
    /// The implementer never gives a result block: five retries, one escalated attempt, blocked.
    NeverValid,
}

/// The scenario: answers chosen by bead and by the worktree's content, so that an attempt
/// interrupted by a kill gets the same answer when it runs again (counted sequences are used
/// only where every answer leads to the same end).
fn scenario() -> String {
    let mut s = String::new();
    for (id, kind, _) in BEADS {
        let write = format!(
            "{{ sleep_ms = 40, write = {{ \"{id}.txt\" = \"{id}\\n\" }}, summary = \"wrote {id}.txt\" }}"
        );
        let implement = match kind {
            Kind::MalformedThenGood => {
                format!("{{ raw = \"no block\" }}, {{ raw = \"still no block\" }}, {write}")
            }
            Kind::CrashThenGood => format!("{{ signal = \"KILL\" }}, {write}"),
            Kind::NeverValid => "{ raw = \"I did it, trust me.\" }".to_owned(),
            _ => write,
        };
        s.push_str(&format!(
            "[[rule]]\nrole = \"implement\"\nbead = \"{id}\"\nper_bead = true\nresponses = [{implement}]\n\n"
        ));
        match kind {
            Kind::FixOnce => s.push_str(&format!(
                "[[rule]]\nrole = \"review\"\nbead = \"{id}\"\nunless_exists = \"{id}.fixed\"\n\
                 responses = [{{ verdict = \"REJECTED\", summary = \"no fix yet\", instructions = [\"write {id}.fixed\"] }}]\n\n\
                 [[rule]]\nrole = \"fix\"\nbead = \"{id}\"\n\
                 responses = [{{ write = {{ \"{id}.fixed\" = \"fixed\\n\" }}, summary = \"wrote {id}.fixed\" }}]\n\n"
            )),
            Kind::AlwaysRejected => s.push_str(&format!(
                "[[rule]]\nrole = \"review\"\nbead = \"{id}\"\n\
                 responses = [{{ verdict = \"REJECTED\", summary = \"never good\", instructions = [\"try again\"] }}]\n\n\
                 [[rule]]\nrole = \"fix\"\nbead = \"{id}\"\n\
                 responses = [{{ append = {{ \"{id}.txt\" = \"again\\n\" }}, summary = \"tried again\" }}]\n\n"
            )),
            _ => {}
        }
    }
    // Other beads' merges move `main`, so the merge agent merges it in, as a real one would.
    s.push_str(
        "[[rule]]\nrole = \"merge\"\nresponses = [{ sleep_ms = 20, tools = [{ name = \"Bash\", input = { command = \"git -c user.name=stub -c user.email=stub@localhost merge --no-edit main\" } }], summary = \"merged main\" }]\n",
    );
    s
}

fn beads() -> Vec<BeadInput> {
    BEADS
        .iter()
        .map(|(id, _, after)| BeadInput {
            id: Some((*id).to_owned()),
            title: format!("workload bead {id}"),
            after: after.iter().map(|a| (*a).to_owned()).collect(),
            ..Default::default()
        })
        .collect()
}

/// What a run ended with, for comparing runs.
#[derive(Debug)]
struct RunEnd {
    statuses: BTreeMap<String, String>,
    files: Vec<(String, String)>,
    /// Per bead: commits on `main` whose subject starts with `<bead> implement`.
    implement_commits: BTreeMap<String, usize>,
    merges: BTreeMap<String, usize>,
    fixes: BTreeMap<String, usize>,
    /// Per bead: counted retries and escalations, as the `[daemon] RETRY` comments count them,
    /// each as `<step>: <reason>` (the message says which when runs differ).
    retries: BTreeMap<String, Vec<String>>,
    interrupted: usize,
    kills: usize,
    agent_runs: usize,
    duration: Duration,
}

/// Runs the workload, killing the daemon `kills` times at random moments (uniform in
/// `0..=max_gap_ms` after each start) before letting it finish.
async fn run(kills: usize, seed: u64, max_gap_ms: u64) -> RunEnd {
    let started = Instant::now();
    let ws = Workspace::new(&scenario(), "max_agents = 4");
    let mut daemon = ws.spawn();
    let answer = daemon.call(Method::Submit(beads())).await;
    assert_eq!(answer["ids"].as_array().map(Vec::len), Some(BEADS.len()));

    let mut rng = Lcg::new(seed);
    for _ in 0..kills {
        tokio::time::sleep(Duration::from_millis(rng.range(0, max_gap_ms))).await;
        if let Some(status) = daemon.exited() {
            panic!(
                "catalystd exited by itself ({status})\n{}",
                daemon.log_tail()
            );
        }
        daemon.kill().await;
        daemon = ws.spawn();
    }

    let ids: BTreeSet<String> = BEADS.iter().map(|(id, ..)| (*id).to_owned()).collect();
    let events = daemon
        .follow_until(
            "every bead to be closed or blocked",
            TIMEOUT * 3,
            |events| {
                let mut last: HashMap<&str, &str> = HashMap::new();
                for e in events.iter().filter(|e| e["type"] == "bead.status") {
                    if let (Some(id), Some(status)) = (e["bead"].as_str(), e["status"].as_str()) {
                        last.insert(id, status);
                    }
                }
                ids.iter()
                    .all(|id| matches!(last.get(id.as_str()), Some(&"closed") | Some(&"blocked")))
            },
        )
        .await;
    let listed = daemon
        .call(Method::List(ListParams {
            status: None,
            steps: false,
            ..Default::default()
        }))
        .await;
    let statuses: BTreeMap<String, String> = listed["beads"]
        .as_array()
        .expect("beads")
        .iter()
        .map(|b| {
            (
                b["id"].as_str().expect("id").to_owned(),
                b["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect();
    // A closed bead's worktree and branch go in the background (or, after a kill, in the next
    // start's sweep): wait for that, within the timeout.
    for (id, status) in &statuses {
        if status != "closed" {
            continue;
        }
        let gone = poll(Duration::from_millis(50), async || {
            (!ws.worktree_exists(id) && !ws.branch_exists(id)).then_some(())
        })
        .await;
        assert!(
            gone.is_some(),
            "{id}: the worktree or branch of a closed bead is still there\n{}",
            daemon.log_tail()
        );
    }
    let events = {
        // Everything the journal holds now, not only what was seen while following.
        let mut all = daemon.events().await;
        if all.len() < events.len() {
            all = events;
        }
        all
    };
    let status = daemon.terminate().await;
    assert!(status.success(), "catalystd stopped with {status}");
    // A sandboxed agent's namespace is torn down by the kernel just after its last process is
    // killed: wait for that, within the timeout, before checking that nothing is left.
    catalyst_testkit::poll::poll(std::time::Duration::from_millis(20), async || {
        ws.agent_processes().is_empty().then_some(())
    })
    .await;
    let end = check_run(&ws, &events, &statuses, kills);
    RunEnd {
        duration: started.elapsed(),
        ..end
    }
}

/// The checks that hold for any run, interrupted or not; returns what is compared between
/// runs.
fn check_run(
    ws: &Workspace,
    events: &[Value],
    statuses: &BTreeMap<String, String>,
    kills: usize,
) -> RunEnd {
    // No agent of the run is alive, and nothing is left that should have been removed.
    let alive = ws.agent_processes();
    assert!(alive.is_empty(), "agent processes still alive: {alive:?}");
    for (id, status) in statuses {
        match status.as_str() {
            "closed" => assert!(
                !ws.worktree_exists(id) && !ws.branch_exists(id),
                "{id} is closed but its worktree or branch is left"
            ),
            _ => assert!(
                ws.worktree_exists(id) && ws.branch_exists(id),
                "{id} is {status}: its worktree and branch are kept for a person"
            ),
        }
    }

    // Every agent run belongs to a dispatched attempt, and no attempt ran twice: an attempt
    // whose end is recorded ran exactly once, and an interrupted one is re-run as a new
    // attempt (from its starting commit), never in its old run folder.
    let runs = ws.paths.runs();
    let mut runs_per_attempt: HashMap<String, usize> = HashMap::new();
    let invocations = ws.invocations();
    for inv in &invocations {
        let settings = inv
            .argv
            .iter()
            .skip_while(|a| *a != "--settings")
            .nth(1)
            .expect("--settings on the agent's command line");
        let run_dir = Path::new(settings).parent().expect("run folder");
        let rel = run_dir
            .strip_prefix(&runs)
            .expect("run folder under runs/")
            .display()
            .to_string();
        *runs_per_attempt.entry(rel).or_default() += 1;
    }
    for (attempt, count) in &runs_per_attempt {
        assert_eq!(*count, 1, "attempt {attempt} ran {count} times");
    }
    let dispatched: BTreeSet<String> = events
        .iter()
        .filter(|e| e["type"] == "step.dispatched")
        .map(attempt_key)
        .collect();
    for attempt in runs_per_attempt.keys() {
        assert!(
            dispatched.contains(attempt),
            "an agent ran for {attempt}, which was never dispatched"
        );
    }
    for e in events.iter().filter(|e| e["type"] == "step.finished") {
        let key = attempt_key(e);
        assert_eq!(
            runs_per_attempt.get(&key).copied().unwrap_or(0),
            1,
            "attempt {key} is recorded as finished ({}) but its agent ran {} times",
            e["exit"],
            runs_per_attempt.get(&key).copied().unwrap_or(0)
        );
    }

    // An interrupted attempt runs again from its starting commit: the next attempt starts
    // where the interrupted one started (its `base` file), whatever the interrupted agent or
    // the daemon's unrecorded commit had left on the branch.
    for e in events.iter().filter(|e| e["type"] == "step.interrupted") {
        let Some(reset_to) = e["reset_to"].as_str() else {
            continue;
        };
        let key = attempt_key(e);
        let (step_dir, attempt) = key.rsplit_once('/').expect("bead/step/attempt");
        let next: u32 = attempt.parse::<u32>().expect("attempt") + 1;
        let base = runs.join(step_dir).join(next.to_string()).join("base");
        if let Ok(started) = std::fs::read_to_string(&base) {
            assert_eq!(
                started.trim(),
                reset_to,
                "{step_dir}: attempt {next} did not start where interrupted attempt {attempt} began"
            );
        }
    }

    // Each merged bead's work is on `main` exactly once.
    let log = ws.main_log();
    let mut implement_commits = BTreeMap::new();
    let mut merges = BTreeMap::new();
    let mut fixes = BTreeMap::new();
    let mut retries = BTreeMap::new();
    for (id, _, _) in BEADS {
        let prefix = format!("{id} implement");
        implement_commits.insert(
            id.to_owned(),
            log.iter().filter(|m| m.starts_with(&prefix)).count(),
        );
        let count = |kind: &str| {
            events
                .iter()
                .filter(|e| e["type"] == kind && e["bead"] == id)
                .count()
        };
        merges.insert(id.to_owned(), count("merge.completed"));
        fixes.insert(id.to_owned(), count("fix.created"));
        let counted: Vec<String> = events
            .iter()
            .filter(|e| {
                e["bead"] == id
                    && ((e["type"] == "step.retry" && e["counted"] == true)
                        || e["type"] == "step.escalated")
            })
            // A merge agent runs again when another bead's merge moved `main` after it
            // merged it in: a race between beads, not a property of the run.
            .filter(|e| !e["step"].as_str().is_some_and(|s| s.ends_with(".merge")))
            .map(|e| format!("{}: {}", e["step"], e["reason"]))
            .collect();
        retries.insert(id.to_owned(), counted);
    }
    for (id, status) in statuses {
        let expected = usize::from(status == "closed");
        assert_eq!(
            implement_commits[id], expected,
            "{id} ({status}): its implement commit is on main {} times",
            implement_commits[id]
        );
        assert_eq!(
            merges[id], expected,
            "{id} ({status}): merged {} times",
            merges[id]
        );
    }
    RunEnd {
        statuses: statuses.clone(),
        files: ws.files_on_main(),
        implement_commits,
        merges,
        fixes,
        retries,
        interrupted: events
            .iter()
            .filter(|e| e["type"] == "step.interrupted")
            .count(),
        kills,
        agent_runs: invocations.len(),
        duration: Duration::ZERO,
    }
}

/// `<bead>/<step>/<attempt>` of a step event, as its run folder is named.
fn attempt_key(e: &Value) -> String {
    let bead = e["bead"].as_str().expect("bead");
    let step = e["step"].as_str().expect("step");
    let name = step
        .strip_prefix(bead)
        .and_then(|s| s.strip_prefix('.'))
        .expect("a step of its bead");
    format!("{bead}/{name}/{}", e["attempt"])
}

fn seed() -> u64 {
    std::env::var("CATALYST_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(4)
        })
}

async fn storm(kills: usize) {
    let seed = seed();
    println!("kill storm: {kills} kills, seed {seed} (CATALYST_KILL_SEED={seed} replays it)");
    let calm = run(0, seed, 0).await;
    println!(
        "uninterrupted run: {:?}, {} agent runs",
        calm.duration, calm.agent_runs
    );
    // Spread the kills over about the length of an uninterrupted run.
    let max_gap_ms = (2 * calm.duration.as_millis() as u64 / kills as u64).max(300);
    let stormy = run(kills, seed, max_gap_ms).await;
    println!(
        "interrupted run: {:?}, {} kills (gaps 0..={max_gap_ms} ms), {} attempts interrupted, {} agent runs",
        stormy.duration, stormy.kills, stormy.interrupted, stormy.agent_runs
    );

    assert_eq!(stormy.statuses, calm.statuses, "final statuses");
    assert_eq!(stormy.files, calm.files, "files on main");
    assert_eq!(stormy.implement_commits, calm.implement_commits);
    assert_eq!(stormy.merges, calm.merges);
    // Answers that follow the worktree make the fix loops the same in both runs.
    assert_eq!(stormy.fixes, calm.fixes, "fix steps per bead");
    // Interrupted attempts are not failed attempts: where the answers do not depend on how
    // many agents ran before, the counted retries are the same.
    for (id, kind, _) in BEADS {
        if matches!(kind, Kind::NeverValid | Kind::Plain | Kind::FixOnce) {
            assert_eq!(
                stormy.retries[id].len(),
                calm.retries[id].len(),
                "{id}: counted retries differ: with kills {:?}, without {:?}",
                stormy.retries[id],
                calm.retries[id]
            );
        }
    }
    let expected: BTreeMap<String, String> = BEADS
        .iter()
        .map(|(id, kind, _)| {
            let status = match kind {
                Kind::AlwaysRejected | Kind::NeverValid => "blocked",
                _ => "closed",
            };
            ((*id).to_owned(), status.to_owned())
        })
        .collect();
    assert_eq!(calm.statuses, expected);
    assert_eq!(
        calm.retries["cat-m1"].len(),
        4,
        "four retries, then the block: the same answer every time is not escalated"
    );
    assert_eq!(calm.fixes["cat-r1"], 2, "two fixes before the fix limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_storm_10() {
    storm(10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: 100 kills; run with `cargo test --test reliability kill_storm_100 -- --ignored --nocapture`"]
async fn kill_storm_100() {
    let kills = std::env::var("CATALYST_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(100);
    storm(kills).await;
}
