//! The journal changed under a running daemon: another program truncates it. The daemon must
//! not write on at its own offset (which left NUL bytes the next start refused): it refuses
//! the write, says why, dispatches nothing, and a restart reads the file as it is.

use catalyst::protocol::{Method, PauseParams};

use catalyst_testkit::{bead, Workspace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_truncated_under_the_daemon_is_not_written_on() {
    let ws = Workspace::builder().build();
    let mut daemon = ws.spawn();
    daemon
        .call(Method::Pause(PauseParams { model: None }))
        .await;
    daemon.submit(bead("before")).await;
    let journal = ws.paths.state.join("journal.jsonl");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .and_then(|f| f.set_len(0))
        .expect("truncate the journal");

    let refused = daemon
        .client()
        .await
        .call(&Method::Submit(vec![bead("after")]))
        .await
        .expect_err("the write is refused")
        .to_string();
    assert!(
        refused.contains("changed length from") && refused.contains("journal.jsonl"),
        "{refused}"
    );
    println!("refused: {refused}");
    let status = daemon.call(Method::Status).await;
    assert!(
        status["storage_error"]
            .as_str()
            .is_some_and(|e| e.contains("restart catalystd")),
        "{status}"
    );
    let left = std::fs::read(&journal).expect("read the journal");
    assert!(
        !left.contains(&0),
        "no NUL bytes before new events ({} bytes)",
        left.len()
    );
    assert!(left.is_empty(), "nothing written on");

    // A restart reads the file as it is now.
    daemon.stop().await;
    let daemon = ws.spawn();
    let status = daemon.call(Method::Status).await;
    assert!(status["storage_error"].is_null(), "{status}");
    daemon.submit(bead("after the restart")).await;
}

/// A byte flipped inside a value (a title) leaves a line that is valid JSON and a valid
/// event: only its checksum tells, and the daemon refuses to start on it, naming the file and
/// the line, rather than replaying a title nobody wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_flipped_inside_a_journal_value_is_refused_by_file_and_line() {
    let ws = Workspace::builder().build();
    let mut daemon = ws.spawn();
    daemon
        .call(Method::Pause(PauseParams { model: None }))
        .await;
    daemon.submit(bead("Fix the parser")).await;
    daemon.stop().await;

    let journal = ws.paths.state.join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).expect("read the journal");
    let line = 1 + text
        .lines()
        .position(|l| l.contains("\"title\":\"Fix the parser\""))
        .expect("the bead's line");
    let flipped = text.replacen("Fix the parser", "Fix the parsel", 1);
    std::fs::write(&journal, flipped).expect("flip a byte");

    let start = std::process::Command::new(env!("CARGO_BIN_EXE_catalystd"))
        .arg("--workspace")
        .arg(&ws.repo)
        .output()
        .expect("run catalystd");
    let err = String::from_utf8_lossy(&start.stderr);
    assert!(!start.status.success(), "it must not start: {err}");
    println!("refused: {}", err.trim());
    assert!(
        err.contains("journal.jsonl")
            && err.contains(&format!("line {line}"))
            && err.contains("checksum does not match"),
        "{err}"
    );
}

/// A start that replays a long journal compacts it into a snapshot before serving; the next
/// start loads the snapshot, and a subscriber from seq 0 still gets every
/// event, from the rotated segment and then the live journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_journal_is_compacted_at_start_and_every_event_is_still_served() {
    use catalyst::daemon::store::{COMPACT_AFTER, SNAPSHOT_FILE};
    use catalyst_testkit::workload;

    let ws = Workspace::builder()
        .config("default_formula = \"\"")
        .build();
    let n = COMPACT_AFTER + 5;
    workload::write_journal(&ws.paths.state.join("journal.jsonl"), n);
    let mut daemon = ws.spawn();
    let status = daemon.call(Method::Status).await;
    let seq = status["seq"].as_u64().expect("seq");
    assert!(seq > n, "{status}");
    assert!(ws.paths.state.join(SNAPSHOT_FILE).exists(), "a snapshot");
    assert!(
        ws.paths.state.join("journal.000000000001.jsonl").exists(),
        "the replayed journal kept as a segment"
    );
    let events = daemon.events().await;
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert_eq!(
        seqs,
        (1..=seq).collect::<Vec<_>>(),
        "every event, once, in order"
    );
    assert!(events.iter().all(|e| e.get("crc").is_none()));

    daemon.stop().await;
    let daemon = ws.spawn();
    let again = daemon.call(Method::Status).await;
    assert_eq!(again["beads"], status["beads"], "{again}");
    let log = daemon.stderr();
    let replayed: u64 = log
        .split("replayed=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .expect("the start-up line says how many events it replayed");
    assert!(
        replayed < 10,
        "the snapshot was loaded, not the journal: {log}"
    );
}
