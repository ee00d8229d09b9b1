//! Watching and feeding the daemon: event subscriptions, `ctl events`, the inbox, `ctl`
//! errors, and the demo.

use std::path::Path;

use catalyst_testkit::cli::{catalyst, catalyst_in_terminal};
use catalyst_testkit::{bead, bead_with_id, Event, Events, TestDaemon, Workspace, TIMEOUT};

const SLOW_IMPLEMENT: &str = r#"
[[rule]]
role = "implement"
responses = [{ sleep_ms = 200, write = { "hello.txt" = "hello\n" }, summary = "wrote hello.txt" }]
"#;

fn seqs(events: &[Event]) -> Vec<(u64, String)> {
    events
        .iter()
        .map(|e| {
            (
                e["seq"].as_u64().expect("seq"),
                e["type"].as_str().expect("type").to_owned(),
            )
        })
        .collect()
}

async fn read_until(events: &mut Events, last: u64) -> Vec<Event> {
    let mut out = Vec::new();
    while let Some(e) = events.next().await {
        let seq = e["seq"].as_u64().unwrap_or(0);
        out.push(e);
        if seq >= last {
            break;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_late_and_after_the_fact_subscribers_see_the_same_events() {
    let daemon = TestDaemon::start(SLOW_IMPLEMENT, "").await;
    let mut early = daemon.subscribe(0).await;
    let id = daemon.submit(bead("Watched")).await;
    daemon
        .wait_for("the first step to finish", |e| e["type"] == "step.finished")
        .await;
    let mut late = daemon.subscribe(0).await;
    let closed = daemon.wait_status(&id, "closed").await;
    let last = closed["seq"].as_u64().expect("seq");
    let early = tokio::time::timeout(TIMEOUT, read_until(&mut early, last))
        .await
        .expect("early subscriber");
    let late = tokio::time::timeout(TIMEOUT, read_until(&mut late, last))
        .await
        .expect("late subscriber");
    let (code, stdout, stderr) = daemon.ctl(&["--json", "events", "--since", "0"], "").await;
    assert_eq!(code, 0, "{stderr}");
    let after: Vec<Event> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .filter(|e: &Event| e["seq"].as_u64().unwrap_or(0) <= last)
        .collect();
    assert!(early.len() > 10, "the whole run: {}", early.len());
    assert_eq!(seqs(&early), seqs(&late));
    assert_eq!(seqs(&early), seqs(&after));
    assert_eq!(early, after, "the same events, byte for byte");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bead_dropped_in_the_inbox_is_dispatched() {
    let daemon = TestDaemon::start(SLOW_IMPLEMENT, "").await;
    // The daemon is up once it answers.
    daemon.call(catalyst::protocol::Method::Status).await;
    let inbox = daemon.paths.inbox();
    let tmp = inbox.join(".incoming.tmp");
    std::fs::write(&tmp, r#"{"id": "cat-inbox", "title": "From the inbox"}"#).expect("write");
    std::fs::rename(&tmp, inbox.join("cat-inbox.json")).expect("rename");
    daemon
        .wait_for("the inbox bead's first step", |e| {
            e["type"] == "step.dispatched" && e["bead"] == "cat-inbox"
        })
        .await;
    daemon.wait_status("cat-inbox", "closed").await;
    assert!(
        !inbox.join("cat-inbox.json").exists(),
        "an ingested file is removed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_inbox_file_is_moved_aside_with_the_reason() {
    let daemon = TestDaemon::start("", "").await;
    daemon.call(catalyst::protocol::Method::Status).await;
    let inbox = daemon.paths.inbox();
    std::fs::write(inbox.join(".x.tmp"), r#"{"id": "../evil", "title": "x"}"#).expect("write");
    std::fs::rename(inbox.join(".x.tmp"), inbox.join("evil.json")).expect("rename");
    // Inbox files are handled in the order they arrive: once a good file dropped after the
    // bad one has been ingested, the bad one has been dealt with.
    std::fs::write(
        inbox.join(".y.tmp"),
        r#"{"id": "cat-probe", "title": "probe"}"#,
    )
    .expect("write");
    std::fs::rename(inbox.join(".y.tmp"), inbox.join("probe.json")).expect("rename");
    daemon
        .wait_for("the probe bead", |e| {
            e["type"] == "bead.created" && e["bead"]["id"] == "cat-probe"
        })
        .await;
    let why = daemon.paths.rejected().join("evil.json.why");
    let reason = std::fs::read_to_string(&why).expect("why");
    assert!(reason.contains("../evil"), "{reason}");
    assert!(daemon.paths.rejected().join("evil.json").exists());
    assert!(!inbox.join("evil.json").exists());
}

#[test]
fn ctl_says_clearly_when_the_daemon_is_not_running() {
    let dir = tempfile::tempdir().expect("dir");
    let workspace = dir.path().to_str().expect("utf-8");
    let (code, _, err) = catalyst(dir.path(), &["ctl", "--workspace", workspace, "status"]);
    assert_eq!(code, 2);
    assert!(err.contains("catalystd is not running"), "{err}");
}

#[test]
fn the_demo_runs_the_fix_loop_and_merges() {
    let (code, text, stderr) = catalyst(Path::new("."), &["demo"]);
    assert_eq!(code, 0, "{text}\n{stderr}");
    let dispatched: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("step.dispatched"))
        .filter_map(|l| l.split_whitespace().nth(3))
        .map(|step| step.rsplit('.').next().unwrap_or(step))
        .collect();
    assert_eq!(
        dispatched,
        ["refine", "implement", "review", "fix-1", "review"]
    );
    assert!(text.contains("merge.completed"), "{text}");
    assert!(text.contains("is closed"), "{text}");
    // It removes the repository it named, and says how to keep it.
    assert!(text.contains("`catalyst demo --keep` keeps it"), "{text}");
}

/// A gated bead that waits for a person at its approval step.
const GATED: &str =
    "[[rule]]\nrole = \"implement\"\nresponses = [{ write = { \"a.txt\" = \"a\\n\" } }]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_behaves_like_the_tools_people_know() {
    let daemon = TestDaemon::start(GATED, "").await;
    let sub = daemon.repo.join("src").join("deep");
    std::fs::create_dir_all(&sub).expect("a subfolder");
    let ctl = |args: &[&str]| {
        let mut full = vec!["ctl"];
        full.extend_from_slice(args);
        catalyst(&sub, &full)
    };

    // From a subfolder, with the title as an argument.
    let (code, out, err) = ctl(&["submit", "Say hello", "--id", "cat-pos"]);
    assert_eq!((code, out.trim()), (0, "submitted cat-pos"), "{err}");
    daemon.submit_gated_waiting("cat-gated", "true").await;

    // The daemon's errors exit 1 with its message; the words people mistype are errors.
    for (args, says) in [
        (
            &["show", "cat-nope"][..],
            "not_found: bead `cat-nope` does not exist",
        ),
        (&["list", "--status", "opne"], "unknown status `opne`"),
        (
            &["events", "--type", "step.finsihed"],
            "unknown event type `step.finsihed`",
        ),
    ] {
        let (code, _, err) = ctl(args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }

    // The step id `ctl status` prints is accepted where the bead's is.
    let (code, status, _) = ctl(&["status"]);
    assert_eq!(code, 0);
    assert!(
        status.contains("waiting for approval: cat-gated.approve"),
        "{status}"
    );
    let (code, _, err) = ctl(&["approve", "cat-gated.approve"]);
    assert_eq!(code, 0, "{err}");
    daemon
        .wait_for("the approval", |e| {
            e["type"] == "gate.passed" && e["step"] == "cat-gated.approve"
        })
        .await;

    // A reader that stops early is not an error.
    let piped = std::process::Command::new("bash")
        .args(["-o", "pipefail", "-c"])
        .arg(format!(
            "{} ctl events | head -n 1",
            catalyst_testkit::catalyst_bin().display()
        ))
        .current_dir(&sub)
        .output()
        .expect("run a pipeline");
    assert!(piped.status.success(), "{piped:?}");
    assert!(
        piped.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&piped.stdout).lines().count(), 1);
}

#[test]
fn the_binaries_name_themselves_and_keep_the_hook_out_of_the_help() {
    let (code, help, _) = catalyst(Path::new("."), &["--help"]);
    assert_eq!(code, 0);
    assert!(help.contains("ctl") && !help.contains("hook"), "{help}");
    let out = std::process::Command::new(catalyst_testkit::catalystd_bin())
        .arg("--version")
        .output()
        .expect("run catalystd");
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(version.starts_with("catalystd "), "{version}");
}

/// A target branch that does not exist failed every attempt alike ("target branch `main` does
/// not exist", six times, then blocked). Now it pauses dispatching, spending no attempt;
/// `ctl status` says why; once the branch exists, `ctl resume` lets the bead go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_the_daemon_cannot_prepare_pauses_dispatching_without_spending_an_attempt() {
    let daemon = TestDaemon::start(
        catalyst_testkit::scenario::IMPLEMENT_WRITES_HELLO,
        "target_branch = \"trunk\"",
    )
    .await;
    let id = daemon.submit(bead("Nowhere to branch from")).await;
    let paused = daemon
        .wait_for("dispatching paused", |e| e["type"] == "dispatch.paused")
        .await;
    assert_eq!(
        (paused["cause"].as_str(), paused["scope"].as_str()),
        (Some("preparation"), Some("all")),
        "{paused}"
    );
    assert!(
        paused["reason"]
            .as_str()
            .is_some_and(|r| r.contains("target branch `trunk` does not exist")),
        "{paused}"
    );
    let events = daemon.events().await;
    let retry = events
        .iter()
        .find(|e| e["type"] == "step.retry")
        .expect("the step is requeued");
    assert_eq!(retry["counted"], false, "{retry}");
    let (code, status, _) = daemon.ctl(&["status"], "").await;
    assert_eq!(code, 0);
    assert!(
        status.contains("dispatching of all steps paused (preparation)")
            && status.contains("target branch `trunk` does not exist")
            && status.contains("catalyst ctl resume"),
        "{status}"
    );

    let repo = git2::Repository::open(&daemon.repo).expect("repo");
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .expect("main's tip");
    repo.branch("trunk", &head, false).expect("create trunk");
    let (code, _, err) = daemon.ctl(&["resume"], "").await;
    assert_eq!(code, 0, "{err}");
    daemon.wait_status(&id, "closed").await;
    let shown = daemon.show(&id).await;
    let refine = &shown["steps"][0];
    assert_eq!(
        (refine["step"].as_str(), refine["attempts"].as_u64()),
        (Some("refine"), Some(2)),
        "the held attempt and the one that ran: {refine}"
    );
}

/// The pause for an unreachable API said only what the agent CLI printed ("Unable to connect to
/// API"), so nobody could tell which address it had tried. The reason now names the base URL
/// the agent was given: here the daemon's `ANTHROPIC_BASE_URL`, which its agents inherit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_pauses_with_the_url_the_agent_tried() {
    const UNREACHABLE: &str = r#"
[[rule]]
responses = [{ raw = "Unable to connect to API (ECONNREFUSED)", is_error = true }]
"#;
    // A documentation address: nothing answers there, and no name needs resolving.
    let url = "http://192.0.2.1:8080";
    let daemon = Workspace::new(UNREACHABLE, "")
        .catalystd()
        .env("ANTHROPIC_BASE_URL", url)
        .spawn();
    daemon.submit(bead("Out of reach")).await;
    let paused = daemon
        .wait_for("dispatching paused", |e| e["type"] == "dispatch.paused")
        .await;
    assert_eq!(paused["cause"], "connection", "{paused}");
    let reason = paused["reason"].as_str().expect("a reason");
    assert!(
        reason.contains("Unable to connect to API") && reason.contains(url),
        "{paused}"
    );
    let (code, status, _) = daemon.ctl(&["status"], "").await;
    assert_eq!(code, 0);
    assert!(status.contains(&format!("(the API: {url})")), "{status}");
}

/// Bead `cat-hang`'s agent hangs in a shell command until it is stopped; other beads'
/// implement steps write a file.
const HANGS: &str = r#"
[[rule]]
role = "implement"
bead = "cat-hang"
responses = [{ tools = [{ name = "Bash", input = { command = "sleep 300" } }] }]

[[rule]]
role = "implement"
responses = [{ write = { "a.txt" = "a\n" }, summary = "wrote a" }]
"#;

/// The line of `text` (a `ctl list`) that starts with `id` and a blank.
fn row<'a>(text: &'a str, id: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(&format!("{id} ")))
        .unwrap_or_else(|| panic!("no row for {id} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_stops_the_agent_and_ctl_says_cancelled_and_what_waits() {
    let ws = Workspace::new(HANGS, "grace_secs = 1");
    let daemon = ws.start().await;
    daemon.submit(bead_with_id("cat-hang")).await;
    let (code, _, err) = daemon
        .ctl(
            &[
                "submit",
                "After it",
                "--id",
                "cat-after",
                "--after",
                "cat-hang",
            ],
            "",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    daemon
        .wait_for("the agent in its shell command", |e| {
            e["type"] == "agent.tool" && e["step"] == "cat-hang.implement" && e["tool"] == "Bash"
        })
        .await;

    // What a bead submitted `--after` another waits for.
    let (code, list, err) = daemon.ctl(&["list"], "").await;
    assert_eq!(code, 0, "{err}");
    assert!(
        row(&list, "cat-after").contains("  waiting for cat-hang  "),
        "{list}"
    );
    let (_, show, _) = daemon.ctl(&["show", "cat-after"], "").await;
    assert!(show.contains("\nwaiting for cat-hang\n"), "{show}");

    // Cancelling stops the agent and the command it runs, then closes the bead.
    let (code, out, err) = daemon
        .ctl(&["cancel", "cat-hang", "--reason", "not needed"], "")
        .await;
    assert_eq!((code, out.trim()), (0, "cancelling: cat-hang"), "{err}");
    let finished = daemon
        .wait_for("the agent to stop", |e| {
            e["type"] == "step.finished" && e["step"] == "cat-hang.implement"
        })
        .await;
    assert_eq!(finished["exit"], "cancelled", "{finished}");
    let closed = daemon.wait_status("cat-hang", "closed").await;
    assert_eq!(closed["reason"], "cancelled: not needed");
    daemon
        .wait_for("the worktree to go", |e| {
            e["type"] == "worktree.removed" && e["bead"] == "cat-hang"
        })
        .await;
    let left: Vec<_> = ws
        .agent_processes()
        .into_iter()
        .filter(|(_, command)| command.contains("sleep 300"))
        .collect();
    assert!(left.is_empty(), "the agent's command is gone: {left:?}");

    let (_, list, _) = daemon.ctl(&["list"], "").await;
    let hang = row(&list, "cat-hang");
    assert!(
        hang.contains(" cancelled ") && !hang.contains(" closed "),
        "{list}"
    );
    let (_, show, _) = daemon.ctl(&["show", "cat-hang"], "").await;
    assert!(
        show.contains("status cancelled ") && show.contains("reason: cancelled: not needed"),
        "{show}"
    );

    // The bead after it was released by the cancel and ran without the cancelled bead's work.
    // It waits, says why, and says what a person can do.
    let (_, list, _) = daemon.ctl(&["list"], "").await;
    assert!(
        row(&list, "cat-after").contains("  waiting for cat-hang (cancelled)  "),
        "{list}"
    );
    let (_, show, _) = daemon.ctl(&["show", "cat-after"], "").await;
    assert!(
        show.contains("\nwaiting for cat-hang (cancelled)\n")
            && show.contains(
                "cat-hang was cancelled and will not merge: \
                 `catalyst ctl update cat-after --drop-after cat-hang` stops waiting for it"
            ),
        "{show}"
    );
    let (_, json, _) = daemon.ctl(&["--json", "show", "cat-after"], "").await;
    let shown: Event = serde_json::from_str(&json).expect("json");
    assert_eq!(
        shown["stuck_on"],
        serde_json::json!({"cat-hang": "cancelled"}),
        "{json}"
    );
    let poured = |events: &[Event]| {
        events
            .iter()
            .any(|e| e["type"] == "molecule.poured" && e["bead"] == "cat-after")
    };
    assert!(!poured(&daemon.events().await), "cat-after was not poured");

    let (code, _, err) = daemon
        .ctl(&["update", "cat-after", "--drop-after", "cat-1"], "")
        .await;
    assert_eq!(code, 1, "it never waited for cat-1");
    assert!(
        err.contains("`cat-after` does not wait for `cat-1`"),
        "{err}"
    );
    let (code, _, err) = daemon
        .ctl(&["update", "cat-after", "--drop-after", "cat-hang"], "")
        .await;
    assert_eq!(code, 0, "{err}");
    daemon
        .wait_for("cat-after to be poured once it waits no more", |e| {
            e["type"] == "molecule.poured" && e["bead"] == "cat-after"
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_prints_local_times_aligned_columns_and_colour_only_on_a_terminal() {
    let daemon = TestDaemon::start(GATED, "").await;
    // Paused, so the beads stay as they are while they are looked at; said in words.
    let (code, said, err) = daemon.ctl(&["pause"], "").await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        said,
        "dispatching is paused (`catalyst ctl resume` goes on)\n"
    );
    let (code, said, err) = daemon.ctl(&["reload"], "").await;
    assert_eq!(
        (code, said.as_str()),
        (0, "reloaded config, prompts and formulas\n"),
        "{err}"
    );
    for id in ["cat-1", "cat-with-a-long-id"] {
        daemon.submit(bead_with_id(id)).await;
    }

    // Times follow `TZ`: the same event two hours apart in a zone two hours east.
    let (_, json, _) = daemon.ctl(&["--json", "events", "--since", "0"], "").await;
    let first: Event = serde_json::from_str(json.lines().next().expect("an event")).expect("json");
    let utc_time = &first["ts"].as_str().expect("ts")[11..19];
    let time_in = async |tz: &str| {
        let (code, out, err) = daemon
            .ctl_env(&["events", "--since", "0"], "", &[("TZ", tz)])
            .await;
        assert_eq!(code, 0, "{err}");
        let line = out.lines().next().expect("a line").to_owned();
        line.split_whitespace().nth(1).expect("a time").to_owned()
    };
    assert_eq!(time_in("UTC").await, utc_time);
    let hour: u32 = utc_time[..2].parse().expect("hour");
    assert_eq!(
        time_in("XYZ-2").await,
        format!("{:02}{}", (hour + 2) % 24, &utc_time[2..])
    );

    // Columns line up however long the ids are, and a pipe gets no colour.
    let (_, list, _) = daemon.ctl(&["list"], "").await;
    let rows: Vec<&str> = list.lines().collect();
    assert_eq!(rows.len(), 3, "{list}");
    for column in ["STATUS", "PRI", "PROGRESS", "TITLE"] {
        let at = rows[0].find(column).expect("a header");
        for row in &rows[1..] {
            let starts_there = row.as_bytes()[at - 1] == b' ' && row.as_bytes()[at] != b' ';
            assert!(starts_there, "{column} lines up:\n{list}");
        }
    }
    assert!(!list.contains('\u{1b}'), "{list}");

    // A terminal gets colour, unless NO_COLOR is set.
    let repo = daemon.repo.clone();
    let (coloured, plain) = tokio::task::spawn_blocking(move || {
        let run = |env: &[(&str, &str)]| catalyst_in_terminal(&repo, &["ctl", "list"], env);
        (run(&[]), run(&[("NO_COLOR", "1")]))
    })
    .await
    .expect("the terminal runs");
    assert_eq!(coloured.0, 0, "{}", coloured.1);
    assert!(
        coloured.1.contains("\u{1b}[1mSTATUS\u{1b}[0m"),
        "{:?}",
        coloured.1
    );
    assert_eq!(plain.0, 0);
    assert_eq!(plain.1, list, "NO_COLOR gives the piped text");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_diff_shows_what_the_branch_changes_since_it_left_the_target() {
    // A person moves `main` meanwhile; the daemon merges it into the branch before the target
    // moves.
    let daemon = TestDaemon::start(GATED, "").await;
    daemon.submit_gated_waiting("cat-gated", "true").await;
    // A commit on main after the branch left it is not the bead's change.
    catalyst_testkit::repo::commit_file(&daemon.repo, "later.txt", "later\n", "a person's commit");

    for id in ["cat-gated", "cat-gated.approve"] {
        let (code, diff, err) = daemon.ctl(&["diff", id], "").await;
        assert_eq!(code, 0, "{err}");
        assert!(
            diff.starts_with(
                " a.txt | 1 +\n 1 file changed, 1 insertion(+)\n\ndiff --git a/a.txt b/a.txt\n"
            ),
            "{diff}"
        );
        assert!(
            diff.contains("\n+a\n") && !diff.contains("later.txt"),
            "{diff}"
        );
    }
    let repo = daemon.repo.clone();
    let (code, coloured) = tokio::task::spawn_blocking(move || {
        catalyst_in_terminal(&repo, &["ctl", "diff", "cat-gated"], &[])
    })
    .await
    .expect("the terminal runs");
    assert_eq!(code, 0, "{coloured}");
    assert!(coloured.contains("\u{1b}[32m+a\u{1b}[0m"), "{coloured:?}");

    // Clear errors for a bead that does not exist, has not started, or is done.
    let (code, _, err) = daemon.ctl(&["diff", "cat-nope"], "").await;
    assert_eq!(code, 1);
    assert!(err.contains("bead `cat-nope` does not exist"), "{err}");
    daemon.ctl(&["pause"], "").await;
    daemon
        .ctl(&["submit", "Not yet", "--id", "cat-later"], "")
        .await;
    let (code, _, err) = daemon.ctl(&["diff", "cat-later"], "").await;
    assert_eq!(code, 1);
    assert!(
        err.contains("`cat-later` has no branch yet: it has not started"),
        "{err}"
    );
    daemon.ctl(&["resume"], "").await;
    let (code, _, err) = daemon.ctl(&["approve", "cat-gated"], "").await;
    assert_eq!(code, 0, "{err}");
    daemon
        .wait_for("the merged branch to go", |e| {
            e["type"] == "worktree.removed" && e["bead"] == "cat-gated"
        })
        .await;
    // Merged, its branch gone: what the merge brought to the target, the person's commit
    // (merged into the branch before the target moved) still not counted.
    let (code, diff, err) = daemon.ctl(&["diff", "cat-gated"], "").await;
    assert_eq!(code, 0, "{err}");
    assert!(
        diff.starts_with(" a.txt | 1 +\n 1 file changed, 1 insertion(+)\n"),
        "{diff}"
    );
    assert!(!diff.contains("later.txt"), "{diff}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_and_searches_and_counts_what_matched() {
    let daemon = TestDaemon::start(SLOW_IMPLEMENT, "").await;
    daemon
        .call(catalyst::protocol::Method::Pause(
            catalyst::protocol::PauseParams { model: None },
        ))
        .await;
    for i in 0..7 {
        let title = if i % 2 == 0 {
            "Fix the PARSER"
        } else {
            "Write docs"
        };
        daemon.submit(bead(&format!("{title} {i}"))).await;
    }
    let list = |search: Option<&str>, offset: Option<u64>, limit: Option<u64>| {
        let method = catalyst::protocol::Method::List(catalyst::protocol::ListParams {
            search: search.map(str::to_owned),
            offset,
            limit,
            ..Default::default()
        });
        daemon.call(method)
    };
    let ids = |answer: &serde_json::Value| -> Vec<String> {
        answer["beads"]
            .as_array()
            .expect("beads")
            .iter()
            .map(|b| b["id"].as_str().expect("id").to_owned())
            .collect()
    };
    let everything = list(None, None, None).await;
    assert_eq!(ids(&everything).len(), 7);
    assert!(everything.get("total").is_none(), "no total without paging");

    let page = list(None, Some(2), Some(3)).await;
    assert_eq!(ids(&page), ids(&everything)[2..5].to_vec());
    assert_eq!(page["total"], 7);
    let last = list(None, Some(6), Some(3)).await;
    assert_eq!(ids(&last), ids(&everything)[6..].to_vec());

    // Search matches the title or the id, in any case, and `total` counts the matches.
    let parser = list(Some("parser"), None, Some(2)).await;
    assert_eq!(parser["total"], 4);
    assert_eq!(ids(&parser).len(), 2);
    for row in parser["beads"].as_array().expect("beads") {
        assert!(row["title"].as_str().expect("title").contains("PARSER"));
    }
    let third = ids(&everything)[3].clone();
    let one = list(Some(&third), None, None).await;
    assert_eq!(ids(&one), vec![third]);

    let (code, out, err) = daemon
        .ctl(&["list", "--search", "docs", "--limit", "1"], "")
        .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().filter(|l| l.contains("Write docs")).count(),
        1,
        "{out}"
    );
}
