//! [`Answer`]: the engine's answer to any request, one variant per kind of answer (the
//! structs are in [`super::response`] and [`super::show`]).
//!
//! It is what the engine's reply channel carries, written to the socket as the answer it holds
//! and never read back: a client reads each method's own answer type (see `cli::client`), and
//! the daemon's own callers take the answer they asked for out of it with `TryFrom`.

use serde::Serialize;

use super::response::{
    Approved, BeadList, BoardAnswer, Cancelled, Commented, Exported, HookAnswer, Imported,
    PauseState, Rejected, Reloaded, Retried, StatusAnswer, StatusChanged, Submitted, Updated,
};
use super::show::ShowAnswer;

/// Declares [`Answer`] and, for each kind of answer, the `TryFrom<Answer>` that takes it out
/// (giving the answer back when it is another kind), from one list.
macro_rules! answers {
    ($($(#[$doc:meta])* $variant:ident($answer:ty),)*) => {
        /// Everything the engine answers, one variant per kind of answer.
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum Answer {
            $($(#[$doc])* $variant($answer),)*
        }

        $(
            impl TryFrom<Answer> for $answer {
                type Error = Answer;

                fn try_from(answer: Answer) -> Result<$answer, Answer> {
                    match answer {
                        Answer::$variant(answer) => Ok(answer),
                        other => Err(other),
                    }
                }
            }
        )*
    };
}

answers! {
    Status(Box<StatusAnswer>),
    /// `list` and `ready`.
    Beads(BeadList),
    /// The dashboard's board.
    Board(BoardAnswer),
    Show(Box<ShowAnswer>),
    Submitted(Submitted),
    Updated(Updated),
    Commented(Commented),
    /// `close` and `reopen`.
    StatusChanged(StatusChanged),
    Approved(Approved),
    Rejected(Rejected),
    Retried(Retried),
    Cancelled(Cancelled),
    /// `pause` and `resume`.
    Paused(PauseState),
    Reloaded(Reloaded),
    Hook(HookAnswer),
    Imported(Imported),
    Exported(Exported),
}
