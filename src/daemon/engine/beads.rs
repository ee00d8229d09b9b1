//! The engine's side of beads interchange: `import` and `export` requests, issues taken from
//! the followed beads file, and the write-back of their final status (see `crate::domain::beads`).

use serde_json::{json, Value};

use crate::daemon::beads::writeback::{self, Job, Report};
use crate::domain::beads::SYNC_KEY;
use crate::domain::event::{BeadPatch, Event, EventBody};
use crate::domain::model::{Bead, JsonMap, Status};
use crate::protocol::{Exported, Imported};

use super::error::EngineError;
use super::{Engine, Handled};

impl Engine {
    pub(super) fn import(&mut self, beads: Vec<Bead>) -> Handled<Imported> {
        let (events, report) = crate::domain::beads::import::plan(self.store.state(), beads);
        self.record_for_client(events)?;
        Ok(Imported(report))
    }

    pub(super) fn export(&self) -> Exported {
        Exported {
            beads: self.store.state().beads().cloned().collect(),
            seq: self.store.state().seq(),
        }
    }

    /// Takes the open issues of the followed beads file that carry the configured label and
    /// that the store does not have yet; an issue already taken is updated from the file only
    /// while it still waits (open, not poured): once the daemon runs it, the daemon owns it.
    pub(super) fn ingest_watched(&mut self, beads: Vec<Bead>) -> Result<(), EngineError> {
        let config = &self.loaded.config.beads;
        let label = config.label.clone();
        let source = config
            .watch
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut events = Vec::new();
        for mut bead in beads {
            if !bead.labels.contains(&label) {
                continue;
            }
            match self.store.state().get(bead.id.as_str()) {
                None if bead.status == Status::Open => {
                    tracing::info!(bead = %bead.id, "taking an issue from the beads file");
                    let mut marker = JsonMap::new();
                    marker.insert("source".into(), json!(source));
                    bead.metadata
                        .get_or_insert_with(JsonMap::new)
                        .insert(SYNC_KEY.into(), Value::Object(marker));
                    events.push(EventBody::BeadCreated {
                        bead: Box::new(bead),
                        by_person: false,
                    });
                }
                None => {}
                Some(ours) if !is_synced(ours) => {
                    tracing::warn!(bead = %bead.id, "the beads file has an issue whose id a bead of catalyst's own already has; ignored");
                }
                Some(ours) => {
                    if ours.status != Status::Open || self.active.contains(&ours.id) {
                        continue;
                    }
                    let patch = text_patch(ours, &bead);
                    if patch != BeadPatch::default() {
                        events.push(EventBody::BeadUpdated {
                            id: ours.id.clone(),
                            patch: Box::new(patch),
                        });
                    }
                }
            }
        }
        // One group per file read: a bad bead (refused by the store) is logged, the rest go in.
        let (good, bad): (Vec<_>, Vec<_>) = events
            .into_iter()
            .partition(|e| self.store.state().check_group(std::iter::once(e)).is_ok());
        for e in bad {
            tracing::warn!(bead = ?e.bead(), "the store refuses an issue of the beads file");
        }
        self.record(good).map(drop)
    }

    /// Queues the write-back of final statuses among `events` (called after every commit).
    pub(super) fn queue_writebacks(&mut self, events: &[Event]) {
        for event in events {
            if let EventBody::BeadStatus { id, status, reason } = &event.body {
                if matches!(status, Status::Closed | Status::Blocked) {
                    if let Some(bead) = self.store.state().get(id.as_str()).cloned() {
                        self.queue_writeback(&bead, reason.as_deref());
                    }
                }
            }
        }
    }

    /// Queues every final status not yet written back (at start-up).
    pub(super) fn resume_writebacks(&mut self) {
        let pending: Vec<Bead> = self
            .store
            .state()
            .beads()
            .filter(|b| matches!(b.status, Status::Closed | Status::Blocked))
            .filter(|b| is_synced(b) && written(b) != Some(b.status.as_str()))
            .cloned()
            .collect();
        for bead in pending {
            let reason = bead.close_reason.clone();
            self.queue_writeback(&bead, reason.as_deref());
        }
    }

    fn queue_writeback(&mut self, bead: &Bead, reason: Option<&str>) {
        if !is_synced(bead) || written(bead) == Some(bead.status.as_str()) {
            return;
        }
        let config = &self.loaded.config.beads;
        let template = if bead.status == Status::Closed {
            &config.close_command
        } else {
            &config.update_command
        };
        let reason = reason
            .or(bead.close_reason.as_deref())
            .unwrap_or(bead.status.as_str());
        let job = Job {
            id: bead.id.clone(),
            status: bead.status.clone(),
            argv: writeback::render(template, &bead.id, &bead.status, reason),
            retry: std::time::Duration::from_secs(config.retry_secs),
        };
        let tx = self
            .tasks
            .writeback
            .get_or_insert_with(|| {
                writeback::spawn(self.paths.workspace.clone(), self.tasks.tx.clone())
            })
            .clone();
        let id = bead.id.clone();
        self.tasks.after_sync(move || {
            if tx.send(job).is_err() {
                tracing::error!(bead = %id, "the write-back task is gone; the status is written back after a restart");
            }
        });
    }

    pub(super) fn writeback_done(&mut self, report: Report) -> Result<(), EngineError> {
        match report {
            Report::Done { id, status } => {
                let Some(bead) = self.store.state().get(id.as_str()) else {
                    return Ok(());
                };
                tracing::info!(bead = %id, status = %status, "wrote the status back to beads");
                let mut marker = bead
                    .metadata
                    .as_ref()
                    .and_then(|m| m.get(SYNC_KEY))
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                marker.insert("written".into(), json!(status));
                let mut metadata = JsonMap::new();
                metadata.insert(SYNC_KEY.into(), Value::Object(marker));
                self.record(vec![EventBody::BeadUpdated {
                    id,
                    patch: Box::new(BeadPatch {
                        metadata: Some(metadata),
                        ..Default::default()
                    }),
                }])?;
            }
            Report::Failed {
                id,
                status,
                attempt,
                error,
                retry_in,
            } => {
                tracing::warn!(bead = %id, status = %status, attempt, retry_in_secs = retry_in.as_secs(), error = %error, "cannot write the status back to beads; will try again");
                if attempt == 1 && self.store.state().contains(id.as_str()) {
                    let text = format!(
                        "[daemon] WRITE-BACK FAILED: {error} (trying again until it succeeds)"
                    );
                    if let Some(bead) = self.store.state().get(id.as_str()).cloned() {
                        let comment = self.comment(&bead, text);
                        self.record(vec![comment])?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether a bead was taken from the followed beads file.
fn is_synced(bead: &Bead) -> bool {
    bead.metadata
        .as_ref()
        .is_some_and(|m| m.contains_key(SYNC_KEY))
}

/// The status last written back to beads.
fn written(bead: &Bead) -> Option<&str> {
    bead.metadata
        .as_ref()?
        .get(SYNC_KEY)?
        .get("written")?
        .as_str()
}

/// The fields a person edits in beads, where the file's issue differs from ours.
fn text_patch(ours: &Bead, theirs: &Bead) -> BeadPatch {
    let changed = |a: &Option<String>, b: &Option<String>| (a != b).then(|| b.clone());
    BeadPatch {
        title: (ours.title != theirs.title).then(|| theirs.title.clone()),
        description: changed(&ours.description, &theirs.description),
        design: changed(&ours.design, &theirs.design),
        acceptance_criteria: changed(&ours.acceptance_criteria, &theirs.acceptance_criteria),
        notes: changed(&ours.notes, &theirs.notes),
        priority: (ours.priority != theirs.priority).then_some(theirs.priority),
        labels: (ours.labels != theirs.labels).then(|| theirs.labels.clone()),
        ..Default::default()
    }
}
