//! The daemon as a library: lock the workspace, recover the store, bind the control socket,
//! watch the workspace's files, and run the engine until shutdown.
//!
//! [`run`] takes its listener and shutdown token as arguments so that tests and `catalyst
//! demo` run a daemon in-process; `catalystd` adds flags, logging and signals around
//! [`start`].

pub mod agent;
pub mod audit;
pub mod beads;
pub mod cgroup;
pub mod clock;
pub mod cluster;
pub mod engine;
pub mod follow;
pub mod forge;
pub mod fsutil;
pub mod fswatch;
pub mod load;
pub mod netproxy;
pub mod notify;
pub mod paths;
pub mod preflight;
pub mod resolver;
pub mod rundir;
pub mod runlog;
pub mod runner;
pub mod sandbox;
pub mod sched;
pub mod sdnotify;
pub mod server;
pub mod store;
pub mod web;
pub mod wire;
pub mod worktree;

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::daemon::engine::{Engine, Input, Loaded};
use crate::daemon::store::Store;
use crate::daemon::worktree::Repo;

pub use paths::Paths;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("another catalystd (pid {pid}) is running on `{workspace}`")]
    Locked { pid: String, workspace: String },
    #[error("{action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] crate::daemon::engine::LoadError),
    #[error(transparent)]
    Store(#[from] crate::daemon::store::StoreError),
    #[error(transparent)]
    Git(#[from] crate::daemon::worktree::GitError),
    #[error(transparent)]
    Web(#[from] crate::daemon::web::WebError),
    #[error(transparent)]
    Cluster(#[from] crate::daemon::cluster::bus::ClusterError),
    #[error("[forge]: {0}")]
    Forge(#[from] crate::daemon::forge::ForgeError),
}

/// Holds the workspace lock (`catalystd.lock`) for as long as it lives.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// Takes the workspace's lock, or names the pid of the daemon that holds it.
pub fn lock(paths: &Paths) -> Result<Lock, DaemonError> {
    let path = paths.lock();
    let io = |action, source| DaemonError::Io {
        action,
        path: path.display().to_string(),
        source,
    };
    crate::daemon::fsutil::create_dir_durable(&paths.state).map_err(|e| io("cannot create", e))?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io("cannot open", e))?;
    // The lock belongs to the open file, which a child shares from `fork` until its `exec`
    // closes it: a daemon killed while it was starting an agent leaves the lock held for the
    // moment that child takes to exec or die. So a lock whose recorded holder is gone is
    // waited for, briefly; a lock whose holder lives is refused at once. A holder that is this
    // very process is a daemon that ran here before (an in-process restart): its lock is held
    // only by a child it was starting, so it is waited for too.
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.rewind().and_then(|()| file.read_to_string(&mut pid));
                let pid = pid.trim().to_owned();
                let ours = pid == std::process::id().to_string();
                if (alive(&pid) && !ours) || std::time::Instant::now() >= deadline {
                    return Err(DaemonError::Locked {
                        pid,
                        workspace: paths.workspace.display().to_string(),
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io("cannot lock", e)),
        }
    }
    file.set_len(0).map_err(|e| io("cannot write", e))?;
    file.rewind().map_err(|e| io("cannot write", e))?;
    writeln!(file, "{}", std::process::id()).map_err(|e| io("cannot write", e))?;
    Ok(Lock { _file: file })
}

/// How long a lock whose recorded holder is gone may stay held (see [`lock`]).
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The daemon's cluster key in the state folder, when `[cluster] key_file` names no other:
/// made at the first start with the cluster on.
pub const CLUSTER_KEY_FILE: &str = "cluster.nk";

/// Whether the process `pid` (as written in the lock file) exists.
fn alive(pid: &str) -> bool {
    let Ok(pid) = pid.parse::<i32>() else {
        return false;
    };
    pid > 0
        && matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Ok(()) | Err(nix::errno::Errno::EPERM)
        )
}

/// A workspace locked for this process, with its control socket bound. Clients may connect as
/// soon as this exists (the kernel queues them until the daemon greets them), so whoever starts
/// a daemon in-process needs no retry loop.
#[derive(Debug)]
pub struct Bound {
    _lock: Lock,
    listener: UnixListener,
    socket: std::path::PathBuf,
    /// `catalystd --web ADDR`, over the config's `[web] listen`.
    web: Option<String>,
}

/// Takes the workspace's lock and binds its control socket.
pub fn bind(paths: &Paths) -> Result<Bound, DaemonError> {
    // A folder that is no repository is refused before anything is written in it.
    git2::Repository::open(&paths.workspace).map_err(|source| {
        crate::daemon::worktree::GitError::Git {
            action: format!(
                "opening the git repository at `{}` (the workspace must be one)",
                paths.workspace.display()
            ),
            source,
        }
    })?;
    let lock = lock(paths)?;
    let socket = paths.socket();
    let listener = server::bind(&socket).map_err(|source| DaemonError::Io {
        action: "cannot bind the control socket",
        path: socket.display().to_string(),
        source,
    })?;
    Ok(Bound {
        _lock: lock,
        listener,
        socket,
        web: None,
    })
}

impl Bound {
    /// Serves the web dashboard on `listen` (`catalystd --web`), whatever the config says.
    pub fn with_web(mut self, listen: Option<String>) -> Bound {
        if listen.is_some() {
            self.web = listen;
        }
        self
    }

    /// Runs the daemon until `shutdown` fires, then removes the socket and releases the lock.
    pub async fn run(self, shutdown: CancellationToken, paths: Paths) -> Result<(), DaemonError> {
        let Bound {
            _lock,
            listener,
            socket,
            web,
        } = self;
        let result = run_with(listener, shutdown, paths, web).await;
        let _ = std::fs::remove_file(&socket);
        result
    }
}

/// What gives the memory freed so far back to the operating system, once loading is done.
/// `catalystd` sets it: its allocator (mimalloc) keeps freed pages until they are reused.
/// Elsewhere nothing is set, so mimalloc is linked into `catalystd` alone and no other program
/// (the hook, the network forwarder, the CLI) pays its start-up.
static RELEASE_FREED_MEMORY: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what [`run`] calls after loading to give freed memory back (see
/// [`RELEASE_FREED_MEMORY`]); the first call wins.
pub fn release_freed_memory_with(release: fn()) {
    let _ = RELEASE_FREED_MEMORY.set(release);
}

/// Turns transparent huge pages off for this process (and so for the agents it starts, which
/// inherit the setting); `catalystd` calls it first thing, and so do the benchmarks that run
/// the daemon in-process. mimalloc asks for huge pages for its segments; where the kernel gives
/// them (`madvise` or `always`), each first touch zeroes 2 MiB at once, and on a virtual
/// machine whose memory the host backs lazily that stalled the daemon for milliseconds at a
/// time: whole batches of events reached followers more than 10 ms late.
/// `MIMALLOC_ALLOW_THP=0` does the same from the environment.
pub fn without_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_thp_disable(true) {
        tracing::warn!(error = %e, "cannot turn transparent huge pages off");
    }
}

fn release_freed_memory() {
    if let Some(release) = RELEASE_FREED_MEMORY.get() {
        release();
    }
}

/// Locks the workspace, binds its socket and runs the daemon until `shutdown` fires.
pub async fn start(paths: Paths, shutdown: CancellationToken) -> Result<(), DaemonError> {
    bind(&paths)?.run(shutdown, paths).await
}

/// Runs the daemon on an already bound listener. Returns when `shutdown` has fired and the
/// engine has stopped (running agents finished or stopped after the grace period).
pub async fn run(
    listener: UnixListener,
    shutdown: CancellationToken,
    paths: Paths,
) -> Result<(), DaemonError> {
    run_with(listener, shutdown, paths, None).await
}

/// [`run`], with the web dashboard on `web` if given (else as the config says).
async fn run_with(
    listener: UnixListener,
    shutdown: CancellationToken,
    paths: Paths,
    web: Option<String>,
) -> Result<(), DaemonError> {
    let loaded = Loaded::load(&paths)?;
    // Bound before anything else starts: an address in use or refused stops the start.
    let web = match web.or_else(|| loaded.config.web.listen.clone()) {
        Some(listen) => Some(web::Web::bind(&paths, &listen, &loaded.config.web).await?),
        None => None,
    };
    let (mut store, report) = Store::open(&paths.state)?;
    tracing::info!(
        beads = store.state().len(),
        seq = store.state().seq(),
        replayed = report.replayed,
        "store recovered"
    );
    // Before anything is served (a subscriber follows the live journal file, which compaction
    // replaces): the next start loads the snapshot instead of replaying.
    if report.replayed >= crate::daemon::store::COMPACT_AFTER {
        match store.compact() {
            Ok(()) => tracing::info!(
                seq = store.state().seq(),
                "compacted the journal into a snapshot"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "cannot compact the journal; the next start replays it")
            }
        }
    }
    // Loading freed as much as it kept (each line's buffer, the replay's temporaries);
    // mimalloc would hold those pages until they are reused.
    release_freed_memory();
    // A spare worktree per agent that may start at once, up to four (disk, for large trees).
    let spares = loaded.config.max_agents.min(4);
    let repo = Repo::open(&paths.workspace, &paths.worktrees())?.with_spares(spares);
    let (workspace, target, profile) = (
        paths.workspace.clone(),
        loaded.config.target_branch.clone(),
        loaded.config.profile().ok(),
    );
    tokio::task::spawn_blocking(move || preflight::log(&workspace, &target, profile.as_ref()));
    let tracker = TaskTracker::new();
    let beads_file = loaded.config.beads.watch.clone();
    let cluster = loaded.config.cluster.clone();
    let models = loaded.config.known_models();
    // The token is read once, here: a missing or readable-by-others file stops the start.
    let forge = match &loaded.config.forge {
        Some(config) => Some(engine::forge::ForgeWork::new(config, &paths.workspace)?),
        None => None,
    };
    let (mut engine, handle, rx) = Engine::new(paths.clone(), store, loaded, repo, tracker.clone());
    if let Some(forge) = forge {
        engine.set_forge(forge);
    }
    let workspace_name = paths
        .workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    engine.set_notifier(notify::Notifier::new(
        handle.journal.clone(),
        workspace_name,
        handle.tx.clone(),
        shutdown.clone(),
    ));
    let bus = if cluster.is_on() {
        let tx = handle.tx.clone();
        let record: crate::daemon::cluster::admit::Record = Arc::new(move |refused| {
            let crate::daemon::cluster::admit::Refused { from, what, reason } = refused;
            let what = what.to_owned();
            // Full: the refusal is in the log, which is enough under a flood.
            let _ = tx.try_send(Input::ClusterRefused { from, what, reason });
        });
        let key_file = cluster
            .key_file
            .clone()
            .unwrap_or_else(|| paths.state.join(CLUSTER_KEY_FILE));
        let setting = crate::daemon::cluster::bus::Setting {
            models: models.into_iter().collect(),
            workspace: &paths.workspace,
            key_file: &key_file,
            record,
        };
        let bus =
            crate::daemon::cluster::bus::Bus::connect(&cluster, setting, shutdown.clone()).await?;
        tracing::info!(nats = %cluster.nats.join(", "), "agent attempts run on the cluster's workers");
        engine.set_remote(bus.clone());
        Some(bus)
    } else {
        None
    };
    let _beads_watcher = beads_file.and_then(|file| {
        crate::daemon::beads::follow::start(paths.workspace.join(file), handle.tx.clone())
    });
    let _watchers = match crate::daemon::fswatch::workspace(&paths, handle.tx.clone()) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::error!(error = %e, "cannot watch the workspace: the inbox and reloads need a restart");
            None
        }
    };
    for file in crate::daemon::fswatch::inbox_files(&paths.inbox()) {
        let _ = handle.tx.send(Input::Inbox(file)).await;
    }
    // The server answers until the engine has stopped (a `shutdown` request fires
    // `shutdown`, as a signal does), so `status` says `stopping` meanwhile.
    let serving = CancellationToken::new();
    let server = tokio::spawn(server::serve(
        listener,
        handle.clone(),
        paths.clone(),
        (serving.clone(), shutdown.clone()),
        tracker.clone(),
        bus,
    ));
    if let Some(web) = web {
        tracing::info!("web dashboard: {}", web.link());
        tokio::spawn(web::serve(
            web,
            handle.clone(),
            paths.clone(),
            serving.clone(),
        ));
    }
    tokio::spawn(sdnotify::run(
        sdnotify::Notifier::from_env(),
        handle.clone(),
        shutdown.clone(),
    ));
    tracing::info!("serving");
    engine.run(rx, shutdown.clone()).await;
    serving.cancel();
    let _ = server.await;
    tracker.close();
    if tokio::time::timeout(Duration::from_secs(10), tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("some tasks did not end within 10s of shutdown");
    }
    cgroup::release_kept();
    tracing::info!("stopped");
    Ok(())
}
