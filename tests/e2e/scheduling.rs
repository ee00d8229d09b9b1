//! Scheduling order and limits, the control socket's basics, `ctl` as people use it, and
//! reloading the workspace's files.

use std::os::unix::fs::PermissionsExt;

use catalyst::protocol::{BeadInput, Method, PauseParams};
use catalyst_testkit::poll::eventually;
use catalyst_testkit::scenario::{implement_waits_for, EACH_BEAD_WRITES_ITS_FILE};
use catalyst_testkit::{bead, most_at_once, TestDaemon, Workspace};
use serde_json::Value;

/// Each bead writes its own file; the daemon merges `main` into each branch as others merge.
fn writes() -> String {
    EACH_BEAD_WRITES_ITS_FILE.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_beads_start_by_priority_then_age() {
    let daemon = TestDaemon::start(&writes(), "max_agents = 1").await;
    daemon
        .call(Method::Pause(PauseParams { model: None }))
        .await;
    let mut ids = Vec::new();
    for (title, priority) in [("low", 3), ("old mid", 2), ("high", 0), ("new mid", 2)] {
        ids.push(
            daemon
                .submit(BeadInput {
                    priority: Some(priority),
                    ..bead(title)
                })
                .await,
        );
    }
    daemon
        .call(Method::Resume(PauseParams { model: None }))
        .await;
    for id in &ids {
        daemon.wait_status(id, "closed").await;
    }
    let poured: Vec<String> = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "molecule.poured")
        .map(|e| e["bead"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        poured,
        [
            ids[2].clone(),
            ids[1].clone(),
            ids[3].clone(),
            ids[0].clone()
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_limit_holds_even_with_free_agent_slots() {
    let scenario = format!(
        "{}\n[[rule]]\nrole = \"refine\"\nresponses = [{{ sleep_ms = 100, summary = \"planned\" }}]\n",
        writes()
    );
    let daemon = TestDaemon::start(
        &scenario,
        "max_agents = 4\n[models.sonnet]\nmax_concurrent = 1",
    )
    .await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(daemon.submit(bead(&format!("bead {n}"))).await);
    }
    for id in &ids {
        daemon.wait_status(id, "closed").await;
    }
    let runs = daemon.invocations();
    let sonnet = most_at_once(runs.iter().filter(|r| r.model.as_deref() == Some("sonnet")));
    assert_eq!(sonnet, 1, "sonnet agents at once");
}

/// With one agent slot, the next step is dispatched, its worktree and run folder made, while
/// the agent before it runs; its own agent starts only when that one has ended. Which bead's
/// implementer takes the slot first is whichever is ready first; the other waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_step_is_made_ready_while_an_agent_runs_and_starts_in_its_slot() {
    let ws = Workspace::new("", "max_agents = 1");
    let go = ws.stub_file("go");
    ws.set_scenario(&implement_waits_for(&go));
    let daemon = ws.start().await;
    let beads = [
        daemon.submit(bead("first")).await,
        daemon.submit(bead("second")).await,
    ];
    // One implementer waits for `go` in the slot; the other bead's implement step is
    // dispatched and made ready meanwhile, which it could not be if dispatching waited for
    // the slot.
    for id in &beads {
        let step = format!("{id}.implement");
        daemon
            .wait_for("both implement steps dispatched", |e| {
                e["type"] == "step.dispatched" && e["step"] == step.as_str()
            })
            .await;
        let policy = daemon.run_dir(id, "implement", 1).join("policy.json");
        eventually("each implement step's run folder", async || {
            policy.exists().then_some(())
        })
        .await;
        assert!(daemon.worktree_exists(id), "{id}'s worktree is ready");
    }
    let implementers = || {
        daemon
            .invocations()
            .into_iter()
            .filter(|i| i.role() == "implement")
            .count()
    };
    eventually("an implementer in the slot", async || {
        (implementers() > 0).then_some(())
    })
    .await;
    assert_eq!(
        implementers(),
        1,
        "the other implementer waits for the slot"
    );
    // `status` tells the step waiting for its slot from the one whose agent runs.
    let in_slot = daemon
        .invocations()
        .into_iter()
        .find(|i| i.role() == "implement")
        .and_then(|i| i.bead)
        .expect("the implementer's bead");
    let status = daemon.call(Method::Status).await;
    let waits: Vec<(String, bool)> = status["running"]
        .as_array()
        .expect("running steps")
        .iter()
        .map(|r| {
            let step = r["step"].as_str().unwrap_or_default().to_owned();
            (step, r["waiting_for_slot"] == true)
        })
        .collect();
    let mut expected: Vec<(String, bool)> = beads
        .iter()
        .map(|b| (format!("{b}.implement"), *b != in_slot))
        .collect();
    let mut waits = waits;
    waits.sort();
    expected.sort();
    assert_eq!(waits, expected, "{status}");
    std::fs::write(&go, "").expect("go");
    for id in &beads {
        daemon.wait_status(id, "closed").await;
    }
    assert_eq!(implementers(), 2, "each implementer ran once");
    assert_eq!(most_at_once(&daemon.invocations()), 1, "agents at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_is_private_and_survives_bad_lines() {
    let daemon = TestDaemon::start("", "").await;
    let mut client = daemon.client().await;
    assert_eq!(client.hello.protocol, 1);
    let socket = daemon.paths.socket();
    let mode = std::fs::metadata(&socket)
        .expect("socket")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(socket.parent().expect("dir"))
        .expect("dir")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    let before = std::fs::read(daemon.paths.state.join("journal.jsonl")).expect("journal");
    for (line, code) in [
        ("{not json".to_owned(), "bad_request"),
        ("x".repeat(2 << 20), "too_large"),
        (
            r#"{"id":7,"method":"frobnicate"}"#.to_owned(),
            "unknown_method",
        ),
        (
            r#"{"id":8,"method":"show","params":{"id":"../etc"}}"#.to_owned(),
            "bad_request",
        ),
        (
            r#"{"id":9,"method":"show","params":{"id":"cat-nope"}}"#.to_owned(),
            "not_found",
        ),
    ] {
        client.send_line(&line).await.expect("send");
        let reply: Value = client.next_value().await.expect("reply").expect("a reply");
        assert_eq!(
            reply["error"]["code"],
            code,
            "{}",
            &line[..line.len().min(40)]
        );
    }
    let status = client
        .call(&Method::Status)
        .await
        .expect("the connection is still usable");
    assert!(status["seq"].is_u64());
    assert_eq!(
        std::fs::read(daemon.paths.state.join("journal.jsonl")).expect("journal"),
        before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_submits_shows_lists_and_prints_logs() {
    let daemon = TestDaemon::start(&writes(), "").await;
    let (code, out, err) = daemon
        .ctl(
            &[
                "submit",
                "--title",
                "From ctl",
                "--description-file",
                "-",
                "--priority",
                "1",
            ],
            "described on stdin\n",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let id = out
        .trim()
        .strip_prefix("submitted ")
        .expect("submitted line")
        .to_owned();
    daemon.wait_status(&id, "closed").await;
    let (code, out, err) = daemon.ctl(&["show", &id, "--runs"], "").await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("[####################] 4/4"), "{out}");
    assert!(
        out.contains(&format!("{id}.implement"))
            && out.contains("    attempt 1  ")
            && out.contains("  model sonnet  "),
        "{out}"
    );
    let (code, out, _) = daemon.ctl(&["--json", "show", &id], "").await;
    assert_eq!(code, 0);
    let shown: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(shown["bead"]["description"], "described on stdin\n");
    assert_eq!(shown["bead"]["priority"], 1);
    let (code, out, _) = daemon.ctl(&["list"], "").await;
    assert!(
        code == 0 && out.contains("PROGRESS") && out.contains(&id),
        "{out}"
    );
    let (code, out, _) = daemon.ctl(&["status"], "").await;
    assert!(
        code == 0 && out.contains("catalystd") && out.contains("closed 1"),
        "{out}"
    );
    let (code, out, err) = daemon
        .ctl(&["logs", &format!("{id}.implement"), "--raw"], "")
        .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("\"type\":\"result\""),
        "the agent's stream-json output: {out}"
    );
    let (code, _, err) = daemon.ctl(&["show", "cat-missing"], "").await;
    assert!(
        code != 0 && err.contains("not_found") && err.contains("cat-missing"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_reload_is_refused_and_a_good_one_takes_effect() {
    let daemon = TestDaemon::start(&writes(), "").await;
    let formulas = daemon.paths.state.join("formulas");
    std::fs::create_dir_all(&formulas).expect("formulas dir");
    std::fs::write(
        formulas.join("quick.formula.toml"),
        "formula = \"quick\"\n[[steps]]\nid = \"work\"\ntitle = \"Work\"\nloop = 3\n",
    )
    .expect("broken formula");
    // A good config edit made at the same time takes effect all the same.
    let config = daemon.paths.config();
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("prefix = \"new\"\n{text}")).expect("config edit");
    let (code, _, err) = daemon.ctl(&["reload"], "").await;
    assert!(
        code != 0 && err.contains("quick.formula.toml") && err.contains("loop"),
        "a broken formula is refused by file and reason: {err}"
    );
    let (code, _, err) = daemon
        .ctl(&["submit", "--title", "x", "--formula", "quick"], "")
        .await;
    assert!(
        code != 0
            && err.contains("formula `quick` did not load")
            && err.contains("quick.formula.toml"),
        "the answer names the file that did not load: {err}"
    );
    let other = daemon.submit(bead("after the reload")).await;
    assert!(
        other.starts_with("new-"),
        "the config edit took effect: {other}"
    );
    // `status` says which reload refused what, in words and in JSON.
    let (_, said, _) = daemon.ctl(&["status"], "").await;
    assert!(
        said.contains("refused `") && said.contains("quick.formula.toml"),
        "{said}"
    );
    let (_, json, _) = daemon.ctl(&["status", "--json"], "").await;
    let json: serde_json::Value = serde_json::from_str(&json).expect("status JSON");
    let refused = &json["refused_reload"]["files"][0];
    assert!(
        refused["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("quick.formula.toml")),
        "{json}"
    );
    assert!(
        refused["reason"]
            .as_str()
            .is_some_and(|r| r.contains("loop")),
        "{json}"
    );
    std::fs::write(
        formulas.join("quick.formula.toml"),
        "formula = \"quick\"\n[[steps]]\nid = \"work\"\ntitle = \"Work\"\nrole = \"implement\"\n[[steps]]\nid = \"merge\"\ntitle = \"Merge\"\nrole = \"merge\"\nneeds = [\"work\"]\n",
    )
    .expect("good formula");
    let (code, _, err) = daemon.ctl(&["reload"], "").await;
    assert_eq!(code, 0, "{err}");
    let (_, json, _) = daemon.ctl(&["status", "--json"], "").await;
    let json: serde_json::Value = serde_json::from_str(&json).expect("status JSON");
    assert!(
        json.get("refused_reload").is_none(),
        "a clean reload clears it: {json}"
    );
    let (code, out, err) = daemon
        .ctl(
            &["submit", "--title", "quick one", "--formula", "quick"],
            "",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let id = out
        .trim()
        .strip_prefix("submitted ")
        .expect("id")
        .to_owned();
    daemon.wait_status(&id, "closed").await;
    assert_eq!(daemon.roles_of(&id), ["implement"]);

    // A formula that loaded, broken by an edit: its last good version stays in force.
    std::fs::write(
        formulas.join("quick.formula.toml"),
        "formula = \"quick\"\n[[steps]]\nid = \"work\"\nmodle = \"opus\"\n",
    )
    .expect("broken edit");
    let (code, _, err) = daemon.ctl(&["reload"], "").await;
    assert!(code != 0 && err.contains("modle"), "{err}");
    let again = daemon
        .submit(BeadInput {
            formula: Some("quick".into()),
            ..bead("quick again")
        })
        .await;
    daemon.wait_status(&again, "closed").await;
    assert_eq!(daemon.roles_of(&again), ["implement"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_formula_folder_made_after_the_start_is_read() {
    let daemon = TestDaemon::start("", "").await;
    let folder = daemon.repo.join(".beads").join("formulas");
    assert!(
        !folder.exists(),
        "the test needs the folder missing at start"
    );
    std::fs::create_dir_all(&folder).expect("make the folder");
    std::fs::write(
        folder.join("late.formula.toml"),
        "formula = \"late\"\n[[steps]]\nid = \"check\"\ntitle = \"Check\"\nrole = \"gate\"\nrun = [\"true\"]\n",
    )
    .expect("write the formula");
    // Until the daemon has read the folder, a submit naming the formula is refused.
    let late = BeadInput {
        id: Some("cat-late".into()),
        formula: Some("late".into()),
        ..bead("Uses a formula written after the start")
    };
    catalyst_testkit::poll::eventually("the late formula to be known", async || {
        let mut client = daemon.client().await;
        client
            .call(&Method::Submit(vec![late.clone()]))
            .await
            .ok()
            .map(drop)
    })
    .await;
    daemon.wait_status("cat-late", "closed").await;
}
