//! The `fanout` row: how late events reach a hundred subscribers (of the control socket, and of
//! the web dashboard's Server-Sent Events), and what following subscribers cost a run. The
//! delivery rows run `catalystd` as its own process, as it is deployed: its clients here share
//! the machine's two cores with it, not its threads or its allocator.

use std::time::Duration;

use catalyst::cli::client::Client;
use catalyst::protocol::{Method, PauseParams};
use catalyst_testkit::TestDaemon;

use crate::overhead::catalyst_run;
use crate::{
    alternated, beads, listed, median, percentile, row, runtime, stop, target, workspace, WAIT,
};

/// Runs each way of the dispatch row.
const RUNS: usize = 5;

pub fn fanout(quick: bool) {
    let (subscribers, events) = if quick { (20, 1_000) } else { (100, 10_000) };
    let rt = runtime();
    rt.block_on(delivery(Via::Socket, subscribers, events));
    rt.block_on(delivery(Via::Sse, subscribers, events));
    let n = if quick { 20 } else { 100 };
    // Five runs each way, alternated, and the median of each: one run of a couple of
    // seconds on this machine varies by as much as the 10% the target allows.
    let (alone, watched) = alternated(
        RUNS,
        || rt.block_on(async { catalyst_run(deployed().await, n, 0).await }),
        || rt.block_on(async { catalyst_run(deployed().await, n, subscribers).await }),
    );
    let runs = format!(
        "  runs: without {}; with {}",
        listed(alone.clone()),
        listed(watched.clone())
    );
    let (alone, watched) = (median(&alone), median(&watched));
    row(
        &format!("fan-out: {n} beads dispatched with {subscribers} subscribers, median of {RUNS}"),
        format!("{watched:.2?}"),
        &target(
            "<= 1.1x",
            watched.as_secs_f64() <= alone.as_secs_f64() * 1.1,
        ),
        &format!("without subscribers: {alone:.2?}"),
        watched.as_secs_f64() / alone.as_secs_f64(),
    );
    println!("{runs}");
}

/// `catalystd` as its own process on a new workspace, as the delivery rows run it.
async fn deployed() -> TestDaemon {
    crate::deployed(&workspace("max_agents = 2")).await
}

/// How the subscribers follow the events.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The control socket's `subscribe`.
    Socket,
    /// The web dashboard's `GET /events` (Server-Sent Events).
    Sse,
}

/// `events` events (beads submitted while paused) delivered to `subscribers` subscribers
/// following them `via` the socket or the dashboard.
async fn delivery(via: Via, subscribers: usize, events: usize) {
    let port = catalyst_testkit::web::free_port();
    let ws = workspace(&match via {
        Via::Socket => "max_agents = 2\n".to_owned(),
        Via::Sse => format!("max_agents = 2\n[web]\nlisten = \"127.0.0.1:{port}\"\n"),
    });
    let daemon = crate::deployed(&ws).await;
    let mut client = daemon.client().await;
    client
        .call(&Method::Pause(PauseParams { model: None }))
        .await
        .expect("pause");
    let seq = client.call(&Method::Status).await.expect("status")["seq"]
        .as_u64()
        .unwrap_or(0);
    // Lean readers (raw lines, the `ts` field cut out by hand): a hundred clients share the
    // bench machine's two cores with the daemon, so the clients' own JSON parsing would
    // otherwise be what is measured.
    let mut tasks = Vec::new();
    match via {
        Via::Socket => {
            for _ in 0..subscribers {
                let sub = daemon.subscribe(seq).await.into_client();
                tasks.push(tokio::spawn(lean_latencies(sub, events)));
            }
        }
        Via::Sse => {
            let token = catalyst_testkit::web::token(&daemon).await;
            let http = reqwest::Client::new();
            for _ in 0..subscribers {
                let response = http
                    .get(format!("http://127.0.0.1:{port}/events?since={seq}"))
                    .bearer_auth(&token)
                    .send()
                    .await
                    .expect("GET /events");
                assert!(response.status().is_success(), "{}", response.status());
                tasks.push(tokio::spawn(sse_latencies(response, events)));
            }
        }
    }
    for batch in 0..events / 100 {
        let prefix = format!("fan {batch}-");
        client
            .call(&Method::Submit(beads(&prefix, 100)))
            .await
            .expect("submit");
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(
            tokio::time::timeout(WAIT, t)
                .await
                .expect("delivered")
                .expect("task"),
        );
    }
    all.sort();
    let (base, p99) = (percentile(&all, 50), percentile(&all, 99));
    let who = match via {
        Via::Socket => "subscribers",
        Via::Sse => "SSE clients (GET /events)",
    };
    row(
        &format!("fan-out: {subscribers} {who} x {events} events, p99"),
        format!("{p99:.2?}"),
        &target("<= 10ms", p99 <= Duration::from_millis(10)),
        &format!("p50: {base:.2?}"),
        p99.as_secs_f64() / base.as_secs_f64(),
    );
    stop(daemon).await;
}

/// How late events' lines (socket lines, or SSE `data:` lines) arrived, from their `ts` field,
/// cut out by hand. The events of one group share their `ts`, so the last one parsed is kept:
/// a hundred clients parsing each line's time on the daemon's two cores would delay the
/// deliveries they measure.
#[derive(Default)]
struct Delays {
    ts: String,
    at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Delays {
    /// How late the event `line` arrived `now`.
    fn of(&mut self, line: &str, now: chrono::DateTime<chrono::Utc>) -> Duration {
        let ts = line
            .split_once("\"ts\":\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(ts, _)| ts)
            .expect("ts");
        if self.at.is_none() || self.ts != ts {
            let parsed = catalyst::domain::time::Timestamp::parse(ts).expect("ts");
            self.at = Some(parsed.to_utc());
            ts.clone_into(&mut self.ts);
        }
        let at = self.at.expect("parsed above");
        (now - at).to_std().unwrap_or_default()
    }
}

/// Lines that arrive in pieces: each complete one is handed on, the rest kept for the next
/// piece.
#[derive(Default)]
struct Pieces(Vec<u8>);

impl Pieces {
    fn feed(&mut self, piece: &[u8], line: impl FnMut(&str)) {
        self.0.extend_from_slice(piece);
        // A piece mostly ends a line: the last newline is found from the end, and the lines
        // before it are split with `str`'s searcher (a `memchr`).
        let Some(last) = self.0.iter().rposition(|&b| b == b'\n') else {
            return;
        };
        std::str::from_utf8(&self.0[..last])
            .expect("utf-8")
            .split('\n')
            .for_each(line);
        self.0.drain(..=last);
    }
}

/// Receive delays of the next `events` events on a subscription. Each read's lines arrived
/// together, when the read returned: the time is taken then, once, as for the SSE clients, so
/// that a line's delay does not include the reader's own work on the lines before it.
async fn lean_latencies(sub: Client, events: usize) -> Vec<Duration> {
    use tokio::io::AsyncReadExt;
    let (lines, _hang_up_on_drop) = sub.into_lines();
    let (mut reader, mut buf) = (lines.into_inner(), vec![0u8; 1 << 16]);
    let (mut pieces, mut delays) = (Pieces::default(), Delays::default());
    let mut lat = Vec::with_capacity(events);
    while lat.len() < events {
        let n = reader.read(&mut buf).await.expect("events");
        assert!(n > 0, "the daemon closed the subscription");
        let now = chrono::Utc::now();
        pieces.feed(&buf[..n], |line| lat.push(delays.of(line, now)));
    }
    lat
}

/// Receive delays of the next `events` Server-Sent Events.
async fn sse_latencies(response: reqwest::Response, events: usize) -> Vec<Duration> {
    use futures::StreamExt;
    let mut body = response.bytes_stream();
    let (mut pieces, mut delays) = (Pieces::default(), Delays::default());
    let mut lat = Vec::with_capacity(events);
    while lat.len() < events {
        let chunk = body.next().await.expect("more events").expect("bytes");
        let now = chrono::Utc::now();
        pieces.feed(&chunk, |line| {
            if let Some(data) = line.strip_prefix("data:") {
                lat.push(delays.of(data, now));
            }
        });
    }
    lat
}
