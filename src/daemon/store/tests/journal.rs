//! The journal's durability contract: groups commit whole, replay gives the same state, torn
//! tails and corruption are reported, compaction loses nothing.

use super::*;

#[test]
fn status_timestamps_follow_beads() {
    let (_dir, mut store) = open_store();
    store.commit(vec![created(bead("a", &[]))]).unwrap();
    store.commit(vec![status("a", Status::InProgress)]).unwrap();
    let started = store.state().get("a").unwrap().started_at.unwrap();
    let closed = store
        .commit(vec![EventBody::BeadStatus {
            id: id("a"),
            status: Status::Closed,
            reason: Some("done".into()),
        }])
        .unwrap();
    let a = store.state().get("a").unwrap();
    assert_eq!(a.closed_at, Some(closed[0].ts));
    assert_eq!(a.close_reason.as_deref(), Some("done"));
    store.commit(vec![status("a", Status::Open)]).unwrap();
    let a = store.state().get("a").unwrap();
    assert_eq!(
        (a.closed_at, a.close_reason.as_deref()),
        (None, None),
        "closed_at is set exactly when closed"
    );
    assert_eq!(a.started_at, Some(started));
}

#[test]
fn a_refused_group_writes_nothing() {
    let (dir, mut store) = open_store();
    store.commit(vec![created(bead("a", &[]))]).unwrap();
    let before = fs::read(dir.path().join(JOURNAL_FILE)).unwrap();
    let err = store
        .commit(vec![
            status("a", Status::Closed),
            status("nope", Status::Closed),
        ])
        .unwrap_err();
    assert!(err.to_string().contains("`nope` does not exist"), "{err}");
    let err = store.commit(vec![created(bead("a", &[]))]).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(fs::read(dir.path().join(JOURNAL_FILE)).unwrap(), before);
    assert_eq!(store.state().get("a").unwrap().status, Status::Open);
}

#[test]
fn upper_case_ids_are_kept_but_not_two_that_differ_only_in_case() {
    let (_dir, mut store) = open_store();
    store
        .commit(vec![created(bead(
            "API-12",
            &[("API-11", DepType::Blocks)],
        ))])
        .unwrap();
    assert_eq!(store.state().beads().next().unwrap().id.as_str(), "API-12");
    for twin in ["api-12", "Api-12"] {
        let err = store.commit(vec![created(bead(twin, &[]))]).unwrap_err();
        assert!(err.to_string().contains("`API-12`"), "{twin}: {err}");
    }
    let err = store
        .commit(vec![created(bead("x-1", &[])), created(bead("X-1", &[]))])
        .unwrap_err();
    assert!(
        err.to_string().contains("but for case"),
        "in one group: {err}"
    );
    store.commit(vec![created(bead("API-11", &[]))]).unwrap();
    assert_eq!(store.state().len(), 2);
}

#[test]
fn a_group_may_create_then_change_a_bead() {
    let (_dir, mut store) = open_store();
    let events = store
        .commit(vec![
            created(bead("a", &[])),
            status("a", Status::InProgress),
        ])
        .unwrap();
    assert_eq!(
        events.iter().map(|e| (e.seq, e.more)).collect::<Vec<_>>(),
        [(1, true), (2, false)]
    );
}

fn populated(dir: &Path) -> Store {
    let (mut store, _) = Store::open(dir).unwrap();
    store
        .commit(vec![
            created(bead("a", &[])),
            created(bead("b", &[("a", DepType::Blocks)])),
        ])
        .unwrap();
    store.commit(vec![status("a", Status::Closed)]).unwrap();
    store
}

fn export(state: &State) -> Vec<serde_json::Value> {
    state
        .beads()
        .map(|b| serde_json::to_value(b).unwrap())
        .collect()
}

#[test]
fn reopening_replays_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = populated(dir.path());
    let expected = export(store.state());
    drop(store);
    let (mut store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.replayed, 3);
    assert_eq!(export(store.state()), expected);
    assert_eq!(ready_ids(store.state()), ["b"]);
    let next = store.commit(vec![status("b", Status::InProgress)]).unwrap();
    assert_eq!(next[0].seq, 4, "numbering continues after replay");
}

#[test]
fn a_torn_last_line_is_dropped_with_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let store = populated(dir.path());
    drop(store);
    let path = dir.path().join(JOURNAL_FILE);
    let mut bytes = fs::read(&path).unwrap();
    let good = bytes.len();
    bytes.extend_from_slice(br#"{"seq":4,"ts":"2026-01-01T00:00:00Z","type":"bead.sta"#);
    fs::write(&path, &bytes).unwrap();
    let (mut store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.torn, Some((4, (bytes.len() - good) as u64)));
    assert_eq!(
        fs::read(&path).unwrap().len(),
        good,
        "the torn tail is cut off"
    );
    let next = store.commit(vec![status("b", Status::InProgress)]).unwrap();
    assert_eq!(next[0].seq, 4);
    drop(store);
    assert!(
        Store::open(dir.path()).is_ok(),
        "the journal is whole again"
    );
}

#[test]
fn a_partly_written_group_is_dropped_whole() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path()));
    let path = dir.path().join(JOURNAL_FILE);
    let mut bytes = fs::read(&path).unwrap();
    // The first line of a two-event group made it to disk, the second did not.
    bytes.extend_from_slice(&sealed("{\"seq\":4,\"ts\":\"2026-01-01T00:00:00Z\",\"more\":true,\"type\":\"bead.status\",\"id\":\"b\",\"status\":\"closed\"}"));
    fs::write(&path, &bytes).unwrap();
    let (store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.torn.map(|t| t.0), Some(4));
    assert_eq!(store.state().get("b").unwrap().status, Status::Open);
}

#[test]
fn a_corrupt_line_in_the_middle_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path()));
    let path = dir.path().join(JOURNAL_FILE);
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1] = "{this is not json";
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = Store::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains(JOURNAL_FILE), "{err}");
}

#[test]
fn an_event_that_does_not_apply_is_an_error_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path()));
    let path = dir.path().join(JOURNAL_FILE);
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(&sealed("{\"seq\":4,\"ts\":\"2026-01-01T00:00:00Z\",\"type\":\"bead.status\",\"id\":\"zzz\",\"status\":\"closed\"}"));
    fs::write(&path, bytes).unwrap();
    let err = Store::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("line 4") && err.contains("`zzz` does not exist"),
        "{err}"
    );
}

#[test]
fn compaction_keeps_the_state_and_starts_a_new_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = populated(dir.path());
    store.compact().unwrap();
    assert_eq!(
        fs::metadata(dir.path().join(JOURNAL_FILE)).unwrap().len(),
        0
    );
    assert!(dir.path().join("journal.000000000001.jsonl").exists());
    store.commit(vec![status("b", Status::InProgress)]).unwrap();
    let expected = export(store.state());
    drop(store);
    let (store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.snapshot_seq, Some(3));
    assert_eq!(report.replayed, 1);
    assert_eq!(export(store.state()), expected);
    assert_eq!(store.state().seq(), 4);
    assert!(ready_ids(store.state()).is_empty());
}

#[test]
fn a_crash_between_snapshot_and_rotation_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = populated(dir.path());
    let expected = export(store.state());
    // The snapshot is written, the journal not yet rotated: its events are all in the snapshot.
    snapshot::write(&dir.path().join(SNAPSHOT_FILE), store.state()).unwrap();
    drop(store);
    let (mut store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.replayed, 0);
    assert_eq!(export(store.state()), expected);
    assert_eq!(
        store.commit(vec![status("b", Status::Closed)]).unwrap()[0].seq,
        4
    );
}

#[test]
fn snapshot_lines_are_beads_export_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = populated(dir.path());
    store.compact().unwrap();
    let text = fs::read_to_string(dir.path().join(SNAPSHOT_FILE)).unwrap();
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["seq"], 3);
    assert_eq!(header["beads"], 2);
    let b: Bead = serde_json::from_str(lines.nth(1).unwrap()).unwrap();
    assert_eq!(b.dependencies[0].depends_on_id.as_str(), "a");
}

#[test]
fn a_snapshot_header_claiming_more_beads_than_its_file_holds_is_corrupt_not_an_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = populated(dir.path());
    store.compact().unwrap();
    drop(store);
    let path = dir.path().join(SNAPSHOT_FILE);
    let text = fs::read_to_string(&path).unwrap();
    let (header, rest) = text.split_once('\n').unwrap();
    let mut header: serde_json::Value = serde_json::from_str(header).unwrap();
    // Room for that many beads would be far more memory than any machine has.
    header["beads"] = serde_json::json!(u64::MAX / 2);
    fs::write(&path, format!("{header}\n{rest}")).unwrap();
    let err = Store::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("snapshot.jsonl"), "{err}");
}

#[test]
fn a_journal_changed_under_the_daemon_is_not_written_on() {
    for change in ["truncate", "replace", "remove"] {
        let (dir, mut store) = open_store();
        store.commit(vec![created(bead("a", &[]))]).unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        match change {
            "truncate" => fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(0))
                .unwrap(),
            "replace" => {
                let other = dir.path().join("other");
                fs::write(&other, b"").unwrap();
                fs::rename(&other, &path).unwrap();
            }
            _ => fs::remove_file(&path).unwrap(),
        }
        let err = store.commit(vec![created(bead("b", &[]))]).unwrap_err();
        let want = match change {
            "truncate" => "changed length from",
            "replace" => "was replaced by another file",
            _ => "was removed",
        };
        assert!(err.to_string().contains(want), "{change}: {err}");
        assert!(
            store.state().get("b").is_none(),
            "{change}: nothing applied"
        );
        let left = fs::read(&path).unwrap_or_default();
        assert!(!left.contains(&0), "{change}: no NUL bytes written");
        assert!(left.is_empty(), "{change}: nothing written on");
    }
}

#[test]
fn a_byte_changed_inside_a_value_is_corruption_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path()));
    let path = dir.path().join(JOURNAL_FILE);
    let text = fs::read_to_string(&path).unwrap();
    // Still valid JSON and a valid event: only the checksum can tell.
    let flipped = text.replacen("\"title\":\"b\"", "\"title\":\"c\"", 1);
    assert_ne!(flipped, text, "the journal holds bead b's title");
    fs::write(&path, &flipped).unwrap();
    let err = Store::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(JOURNAL_FILE)
            && err.contains("line 2")
            && err.contains("checksum does not match its content"),
        "{err}"
    );

    // A changed byte in the checksum's own key makes the line look unsealed: refused too.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[1] = lines[1].replace(",\"crc\":", ",\"crd\":");
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = Store::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("line 2") && err.contains("no checksum"),
        "{err}"
    );
}

#[test]
fn a_journal_from_before_checksums_loads_and_goes_on_sealed() {
    let dir = tempfile::tempdir().unwrap();
    drop(populated(dir.path()));
    let path = dir.path().join(JOURNAL_FILE);
    let text = fs::read_to_string(&path).unwrap();
    let plain: String = text
        .lines()
        .map(|l| crate::daemon::store::journal::unseal(l).0.into_owned() + "\n")
        .collect();
    assert!(!plain.contains("\"crc\""), "{plain}");
    fs::write(&path, &plain).unwrap();
    let (mut store, _) = Store::open(dir.path()).unwrap();
    assert_eq!(store.state().len(), 2);
    store.commit(vec![status("b", Status::Closed)]).unwrap();
    drop(store);
    let (store, _) = Store::open(dir.path()).unwrap();
    assert_eq!(store.state().get("b").unwrap().status, Status::Closed);
    let last = fs::read_to_string(&path).unwrap();
    assert!(
        last.lines().last().unwrap().contains(",\"crc\":\""),
        "new lines are sealed"
    );
}

#[test]
fn the_feed_gets_each_committed_event_as_written_without_its_checksum() {
    let (dir, mut store) = open_store();
    let feed = std::sync::Arc::new(crate::daemon::store::feed::Feed::default());
    store.feed_into(feed.clone());
    let events = store
        .commit(vec![
            created(bead("a", &[])),
            status("a", Status::InProgress),
        ])
        .unwrap();
    let mut lines = Vec::new();
    assert!(feed.read(0, events[1].seq, &mut lines));
    let on_disk = std::fs::read_to_string(dir.path().join(JOURNAL_FILE)).unwrap();
    let unsealed: Vec<String> = on_disk
        .lines()
        .map(|l| crate::daemon::store::journal::unseal(l).0.into_owned())
        .collect();
    assert_eq!(lines.len(), 2);
    for ((seq, line), (event, file_line)) in lines.iter().zip(events.iter().zip(&unsealed)) {
        assert_eq!(*seq, event.seq);
        assert_eq!(&**line, file_line.as_str());
        assert!(!line.contains("\"crc\""), "{line}");
        assert_eq!(&**line, serde_json::to_string(event).unwrap());
    }
}

#[test]
fn spending_survives_a_snapshot_and_the_replay_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = populated(dir.path());
    let finished = |cost: f64| EventBody::StepFinished {
        bead: id("a"),
        step: id("a"),
        attempt: 1,
        exit: "exit code 0".into(),
        duration_ms: 1,
        cost_usd: Some(cost),
        commit: None,
    };
    store.commit(vec![finished(1.25)]).unwrap();
    store.compact().unwrap();
    store.commit(vec![finished(0.5)]).unwrap();
    let spent = store.state().spending().clone();
    assert_eq!(spent.total_usd, 1.75);
    drop(store);
    let (store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.replayed, 1, "the snapshot, then one event");
    assert_eq!(*store.state().spending(), spent, "by day and in total");
}

/// `bead.updated`, `bead.status` and `bead.comment` named their bead `id` before they named it
/// `bead` like every other event; a journal written then must still open, as it was.
#[test]
fn a_journal_whose_bead_events_said_id_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    let old = [
        r#"{"seq":1,"ts":"2026-01-01T00:00:00Z","type":"bead.created","bead":{"id":"a","title":"a","status":"open","priority":2,"issue_type":"task","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"},"by_person":true}"#,
        r#"{"seq":2,"ts":"2026-01-01T00:00:01Z","type":"bead.updated","id":"a","patch":{"notes":"noted"}}"#,
        r#"{"seq":3,"ts":"2026-01-01T00:00:02Z","type":"bead.comment","id":"a","comment":{"id":1,"issue_id":"a","author":"human","text":"looks fine","created_at":"2026-01-01T00:00:02Z"}}"#,
        r#"{"seq":4,"ts":"2026-01-01T00:00:03Z","type":"bead.status","id":"a","status":"closed","reason":"done"}"#,
    ];
    fs::write(dir.path().join(JOURNAL_FILE), old.join("\n") + "\n").unwrap();
    let (mut store, report) = Store::open(dir.path()).unwrap();
    assert_eq!(report.torn, None);
    let a = store.state().get("a").unwrap();
    assert_eq!(a.notes.as_deref(), Some("noted"));
    assert_eq!(a.comments.len(), 1);
    assert_eq!(
        (a.status.clone(), a.close_reason.as_deref()),
        (Status::Closed, Some("done"))
    );
    // What is written from then on names the bead `bead`.
    store.commit(vec![status("a", Status::Open)]).unwrap();
    let text = fs::read_to_string(dir.path().join(JOURNAL_FILE)).unwrap();
    let last = text.lines().last().unwrap();
    assert!(
        last.contains(r#""type":"bead.status","bead":"a""#),
        "{last}"
    );
}
