//! A worker that cannot prepare attempts on its machine (its fetch, its worktree, its run
//! folder or its sandbox fails there) takes no orders for a while, twice as long each time in
//! a row, so that it does not take every order only to hand it back; its presence messages say
//! why (`ctl workers`). The daemon runs such an attempt again, not counted, on whichever worker
//! takes it next (see `runner::remote`).

use std::time::{Duration, Instant};

use crate::domain::router::Outcome;
use crate::domain::unavailable::Unavailable;

/// How long a worker waits after the first attempt in a row it could not prepare.
pub const FIRST_WAIT: Duration = Duration::from_secs(5);

/// The longest it waits.
pub const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// Whether the worker's last attempt could not be prepared, and until when it waits.
#[derive(Debug, Default)]
pub struct Trouble {
    last: Option<Failure>,
}

#[derive(Debug)]
struct Failure {
    reason: String,
    wait: Duration,
    until: Instant,
}

impl Trouble {
    /// Notes how an attempt ended at `now`: one the worker could not prepare starts a wait (or
    /// doubles it), any other outcome ends the trouble, and an end without an outcome (the
    /// attempt was stopped) changes nothing.
    pub fn note(&mut self, outcome: Option<&Outcome>, now: Instant) {
        match outcome {
            Some(Outcome::Unavailable {
                cause: Unavailable::Preparation,
                reason,
            }) => {
                let wait = self
                    .last
                    .as_ref()
                    .map_or(FIRST_WAIT, |f| (f.wait * 2).min(LONGEST_WAIT));
                self.last = Some(Failure {
                    reason: reason.clone(),
                    wait,
                    until: now + wait,
                });
            }
            Some(_) => self.last = None,
            None => {}
        }
    }

    /// How long the worker still waits before it takes orders again.
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        self.last
            .as_ref()
            .map(|f| f.until.saturating_duration_since(now))
            .filter(|left| !left.is_zero())
    }

    /// Why the worker holds back, for its presence messages, until an attempt is prepared.
    pub fn reason(&self, now: Instant) -> Option<String> {
        let failure = self.last.as_ref()?;
        Some(match self.wait(now) {
            Some(left) => format!(
                "could not prepare its last attempt: {} (takes orders again in {} s)",
                failure.reason,
                left.as_secs().max(1)
            ),
            None => format!("could not prepare its last attempt: {}", failure.reason),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unprepared(reason: &str) -> Outcome {
        Outcome::Unavailable {
            cause: Unavailable::Preparation,
            reason: reason.into(),
        }
    }

    #[test]
    fn each_attempt_in_a_row_it_cannot_prepare_doubles_the_wait_up_to_a_minute() {
        let (mut trouble, t0) = (Trouble::default(), Instant::now());
        assert_eq!(trouble.wait(t0), None);
        assert_eq!(trouble.reason(t0), None);
        trouble.note(Some(&unprepared("disk full")), t0);
        assert_eq!(trouble.wait(t0), Some(FIRST_WAIT));
        let said = trouble.reason(t0).expect("a reason");
        assert!(
            said.contains("disk full") && said.contains("in 5 s"),
            "{said}"
        );
        let mut waits = Vec::new();
        for _ in 0..5 {
            trouble.note(Some(&unprepared("disk full")), t0);
            waits.push(trouble.wait(t0).expect("waits").as_secs());
        }
        assert_eq!(waits, [10, 20, 40, 60, 60]);
        // Once the wait is over it takes orders again, and still says why until one works.
        let later = t0 + LONGEST_WAIT;
        assert_eq!(trouble.wait(later), None);
        assert!(trouble.reason(later).is_some_and(|r| !r.contains(" in ")));
    }

    #[test]
    fn an_attempt_it_prepares_ends_the_trouble_and_a_stopped_one_changes_nothing() {
        let (mut trouble, t0) = (Trouble::default(), Instant::now());
        trouble.note(Some(&unprepared("no bwrap")), t0);
        trouble.note(None, t0);
        assert_eq!(trouble.wait(t0), Some(FIRST_WAIT), "stopped: unchanged");
        let failed = Outcome::Failed {
            reason: "the agent crashed".into(),
        };
        trouble.note(Some(&failed), t0);
        assert_eq!((trouble.wait(t0), trouble.reason(t0)), (None, None));
        trouble.note(Some(&unprepared("no bwrap")), t0);
        assert_eq!(trouble.wait(t0), Some(FIRST_WAIT), "a new run of failures");
    }
}
