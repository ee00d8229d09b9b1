//! The dashboard's pages, rendered on the server from the engine's answers (minijinja, every
//! value HTML-escaped), its static files, and its actions, which send the same engine
//! requests as the control socket and show the same errors in the page.

use axum::extract::{Form, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Extension;
use minijinja::{AutoEscape, Environment};
use serde::Deserialize;
use serde_json::json;

use crate::protocol::{Answer, EngineRequest, PauseParams};

use super::auth::Proof;
use super::Shared;

/// What the browser may load: nothing from elsewhere, no inline script.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'";

/// The templates.
pub struct Pages {
    env: Environment<'static>,
}

impl Pages {
    pub fn new() -> Pages {
        let mut env = Environment::new();
        env.set_auto_escape_callback(|_| AutoEscape::Html);
        env.add_template("board.html", include_str!("assets/board.html"))
            .expect("the board template parses");
        Pages { env }
    }

    fn render(&self, name: &str, context: serde_json::Value, status: StatusCode) -> Response {
        let context = crate::domain::prompt::to_value(context);
        match self.env.get_template(name).and_then(|t| t.render(context)) {
            Ok(html) => (
                status,
                [(header::CONTENT_SECURITY_POLICY, POLICY)],
                Html(html),
            )
                .into_response(),
            Err(e) => {
                tracing::error!(error = %e, template = name, "cannot render a page");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "catalyst: cannot render this page\n",
                )
                    .into_response()
            }
        }
    }
}

/// `GET /`: the daemon's state and the live events.
pub async fn board(State(shared): State<Shared>) -> Response {
    render_board(&shared, None, StatusCode::OK).await
}

async fn render_board(shared: &Shared, error: Option<String>, status: StatusCode) -> Response {
    let answer = match shared.engine.request(EngineRequest::Status).await {
        Ok(Answer::Status(s)) => s,
        Ok(_) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "catalyst: unexpected answer\n",
            )
                .into_response()
        }
        Err(e) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("catalyst: {}\n", e.message),
            )
                .into_response()
        }
    };
    let context = json!({
        "status": answer,
        "csrf": shared.secrets.csrf(),
        "error": error,
    });
    shared.pages.render("board.html", context, status)
}

/// `GET /static/<file>`: the dashboard's script and style sheet.
pub async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "catalyst.js" => (
            include_str!("assets/catalyst.js"),
            "text/javascript; charset=utf-8",
        ),
        "catalyst.css" => (
            include_str!("assets/catalyst.css"),
            "text/css; charset=utf-8",
        ),
        _ => return (StatusCode::NOT_FOUND, "catalyst: no such file\n").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The fields of the pause and resume forms.
#[derive(Debug, Deserialize)]
pub struct PauseForm {
    #[serde(default)]
    csrf: String,
    /// One model; empty or absent: all dispatching.
    #[serde(default)]
    model: Option<String>,
}

/// `POST /actions/pause`: pauses dispatching, or one model.
pub async fn pause(
    State(shared): State<Shared>,
    Extension(proof): Extension<Proof>,
    Form(form): Form<PauseForm>,
) -> Response {
    act(
        &shared,
        proof,
        &form.csrf,
        EngineRequest::Pause(params(form.model)),
    )
    .await
}

/// `POST /actions/resume`: resumes dispatching, or one model.
pub async fn resume(
    State(shared): State<Shared>,
    Extension(proof): Extension<Proof>,
    Form(form): Form<PauseForm>,
) -> Response {
    act(
        &shared,
        proof,
        &form.csrf,
        EngineRequest::Resume(params(form.model)),
    )
    .await
}

fn params(model: Option<String>) -> PauseParams {
    PauseParams {
        model: model.filter(|m| !m.trim().is_empty()),
    }
}

/// Sends an action's engine request: back to the board when it is done, the board with the
/// engine's error when it is refused. A form sent with the cookie must carry the page's CSRF
/// token.
async fn act(shared: &Shared, proof: Proof, csrf: &str, request: EngineRequest) -> Response {
    if proof == Proof::Cookie && !shared.secrets.is_csrf(csrf) {
        return (
            StatusCode::FORBIDDEN,
            "catalyst: this form is not from this daemon's page (reload the page)\n",
        )
            .into_response();
    }
    match shared.engine.request(request).await {
        Ok(_) => Redirect::to("/").into_response(),
        Err(e) => render_board(shared, Some(e.message), StatusCode::UNPROCESSABLE_ENTITY).await,
    }
}
