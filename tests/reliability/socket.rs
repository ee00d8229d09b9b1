//! Hostile socket input: malformed lines by the thousand, many clients at
//! once, and a client running as another user. The daemon answers each with an error, keeps
//! serving everyone else, and writes nothing to its journal for any of it.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use catalyst::cli::client::Client;
use catalyst::protocol::{BeadInput, ListParams, Method, ShowParams};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use catalyst_testkit::{TestDaemon, Workspace, TIMEOUT};

/// One malformed request line, chosen by `n`: every 1,000th is 2 MiB long (past the 1 MiB
/// limit), the rest cycle through bad JSON, deep nesting, wrong types, unknown methods,
/// missing or bad ids, invalid ids and bytes that are not UTF-8.
fn malformed(n: usize) -> Vec<u8> {
    if n % 1000 == 999 {
        let mut line = br#"{"id":1,"method":"status","params":{"pad":""#.to_vec();
        line.resize(line.len() + (2 << 20), b'a');
        line.extend_from_slice(br#""}}"#);
        return line;
    }
    let text: String = match n % 20 {
        0 => "this is not json".into(),
        1 => r#"{"id":1,"method":"status""#.into(),
        2 => format!("{}{}", "[".repeat(20_000), "]".repeat(20_000)),
        3 => format!(
            r#"{{"id":3,"method":"submit","params":{}{}}}"#,
            r#"{"a":"#.repeat(5_000),
            "}".repeat(5_000)
        ),
        4 => r#"{"id":4,"method":"show","params":{"id":5}}"#.into(),
        5 => r#"{"id":5,"method":"submit","params":{"beads":"not a list"}}"#.into(),
        6 => r#"{"id":6,"method":"status","params":[1,2,3]}"#.into(),
        7 => r#"{"id":7,"method":"rm -rf /"}"#.into(),
        8 => r#"{"method":"status"}"#.into(),
        9 => r#"{"id":{"nested":true},"method":"status"}"#.into(),
        10 => "[1,2,3]".into(),
        11 => "null".into(),
        12 => r#"{"id":12,"method":42}"#.into(),
        13 => r#"{"id":1e999,"method":"status"}"#.into(),
        14 => "{}".into(),
        15 => r#"{"id":15,"method":"submit","params":{"id":"../../etc/evil","title":"x"}}"#.into(),
        16 => r#"{"id":16,"method":"show","params":{"id":"cat-404"}}"#.into(),
        17 => r#"{"id":17,"method":"submit","params":{"id":"a\u0000b","title":"x"}}"#.into(),
        18 => r#"{"id":18,"method":"status","extra":1}"#.into(),
        _ => {
            return b"{\"id\":19,\"method\":\"st\xffat\xfeus\"}".to_vec();
        }
    };
    text.into_bytes()
}

/// Sends `lines` on one raw connection, one at a time, and returns how many got an error
/// reply and how many were answered otherwise (which must not happen).
async fn send_malformed(socket: &Path, lines: impl Iterator<Item = Vec<u8>>) -> (usize, usize) {
    let stream = UnixStream::connect(socket).await.expect("connect");
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut reply = String::new();
    read.read_line(&mut reply).await.expect("hello");
    assert!(reply.contains("\"hello\""), "{reply}");
    let (mut errors, mut other) = (0, 0);
    for mut line in lines {
        line.push(b'\n');
        write.write_all(&line).await.expect("send");
        reply.clear();
        let n = read.read_line(&mut reply).await.expect("reply");
        assert!(n > 0, "the daemon closed the connection");
        let value: Value = serde_json::from_str(&reply).expect("a JSON reply");
        if value["error"]["code"].is_string() {
            errors += 1;
        } else {
            other += 1;
            eprintln!(
                "not an error: {} -> {reply}",
                String::from_utf8_lossy(&line)
            );
        }
    }
    (errors, other)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_malformed_lines_get_errors_and_change_nothing() {
    const LINES: usize = 10_000;
    const CONNECTIONS: usize = 10;
    let ws = Workspace::new("", "");
    let daemon = ws.spawn();
    let before_seq = daemon.call(Method::Status).await["seq"].clone();
    let journal = ws.paths.state.join("journal.jsonl");
    let before = std::fs::read(&journal).expect("journal");

    // A well-behaved client asks for the status all along.
    let mut witness = daemon.client().await;
    let stop = tokio_util::sync::CancellationToken::new();
    let watching = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut answered = 0u32;
            while !stop.is_cancelled() {
                witness.call(&Method::Status).await.expect("status");
                answered += 1;
            }
            answered
        })
    };
    let started = Instant::now();
    let socket = ws.paths.socket();
    let senders: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            let socket = socket.clone();
            tokio::spawn(async move {
                let lines = (c..LINES).step_by(CONNECTIONS).map(malformed);
                send_malformed(&socket, lines).await
            })
        })
        .collect();
    let (mut errors, mut other) = (0, 0);
    for sender in senders {
        let (e, o) = tokio::time::timeout(TIMEOUT, sender)
            .await
            .expect("in time")
            .expect("sender");
        errors += e;
        other += o;
    }
    let took = started.elapsed();
    stop.cancel();
    let answered = watching.await.expect("witness");
    assert_eq!(other, 0, "every malformed line gets an error");
    assert_eq!(errors, LINES);
    assert!(answered > 0, "the well-behaved client was served meanwhile");
    let status = daemon.call(Method::Status).await;
    assert_eq!(status["seq"], before_seq, "nothing was recorded");
    assert_eq!(
        std::fs::read(&journal).expect("journal"),
        before,
        "the journal is unchanged"
    );
    assert!(daemon.exited().is_none());
    println!(
        "{LINES} malformed lines on {CONNECTIONS} connections: {errors} error replies, 0 closed connections, in {:.1} s; meanwhile another client got {answered} status answers",
        took.as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_line_leaves_the_connection_usable() {
    let ws = Workspace::new("", "");
    let daemon = ws.spawn();
    daemon.call(Method::Status).await;
    // A line too long, then one that is not UTF-8, then a good request, sent at once: the
    // good one is answered although it was already buffered behind the bad ones.
    let mut bytes = malformed(999);
    bytes.push(b'\n');
    bytes.extend_from_slice(&malformed(19));
    bytes.push(b'\n');
    bytes.extend_from_slice(br#"{"id":"good","method":"status"}"#);
    bytes.push(b'\n');
    let stream = UnixStream::connect(ws.paths.socket())
        .await
        .expect("connect");
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    write.write_all(&bytes).await.expect("send");
    let mut replies = Vec::new();
    for _ in 0..4 {
        let mut line = String::new();
        tokio::time::timeout(TIMEOUT, read.read_line(&mut line))
            .await
            .expect("a reply in time")
            .expect("reply");
        replies.push(serde_json::from_str::<Value>(&line).expect("json"));
    }
    assert_eq!(replies[0]["type"], "hello");
    assert_eq!(replies[1]["error"]["code"], "too_large");
    assert_eq!(replies[2]["error"]["code"], "bad_request");
    assert_eq!(replies[3]["id"], "good");
    assert!(replies[3]["result"]["pid"].is_number());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_clients_are_all_answered_and_nothing_runs_twice() {
    const CLIENTS: usize = 200;
    let ws = Workspace::new("", "max_agents = 4");
    std::fs::create_dir_all(ws.paths.state.join("formulas")).expect("formulas");
    std::fs::write(
        ws.paths.state.join("formulas/one.formula.toml"),
        "formula = \"one\"\nversion = 1\n\n[[steps]]\nid = \"work\"\ntitle = \"Do {{title}}\"\nrole = \"task\"\n",
    )
    .expect("formula");
    let daemon = ws.spawn();
    daemon.call(Method::Status).await;
    let socket = ws.paths.socket();
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let socket = socket.clone();
            tokio::spawn(async move {
                let mut client = Client::connect(&socket).await.expect("connect");
                let id = format!("cat-c{n:03}");
                let answer = client
                    .call(&Method::Submit(vec![BeadInput {
                        id: Some(id.clone()),
                        title: format!("client {n}"),
                        formula: Some("one".into()),
                        ..Default::default()
                    }]))
                    .await
                    .expect("submit");
                assert_eq!(answer["ids"][0], id.as_str());
                client.call(&Method::Status).await.expect("status");
                let shown = client
                    .call(&Method::Show(ShowParams {
                        id: id.clone(),
                        runs: false,
                    }))
                    .await
                    .expect("show");
                assert_eq!(shown["id"], id.as_str());
                client
                    .call(&Method::List(ListParams {
                        status: None,
                        steps: true,
                        ..Default::default()
                    }))
                    .await
                    .expect("list");
                client.call(&Method::Ready).await.expect("ready");
            })
        })
        .collect();
    for client in clients {
        tokio::time::timeout(TIMEOUT, client)
            .await
            .expect("answered in time")
            .expect("client");
    }
    let answered = started.elapsed();
    let ids: Vec<String> = (0..CLIENTS).map(|n| format!("cat-c{n:03}")).collect();
    let events = daemon
        .follow_until("every bead to close", TIMEOUT * 2, |events| {
            let closed = events
                .iter()
                .filter(|e| {
                    e["type"] == "bead.status"
                        && e["status"] == "closed"
                        && e["bead"].as_str().is_some_and(|id| !id.contains('.'))
                })
                .count();
            closed >= CLIENTS
        })
        .await;
    for id in &ids {
        let poured = events
            .iter()
            .filter(|e| e["type"] == "molecule.poured" && e["bead"] == id.as_str())
            .count();
        let dispatched: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "step.dispatched" && e["bead"] == id.as_str())
            .collect();
        assert_eq!(poured, 1, "{id} poured once");
        assert_eq!(dispatched.len(), 1, "{id} dispatched once: {dispatched:?}");
    }
    let runs = ws.invocations();
    assert_eq!(runs.len(), CLIENTS, "one agent per bead");
    let mut beads: Vec<String> = runs.into_iter().filter_map(|i| i.bead).collect();
    beads.sort();
    beads.dedup();
    assert_eq!(beads, ids);
    println!(
        "{CLIENTS} concurrent clients: all answered in {:.1} s; {CLIENTS} beads ran once each in {:.1} s",
        answered.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Runs `catalyst ctl --socket SOCKET status` as uid/gid 65534 (nobody).
fn ctl_as_nobody(socket: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_catalyst"))
        .args(["ctl", "--socket"])
        .arg(socket)
        .arg("status")
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run ctl as nobody")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_is_private_and_another_uid_is_refused() {
    let ws = Workspace::new("", "");
    let mut daemon = ws.spawn();
    daemon.call(Method::Status).await;
    let socket = ws.paths.socket();
    assert_eq!(socket.parent(), Some(ws.paths.state.as_path()));
    assert_eq!(mode(&socket), 0o600, "the socket file is 0600");
    assert_eq!(mode(&ws.paths.state), 0o700, "its folder is 0700");

    if !nix::unistd::getuid().is_root() {
        println!("skipped the other-uid part: it needs root to run a client as another uid");
        return;
    }
    let journal = ws.paths.state.join("journal.jsonl");
    let before = std::fs::read(&journal).expect("journal");
    // First layer: file permissions. Another uid cannot even reach the socket.
    for dir in [&ws.root, &ws.repo] {
        chmod(dir, 0o755);
    }
    let refused = ctl_as_nobody(&socket);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("Permission denied"), "{stderr}");

    // Second layer, shown by opening the first (in this test only): the daemon checks the
    // peer's uid (SO_PEERCRED) and answers `forbidden`.
    chmod(&ws.paths.state, 0o711);
    chmod(&socket, 0o666);
    let forbidden = ctl_as_nobody(&socket);
    let stderr = String::from_utf8_lossy(&forbidden.stderr);
    assert!(!forbidden.status.success());
    assert!(stderr.contains("forbidden"), "{stderr}");
    assert!(stderr.contains("uid 65534"), "{stderr}");

    // The daemon serves its own uid as before, and recorded nothing.
    daemon.call(Method::Status).await;
    assert_eq!(std::fs::read(&journal).expect("journal"), before);
    stop(&mut daemon).await;
    println!(
        "uid 65534: refused by the 0600 socket in its 0700 folder (EACCES); with both opened, answered `{}`",
        stderr.trim()
    );
}

async fn stop(daemon: &mut TestDaemon) {
    let status = daemon.terminate().await;
    assert!(status.success(), "{status}");
}
