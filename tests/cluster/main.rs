//! Agents on more than one machine: a real three-node NATS JetStream cluster on loopback
//! ports (`nats-server`, started by each test), with nodes killed mid-run. Each test skips,
//! saying why, where `nats-server` is not installed (`.ci/install-test-deps` installs it).

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use catalyst_testkit::nats::NatsCluster;
use futures::StreamExt;

mod auth;
mod faults;
mod forged;
mod run;
mod trust;
mod worker;

/// The cluster the tests stand on: a stream kept on all three nodes goes on taking and
/// giving messages, none lost, after the node a client was talking to is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_work_queue_loses_nothing_when_a_node_is_killed() {
    let Some(mut cluster) = NatsCluster::start(3).await else {
        return;
    };
    let first = async_nats::connect(cluster.url(0))
        .await
        .expect("connect to n1");
    let js = jetstream::new(first);
    // A new cluster may not place three replicas at its first try (a peer still catching
    // up): tried again, as the daemon does.
    let stream = catalyst_testkit::poll::eventually("a stream on three nodes", async || {
        js.create_stream(stream::Config {
            name: "WORK".into(),
            subjects: vec!["work.>".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            num_replicas: 3,
            ..Default::default()
        })
        .await
        .ok()
    })
    .await;
    for i in 0..10 {
        js.publish(format!("work.{i}"), i.to_string().into())
            .await
            .expect("publish")
            .await
            .expect("stored");
    }
    drop(stream);
    cluster.kill(0);

    // Through another node: everything published before the kill, and more after it.
    let other = async_nats::ConnectOptions::new()
        .connect(cluster.urls()[1..].to_vec())
        .await
        .expect("connect to n2 or n3");
    let js = jetstream::new(other);
    let stream = catalyst_testkit::poll::eventually("the stream after the kill", async || {
        js.get_stream("WORK").await.ok()
    })
    .await;
    let ack = catalyst_testkit::poll::eventually("a publish after the kill", async || {
        js.publish("work.10", "10".into()).await.ok()?.await.ok()
    })
    .await;
    assert_eq!(ack.stream, "WORK");
    // The stream's leader may have been the node killed: JetStream's calls time out until
    // the others elect a new one.
    let consumer = catalyst_testkit::poll::eventually("a consumer after the kill", async || {
        stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some("workers".into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .ok()
    })
    .await;
    let mut messages = consumer.messages().await.expect("messages");
    let mut got = Vec::new();
    while got.len() < 11 {
        let message = tokio::time::timeout(Duration::from_secs(30), messages.next())
            .await
            .expect("a message in time")
            .expect("more")
            .expect("a message");
        got.push(String::from_utf8_lossy(&message.payload).into_owned());
        message.ack().await.expect("ack");
    }
    got.sort_by_key(|s| s.parse::<u32>().unwrap_or(0));
    let want: Vec<String> = (0..=10).map(|i| i.to_string()).collect();
    assert_eq!(got, want, "each message once, none lost");
    cluster.restart(0).await;
}

/// Runs `catalyst worker` with `args` on `remote`, working in `workdir`, which must refuse to
/// run: returns what it said on stderr.
pub fn worker_refuses(
    args: &[std::ffi::OsString],
    remote: &std::path::Path,
    workdir: &std::path::Path,
) -> String {
    let out = std::process::Command::new(catalyst_testkit::catalyst_bin())
        .arg("worker")
        .args(args)
        .arg("--repo")
        .arg(remote)
        .arg("--workdir")
        .arg(workdir)
        .output()
        .expect("run catalyst worker");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    err
}
