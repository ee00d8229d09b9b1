//! What a bead carries cannot change what the daemon runs: a `formula_vars` value is checked
//! against its var's pattern and reaches a gate's shell quoted, and a formula an agent plants
//! in the repository waits for a person before it reaches the target and the daemon.

use catalyst::protocol::{ApproveParams, BeadInput, CloseParams, Method};
use catalyst_testkit::repo::file_on_main;
use catalyst_testkit::{bead, bead_with_id, gated_bead, TestDaemon};
use serde_json::json;

/// A formula whose gate echoes a var that any value may take.
const ECHO: &str = "formula = \"echo\"\n[vars.word]\npattern = \"(?s).*\"\n[[steps]]\nid = \"say\"\ntitle = \"Say\"\nrole = \"gate\"\nrun = [\"echo {{word}}\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_outside_its_pattern_is_refused_and_a_quoted_one_runs_as_one_word() {
    let scenario =
        "[[rule]]\nrole = \"implement\"\nresponses = [{ write = { \"a.txt\" = \"a\\n\" } }]\n";
    let daemon = TestDaemon::start(scenario, "").await;
    daemon.add_formula("echo", ECHO).await;
    let planted = daemon.root.join("INJECTED");
    let attack = format!("true; touch {}", planted.display());
    daemon.submit(gated_bead("cat-inject", &attack)).await;
    let blocked = daemon.wait_status("cat-inject", "blocked").await;
    assert!(
        blocked["reason"]
            .as_str()
            .is_some_and(|r| r.contains("does not match the pattern")),
        "{blocked}"
    );
    // A var whose pattern lets anything through still reaches the shell as one word.
    let metadata = json!({"formula_vars": {"word": attack}});
    daemon
        .submit(BeadInput {
            id: Some("cat-echo".into()),
            formula: Some("echo".into()),
            metadata: metadata.as_object().cloned(),
            ..bead("Echo")
        })
        .await;
    let passed = daemon
        .wait_for("the echo gate", |e| {
            e["type"] == "gate.passed" && e["step"] == "cat-echo.say"
        })
        .await;
    assert!(!planted.exists(), "the injected command ran: {passed}");
}

/// Config that lets sandboxed gates write the temporary folder, where the tests' gates leave
/// their proof of having run.
fn gates_may_write_temp() -> String {
    format!(
        "gate_writable = [{}]\n",
        toml::Value::String(std::env::temp_dir().display().to_string())
    )
}

/// Where the planted formula goes: a folder the daemon reads formulas from.
const PLANTED: &str = ".beads/formulas/feature.formula.toml";

/// A scenario whose implement agent for `cat-plant` writes a `feature` formula that replaces
/// the whole workflow with a gate running `touch <marker>` as the daemon's user.
fn planting(marker: &std::path::Path) -> String {
    let formula = format!(
        "formula = \"feature\"\n[[steps]]\nid = \"planted\"\ntitle = \"Planted\"\nrole = \"gate\"\nrun = [\"touch {}\"]\n",
        marker.display()
    );
    let quoted = |s: &str| toml::Value::String(s.to_owned()).to_string();
    format!(
        "[[rule]]\nbead = \"cat-plant\"\nrole = \"implement\"\nresponses = [{{ write = {{ {} = {}, \"code.txt\" = \"code\\n\" }} }}]\n\
         [[rule]]\nrole = \"implement\"\nresponses = [{{ write = {{ \"other.txt\" = \"other\\n\" }} }}]\n",
        quoted(PLANTED),
        quoted(&formula)
    )
}

/// The steps a bead's molecule was poured with.
fn poured_steps(event: &serde_json::Value) -> Vec<String> {
    event["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["metadata"]["catalyst"]["step"].as_str().map(String::from))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_formula_waits_for_a_person_before_it_reaches_the_target() {
    let marker = std::env::temp_dir().join(format!("catalyst-planted-{}", std::process::id()));
    // The planted gate's proof is a file beside the marker's: gates may write there.
    let daemon = TestDaemon::start(&planting(&marker), &gates_may_write_temp()).await;
    daemon.submit(bead_with_id("cat-plant")).await;
    let held = daemon
        .wait_for("the merge held for its workflow file", |e| {
            e["type"] == "merge.held" && e["bead"] == "cat-plant"
        })
        .await;
    assert_eq!(held["files"], json!([PLANTED]), "{held}");
    assert_eq!(file_on_main(&daemon.repo, PLANTED), None);
    let (code, status, _) = daemon.ctl(&["status"], "").await;
    assert_eq!(code, 0);
    assert!(
        status.contains("waiting for approval: cat-plant.merge") && status.contains(PLANTED),
        "{status}"
    );

    // Even read again, the daemon's formulas are still the target's.
    daemon.call(Method::Reload).await;
    daemon.submit(bead_with_id("cat-before")).await;
    let before = daemon
        .wait_for("cat-before poured", |e| {
            e["type"] == "molecule.poured" && e["bead"] == "cat-before"
        })
        .await;
    assert!(
        poured_steps(&before).contains(&"implement".to_owned()),
        "{before}"
    );
    daemon
        .call(Method::Cancel(CloseParams {
            id: "cat-before".into(),
            reason: Some("only here to show the formula in force".into()),
        }))
        .await;
    assert!(!marker.exists(), "the planted gate ran before any approval");

    // A person approves: the change merges, and the formula is the workflow from then on.
    daemon
        .call(Method::Approve(ApproveParams {
            id: "cat-plant".into(),
            comment: Some("the new workflow is intended".into()),
        }))
        .await;
    daemon.wait_status("cat-plant", "closed").await;
    assert!(file_on_main(&daemon.repo, PLANTED).is_some());
    daemon.call(Method::Reload).await;
    daemon.submit(bead_with_id("cat-after")).await;
    let after = daemon
        .wait_for("cat-after poured", |e| {
            e["type"] == "molecule.poured" && e["bead"] == "cat-after"
        })
        .await;
    // The planted formula has no merge step: pouring adds one after its gate.
    assert_eq!(poured_steps(&after), ["planted", "merge"], "{after}");
    daemon.wait_status("cat-after", "closed").await;
    let ran = marker.exists();
    let _ = std::fs::remove_file(&marker);
    assert!(ran, "the approved formula is in force");
}

/// A file's word is not a person's. An inbox file, or an issue line in the followed beads file
/// (which anyone who can file an issue writes), gave the shipped `gated` formula's
/// `test_command` (`sh -c {{test_command}}`) and chose a command the daemon ran; one that also
/// claimed to be a person's (the store's own mark, forged) must fare no better.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_command_from_the_inbox_or_a_followed_beads_file_is_refused() {
    let scenario =
        "[[rule]]\nrole = \"implement\"\nresponses = [{ write = { \"a.txt\" = \"a\\n\" } }]\n";
    let ws = catalyst_testkit::Workspace::new(scenario, &gates_may_write_temp());
    let watched = ws.root.join("issues.jsonl");
    ws.append_config(&format!(
        "\n[beads]\nwatch = {:?}\n",
        watched.display().to_string()
    ));
    let daemon = ws.start().await;
    let from_inbox = daemon.root.join("FROM_INBOX");
    let from_file = daemon.root.join("FROM_BEADS_FILE");
    let inbox = json!({
        "id": "cat-inbox", "title": "From the inbox", "formula": "gated",
        "metadata": {
            "formula_vars": {"test_command": format!("touch {}", from_inbox.display())},
            "formula_vars_by_person": true,
        },
    });
    let dir = daemon.paths.state.join("inbox");
    std::fs::create_dir_all(&dir).expect("inbox");
    std::fs::write(dir.join(".attack.tmp"), inbox.to_string()).expect("write");
    std::fs::rename(dir.join(".attack.tmp"), dir.join("attack.json")).expect("rename");
    let issue = json!({
        "id": "bd-1", "title": "From an issue", "status": "open", "priority": 2,
        "issue_type": "task", "labels": ["catalyst", "formula:gated"],
        "metadata": {"formula_vars": {"test_command": format!("touch {}", from_file.display())}},
        "created_at": "2026-01-12T02:16:02Z", "updated_at": "2026-01-12T02:16:02Z",
    });
    std::fs::write(&watched, format!("{issue}\n")).expect("beads file");
    for id in ["cat-inbox", "bd-1"] {
        let blocked = daemon.wait_status(id, "blocked").await;
        assert!(
            blocked["reason"]
                .as_str()
                .is_some_and(|r| r.contains("`test_command`") && r.contains("ctl submit")),
            "{blocked}"
        );
    }
    assert!(!from_inbox.exists() && !from_file.exists());
    // A person's submission with the same formula still runs its command.
    let by_person = daemon.root.join("BY_PERSON");
    daemon
        .submit_gated_waiting("cat-person", &format!("touch {}", by_person.display()))
        .await;
    assert!(by_person.exists(), "a person's test_command ran");
}

/// A value single-quoted by catalyst is one word only outside the author's own quotes: inside
/// `'…'` its quote ended the author's (`x; touch F #`), inside `"…"` its `$(…)` ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placeholder_inside_the_authors_quotes_keeps_the_formula_from_loading() {
    let scenario =
        "[[rule]]\nrole = \"implement\"\nresponses = [{ write = { \"a.txt\" = \"a\\n\" } }]\n";
    let daemon = TestDaemon::start(scenario, "").await;
    let planted = daemon.root.join("QUOTED");
    let cases = [
        (
            "single",
            "echo 'lint {{lang}}'",
            format!("x; touch {} #", planted.display()),
        ),
        (
            "double",
            "echo \\\"lint {{lang}}\\\"",
            format!("$(touch {})", planted.display()),
        ),
    ];
    for (name, run, value) in &cases {
        let text = format!(
            "formula = \"{name}\"\n[vars.lang]\npattern = \"(?s).*\"\n[[steps]]\nid = \"lint\"\ntitle = \"Lint\"\nrole = \"gate\"\nrun = [\"{run}\"]\n"
        );
        daemon.write_formula(name, &text);
        let file = daemon
            .paths
            .state
            .join("formulas")
            .join(format!("{name}.formula.toml"));
        let out = std::process::Command::new(catalyst_testkit::catalyst_bin())
            .args(["formula", "check"])
            .arg(&file)
            .output()
            .expect("formula check");
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{said}");
        assert!(said.contains("stands inside quotes in `run`"), "{said}");
        let refused = daemon
            .client()
            .await
            .call(&Method::Reload)
            .await
            .expect_err("the reload is refused");
        assert!(
            refused.to_string().contains("stands inside quotes"),
            "{refused}"
        );
        let metadata = json!({"formula_vars": {"lang": value}});
        let submitted = daemon
            .client()
            .await
            .call(&Method::Submit(vec![BeadInput {
                formula: Some((*name).into()),
                metadata: metadata.as_object().cloned(),
                ..bead("Quoted")
            }]))
            .await
            .expect_err("no such formula is in force");
        // The answer names the file that did not load, and why.
        assert!(
            submitted.to_string().contains("did not load")
                && submitted.to_string().contains("stands inside quotes"),
            "{submitted}"
        );
        std::fs::remove_file(&file).expect("remove the formula");
    }
    assert!(!planted.exists(), "a value ended the author's quotes");
}

/// A link is not a folder: an implementer committed `.beads -> <a folder outside the
/// repository that it may write>`, the `.beads/` pattern did not match the link, the change
/// merged without an approval, and the daemon then loaded a formula through the link and ran
/// its gate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_link_where_the_workflow_lives_waits_for_a_person_and_is_never_followed() {
    let marker = std::env::temp_dir().join(format!("catalyst-linked-{}", std::process::id()));
    let ws = catalyst_testkit::Workspace::new("", &gates_may_write_temp());
    // What the agent wrote where it may (the stub's folder is writable in its sandbox).
    let outside = ws.stub_file("planted");
    std::fs::create_dir_all(outside.join("formulas")).expect("mkdir");
    std::fs::write(
        outside.join("formulas/feature.formula.toml"),
        format!(
            "formula = \"feature\"\n[[steps]]\nid = \"planted\"\ntitle = \"Planted\"\nrole = \"gate\"\nrun = [\"touch {}\"]\n",
            marker.display()
        ),
    )
    .expect("write");
    let link = toml::Value::String(format!("ln -s {} .beads", outside.display())).to_string();
    ws.set_scenario(&format!(
        "[[rule]]\nbead = \"cat-link\"\nrole = \"implement\"\nresponses = [{{ shell = [{link}], write = {{ \"code.txt\" = \"code\\n\" }} }}]\n\
         [[rule]]\nrole = \"implement\"\nresponses = [{{ write = {{ \"other.txt\" = \"other\\n\" }} }}]\n"
    ));
    let daemon = ws.start().await;
    daemon.submit(bead_with_id("cat-link")).await;
    let held = daemon
        .wait_for("the merge held for the link", |e| {
            e["type"] == "merge.held" && e["bead"] == "cat-link"
        })
        .await;
    assert_eq!(held["files"], json!([".beads"]), "{held}");

    // Approved by a person, the link merges, but the daemon still does not read through it.
    daemon
        .call(Method::Approve(ApproveParams {
            id: "cat-link".into(),
            comment: None,
        }))
        .await;
    daemon.wait_status("cat-link", "closed").await;
    let refused = daemon
        .client()
        .await
        .call(&Method::Reload)
        .await
        .expect_err("a linked formula folder is refused");
    assert!(refused.to_string().contains("symbolic link"), "{refused}");
    daemon.submit(bead_with_id("cat-after")).await;
    let after = daemon
        .wait_for("cat-after poured", |e| {
            e["type"] == "molecule.poured" && e["bead"] == "cat-after"
        })
        .await;
    assert!(
        poured_steps(&after).contains(&"implement".to_owned()),
        "{after}"
    );
    daemon.wait_status("cat-after", "closed").await;
    let ran = marker.exists();
    let _ = std::fs::remove_file(&marker);
    assert!(!ran, "the gate behind the link ran");
}

/// The workspace's own word: a gate command set once in the config's `[vars]` runs for a bead
/// from the inbox that gives none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_command_from_the_config_runs_for_any_bead() {
    let scenario =
        "[[rule]]\nrole = \"implement\"\nresponses = [{ write = { \"a.txt\" = \"a\\n\" } }]\n";
    let marker = std::env::temp_dir().join(format!("catalyst-config-var-{}", std::process::id()));
    let config = format!(
        "{}[vars]\ntest_command = {}\n",
        gates_may_write_temp(),
        toml::Value::String(format!("touch {}", marker.display()))
    );
    let daemon = TestDaemon::start(scenario, &config).await;
    let dir = daemon.paths.state.join("inbox");
    std::fs::create_dir_all(&dir).expect("inbox");
    let bead = json!({"id": "cat-inbox", "title": "From the inbox", "formula": "gated"});
    std::fs::write(dir.join(".b.tmp"), bead.to_string()).expect("write");
    std::fs::rename(dir.join(".b.tmp"), dir.join("b.json")).expect("rename");
    daemon
        .wait_for("the approval to wait", |e| {
            e["type"] == "gate.waiting" && e["step"] == "cat-inbox.approve"
        })
        .await;
    let ran = marker.exists();
    let _ = std::fs::remove_file(&marker);
    assert!(ran, "the config's test_command ran");
}
