//! The web dashboard `catalystd` serves over HTTP when `[web] listen` is set or `catalystd
//! --web ADDR` is given (docs/web.md): pages rendered on the server, actions that go through
//! the same engine requests as the control socket, and the journal's events as Server-Sent
//! Events (`/events`). Every request needs the token of [`auth`]; the address must be
//! loopback unless `[web] allow_remote = true`.

pub mod auth;
mod bead;
mod diff;
mod events;
mod graph;
mod markdown;
mod pages;
mod runs;

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::daemon::engine::EngineHandle;
use crate::daemon::Paths;

use auth::Secrets;

/// Why the web dashboard cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("web `listen` `{0}` is not an address and port (e.g. `127.0.0.1:7400`)")]
    BadAddress(String),
    #[error(
        "web `listen` `{0}` is not a loopback address; set `[web] allow_remote = true` to serve \
         other machines (every page still needs the token; the traffic is plain HTTP)"
    )]
    Remote(String),
    #[error("cannot serve the web dashboard on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot write the web token `{}`: {source}", path.display())]
    Token {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The address `listen` names, refused unless it is loopback or `allow_remote`.
pub fn address(listen: &str, allow_remote: bool) -> Result<SocketAddr, WebError> {
    let addr: SocketAddr = listen
        .trim()
        .parse()
        .map_err(|_| WebError::BadAddress(listen.to_owned()))?;
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(WebError::Remote(listen.to_owned()));
    }
    Ok(addr)
}

/// The dashboard's listening socket and secrets, made before the daemon serves anything.
#[derive(Debug)]
pub struct Web {
    listener: TcpListener,
    secrets: Secrets,
    addr: SocketAddr,
    hosts: auth::Hosts,
}

impl Web {
    /// Binds `[web] listen` (or `listen`, given on the command line) and writes a new token to
    /// `.catalyst/web.token`.
    pub async fn bind(
        paths: &Paths,
        listen: &str,
        config: &crate::domain::config::web::WebConfig,
    ) -> Result<Web, WebError> {
        let wanted = address(listen, config.allow_remote)?;
        let listener = TcpListener::bind(wanted)
            .await
            .map_err(|source| WebError::Bind {
                addr: wanted,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| WebError::Bind {
            addr: wanted,
            source,
        })?;
        let path = paths.web_token();
        let secrets = Secrets::create(&path).map_err(|source| WebError::Token { path, source })?;
        Ok(Web {
            listener,
            secrets,
            addr,
            hosts: auth::Hosts::new(addr, &config.hosts),
        })
    }

    /// Where it listens (the port the system chose, for `:0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The link that opens the dashboard (it carries the token).
    pub fn link(&self) -> String {
        format!("http://{}/?token={}", self.addr, self.secrets.token())
    }
}

/// What every request handler shares.
#[derive(Clone)]
struct Shared {
    engine: EngineHandle,
    paths: Paths,
    secrets: Secrets,
    shutdown: CancellationToken,
    pages: std::sync::Arc<pages::Pages>,
}

/// Serves the dashboard until `shutdown` fires.
pub async fn serve(web: Web, engine: EngineHandle, paths: Paths, shutdown: CancellationToken) {
    let shared = Shared {
        engine,
        paths,
        secrets: web.secrets.clone(),
        shutdown: shutdown.clone(),
        pages: std::sync::Arc::new(pages::Pages::new()),
    };
    let app = Router::new()
        .route("/", get(pages::board))
        .route("/beads/{id}", get(bead::bead))
        .route("/beads/{id}/{action}", post(bead::bead_action))
        .route("/beads/{id}/output", get(runs::output))
        .route("/beads/{id}/runs/{step}/{attempt}/{*file}", get(runs::file))
        .route("/actions/submit", post(pages::submit))
        .route("/events", get(events::events))
        .route("/static/{file}", get(pages::asset))
        .route("/actions/pause", post(pages::pause))
        .route("/actions/resume", post(pages::resume))
        .layer(axum::middleware::from_fn_with_state(
            web.secrets.clone(),
            auth::require,
        ))
        .layer(axum::middleware::from_fn_with_state(
            web.hosts.clone(),
            auth::check_host,
        ))
        .with_state(shared);
    let stop = shutdown.clone();
    let served = axum::serve(web.listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    if let Err(e) = served {
        tracing::error!(error = %e, "the web dashboard stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_unless_allowed() {
        assert!(address("127.0.0.1:7400", false).is_ok());
        assert!(address("[::1]:7400", false).is_ok());
        let remote = address("0.0.0.0:7400", false).expect_err("refused");
        assert!(remote.to_string().contains("allow_remote"), "{remote}");
        assert!(address("0.0.0.0:7400", true).is_ok());
        let bad = address("localhost", false).expect_err("no port");
        assert!(bad.to_string().contains("address and port"), "{bad}");
    }
}
