//! `[forge]`: the forge (GitHub, GitLab, Forgejo) a workspace's merges go to as pull requests,
//! and whose labelled issues become beads. Pure: the daemon reads the token file and talks to
//! the forge (`crate::daemon::forge`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Which forge's API the daemon speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForgeKind {
    Github,
    Gitlab,
    Forgejo,
}

impl ForgeKind {
    /// The API a forge's public instance answers on; GitLab and Forgejo are mostly
    /// self-hosted, so theirs is a guess a config usually overrides.
    pub fn default_api_url(self) -> &'static str {
        match self {
            Self::Github => "https://api.github.com",
            Self::Gitlab => "https://gitlab.com/api/v4",
            Self::Forgejo => "https://codeberg.org/api/v1",
        }
    }

    /// The host git pushes to on the public instance.
    fn default_git_host(self) -> &'static str {
        match self {
            Self::Github => "github.com",
            Self::Gitlab => "gitlab.com",
            Self::Forgejo => "codeberg.org",
        }
    }
}

/// The `[forge]` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeConfig {
    pub kind: ForgeKind,
    /// The API's base URL; the public instance's when absent ([`ForgeKind::default_api_url`]).
    #[serde(default)]
    pub api_url: Option<String>,
    /// `owner/name`.
    pub repository: String,
    /// A file holding the API token, readable only by the daemon's user: the token is a
    /// secret that must not sit in the config, which people share and paste.
    pub token_file: PathBuf,
    /// The git URL branches are pushed to; the public instance's HTTPS URL of `repository`
    /// when absent.
    #[serde(default)]
    pub remote: Option<String>,
    /// Open issues with this label become beads; none do when absent.
    #[serde(default)]
    pub issue_label: Option<String>,
    /// A bead's merge opens a pull request (`true`), or merges into the local target as
    /// without a forge (`false`: only issues are taken).
    #[serde(default = "yes")]
    pub pull_requests: bool,
    /// Seconds between two looks at the forge's pull requests and issues.
    #[serde(default = "default_poll_secs")]
    pub poll_secs: u64,
    /// The label a blocked bead's issue is given.
    #[serde(default = "default_blocked_label")]
    pub blocked_label: String,
}

fn yes() -> bool {
    true
}

fn default_poll_secs() -> u64 {
    30
}

fn default_blocked_label() -> String {
    "catalyst: blocked".to_owned()
}

/// The fewest seconds between two looks: GitHub allows 5,000 calls an hour per token.
pub const MIN_POLL_SECS: u64 = 1;
/// The most: an hour.
pub const MAX_POLL_SECS: u64 = 3600;

impl ForgeConfig {
    /// The API's base URL, without a trailing `/`.
    pub fn api_url(&self) -> &str {
        self.api_url
            .as_deref()
            .unwrap_or(self.kind.default_api_url())
            .trim_end_matches('/')
    }

    /// The git URL to push to.
    pub fn remote(&self) -> String {
        match &self.remote {
            Some(remote) => remote.clone(),
            None => format!(
                "https://{}/{}.git",
                self.kind.default_git_host(),
                self.repository
            ),
        }
    }

    /// The repository's owner and name.
    pub fn owner_name(&self) -> Option<(&str, &str)> {
        let (owner, name) = self.repository.split_once('/')?;
        Some((owner, name))
    }
}

/// Whether `part` may be a repository's owner or name: it goes into URL paths unescaped.
fn valid_part(part: &str) -> bool {
    !part.is_empty()
        && part != "."
        && part != ".."
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Checks `[forge]`.
pub fn check(forge: &ForgeConfig) -> Result<(), String> {
    let repo = &forge.repository;
    match forge.owner_name() {
        Some((owner, name)) if valid_part(owner) && valid_part(name) => {}
        _ => {
            return Err(format!(
                "forge `repository` `{repo}`: write it as `owner/name` (letters, digits, `-`, `_`, `.`)"
            ))
        }
    }
    if let Some(url) = &forge.api_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "forge `api_url` `{url}`: it must start with `http://` or `https://`"
            ));
        }
    }
    if forge.token_file.as_os_str().is_empty() {
        return Err("forge `token_file` is empty: name the file holding the API token".into());
    }
    if let Some(remote) = &forge.remote {
        if remote.trim().is_empty() {
            return Err("forge `remote` is empty: leave it out for the default".into());
        }
        if remote.starts_with('-') {
            return Err(format!("forge `remote` `{remote}` must not start with `-`"));
        }
        // Over http(s) anything before `@` is a password or a token (ssh's `git@` is a user).
        let web = remote
            .strip_prefix("https://")
            .or_else(|| remote.strip_prefix("http://"));
        if let Some(rest) = web {
            if rest
                .split('/')
                .next()
                .is_some_and(|host| host.contains('@'))
            {
                return Err(format!(
                    "forge `remote` `{remote}` holds credentials: the token comes from `token_file`"
                ));
            }
        }
    }
    if let Some(label) = &forge.issue_label {
        if label.trim().is_empty() {
            return Err("forge `issue_label` is empty: leave it out to take no issues".into());
        }
    }
    if forge.blocked_label.trim().is_empty() {
        return Err(
            "forge `blocked_label` is empty: name the label a blocked bead's issue gets".into(),
        );
    }
    if !(MIN_POLL_SECS..=MAX_POLL_SECS).contains(&forge.poll_secs) {
        return Err(format!(
            "forge `poll_secs` must be from {MIN_POLL_SECS} to {MAX_POLL_SECS}, not {}",
            forge.poll_secs
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ForgeConfig {
        toml::from_str(text).expect("a forge table")
    }

    const MINIMAL: &str = r#"
kind = "github"
repository = "acme/widgets"
token_file = "/etc/catalyst/github-token"
"#;

    #[test]
    fn defaults_follow_the_kind_and_repository() {
        let forge = parse(MINIMAL);
        assert_eq!(check(&forge), Ok(()));
        assert_eq!(forge.api_url(), "https://api.github.com");
        assert_eq!(forge.remote(), "https://github.com/acme/widgets.git");
        assert_eq!(forge.owner_name(), Some(("acme", "widgets")));
        assert_eq!(forge.issue_label, None);
        assert!(forge.pull_requests);
        assert_eq!(forge.poll_secs, 30);
        assert_eq!(forge.blocked_label, "catalyst: blocked");
    }

    #[test]
    fn explicit_values_win_and_a_trailing_slash_goes() {
        let forge = parse(
            r#"
kind = "forgejo"
api_url = "https://git.example.org/api/v1/"
repository = "team/app"
token_file = "token"
remote = "ssh://git@git.example.org/team/app.git"
issue_label = "catalyst"
"#,
        );
        assert_eq!(check(&forge), Ok(()));
        assert_eq!(forge.api_url(), "https://git.example.org/api/v1");
        assert_eq!(forge.remote(), "ssh://git@git.example.org/team/app.git");
        assert_eq!(forge.issue_label.as_deref(), Some("catalyst"));
    }

    #[test]
    fn unknown_keys_and_kinds_are_refused() {
        assert!(toml::from_str::<ForgeConfig>(&format!("{MINIMAL}tokn = 1\n")).is_err());
        assert!(toml::from_str::<ForgeConfig>(
            "kind = \"bitbucket\"\nrepository = \"a/b\"\ntoken_file = \"t\"\n"
        )
        .is_err());
        assert!(
            toml::from_str::<ForgeConfig>("kind = \"github\"\nrepository = \"a/b\"\n").is_err(),
            "token_file is required"
        );
    }

    #[test]
    fn check_names_what_is_wrong() {
        let base = parse(MINIMAL);
        let with = |f: &dyn Fn(&mut ForgeConfig)| {
            let mut forge = base.clone();
            f(&mut forge);
            check(&forge).expect_err("refused")
        };
        assert!(with(&|f| f.repository = "widgets".into()).contains("`owner/name`"));
        assert!(with(&|f| f.repository = "a/b/c".into()).contains("`repository`"));
        assert!(with(&|f| f.repository = "../b".into()).contains("`repository`"));
        assert!(with(&|f| f.api_url = Some("api.github.com".into())).contains("`api_url`"));
        assert!(with(&|f| f.token_file = PathBuf::new()).contains("`token_file`"));
        assert!(with(&|f| f.remote = Some(" ".into())).contains("`remote`"));
        assert!(with(&|f| f.remote = Some("--upload-pack=x".into())).contains("`-`"));
        assert!(
            with(&|f| f.remote = Some("https://me:secret@github.com/a/b.git".into()))
                .contains("credentials")
        );
        assert!(
            with(&|f| f.remote = Some("https://ghp_token@github.com/a/b.git".into()))
                .contains("credentials")
        );
        assert!(with(&|f| f.issue_label = Some(String::new())).contains("`issue_label`"));
        assert!(with(&|f| f.blocked_label = " ".into()).contains("`blocked_label`"));
        assert!(with(&|f| f.poll_secs = 0).contains("`poll_secs`"));
    }
}
