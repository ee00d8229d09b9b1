//! Waiting for what sends no event: a file, a log line, a terminal screen, a socket that
//! starts answering. The condition is checked again every few milliseconds within
//! [`TIMEOUT`]; the daemon's own events are read with [`crate::Events`] instead.

use std::time::Duration;

use crate::TIMEOUT;

/// Checks `check` every `every` until it gives a value, or `None` once [`TIMEOUT`] has passed.
pub async fn poll<T>(every: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}

/// [`poll`] every 20 ms; fails the test, naming `what`, at the timeout.
pub async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    match poll(Duration::from_millis(20), check).await {
        Some(value) => value,
        None => panic!("timed out waiting for {what}"),
    }
}
