//! [`Answer`]: the engine's answer to any request, one variant per kind of answer (the
//! structs are in [`super::response`] and [`super::show`]).

use serde::Serialize;

use super::response::{
    Approved, BeadList, BoardAnswer, Cancelled, Commented, Exported, HookAnswer, Imported,
    PauseState, Rejected, Reloaded, Retried, StatusAnswer, StatusChanged, Submitted, Updated,
};
use super::show::ShowAnswer;

/// Everything the engine answers, one variant per kind of answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Status(Box<StatusAnswer>),
    Beads(BeadList),
    Board(BoardAnswer),
    Show(Box<ShowAnswer>),
    Submitted(Submitted),
    Updated(Updated),
    Commented(Commented),
    StatusChanged(StatusChanged),
    Approved(Approved),
    Rejected(Rejected),
    Retried(Retried),
    Cancelled(Cancelled),
    Paused(PauseState),
    Reloaded(Reloaded),
    Hook(HookAnswer),
    Imported(Imported),
    Exported(Exported),
}
