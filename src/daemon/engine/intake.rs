//! What comes into the engine and in what order: inbox files, handled one at a time in the
//! order they were noticed; inputs that arrive while start-up recovery runs, held until it is
//! done; and the numbers of new bead ids, which must not land on a branch an earlier store
//! left behind. The engine reads files and records beads; this is the order and the memory
//! those steps share, kept apart so it can be tested without an engine.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::domain::id::BeadId;

use super::Input;

#[derive(Debug, Default)]
pub(super) struct Intake {
    /// The inbox file being read, recorded or settled.
    current: Option<PathBuf>,
    /// Inbox files noticed, in order, each once.
    queue: VecDeque<PathBuf>,
    /// Inputs that arrived while start-up recovery ran, handled once it is done.
    recovering: Option<Vec<Input>>,
    /// The next number for generated ids (0: not yet computed from the store).
    pub(super) next_number: u64,
    /// Beads that had a branch when the daemon started, whoever made it: a new bead's id is
    /// none of them, so a store started over never numbers a bead onto an earlier one's branch.
    pub(super) branch_beads: HashSet<BeadId>,
}

impl Intake {
    /// A file appeared in the inbox: queued unless it already is. One being handled is
    /// queued again, so that a change after it was read is looked at.
    pub(super) fn noticed(&mut self, path: PathBuf) {
        if !self.queue.contains(&path) {
            self.queue.push_back(path);
        }
    }

    /// The next file to read, unless one is being handled; it is the one being handled from
    /// now on.
    pub(super) fn next_file(&mut self) -> Option<PathBuf> {
        if self.current.is_some() {
            return None;
        }
        let path = self.queue.pop_front()?;
        self.current = Some(path.clone());
        Some(path)
    }

    /// The file being handled is left for later (it is noticed again): the next one's turn.
    pub(super) fn let_go(&mut self) {
        self.current = None;
    }

    /// `path` is settled: if it was the file being handled, the next one's turn.
    pub(super) fn settled(&mut self, path: &Path) {
        if self.current.as_deref() == Some(path) {
            self.current = None;
        }
    }

    /// Start-up recovery began: inputs are held from now on (see [`Intake::hold`]).
    pub(super) fn begin_recovery(&mut self) {
        self.recovering = Some(Vec::new());
    }

    pub(super) fn recovering(&self) -> bool {
        self.recovering.is_some()
    }

    /// While recovery runs, keeps `input` for later, unless it is the recovery's own report
    /// (or a probe it waits on); returns the input to handle now.
    pub(super) fn hold(&mut self, input: Input) -> Option<Input> {
        match &mut self.recovering {
            Some(held) if !matches!(input, Input::Recovered(_) | Input::Probed { .. }) => {
                held.push(input);
                None
            }
            _ => Some(input),
        }
    }

    /// Recovery is done: the inputs it held, in the order they came.
    pub(super) fn recovered(&mut self) -> Vec<Input> {
        self.recovering.take().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_files_are_handled_one_at_a_time_in_the_order_noticed() {
        let mut intake = Intake::default();
        let (a, b) = (PathBuf::from("/inbox/a"), PathBuf::from("/inbox/b"));
        intake.noticed(a.clone());
        intake.noticed(b.clone());
        intake.noticed(a.clone());
        assert_eq!(intake.next_file(), Some(a.clone()));
        assert_eq!(intake.next_file(), None, "one file at a time");
        intake.settled(&b);
        assert_eq!(
            intake.next_file(),
            None,
            "another file's end is not this one's"
        );
        intake.settled(&a);
        assert_eq!(intake.next_file(), Some(b.clone()), "each once");
        intake.noticed(b.clone());
        intake.let_go();
        assert_eq!(
            intake.next_file(),
            Some(b),
            "one noticed while handled is read again"
        );
        intake.let_go();
        assert_eq!(intake.next_file(), None);
    }

    #[test]
    fn inputs_wait_for_recovery_except_its_own_report() {
        let mut intake = Intake::default();
        assert!(intake.hold(Input::Reload).is_some(), "nothing held before");
        intake.begin_recovery();
        assert!(intake.recovering());
        assert!(intake.hold(Input::Reload).is_none());
        assert!(intake.hold(Input::Inbox("/inbox/a".into())).is_none());
        assert!(matches!(
            intake.hold(Input::Recovered(Box::default())),
            Some(Input::Recovered(_))
        ));
        let held = intake.recovered();
        assert!(
            matches!(held.as_slice(), [Input::Reload, Input::Inbox(_)]),
            "{held:?}"
        );
        assert!(!intake.recovering());
        assert!(intake.hold(Input::Reload).is_some());
    }
}
