//! Whether events may be applied: [`State::check_group`] decides before a group is written, and
//! [`State::apply`] checks again, so a journal line that does not apply is found on replay.

use std::collections::{HashMap, HashSet};

use super::{ApplyError, State};
use crate::domain::event::{BeadPatch, EventBody};
use crate::domain::id::BeadId;
use crate::domain::model::{Bead, MAX_BEAD_BYTES};

impl State {
    /// Checks that the events of one group can be applied in order. `created` collects the ids
    /// created earlier in the group, so a group may create a bead and then change it.
    pub fn check_group<'a>(
        &self,
        bodies: impl IntoIterator<Item = &'a EventBody>,
    ) -> Result<(), ApplyError> {
        let mut created = Created::default();
        for body in bodies {
            check_size(body)?;
            self.check(body, &mut created)?;
        }
        Ok(())
    }

    pub(super) fn check(&self, body: &EventBody, created: &mut Created) -> Result<(), ApplyError> {
        match body {
            EventBody::BeadCreated { bead, .. } => self.check_create(bead, created),
            EventBody::BeadUpdated { id, patch } => {
                self.check_exists(id, created)?;
                check_patch(id, patch)
            }
            EventBody::BeadStatus { id, .. } | EventBody::BeadComment { id, .. } => {
                self.check_exists(id, created)
            }
            EventBody::MoleculePoured { bead, steps, .. } => {
                self.check_exists(bead, created)?;
                steps.iter().try_for_each(|s| self.check_create(s, created))
            }
            EventBody::FixCreated {
                bead, fixes, step, ..
            } => {
                self.check_exists(bead, created)?;
                self.check_exists(fixes, created)?;
                self.check_create(step, created)
            }
            EventBody::StepDispatched { bead, step, .. }
            | EventBody::StepStarted { bead, step, .. }
            | EventBody::StepFinished { bead, step, .. }
            | EventBody::StepResult { bead, step, .. }
            | EventBody::StepRetry { bead, step, .. }
            | EventBody::StepEscalated { bead, step, .. }
            | EventBody::StepInterrupted { bead, step, .. }
            | EventBody::GateWaiting { bead, step }
            | EventBody::GatePassed { bead, step, .. }
            | EventBody::GateFailed { bead, step, .. }
            | EventBody::MergeHeld { bead, step, .. }
            | EventBody::MergeApproved { bead, step, .. }
            | EventBody::MergeStarted { bead, step }
            | EventBody::ForgePushed { bead, step, .. }
            | EventBody::ForgeOutdated { bead, step, .. }
            | EventBody::AgentTool { bead, step, .. } => {
                self.check_exists(bead, created)?;
                self.check_exists(step, created)
            }
            EventBody::MergeCompleted { bead, .. }
            | EventBody::MergeConflict { bead, .. }
            | EventBody::ForgeFeedback { bead, .. }
            | EventBody::ForgeIssueWritten { bead, .. }
            | EventBody::WorktreeRemoved { bead } => self.check_exists(bead, created),
            EventBody::ModelPaused { .. }
            | EventBody::DispatchPaused { .. }
            | EventBody::BudgetReached { .. }
            | EventBody::ClusterRefused { .. }
            | EventBody::ForgePaused { .. }
            | EventBody::ForgeResumed {}
            | EventBody::NotifySent { .. }
            | EventBody::NotifyFailed { .. }
            | EventBody::DaemonStarted { .. }
            | EventBody::DaemonStopping { .. } => Ok(()),
        }
    }

    fn check_exists(&self, id: &BeadId, created: &Created) -> Result<(), ApplyError> {
        if self.contains(id.as_str()) || created.ids.contains(id) {
            Ok(())
        } else {
            Err(ApplyError::NotFound(id.clone()))
        }
    }

    fn check_create(&self, bead: &Bead, created: &mut Created) -> Result<(), ApplyError> {
        if self.contains(bead.id.as_str()) || created.ids.contains(&bead.id) {
            return Err(ApplyError::Exists(bead.id.clone()));
        }
        let twin = self.case_twin(bead.id.as_str());
        if let Some(twin) = twin.or_else(|| created.case_twin(&bead.id)) {
            return Err(invalid(
                &bead.id,
                format!("bead `{twin}` has the same id but for case"),
            ));
        }
        check_new_bead(bead)?;
        created.insert(&bead.id);
        Ok(())
    }
}

/// The ids created earlier in a group being checked.
#[derive(Default)]
pub(super) struct Created {
    ids: HashSet<BeadId>,
    /// Those with an upper-case letter, by the id in lower case.
    folded: HashMap<Box<str>, BeadId>,
}

impl Created {
    fn insert(&mut self, id: &BeadId) {
        if id.as_str().bytes().any(|b| b.is_ascii_uppercase()) {
            let lower = id.as_str().to_ascii_lowercase().into_boxed_str();
            self.folded.insert(lower, id.clone());
        }
        self.ids.insert(id.clone());
    }

    /// An id created earlier in the group that differs from `id` only in case.
    fn case_twin(&self, id: &BeadId) -> Option<&BeadId> {
        if !id.as_str().bytes().any(|b| b.is_ascii_uppercase()) {
            return self.folded.get(id.as_str());
        }
        let lower = id.as_str().to_ascii_lowercase();
        let twin = self.folded.get(lower.as_str()).filter(|t| *t != id);
        twin.or_else(|| self.ids.get(lower.as_str()))
    }
}

fn invalid(id: &BeadId, problem: impl Into<String>) -> ApplyError {
    ApplyError::Invalid {
        id: id.clone(),
        problem: problem.into(),
    }
}

/// What every bead entering the store must satisfy beyond its JSON shape.
pub(super) fn check_new_bead(bead: &Bead) -> Result<(), ApplyError> {
    if bead.priority > crate::domain::model::MAX_PRIORITY {
        return Err(invalid(
            &bead.id,
            format!("priority {} is not 0–4", bead.priority),
        ));
    }
    for dep in &bead.dependencies {
        if dep.issue_id != bead.id {
            return Err(invalid(
                &bead.id,
                format!("a dependency names `{}` as its issue_id", dep.issue_id),
            ));
        }
        if dep.depends_on_id == bead.id {
            return Err(invalid(&bead.id, "it depends on itself"));
        }
    }
    Ok(())
}

fn check_patch(id: &BeadId, patch: &BeadPatch) -> Result<(), ApplyError> {
    if patch
        .priority
        .is_some_and(|p| p > crate::domain::model::MAX_PRIORITY)
    {
        return Err(invalid(id, "priority must be 0–4"));
    }
    for dep in &patch.add_dependencies {
        if dep.issue_id != *id || dep.depends_on_id == *id {
            return Err(invalid(
                id,
                "an added dependency must go from it to another bead",
            ));
        }
    }
    Ok(())
}

/// A bead, an update or a comment coming in is at most [`MAX_BEAD_BYTES`] of JSON. Checked
/// for what comes in only, not on replay: a journal written before the limit still loads.
fn check_size(body: &EventBody) -> Result<(), ApplyError> {
    let (id, what, size) = match body {
        EventBody::BeadCreated { bead, .. } => (&bead.id, "it is", json_size(bead)),
        EventBody::BeadUpdated { id, patch } => (id, "the update is", json_size(patch)),
        EventBody::BeadComment { id, comment } => (id, "the comment is", json_size(comment)),
        _ => return Ok(()),
    };
    if size > MAX_BEAD_BYTES {
        return Err(invalid(
            id,
            format!("{what} {size} bytes of JSON; a bead may be at most {MAX_BEAD_BYTES}"),
        ));
    }
    Ok(())
}

/// The length of `value` as JSON, counted without keeping the text.
fn json_size(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, nor can serializing the store's own types.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}
