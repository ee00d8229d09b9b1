//! The `git` row: what each git step of a bead costs the daemon, with spare worktrees (as
//! `catalystd` runs) against without them: making the worktree, the clean check before an
//! attempt, the daemon's commit, the landing of the bead on the target (the default merge commit) and the removal. Each bead
//! adds a file, so the tree grows as a real project's does.

use std::time::{Duration, Instant};

use catalyst::daemon::worktree::{Landing, MergeGuard, MergeOutcome, Repo};
use catalyst::domain::id::BeadId;
use catalyst::domain::model::MergeStrategy;

use crate::{percentile, row, workspace};

/// The git steps of one bead, in order.
const STEPS: [&str; 5] = [
    "make the worktree",
    "clean check (changed_since)",
    "the daemon's commit (commit_all)",
    "land on the target (a merge commit)",
    "remove the worktree",
];

pub fn git(quick: bool) {
    let n = if quick { 40 } else { 300 };
    let without = run(n, 0);
    let with = run(n, 2);
    for (i, step) in STEPS.iter().enumerate() {
        let (ours, base) = (percentile(&with[i], 50), percentile(&without[i], 50));
        row(
            &format!("git, {n} beads: {step}, p50, spare worktrees"),
            format!("{ours:.2?}"),
            "-",
            &format!("without spares: {base:.2?}"),
            ours.as_secs_f64() / base.as_secs_f64().max(1e-9),
        );
    }
    let total = |steps: &[Vec<Duration>]| steps.iter().flatten().sum::<Duration>() / n as u32;
    let (ours, base) = (total(&with), total(&without));
    row(
        &format!("git, {n} beads: all five steps, mean per bead, spares"),
        format!("{ours:.2?}"),
        "-",
        &format!("without spares: {base:.2?}"),
        ours.as_secs_f64() / base.as_secs_f64().max(1e-9),
    );
}

/// Times each step for `n` beads in a fresh workspace keeping up to `spares` spares; returns
/// each step's durations, sorted.
fn run(n: usize, spares: usize) -> Vec<Vec<Duration>> {
    let ws = workspace("");
    let repo = Repo::open(&ws.repo, &ws.paths.worktrees())
        .expect("repo")
        .with_spares(spares);
    let mut times = vec![Vec::with_capacity(n); STEPS.len()];
    let mut timed = |step: usize, start: Instant| times[step].push(start.elapsed());
    for i in 0..n {
        let bead = BeadId::new(&format!("git-{i}")).expect("id");
        let start = Instant::now();
        let tree = repo.create(&bead, "main").expect("create");
        timed(0, start);
        let start = Instant::now();
        let changed = repo.changed_since(&bead, &tree.head).expect("check");
        timed(1, start);
        assert!(!changed, "a new worktree is clean");
        std::fs::write(tree.path.join(format!("{bead}.txt")), "work\n").expect("agent's file");
        let start = Instant::now();
        repo.commit_all(&bead, &format!("{bead} work"))
            .expect("commit")
            .expect("a change");
        timed(2, start);
        let start = Instant::now();
        let merged = repo
            .merge_into_target(&bead, "main", &MergeGuard::none(), &default_landing())
            .expect("merge");
        timed(3, start);
        assert!(matches!(merged, MergeOutcome::Merged { .. }), "{merged:?}");
        let start = Instant::now();
        repo.remove(&bead).expect("remove");
        timed(4, start);
    }
    for t in &mut times {
        t.sort();
    }
    times
}

/// How `catalystd` lands a bead by default: a merge commit.
pub(crate) fn default_landing() -> Landing {
    Landing {
        strategy: MergeStrategy::default(),
        title: "a bench bead".into(),
    }
}
