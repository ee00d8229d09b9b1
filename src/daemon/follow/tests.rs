use std::io::Write;

use super::*;

fn event(seq: u64, id: &str) -> String {
    format!(r#"{{"seq":{seq},"ts":"2026-01-01T00:00:00Z","type":"bead.updated","id":"{id}"}}"#)
}

/// A journal whose live file holds events 1..=`on_disk` and whose feed holds `in_feed`, with
/// `durable` published.
struct Fixture {
    _dir: tempfile::TempDir,
    journal: Journal,
    _seq: watch::Sender<u64>,
}

fn fixture(on_disk: u64, in_feed: std::ops::RangeInclusive<u64>, durable: u64) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let live = dir.path().join("journal.jsonl");
    let mut out = std::fs::File::create(&live).expect("create");
    for seq in 1..=on_disk {
        writeln!(out, "{}", event(seq, "cat-1")).expect("write");
    }
    let feed = Arc::new(Feed::default());
    feed.push(in_feed.map(|seq| (seq, Arc::from(event(seq, "cat-1").as_str()))));
    let (tx, seq) = watch::channel(durable);
    let journal = Journal {
        feed,
        seq,
        live,
        segments: Arc::new(Segments {
            rotated: Vec::new(),
            live_first: 1,
        }),
    };
    Fixture {
        _dir: dir,
        journal,
        _seq: tx,
    }
}

fn seqs(lines: &[Line]) -> Vec<u64> {
    lines.iter().map(|(seq, _)| *seq).collect()
}

#[tokio::test]
async fn recent_events_come_from_the_feed_without_reading_the_journal() {
    let f = fixture(0, 1..=10, 10);
    std::fs::remove_file(&f.journal.live).expect("no journal file at all");
    let mut follower = Follower::new(f.journal.clone(), 4, Filter::default());
    assert_eq!(
        seqs(&follower.read().await.expect("read")),
        (5..=10).collect::<Vec<_>>()
    );
    assert_eq!(follower.last(), 10);
    assert!(follower.read().await.expect("read").is_empty(), "caught up");
}

#[tokio::test]
async fn older_events_come_from_the_files_then_the_feed() {
    // The feed was started after events 1..=6 were written.
    let f = fixture(10, 7..=10, 10);
    let mut follower = Follower::new(f.journal.clone(), 2, Filter::default());
    let mut got = Vec::new();
    loop {
        let lines = follower.read().await.expect("read");
        if lines.is_empty() {
            break;
        }
        got.extend(seqs(&lines));
    }
    assert_eq!(got, (3..=10).collect::<Vec<_>>(), "each once, in order");
    // A line from the file is the event as written, without the checksum.
    let mut from_disk = Follower::new(f.journal.clone(), 0, Filter::default());
    let first = from_disk.read().await.expect("read");
    assert_eq!(&*first[0].1, event(1, "cat-1"));
}

#[tokio::test]
async fn nothing_past_the_durable_seq() {
    let f = fixture(0, 1..=10, 7);
    let mut follower = Follower::new(f.journal.clone(), 0, Filter::default());
    assert_eq!(
        seqs(&follower.read().await.expect("read")),
        (1..=7).collect::<Vec<_>>()
    );
    f._seq.send(10).expect("publish");
    assert_eq!(seqs(&follower.read().await.expect("read")), vec![8, 9, 10]);
}

#[tokio::test]
async fn a_filtered_follower_skips_what_it_does_not_want() {
    let f = fixture(0, 1..=3, 3);
    f.journal
        .feed
        .push([(4, Arc::from(event(4, "cat-2").as_str()))]);
    f._seq.send(4).expect("publish");
    let filter = Filter {
        bead: Some("cat-2".into()),
        types: None,
    };
    let mut follower = Follower::new(f.journal.clone(), 0, filter);
    assert_eq!(seqs(&follower.read().await.expect("read")), vec![4]);
    assert_eq!(follower.last(), 4);
}

#[test]
fn a_recent_since_reads_only_the_journals_end() {
    use std::io::{BufRead, Seek, SeekFrom};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("journal.jsonl");
    let mut out = std::fs::File::create(&path).expect("create");
    for seq in 1..=20_000u64 {
        writeln!(out, "{}", event(seq, &format!("cat-{seq}"))).expect("write");
    }
    drop(out);
    let len = std::fs::metadata(&path).expect("len").len();
    let mut file = std::fs::File::open(&path).expect("open");
    let first_seq = |file: &mut std::fs::File, at: u64| {
        file.seek(SeekFrom::Start(at)).expect("seek");
        let mut line = String::new();
        std::io::BufReader::new(&*file)
            .read_line(&mut line)
            .expect("read");
        seq_of(line.as_bytes()).expect("a seq")
    };
    for since in [19_990, 15_000, 2] {
        let at = line_before(&mut file, since).expect("offset");
        let seq = first_seq(&mut file, at);
        assert!(
            seq <= since,
            "no event after {since} is skipped: starts at {seq}"
        );
    }
    let at = line_before(&mut file, 19_990).expect("offset");
    assert!(
        len - at <= 2 * SCAN_BLOCK,
        "the last events come from the last blocks: {} of {len} bytes",
        len - at
    );
    assert_eq!(line_before(&mut file, 0).expect("offset"), 0);
    assert_eq!(seq_of(b"{\"seq\":42,\"ts\":\"x\"}"), Some(42));
    assert_eq!(seq_of(b"not a line"), None);
}

#[test]
fn subscription_filters() {
    let status = r#"{"seq":5,"ts":"2026-01-01T00:00:00Z","type":"bead.status","id":"cat-1.review","status":"closed"}"#;
    assert!(wanted(status, 0, None, None));
    assert!(!wanted(status, 5, None, None), "since is exclusive");
    assert!(
        wanted(status, 0, Some("cat-1"), None),
        "a step's events belong to its bead"
    );
    assert!(!wanted(status, 0, Some("cat-12"), None));
    assert!(!wanted(status, 0, None, Some(&["step.result".into()])));
    let created = r#"{"seq":1,"ts":"2026-01-01T00:00:00Z","type":"bead.created","bead":{"id":"cat-2","title":"x"}}"#;
    assert!(wanted(created, 0, Some("cat-2"), None));
}
