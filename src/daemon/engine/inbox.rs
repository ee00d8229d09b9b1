//! Bead files dropped in the inbox. A task reads the file; the engine checks and records its
//! beads; another task then removes the file, or moves it aside with a note saying why it was
//! refused. Files are handled one at a time, in the order they were noticed, so a file is
//! settled before the next one is read; a notice about a file already queued or being handled
//! is looked at again after it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::protocol::{BeadInput, Method};

use super::error::EngineError;
use super::reports::{FileError, FileRead, InboxFile, InboxSettled, MAX_INBOX_FILE};
use super::storage::Deferred;
use super::{Engine, Input};

/// The metadata key recording which inbox file a bead came from (see [`inbox_identity`]).
pub const INBOX_KEY: &str = "catalyst_inbox";

impl Engine {
    /// A file appeared in the inbox: it is queued, and read when its turn comes.
    pub(super) fn inbox_arrived(&mut self, path: PathBuf) {
        self.intake.noticed(path);
        self.next_inbox_file();
    }

    /// Reads the next queued file in a task, unless one is being handled.
    fn next_inbox_file(&mut self) {
        let Some(path) = self.intake.next_file() else {
            return;
        };
        let lost = path.clone();
        self.tasks.blocking(
            move || Input::InboxRead(Box::new(read(path))),
            |e| failed(e, lost),
        );
    }

    /// Ingests a bead file that was read, then settles it: removed once its beads are
    /// recorded, moved aside with the reason when refused, left in the inbox when the journal
    /// cannot be written (read again once it can).
    pub(super) fn inbox_read(&mut self, file: InboxFile) {
        let InboxFile { path, read } = file;
        let Some(read) = read else {
            self.inbox_settled(InboxSettled(path));
            return;
        };
        if let Some(identity) = &read.identity {
            if self.ingested(identity) {
                // The daemon stopped after recording this file's beads and before removing it.
                tracing::info!(file = %path.display(), "already ingested; removing it");
                self.settle(path, None);
                return;
            }
        }
        match self.submit_file(read.beads, read.identity.as_deref()) {
            Ok(ids) => {
                tracing::info!(file = %path.display(), ids = %ids, "ingested a bead file");
                self.settle(path, None);
            }
            Err(Refusal::File(why)) => {
                tracing::warn!(file = %path.display(), reason = %why, "refused a bead file");
                self.settle(path, Some((read.name, why)));
            }
            Err(Refusal::Unwritten) => {
                // Not the file's fault: it stays in the inbox and is read again once the
                // journal can be written.
                tracing::warn!(file = %path.display(), "cannot record a bead file yet; it stays in the inbox");
                self.storage.defer(Deferred::Input(Input::Inbox(path)));
                self.intake.let_go();
                self.next_inbox_file();
            }
        }
    }

    /// Checks and records a file's beads; returns their ids.
    fn submit_file(
        &mut self,
        beads: Result<Vec<BeadInput>, FileError>,
        identity: Option<&str>,
    ) -> Result<Value, Refusal> {
        let mut inputs = beads.map_err(|e| Refusal::File(e.to_string()))?;
        if let Some(identity) = identity {
            for input in &mut inputs {
                input
                    .metadata
                    .get_or_insert_with(Default::default)
                    .insert(INBOX_KEY.into(), Value::String(identity.to_owned()));
            }
        }
        let (ids, events) = self
            .submission(inputs, false)
            .map_err(|e| Refusal::File(e.message))?;
        self.check_for_client(&events)
            .map_err(|e| Refusal::File(e.message))?;
        match self.record(events) {
            Ok(_) => Ok(json!(ids)),
            Err(EngineError::Unwritten(_)) => Err(Refusal::Unwritten),
            Err(EngineError::Refused(_)) => Err(Refusal::File(self.not_written().message)),
        }
    }

    /// Removes a handled file, or moves a refused one aside with its reason, in a task.
    fn settle(&mut self, path: PathBuf, refused: Option<(OsString, String)>) {
        let rejected = self.paths.rejected();
        let lost = path.clone();
        self.tasks.blocking(
            move || {
                match refused {
                    None => remove(&path),
                    Some((name, why)) => move_aside(&path, &rejected, &name, &why),
                }
                Input::InboxSettled(InboxSettled(path))
            },
            |e| failed(e, lost),
        );
    }

    /// A file is settled: the next one's turn.
    pub(super) fn inbox_settled(&mut self, InboxSettled(path): InboxSettled) {
        self.intake.settled(&path);
        self.next_inbox_file();
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

/// Why a file's beads were not recorded.
enum Refusal {
    /// The file is at fault: it is moved aside with this reason.
    File(String),
    /// The journal could not be written.
    Unwritten,
}

/// An inbox task died (a bug): the file is left as it is and no longer busy.
fn failed(panic: String, path: PathBuf) -> Input {
    tracing::error!(file = %path.display(), %panic, "the inbox task panicked");
    Input::InboxSettled(InboxSettled(path))
}

/// The reading task.
fn read(path: PathBuf) -> InboxFile {
    let Some(raw) = path.file_name() else {
        return InboxFile { path, read: None };
    };
    let name = raw.to_string_lossy();
    // Gone already (a notification repeated for a file handled since) or a folder: nothing
    // to do. A link is looked at, not followed.
    let gone_or_folder = std::fs::symlink_metadata(&path).map_or(true, |m| m.is_dir());
    if name.starts_with('.') || name.ends_with(".tmp") || gone_or_folder {
        return InboxFile { path, read: None };
    }
    let identity = inbox_identity(&path, &name);
    let beads = match raw.to_str() {
        // Nothing in the file is read: a name that is not text is refused on its own.
        None => Err(FileError::NotUtf8Name),
        Some(_) => read_bead_file(&path),
    };
    let read = FileRead {
        name: raw.to_owned(),
        identity,
        beads,
    };
    InboxFile {
        path,
        read: Some(read),
    }
}

fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!(file = %path.display(), error = %e, "cannot remove an ingested file");
    }
}

fn move_aside(path: &Path, dir: &Path, name: &OsString, why: &str) {
    let mut why_name = name.to_owned();
    why_name.push(".why");
    let moved = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::rename(path, dir.join(name)))
        .and_then(|()| std::fs::write(dir.join(why_name), format!("{why}\n")));
    if let Err(e) = moved {
        tracing::error!(file = %path.display(), error = %e, "cannot move a refused bead file aside");
    }
}

/// An inbox file as it is on disk: its name, device, inode, modification time and size. The
/// beads made from it record this, so that a file the daemon recorded but did not get to
/// remove (it was killed in between) is recognized instead of submitted twice, while a file
/// dropped again later (a new inode) is a new submission.
fn inbox_identity(path: &Path, name: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
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
fn read_bead_file(path: &Path) -> Result<Vec<BeadInput>, FileError> {
    let text = read_limited(path)?;
    let value: Value = if path.extension().is_some_and(|e| e == "toml") {
        toml::from_str(&text).map_err(|e| FileError::Toml(toml_location(&text, &e)))?
    } else {
        // serde_json names a place and a kind of error, never the text there.
        serde_json::from_str(&text).map_err(FileError::Json)?
    };
    let method = crate::protocol::parse_request(
        json!({"id": 0, "method": "submit", "params": value})
            .to_string()
            .as_bytes(),
    )
    .map_err(|(_, e)| FileError::Fields(e.message))?;
    match method.method {
        Method::Submit(beads) => Ok(beads),
        _ => Err(FileError::NotABead),
    }
}

/// The text of an inbox file: opened without following a symbolic link, and read only when it
/// is a regular file of at most [`MAX_INBOX_FILE`] bytes (a link to a secret, a fifo or a huge
/// file is refused before anything of it is read).
fn read_limited(path: &Path) -> Result<String, FileError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => FileError::Link,
            _ => FileError::Read(e),
        })?;
    let meta = file.metadata().map_err(FileError::Read)?;
    if !meta.is_file() {
        return Err(FileError::NotRegular);
    }
    if meta.len() > MAX_INBOX_FILE {
        return Err(FileError::TooBig(meta.len()));
    }
    let mut text = String::new();
    // A file that grows after the check is still read no further than the limit.
    file.take(MAX_INBOX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(FileError::Read)?;
    if text.len() as u64 > MAX_INBOX_FILE {
        return Err(FileError::TooBig(text.len() as u64));
    }
    Ok(text)
}

/// Where TOML parsing failed, and what kind of error it is when its message quotes nothing
/// of the file.
fn toml_location(text: &str, e: &toml::de::Error) -> String {
    let at = e.span().map(|span| {
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        format!("at line {line}, column {column}")
    });
    let message = e.message().lines().next().unwrap_or_default().trim();
    let kind = (!message.contains('`') && !message.contains('"') && !message.contains('\''))
        .then_some(message)
        .filter(|m| !m.is_empty());
    match (at, kind) {
        (Some(at), Some(kind)) => format!("{at}: {kind}"),
        (Some(at), None) => at,
        (None, Some(kind)) => kind.to_owned(),
        (None, None) => "a syntax error".to_owned(),
    }
}
