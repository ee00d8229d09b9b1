//! The journal's group commit: requests that reach the daemon together are made durable by one
//! fsync, and each is answered only after it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use catalyst::protocol::{Method, Response, StatusAnswer, Submitted};
use catalyst_testkit::Workspace;
use nix::sys::signal::Signal;

const CLIENTS: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_that_arrive_together_share_one_fsync() {
    // Beads without a formula: stored, not run, so nothing else writes the journal.
    let ws = Workspace::builder()
        .config("default_formula = \"\"")
        .build();
    let mut daemon = ws.catalystd().spawn();
    let status = |v: serde_json::Value| -> StatusAnswer {
        serde_json::from_value(v).expect("a status answer")
    };
    let before = status(daemon.call(Method::Status).await);
    let mut clients: Vec<UnixStream> = (0..CLIENTS)
        .map(|_| UnixStream::connect(ws.paths.socket()).expect("connect"))
        .collect();
    // Stopped, the daemon reads nothing: every request is waiting when it goes on.
    daemon.signal(Signal::SIGSTOP);
    for (i, client) in clients.iter_mut().enumerate() {
        let line =
            format!("{{\"id\":{i},\"method\":\"submit\",\"params\":{{\"title\":\"bead {i}\"}}}}\n");
        client.write_all(line.as_bytes()).expect("write");
    }
    daemon.signal(Signal::SIGCONT);
    let answers = tokio::task::spawn_blocking(move || {
        clients
            .into_iter()
            .map(|client| {
                let mut reader = BufReader::new(client);
                let mut line = String::new();
                // The greeting first, then the answer.
                reader.read_line(&mut line).expect("hello");
                line.clear();
                reader.read_line(&mut line).expect("answer");
                line
            })
            .collect::<Vec<_>>()
    })
    .await
    .expect("answers");
    for answer in &answers {
        let response: Response = serde_json::from_str(answer).expect("a response");
        let submitted = response.result.map(serde_json::from_value::<Submitted>);
        let ids = submitted.map(|s| s.expect("a submit answer").ids.len());
        assert_eq!(
            ids,
            Some(1),
            "every submit is answered with its bead: {answer}"
        );
    }
    let after = status(daemon.call(Method::Status).await);
    assert_eq!(
        after.seq - before.seq,
        CLIENTS as u64,
        "one bead.created per submit"
    );
    let used = after.journal_syncs - before.journal_syncs;
    assert!(
        (1..=CLIENTS as u64 / 2).contains(&used),
        "{CLIENTS} submits that arrived together took {used} fsyncs"
    );
    daemon.terminate().await;
}
