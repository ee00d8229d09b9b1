//! `[merge]`: how finished beads land on the target branch, and whom the daemon's commits
//! name.

use serde::{Deserialize, Serialize};

use crate::domain::model::MergeStrategy;

/// The committer of the daemon's commits unless `[merge] committer` says otherwise.
pub const DEFAULT_COMMITTER: &str = "catalyst <catalyst@localhost>";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MergeConfig {
    /// How a bead lands on the target: `merge` (a merge commit whose first parent is the
    /// target), `squash` (one commit) or `rebase` (the bead's commits replayed, then a
    /// fast-forward). A formula's merge step may say `merge_strategy` for its beads.
    pub strategy: MergeStrategy,
    /// The author of the daemon's commits, as `Name <email>`. Empty: the repository's
    /// `user.name` and `user.email` (git's own config lookup), else the committer.
    pub author: String,
    /// The committer of the daemon's commits, as `Name <email>`.
    pub committer: String,
}

impl Default for MergeConfig {
    fn default() -> Self {
        MergeConfig {
            strategy: MergeStrategy::default(),
            author: String::new(),
            committer: DEFAULT_COMMITTER.to_owned(),
        }
    }
}

/// A name and an email, as git writes them in a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

/// A config value that does not read as `Name <email>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{key}` must read `Name <email>`, not `{text}`")]
pub struct BadIdentity {
    /// The config key it was given for.
    pub key: String,
    pub text: String,
}

impl Identity {
    /// Reads `Name <email>`; `key` names the config key in the error.
    pub fn parse(text: &str, key: &str) -> Result<Identity, BadIdentity> {
        let bad = || BadIdentity {
            key: key.to_owned(),
            text: text.to_owned(),
        };
        let (name, rest) = text.trim().split_once('<').ok_or_else(bad)?;
        let email = rest.strip_suffix('>').ok_or_else(bad)?.trim();
        let name = name.trim();
        let unsafe_char = |s: &str| s.chars().any(|c| c.is_control() || "<>".contains(c));
        if name.is_empty() || email.is_empty() || unsafe_char(name) || unsafe_char(email) {
            return Err(bad());
        }
        Ok(Identity {
            name: name.to_owned(),
            email: email.to_owned(),
        })
    }
}

impl MergeConfig {
    /// The configured author, if one is set (else the repository's own user).
    pub fn author(&self) -> Result<Option<Identity>, BadIdentity> {
        match self.author.trim() {
            "" => Ok(None),
            text => Identity::parse(text, "merge.author").map(Some),
        }
    }

    pub fn committer(&self) -> Result<Identity, BadIdentity> {
        Identity::parse(&self.committer, "merge.committer")
    }

    pub(super) fn check(&self) -> Result<(), BadIdentity> {
        self.author()?;
        self.committer()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_read_as_git_writes_them() {
        let who = Identity::parse(" Ada Lovelace <ada@example.com> ", "k").expect("valid");
        assert_eq!(who.name, "Ada Lovelace");
        assert_eq!(who.email, "ada@example.com");
        for bad in [
            "ada@example.com",
            "Ada <>",
            "<ada@example.com>",
            "Ada <a>b>",
            "Ada <a",
        ] {
            let err = Identity::parse(bad, "merge.author").expect_err(bad);
            assert_eq!(err.key, "merge.author");
            assert!(err.to_string().contains("`merge.author`"), "{err}");
        }
    }

    #[test]
    fn the_default_names_the_repository_user_as_author_and_catalyst_as_committer() {
        let merge = MergeConfig::default();
        assert_eq!(merge.author().expect("valid"), None);
        assert_eq!(merge.committer().expect("valid").name, "catalyst");
        assert_eq!(merge.strategy, MergeStrategy::Merge);
    }
}
