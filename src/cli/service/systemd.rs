//! systemd units: a user unit per workspace, or the system template `catalystd@.service`
//! whose instance name is the workspace path (`systemd-escape --path`).

use std::path::{Path, PathBuf};

use super::{shell_quote, Rendered, ServiceError, Spec};

const USER_UNIT: &str = include_str!("../../../contrib/systemd/catalystd.service");
const SYSTEM_TEMPLATE: &str = include_str!("../../../contrib/systemd/catalystd@.service");

pub(super) fn render(spec: &Spec) -> Result<Rendered, ServiceError> {
    for (what, path) in [
        ("workspace", &spec.workspace),
        ("catalystd", &spec.catalystd),
    ] {
        if path.to_str().is_none() {
            return Err(ServiceError::Input(format!(
                "the {what} path `{}` is not UTF-8, which unit files cannot hold",
                path.display()
            )));
        }
    }
    let workspace = spec.workspace.to_string_lossy();
    let path_env = quote_word(&format!("PATH={}", spec.path_env));
    let catalystd = quote_word(&spec.catalystd.to_string_lossy());
    if spec.user {
        let name = format!("catalystd-{}.service", spec.slug());
        let dir = spec
            .unit_dir
            .clone()
            .unwrap_or_else(|| user_unit_dir(&spec.home));
        let text = USER_UNIT
            .replace(
                "ExecStart=@CATALYSTD@ --workspace @WORKSPACE@",
                &format!(
                    "ExecStart={catalystd} --workspace {}",
                    quote_word(&workspace)
                ),
            )
            .replace(
                "WorkingDirectory=@WORKSPACE@",
                &format!("WorkingDirectory={}", escape_specifiers(&workspace)),
            )
            .replace("Environment=@PATH@", &format!("Environment={path_env}"))
            .replace(
                "EnvironmentFile=-@WORKSPACE@/",
                &format!("EnvironmentFile=-{}/", escape_specifiers(&workspace)),
            )
            .replace(
                "Description=catalyst daemon for @WORKSPACE@",
                &format!(
                    "Description=catalyst daemon for {}",
                    escape_specifiers(&workspace)
                ),
            );
        let text = written_by(&text);
        Ok(Rendered {
            file: dir.join(&name),
            text,
            enable: format!(
                "systemctl --user daemon-reload && systemctl --user enable --now {name}"
            ),
            disable: format!("systemctl --user disable --now {name}"),
            enabled_links: vec![dir.join("default.target.wants").join(&name)],
        })
    } else {
        if spec.run_as.chars().any(|c| c.is_whitespace() || c == '%') || spec.run_as.is_empty() {
            return Err(ServiceError::Input(format!(
                "`{}` is not a user name",
                spec.run_as
            )));
        }
        let dir = spec
            .unit_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("/etc/systemd/system"));
        let instance = format!("catalystd@{}.service", escape_path(&workspace));
        let text = SYSTEM_TEMPLATE
            .replace("ExecStart=@CATALYSTD@", &format!("ExecStart={catalystd}"))
            .replace("User=@USER@", &format!("User={}", spec.run_as))
            .replace("Environment=@PATH@", &format!("Environment={path_env}"));
        let text = written_by(&text);
        let quoted = shell_quote(&instance);
        Ok(Rendered {
            file: dir.join("catalystd@.service"),
            text,
            enable: format!("systemctl daemon-reload && systemctl enable --now {quoted}"),
            disable: format!("systemctl disable --now {quoted}"),
            enabled_links: vec![dir.join("multi-user.target.wants").join(&instance)],
        })
    }
}

/// The unit with a note of who wrote it instead of the contrib file's how-to-install
/// paragraph (the one that speaks of the `@…@` placeholders, which are filled in by now).
fn written_by(text: &str) -> String {
    let mut kept = Vec::new();
    let mut skipping = false;
    for line in text.lines() {
        if line.starts_with('#') && line.contains("@…@") {
            skipping = true;
        }
        if skipping && !line.starts_with('#') {
            skipping = false;
        }
        if !skipping {
            kept.push(line);
        }
    }
    format!(
        "# Written by `catalyst service install` ({}); edits are lost on the next install.\n{}\n",
        env!("CARGO_PKG_VERSION"),
        kept.join("\n")
    )
}

/// `~/.config/systemd/user`, or under `$XDG_CONFIG_HOME` when set.
fn user_unit_dir(home: &Path) -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"))
        .join("systemd")
        .join("user")
}

/// `%` starts a specifier in unit files.
fn escape_specifiers(s: &str) -> String {
    s.replace('%', "%%")
}

/// One word of a command line or an `Environment=` assignment: specifiers and `$` escaped,
/// quoted when it has spaces or quotes.
fn quote_word(s: &str) -> String {
    let escaped = escape_specifiers(s).replace('$', "$$");
    if escaped
        .chars()
        .any(|c| c.is_whitespace() || "\"'\\;".contains(c))
    {
        format!("\"{}\"", escaped.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        escaped
    }
}

/// A path as `systemd-escape --path` spells it: slashes become `-`, and bytes other than
/// ASCII letters, digits, `:`, `_` and `.` (not leading) become `\xNN`.
pub fn escape_path(path: &str) -> String {
    let trimmed: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if trimmed.is_empty() {
        return "-".into();
    }
    let joined = trimmed.join("/");
    let mut out = String::new();
    for (i, b) in joined.bytes().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || b == b':' || b == b'_' || b == b'.' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_escape_as_systemd_escape_does() {
        for (path, escaped) in [
            ("/", "-"),
            ("/srv/repo", "srv-repo"),
            ("/home/me/my-repo/", "home-me-my\\x2drepo"),
            ("/a//b", "a-b"),
            ("/.hidden/x", "\\x2ehidden-x"),
            ("/a b/ü", "a\\x20b-\\xc3\\xbc"),
        ] {
            assert_eq!(escape_path(path), escaped, "{path}");
        }
    }

    #[test]
    fn words_are_escaped_for_unit_files() {
        assert_eq!(quote_word("/usr/bin/catalystd"), "/usr/bin/catalystd");
        assert_eq!(quote_word("/a b/100%"), "\"/a b/100%%\"");
        assert_eq!(quote_word("PATH=/x:$HOME"), "PATH=/x:$$HOME");
    }
}
