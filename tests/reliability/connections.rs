//! Connections and followers: 200 clients each holding most of a request line, a subscriber
//! that closes its sending side and goes on reading, and more `logs -f` followers than the
//! kernel gives a user inotify instances.

use catalyst::protocol::{BeadInput, Method, PauseParams};
use catalyst_testkit::poll::eventually;
use catalyst_testkit::procfs::vm_kb;
use catalyst_testkit::scenario::implement_waits_for;
use catalyst_testkit::{bead, bead_with_id, Workspace, TIMEOUT};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// Connects and reads the hello line.
async fn connect(socket: &std::path::Path) -> BufReader<UnixStream> {
    let stream = UnixStream::connect(socket).await.expect("connect");
    let mut conn = BufReader::new(stream);
    let mut hello = String::new();
    conn.read_line(&mut hello).await.expect("hello");
    assert!(hello.contains("\"hello\""), "{hello}");
    conn
}

/// The next line, within the tests' timeout; `None` at the end of the stream.
async fn next_line(conn: &mut BufReader<UnixStream>) -> Option<String> {
    let mut line = String::new();
    let n = tokio::time::timeout(TIMEOUT, conn.read_line(&mut line))
        .await
        .expect("a line in time")
        .ok()?;
    (n > 0).then_some(line)
}

/// How many clients each hold most of a line.
const CLIENTS: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_holding_most_of_a_line_each_do_not_grow_the_daemon_by_a_mib_each() {
    let ws = Workspace::builder().build();
    let daemon = ws.spawn();
    daemon
        .call(Method::Pause(PauseParams { model: None }))
        .await;
    let socket = ws.paths.socket();
    let before = vm_kb(daemon.pid(), "VmRSS").expect("VmRSS");
    let partial = vec![b'x'; (1 << 20) - 1024];
    let mut conns = Vec::new();
    for _ in 0..CLIENTS {
        let mut conn = connect(&socket).await;
        // A connection refused for the budget is closed: its write may fail.
        let _ = conn.get_mut().write_all(&partial).await;
        conns.push(conn);
    }
    let after = vm_kb(daemon.pid(), "VmRSS").expect("VmRSS");
    let grown = after.saturating_sub(before) / 1024;
    // Each connection's first answer says what became of its line: the ones the budget
    // refused were told so when they took it over; the others' lines, once finished, are
    // answered as the malformed requests they are.
    let mut refused = 0;
    for conn in &mut conns {
        let _ = conn.get_mut().write_all(b"\n").await;
        let line = next_line(conn).await.unwrap_or_default();
        if line.contains("unfinished request lines") {
            refused += 1;
        } else {
            assert!(line.contains("\"error\""), "{line}");
        }
    }
    println!("{CLIENTS} clients x 1 MiB partial lines: daemon RSS {before} kB -> {after} kB (+{grown} MB), {refused} refused");
    assert!(refused > 0, "the budget refused some");
    // Without the budget each client costs at least the MiB it sent; with it the daemon holds
    // 8 MiB of lines, plus what its allocator keeps of the buffers it gave back.
    assert!(grown <= 100, "grew by {grown} MB");

    // Their share is given back when they go (each connection's task notices the hang-up on
    // its own): a request line near the limit is served then.
    drop(conns);
    let big = BeadInput {
        description: Some("y".repeat(400 * 1024)),
        ..bead("a big request after them")
    };
    eventually(
        "a big request served once the others are gone",
        async || {
            let mut client = daemon.client().await;
            client.call(&Method::Submit(vec![big.clone()])).await.ok()
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_closes_its_sending_side_still_gets_every_event() {
    let ws = Workspace::builder().build();
    let daemon = ws.spawn();
    daemon
        .call(Method::Pause(PauseParams { model: None }))
        .await;
    let mut conn = connect(&ws.paths.socket()).await;
    conn.get_mut()
        .write_all(b"{\"id\":1,\"method\":\"subscribe\",\"params\":{\"follow\":true}}\n")
        .await
        .expect("subscribe");
    // As `nc -U` does at the end of its input.
    conn.get_mut().shutdown().await.expect("half-close");
    let answer = next_line(&mut conn).await.expect("the answer");
    assert!(answer.contains("\"subscribed\":true"), "{answer}");

    let id = daemon.submit(bead_with_id("cat-after")).await;
    loop {
        let line = next_line(&mut conn)
            .await
            .expect("the stream goes on after the client's end of input");
        if line.contains("bead.created") && line.contains(&id) {
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_log_followers_than_inotify_instances_all_follow_to_the_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let go = dir.path().join("go");
    let ws = Workspace::new(&implement_waits_for(&go), "");
    let daemon = ws.spawn();
    let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(128);
    let followers = limit + 22;
    daemon.submit(bead_with_id("cat-1")).await;
    daemon
        .wait_for("the implementer's dispatch", |e| {
            e["type"] == "step.dispatched" && e["step"] == "cat-1.implement"
        })
        .await;

    let socket = ws.paths.socket();
    let mut tasks = tokio::task::JoinSet::new();
    let (opened_tx, mut opened) = tokio::sync::mpsc::channel(followers);
    for _ in 0..followers {
        let (socket, opened_tx) = (socket.clone(), opened_tx.clone());
        tasks.spawn(async move {
            let mut conn = connect(&socket).await;
            conn.get_mut()
                .write_all(b"{\"id\":1,\"method\":\"logs\",\"params\":{\"step\":\"cat-1.implement\",\"attempt\":1,\"follow\":true}}\n")
                .await
                .expect("logs");
            let answer = next_line(&mut conn).await.expect("the answer");
            assert!(answer.contains("\"file\""), "{answer}");
            opened_tx.send(()).await.expect("report");
            while let Some(line) = next_line(&mut conn).await {
                if line.contains("log.end") {
                    return true;
                }
            }
            false
        });
    }
    for _ in 0..followers {
        opened.recv().await.expect("every follower opened the log");
    }
    std::fs::write(&go, "").expect("go");
    let mut ended = 0;
    while let Some(done) = tasks.join_next().await {
        if done.expect("follower") {
            ended += 1;
        }
    }
    println!("{ended} of {followers} followers (inotify instance limit {limit}) saw the end");
    assert_eq!(ended, followers);
}
