//! The tasks the engine starts and how they reach it: blocking work and attempts that report
//! back as an [`Input`], and the effects held until the events they follow from are durable
//! (see `Engine::end_batch`). A task that panics reports that too, so nothing waits for it
//! forever.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::daemon::beads::writeback;

use super::{Input, StepDone};

/// The tasks the engine starts, and how they reach it.
#[derive(Debug)]
pub(super) struct Tasks {
    pub(super) tx: mpsc::Sender<Input>,
    pub(super) tracker: TaskTracker,
    /// Cancels running agents: fired at the end of the shutdown grace period.
    pub(super) agents: CancellationToken,
    /// Write-backs to beads, started with the first one.
    pub(super) writeback: Option<mpsc::UnboundedSender<writeback::Job>>,
    /// While the engine handles a batch of inputs whose events share one fsync: the effects
    /// of those events (tasks, answers, write-backs), started once the fsync is done.
    pub(super) held: Option<Effects>,
}

/// Effects held until the events they follow from are durable.
#[derive(Default)]
pub(super) struct Effects(pub(super) Vec<Box<dyn FnOnce() + Send>>);

impl std::fmt::Debug for Effects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} effects held", self.0.len())
    }
}

impl Tasks {
    /// Runs `effect` once what was recorded before it is durable: at once, or at the end of
    /// the batch being handled.
    pub(super) fn after_sync(&mut self, effect: impl FnOnce() + Send + 'static) {
        match &mut self.held {
            Some(held) => held.0.push(Box::new(effect)),
            None => effect(),
        }
    }

    /// Runs `work` on a blocking thread, which sends what it returns to the engine itself (no
    /// task on the runtime waits for it: one hand-off fewer). A task whose engine is gone has
    /// no one to tell: the daemon is stopping, and the next start looks again at whatever the
    /// task left. `panicked` says what to report when `work` panics, from the panic's message.
    pub(super) fn blocking<F, P>(&mut self, work: F, panicked: P)
    where
        F: FnOnce() -> Input + Send + 'static,
        P: FnOnce(String) -> Input + Send + 'static,
    {
        let (tx, tracker) = (self.tx.clone(), self.tracker.clone());
        self.after_sync(move || {
            // Counted by the tracker, which the daemon's stop waits on, until it is dropped.
            let running = tracker.token();
            tokio::task::spawn_blocking(move || {
                let input = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
                    .unwrap_or_else(|payload| panicked(panic_message(payload.as_ref())));
                let _ = tx.blocking_send(input);
                drop(running);
            });
        });
    }
}

impl Tasks {
    /// Runs `run` in a task of its own, which sends what it returns to the engine.
    pub(super) fn spawn<F>(&mut self, run: F)
    where
        F: std::future::Future<Output = Input> + Send + 'static,
    {
        let (tx, tracker) = (self.tx.clone(), self.tracker.clone());
        self.after_sync(move || {
            tracker.spawn(async move {
                let _ = tx.send(run.await).await;
            });
        });
    }

    /// Runs an attempt in a task of its own and sends its end to the engine. An attempt whose
    /// task panics ends as a failure with the panic's message (from `failed`), so its slot is
    /// freed and the step is retried like any failure, never left running for good.
    pub(super) fn attempt<F>(
        &mut self,
        run: F,
        failed: impl FnOnce(String) -> StepDone + Send + 'static,
    ) where
        F: std::future::Future<Output = StepDone> + Send + 'static,
    {
        let (tx, tracker) = (self.tx.clone(), self.tracker.clone());
        self.after_sync(move || {
            tracker.spawn(async move {
                let done = caught(run, failed).await;
                // The engine is gone only when the daemon is stopping; the journal then says
                // the step was running, and the next start re-runs it.
                let _ = tx.send(Input::StepDone(Box::new(done))).await;
            });
        });
    }
}

/// `run`'s end, or `failed(<why>)` when it panicked. It runs in the caller's task: a second
/// task to catch the panic would cost a hand-off per attempt.
async fn caught<F>(run: F, failed: impl FnOnce(String) -> StepDone) -> StepDone
where
    F: std::future::Future<Output = StepDone> + Send + 'static,
{
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(run).catch_unwind().await {
        Ok(done) => done,
        Err(payload) => {
            let why = panic_message(payload.as_ref());
            tracing::error!(error = %why, "an attempt's task panicked; the attempt has failed");
            failed(format!(
                "the daemon's task for this attempt panicked: {why}"
            ))
        }
    }
}

/// What a panic said (its payload, when it is a message).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::id::BeadId;
    use crate::domain::model::Role;
    use crate::domain::router::Outcome;

    #[tokio::test]
    async fn a_blocking_task_tells_the_engine_itself_its_panic_too_and_is_waited_for() {
        let (tx, mut rx) = mpsc::channel(4);
        let mut tasks = Tasks {
            tx,
            tracker: TaskTracker::new(),
            agents: CancellationToken::new(),
            writeback: None,
            held: None,
        };
        let work = BeadId::new("cat-1").expect("id");
        let removed = |work: BeadId, result| Input::Removed { work, result };
        let (w1, w2) = (work.clone(), work.clone());
        tasks.blocking(
            move || removed(w1, Ok(())),
            move |_| unreachable!("it did not panic"),
        );
        let w3 = work.clone();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        tasks.blocking(
            move || {
                let _ = wait.recv();
                panic!("a bug in the task")
            },
            move |why| removed(w3, Err(crate::daemon::runner::GitTaskError::Panicked(why))),
        );
        let within = std::time::Duration::from_secs(10);
        match tokio::time::timeout(within, rx.recv()).await {
            Ok(Some(Input::Removed {
                work,
                result: Ok(()),
            })) => assert_eq!(work, w2),
            other => panic!("{other:?}"),
        }
        tasks.tracker.close();
        let mut stopped = std::pin::pin!(tasks.tracker.wait());
        assert!(
            futures::poll!(&mut stopped).is_pending(),
            "the daemon's stop waits for the task still running"
        );
        go.send(()).expect("the task waits");
        match tokio::time::timeout(within, rx.recv()).await {
            Ok(Some(Input::Removed { result: Err(e), .. })) => {
                assert_eq!(e.to_string(), "git task panicked: a bug in the task")
            }
            other => panic!("{other:?}"),
        }
        tokio::time::timeout(within, stopped)
            .await
            .expect("the tracker is done once the task ended");
    }

    #[tokio::test]
    async fn an_attempt_whose_task_panics_ends_as_a_failure_saying_why() {
        let work = BeadId::new("cat-1").expect("id");
        let step = BeadId::new("cat-1.gate").expect("id");
        let failed = |why: String| StepDone::failed(&work, &step, Role::Gate, 1, why);
        let boom = async {
            let deadline = std::time::Instant::now();
            let _ = deadline + std::time::Duration::from_secs(u64::MAX);
            unreachable!("adding an unbounded duration panics first")
        };
        let done = caught(boom, failed).await;
        match &done.outcome {
            Some(Outcome::Failed { reason }) => assert!(
                reason.starts_with("the daemon's task for this attempt panicked: overflow"),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
        let fine = StepDone::failed(&work, &step, Role::Gate, 2, "no".into());
        let done = caught(async move { fine }, failed).await;
        assert_eq!(done.attempt, 2, "a task that ends is its own end");
    }
}
