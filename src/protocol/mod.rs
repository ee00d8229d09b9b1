//! The control protocol, shared by the daemon and `catalyst ctl` (docs/protocol.md).
//!
//! NDJSON over a Unix socket. On connect the daemon sends a [`Hello`]; then each request line
//! `{"id":…,"method":"…","params":{…}}` gets one response line with the same `id`, either
//! `{"id":…,"result":…}` or `{"id":…,"error":{"code":"…","message":"…"}}`. After `subscribe`
//! the connection carries journal events, one per line, until the client hangs up.
//!
//! - [`request`]: the methods, declared once as the serde enum [`Method`] (its names derived
//!   from it), and how a request line is read;
//! - [`params`]: each method's parameters;
//! - [`response`] and [`show`]: each method's answer, and [`answer`] the engine's answer to any;
//! - [`stream`]: the lines after `subscribe` and `logs`;
//! - [`error`]: error codes.

use serde::{Deserialize, Serialize};

pub mod answer;
pub mod error;
pub mod params;
pub mod request;
pub mod response;
pub mod show;
pub mod stream;

pub use answer::Answer;
pub use error::{ErrorCode, RpcError};
pub use params::{
    ApproveParams, BeadInput, CloseParams, CommentParams, HookParams, IdParams, ImportParams,
    ListParams, LogsParams, PauseParams, RejectParams, Search, ShowParams, SubscribeParams,
    UpdateParams, TOOL_USED_EVENT,
};
pub use request::{known_types, parse_request, Method, Request, RequestLine};
pub use response::{
    Approval, Approved, BeadList, BeadSummary, BlockedBead, BoardAnswer, BudgetStopView, Cancelled,
    Card, Commented, DispatchHold, Exported, ForgePause, HeldMerge, HookAnswer, HookDecision,
    Imported, LaneCards, ModelPauseView, PauseState, RefusedFile, RefusedReload, Rejected,
    Reloaded, Response, Retried, RunningStep, StatusAnswer, StatusChanged, Stopping, Submitted,
    Updated, WaitingPullRequest, WorkerView, WorkersAnswer,
};
pub use show::{GateCommand, RunFiles, RunRecord, ShowAnswer, StepDetail, StepView};
pub use stream::{LogData, LogEnd, LogLine, LogsOpened, StreamEnd, StreamLine, Subscribed};

/// Protocol version sent in the hello line.
pub const PROTOCOL: u32 = 1;

/// The longest request line accepted, in bytes (newline excluded).
pub const MAX_LINE: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    #[serde(rename = "type")]
    pub kind: String,
    pub protocol: u32,
    pub version: String,
    pub pid: u32,
}

impl Hello {
    pub fn new() -> Hello {
        Hello {
            kind: "hello".into(),
            protocol: PROTOCOL,
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
        }
    }
}

impl Default for Hello {
    fn default() -> Self {
        Hello::new()
    }
}
