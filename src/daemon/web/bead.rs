//! A bead's page (`GET /beads/<id>`): its molecule as a graph, every attempt of every step
//! with its run files one click away, the comments, the diff of its branch, and its actions,
//! which send the same engine requests as the control socket.

use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use serde::Deserialize;
use serde_json::json;

use crate::daemon::audit;
use crate::protocol::{ErrorCode, Method, RpcError, ShowAnswer};

use super::auth::Proof;
use super::diff::DiffView;
use super::pages::refuse_forged;
use super::{graph, Shared};

/// The diff's stat width.
const STAT_WIDTH: usize = 100;

/// `GET /beads/<id>`: a bead, its steps with every attempt, and its comments.
pub async fn bead(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    render_bead(&shared, id, None, StatusCode::OK).await
}

async fn render_bead(
    shared: &Shared,
    id: String,
    error: Option<String>,
    code: StatusCode,
) -> Response {
    // The events after this seq change the page: read before the page is made, so the
    // page's script refreshes it for every change it may have missed.
    let seq = *shared.engine.journal.seq.borrow();
    let p = crate::protocol::IdParams { id };
    let show = match audit::show_with_runs(&shared.engine, &shared.paths, p).await {
        Ok(show) => show,
        Err(e) => return refused(e),
    };
    // A step's page is its bead's.
    if let Some(meta) = show.bead.step_meta() {
        return Redirect::to(&format!("/beads/{}", meta.bead)).into_response();
    }
    let drawing = graph::layout(&show.steps);
    let paths = shared.paths.clone();
    let (show, diff) = tokio::task::spawn_blocking(move || {
        let diff = DiffView::of(audit::diff(&paths, &show, STAT_WIDTH));
        (show, diff)
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let blocked_reason = crate::daemon::engine::blocked_reason(&show.bead);
    let context = json!({
        "blocked_reason": blocked_reason,
        "show": show,
        "seq": seq,
        "graph": drawing,
        "diff": diff,
        "csrf": shared.secrets.csrf(),
        "error": error,
    });
    shared.pages.render("bead.html", context, code)
}

/// An engine's refusal as a plain answer: 404 for an unknown bead, 400 for a malformed id.
pub(super) fn refused(e: RpcError) -> Response {
    let code = match e.code {
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    (code, format!("catalyst: {}\n", e.message)).into_response()
}

/// The engine's `show` of `id`, without the attempts.
pub(super) async fn show(shared: &Shared, id: String) -> Result<ShowAnswer, Response> {
    let p = crate::protocol::IdParams { id };
    shared.engine.show(p).await.map_err(refused)
}

/// The fields of a bead page's forms.
#[derive(Debug, Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    csrf: String,
    /// A comment, or a rejection's or cancellation's reason.
    #[serde(default)]
    text: Option<String>,
    /// The bead whose page the form is on (a step's action returns to its bead).
    #[serde(default)]
    back: Option<String>,
}

/// `POST /beads/<id>/<action>`: `approve` (`text`: a comment), `reject` (`text`: the reason
/// for the fix), `retry`, `cancel` (`text`: why) and `comment`, as the socket's methods of
/// those names.
pub async fn bead_action(
    State(shared): State<Shared>,
    Extension(proof): Extension<Proof>,
    Path((id, action)): Path<(String, String)>,
    Form(form): Form<ActionForm>,
) -> Response {
    use crate::protocol::{ApproveParams, CloseParams, CommentParams, IdParams, RejectParams};
    let text = form.text.filter(|t| !t.trim().is_empty());
    let back = form
        .back
        .filter(|b| crate::domain::id::BeadId::new(b).is_ok())
        .unwrap_or_else(|| id.clone());
    let request = match action.as_str() {
        "approve" => Method::Approve(ApproveParams { id, comment: text }),
        "reject" => Method::Reject(RejectParams {
            id,
            reason: text.unwrap_or_default(),
        }),
        "retry" => Method::Retry(IdParams { id }),
        "cancel" => Method::Cancel(CloseParams { id, reason: text }),
        "comment" => Method::Comment(CommentParams {
            id,
            text: text.unwrap_or_default(),
            author: Some("web".into()),
        }),
        _ => return (StatusCode::NOT_FOUND, "catalyst: no such action\n").into_response(),
    };
    if let Some(refused) = refuse_forged(&shared, proof, &form.csrf) {
        return refused;
    }
    match shared.engine.request(request).await {
        Ok(_) => Redirect::to(&format!("/beads/{back}")).into_response(),
        Err(e) => {
            render_bead(
                &shared,
                back,
                Some(e.message),
                StatusCode::UNPROCESSABLE_ENTITY,
            )
            .await
        }
    }
}
