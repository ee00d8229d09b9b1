//! A bead's run files in the browser: each attempt's prompt, context, output and records as
//! plain text (`GET /beads/<id>/runs/<step>/<attempt>/<file>`), and the running attempt's
//! output as it is written (`GET /beads/<id>/output`, Server-Sent Events), read the way
//! `ctl logs -f` reads it.

use std::convert::Infallible;
use std::path::PathBuf;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use crate::daemon::runlog::{self, OutputTail, Piece};
use crate::render::logs::TranscriptView;
use crate::render::style::Paint;

use crate::daemon::agent::{PROMPT_FILE, STDERR_FILE, STDOUT_FILE};
use crate::domain::context::{CONTEXT_JSON, CONTEXT_MD};
use crate::protocol::ShowAnswer;

use super::bead::show;
use super::Shared;

/// The files of a run folder the dashboard serves; a gate's commands have their `stdout` and
/// `stderr` in `command-<n>/`.
const RUN_FILES: [&str; 9] = [
    PROMPT_FILE,
    CONTEXT_MD,
    CONTEXT_JSON,
    STDOUT_FILE,
    STDERR_FILE,
    "report.json",
    "result.json",
    "settings.json",
    "base",
];

/// How a run file is served: as text, never run or sniffed as anything else.
const TEXT_HEADERS: [(header::HeaderName, &str); 4] = [
    (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (
        header::CONTENT_SECURITY_POLICY,
        "sandbox; default-src 'none'",
    ),
    (header::CACHE_CONTROL, "no-cache"),
];

/// Whether `file` names a run file: one of [`RUN_FILES`], or `command-<n>/stdout|stderr`.
fn is_run_file(file: &str) -> bool {
    match file.split_once('/') {
        None => RUN_FILES.contains(&file),
        Some((dir, name)) => {
            dir.strip_prefix("command-")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                && (name == STDOUT_FILE || name == STDERR_FILE)
        }
    }
}

/// The folder of attempt `attempt` of the step named `step` of the bead `show`, if the bead
/// has that step and the step that attempt.
fn run_dir(shared: &Shared, show: &ShowAnswer, step: &str, attempt: u32) -> Option<PathBuf> {
    let detail = show
        .steps
        .iter()
        .filter_map(|s| s.detail.as_ref())
        .find(|d| d.step == step)?;
    (1..=detail.attempts)
        .contains(&attempt)
        .then(|| shared.paths.run_dir(&show.id, step, attempt))
}

/// `GET /beads/<id>/runs/<step>/<attempt>/<file>`: one file of an attempt's run folder, as
/// plain text.
pub async fn file(
    State(shared): State<Shared>,
    Path((id, step, attempt, file)): Path<(String, String, u32, String)>,
) -> Response {
    if !is_run_file(&file) {
        return (StatusCode::NOT_FOUND, "catalyst: no such run file\n").into_response();
    }
    let show = match show(&shared, id).await {
        Ok(show) => show,
        Err(refused) => return refused,
    };
    let Some(dir) = run_dir(&shared, &show, &step, attempt) else {
        let message = format!(
            "catalyst: `{}` has no attempt {attempt} of a step `{step}`\n",
            show.id
        );
        return (StatusCode::NOT_FOUND, message).into_response();
    };
    match tokio::fs::File::open(dir.join(&file)).await {
        Ok(f) => (
            TEXT_HEADERS,
            Body::from_stream(tokio_util::io::ReaderStream::new(f)),
        )
            .into_response(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
            StatusCode::NOT_FOUND,
            format!("catalyst: attempt {attempt} of `{step}` has no `{file}`\n"),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("catalyst: cannot read `{file}`: {e}\n"),
        )
            .into_response(),
    }
}

/// At most about this much of what the attempt wrote before the page asked is sent first.
const BACKLOG: u64 = 64 * 1024;

/// A comment line sent when nothing else was for this long (see the events' stream).
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// `GET /beads/<id>/output`: the running attempt's output as it is written, as `ctl logs -f`
/// shows it (what the agent says, its tool calls and their results, how it ended), in
/// `output` events of one `data:` line per line; then an `end` event once the attempt is over
/// (or at once when nothing runs), after which the page closes the stream.
pub async fn output(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let show = match show(&shared, id).await {
        Ok(show) => show,
        Err(refused) => return refused,
    };
    let running = show.running.as_ref().and_then(|r| {
        let step = show.steps.iter().find(|s| s.id == r.step)?;
        let name = &step.detail.as_ref()?.step;
        Some(shared.paths.run_dir(&show.id, name, r.attempt))
    });
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    let Some(dir) = running else {
        return (headers, "event: end\ndata: nothing runs\n\n").into_response();
    };
    let path = dir.join(STDOUT_FILE);
    let stopping = shared.shutdown.clone();
    let stream = futures::stream::unfold(Some((None, path)), move |state| {
        let stopping = stopping.clone();
        async move {
            let (tail, path) = state?;
            let tail = match tail {
                Some(tail) => tail,
                None => match open(&path, &stopping).await {
                    Some(tail) => tail,
                    None => return Some((end("the attempt ended"), None)),
                },
            };
            let (chunk, tail) = next(tail, &stopping).await;
            Some((Ok::<_, Infallible>(chunk), tail.map(|t| (Some(t), path))))
        }
    });
    (headers, Body::from_stream(stream)).into_response()
}

/// The attempt's output, once it exists, from its last [`BACKLOG`] bytes.
async fn open(path: &std::path::Path, stopping: &CancellationToken) -> Option<Reading> {
    if !runlog::appeared(path, stopping).await.ok()? {
        return None;
    }
    let mut tail = OutputTail::open(path, true).await.ok()?;
    tail.skip_to_last(BACKLOG).await.ok()?;
    Some(Reading {
        tail,
        view: TranscriptView::new(false, Paint::OFF),
    })
}

/// The output being read: the tail, and what reads its lines as `ctl logs` does.
struct Reading {
    tail: OutputTail,
    view: TranscriptView,
}

/// The next piece of the stream: new lines, a keep-alive, or the end (and no more reading).
async fn next(mut r: Reading, stopping: &CancellationToken) -> (Bytes, Option<Reading>) {
    loop {
        match r.tail.read().await {
            Ok(Piece::Text(text)) => {
                let out = output_event(&r.view.feed(&text));
                if !out.is_empty() {
                    return (Bytes::from(out), Some(r));
                }
            }
            Ok(Piece::Wait) => tokio::select! {
                () = stopping.cancelled() => return (Bytes::new(), None),
                changed = r.tail.changed() => if !changed {
                    return (end_bytes("cannot follow the output"), None);
                },
                () = tokio::time::sleep(KEEP_ALIVE) => {
                    return (Bytes::from_static(b": keep-alive\n\n"), Some(r));
                }
            },
            Ok(Piece::End) => {
                let mut out = output_event(&r.view.finish(true));
                out.push_str("event: end\ndata: the attempt ended\n\n");
                return (Bytes::from(out), None);
            }
            Err(e) => return (end_bytes(&format!("cannot read the output: {e}")), None),
        }
    }
}

fn end_bytes(why: &str) -> Bytes {
    Bytes::from(format!("event: end\ndata: {why}\n\n"))
}

fn end(why: &str) -> Result<Bytes, Infallible> {
    Ok(end_bytes(why))
}

/// `text` as one `output` event, a `data:` line per line (a `\r` dropped: SSE would read it
/// as a line break); nothing for no text.
fn output_event(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let mut out = String::from("event: output\n");
    for line in text.strip_suffix('\n').unwrap_or(text).split('\n') {
        out.push_str("data: ");
        out.push_str(&line.replace('\r', ""));
        out.push('\n');
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_run_files_are_served() {
        for ok in ["prompt.md", "stdout", "result.json", "command-2/stderr"] {
            assert!(is_run_file(ok), "{ok}");
        }
        for refused in [
            "../journal.jsonl",
            "command-/stdout",
            "command-1/../../x",
            "command-1/result.json",
            "x/stdout",
            "",
        ] {
            assert!(!is_run_file(refused), "{refused}");
        }
    }

    #[test]
    fn each_line_is_a_data_line_of_one_event() {
        let out = output_event("one\r\ntwo <script>\n");
        assert_eq!(out, "event: output\ndata: one\ndata: two <script>\n\n");
        assert_eq!(output_event(""), "");
    }
}
