//! The agent slots: at most `max_agents` agent processes run at once, while up to a few more
//! dispatched steps are made ready (worktree, run folder, socket) to start the moment a slot
//! frees (docs/ARCHITECTURE.md, "Steps are made ready ahead of their agent slot").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The daemon's agent slots, one per agent that may run; resized when a reload changes
/// `max_agents`, so that agents started under the old config count against the new one.
#[derive(Debug)]
pub struct AgentSlots {
    slots: Arc<Semaphore>,
    size: Mutex<usize>,
    /// Slots to give up as the agents holding them end (a resize to fewer than are taken).
    owed: Arc<AtomicUsize>,
}

/// One agent slot, held by an agent process while it runs.
#[derive(Debug)]
pub struct AgentSlot {
    permit: Option<OwnedSemaphorePermit>,
    owed: Arc<AtomicUsize>,
}

impl Drop for AgentSlot {
    fn drop(&mut self) {
        let owing = self
            .owed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if let Some(permit) = self.permit.take().filter(|_| owing) {
            permit.forget();
        }
    }
}

impl AgentSlots {
    pub fn new(size: usize) -> AgentSlots {
        AgentSlots {
            slots: Arc::new(Semaphore::new(size)),
            size: Mutex::new(size),
            owed: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Makes it `size` slots. Slots taken when there are fewer are given up as their agents
    /// end; until then more agents than `size` may still be running, and none starts.
    pub fn resize(&self, size: usize) {
        let mut current = self.size.lock().unwrap_or_else(|e| e.into_inner());
        if size > *current {
            let more = size - *current;
            // What is owed first: those slots are still held, and now stay.
            let owed = self
                .owed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |owed| {
                    Some(owed - owed.min(more))
                })
                .unwrap_or_else(|owed| owed);
            self.slots.add_permits(more - owed.min(more));
        } else if size < *current {
            let fewer = *current - size;
            let forgotten = self.slots.forget_permits(fewer);
            self.owed.fetch_add(fewer - forgotten, Ordering::SeqCst);
        }
        *current = size;
    }

    /// Waits in line (first come, first served) for a slot. `None` when `cancel` fires first.
    pub async fn take(&self, cancel: &CancellationToken) -> Option<AgentSlot> {
        tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            permit = Arc::clone(&self.slots).acquire_owned() => permit.ok().map(|p| AgentSlot {
                permit: Some(p),
                owed: Arc::clone(&self.owed),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn taken(slots: &AgentSlots) -> Option<AgentSlot> {
        tokio::time::timeout(
            Duration::from_millis(50),
            slots.take(&CancellationToken::new()),
        )
        .await
        .ok()
        .flatten()
    }

    #[tokio::test]
    async fn slots_are_given_in_turn_and_a_cancelled_wait_gets_none() {
        let slots = Arc::new(AgentSlots::new(1));
        let first = taken(&slots).await.expect("a free slot");
        assert!(taken(&slots).await.is_none(), "the only slot is taken");
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(slots.take(&cancel).await.is_none(), "a cancelled wait");
        let waiting = {
            let slots = Arc::clone(&slots);
            tokio::spawn(async move { slots.take(&CancellationToken::new()).await })
        };
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the slot is handed on")
            .expect("task");
        assert!(second.is_some());
    }

    #[tokio::test]
    async fn a_resize_counts_agents_already_running() {
        let slots = AgentSlots::new(2);
        let (a, b) = (taken(&slots).await, taken(&slots).await);
        assert!(a.is_some() && b.is_some());
        slots.resize(1);
        drop(a);
        assert!(
            taken(&slots).await.is_none(),
            "one agent still runs, and one is the new limit"
        );
        drop(b);
        let c = taken(&slots).await;
        assert!(c.is_some(), "its end frees the one slot");
        assert!(taken(&slots).await.is_none());
        slots.resize(3);
        let (d, e) = (taken(&slots).await, taken(&slots).await);
        assert!(
            d.is_some() && e.is_some(),
            "a larger limit gives more at once"
        );
        assert!(taken(&slots).await.is_none());
    }
}
