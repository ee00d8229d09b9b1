//! The inbox: bead files dropped in a folder are submitted as if by `submit`.

use std::path::Path;

use serde_json::{json, Value};

use crate::domain::id::BeadId;
use crate::protocol::{BeadInput, Method};

use crate::daemon::engine::Engine;

impl Engine {
    /// Ingests a bead file from the inbox, or moves it aside with a note saying why.
    pub(in crate::daemon::engine) fn ingest(&mut self, path: &Path) {
        let Some(raw) = path.file_name() else { return };
        let name = raw.to_string_lossy();
        if name.starts_with('.') || name.ends_with(".tmp") || !path.is_file() {
            return;
        }
        let identity = inbox_identity(path, &name);
        if let Some(identity) = &identity {
            if self.ingested(identity) {
                // The daemon stopped after recording this file's beads and before removing it.
                tracing::info!(file = %path.display(), "already ingested; removing it");
                if let Err(e) = std::fs::remove_file(path) {
                    tracing::warn!(file = %path.display(), error = %e, "cannot remove an ingested file");
                }
                return;
            }
        }
        let failures = self.write_failures;
        let result = match raw.to_str() {
            // Nothing in the file is read: a name that is not text is refused on its own.
            None => Err("the file name is not UTF-8".to_owned()),
            Some(_) => read_bead_file(path).and_then(|mut inputs| {
                if let Some(identity) = &identity {
                    for input in &mut inputs {
                        input
                            .metadata
                            .get_or_insert_with(Default::default)
                            .insert(INBOX_KEY.into(), Value::String(identity.clone()));
                    }
                }
                self.submit(inputs).map_err(|e| e.message)
            }),
        };
        if self.write_failures != failures {
            // Not the file's fault: it stays in the inbox and is read again once the journal
            // can be written (`Engine::handle` keeps the input).
            tracing::warn!(file = %path.display(), "cannot record a bead file yet; it stays in the inbox");
            return;
        }
        match result {
            Ok(answer) => {
                let ids: Vec<&str> = answer.ids.iter().map(BeadId::as_str).collect();
                tracing::info!(file = %path.display(), ids = ?ids, "ingested a bead file");
                if let Err(e) = std::fs::remove_file(path) {
                    tracing::warn!(file = %path.display(), error = %e, "cannot remove an ingested file");
                }
            }
            Err(why) => {
                tracing::warn!(file = %path.display(), reason = %why, "refused a bead file");
                let dir = self.paths.rejected();
                let mut why_name = raw.to_owned();
                why_name.push(".why");
                let moved = std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::rename(path, dir.join(raw)))
                    .and_then(|()| std::fs::write(dir.join(why_name), format!("{why}\n")));
                if let Err(e) = moved {
                    tracing::error!(file = %path.display(), error = %e, "cannot move a refused bead file aside");
                }
            }
        }
    }

    /// Whether a bead was created from the inbox file `identity` names.
    fn ingested(&self, identity: &str) -> bool {
        self.store.state().beads().any(|b| {
            b.metadata
                .as_ref()
                .and_then(|m| m.get(INBOX_KEY))
                .is_some_and(|v| v == identity)
        })
    }
}

/// The metadata key recording which inbox file a bead came from (see [`inbox_identity`]).
pub const INBOX_KEY: &str = "catalyst_inbox";

/// An inbox file as it is on disk: its name, device, inode, modification time and size. The
/// beads made from it record this, so that a file the daemon recorded but did not get to
/// remove (it was killed in between) is recognized instead of submitted twice, while a file
/// dropped again later (a new inode) is a new submission.
fn inbox_identity(path: &Path, name: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(format!(
        "{name} {}:{}:{}.{:09}:{}",
        m.dev(),
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
        m.size()
    ))
}

/// A bead file: JSON or TOML, one bead's fields or `beads = [...]`.
fn read_bead_file(path: &Path) -> Result<Vec<BeadInput>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let value: Value = if path.extension().is_some_and(|e| e == "toml") {
        toml::from_str(&text).map_err(|e| format!("not valid TOML: {}", e.to_string().trim()))?
    } else {
        serde_json::from_str(&text).map_err(|e| format!("not valid JSON: {e}"))?
    };
    let method = crate::protocol::parse_request(
        json!({"id": 0, "method": "submit", "params": value})
            .to_string()
            .as_bytes(),
    )
    .map_err(|(_, e)| e.message)?;
    match method.method {
        Method::Submit(beads) => Ok(beads),
        _ => Err("not a bead".into()),
    }
}
