//! `GET /events`: the journal's events as Server-Sent Events, the same lines as the control
//! socket's `subscribe` sends, each with its seq as the event's `id`. A client that reconnects
//! with `Last-Event-ID` (as `EventSource` does by itself) gets every event after that seq, so a
//! dropped connection loses nothing. `?since=N` asks for the events after N on the first
//! connection (without either, only new events); `?bead=` and `?types=a,b` filter as
//! `subscribe` does.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;

use crate::daemon::follow::{Filter, Follower};
use crate::daemon::store::feed::Line;

use super::Shared;

#[derive(Debug, Default, Deserialize)]
pub struct EventsQuery {
    since: Option<u64>,
    bead: Option<String>,
    /// Event types, separated by commas.
    types: Option<String>,
}

pub async fn events(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<EventsQuery>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let journal = shared.engine.journal.clone();
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let since = resumed
        .or(query.since)
        .unwrap_or_else(|| *journal.seq.borrow());
    let filter = Filter {
        bead: query.bead.filter(|b| !b.is_empty()),
        types: query.types.map(|t| {
            t.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        }),
    };
    let follower = Follower::new(journal, since, filter);
    let stopping = shared.shutdown.clone();
    let stream = futures::stream::unfold(
        (follower, VecDeque::<Line>::new()),
        move |(mut follower, mut pending)| {
            let stopping = stopping.clone();
            async move {
                loop {
                    if let Some((seq, line)) = pending.pop_front() {
                        let event = Event::default().id(seq.to_string()).data(&*line);
                        return Some((Ok(event), (follower, pending)));
                    }
                    match follower.read().await {
                        Ok(lines) if !lines.is_empty() => {
                            pending.extend(lines);
                            continue;
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot read the journal for a web follower");
                            return None;
                        }
                    }
                    tokio::select! {
                        () = stopping.cancelled() => return None,
                        changed = follower.changed() => if !changed { return None },
                    }
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
