//! How the daemon and its workers reach NATS: the servers' URLs, one way of logging in (a
//! token, a credentials file or an nkey, each read from a file so no secret is on a command
//! line or in the config), and TLS, required for any server off this machine unless the
//! operator says `insecure` (docs/cluster.md, "Securing a cluster").

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::trust::KeyError;
use crate::domain::config::cluster::{check_transport, ClusterConfig, TransportError};

/// How long a JetStream call may take before it is tried again (a leader election takes a
/// few seconds).
const TRY_FOR: Duration = Duration::from_secs(30);

/// Why the cluster cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot reach NATS at {urls}: {detail}")]
    Connect { urls: String, detail: String },
    #[error("cannot read the NATS {what} file `{path}`: {detail}")]
    Secret {
        what: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("NATS server URL {0}")]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("cannot set up JetStream's `{what}`: {detail}")]
    Setup { what: String, detail: String },
}

/// The NATS servers and how to log in to them.
#[derive(Clone, Debug, Default)]
pub struct Link {
    pub urls: Vec<String>,
    /// A file holding a token (its first line).
    pub token_file: Option<PathBuf>,
    /// A NATS credentials file (a user JWT and its seed).
    pub credentials_file: Option<PathBuf>,
    /// A file holding an nkey user's seed (its first line).
    pub nkey_file: Option<PathBuf>,
    /// CA certificates (PEM) for the servers' TLS certificates, besides the system's.
    pub tls_ca_file: Option<PathBuf>,
    /// Plain `nats://` to servers off this machine is allowed.
    pub insecure: bool,
}

impl Link {
    /// The daemon's link, from its `[cluster]`.
    pub fn of(config: &ClusterConfig) -> Link {
        Link {
            urls: config.nats.clone(),
            token_file: config.token_file.clone(),
            credentials_file: config.credentials_file.clone(),
            nkey_file: config.nkey_file.clone(),
            tls_ca_file: config.tls_ca_file.clone(),
            insecure: config.insecure,
        }
    }

    /// Refuses a server off this machine without TLS unless `insecure`, which is logged:
    /// called once at start, before anything else is done. Ok(true): TLS for every server.
    pub fn check(&self) -> Result<bool, ClusterError> {
        let tls = self.tls()?;
        if self.insecure {
            if let Err(clear) = check_transport(&self.urls, false) {
                tracing::warn!("`insecure`: orders and ends cross the network in clear ({clear})");
            }
        }
        Ok(tls)
    }

    /// Whether TLS is required of every server, with [`Link::check`]'s refusal.
    fn tls(&self) -> Result<bool, ClusterError> {
        Ok(check_transport(&self.urls, self.insecure)?)
    }

    /// A client of the servers (any one that answers within 5 s; it reconnects to the others
    /// when that one goes), logged in as this link says.
    pub async fn connect(&self) -> Result<async_nats::Client, ClusterError> {
        let tls = self.tls()?;
        let mut options =
            async_nats::ConnectOptions::new().connection_timeout(Duration::from_secs(5));
        if tls {
            // Servers learnt from the cluster's gossip too.
            options = options.require_tls(true);
        }
        if let Some(ca) = &self.tls_ca_file {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some(path) = &self.token_file {
            options = options.token(first_line(path, "token")?);
        }
        if let Some(path) = &self.nkey_file {
            options = options.nkey(first_line(path, "nkey seed")?);
        }
        if let Some(path) = &self.credentials_file {
            options = options
                .credentials_file(path)
                .await
                .map_err(|e| ClusterError::Secret {
                    what: "credentials",
                    path: path.clone(),
                    detail: e.to_string(),
                })?;
        }
        options
            .connect(self.urls.clone())
            .await
            .map_err(|e| ClusterError::Connect {
                urls: self.urls.join(", "),
                detail: e.to_string(),
            })
    }
}

/// The first line of the secret `what` in `path`, without surrounding white space.
fn first_line(path: &Path, what: &'static str) -> Result<String, ClusterError> {
    let failed = |detail: String| ClusterError::Secret {
        what,
        path: path.to_path_buf(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    match text.lines().next().map(str::trim) {
        Some(line) if !line.is_empty() => Ok(line.to_owned()),
        _ => Err(failed("it is empty".into())),
    }
}

/// Publishes `payload` to `subject` in JetStream under the message id `id` (a retried publish
/// is stored once), with [`retry`]; `what` names it in the error.
pub async fn publish_once(
    js: &async_nats::jetstream::Context,
    what: &str,
    subject: String,
    id: &str,
    payload: Vec<u8>,
) -> Result<async_nats::jetstream::publish::PublishAck, ClusterError> {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", id);
    let payload = bytes::Bytes::from(payload);
    retry(what, || async {
        js.publish_with_headers(subject.clone(), headers.clone(), payload.clone())
            .await?
            .await
            .map_err(async_nats::Error::from)
    })
    .await
}

/// Tries `call` until it succeeds or [`TRY_FOR`] has passed (JetStream answers nothing while
/// its cluster elects a leader).
pub async fn retry<T, E: std::fmt::Display, F: Future<Output = Result<T, E>>>(
    what: &str,
    mut call: impl FnMut() -> F,
) -> Result<T, ClusterError> {
    let deadline = Instant::now() + TRY_FOR;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(e) if Instant::now() >= deadline => {
                return Err(ClusterError::Setup {
                    what: what.to_owned(),
                    detail: e.to_string(),
                })
            }
            Err(e) => {
                tracing::debug!(what, error = %e, "JetStream is not ready; trying again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}
