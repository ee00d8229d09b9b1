//! The forge's API token, read from `[forge]`'s `token_file`.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::ForgeError;

/// An API token. Its `Debug` hides it, so it cannot reach a log or an error by accident.
#[derive(Clone)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// Reads the token from `path`: its first line, trimmed. The file must be readable by its
    /// owner only, as ssh asks of a private key: a token others can read is a leaked token,
    /// and refusing it makes that visible before it is used.
    pub fn read(path: &Path) -> Result<Self, ForgeError> {
        let fail = |reason: String| ForgeError::Token {
            path: path.display().to_string(),
            reason,
        };
        let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
        if !meta.is_file() {
            return Err(fail("not a file".into()));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(fail(format!(
                "readable by others than its owner (mode {mode:03o}): `chmod 600` it"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let token = text.lines().next().unwrap_or("").trim();
        if token.is_empty() {
            return Err(fail("empty".into()));
        }
        Ok(Self(token.to_owned()))
    }

    /// A token given directly (tests, and a daemon that got it elsewhere).
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The secret itself, for the one header and the one environment variable it goes into.
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }

    /// `text` with the token replaced, for messages built from what a server or git said.
    pub(crate) fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.0, "***")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(mode: u32, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("token");
        std::fs::write(&path, text).expect("write the token");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        (dir, path)
    }

    #[test]
    fn an_owner_only_file_gives_its_first_line() {
        let (_dir, path) = write(0o600, "ghp_secret\n");
        let token = Token::read(&path).expect("a token");
        assert_eq!(token.secret(), "ghp_secret");
        assert_eq!(format!("{token:?}"), "Token(..)");
        assert_eq!(token.scrub("x ghp_secret y"), "x *** y");
    }

    #[test]
    fn a_file_others_can_read_is_refused_without_the_token() {
        for mode in [0o644, 0o640, 0o604] {
            let (_dir, path) = write(mode, "ghp_secret\n");
            let err = Token::read(&path).expect_err("refused").to_string();
            assert!(err.contains("readable by others"), "{err}");
            assert!(err.contains("chmod 600"), "{err}");
            assert!(!err.contains("ghp_secret"), "{err}");
        }
    }

    #[test]
    fn an_empty_or_missing_file_is_refused() {
        let (dir, path) = write(0o600, "\n");
        assert!(Token::read(&path)
            .expect_err("empty")
            .to_string()
            .contains("empty"));
        assert!(Token::read(&dir.path().join("none")).is_err());
    }
}
