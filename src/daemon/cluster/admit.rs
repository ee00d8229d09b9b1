//! What the daemon takes from its workers: a lease, an end or a presence message is taken
//! only signed by the key `[cluster] workers` lists for the worker it names, and sent on that
//! worker's own subject (which a NATS server's permissions can keep to it). Anything else is
//! refused: logged, and recorded as a `cluster.refused` event, at most [`RECORDED_PER_MINUTE`]
//! a minute and one per sender, kind of message and reason every [`SAME_AGAIN`], so that a
//! flood of junk or a worker left out of the list cannot fill the journal.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use super::trust::{self, KeyError, Refusal, Verifier};
use crate::domain::cluster::{sender_of, Kind};

/// The most refusals recorded in the journal in a minute; the rest are counted and logged.
pub const RECORDED_PER_MINUTE: u32 = 60;

/// How long the same refusal (sender, kind of message, reason) is not recorded again: a
/// worker the daemon does not list says it is there every two seconds.
pub const SAME_AGAIN: Duration = Duration::from_secs(600);

/// A refusal as the engine records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The sender the message's subject names.
    pub from: String,
    /// The kind of message.
    pub what: &'static str,
    pub reason: String,
}

/// Where refusals go to be recorded (the engine's journal).
pub type Record = Arc<dyn Fn(Refused) + Send + Sync>;

/// The workers the daemon trusts, and the record of what it refused.
pub struct Admit {
    workers: BTreeMap<String, Verifier>,
    record: Record,
    window: Mutex<(Instant, u32)>,
    /// When each refusal was last recorded, by sender, kind of message and reason.
    recent: Mutex<HashMap<(String, &'static str, &'static str), Instant>>,
    refused: AtomicU64,
}

impl Admit {
    /// Trusts `workers` (name → public key), recording refusals with `record`.
    pub fn new(workers: &BTreeMap<String, String>, record: Record) -> Result<Admit, KeyError> {
        let workers = workers
            .iter()
            .map(|(name, key)| Ok((name.clone(), Verifier::new(key)?)))
            .collect::<Result<_, KeyError>>()?;
        Ok(Admit {
            workers,
            record,
            window: Mutex::new((Instant::now(), 0)),
            recent: Mutex::default(),
            refused: AtomicU64::new(0),
        })
    }

    /// The message of `kind` that came on `subject`, if the worker it names (`worker_of`)
    /// is listed, signed it with its key, and sent it on its own subject.
    pub fn check<T: DeserializeOwned>(
        &self,
        subject: &str,
        payload: &[u8],
        kind: Kind,
        worker_of: impl Fn(&T) -> &str,
    ) -> Result<T, Refusal> {
        let (key, value) = trust::open::<T>(payload, kind)?;
        let worker = worker_of(&value);
        let listed = self.workers.get(worker).ok_or_else(|| Refusal::Unlisted {
            worker: worker.to_owned(),
        })?;
        if listed.public_key() != key {
            return Err(Refusal::WrongKey {
                worker: worker.to_owned(),
                key,
            });
        }
        if sender_of(subject) != worker {
            return Err(Refusal::WrongSubject {
                worker: worker.to_owned(),
                subject: subject.to_owned(),
            });
        }
        Ok(value)
    }

    /// Logs and records that a message of `kind` on `subject` was refused.
    pub fn refuse(&self, subject: &str, kind: Kind, refusal: &Refusal) {
        let total = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let from = sender_of(subject).to_owned();
        let now = Instant::now();
        let again = {
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            if recent.len() > 10_000 {
                recent.retain(|_, at| now.duration_since(*at) < SAME_AGAIN);
            }
            let key = (from.clone(), kind.as_str(), refusal.code());
            match recent.get(&key) {
                Some(at) if now.duration_since(*at) < SAME_AGAIN => true,
                _ => {
                    recent.insert(key, now);
                    false
                }
            }
        };
        if again {
            tracing::debug!(%subject, what = kind.as_str(), %refusal, total, "refused a message on the cluster's subjects again");
            return;
        }
        let recorded = {
            let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
            if window.0.elapsed() >= Duration::from_secs(60) {
                if window.1 > RECORDED_PER_MINUTE {
                    tracing::warn!(
                        unrecorded = window.1 - RECORDED_PER_MINUTE,
                        "more refused cluster messages in the last minute than were recorded"
                    );
                }
                *window = (Instant::now(), 0);
            }
            window.1 += 1;
            window.1 <= RECORDED_PER_MINUTE
        };
        if !recorded {
            return;
        }
        tracing::warn!(%subject, what = kind.as_str(), %refusal, total, "refused a message on the cluster's subjects");
        (self.record)(Refused {
            from,
            what: kind.as_str(),
            reason: refusal.to_string(),
        });
    }

    /// How many messages were refused since the daemon started.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::cluster::trust::Signer;
    use crate::domain::cluster::Lease;

    fn lease(worker: &str) -> Lease {
        Lease {
            dispatch: "d-1".into(),
            worker: worker.into(),
            seq: 1,
        }
    }

    #[test]
    fn a_message_is_taken_from_a_listed_worker_under_its_key_on_its_subject_only() {
        let (w1, w2, stranger) = (Signer::new(), Signer::new(), Signer::new());
        let listed = [
            ("w1".to_owned(), w1.public_key()),
            ("w2".to_owned(), w2.public_key()),
        ]
        .into();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record: Record = {
            let seen = seen.clone();
            Arc::new(move |r| seen.lock().expect("lock").push(r))
        };
        let admit = Admit::new(&listed, record).expect("keys");
        let check = |subject: &str, payload: &[u8]| {
            admit.check::<Lease>(subject, payload, Kind::Lease, |l| &l.worker)
        };
        let good = w1.seal(Kind::Lease, &lease("w1"));
        assert_eq!(check("c.lease.w1", &good), Ok(lease("w1")));
        let cases = [
            (
                "c.lease.w1",
                w1.seal(Kind::Lease, &lease("w1")),
                "c.lease.w2",
                "subject",
            ),
            (
                "c.lease.w1",
                w2.seal(Kind::Lease, &lease("w1")),
                "",
                "not its key",
            ),
            (
                "c.lease.w3",
                stranger.seal(Kind::Lease, &lease("w3")),
                "",
                "does not list",
            ),
            (
                "c.lease.w1",
                serde_json::to_vec(&lease("w1")).expect("json"),
                "",
                "not signed",
            ),
        ];
        for (subject, payload, other, said) in cases {
            let subject = if other.is_empty() { subject } else { other };
            let refused = check(subject, &payload).unwrap_err();
            assert!(refused.to_string().contains(said), "{said}: {refused}");
            admit.refuse(subject, Kind::Lease, &refused);
        }
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.len(), 4, "each a refusal of its own");
        assert_eq!((seen[2].from.as_str(), seen[2].what), ("w3", "lease"));
        assert_eq!(admit.refused(), 4);
    }

    #[test]
    fn refusals_past_sixty_a_minute_are_counted_not_recorded() {
        let seen = Arc::new(AtomicU64::new(0));
        let record: Record = {
            let seen = seen.clone();
            Arc::new(move |_| {
                seen.fetch_add(1, Ordering::Relaxed);
            })
        };
        let admit = Admit::new(&BTreeMap::new(), record).expect("no keys");
        for i in 0..100 {
            let subject = format!("c.end.x{i}");
            admit.refuse(&subject, Kind::End, &Refusal::NotSigned("junk".into()));
        }
        assert_eq!(seen.load(Ordering::Relaxed), u64::from(RECORDED_PER_MINUTE));
        assert_eq!(admit.refused(), 100);
    }

    #[test]
    fn the_same_refusal_is_recorded_once_in_ten_minutes() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record: Record = {
            let seen = seen.clone();
            Arc::new(move |r: Refused| seen.lock().expect("lock").push(r.reason))
        };
        let admit = Admit::new(&BTreeMap::new(), record).expect("no keys");
        let unlisted = Refusal::Unlisted {
            worker: "w9".into(),
        };
        for _ in 0..5 {
            admit.refuse("c.worker.w9", Kind::Presence, &unlisted);
        }
        admit.refuse("c.end.w9", Kind::End, &unlisted);
        admit.refuse("c.end.w9", Kind::End, &Refusal::NotSigned("junk".into()));
        assert_eq!(
            seen.lock().expect("lock").len(),
            3,
            "presence once, each end once"
        );
        assert_eq!(admit.refused(), 7);
    }
}
