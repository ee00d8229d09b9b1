//! `[cluster]`: agents on other machines (docs/cluster.md). Off unless `nats` names servers:
//! then the daemon hands agent attempts to `catalyst worker` processes through NATS
//! JetStream, and the bead branches travel through `remote`, a git repository both sides
//! reach. Gates and merges stay on the daemon, which stays the single owner of the journal.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The shortest lease: workers renew theirs three times per lease, so shorter would be
/// mostly heartbeats.
pub const MIN_LEASE_SECS: u64 = 3;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// NATS servers (`nats://host:4222`); several of one cluster, so the daemon can reach it
    /// while one is down. Empty: every agent runs on this machine.
    pub nats: Vec<String>,
    /// A file holding the token the NATS servers ask for (their `authorization { token }`),
    /// read when the daemon connects: the secret stays out of this config and out of
    /// command lines. A user and password can go in the URLs instead.
    pub token_file: Option<PathBuf>,
    /// A NATS credentials file (`.creds`: a user JWT and its nkey seed), for servers of an
    /// operator set-up.
    pub credentials_file: Option<PathBuf>,
    /// A file holding the seed of the daemon's NATS nkey user (`SU…`), for servers whose
    /// `authorization { users }` list nkeys with their permissions.
    pub nkey_file: Option<PathBuf>,
    /// CA certificates (PEM) the NATS servers' TLS certificates are checked against, besides
    /// the system's.
    pub tls_ca_file: Option<PathBuf>,
    /// Lets the daemon speak plain `nats://` to servers off this machine: orders (prompts,
    /// context) and ends then cross the network readable by anyone on the path. Off: such a
    /// URL is refused; use `tls://`.
    pub insecure: bool,
    /// The seed of the daemon's own key (an nkey, `SU…`), which signs its orders and cancels;
    /// workers are given its public key. None: `.catalyst/cluster.nk`, made at the first start.
    pub key_file: Option<PathBuf>,
    /// The workers the daemon trusts, by name, with their public keys (`U…`; `catalyst
    /// cluster-key FILE` prints one): a lease, an end or a presence message is taken only
    /// from a worker listed here and signed with its key.
    pub workers: BTreeMap<String, String>,
    /// The git repository the daemon pushes each attempt's starting commit to and fetches its
    /// result from (a path, `ssh://` or `https://` URL; fetched and pushed with the `git`
    /// command, so its credentials apply). Required with `nats`.
    pub remote: Option<String>,
    /// The prefix of the subjects, streams and consumers this daemon uses, so daemons of
    /// several workspaces can share one NATS cluster.
    pub name: String,
    /// A worker that has not renewed its lease on an attempt for this long has lost it: the
    /// attempt is recorded as interrupted (not counted) and handed out again.
    pub lease_secs: u64,
    /// Copies of each JetStream stream; None: 3, or the number of `nats` servers if fewer.
    pub replicas: Option<usize>,
    /// Seconds a finished bead's refs stay in the shared remote after its worktree goes
    /// here; a bead that starts from one of its commits meanwhile (the target's new tip)
    /// needs no push.
    pub keep_refs_secs: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            nats: Vec::new(),
            token_file: None,
            credentials_file: None,
            nkey_file: None,
            tls_ca_file: None,
            insecure: false,
            key_file: None,
            workers: BTreeMap::new(),
            remote: None,
            name: "catalyst".into(),
            lease_secs: 30,
            replicas: None,
            keep_refs_secs: 300,
        }
    }
}

impl ClusterConfig {
    /// Whether agents run on other machines.
    pub fn is_on(&self) -> bool {
        !self.nats.is_empty()
    }

    /// The stream replicas to ask for.
    pub fn replicas(&self) -> usize {
        self.replicas.unwrap_or_else(|| self.nats.len().clamp(1, 3))
    }

    /// Refuses what could not work, by key.
    pub fn check(&self) -> Result<(), ClusterConfigError> {
        if !subject_token(&self.name) {
            return Err(ClusterConfigError::Name(self.name.clone()));
        }
        if self.lease_secs < MIN_LEASE_SECS || self.lease_secs > 24 * 60 * 60 {
            return Err(ClusterConfigError::LeaseSecs(self.lease_secs));
        }
        if self.keep_refs_secs > 7 * 24 * 60 * 60 {
            return Err(ClusterConfigError::KeepRefsSecs(self.keep_refs_secs));
        }
        if self.replicas.is_some_and(|r| !(1..=5).contains(&r)) {
            return Err(ClusterConfigError::Replicas);
        }
        if !self.is_on() {
            return Ok(());
        }
        check_transport(&self.nats, self.insecure)?;
        let secrets = [&self.token_file, &self.credentials_file, &self.nkey_file];
        if secrets.iter().filter(|s| s.is_some()).count() > 1 {
            return Err(ClusterConfigError::TwoLogins);
        }
        if self.workers.is_empty() {
            return Err(ClusterConfigError::NoWorkers);
        }
        for (name, key) in &self.workers {
            if !subject_token(name) {
                return Err(ClusterConfigError::WorkerName(name.clone()));
            }
            if !user_key(key) {
                return Err(ClusterConfigError::WorkerKey {
                    name: name.clone(),
                    key: key.clone(),
                });
            }
        }
        match self.remote.as_deref().map(str::trim) {
            None | Some("") => Err(ClusterConfigError::NoRemote),
            Some(_) => Ok(()),
        }
    }
}

/// Why a `[cluster]` table is refused: each names its key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClusterConfigError {
    #[error("`cluster.name` `{0}` must be letters, digits, `-` or `_`")]
    Name(String),
    #[error("`cluster.lease_secs` must be from {MIN_LEASE_SECS} to 86400, not {0}")]
    LeaseSecs(u64),
    #[error("`cluster.keep_refs_secs` must be from 0 to 604800, not {0}")]
    KeepRefsSecs(u64),
    #[error("`cluster.replicas` must be from 1 to 5")]
    Replicas,
    #[error("`cluster.nats` {0}")]
    Transport(#[from] TransportError),
    #[error(
        "`cluster.token_file`, `cluster.credentials_file` and `cluster.nkey_file` \
         are ways to log in to NATS: set one"
    )]
    TwoLogins,
    #[error(
        "`cluster.workers` must list the workers the daemon trusts, \
         `{{ name = \"U…\" }}` with each one's public key (`catalyst cluster-key FILE`)"
    )]
    NoWorkers,
    #[error("`cluster.workers` `{0}`: a worker's name must be letters, digits, `-` or `_`")]
    WorkerName(String),
    #[error("`cluster.workers.{name}` `{key}` is not an nkey user's public key (`U` and 55 more letters and digits)")]
    WorkerKey { name: String, key: String },
    #[error(
        "`cluster.remote` must name the git repository the daemon and its workers share \
         (a path, ssh:// or https:// URL) when `cluster.nats` is set"
    )]
    NoRemote,
}

/// A NATS server URL that is refused (see [`check_transport`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    #[error("`{0}` is not a NATS server URL (`tls://host:4222`)")]
    NotNats(String),
    #[error(
        "`{0}` is not on this machine and not TLS: use `tls://` (orders carry \
         prompts and code, ends carry verdicts), or set `insecure = true` \
         (`--insecure` for a worker) to send them in clear"
    )]
    InClear(String),
}

/// Checks NATS server URLs: each one a NATS URL, and TLS (`tls://`, `wss://`) for a server
/// off this machine unless `insecure`. Ok(true): every server is to be spoken to with TLS
/// (the connection then requires it, servers it learns of included).
pub fn check_transport(urls: &[String], insecure: bool) -> Result<bool, TransportError> {
    let mut tls = Vec::new();
    for url in urls {
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        if !matches!(scheme, "nats" | "tls" | "ws" | "wss") || rest.is_empty() {
            return Err(TransportError::NotNats(url.clone()));
        }
        let secure = matches!(scheme, "tls" | "wss");
        if !secure && !insecure && !on_loopback(rest) {
            return Err(TransportError::InClear(url.clone()));
        }
        tls.push(secure);
    }
    Ok(!tls.is_empty() && tls.iter().all(|t| *t))
}

/// Whether the host of a URL's `rest` (after `scheme://`) is this machine: `localhost`, an
/// address of `127.0.0.0/8` or `::1`.
fn on_loopback(rest: &str) -> bool {
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map_or(v6, |(h, _)| h),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    // `core`'s address type: parsing text, no socket.
    host.parse::<core::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// Whether `key` reads as an nkey user's public key: `U`, then 55 base32 letters and digits
/// (the checksum is checked where the key is used).
pub fn user_key(key: &str) -> bool {
    key.len() == 56
        && key.starts_with('U')
        && key
            .bytes()
            .all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b))
}

/// Whether `text` may stand as one token of a NATS subject and in a stream's name.
pub fn subject_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4";

    fn on(urls: &[&str], remote: Option<&str>) -> ClusterConfig {
        ClusterConfig {
            nats: urls.iter().map(|u| u.to_string()).collect(),
            remote: remote.map(str::to_owned),
            workers: [("w1".to_owned(), KEY.to_owned())].into(),
            ..ClusterConfig::default()
        }
    }

    #[test]
    fn a_server_off_this_machine_takes_tls_unless_insecure() {
        let cases: [(&[&str], bool, Result<bool, &str>); 9] = [
            (&["nats://127.0.0.1:4222"], false, Ok(false)),
            (
                &["nats://localhost:4222", "nats://[::1]:4222"],
                false,
                Ok(false),
            ),
            (&["nats://user:pw@127.0.0.2:4222"], false, Ok(false)),
            (&["tls://10.0.0.1:4222", "tls://n2:4222"], false, Ok(true)),
            (
                &["nats://10.0.0.1:4222"],
                false,
                Err("not on this machine and not TLS"),
            ),
            (&["nats://127.0.0.1@10.0.0.1:4222"], false, Err("not TLS")),
            (&["ws://nats.example.com"], false, Err("not TLS")),
            (&["nats://10.0.0.1:4222"], true, Ok(false)),
            (&["10.0.0.1:4222"], true, Err("not a NATS server URL")),
        ];
        for (urls, insecure, want) in cases {
            let urls: Vec<String> = urls.iter().map(|u| u.to_string()).collect();
            match (check_transport(&urls, insecure), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{urls:?}"),
                (Err(got), Err(want)) => {
                    assert!(got.to_string().contains(want), "{urls:?}: {got}")
                }
                (got, want) => panic!("{urls:?}: {got:?}, not {want:?}"),
            }
        }
    }

    #[test]
    fn the_workers_trusted_are_listed_by_name_with_their_keys() {
        let none = ClusterConfig {
            workers: BTreeMap::new(),
            ..on(&["nats://127.0.0.1:4222"], Some("/r"))
        };
        assert_eq!(none.check(), Err(ClusterConfigError::NoWorkers));
        assert!(none
            .check()
            .unwrap_err()
            .to_string()
            .contains("`cluster.workers`"));
        let bad_key = ClusterConfig {
            workers: [("w1".to_owned(), "SUAAAA".to_owned())].into(),
            ..on(&["nats://127.0.0.1:4222"], Some("/r"))
        };
        assert!(bad_key
            .check()
            .unwrap_err()
            .to_string()
            .contains("`cluster.workers.w1`"));
        let bad_name = ClusterConfig {
            workers: [("w.1".to_owned(), KEY.to_owned())].into(),
            ..on(&["nats://127.0.0.1:4222"], Some("/r"))
        };
        assert!(bad_name.check().unwrap_err().to_string().contains("`w.1`"));
        let two_logins = ClusterConfig {
            token_file: Some("/t".into()),
            nkey_file: Some("/n".into()),
            ..on(&["nats://127.0.0.1:4222"], Some("/r"))
        };
        assert!(two_logins
            .check()
            .unwrap_err()
            .to_string()
            .contains("set one"));
    }

    #[test]
    fn off_by_default_and_on_with_servers_and_a_remote() {
        let off = ClusterConfig::default();
        assert!(!off.is_on());
        assert_eq!(off.check(), Ok(()));
        let three = on(
            &["tls://a:4222", "tls://b:4222", "tls://c:4222"],
            Some("/srv/repo.git"),
        );
        assert_eq!(three.check(), Ok(()));
        assert_eq!(three.replicas(), 3);
        assert_eq!(on(&["tls://a:4222"], Some("x")).replicas(), 1);
    }

    #[test]
    fn what_cannot_work_is_refused_by_key() {
        let no_remote = on(&["tls://a:4222"], None).check().unwrap_err();
        assert_eq!(no_remote, ClusterConfigError::NoRemote);
        assert!(
            no_remote.to_string().contains("`cluster.remote`"),
            "{no_remote}"
        );
        let bad_url = on(&["a:4222"], Some("/r")).check().unwrap_err();
        assert!(
            bad_url.to_string().contains("`cluster.nats` `a:4222`"),
            "{bad_url}"
        );
        let name = ClusterConfig {
            name: "a.b".into(),
            ..ClusterConfig::default()
        };
        assert!(name
            .check()
            .unwrap_err()
            .to_string()
            .contains("`cluster.name`"));
        let lease = ClusterConfig {
            lease_secs: 1,
            ..ClusterConfig::default()
        };
        assert!(lease
            .check()
            .unwrap_err()
            .to_string()
            .contains("`cluster.lease_secs`"));
        let keep = ClusterConfig {
            keep_refs_secs: 8 * 24 * 60 * 60,
            ..ClusterConfig::default()
        };
        assert!(keep
            .check()
            .unwrap_err()
            .to_string()
            .contains("`cluster.keep_refs_secs`"));
    }
}
