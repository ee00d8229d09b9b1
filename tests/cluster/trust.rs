//! Who a cluster listens to, beyond forged messages (`forged.rs`): NATS users whose
//! permissions keep each worker to its own subjects, TLS for a server off this machine, a
//! worker's own profiles sandboxed, and a worker the daemon does not list.

use async_nats::jetstream;

use catalyst::daemon::cluster::trust::Signer;
use catalyst::domain::cluster::Kind;
use catalyst_testkit::nats::{shared_remote, start_worker, NatsCluster};
use catalyst_testkit::poll::eventually;
use catalyst_testkit::{bead_with_id, TestDaemon, Workspace};

use super::run::{all_closed, fix_loop};

use crate::forged::{
    approving_end, command_line_order, held_review, orders_refused, publish, refused_ends,
    review_held_by_w1, signer_of, the_real_review_stood,
};

/// With a NATS user per worker and the permissions docs/cluster.md gives, the attack needs a
/// worker's login, and even then the server refuses it the orders' subjects and another
/// worker's, and the daemon refuses what it sends on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nkey_users_another_worker_can_neither_order_nor_end_for_the_one_holding_the_lease() {
    let Some(cluster) = NatsCluster::start_with_users(3).await else {
        return;
    };
    let ws = Workspace::new("", "");
    ws.set_scenario(&held_review(&ws, "cat-u"));
    let remote = shared_remote(&ws);
    ws.append_config(&cluster.config_for(&remote, 10));
    let config = std::fs::read_to_string(ws.paths.config()).expect("the config");
    assert!(config.contains("nkey_file"), "{config}");
    let daemon: TestDaemon = ws.start().await;
    let w1 = start_worker(&ws, &cluster, &remote, "w1", 1);
    // Nobody without a user gets in.
    assert!(async_nats::ConnectOptions::new()
        .connect(cluster.url(0))
        .await
        .is_err());
    // The dispatch id, as if it leaked: a worker's user may not read the orders' subjects.
    let watcher = cluster
        .client_as("daemon", &cluster.url(0))
        .await
        .expect("the daemon's user");
    let mut orders = watcher
        .subscribe("catalyst.attempt.>")
        .await
        .expect("subscribe");
    let id = daemon.submit(bead_with_id("cat-u")).await;
    let order = review_held_by_w1(&daemon, &mut orders, "cat-u").await;

    // w2 logs in as itself, with its own key.
    let other = cluster
        .client_as("w2", &cluster.url(1))
        .await
        .expect("w2's user");
    let js = jetstream::new(other);
    let w2 = signer_of(&cluster, "w2");
    let proof = ws.root.join("PROOF");
    let old = command_line_order(&proof);
    // The server refuses w2 an order's subject and w1's end subject outright.
    let denied = [
        (
            "catalyst.attempt.sonnet",
            w2.seal(Kind::Order, &old),
            "an order",
        ),
        (
            "catalyst.end.w1",
            w2.seal(Kind::End, &approving_end(&order, "w1")),
            "an end on w1's subject",
        ),
    ];
    for (subject, payload, what) in denied {
        let stored = publish(&js, subject, &format!("w2-{what}"), payload).await;
        assert!(!stored, "w2 published {what}");
    }
    // On its own subject, the daemon refuses it: w2 does not hold the lease, and is not w1.
    let own = [
        w2.seal(Kind::End, &approving_end(&order, "w2")),
        w2.seal(Kind::End, &approving_end(&order, "w1")),
    ];
    let n = own.len();
    for (i, payload) in own.into_iter().enumerate() {
        let msg_id = format!("w2-own-{i}");
        assert!(publish(&js, "catalyst.end.w2", &msg_id, payload).await);
    }
    let refused = eventually("w2's ends to be refused", async || {
        let refused = refused_ends(&daemon).await;
        (refused.len() >= n).then_some(refused)
    })
    .await;
    assert!(refused.iter().all(|e| e["from"] == "w2"), "{refused:?}");

    std::fs::write(ws.stub_file("go"), "").expect("release the review");
    all_closed(
        &daemon,
        std::slice::from_ref(&id),
        std::slice::from_ref(&w1),
    )
    .await;
    the_real_review_stood(&daemon, &ws, "cat-u").await;
    assert!(!proof.exists(), "w2's order ran");
    assert_eq!(
        orders_refused(&w1),
        0,
        "the server stopped w2's order first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_off_this_machine_without_tls_is_refused_before_connecting() {
    // No server is started, nor reached: the URL is refused when the config is read.
    let ws = Workspace::new("", "");
    let remote = shared_remote(&ws);
    let dir = tempfile::tempdir().expect("a folder");
    let key = |name: &str| {
        let file = dir.path().join(format!("{name}.nk"));
        let key = Signer::load_or_make(&file).expect("a key").0.public_key();
        (file, key)
    };
    let (_, w1) = key("w1");
    ws.append_config(&format!(
        "[cluster]\nnats = [\"nats://192.0.2.1:4222\"]\nremote = {:?}\nworkers = {{ w1 = {w1:?} }}\n",
        remote.display().to_string()
    ));
    let mut catalystd = ws.catalystd().spawn();
    let status = catalystd.wait_exit().await;
    assert!(!status.success(), "{status}");
    let log = catalystd.stderr();
    assert!(
        log.contains("`cluster.nats` `nats://192.0.2.1:4222` is not on this machine and not TLS")
            && log.contains("tls://")
            && log.contains("insecure = true"),
        "{log}"
    );

    let (_, daemon_key) = key("daemon");
    let (w1_file, _) = key("w1");
    let args: Vec<std::ffi::OsString> = vec![
        "--nats".into(),
        "nats://192.0.2.1:4222".into(),
        "--name".into(),
        "w1".into(),
        "--daemon-key".into(),
        daemon_key.into(),
        "--key-file".into(),
        w1_file.into(),
    ];
    let err = crate::worker_refuses(&args, &remote, &ws.root.join("w1"));
    assert!(
        err.contains("`nats://192.0.2.1:4222` is not on this machine and not TLS")
            && err.contains("--insecure"),
        "{err}"
    );
    assert!(!ws.root.join("w1").exists(), "refused before anything else");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refuses_a_profile_that_runs_unconfined_unless_allowed() {
    let ws = Workspace::new("", "");
    let remote = shared_remote(&ws);
    let profiles = ws.root.join("profiles.toml");
    std::fs::write(
        &profiles,
        "[profiles.loose]\ncommand = [\"sh\", \"-c\", \"{prompt}\"]\nsandbox = \"none\"\n",
    )
    .expect("a profiles file");
    let daemon_key = Signer::new().public_key();
    let args: Vec<std::ffi::OsString> = vec![
        "--nats".into(),
        "nats://127.0.0.1:9".into(),
        "--name".into(),
        "w1".into(),
        "--daemon-key".into(),
        daemon_key.into(),
        "--key-file".into(),
        ws.root.join("w1.nk").into(),
        "--profiles".into(),
        profiles.clone().into(),
    ];
    let err = crate::worker_refuses(&args, &remote, &ws.root.join("w1"));
    assert!(
        err.contains("profile `loose` has `sandbox = \"none\"`")
            && err.contains("--allow-unconfined"),
        "{err}"
    );
}

/// A worker the daemon does not list takes orders like any other (they are the daemon's,
/// signed), but its leases and ends are refused: the attempt it took must not wait for it
/// forever. Once the order has left the queue with no lease the daemon takes, for a lease's
/// time, the attempt is interrupted (not counted) and runs again on a listed worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_taken_by_a_worker_the_daemon_does_not_list_runs_again_on_one_it_does() {
    let Some(cluster) = NatsCluster::start(1).await else {
        return;
    };
    let ws = Workspace::new(&fix_loop(&["cat-x"]), "");
    let remote = shared_remote(&ws);
    ws.append_config(&cluster.config_for(&remote, 3));
    let daemon: TestDaemon = ws.start().await;
    // Its key is made, but `[cluster] workers` does not list it.
    let rogue = start_worker(&ws, &cluster, &remote, "w9", 1);
    let id = daemon.submit(bead_with_id("cat-x")).await;
    daemon
        .wait_for("w9's lease refused", |e| {
            e["type"] == "cluster.refused" && e["from"] == "w9" && e["what"] == "lease"
        })
        .await;
    daemon
        .wait_for("the attempt w9 took interrupted", |e| {
            e["type"] == "step.interrupted"
        })
        .await;
    drop(rogue);
    let w1 = start_worker(&ws, &cluster, &remote, "w1", 1);
    all_closed(
        &daemon,
        std::slice::from_ref(&id),
        std::slice::from_ref(&w1),
    )
    .await;
    let events = daemon.events().await;
    assert!(
        events
            .iter()
            .filter(|e| e["type"] == "step.result")
            .all(|e| e["counters"]["failed_attempts"] == 0),
        "the attempts w9 took are not counted"
    );
    assert!(
        events
            .iter()
            .filter(|e| e["type"] == "step.started")
            .all(|e| e["worker"] == "w1"),
        "only w1 is said to have run anything"
    );
}
