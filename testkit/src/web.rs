//! The web dashboard for tests and benchmarks: a free loopback port, and `catalystd --web` on
//! a new workspace with the dashboard's address and token.

use crate::{TestDaemon, Workspace};

/// A loopback port nothing listens on (the system's choice, released for the daemon).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `catalystd --web` on a new workspace whose agents follow `scenario`: the daemon, the
/// dashboard's base URL and its token.
pub async fn dashboard(scenario: &str) -> (TestDaemon, String, String) {
    dashboard_on(Workspace::new(scenario, "")).await
}

/// `catalystd --web` on `ws`: the daemon, the dashboard's base URL and its token.
pub async fn dashboard_on(ws: Workspace) -> (TestDaemon, String, String) {
    let port = free_port();
    let daemon = ws
        .catalystd()
        .args(&["--web", &format!("127.0.0.1:{port}")])
        .spawn();
    daemon.call(catalyst::protocol::Method::Status).await;
    let token = token(&daemon).await;
    (daemon, format!("http://127.0.0.1:{port}"), token)
}

/// The dashboard's token, once the daemon has written it whole.
pub async fn token(daemon: &TestDaemon) -> String {
    let file = daemon.paths.web_token();
    crate::poll::eventually("the web token", async || {
        let text = std::fs::read_to_string(&file).ok()?;
        text.ends_with('\n').then(|| text.trim().to_owned())
    })
    .await
}
