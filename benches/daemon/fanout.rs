//! The `fanout` row: how late events reach a hundred subscribers (of the control socket, and of
//! the web dashboard's Server-Sent Events), and what following subscribers cost a run. The
//! delivery rows run `catalystd` as its own process, as it is deployed: its clients here share
//! the machine's two cores with it, not its threads or its allocator.

use std::time::Duration;

use catalyst::cli::client::Client;
use catalyst::protocol::{Method, PauseParams};

use crate::overhead::catalyst_run;
use crate::{beads, percentile, row, runtime, stop, workspace, WAIT};

pub fn fanout(quick: bool) {
    let (subscribers, events) = if quick { (20, 1_000) } else { (100, 10_000) };
    let rt = runtime();
    rt.block_on(delivery(subscribers, events));
    rt.block_on(sse_delivery(subscribers, events));
    let n = if quick { 20 } else { 100 };
    let alone = rt.block_on(catalyst_run(&workspace("max_agents = 2"), n, 0));
    let watched = rt.block_on(catalyst_run(&workspace("max_agents = 2"), n, subscribers));
    row(
        &format!("fan-out: {n} beads dispatched with {subscribers} subscribers"),
        format!("{watched:.2?}"),
        "<= 1.1x",
        &format!("without subscribers: {alone:.2?}"),
        watched.as_secs_f64() / alone.as_secs_f64(),
    );
}

/// `events` events (beads submitted while paused) delivered to `subscribers` subscribers.
async fn delivery(subscribers: usize, events: usize) {
    let ws = workspace("max_agents = 2");
    let daemon = ws.spawn();
    daemon.call(Method::Status).await;
    let mut client = daemon.client().await;
    client
        .call(&Method::Pause(PauseParams { model: None }))
        .await
        .expect("pause");
    let seq = client.call(&Method::Status).await.expect("status")["seq"]
        .as_u64()
        .unwrap_or(0);
    let mut tasks = Vec::new();
    for _ in 0..subscribers {
        // A lean reader (raw lines, the `ts` field cut out by hand): a hundred clients share
        // the bench machine's two cores with the daemon, so the clients' own JSON parsing
        // would otherwise be what is measured.
        let sub = daemon.subscribe(seq).await.into_client();
        tasks.push(tokio::spawn(
            async move { lean_latencies(sub, events).await },
        ));
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
    let base = percentile(&all, 50);
    row(
        &format!("fan-out: {subscribers} subscribers x {events} events, p99"),
        format!("{:.2?}", percentile(&all, 99)),
        "<= 10ms",
        &format!("p50: {base:.2?}"),
        percentile(&all, 99).as_secs_f64() / base.as_secs_f64(),
    );
    stop(daemon).await;
}

/// Receive delays of the next `events` events on a subscription, from their `ts` to now.
async fn lean_latencies(sub: Client, events: usize) -> Vec<Duration> {
    let (mut lines, _hang_up_on_drop) = sub.into_lines();
    let mut lat = Vec::with_capacity(events);
    while lat.len() < events {
        let line = lines.next_line().await.expect("event").expect("open");
        let now = chrono::Utc::now();
        let ts = line
            .split_once("\"ts\":\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(ts, _)| ts)
            .expect("ts");
        let ts = catalyst::domain::time::Timestamp::parse(ts).expect("ts");
        lat.push((now - ts.to_utc()).to_std().unwrap_or_default());
    }
    lat
}

/// The same through the web dashboard: `subscribers` clients following `GET /events`
/// (Server-Sent Events) while `events` events are produced.
async fn sse_delivery(subscribers: usize, events: usize) {
    let port = catalyst_testkit::web::free_port();
    let ws = workspace(&format!(
        "max_agents = 2\n[web]\nlisten = \"127.0.0.1:{port}\"\n"
    ));
    let daemon = ws.spawn();
    daemon.call(Method::Status).await;
    let token = catalyst_testkit::web::token(&daemon).await;
    let mut client = daemon.client().await;
    client
        .call(&Method::Pause(PauseParams { model: None }))
        .await
        .expect("pause");
    let seq = client.call(&Method::Status).await.expect("status")["seq"]
        .as_u64()
        .unwrap_or(0);
    let http = reqwest::Client::new();
    let mut tasks = Vec::new();
    for _ in 0..subscribers {
        let response = http
            .get(format!("http://127.0.0.1:{port}/events?since={seq}"))
            .header("Authorization", format!("Bearer {}", token.trim()))
            .send()
            .await
            .expect("GET /events");
        assert!(response.status().is_success(), "{}", response.status());
        tasks.push(tokio::spawn(sse_latencies(response, events)));
    }
    for batch in 0..events / 100 {
        let prefix = format!("sse {batch}-");
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
    let base = percentile(&all, 50);
    row(
        &format!("fan-out: {subscribers} SSE clients (GET /events) x {events} events, p99"),
        format!("{:.2?}", percentile(&all, 99)),
        "<= 10ms",
        &format!("p50: {base:.2?}"),
        percentile(&all, 99).as_secs_f64() / base.as_secs_f64(),
    );
    stop(daemon).await;
}

/// Receive delays of the next `events` Server-Sent Events, from their `ts` to now (the data
/// lines read as raw text, as [`lean_latencies`] does).
async fn sse_latencies(response: reqwest::Response, events: usize) -> Vec<Duration> {
    use futures::StreamExt;
    let mut body = response.bytes_stream();
    let mut pending = String::new();
    let mut lat = Vec::with_capacity(events);
    while lat.len() < events {
        let chunk = body.next().await.expect("more events").expect("bytes");
        let now = chrono::Utc::now();
        pending.push_str(std::str::from_utf8(&chunk).expect("utf-8"));
        let mut rest = pending.as_str();
        while let Some(end) = rest.find('\n') {
            let line = &rest[..end];
            rest = &rest[end + 1..];
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let ts = data
                .split_once("\"ts\":\"")
                .and_then(|(_, rest)| rest.split_once('"'))
                .map(|(ts, _)| ts)
                .expect("ts");
            let ts = catalyst::domain::time::Timestamp::parse(ts).expect("ts");
            lat.push((now - ts.to_utc()).to_std().unwrap_or_default());
        }
        pending = rest.to_owned();
    }
    lat
}
