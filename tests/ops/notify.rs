//! sd_notify: what a service manager listening on `NOTIFY_SOCKET` hears.

use std::time::Duration;

use catalyst::cli::client::Client;
use catalyst::protocol::Method;
use nix::sys::signal::Signal;
use tokio::net::UnixDatagram;

use catalyst_testkit::scenario::implement_waits_for;
use catalyst_testkit::{bead, Workspace, TIMEOUT};

/// Everything received so far, and a way to wait for a message.
struct Manager {
    socket: UnixDatagram,
    seen: Vec<String>,
}

impl Manager {
    async fn until(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let mut buf = vec![0u8; 4096];
        let wait = tokio::time::timeout(TIMEOUT, async {
            loop {
                let n = self.socket.recv(&mut buf).await.expect("recv");
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                self.seen.push(message.clone());
                if pred(&message) {
                    return message;
                }
            }
        });
        match wait.await {
            Ok(m) => m,
            Err(_) => panic!("no {what} within {TIMEOUT:?}; got {:?}", self.seen),
        }
    }
}

fn has_line(message: &str, line: &str) -> bool {
    message.lines().any(|l| l == line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_manager_hears_ready_status_watchdog_and_stopping() {
    let ws = Workspace::new("", "");
    let go = ws.stub_file("go");
    ws.set_scenario(&implement_waits_for(&go));
    let path = ws.root.join("notify.sock");
    let mut manager = Manager {
        socket: UnixDatagram::bind(&path).expect("bind the notify socket"),
        seen: Vec::new(),
    };
    let notify_socket = path.display().to_string();
    let mut daemon = ws
        .catalystd()
        .env("NOTIFY_SOCKET", &notify_socket)
        .env("WATCHDOG_USEC", "400000")
        .spawn();

    manager.until("READY=1", |m| has_line(m, "READY=1")).await;
    // At the moment READY arrives the socket answers, without retrying, and recovery is done.
    let mut client = Client::connect(&ws.paths.socket())
        .await
        .expect("the socket answers once READY=1 is sent");
    client.call(&Method::Status).await.expect("status");
    assert!(
        ws.journal().iter().any(|e| e["type"] == "daemon.started"),
        "recovery has run"
    );
    assert!(
        manager.seen.iter().all(|m| !m.contains("STOPPING")),
        "{:?}",
        manager.seen
    );

    daemon.submit(bead("Write a")).await;
    manager
        .until("a STATUS line with the running agent", |m| {
            m.lines()
                .any(|l| l.starts_with("STATUS=") && l.contains("running 1"))
        })
        .await;
    manager
        .until("a watchdog ping", |m| has_line(m, "WATCHDOG=1"))
        .await;

    daemon.signal(Signal::SIGTERM);
    manager
        .until("STOPPING=1", |m| has_line(m, "STOPPING=1"))
        .await;
    std::fs::write(&go, "").expect("release the agent");
    let status = daemon.wait_exit().await;
    assert!(status.success(), "{status}\n{}", daemon.stderr());
    // Pings stop with the daemon: nothing arrives once it has exited.
    let mut buf = [0u8; 256];
    let late = tokio::time::timeout(Duration::from_millis(500), async {
        loop {
            let n = manager.socket.recv(&mut buf).await.expect("recv");
            let m = String::from_utf8_lossy(&buf[..n]).into_owned();
            if m.contains("READY=1") {
                return m;
            }
        }
    })
    .await;
    assert!(late.is_err(), "no READY after the stop: {late:?}");
}
