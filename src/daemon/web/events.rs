//! `GET /events`: the journal's events as Server-Sent Events, the same lines as the control
//! socket's `subscribe` sends, each with its seq as the event's `id`. A client that reconnects
//! with `Last-Event-ID` (as `EventSource` does by itself) gets every event after that seq, so a
//! dropped connection loses nothing. `?since=N` asks for the events after N on the first
//! connection (without either, only new events); `?bead=` and `?types=a,b` filter as
//! `subscribe` does.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::daemon::follow::{Filter, Follower};

use super::Shared;

/// A comment line sent when nothing else was for this long, so that proxies and browsers keep
/// an idle stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

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
) -> Response {
    let journal = shared.engine.journal.clone();
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let since = resumed
        .or(query.since)
        .unwrap_or_else(|| *journal.seq.borrow());
    // The socket's `subscribe`, with its checks: an unknown type would wait forever.
    let params = crate::protocol::SubscribeParams {
        since: Some(since),
        bead: query.bead.filter(|b| !b.is_empty()),
        types: query.types.map(|t| {
            t.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        }),
        follow: true,
    };
    let params = match crate::protocol::known_types(params) {
        Ok(p) => p,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("catalyst: {}\n", e.message),
            )
                .into_response()
        }
    };
    let filter = Filter::from(&params);
    let follower = Follower::new(journal, since, filter);
    let stopping = shared.shutdown.clone();
    // Each piece of the body is every event a read found, so a burst goes out in a few
    // writes rather than one per event (as the socket's `subscribe` does).
    let stream = futures::stream::unfold(follower, move |mut follower| {
        let stopping = stopping.clone();
        async move {
            loop {
                match follower.read().await {
                    Ok(lines) if !lines.is_empty() => {
                        let mut chunk = String::new();
                        for (seq, line) in lines {
                            chunk.push_str("id: ");
                            chunk.push_str(&seq.to_string());
                            chunk.push_str("\ndata: ");
                            chunk.push_str(&line);
                            chunk.push_str("\n\n");
                        }
                        return Some((Ok::<_, Infallible>(Bytes::from(chunk)), follower));
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
                    () = tokio::time::sleep(KEEP_ALIVE) => {
                        return Some((Ok(Bytes::from_static(b": keep-alive\n\n")), follower));
                    }
                }
            }
        }
    });
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}
