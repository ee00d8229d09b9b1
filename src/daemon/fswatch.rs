//! File-system notifications (notify): the inbox, the files that reload, and the files followed
//! (logs, a beads file), all of which share one watcher.
//!
//! notify calls back on its own thread. The callbacks here only `try_send` into a bounded
//! channel; when it is full the event is dropped and a flag asks the forwarding task to rescan
//! the inbox folder instead, so a burst of files never blocks notify and no file is missed.
// `unsafe` here: tokio's `AsyncFd` takes the inotify descriptor on trust; each block says why
// it is sound.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use crate::daemon::paths::Paths;

/// How many notifications may wait for the forwarding task.
pub const QUEUE: usize = 256;

/// What the workspace watcher reports; the receiver maps it into its own input type.
#[derive(Debug, PartialEq, Eq)]
pub enum WorkspaceChange {
    /// A file was completed in the inbox.
    InboxFile(PathBuf),
    /// The config, the prompts or a formula folder changed.
    Reload,
}

/// What the callback passes to the forwarding task.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Change(WorkspaceChange),
    /// A formula folder, or a folder on the way to one, appeared: it must be watched too.
    Folder,
}

/// The workspace's watcher; dropping it stops the watching.
pub struct WorkspaceWatch {
    _watcher: Arc<Mutex<RecommendedWatcher>>,
    /// The state folder's own watch (Linux), a task on the runtime.
    state: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for WorkspaceWatch {
    fn drop(&mut self) {
        if let Some(task) = &self.state {
            task.abort();
        }
    }
}

/// Whether an event means a file is complete: closed after writing, or renamed into place.
/// A bare create is not, nor a write: the writer may not be done (a file rewritten in place is
/// empty between its truncation and its first write, and a reload then would read nothing).
fn completes_a_file(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::Access(AccessKind::Close(AccessMode::Write))
            | EventKind::Modify(ModifyKind::Name(_))
    )
}

/// Whether an event on a file that reloads (the config, the prompts, a formula) asks for a
/// reload: the file was completed, or removed.
fn reloads_on(kind: &EventKind) -> bool {
    completes_a_file(kind) || kind.is_remove()
}

/// Watches the workspace: files completed in the inbox, and changes to the config, the prompts
/// and the formula folders. Keep the returned watchers alive for as long as they should work.
///
/// A formula folder that does not exist yet is watched from the time it appears: the
/// workspace's root and `.beads/` are watched for it (`catalyst init --with-prompts`, or a
/// person's first formula, after the daemon started).
pub fn workspace<T: From<WorkspaceChange> + Send + 'static>(
    paths: &Paths,
    engine: mpsc::Sender<T>,
) -> notify::Result<WorkspaceWatch> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let overflow = Arc::new(AtomicBool::new(false));
    let inbox = paths.inbox();
    std::fs::create_dir_all(&inbox)?;
    let reload_files = [paths.config(), paths.prompts()];
    let formula_dirs = paths.formula_dirs();
    let callback = {
        let (inbox, overflow, formula_dirs) =
            (inbox.clone(), overflow.clone(), formula_dirs.clone());
        let tx = tx.clone();
        move |res: notify::Result<notify::Event>| {
            let Ok(event) = res else { return };
            for path in &event.paths {
                let seen = if path.parent() == Some(inbox.as_path()) {
                    if !completes_a_file(&event.kind) {
                        continue;
                    }
                    Seen::Change(WorkspaceChange::InboxFile(path.clone()))
                } else if matches!(
                    event.kind,
                    EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(_))
                ) && formula_dirs.iter().any(|d| d.starts_with(path))
                {
                    Seen::Folder
                } else if reload_files.contains(path)
                    || formula_dirs
                        .iter()
                        .any(|d| path.parent() == Some(d.as_path()))
                {
                    if !reloads_on(&event.kind) {
                        continue;
                    }
                    Seen::Change(WorkspaceChange::Reload)
                } else {
                    continue;
                };
                if tx.try_send(seen).is_err() {
                    overflow.store(true, Ordering::SeqCst);
                }
            }
        }
    };
    let callback = Arc::new(callback);
    let mut watcher = notify::recommended_watcher({
        let callback = callback.clone();
        move |res| callback(res)
    })?;
    watcher.watch(&inbox, RecursiveMode::NonRecursive)?;
    #[cfg(target_os = "linux")]
    let state = {
        let rescan = move || {
            let _ = tx.try_send(Seen::Change(WorkspaceChange::Reload));
        };
        Some(state_folder::watch(&paths.state, callback, rescan)?)
    };
    #[cfg(not(target_os = "linux"))]
    let state = {
        watcher.watch(&paths.state, RecursiveMode::NonRecursive)?;
        None
    };
    watch_formula_dirs(&mut watcher, paths);
    let watcher = Arc::new(Mutex::new(watcher));
    let folders = Folders {
        watcher: Arc::downgrade(&watcher),
        paths: paths.clone(),
    };
    tokio::spawn(forward(rx, engine, overflow, inbox.clone(), Some(folders)));
    Ok(WorkspaceWatch {
        _watcher: watcher,
        state,
    })
}

/// Watches the formula folders that exist, and the folders their creation would show in.
fn watch_formula_dirs(watcher: &mut RecommendedWatcher, paths: &Paths) {
    for folder in formula_watch_folders(paths) {
        if let Err(e) = watcher.watch(&folder, RecursiveMode::NonRecursive) {
            tracing::warn!(path = %folder.display(), error = %e, "cannot watch a formula folder");
        }
    }
}

/// The folders notify watches for the formulas: each formula folder that exists and the
/// existing folders its creation would show in, but not the state folder on Linux, which has
/// a watch of its own ([`state_folder`]) that leaves out the journal's writes.
fn formula_watch_folders(paths: &Paths) -> Vec<PathBuf> {
    let mut folders = Vec::new();
    for dir in paths.formula_dirs() {
        let on_the_way = dir
            .ancestors()
            .skip(1)
            .take_while(|a| a.starts_with(&paths.workspace));
        for folder in std::iter::once(dir.as_path()).chain(on_the_way) {
            let own_watch = cfg!(target_os = "linux") && folder == paths.state;
            if !own_watch && folder.is_dir() && !folders.iter().any(|f| f == folder) {
                folders.push(folder.to_owned());
            }
        }
    }
    folders
}

/// The state folder's watch on Linux: an inotify instance of its own, read on the runtime,
/// asking only for files closed after writing, renamed, created and removed. The journal is
/// appended to in this folder for every event the daemon records, and notify's inotify mask
/// includes writes: each append woke notify's thread (about seven wake-ups a bead) for an
/// event the callback then dropped. The events are handed to the same callback as notify's.
#[cfg(target_os = "linux")]
mod state_folder {
    use std::io;
    use std::path::Path;
    use std::sync::Arc;

    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent};
    use notify::event::{
        AccessKind, AccessMode, CreateKind, EventKind, ModifyKind, RemoveKind, RenameMode,
    };
    use std::os::fd::{AsFd, AsRawFd, RawFd};
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;

    /// An inotify instance, as the runtime's reactor takes it.
    struct Instance(Inotify);

    impl AsRawFd for Instance {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_fd().as_raw_fd()
        }
    }

    /// Watches `state`, calling `callback` for each event and `rescan` when the kernel's queue
    /// overflowed (events were lost).
    pub(super) fn watch(
        state: &Path,
        callback: Arc<impl Fn(notify::Result<notify::Event>) + Send + Sync + 'static>,
        rescan: impl Fn() + Send + 'static,
    ) -> io::Result<tokio::task::JoinHandle<()>> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let mask = AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_ONLYDIR;
        inotify.add_watch(state, mask)?;
        // SAFETY: `Instance` owns the inotify descriptor and keeps it open, unchanged, for as
        // long as it lives, and the `AsyncFd` owns the `Instance`.
        let fd = unsafe { AsyncFd::register_with_interest(Instance(inotify), Interest::READABLE) }
            .map_err(io::Error::from)?;
        let state = state.to_owned();
        Ok(tokio::spawn(async move {
            loop {
                let Ok(mut ready) = fd.readable().await else {
                    return;
                };
                let read = ready.try_io(|fd| fd.get_ref().0.read_events().map_err(io::Error::from));
                let events = match read {
                    Ok(Ok(events)) => events,
                    Ok(Err(e)) => {
                        tracing::warn!(path = %state.display(), error = %e, "cannot read the state folder's changes; the config and prompts no longer reload by themselves");
                        return;
                    }
                    Err(_would_block) => continue,
                };
                for event in events {
                    if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                        rescan();
                    }
                    if let (Some(kind), Some(name)) = (kind(&event), &event.name) {
                        callback(Ok(notify::Event::new(kind).add_path(state.join(name))));
                    }
                }
            }
        }))
    }

    /// The notify event kind an inotify event stands for.
    fn kind(event: &InotifyEvent) -> Option<EventKind> {
        let m = event.mask;
        let folder = m.contains(AddWatchFlags::IN_ISDIR);
        Some(if m.contains(AddWatchFlags::IN_CLOSE_WRITE) {
            EventKind::Access(AccessKind::Close(AccessMode::Write))
        } else if m.contains(AddWatchFlags::IN_MOVED_TO) {
            EventKind::Modify(ModifyKind::Name(RenameMode::To))
        } else if m.contains(AddWatchFlags::IN_MOVED_FROM) {
            EventKind::Modify(ModifyKind::Name(RenameMode::From))
        } else if m.contains(AddWatchFlags::IN_CREATE) {
            EventKind::Create(if folder {
                CreateKind::Folder
            } else {
                CreateKind::File
            })
        } else if m.contains(AddWatchFlags::IN_DELETE) {
            EventKind::Remove(if folder {
                RemoveKind::Folder
            } else {
                RemoveKind::File
            })
        } else {
            return None;
        })
    }
}

/// What the forwarding task needs to start watching a formula folder that appeared.
struct Folders {
    watcher: Weak<Mutex<RecommendedWatcher>>,
    paths: Paths,
}

/// Passes notifications to the engine; after an overflow, rescans the inbox.
async fn forward<T: From<WorkspaceChange>>(
    mut rx: mpsc::Receiver<Seen>,
    engine: mpsc::Sender<T>,
    overflow: Arc<AtomicBool>,
    inbox: PathBuf,
    folders: Option<Folders>,
) {
    while let Some(seen) = rx.recv().await {
        let change = match seen {
            Seen::Change(change) => change,
            Seen::Folder => {
                let Some(folders) = &folders else { continue };
                let Some(watcher) = folders.watcher.upgrade() else {
                    return;
                };
                if let Ok(mut watcher) = watcher.lock() {
                    watch_formula_dirs(&mut watcher, &folders.paths);
                }
                WorkspaceChange::Reload
            }
        };
        if engine.send(change.into()).await.is_err() {
            return;
        }
        if overflow.swap(false, Ordering::SeqCst) {
            for path in inbox_files(&inbox) {
                if engine
                    .send(WorkspaceChange::InboxFile(path).into())
                    .await
                    .is_err()
                {
                    return;
                }
            }
            let _ = engine.send(WorkspaceChange::Reload.into()).await;
        }
    }
}

/// The files waiting in the inbox, oldest name first (used at start-up and after an overflow).
pub fn inbox_files(inbox: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(inbox)
        .map(|dir| {
            dir.filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Wakes `tx` whenever `path` changes, for as long as the returned guard lives. `None` when it
/// cannot be watched (the caller then just sends what is there).
///
/// Every follower shares one watcher ([`FileWatch`]): the kernel gives a user only so many
/// inotify instances (128 by default), and one per `ctl logs -f` would stop the 129th from
/// ever being woken.
pub fn file_changes(path: &Path, tx: watch::Sender<()>) -> Option<Watching> {
    FileWatch::shared().watch(path, tx)
}

/// One notify watcher for every file the daemon follows: the folders of the files followed
/// are watched (each once, however many follow files in it) and each change wakes those
/// following that file.
struct FileWatch {
    /// Who follows which file; the watcher's callback reads it.
    followers: Arc<Mutex<Vec<Follower>>>,
    /// Made at the first follow; with how many followers each folder has.
    watcher: Mutex<Option<(RecommendedWatcher, HashMap<PathBuf, usize>)>>,
    next: AtomicU64,
}

struct Follower {
    id: u64,
    file: PathBuf,
    tx: watch::Sender<()>,
}

/// A follow of one file; dropping it ends the follow.
#[derive(Debug)]
pub struct Watching {
    id: u64,
    folder: PathBuf,
}

impl Drop for Watching {
    fn drop(&mut self) {
        FileWatch::shared().forget(self.id, &self.folder);
    }
}

impl FileWatch {
    fn shared() -> &'static FileWatch {
        static SHARED: OnceLock<FileWatch> = OnceLock::new();
        SHARED.get_or_init(|| FileWatch {
            followers: Arc::default(),
            watcher: Mutex::new(None),
            next: AtomicU64::new(0),
        })
    }

    fn watch(&'static self, file: &Path, tx: watch::Sender<()>) -> Option<Watching> {
        let folder = file.parent()?.to_owned();
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        lock(&self.followers).push(Follower {
            id,
            file: file.to_owned(),
            tx,
        });
        // The follower is listed before the folder is watched, and the callback's lock is
        // never held while the watcher is asked for something: notify's thread runs the
        // callback and answers those requests.
        let watched = self.watch_folder(&folder);
        if let Err(e) = watched {
            tracing::warn!(path = %folder.display(), error = %e, "cannot watch a folder");
            lock(&self.followers).retain(|f| f.id != id);
            return None;
        }
        Some(Watching { id, folder })
    }

    fn watch_folder(&self, folder: &Path) -> notify::Result<()> {
        let mut slot = lock(&self.watcher);
        if slot.is_none() {
            let followers = self.followers.clone();
            let watcher =
                notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                    let Ok(event) = res else { return };
                    for f in lock(&followers).iter() {
                        if event.paths.contains(&f.file) {
                            f.tx.send_replace(());
                        }
                    }
                })?;
            *slot = Some((watcher, HashMap::new()));
        }
        let (watcher, folders) = slot.as_mut().expect("made above");
        // Asked again even when watched: a folder removed and made again needs a new watch.
        watcher.watch(folder, RecursiveMode::NonRecursive)?;
        *folders.entry(folder.to_owned()).or_insert(0) += 1;
        Ok(())
    }

    fn forget(&self, id: u64, folder: &Path) {
        lock(&self.followers).retain(|f| f.id != id);
        let mut slot = lock(&self.watcher);
        let Some((watcher, folders)) = slot.as_mut() else {
            return;
        };
        if let Some(count) = folders.get_mut(folder) {
            *count -= 1;
            if *count == 0 {
                folders.remove(folder);
                // The folder may be gone already, and its watch with it.
                let _ = watcher.unwatch(folder);
            }
        }
    }
}

/// A lock whose holder panicked is still good: what it guards is a list, never half-changed.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, RenameMode};

    #[test]
    fn only_completed_files_count() {
        assert!(completes_a_file(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(completes_a_file(&EventKind::Modify(ModifyKind::Name(
            RenameMode::To
        ))));
        assert!(!completes_a_file(&EventKind::Create(CreateKind::File)));
        assert!(!completes_a_file(&EventKind::Modify(ModifyKind::Data(
            DataChange::Any
        ))));
    }

    #[test]
    fn a_file_rewritten_in_place_reloads_once_it_is_closed_not_while_it_is_written() {
        use notify::event::RemoveKind;
        let truncated_or_written = EventKind::Modify(ModifyKind::Data(DataChange::Any));
        assert!(!reloads_on(&truncated_or_written));
        assert!(!reloads_on(&EventKind::Create(CreateKind::File)));
        assert!(reloads_on(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(reloads_on(&EventKind::Modify(ModifyKind::Name(
            RenameMode::To
        ))));
        assert!(reloads_on(&EventKind::Remove(RemoveKind::File)));
        assert!(!reloads_on(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn notify_leaves_the_state_folder_to_its_own_watch() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path());
        for formulas in paths.formula_dirs() {
            std::fs::create_dir_all(formulas).unwrap();
        }
        let folders = formula_watch_folders(&paths);
        assert!(!folders.contains(&paths.state), "{folders:?}");
        for formulas in paths.formula_dirs() {
            assert!(folders.contains(&formulas), "{folders:?}");
        }
        assert!(folders.contains(&paths.workspace), "{folders:?}");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_state_folder_tells_files_completed_renamed_created_and_removed() {
        use notify::event::RemoveKind;
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let mut journal = std::fs::File::create(dir.path().join("journal.jsonl")).unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let callback = Arc::new(move |res: notify::Result<notify::Event>| {
            let event = res.expect("an event");
            let name = event.paths[0].file_name().unwrap().to_owned();
            let _ = tx.send((event.kind, name.into_string().unwrap()));
        });
        let task = state_folder::watch(dir.path(), callback, || {}).unwrap();
        journal.write_all(b"{}\n").unwrap();
        std::fs::write(dir.path().join(".tmp-config"), "x = 1").unwrap();
        std::fs::rename(
            dir.path().join(".tmp-config"),
            dir.path().join("config.toml"),
        )
        .unwrap();
        std::fs::remove_file(dir.path().join("config.toml")).unwrap();
        std::fs::create_dir(dir.path().join("formulas")).unwrap();
        let mut seen = Vec::new();
        while seen.len() < 6 {
            let next = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv());
            seen.push(
                next.await
                    .expect("an event in time")
                    .expect("the watch is alive"),
            );
        }
        task.abort();
        let closed = EventKind::Access(AccessKind::Close(AccessMode::Write));
        let tmp = ".tmp-config".to_owned();
        assert_eq!(
            seen,
            [
                (EventKind::Create(CreateKind::File), tmp.clone()),
                (closed, tmp.clone()),
                (EventKind::Modify(ModifyKind::Name(RenameMode::From)), tmp),
                (
                    EventKind::Modify(ModifyKind::Name(RenameMode::To)),
                    "config.toml".into()
                ),
                (EventKind::Remove(RemoveKind::File), "config.toml".into()),
                (EventKind::Create(CreateKind::Folder), "formulas".into()),
            ],
            "the journal's write is not among them"
        );
    }

    #[tokio::test]
    async fn an_overflow_rescans_the_inbox_instead_of_losing_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.json", "b.json", "c.json"] {
            std::fs::write(dir.path().join(name), "{}").unwrap();
        }
        let (tx, rx) = mpsc::channel(1);
        let (engine_tx, mut engine_rx) = mpsc::channel(16);
        let overflow = Arc::new(AtomicBool::new(false));
        // The callback managed to queue one file, then the queue was full for the others.
        tx.try_send(Seen::Change(WorkspaceChange::InboxFile(
            dir.path().join("a.json"),
        )))
        .unwrap();
        assert!(tx
            .try_send(Seen::Change(WorkspaceChange::InboxFile(
                dir.path().join("b.json")
            )))
            .is_err());
        overflow.store(true, Ordering::SeqCst);
        drop(tx);
        forward(rx, engine_tx, overflow, dir.path().to_owned(), None).await;
        let mut files = Vec::new();
        while let Ok(input) = engine_rx.try_recv() {
            if let WorkspaceChange::InboxFile(p) = input {
                files.push(p.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
        assert!(
            files.contains(&"b.json".to_string()) && files.contains(&"c.json".to_string()),
            "{files:?}"
        );
    }
}
