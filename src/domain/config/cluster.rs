//! `[cluster]`: agents on other machines (docs/cluster.md). Off unless `nats` names servers:
//! then the daemon hands agent attempts to `catalyst worker` processes through NATS
//! JetStream, and the bead branches travel through `remote`, a git repository both sides
//! reach. Gates and merges stay on the daemon, which stays the single owner of the journal.

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
    pub fn check(&self) -> Result<(), String> {
        if !subject_token(&self.name) {
            return Err(format!(
                "`cluster.name` `{}` must be letters, digits, `-` or `_`",
                self.name
            ));
        }
        if self.lease_secs < MIN_LEASE_SECS || self.lease_secs > 24 * 60 * 60 {
            return Err(format!(
                "`cluster.lease_secs` must be from {MIN_LEASE_SECS} to 86400, not {}",
                self.lease_secs
            ));
        }
        if self.keep_refs_secs > 7 * 24 * 60 * 60 {
            return Err(format!(
                "`cluster.keep_refs_secs` must be from 0 to 604800, not {}",
                self.keep_refs_secs
            ));
        }
        if self.replicas.is_some_and(|r| !(1..=5).contains(&r)) {
            return Err("`cluster.replicas` must be from 1 to 5".into());
        }
        if !self.is_on() {
            return Ok(());
        }
        for url in &self.nats {
            let scheme = url.split_once("://").map(|(s, _)| s);
            if !matches!(scheme, Some("nats" | "tls" | "ws" | "wss")) || url.ends_with("://") {
                return Err(format!(
                    "`cluster.nats` `{url}` is not a NATS server URL (`nats://host:4222`)"
                ));
            }
        }
        match self.remote.as_deref().map(str::trim) {
            None | Some("") => Err(
                "`cluster.remote` must name the git repository the daemon and its workers share \
                 (a path, ssh:// or https:// URL) when `cluster.nats` is set"
                    .into(),
            ),
            Some(_) => Ok(()),
        }
    }
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

    fn on(urls: &[&str], remote: Option<&str>) -> ClusterConfig {
        ClusterConfig {
            nats: urls.iter().map(|u| u.to_string()).collect(),
            remote: remote.map(str::to_owned),
            ..ClusterConfig::default()
        }
    }

    #[test]
    fn off_by_default_and_on_with_servers_and_a_remote() {
        let off = ClusterConfig::default();
        assert!(!off.is_on());
        assert_eq!(off.check(), Ok(()));
        let three = on(
            &["nats://a:4222", "nats://b:4222", "tls://c:4222"],
            Some("/srv/repo.git"),
        );
        assert_eq!(three.check(), Ok(()));
        assert_eq!(three.replicas(), 3);
        assert_eq!(on(&["nats://a:4222"], Some("x")).replicas(), 1);
    }

    #[test]
    fn what_cannot_work_is_refused_by_key() {
        let no_remote = on(&["nats://a:4222"], None).check().unwrap_err();
        assert!(no_remote.contains("`cluster.remote`"), "{no_remote}");
        let bad_url = on(&["a:4222"], Some("/r")).check().unwrap_err();
        assert!(bad_url.contains("`cluster.nats` `a:4222`"), "{bad_url}");
        let name = ClusterConfig {
            name: "a.b".into(),
            ..ClusterConfig::default()
        };
        assert!(name.check().unwrap_err().contains("`cluster.name`"));
        let lease = ClusterConfig {
            lease_secs: 1,
            ..ClusterConfig::default()
        };
        assert!(lease.check().unwrap_err().contains("`cluster.lease_secs`"));
        let keep = ClusterConfig {
            keep_refs_secs: 8 * 24 * 60 * 60,
            ..ClusterConfig::default()
        };
        assert!(keep
            .check()
            .unwrap_err()
            .contains("`cluster.keep_refs_secs`"));
    }
}
