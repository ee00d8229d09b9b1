//! Config values that would crash the daemon or mean nothing: a timeout so long its deadline
//! overflows, a negative or NaN budget, no attempts at all. Each is refused by name at reload
//! (the old config stays in force) and at start, and steps go on running.

use catalyst::protocol::BeadInput;
use catalyst_testkit::scenario::EACH_BEAD_WRITES_ITS_FILE;
use catalyst_testkit::{bead, Workspace};

const CHECKED: &str = "formula = \"checked\"\n[[steps]]\nid = \"work\"\ntitle = \"Work\"\nrole = \"implement\"\n[[steps]]\nid = \"check\"\ntitle = \"Check\"\nrole = \"gate\"\nrun = [\"true\"]\nneeds = [\"work\"]\n[[steps]]\nid = \"merge\"\ntitle = \"Merge\"\nrole = \"merge\"\nneeds = [\"check\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_out_of_range_are_refused_by_name_and_the_old_config_stays() {
    let ws = Workspace::new(EACH_BEAD_WRITES_ITS_FILE, "");
    let daemon = ws.spawn();
    daemon.add_formula("checked", CHECKED).await;
    let good = std::fs::read_to_string(ws.paths.config()).expect("config");
    for (line, key) in [
        (
            "gate_timeout_secs = 18446744073709551615",
            "gate_timeout_secs",
        ),
        ("budget_usd = -1.0", "budget_usd"),
        ("budget_usd = nan", "budget_usd"),
        ("[router]\nmax_attempts = 0", "router.max_attempts"),
        (
            "[router]\nmax_fix_iterations = 0",
            "router.max_fix_iterations",
        ),
    ] {
        // Top-level keys before the file's tables, a table after them.
        let text = if let Some(keys) = line.strip_prefix("[router]\n") {
            // The workspace's config has a `[router]` table already.
            good.replacen("[router]\n", &format!("[router]\n{keys}\n"), 1)
        } else if line.starts_with('[') {
            format!("{good}\n{line}\n")
        } else {
            format!("{line}\n{good}")
        };
        std::fs::write(ws.paths.config(), text).expect("bad config");
        let (code, _, err) = daemon.ctl(&["reload"], "").await;
        assert!(
            code != 0 && err.contains(&format!("`{key}`")),
            "{line}: refused by name: {err}"
        );
    }
    // The old config is in force: a gate runs with its old timeout and the bead merges.
    let id = daemon
        .submit(BeadInput {
            formula: Some("checked".into()),
            ..bead("checked")
        })
        .await;
    daemon.wait_status(&id, "closed").await;

    // A daemon does not start on such a config, and says why.
    let mut daemon = daemon;
    daemon.stop().await;
    let start = std::process::Command::new(env!("CARGO_BIN_EXE_catalystd"))
        .arg("--workspace")
        .arg(&ws.repo)
        .output()
        .expect("run catalystd");
    let err = String::from_utf8_lossy(&start.stderr);
    assert!(!start.status.success(), "it must not start: {err}");
    assert!(err.contains("`router.max_fix_iterations`"), "{err}");
}
