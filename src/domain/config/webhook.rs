//! `[[webhooks]]`: where the daemon posts a notice of what needs a person, and of merges
//! (docs/notifications.md).

use serde::{Deserialize, Serialize};

use crate::domain::event::NoticeKind;

/// How a webhook's body is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `{"kind", "seq", "bead", "text", "workspace", "event"}`: for scripts.
    #[default]
    Json,
    /// `{"text"}`: what Slack's incoming webhooks (and Mattermost's, Discord's `/slack`) take.
    Slack,
}

/// One webhook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Its name in the journal's `notify.*` records and the log; unique.
    pub name: String,
    /// Where notices are posted (`http://` or `https://`). It may hold a secret (Slack's do):
    /// the config file lies in the state folder, which no agent or gate can read.
    pub url: String,
    /// The body: `json` (the notice and its event) or `slack` (one line of text).
    #[serde(default)]
    pub format: Format,
    /// The notices it takes; all of them when absent.
    #[serde(default = "all_kinds")]
    pub notices: Vec<NoticeKind>,
    /// Tries per notice before it is given up (`notify.failed`), the wait doubling from
    /// `retry_secs`.
    #[serde(default = "default_tries")]
    pub tries: u32,
    #[serde(default = "default_retry_secs")]
    pub retry_secs: u64,
}

fn all_kinds() -> Vec<NoticeKind> {
    NoticeKind::ALL.to_vec()
}

fn default_tries() -> u32 {
    8
}

fn default_retry_secs() -> u64 {
    2
}

/// Checks the webhooks of a config.
pub fn check(hooks: &[Webhook]) -> Result<(), String> {
    let mut names = std::collections::BTreeSet::new();
    for hook in hooks {
        let name = &hook.name;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return Err(format!(
                "webhook name `{name}`: use letters, digits, `-` and `_`"
            ));
        }
        if !names.insert(name) {
            return Err(format!("two webhooks are named `{name}`"));
        }
        if !(hook.url.starts_with("http://") || hook.url.starts_with("https://")) {
            return Err(format!(
                "webhook `{name}`: `url` must start with `http://` or `https://`"
            ));
        }
        if !(1..=20).contains(&hook.tries) {
            return Err(format!("webhook `{name}`: `tries` must be 1 to 20"));
        }
        if !(1..=600).contains(&hook.retry_secs) {
            return Err(format!("webhook `{name}`: `retry_secs` must be 1 to 600"));
        }
    }
    Ok(())
}
