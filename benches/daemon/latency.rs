//! The `latency` row: from an inbox file renamed, or a submit answered, to the step
//! dispatched, against a status round trip.
//!
//! Beads arrive at a steady pace (open loop, [`PACE`]) while earlier ones run their agent and
//! merge: about half of what the machine can do (the `overhead` row measures that), so the
//! figure is the daemon's latency under load, not a queue for a machine that is full.

use std::time::{Duration, Instant};

use catalyst::protocol::{BeadInput, Method};
use catalyst_testkit::{Events, TestDaemon};

use crate::{count_events, percentile, row, runtime, stop, target, workspace};

/// One bead every 40 ms: 25 a second.
const PACE: Duration = Duration::from_millis(40);

pub fn latency(quick: bool) {
    let n = if quick { 20 } else { 200 };
    let ws = workspace("max_agents = 64");
    runtime().block_on(async {
        let daemon = ws.start().await;
        let mut client = daemon.client().await;
        let mut rtt = Vec::new();
        for _ in 0..n {
            let t = Instant::now();
            client.call(&Method::Status).await.expect("status");
            rtt.push(t.elapsed());
        }
        rtt.sort();
        let mut dispatched = daemon.subscribe_types(0, &["step.dispatched"]).await;
        let mut inbox = from_inbox(&daemon, &mut dispatched, n).await;
        let mut submit = Vec::new();
        let mut pace = tokio::time::interval(PACE);
        for i in 0..n {
            pace.tick().await;
            let id = format!("submit-{i}");
            let input = BeadInput {
                id: Some(id.clone()),
                title: "t".into(),
                ..Default::default()
            };
            client
                .call(&Method::Submit(vec![input]))
                .await
                .expect("submit");
            let t = Instant::now();
            count_events(&mut dispatched, &format!("{id} dispatched"), 1, |e| {
                e["bead"] == id.as_str()
            })
            .await;
            submit.push(t.elapsed());
        }
        inbox.sort();
        submit.sort();
        let base = percentile(&rtt, 50);
        for (what, v, limit) in [
            (
                "inbox file renamed in (25/s)",
                &inbox,
                Duration::from_millis(25),
            ),
            (
                "ctl submit answered (25/s)",
                &submit,
                Duration::from_millis(20),
            ),
        ] {
            for p in [50, 99] {
                let value = percentile(v, p);
                let goal = match p {
                    99 => target(&format!("<= {limit:?}"), value <= limit),
                    _ => "-".to_owned(),
                };
                row(
                    &format!("latency: {what} -> step.dispatched p{p}"),
                    format!("{value:.2?}"),
                    &goal,
                    &format!("status round trip p50: {base:.2?}"),
                    value.as_secs_f64() / base.as_secs_f64(),
                );
            }
        }
        stop(daemon).await;
    });
}

/// Times `n` beads from their inbox file renamed into place to their first step dispatched.
async fn from_inbox(daemon: &TestDaemon, dispatched: &mut Events, n: usize) -> Vec<Duration> {
    let mut took = Vec::new();
    let mut pace = tokio::time::interval(PACE);
    for i in 0..n {
        pace.tick().await;
        let id = format!("inbox-{i}");
        let tmp = daemon.paths.inbox().join(format!(".{id}.tmp"));
        std::fs::write(&tmp, format!("{{\"id\":\"{id}\",\"title\":\"t\"}}")).expect("write");
        let t = Instant::now();
        std::fs::rename(&tmp, daemon.paths.inbox().join(format!("{id}.json"))).expect("rename");
        count_events(dispatched, &format!("{id} dispatched"), 1, |e| {
            e["bead"] == id.as_str()
        })
        .await;
        took.push(t.elapsed());
    }
    took
}
