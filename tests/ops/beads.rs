//! beads interchange: `catalyst import` / `catalyst export` round trips (with and without a
//! daemon), and a followed beads export file whose labelled issues become work, with the
//! final status written back through a `bd` test double.

use nix::sys::signal::Signal;
use serde_json::Value;

use catalyst_testkit::cli::{catalyst, catalyst_with_stdin};
use catalyst_testkit::Workspace;

/// The three shapes of docs/data-model.md#beads-export-lines (a `blocks` dependency with offset timestamps and
/// microseconds; a closed child with a `parent-child` dependency; labels, an integer comment
/// id and an unknown field), plus a beads 1.3 line with `_type`, a lease, counts and a string
/// comment id.
const EXPORT: [&str; 4] = [
    r#"{"id":"bd-4h3","title":"Add test coverage for the git package","description":"","status":"open","priority":2,"issue_type":"task","created_at":"2025-11-20T21:21:23.497486-05:00","updated_at":"2025-11-20T21:21:23.497486-05:00","dependencies":[{"issue_id":"bd-4h3","depends_on_id":"bd-ge7","type":"blocks","created_at":"2025-11-20T21:21:31.277639-05:00","created_by":"daemon"}]}"#,
    r#"{"id":"bd-5zf0.1","title":"Child of the CRUD epic","status":"closed","priority":2,"issue_type":"task","owner":"dev@example.com","created_at":"2026-01-26T02:02:08Z","created_by":"mayor","updated_at":"2026-01-26T02:02:13Z","closed_at":"2026-01-26T02:02:13Z","close_reason":"Test completed","dependencies":[{"issue_id":"bd-5zf0.1","depends_on_id":"bd-5zf0","type":"parent-child","created_at":"2026-01-25T18:02:07Z","created_by":"mayor"}]}"#,
    r#"{"id":"bd-3kbmj","title":"Issue with labels","status":"closed","priority":1,"issue_type":"feature","created_at":"2026-01-12T02:16:02Z","updated_at":"2026-01-27T03:48:41Z","closed_at":"2026-01-27T03:48:41Z","close_reason":"done","labels":["backend","urgent"],"work_type":"mutex","comments":[{"id":1,"issue_id":"bd-3kbmj","author":"crew/giles","text":"Testing markdown","created_at":"2026-01-12T02:16:51Z"}]}"#,
    r#"{"_type":"issue","id":"bd-9","title":"Newer export","status":"pinned","priority":0,"issue_type":"bug","created_at":"2026-02-01T10:00:00.5+01:00","updated_at":"2026-02-01T10:00:00.5+01:00","lease_expires_at":"2026-02-01T10:30:00+01:00","heartbeat_at":"2026-02-01T10:00:30.25+01:00","dependency_count":0,"dependent_count":3,"comment_count":1,"comments":[{"id":"c-7f","issue_id":"bd-9","author":"a","text":"b","created_at":"2026-02-01T10:00:01Z"}],"metadata":{"k":[1,2]}}"#,
];

const NOT_AN_ISSUE: &str = r#"{"_type":"memory","id":"m-1","text":"remember this"}"#;

fn export_file(ws: &Workspace) -> std::path::PathBuf {
    let file = ws.root.join("issues.jsonl");
    let mut text = String::new();
    for (i, line) in EXPORT.iter().enumerate() {
        text.push_str(line);
        text.push('\n');
        if i == 1 {
            text.push_str(NOT_AN_ISSUE);
            text.push('\n');
        }
    }
    std::fs::write(&file, text).expect("export file");
    file
}

fn values(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn expected() -> Vec<Value> {
    EXPORT.iter().map(|l| values(l).remove(0)).collect()
}

fn round_trip(ws: &Workspace, how: &str) {
    let file = export_file(ws);
    let (code, out, err) = catalyst(&ws.repo, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("imported 4 beads {how}")), "{out}");
    assert!(out.contains("skipped 1 `memory` lines"), "{out}");

    let (code, exported, err) = catalyst(&ws.repo, &["export"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        values(&exported),
        expected(),
        "line by line, the same JSON values"
    );

    let out_file = ws.root.join("out.jsonl");
    let (code, _, err) = catalyst(&ws.repo, &["export", out_file.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        values(&std::fs::read_to_string(&out_file).expect("exported file")),
        expected()
    );

    // Importing again changes nothing; a changed bead is a conflict, left alone.
    let (code, out, _) = catalyst(&ws.repo, &["import", out_file.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("imported 0 beads") && out.contains("4 unchanged"),
        "{out}"
    );
    let changed = ws.root.join("changed.jsonl");
    std::fs::write(&changed, EXPORT[2].replace("Issue with labels", "Renamed")).expect("file");
    let (code, out, _) = catalyst(&ws.repo, &["import", changed.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("conflict: `bd-3kbmj`"), "{out}");
}

#[test]
fn import_then_export_without_a_daemon_gives_the_same_lines() {
    let ws = Workspace::bare("");
    round_trip(&ws, "into the store (no daemon running)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_then_export_through_the_daemon_gives_the_same_lines() {
    // Without a default formula the open bead is not dispatched, so the store keeps it as is.
    let ws = Workspace::new("", "default_formula = \"\"");
    let mut daemon = ws.spawn();
    daemon.client().await;
    // The daemon is another process: blocking this test's thread on `catalyst` is fine.
    round_trip(&ws, "through the daemon");
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit().await.success());
}

/// Lines in the shape of a Gas Town backup of a beads database (its rows, as `dolt sql -r json`
/// prints them): JSON columns as strings (`"{}"`, a filled one, an empty one), flags as
/// numbers, a list as a string, times without an offset (the database's DATETIME). Written for
/// this test.
const GAS_TOWN_BACKUP: [&str; 3] = [
    r#"{"id":"gt-b1","title":"Backed up, empty metadata","description":"","design":"","acceptance_criteria":"","notes":"","status":"open","priority":2,"issue_type":"task","created_at":"2026-02-10T08:00:00Z","updated_at":"2026-02-10T08:00:00Z","metadata":"{}","ephemeral":0,"pinned":0,"is_template":0,"compaction_level":0,"original_size":0}"#,
    r#"{"id":"gt-b2","title":"Backed up, metadata","status":"closed","priority":1,"issue_type":"bug","created_at":"2026-02-10 08:01:00.123456","updated_at":"2026-02-10 09:00:00","closed_at":"2026-02-10 09:00:00","close_reason":"fixed","metadata":"{\"tool\":\"gt\",\"files\":[\"a.go\"]}","waiters":"[]","ephemeral":0}"#,
    r#"{"id":"gt-b3","title":"Backed up, no metadata","status":"deferred","priority":3,"issue_type":"chore","created_at":"2026-02-10T08:02:00Z","updated_at":"2026-02-10T08:02:00Z","metadata":"","labels":"[\"infra\"]"}"#,
];

/// beads 1.3 export lines: `_type`, a lease with its heartbeat, the counts, and a dependency
/// whose `metadata` is a string (beads' own shape for it).
const BEADS_1_3: [&str; 2] = [
    r#"{"_type":"issue","id":"gt-c1","title":"Claimed","status":"blocked","priority":1,"issue_type":"task","assignee":"polecat/nux","created_at":"2026-03-01T09:00:00Z","updated_at":"2026-03-01T09:05:00Z","lease_expires_at":"2026-03-01T09:35:00Z","heartbeat_at":"2026-03-01T09:05:00.25Z","dependency_count":1,"dependent_count":0,"comment_count":0,"dependencies":[{"issue_id":"gt-c1","depends_on_id":"gt-b1","type":"blocks","created_at":"2026-03-01T09:00:01Z","created_by":"mayor","metadata":"{}","thread_id":""}]}"#,
    r#"{"_type":"issue","id":"gt-c2","title":"Not claimed","status":"closed","priority":2,"issue_type":"task","created_at":"2026-03-01T09:10:00Z","updated_at":"2026-03-01T09:10:00Z","closed_at":"2026-03-01T09:11:00Z","dependency_count":0,"dependent_count":1,"comment_count":0}"#,
];

#[test]
fn a_gas_town_backup_and_beads_1_3_lines_import_whole_and_round_trip() {
    let ws = Workspace::bare("");
    let lines: Vec<&str> = GAS_TOWN_BACKUP.iter().chain(&BEADS_1_3).copied().collect();
    let file = ws.root.join("issues.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").expect("backup file");
    let (code, out, err) = catalyst(&ws.repo, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "every line is a bead: {out}{err}");
    assert!(out.contains("imported 5 beads"), "{out}");

    let (code, exported, err) = catalyst(&ws.repo, &["export"]);
    assert_eq!(code, 0, "{err}");
    // The values read, but a string-encoded field is written as the JSON it held.
    let mut expected: Vec<Value> = lines.iter().map(|l| values(l).remove(0)).collect();
    expected[0]["metadata"] = serde_json::json!({});
    expected[1]["metadata"] = serde_json::json!({"tool": "gt", "files": ["a.go"]});
    let third = expected[2].as_object_mut().expect("an object");
    third.remove("metadata");
    third.insert("labels".into(), serde_json::json!(["infra"]));
    assert_eq!(values(&exported), expected, "line by line");

    // That export, imported into an empty store and exported again: the same bytes.
    let second = Workspace::bare("");
    let (code, out, err) = catalyst_with_stdin(&second.repo, &["import", "-"], &exported);
    assert_eq!(code, 0, "{out}{err}");
    let (code, again, err) = catalyst(&second.repo, &["export"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again, exported, "export, import, export: the same bytes");

    // Importing the backup again finds every bead unchanged, strings and all.
    let (code, out, _) = catalyst(&second.repo, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("5 unchanged"), "{out}");
}

/// A backup line whose `metadata` string is not a JSON object is refused alone, with its file
/// and line; the lines around it are imported.
#[test]
fn a_bad_string_encoded_metadata_refuses_only_its_line() {
    let ws = Workspace::bare("");
    let bad = GAS_TOWN_BACKUP[0]
        .replace("gt-b1", "gt-bad")
        .replace(r#""metadata":"{}""#, r#""metadata":"{\"k\":""#);
    let lines = [GAS_TOWN_BACKUP[1], &bad, GAS_TOWN_BACKUP[2]];
    let file = ws.root.join("issues.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").expect("backup file");
    let (code, out, err) = catalyst(&ws.repo, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "the refused line is reported: {out}{err}");
    assert!(out.contains("imported 2 beads"), "{out}");
    assert!(
        out.contains(
            "issues.jsonl:2`: not a bead: `metadata` is a string that does not hold its JSON"
        ),
        "{out}"
    );
}

/// An issue line whose `blocks` dependencies name `targets`.
fn issue_after(id: &str, targets: &[&str]) -> String {
    let deps: Vec<Value> = targets
        .iter()
        .map(|t| serde_json::json!({"issue_id": id, "depends_on_id": t, "type": "blocks"}))
        .collect();
    let mut line = serde_json::json!({
        "id": id, "title": format!("Issue {id}"), "status": "closed", "priority": 2,
        "issue_type": "task", "created_at": "2026-01-12T02:16:02Z",
        "updated_at": "2026-01-12T02:16:02Z",
    });
    if !deps.is_empty() {
        line["dependencies"] = Value::from(deps);
    }
    line.to_string()
}

fn ids(text: &str) -> Vec<String> {
    values(text)
        .iter()
        .map(|v| v["id"].as_str().expect("an id").to_owned())
        .collect()
}

#[test]
fn export_writes_beads_in_store_order_so_a_round_trip_is_byte_for_byte() {
    // Export wrote a bead where it was first referenced: `bd-b`, named by `bd-z` before it
    // arrived, took that early place, and `bd-t`, named by `bd-b`, came out before `bd-y`.
    // Importing that export ordered the lines differently again.
    let lines = [
        issue_after("bd-z", &["bd-b"]),
        issue_after("bd-y", &[]),
        issue_after("bd-b", &["bd-t"]),
        issue_after("bd-t", &[]),
    ];
    let first = Workspace::bare("");
    let file = first.root.join("issues.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").expect("export file");
    let (code, out, err) = catalyst(&first.repo, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, exported, err) = catalyst(&first.repo, &["export"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        ids(&exported),
        ["bd-z", "bd-y", "bd-b", "bd-t"],
        "the order read"
    );

    let second = Workspace::bare("");
    let (code, out, err) = catalyst_with_stdin(&second.repo, &["import", "-"], &exported);
    assert_eq!(code, 0, "{out}{err}");
    let (code, again, err) = catalyst(&second.repo, &["export"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again, exported, "export, import, export: the same bytes");
}

/// Lines of a real export that catalyst used to refuse whole: a dependency on an issue of
/// another project, an upper-case id and a dependency on it; and two lines that are no bead.
fn real_export(ws: &Workspace) -> (std::path::PathBuf, Vec<Value>) {
    let external = serde_json::json!({
        "id": "bd-ext", "title": "Waits for another project", "status": "open", "priority": 2,
        "issue_type": "task", "created_at": "2026-01-12T02:16:02Z",
        "updated_at": "2026-01-12T02:16:02Z",
        "dependencies": [{"issue_id": "bd-ext", "depends_on_id": "external:billing:BIL-7",
            "type": "blocks", "created_at": "2026-01-12T02:16:03Z", "created_by": "mayor"}],
    });
    let mut upper: Value = serde_json::from_str(&issue("API-12", "open", &["backend"])).unwrap();
    upper["title"] = "An upper-case id".into();
    let mut after_upper: Value =
        serde_json::from_str(&issue_after("bd-after", &["API-12"])).unwrap();
    after_upper["status"] = "open".into();
    let good = vec![external, upper, after_upper];
    let lines = [
        good[0].to_string(),
        good[1].to_string(),
        r#"{"id":"bad id","title":"x","status":"open","created_at":"2026-01-12T02:16:02Z","updated_at":"2026-01-12T02:16:02Z"}"#.to_owned(),
        good[2].to_string(),
        r#"{"id":"bd-cut","title":"#.to_owned(),
    ];
    let file = ws.root.join("issues.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").expect("export file");
    (file, good)
}

/// `catalyst import` of `real_export`: the bead lines go in as they are, the two others are
/// counted as refused with their line numbers (exit 1), and the export gives the lines back.
fn import_real_export(ws: &Workspace) {
    let (file, good) = real_export(ws);
    let (code, out, err) = catalyst(&ws.repo, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(code, 1, "the refused lines are reported: {out}{err}");
    assert!(out.contains("imported 3 beads"), "{out}");
    assert!(
        out.contains("issues.jsonl:3`: not a bead: invalid id `bad id`"),
        "{out}"
    );
    assert!(out.contains("issues.jsonl:5`: not JSON"), "{out}");
    let (code, exported, err) = catalyst(&ws.repo, &["export"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(values(&exported), good, "kept as read, line by line");
}

#[test]
fn a_real_export_is_imported_without_a_daemon_but_its_bad_lines() {
    let ws = Workspace::bare("");
    import_real_export(&ws);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_export_is_imported_through_the_daemon_and_an_external_blocker_holds_nothing() {
    let ws = Workspace::new("", "default_formula = \"\"");
    let mut daemon = ws.spawn();
    daemon.client().await;
    import_real_export(&ws);
    // catalyst cannot see the other project: the bead waiting for it is ready; the one after
    // the upper-case bead waits for it.
    let (code, ready, err) = catalyst(&ws.repo, &["ctl", "--json", "ready"]);
    assert_eq!(code, 0, "{err}");
    let ready: Value = serde_json::from_str(&ready).expect("json");
    let ids: Vec<&str> = ready["beads"]
        .as_array()
        .expect("beads")
        .iter()
        .filter_map(|b| b["id"].as_str())
        .collect();
    assert_eq!(ids, ["API-12", "bd-ext"], "{ready}");
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit().await.success());
}

/// A `bd` stand-in: appends its arguments to `calls`, and fails while `fail` exists.
fn bd_double(ws: &Workspace) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let bd = ws.root.join("bd");
    let calls = ws.root.join("bd-calls");
    let fail = ws.root.join("bd-fail");
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nif [ -e '{}' ]; then echo 'database is locked' >&2; exit 1; fi\n",
        calls.display(),
        fail.display()
    );
    std::fs::write(&bd, script).expect("bd double");
    std::fs::set_permissions(&bd, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (bd, calls, fail)
}

/// Replaces the followed file the way `bd export` does: written aside, renamed into place.
fn publish(file: &std::path::Path, lines: &[String]) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, lines.join("\n") + "\n").expect("write");
    std::fs::rename(&tmp, file).expect("rename");
}

fn issue(id: &str, status: &str, labels: &[&str]) -> String {
    serde_json::json!({
        "id": id, "title": format!("Issue {id}"), "description": "Write a.txt",
        "status": status, "priority": 2, "issue_type": "task", "labels": labels,
        "created_at": "2026-01-12T02:16:02Z", "updated_at": "2026-01-12T02:16:02Z",
    })
    .to_string()
}

const IMPLEMENT_WRITES: &str = r#"
[[rule]]
role = "implement"
responses = [{ write = { "a.txt" = "a\n" }, summary = "wrote a.txt" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_beads_file_feeds_work_and_gets_the_final_status_back() {
    let ws = Workspace::new(IMPLEMENT_WRITES, "");
    let (bd, calls, fail) = bd_double(&ws);
    let watched = ws.root.join("beads").join("issues.jsonl");
    std::fs::create_dir_all(watched.parent().expect("dir")).expect("beads dir");
    let config = ws.paths.config();
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str(&format!(
        "\n[beads]\nwatch = {:?}\nretry_secs = 1\nclose_command = [{:?}, \"close\", \"{{id}}\", \"--reason\", \"{{reason}}\"]\n",
        watched.display().to_string(),
        bd.display().to_string()
    ));
    std::fs::write(&config, text).expect("config");
    // The first write-backs fail: the failure is reported and retried, across a restart.
    std::fs::write(&fail, "").expect("fail");

    let mut daemon = ws.spawn();
    daemon.client().await;
    let old = vec![
        issue("bd-old", "closed", &["catalyst"]),
        issue("bd-other", "open", &["backend"]),
    ];
    publish(&watched, &old);
    let mut lines = old.clone();
    lines.push(issue("bd-new", "open", &["catalyst", "backend"]));
    publish(&watched, &lines);

    daemon.wait_status("bd-new", "closed").await;
    daemon
        .wait_for("the write-back failure on the bead", |e| {
            e["type"] == "bead.comment"
                && e["bead"] == "bd-new"
                && e["comment"]["text"].as_str().is_some_and(|t| {
                    t.contains("WRITE-BACK FAILED") && t.contains("database is locked")
                })
        })
        .await;
    for id in ["bd-old", "bd-other"] {
        let mut client = daemon.client().await;
        let shown = client
            .call(&catalyst::protocol::Method::Show(
                catalyst::protocol::ShowParams {
                    id: id.into(),
                    runs: false,
                },
            ))
            .await;
        assert!(
            shown.is_err(),
            "`{id}` (closed, or not labelled) is not taken"
        );
    }
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit().await.success());

    std::fs::remove_file(&fail).expect("let bd succeed");
    let mut daemon = ws.spawn();
    let written = daemon
        .wait_for("the write-back's record", |e| {
            e["type"] == "bead.updated"
                && e["bead"] == "bd-new"
                && e["patch"]["metadata"]["catalyst_beads"]["written"] == "closed"
        })
        .await;
    assert_eq!(
        written["patch"]["metadata"]["catalyst_beads"]["source"],
        watched.display().to_string()
    );
    let calls = std::fs::read_to_string(&calls).expect("bd was called");
    let last = calls.lines().last().expect("a call");
    assert!(last.starts_with("close bd-new --reason "), "{calls}");
    assert!(calls.lines().count() >= 2, "failed, then retried: {calls}");
    assert!(
        calls.lines().all(|l| l.starts_with("close bd-new")),
        "only the taken issue is written back: {calls}"
    );
    daemon.signal(Signal::SIGTERM);
    assert!(daemon.wait_exit().await.success());
}
