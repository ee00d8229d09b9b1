//! Webhooks: a receiver on loopback hears what needs a person and each merge once, in the
//! format its webhook asks for; one that fails is tried again, one that is down is given up
//! without holding anything back; and the webhook's URL, a secret, is not within an agent's
//! reach.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::Value;

use catalyst::protocol::BeadInput;
use catalyst_testkit::poll::eventually;
use catalyst_testkit::{bead, TestDaemon};

/// What the receiver was posted, by webhook (the last part of its path), and how many posts to
/// `/flaky` it still refuses.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<(String, Value)>>>,
    refuse_flaky: Arc<AtomicU32>,
}

impl Receiver {
    /// The bodies webhook `name` was posted.
    fn bodies(&self, name: &str) -> Vec<Value> {
        let got = self.got.lock().expect("receiver");
        got.iter()
            .filter(|(hook, _)| hook == name)
            .map(|(_, body)| body.clone())
            .collect()
    }
}

async fn take(
    State(receiver): State<Receiver>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> StatusCode {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    if name == "flaky"
        && receiver
            .refuse_flaky
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    receiver.got.lock().expect("receiver").push((name, body));
    StatusCode::OK
}

/// A receiver on a loopback port: its address and what it heard.
async fn receiver() -> (String, Receiver) {
    let receiver = Receiver::default();
    receiver.refuse_flaky.store(2, Ordering::SeqCst);
    let app = axum::Router::new()
        .route("/{name}", axum::routing::post(take))
        .with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), receiver)
}

/// An implement step, a person's approval, then the daemon's merge.
const ASKED: &str = r#"
formula = "asked"
[[steps]]
id = "implement"
title = "Implement"
role = "implement"
[[steps]]
id = "approve"
title = "Approve"
approval = true
needs = ["implement"]
[[steps]]
id = "merge"
title = "Merge"
role = "merge"
needs = ["approve"]
"#;

/// A gate between the implementer and the approval that tries to read the config, where the
/// webhooks' URLs are, from the bead's worktree (`.catalyst/worktrees/<bead>`): a gate runs the
/// project's own code, so it gets the same look as an agent. It fails, once and for good, if it
/// can read it.
const PEEKING_GATE: &str = r#"
[[steps]]
id = "peek"
title = "Peek"
role = "gate"
run = ["if cat ../../config.toml; then exit 1; fi"]
max_fix_iterations = 1
needs = ["implement"]
"#;

/// One step, which the scenario blocks.
const STUCK: &str = r#"
formula = "stuck"
[[steps]]
id = "stuck"
title = "Stuck"
role = "task"
"#;

/// The implementer looks for the webhook's URL where an agent could find it: the config file,
/// its environment, and its context file; what it saw is committed, so the test reads it on
/// `main`.
const SCENARIO: &str = r#"
[[rule]]
step = "stuck"
responses = [{ status = "BLOCKED", summary = "the spec contradicts itself" }]

[[rule]]
role = "implement"
responses = [{ shell = ["cat \"${CATALYST_CONTEXT%%/.catalyst/*}/.catalyst/config.toml\" > seen.txt 2>&1; env >> seen.txt; cat \"$CATALYST_CONTEXT\" >> seen.txt 2>&1; true"], summary = "looked around" }]
"#;

/// The secret part of every webhook URL the test configures.
const SECRET: &str = "T0KEN-s3cret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_hear_each_notice_once_and_a_failing_one_holds_nothing_back() {
    let (base, receiver) = receiver().await;
    let hooks = format!(
        "webhooks = [\
         {{ name = \"team\", url = \"{base}/team?key={SECRET}\" }}, \
         {{ name = \"chat\", url = \"{base}/chat?key={SECRET}\", format = \"slack\", notices = [\"merged\"] }}, \
         {{ name = \"flaky\", url = \"{base}/flaky?key={SECRET}\", notices = [\"blocked\"], tries = 3, retry_secs = 1 }}, \
         {{ name = \"dead\", url = \"http://127.0.0.1:1/{SECRET}\", notices = [\"approval\"], tries = 2, retry_secs = 1 }}]\n"
    );
    let mut daemon = TestDaemon::start(SCENARIO, &hooks).await;
    // Without bubblewrap, gates run with the daemon's rights, and read the config as it does.
    let asked_text = if catalyst_testkit::sandboxed() {
        format!(
            "{}{PEEKING_GATE}",
            ASKED.replace("needs = [\"implement\"]", "needs = [\"peek\"]")
        )
    } else {
        ASKED.to_owned()
    };
    daemon.add_formula("asked", &asked_text).await;
    daemon.add_formula("stuck", STUCK).await;
    let asked = daemon
        .submit(BeadInput {
            formula: Some("asked".into()),
            ..bead("Asked")
        })
        .await;
    let stuck = daemon
        .submit(BeadInput {
            formula: Some("stuck".into()),
            ..bead("Stuck")
        })
        .await;

    if catalyst_testkit::sandboxed() {
        let peek = format!("{asked}.peek");
        let ended = daemon
            .wait_for("the peeking gate to end", |e| {
                (e["type"] == "gate.passed" || e["type"] == "gate.failed")
                    && e["step"] == peek.as_str()
            })
            .await;
        assert_eq!(
            ended["type"], "gate.passed",
            "the gate read the config: {ended}"
        );
    }

    // The approval is heard by `team`; `dead` is given up after its two tries.
    let approve = format!("{asked}.approve");
    let waiting = daemon
        .wait_for("the approval to wait", |e| {
            e["type"] == "gate.waiting" && e["step"] == approve.as_str()
        })
        .await;
    let failed = daemon
        .wait_for("the dead webhook to be given up", |e| {
            e["type"] == "notify.failed" && e["hook"] == "dead"
        })
        .await;
    assert_eq!(failed["event"], waiting["seq"]);
    assert_eq!(failed["tries"], 2);
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(!error.is_empty() && !error.contains(SECRET), "{error}");

    // A person approves, and the bead merges while `dead` is down.
    let (code, _, err) = daemon.ctl(&["approve", &asked], "").await;
    assert_eq!(code, 0, "{err}");
    daemon.wait_status(&asked, "closed").await;
    let merged = daemon
        .wait_for("the merge to be posted to chat", |e| {
            e["type"] == "notify.sent" && e["hook"] == "chat"
        })
        .await;
    daemon
        .wait_for("the merge to be posted to team", |e| {
            e["type"] == "notify.sent" && e["hook"] == "team" && e["kind"] == "merged"
        })
        .await;

    // The blocked bead: `flaky` refused twice, took it at the third try.
    daemon.wait_status(&stuck, "blocked").await;
    let flaky = daemon
        .wait_for("the blocked bead to reach flaky", |e| {
            e["type"] == "notify.sent" && e["hook"] == "flaky"
        })
        .await;
    assert_eq!(flaky["tries"], 3, "{flaky}");
    daemon
        .wait_for("the blocked bead to reach team", |e| {
            e["type"] == "notify.sent" && e["hook"] == "team" && e["kind"] == "blocked"
        })
        .await;

    let team = receiver.bodies("team");
    let kinds: BTreeMap<String, usize> = team.iter().fold(BTreeMap::new(), |mut m, b| {
        *m.entry(b["kind"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
        m
    });
    assert_eq!(
        kinds,
        BTreeMap::from([
            ("approval".to_owned(), 1),
            ("blocked".to_owned(), 1),
            ("merged".to_owned(), 1)
        ]),
        "each once: {team:#?}"
    );
    let blocked = team
        .iter()
        .find(|b| b["kind"] == "blocked")
        .expect("blocked");
    assert_eq!(blocked["bead"], stuck.as_str());
    assert!(
        blocked["text"]
            .as_str()
            .is_some_and(|t| t.contains("the spec contradicts itself")),
        "{blocked}"
    );
    assert_eq!(blocked["event"]["type"], "bead.comment");
    let chat = receiver.bodies("chat");
    assert_eq!(chat.len(), 1, "{chat:#?}");
    let text = chat[0]["text"].as_str().expect("slack text");
    assert!(
        text.starts_with("catalyst (repo): ")
            && text.contains(&format!("{asked} merged into main")),
        "{text}"
    );
    assert_eq!(chat[0].as_object().map(|o| o.len()), Some(1), "only `text`");
    assert_eq!(receiver.bodies("flaky").len(), 1);

    // After a restart nothing is posted again: each webhook goes on from its record.
    let seen = team.len();
    daemon.stop().await;
    daemon.restart();
    let later = daemon
        .submit(BeadInput {
            formula: Some("stuck".into()),
            ..bead("Stuck again")
        })
        .await;
    let after = daemon
        .wait_for("the new blocked bead to reach team", |e| {
            e["type"] == "notify.sent"
                && e["hook"] == "team"
                && e["seq"].as_u64() > merged["seq"].as_u64()
                && e["kind"] == "blocked"
                && e["event"].as_u64() > flaky["event"].as_u64()
        })
        .await;
    let team = receiver.bodies("team");
    assert_eq!(team.len(), seen + 1, "only the new notice: {team:#?}");
    assert_eq!(team[seen]["bead"], later.as_str());
    assert_eq!(team[seen]["seq"], after["event"]);

    // The implementer found the URL nowhere: not in the config, its environment or context.
    // (Without bubblewrap the agent runs unconfined and reads the config like any program of
    // the daemon's user: that is what the sandbox is for.)
    let seen = daemon.file_on_main("seen.txt").expect("what the agent saw");
    if catalyst_testkit::sandboxed() {
        assert!(!seen.contains(SECRET), "{seen}");
        assert!(seen.contains("config.toml: No such file"), "{seen}");
    }
    assert!(
        seen.contains("CATALYST_STEP="),
        "the agent's environment: {seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_puts_changed_webhooks_in_force_at_once() {
    let (base, receiver) = receiver().await;
    let before = format!(
        "webhooks = [{{ name = \"team\", url = \"{base}/team\", notices = [\"merged\"] }}]"
    );
    let daemon = TestDaemon::start(SCENARIO, &format!("{before}\n")).await;
    daemon.add_formula("stuck", STUCK).await;
    let stuck = |title: &str| BeadInput {
        formula: Some("stuck".into()),
        ..bead(title)
    };
    // `team` hears merges only: a merge is posted to it, a blocked bead is not.
    let merged = daemon.submit(bead("Merged")).await;
    daemon.wait_status(&merged, "closed").await;
    daemon
        .wait_for("the merge notice", |e| {
            e["type"] == "notify.sent" && e["hook"] == "team"
        })
        .await;
    let first = daemon.submit(stuck("First")).await;
    daemon.wait_status(&first, "blocked").await;

    // The config now has `team` hearing blocked beads too, and a new webhook `chat`.
    let config = daemon.paths.config();
    let text = std::fs::read_to_string(&config).expect("config");
    let after = format!(
        "webhooks = [{{ name = \"team\", url = \"{base}/team\", notices = [\"merged\", \"blocked\"] }}, \
         {{ name = \"chat\", url = \"{base}/chat\", format = \"slack\", notices = [\"blocked\"] }}]"
    );
    let changed = text.replace(&before, &after);
    assert_ne!(changed, text, "the webhooks line is in the config");
    std::fs::write(&config, changed).expect("write the config");
    let (code, _, err) = daemon.ctl(&["reload"], "").await;
    assert_eq!(code, 0, "{err}");

    // The next blocked bead is posted to both, without a restart; the change applies from
    // the next notice, so the bead blocked before it is not posted late.
    let second = daemon.submit(stuck("Second")).await;
    daemon.wait_status(&second, "blocked").await;
    for hook in ["team", "chat"] {
        daemon
            .wait_for(&format!("the notice to {hook}"), |e| {
                e["type"] == "notify.sent" && e["hook"] == hook && e["kind"] == "blocked"
            })
            .await;
    }
    // The poster of `team` as it was is stopped: a merge is posted to `team` once. (Its next
    // notice, in journal order, is posted after the merge's.)
    let again = daemon.submit(bead("Merged again")).await;
    daemon.wait_status(&again, "closed").await;
    let third = daemon.submit(stuck("Third")).await;
    daemon.wait_status(&third, "blocked").await;
    eventually("team to hear of the third bead", async || {
        let heard = receiver.bodies("team");
        heard
            .iter()
            .any(|b| b["bead"] == third.as_str())
            .then_some(())
    })
    .await;
    let team: Vec<(Value, Value)> = receiver
        .bodies("team")
        .iter()
        .map(|b| (b["kind"].clone(), b["bead"].clone()))
        .collect();
    assert_eq!(
        team,
        [
            ("merged".into(), merged.as_str().into()),
            ("blocked".into(), second.as_str().into()),
            ("merged".into(), again.as_str().into()),
            ("blocked".into(), third.as_str().into()),
        ],
        "{team:?}"
    );
    let chat: Vec<String> = receiver
        .bodies("chat")
        .iter()
        .map(|b| b["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(chat.len(), 2, "{chat:?}");
    assert!(
        chat[0].contains(&format!("{second} is blocked")),
        "{chat:?}"
    );
    assert!(chat[1].contains(&format!("{third} is blocked")), "{chat:?}");
}
