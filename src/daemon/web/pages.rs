//! The dashboard's pages, rendered on the server from the engine's answers (minijinja, every
//! value HTML-escaped), its static files, and its actions, which send the same engine
//! requests as the control socket and show the same errors in the page.

use axum::extract::{Form, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Extension;
use minijinja::{AutoEscape, Environment};
use serde::Deserialize;
use serde_json::json;

use crate::domain::state::Lane;
use crate::protocol::{ListParams, Method, PauseParams, RpcError};

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
        // People's and agents' text as Markdown, rendered safe (see `markdown`).
        env.add_filter("markdown", |text: &str| {
            minijinja::Value::from_safe_string(super::markdown::to_html(text))
        });
        // A bead's status as people read it: `cancelled` for one `cancel` closed, as `ctl`
        // says it.
        env.add_filter("state", |status: &str, close_reason: Option<&str>| {
            let status = crate::domain::model::Status::parse(status);
            crate::render::status_label(&status, close_reason).replace('_', " ")
        });
        env.add_template("board.html", include_str!("assets/board.html"))
            .expect("the board template parses");
        env.add_template("bead.html", include_str!("assets/bead.html"))
            .expect("the bead template parses");
        Pages { env }
    }

    pub(super) fn render(
        &self,
        name: &str,
        context: serde_json::Value,
        status: StatusCode,
    ) -> Response {
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

/// Rows of the board per page.
const PAGE_ROWS: u64 = 50;

/// Cards per lane of the board; the rest are a link to the lane's rows.
const LANE_CARDS: usize = 8;

/// The board's filters: `?status=` (a bead status, or `ready`), `?lane=` (a lane of the
/// board), `?q=` (id or title contains it), `?page=` (from 1).
#[derive(Debug, Default, Deserialize)]
pub struct BoardQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default, deserialize_with = "lane_or_none")]
    lane: Option<Lane>,
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    page: Option<u64>,
}

/// `GET /`: the daemon's state, the work beads page by page, and the live events.
pub async fn board(State(shared): State<Shared>, Query(query): Query<BoardQuery>) -> Response {
    render_board(&shared, &query, None, StatusCode::OK).await
}

async fn render_board(
    shared: &Shared,
    query: &BoardQuery,
    error: Option<String>,
    code: StatusCode,
) -> Response {
    let status = match shared.engine.status().await {
        Ok(s) => s,
        Err(e) => return unavailable(e),
    };
    let lanes = match shared.engine.board(LANE_CARDS).await {
        Ok(board) => board.lanes,
        Err(e) => return unavailable(e),
    };
    let filter_status = query.status.clone().filter(|s| !s.is_empty());
    let q = query.q.clone().unwrap_or_default();
    let search = Some(q.trim()).filter(|q| !q.is_empty());
    let page = query.page.unwrap_or(1).max(1);
    let offset = (page - 1).saturating_mul(PAGE_ROWS);
    // `?status=ready` is the engine's ready list (in dispatch order), unless a lane narrows it.
    let ready_list = filter_status.as_deref() == Some("ready") && query.lane.is_none();
    let (beads, matched, error) = if ready_list {
        let search = search.map(crate::protocol::Search::new);
        match shared.engine.ready().await {
            Ok(list) => {
                let wanted: Vec<_> = list
                    .beads
                    .into_iter()
                    .filter(|b| {
                        search
                            .as_ref()
                            .is_none_or(|s| s.matches(b.id.as_str(), &b.title))
                    })
                    .collect();
                let matched = wanted.len() as u64;
                let rows = wanted
                    .into_iter()
                    .skip(usize::try_from(offset).unwrap_or(usize::MAX))
                    .take(PAGE_ROWS as usize)
                    .collect();
                (rows, matched, error)
            }
            Err(e) => return unavailable(e),
        }
    } else {
        let params = ListParams {
            status: filter_status.clone(),
            search: search.map(str::to_owned),
            offset: Some(offset),
            limit: Some(PAGE_ROWS),
            lane: query.lane,
            ..Default::default()
        };
        match shared.engine.list(params).await {
            Ok(list) => (list.beads, list.total.unwrap_or(0), error),
            // A status no bead has: the engine's refusal in the page, nothing listed.
            Err(e) => (Vec::new(), 0, error.or(Some(e.message))),
        }
    };
    let pages = matched.div_ceil(PAGE_ROWS).max(1);
    let total_work: u64 = status.beads.values().sum();
    let context = json!({
        "status": status,
        "lanes": lanes,
        "beads": beads,
        "matched": matched,
        "total_work": total_work,
        "page": page,
        "pages": pages,
        "filter": {"status": filter_status.unwrap_or_default(), "lane": query.lane, "q": q},
        "csrf": shared.secrets.csrf(),
        "error": error,
    });
    shared.pages.render("board.html", context, code)
}

/// `?lane=` as a lane, or no lane for an empty or unknown one (a stale link lists everything).
fn lane_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Lane>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    Ok(text.and_then(|t| serde_json::from_value(serde_json::Value::String(t)).ok()))
}

fn unavailable(e: RpcError) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("catalyst: {}\n", e.message),
    )
        .into_response()
}

/// The fields of the board's form for a new bead.
#[derive(Debug, Deserialize)]
pub struct SubmitForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    formula: Option<String>,
    #[serde(default)]
    priority: Option<String>,
    /// Beads it runs after, separated by commas or spaces.
    #[serde(default)]
    after: Option<String>,
}

/// `POST /actions/submit`: a new bead, as `ctl submit`; its page once it is in.
pub async fn submit(
    State(shared): State<Shared>,
    Extension(proof): Extension<Proof>,
    Form(form): Form<SubmitForm>,
) -> Response {
    if let Some(refused) = refuse_forged(&shared, proof, &form.csrf) {
        return refused;
    }
    let some = |t: Option<String>| t.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
    let priority = match some(form.priority).map(|p| p.parse::<u8>()) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(_)) => {
            let error = "the priority is a number from 0 (highest) to 4".to_owned();
            return refused_on_board(&shared, error).await;
        }
    };
    let input = crate::protocol::BeadInput {
        title: form.title.trim().to_owned(),
        description: some(form.description),
        formula: some(form.formula),
        priority,
        after: some(form.after)
            .map(|a| {
                a.split([',', ' '])
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        ..Default::default()
    };
    match shared.engine.submit(vec![input]).await {
        Ok(done) => match done.ids.first() {
            Some(id) => Redirect::to(&format!("/beads/{id}")).into_response(),
            None => Redirect::to("/").into_response(),
        },
        Err(e) => refused_on_board(&shared, e.message).await,
    }
}

/// The board with what the engine (or the form's check) refused, as 422.
async fn refused_on_board(shared: &Shared, error: String) -> Response {
    let query = BoardQuery::default();
    render_board(
        shared,
        &query,
        Some(error),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await
}

/// A form sent with the cookie must carry the page's CSRF token.
pub(super) fn refuse_forged(shared: &Shared, proof: Proof, csrf: &str) -> Option<Response> {
    (proof == Proof::Cookie && !shared.secrets.is_csrf(csrf)).then(|| {
        (
            StatusCode::FORBIDDEN,
            "catalyst: this form is not from this daemon's page (reload the page)\n",
        )
            .into_response()
    })
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
        Method::Pause(params(form.model)),
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
        Method::Resume(params(form.model)),
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
async fn act(shared: &Shared, proof: Proof, csrf: &str, request: Method) -> Response {
    if let Some(refused) = refuse_forged(shared, proof, csrf) {
        return refused;
    }
    match shared.engine.request(request).await {
        Ok(_) => Redirect::to("/").into_response(),
        Err(e) => refused_on_board(shared, e.message).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The board page for a status whose running steps are `running`.
    fn board(running: serde_json::Value) -> String {
        board_with_lanes(running, json!([]))
    }

    fn board_with_lanes(running: serde_json::Value, lanes: serde_json::Value) -> String {
        board_with(running, lanes, json!({}))
    }

    /// The board page, with `more` added to its status.
    fn board_with(
        running: serde_json::Value,
        lanes: serde_json::Value,
        more: serde_json::Value,
    ) -> String {
        let pages = Pages::new();
        let mut context = json!({
            "status": {"seq": 3, "beads": {"open": 1}, "ready": 0, "running": running,
                       "paused": false, "stopping": false, "waiting_approval": ["cat-2.approve"],
                       "model_pauses": []},
            "beads": [{"id": "cat-1", "title": "<b>bold</b>", "status": "open", "done": 1,
                       "total": 4, "current": "implement", "waiting_for": ["cat-0"],
                       "running": {"model": "opus", "elapsed_ms": 1500, "attempt": 1, "step": "cat-1.implement"}}],
            "lanes": lanes,
            "matched": 1, "total_work": 1, "page": 1, "pages": 1,
            "filter": {"status": "open", "q": "a b&c"},
            "csrf": "x", "error": null,
        });
        if let (Some(status), Some(more)) = (context["status"].as_object_mut(), more.as_object()) {
            status.extend(more.clone());
        }
        pages
            .env
            .get_template("board.html")
            .and_then(|t| t.render(crate::domain::prompt::to_value(context)))
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    #[test]
    fn the_board_renders_and_escapes() {
        let html = board(json!([]));
        assert!(
            html.contains("&lt;b&gt;bold&lt;&#x2f;b&gt;")
                || html.contains("&lt;b&gt;bold&lt;/b&gt;"),
            "{html}"
        );
        assert!(
            html.contains("q=a%20b%26c"),
            "the search kept in links, encoded: {html}"
        );
        assert!(html.contains("<progress max=\"4\" value=\"1\">"), "{html}");
        assert!(html.contains("1.5 s"), "{html}");
        assert!(html.contains("cat-2.approve"), "{html}");
    }

    #[test]
    fn a_spending_stop_says_why_and_what_to_do_on_the_board() {
        let stop = crate::domain::budget::BudgetStop {
            scope: crate::domain::budget::BudgetScope::Daily,
            spent_usd: 6.0,
            budget_usd: 5.0,
            until: None,
        };
        let view = crate::protocol::BudgetStopView::from(stop);
        let html = board_with(json!([]), json!([]), json!({ "budget_stop": view }));
        assert!(html.contains("held: daily budget"), "{html}");
        assert!(html.contains("agents spent $6.00 of $5.00"), "{html}");
        assert!(html.contains("raise `daily_budget_usd`"), "{html}");
    }

    #[test]
    fn a_step_waiting_for_its_agent_slot_says_so_on_the_board() {
        let html = board(json!([
            {"step": "cat-1.implement", "attempt": 1, "model": "opus", "elapsed_ms": 1500},
            {"step": "cat-3.review", "attempt": 1, "model": "haiku", "elapsed_ms": 200,
             "waiting_for_slot": true}
        ]));
        let rows: Vec<&str> = html
            .lines()
            .filter(|l| l.contains("<tr><td>cat-"))
            .collect();
        assert_eq!(rows.len(), 2, "{html}");
        assert!(!rows[0].contains("waiting"), "{}", rows[0]);
        assert!(
            rows[1].contains("(waiting for an agent slot)"),
            "{}",
            rows[1]
        );
    }

    #[test]
    fn a_lane_shows_its_cards_and_links_to_the_rest() {
        let card = |id: &str| {
            json!({"id": id, "title": "<i>t</i>", "status": "closed", "done": 4, "total": 4,
                   "priority": 2, "closed_at": "2026-01-01T00:00:00Z"})
        };
        let lanes = json!([
            {"lane": "ready", "total": 0, "cards": []},
            {"lane": "needs_person", "total": 1, "cards": [
                {"id": "cat-7", "title": "held", "status": "in_progress", "done": 3, "total": 4,
                 "priority": 2, "approvals": [{"step": "cat-7.merge", "name": "merge",
                                               "held_files": [".catalyst/formulas/x.toml"]}]}]},
            {"lane": "done", "total": 12, "cards": [card("cat-1"), card("cat-2")]},
        ]);
        let html = board_with_lanes(json!([]), lanes);
        assert!(
            html.contains("<a href=\"/?lane=done\">and 10 more</a>"),
            "{html}"
        );
        assert!(!html.contains("/?lane=ready\">and"), "{html}");
        assert!(html.contains("data-id=\"cat-2\""), "{html}");
        assert!(html.contains("&lt;i&gt;t&lt;"), "titles are text: {html}");
        assert!(
            html.contains("merge held: the change touches .catalyst"),
            "{html}"
        );
    }
}
