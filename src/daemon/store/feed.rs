//! The journal's most recent events in memory, for everyone who follows the journal (the
//! control socket's `subscribe`, the web's `/events`): the journal hands each event's line to
//! the feed as it appends it, so following the events costs no file read per event per
//! follower. What the feed no longer holds (older events, or more than a slow follower kept
//! up with) is read from the journal files (`daemon::follow`).
//!
//! The feed holds lines the journal wrote but has not yet made durable; a follower reads only
//! up to the seq the engine published after the fsync.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// How many events the feed keeps at most, and how many bytes of lines.
pub const KEEP_EVENTS: usize = 65_536;
pub const KEEP_BYTES: usize = 32 * 1024 * 1024;

/// An event as a follower receives it: its seq and its line as it was written (the event's
/// JSON, without the journal's checksum or the newline).
pub type Line = (u64, Arc<str>);

/// The most recent events of the journal (see the module documentation).
#[derive(Debug)]
pub struct Feed {
    ring: Mutex<Ring>,
    keep_events: usize,
    keep_bytes: usize,
}

#[derive(Debug, Default)]
struct Ring {
    lines: VecDeque<Line>,
    bytes: usize,
}

impl Default for Feed {
    fn default() -> Feed {
        Feed::new(KEEP_EVENTS, KEEP_BYTES)
    }
}

impl Feed {
    /// A feed that keeps at most `events` events and `bytes` bytes of lines (at least one
    /// event, however long).
    pub fn new(events: usize, bytes: usize) -> Feed {
        Feed {
            ring: Mutex::new(Ring::default()),
            keep_events: events.max(1),
            keep_bytes: bytes,
        }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the events the journal just wrote, in seq order. A seq at or below the last one
    /// held means the journal was cut back and wrote those seqs again: the feed forgets what
    /// it held from there.
    pub fn push(&self, lines: impl IntoIterator<Item = Line>) {
        let mut ring = self.ring();
        for (seq, line) in lines {
            while ring.lines.back().is_some_and(|(last, _)| *last >= seq) {
                if let Some((_, gone)) = ring.lines.pop_back() {
                    ring.bytes -= gone.len();
                }
            }
            ring.bytes += line.len();
            ring.lines.push_back((seq, line));
            while ring.lines.len() > self.keep_events
                || (ring.bytes > self.keep_bytes && ring.lines.len() > 1)
            {
                if let Some((_, gone)) = ring.lines.pop_front() {
                    ring.bytes -= gone.len();
                }
            }
        }
    }

    /// Appends to `out` the events after `after` up to `upto`, when the feed holds all of
    /// them; `false` when the first of them is older than what it holds (read the files).
    pub fn read(&self, after: u64, upto: u64, out: &mut Vec<Line>) -> bool {
        if after >= upto {
            return true;
        }
        let ring = self.ring();
        let Some((first, _)) = ring.lines.front() else {
            return false;
        };
        if *first > after + 1 {
            return false;
        }
        // Seqs are consecutive in the ring: the event after `after` is at this index.
        let start = usize::try_from(after + 1 - first).unwrap_or(usize::MAX);
        out.extend(
            ring.lines
                .iter()
                .skip(start)
                .take_while(|(seq, _)| *seq <= upto)
                .cloned(),
        );
        true
    }

    /// The oldest seq the feed holds.
    pub fn first(&self) -> Option<u64> {
        self.ring().lines.front().map(|(seq, _)| *seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64) -> Line {
        (seq, format!("{{\"seq\":{seq}}}").into())
    }

    fn read(feed: &Feed, after: u64, upto: u64) -> Option<Vec<u64>> {
        let mut out = Vec::new();
        feed.read(after, upto, &mut out)
            .then(|| out.into_iter().map(|(seq, _)| seq).collect())
    }

    #[test]
    fn reads_what_it_holds_up_to_the_durable_seq() {
        let feed = Feed::new(10, 1 << 20);
        feed.push((1..=5).map(line));
        assert_eq!(read(&feed, 0, 5), Some(vec![1, 2, 3, 4, 5]));
        assert_eq!(read(&feed, 2, 4), Some(vec![3, 4]), "not past `upto`");
        assert_eq!(read(&feed, 5, 5), Some(vec![]));
    }

    #[test]
    fn an_empty_feed_sends_readers_to_the_files() {
        let feed = Feed::new(10, 1 << 20);
        assert_eq!(read(&feed, 0, 3), None);
        assert_eq!(read(&feed, 3, 3), Some(vec![]), "nothing to read");
    }

    #[test]
    fn it_forgets_the_oldest_past_its_limits() {
        let feed = Feed::new(4, 1 << 20);
        feed.push((1..=10).map(line));
        assert_eq!(feed.first(), Some(7));
        assert_eq!(read(&feed, 5, 10), None, "seq 6 is gone");
        assert_eq!(read(&feed, 6, 10), Some(vec![7, 8, 9, 10]));

        let by_bytes = Feed::new(100, 3 * line(10).1.len());
        by_bytes.push((1..=10).map(line));
        assert_eq!(by_bytes.first(), Some(8));
    }

    #[test]
    fn seqs_written_again_replace_what_it_held() {
        let feed = Feed::new(10, 1 << 20);
        feed.push((1..=5).map(line));
        feed.push([(4, Arc::from("again"))]);
        let mut out = Vec::new();
        assert!(feed.read(0, 5, &mut out));
        assert_eq!(out.len(), 4);
        assert_eq!(&*out[3].1, "again");
    }
}
