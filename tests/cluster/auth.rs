//! How the daemon and its workers reach NATS: servers that ask for a token (read from a
//! file), and servers that speak TLS only.

use catalyst_testkit::nats::{shared_remote, start_worker, NatsCluster};
use catalyst_testkit::{bead_with_id, TestDaemon, Workspace};

use crate::run::{all_closed, fix_loop};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bead_runs_on_a_worker_of_a_cluster_that_asks_for_a_token() {
    let Some(cluster) = NatsCluster::start_with_token(1, "s3cret-token").await else {
        return;
    };
    let ws = Workspace::new(&fix_loop(&["cat-tok"]), "");
    let remote = shared_remote(&ws);
    let config = cluster.config_for(&remote, 10);
    assert!(config.contains("token_file"), "{config}");
    ws.append_config(&config);
    let daemon: TestDaemon = ws.start().await;
    let w1 = start_worker(&ws, &cluster, &remote, "w1", 1);
    let id = daemon.submit(bead_with_id("cat-tok")).await;
    daemon.wait_status(&id, "closed").await;
    let theirs = ws.root.join(&w1.name).display().to_string();
    let runs = daemon.invocations();
    assert!(!runs.is_empty());
    assert!(
        runs.iter().all(|i| i.cwd.starts_with(&theirs)),
        "every agent ran on the worker:\n{}",
        w1.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_token_stops_the_daemon_and_the_worker_with_the_reason() {
    let Some(cluster) = NatsCluster::start_with_token(1, "s3cret-token").await else {
        return;
    };
    let ws = Workspace::new("", "");
    let remote = shared_remote(&ws);
    let missing = ws.root.join("no-such-token");
    let token = cluster.token_file().expect("a token file");
    let config = cluster.config_for(&remote, 10).replace(
        &format!("{:?}", token.display().to_string()),
        &format!("{:?}", missing.display().to_string()),
    );
    assert!(config.contains("no-such-token"), "{config}");
    ws.append_config(&config);
    let mut daemon = ws.catalystd().spawn();
    let status = daemon.wait_exit().await;
    assert!(!status.success(), "{status}");
    let log = daemon.stderr();
    assert!(
        log.contains("cannot read the NATS token file") && log.contains("no-such-token"),
        "{log}"
    );
    // A worker that gives the wrong token is refused by the server, and says so.
    let wrong = ws.root.join("wrong-token");
    std::fs::write(&wrong, "not-the-token\n").expect("a token file");
    // The worker's flags for this cluster, its token file replaced by the wrong one.
    let mut args = cluster.worker_args("w1");
    let at = args
        .iter()
        .position(|a| a == "--nats-token-file")
        .expect("a token flag");
    args[at + 1] = wrong.clone().into();
    args.extend(["--nats".into(), cluster.url(0).into()]);
    let err = crate::worker_refuses(&args, &remote, &ws.root.join("w1"));
    assert!(err.contains("cannot reach NATS"), "{err}");
    assert!(err.to_lowercase().contains("authori"), "{err}");
}

/// A cluster whose nodes speak TLS only, with a CA of their own: the daemon and a worker given
/// that CA reach it over `tls://` and run a bead; a worker without it gets nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bead_runs_on_a_worker_of_a_cluster_reached_over_tls() {
    let Some(cluster) = NatsCluster::start_with_tls(1).await else {
        return;
    };
    let ws = Workspace::new(&fix_loop(&["cat-tls"]), "");
    let remote = shared_remote(&ws);
    let config = cluster.config_for(&remote, 10);
    assert!(
        config.contains("\"tls://127.0.0.1:") && config.contains("tls_ca_file"),
        "{config}"
    );
    ws.append_config(&config);
    let daemon: TestDaemon = ws.start().await;
    let w1 = start_worker(&ws, &cluster, &remote, "w1", 1);
    let id = daemon.submit(bead_with_id("cat-tls")).await;
    all_closed(
        &daemon,
        std::slice::from_ref(&id),
        std::slice::from_ref(&w1),
    )
    .await;

    // The nodes' certificate is checked: without the CA, a worker cannot connect.
    let mut args = cluster.worker_args("w2");
    let at = args
        .iter()
        .position(|a| a == "--tls-ca")
        .expect("a CA flag");
    args.drain(at..at + 2);
    args.extend([
        "--nats".into(),
        cluster.url(0).into(),
        "--name".into(),
        "w2".into(),
    ]);
    let err = crate::worker_refuses(&args, &remote, &ws.root.join("w2"));
    assert!(err.contains("cannot reach NATS"), "{err}");
}
