//! catalyst's test fixture, shared by every test binary and the daemon benchmarks.
//!
//! - [`Workspace`]: a temporary git repository with `main`, a config whose agents are
//!   stub-claude (`catalyst __stub-claude`) following a scenario, and views of what happened in
//!   it (the stub's invocations, the journal, `main`'s history, run folders).
//! - [`TestDaemon`]: a daemon on a workspace, either in-process through the library
//!   ([`Workspace::start`]) or as a `catalystd` subprocess ([`Workspace::spawn`]) where a test
//!   needs a real process (signals, SIGKILL, sd_notify, resident memory). Both answer the same
//!   requests and waits.
//! - [`Events`]: a subscription to the daemon's events, and the one place that reads them:
//!   [`Events::wait_for`] reads until an event matches, within [`TIMEOUT`].
//! - [`repo`]: what a test reads from the workspace's git repository.
//! - [`scenario`]: stub-claude scenario rules that several tests share.
//! - [`cli`]: running the `catalyst` command line; [`procfs`]: what `/proc` says about processes.
//! - [`forge`]: a mock GitHub or Forgejo on loopback, and Prism validating what passes to and
//!   from it.
//! - [`nats`]: a real NATS JetStream cluster on loopback ports, for the cluster tests.
//! - [`poll`]: waiting for what has no event (a file, a log line, a terminal screen).
//! - [`Lcg`]: a seeded generator for reproducible "random" moments; [`workload`]: a
//!   deterministic bead store for the benchmarks.

pub mod cli;
mod daemon;
mod events;
pub mod forge;
pub mod nats;
pub mod poll;
mod process;
pub mod procfs;
pub mod repo;
mod rng;
pub mod scenario;
pub mod web;
pub mod workload;
mod workspace;

use std::path::PathBuf;
use std::time::Duration;

use catalyst::protocol::BeadInput;

pub use daemon::TestDaemon;
pub use events::{Event, Events};
pub use process::Spawn;
pub use rng::Lcg;
pub use workspace::{Workspace, WorkspaceBuilder};

/// How long any wait in the tests may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The `catalyst` binary of this build.
pub fn catalyst_bin() -> PathBuf {
    built_bin("catalyst")
}

/// The `catalyst-hook` binary of this build: the hooks, and the shim agents start as.
pub fn catalyst_hook_bin() -> PathBuf {
    built_bin("catalyst-hook")
}

/// The `catalystd` binary of this build.
pub fn catalystd_bin() -> PathBuf {
    built_bin("catalystd")
}

/// A binary of the `catalyst` package. Cargo builds them before the integration tests and
/// benchmarks that run them, and names them in `CARGO_BIN_EXE_<name>` (at run time in newer
/// versions); otherwise they are in the profile's folder, above the running test's `deps/`.
fn built_bin(name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(format!("CARGO_BIN_EXE_{name}")) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary is in <target>/<profile>/deps/");
    let bin = profile.join(name);
    assert!(
        bin.is_file(),
        "{} is not built (cargo builds it for the package's tests and benchmarks)",
        bin.display()
    );
    bin
}

/// A bead with a title and nothing else.
pub fn bead(title: &str) -> BeadInput {
    BeadInput {
        title: title.into(),
        ..Default::default()
    }
}

/// A bead titled `title` of formula `formula`.
pub fn bead_of(formula: &str, title: &str) -> BeadInput {
    BeadInput {
        formula: Some(formula.to_owned()),
        ..bead(title)
    }
}

/// A bead with the id `id`, titled `bead <id>`.
pub fn bead_with_id(id: &str) -> BeadInput {
    BeadInput {
        id: Some(id.to_owned()),
        title: format!("bead {id}"),
        ..Default::default()
    }
}

/// The most of `invocations` (agents the stub ran) that ran at the same time.
pub fn most_at_once<'a>(invocations: impl IntoIterator<Item = &'a stub_claude::Invocation>) -> i32 {
    let mut edges: Vec<(u64, i32)> = invocations
        .into_iter()
        .flat_map(|i| {
            [
                (i.started_ms, 1),
                (i.ended_ms.expect("every agent ended"), -1),
            ]
        })
        .collect();
    edges.sort();
    let (mut alive, mut most) = (0, 0);
    for (_, change) in edges {
        alive += change;
        most = most.max(alive);
    }
    most
}

/// A bead `id` of the shipped `gated` formula whose check command is `test_command`.
pub fn gated_bead(id: &str, test_command: &str) -> BeadInput {
    let metadata = serde_json::json!({"formula_vars": {"test_command": test_command}});
    BeadInput {
        id: Some(id.to_owned()),
        formula: Some("gated".into()),
        metadata: metadata.as_object().cloned(),
        title: format!("gated bead {id}"),
        ..Default::default()
    }
}

/// Whether agents run in the bubblewrap sandbox here. Without bubblewrap (a machine with only
/// the Rust toolchain; `.ci/install-test-deps` installs it) the stub profile runs unconfined,
/// said once on stderr, and the escape tests skip.
pub fn sandboxed() -> bool {
    static SANDBOXED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SANDBOXED.get_or_init(|| {
        let available = catalyst::daemon::sandbox::available();
        if !available {
            eprintln!(
                "NOTE: bubblewrap is not installed: agents run unconfined in these tests and the escape tests are SKIPPED (run .ci/install-test-deps)"
            );
        }
        available
    })
}
