//! What the engine is told, and the handle other tasks hold to tell it. Event sources send
//! their own types; the `From` impls here map them to [`Input`].

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use crate::daemon::beads::follow::BeadsFileRead;
use crate::daemon::beads::writeback;
use crate::daemon::fswatch::WorkspaceChange;
use crate::daemon::runner::hook_socket::Ask;
use crate::daemon::runner::{GitTaskError, StepDone};
use crate::daemon::store::StoreError;
use crate::protocol::{
    Answer, BeadInput, BeadList, BoardAnswer, ErrorCode, HookAnswer, IdParams, ListParams, Method,
    RpcError, ShowAnswer, ShowParams, StatusAnswer, Submitted,
};
use std::sync::Arc;

use super::error::LoadError;
use super::reports::{InboxFile, InboxSettled, MergeReport, Recovered};
use super::summary::Summary;
use super::Loaded;
use crate::domain::id::BeadId;

/// What the engine is told.
#[derive(Debug)]
pub enum Input {
    /// A control request, answered on `reply` once its events are durable. The methods a
    /// connection serves itself (a stream, `shutdown`, `workers`, `show` with the run folders)
    /// are refused: the server never sends them.
    Request {
        method: Method,
        reply: oneshot::Sender<Result<Answer, RpcError>>,
    },
    /// The dashboard's board: each lane's count and its first `cards` beads. Not a socket
    /// method: `status` and `list` say the same to scripts.
    Board {
        cards: usize,
        reply: oneshot::Sender<Result<Answer, RpcError>>,
    },
    /// A step's attempt (agent or gate) ended.
    StepDone(Box<StepDone>),
    /// A worker on another machine took an agent attempt (`[cluster]`).
    StepStarted {
        step: BeadId,
        attempt: u32,
        worker: String,
    },
    /// A message from the cluster's subjects was refused (`[cluster]`): recorded.
    ClusterRefused {
        from: String,
        what: String,
        reason: String,
    },
    /// The daemon's fast-forward of the target branch ended (or could not start).
    MergeDone(Box<MergeReport>),
    /// The forge task ended (`[forge]`).
    ForgeDone(Box<super::forge::ForgeReport>),
    /// A bead's worktree and branch were removed (or could not be).
    Removed {
        work: BeadId,
        result: Result<(), GitTaskError>,
    },
    /// A file appeared in the inbox.
    Inbox(PathBuf),
    /// An inbox file was read.
    InboxRead(Box<InboxFile>),
    /// An inbox file was removed or moved aside after it was handled.
    InboxSettled(InboxSettled),
    /// Start-up recovery's look at the disk ended: what was running, what can go.
    Recovered(Box<Recovered>),
    /// The state folder was probed after a failed journal write (see `Engine::retry_storage`);
    /// `wait` is the pause before the next probe if this one failed.
    Probed {
        result: Result<(), StoreError>,
        wait: Duration,
    },
    /// Config, prompts or formulas changed on disk (or SIGHUP).
    Reload,
    /// Config, prompts and formulas were read again, for a reload asked by `reply` if any.
    Reloaded {
        /// What was read, and the files refused.
        loaded: Result<(Loaded, Vec<crate::protocol::RefusedFile>), LoadError>,
        reply: Option<oneshot::Sender<Result<Answer, RpcError>>>,
    },
    /// Asks for the [`Summary`]. Answered only once recovery is done, so the first answer also
    /// tells that the daemon is ready.
    Summary(oneshot::Sender<Summary>),
    /// The followed beads file was read (see `crate::daemon::beads::follow`).
    BeadsFile(Vec<crate::domain::model::Bead>),
    /// A write-back command ran (see `crate::daemon::beads::writeback`).
    WriteBack(writeback::Report),
    /// A webhook took a notice, or it was given up (see `crate::daemon::notify`).
    Notified(crate::daemon::notify::Delivered),
}

impl From<WorkspaceChange> for Input {
    fn from(change: WorkspaceChange) -> Input {
        match change {
            WorkspaceChange::InboxFile(path) => Input::Inbox(path),
            WorkspaceChange::Reload => Input::Reload,
        }
    }
}

impl From<BeadsFileRead> for Input {
    fn from(BeadsFileRead(beads): BeadsFileRead) -> Input {
        Input::BeadsFile(beads)
    }
}

impl From<crate::daemon::notify::Delivered> for Input {
    fn from(delivered: crate::daemon::notify::Delivered) -> Input {
        Input::Notified(delivered)
    }
}

impl From<writeback::Report> for Input {
    fn from(report: writeback::Report) -> Input {
        Input::WriteBack(report)
    }
}

/// The parts of the engine other tasks hold: where to send inputs, and the last durable seq.
#[derive(Clone, Debug)]
pub struct EngineHandle {
    pub tx: mpsc::Sender<Input>,
    pub seq: watch::Receiver<u64>,
    /// What followers of the events read: the store's feed of recent events, the published
    /// seq, and the journal's files (fixed once the engine starts: compaction runs only
    /// before).
    pub journal: crate::daemon::follow::Journal,
}

/// How an attempt's socket asks the engine about a hook call (see
/// [`crate::daemon::runner::hook_socket`]).
pub(super) fn hook_asker(tx: mpsc::Sender<Input>) -> Ask {
    Arc::new(move |params| {
        let tx = tx.clone();
        Box::pin(async move {
            let stopping = || RpcError::new(ErrorCode::ShuttingDown, "the daemon is stopping");
            let (reply, answer) = oneshot::channel();
            let method = Method::Hook(params);
            tx.send(Input::Request { method, reply })
                .await
                .map_err(|_| stopping())?;
            let answer = answer.await.map_err(|_| stopping())??;
            HookAnswer::try_from(answer).map_err(|_| another_answer("hook"))
        })
    })
}

impl EngineHandle {
    /// Sends a control request and waits for its answer.
    pub async fn request(&self, method: Method) -> Result<Answer, RpcError> {
        self.send(|reply| Input::Request { method, reply }).await
    }

    /// Sends `input`, made with the sender of its answer, and waits for that answer.
    async fn send(
        &self,
        input: impl FnOnce(oneshot::Sender<Result<Answer, RpcError>>) -> Input,
    ) -> Result<Answer, RpcError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(input(reply))
            .await
            .map_err(|_| RpcError::new(ErrorCode::ShuttingDown, "the daemon is stopping"))?;
        answer
            .await
            .map_err(|_| RpcError::new(ErrorCode::ShuttingDown, "the daemon is stopping"))?
    }

    /// Sends a request and takes out of its answer the kind it gets, `A`.
    async fn ask<A: TryFrom<Answer>>(&self, method: Method, name: &str) -> Result<A, RpcError> {
        A::try_from(self.request(method).await?).map_err(|_| another_answer(name))
    }

    pub async fn status(&self) -> Result<StatusAnswer, RpcError> {
        self.ask::<Box<StatusAnswer>>(Method::Status, "status")
            .await
            .map(|status| *status)
    }

    pub async fn ready(&self) -> Result<BeadList, RpcError> {
        self.ask(Method::Ready, "ready").await
    }

    pub async fn list(&self, p: ListParams) -> Result<BeadList, RpcError> {
        self.ask(Method::List(p), "list").await
    }

    /// The dashboard's board, with at most `cards` beads of each lane.
    pub async fn board(&self, cards: usize) -> Result<BoardAnswer, RpcError> {
        let answer = self.send(|reply| Input::Board { cards, reply }).await?;
        BoardAnswer::try_from(answer).map_err(|_| another_answer("board"))
    }

    /// `show` without the attempts' run folders (see `daemon::audit` for those).
    pub async fn show(&self, p: IdParams) -> Result<ShowAnswer, RpcError> {
        let p = ShowParams {
            id: p.id,
            runs: false,
        };
        self.ask::<Box<ShowAnswer>>(Method::Show(p), "show")
            .await
            .map(|show| *show)
    }

    pub async fn submit(&self, beads: Vec<BeadInput>) -> Result<Submitted, RpcError> {
        self.ask(Method::Submit(beads), "submit").await
    }

    /// The engine's [`Summary`]; `None` once the engine has stopped.
    pub async fn summary(&self) -> Option<Summary> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(Input::Summary(reply)).await.ok()?;
        answer.await.ok()
    }
}

/// The error for an answer of another kind than the request gets: a bug in the engine.
fn another_answer(method: &str) -> RpcError {
    RpcError::internal(format!(
        "the engine answered `{method}` with another kind of answer"
    ))
}
