//! The support lanes on the API: each lane's incidents with their
//! technical detail, and what support does with them (acknowledge,
//! resolve), for a full admin token or one limited to the lane
//! (docs/support.md).
//!
//! Guarantees:
//! - a lane-scoped token reaches its own lane only: the middleware refuses
//!   any other path (`authn`), and every handler here checks the lane
//!   against the [`Scope`] again, so a route added later cannot leak;
//! - an action moves an incident forward only (routed, acknowledged,
//!   resolved), once however often it is asked, and is recorded with the
//!   admin token's id (never the token); the operator is then sent an
//!   `incident_update` until it confirms (`ws::updates`);
//! - the lane's events stream says `lane` whenever something in the lane
//!   may have changed, on this replica at once and from the others within
//!   [`POLL`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::broadcast;

use super::api::error;
use super::authn::{Actor, Scope};
use crate::controlplane::App;
use crate::controlplane::bus::Change;
use crate::controlplane::model::{LaneAction, LaneRow, MAX_INCIDENTS_LISTED, MAX_NOTE};
use crate::controlplane::store::{Act, StoreError};
use crate::wire::LaneState;

/// How often a lane's events stream looks at the shared database for what
/// other replicas changed.
pub const POLL: Duration = Duration::from_secs(3);

fn store_error(e: StoreError) -> Response {
    let status = match &e {
        StoreError::BadLane(_) | StoreError::BadTenant(_) | StoreError::NoteTooLong(_) => {
            StatusCode::BAD_REQUEST
        }
        StoreError::NoDeployment(_) => StatusCode::NOT_FOUND,
        StoreError::LaneFromOperator { .. } => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e)
}

/// The refusal of a lane outside the token's scope (the middleware's
/// check, made again here).
fn outside(scope: &Scope, lane: &str) -> Option<Response> {
    (!scope.allows_lane(lane)).then(|| {
        error(
            StatusCode::FORBIDDEN,
            format!("this admin token may not read support lane {lane:?}"),
        )
    })
}

/// The answer for a lane that is not a lane name (400) or that the
/// token may not read (403); `None` when the request may go on.
fn refused(scope: &Scope, lane: &str) -> Option<Response> {
    if !crate::names::is_dns1123_label(lane) {
        return Some(store_error(StoreError::BadLane(lane.into())));
    }
    outside(scope, lane)
}

/// A lane with nothing in it yet.
fn empty(lane: &str) -> LaneRow {
    LaneRow {
        lane: lane.to_owned(),
        ..LaneRow::default()
    }
}

/// `GET /api/v1/lanes`: every lane the token may read, with its tenants
/// and its incidents by state.
pub async fn list(State(app): State<Arc<App>>, Extension(scope): Extension<Scope>) -> Response {
    let only = match &scope {
        Scope::All => None,
        Scope::Lane(l) => Some(l.as_str()),
        Scope::Deployment(_) => {
            return error(
                StatusCode::FORBIDDEN,
                "a deployment token may not read support lanes",
            );
        }
    };
    match app.store.lanes(only).await {
        Ok(mut rows) => {
            if let Scope::Lane(l) = &scope
                && rows.is_empty()
            {
                rows.push(empty(l));
            }
            Json(json!({ "count": rows.len(), "lanes": rows })).into_response()
        }
        Err(e) => store_error(e),
    }
}

/// `GET /api/v1/lanes/{lane}`: one lane (empty when nothing is in it yet).
pub async fn get(
    State(app): State<Arc<App>>,
    Extension(scope): Extension<Scope>,
    Path(lane): Path<String>,
) -> Response {
    if let Some(r) = refused(&scope, &lane) {
        return r;
    }
    match app.store.lanes(Some(&lane)).await {
        Ok(rows) => Json(rows.into_iter().next().unwrap_or_else(|| empty(&lane))).into_response(),
        Err(e) => store_error(e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncidentsQuery {
    /// `routed`, `acknowledged` or `resolved`.
    pub state: Option<String>,
    /// At most this many (default 500, at most 5000).
    pub limit: Option<usize>,
}

/// `GET /api/v1/lanes/{lane}/incidents[?state=][&limit=]`: newest first,
/// 500 unless asked for up to 5000, the detail included (secrets masked).
pub async fn incidents(
    State(app): State<Arc<App>>,
    Extension(scope): Extension<Scope>,
    Path(lane): Path<String>,
    Query(q): Query<IncidentsQuery>,
) -> Response {
    if let Some(r) = refused(&scope, &lane) {
        return r;
    }
    let state = match q.state.as_deref().map(|s| (s, LaneState::parse(s))) {
        None => None,
        Some((_, Some(s))) => Some(s),
        Some((s, None)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("state {s:?} is not routed, acknowledged or resolved"),
            );
        }
    };
    let limit = q.limit.unwrap_or(MAX_INCIDENTS_LISTED);
    match app.store.lane_incidents(&lane, state, limit).await {
        Ok(rows) => {
            Json(json!({ "lane": lane, "count": rows.len(), "incidents": rows })).into_response()
        }
        Err(e) => store_error(e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OneQuery {
    /// The deployment, when two have an incident of this id in the lane.
    pub deployment: Option<String>,
}

/// The one incident `id` in the lane, or the answer that says why not.
async fn one(
    app: &App,
    lane: &str,
    id: &str,
    deployment: Option<&str>,
) -> Result<crate::controlplane::model::IncidentRow, Response> {
    if !crate::wire::incident::valid_id(id) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("{id:?} is not an incident id (inc- and 24 hex digits)"),
        ));
    }
    let mut rows = app
        .store
        .lane_incident(lane, id, deployment)
        .await
        .map_err(store_error)?;
    match rows.len() {
        0 => Err(error(
            StatusCode::NOT_FOUND,
            format!("no incident {id} in support lane {lane}"),
        )),
        1 => Ok(rows.remove(0)),
        _ => Err(error(
            StatusCode::CONFLICT,
            format!(
                "incident {id} is in lane {lane} from {} deployments ({}); name one with ?deployment=",
                rows.len(),
                rows.iter()
                    .map(|r| r.deployment.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// `GET /api/v1/lanes/{lane}/incidents/{id}[?deployment=]`.
pub async fn incident(
    State(app): State<Arc<App>>,
    Extension(scope): Extension<Scope>,
    Path((lane, id)): Path<(String, String)>,
    Query(q): Query<OneQuery>,
) -> Response {
    if let Some(r) = refused(&scope, &lane) {
        return r;
    }
    match one(&app, &lane, &id, q.deployment.as_deref()).await {
        Ok(row) => Json(row).into_response(),
        Err(r) => r,
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActBody {
    /// Support's note, kept in the lane (never shown to the tenant).
    #[serde(default)]
    pub note: String,
}

async fn act(
    app: &App,
    scope: &Scope,
    actor: &Actor,
    (lane, id): (String, String),
    deployment: Option<&str>,
    body: ActBody,
    action: LaneAction,
) -> Response {
    if let Some(r) = refused(scope, &lane) {
        return r;
    }
    if body.note.len() > MAX_NOTE {
        return store_error(StoreError::NoteTooLong(body.note.len()));
    }
    let row = match one(app, &lane, &id, deployment).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let a = Act {
        deployment: &row.deployment,
        id: &row.id,
        action,
        by: &actor.0,
        note: &body.note,
    };
    match app.store.act_on_incident(&a).await {
        Ok(Some((after, moved))) => {
            if moved {
                tracing::info!(lane = %lane, deployment = %after.deployment, incident = %after.id, state = after.state.as_str(), by = %actor.0, "incident moved");
            }
            let status = if moved || after.state == action.target() {
                StatusCode::OK
            } else {
                StatusCode::CONFLICT
            };
            let mut v = json!({ "moved": moved, "incident": after });
            if status == StatusCode::CONFLICT {
                v["error"] = json!(format!(
                    "incident {} is {} already",
                    after.id,
                    after.state.as_str()
                ));
            }
            (status, Json(v)).into_response()
        }
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            format!("no incident {id} in support lane {lane}"),
        ),
        Err(e) => store_error(e),
    }
}

/// `POST /api/v1/lanes/{lane}/incidents/{id}/ack` or `…/resolve`
/// (`?deployment=` when two deployments have the id), body `{"note": …}`
/// (optional).
pub async fn act_on(
    State(app): State<Arc<App>>,
    Extension(scope): Extension<Scope>,
    Extension(actor): Extension<Actor>,
    Path((lane, id, verb)): Path<(String, String, String)>,
    Query(q): Query<OneQuery>,
    body: Option<Json<ActBody>>,
) -> Response {
    let action = match verb.as_str() {
        "ack" => LaneAction::Acknowledge,
        "resolve" => LaneAction::Resolve,
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                format!("no action {verb:?}: use ack or resolve"),
            );
        }
    };
    let body = body.map(|Json(b)| b).unwrap_or_default();
    act(
        &app,
        &scope,
        &actor,
        (lane, id),
        q.deployment.as_deref(),
        body,
        action,
    )
    .await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssignBody {
    #[serde(default)]
    pub contacts: Vec<String>,
}

/// `PUT /api/v1/lanes/{lane}/tenants/{deployment}/{tenant}`: routes the
/// tenant's incidents to the lane (`exo support lane create`). A full
/// admin token only: a lane's token must not widen its own lane.
pub async fn assign(
    State(app): State<Arc<App>>,
    Extension(scope): Extension<Scope>,
    Extension(actor): Extension<Actor>,
    Path((lane, deployment, tenant)): Path<(String, String, String)>,
    body: Option<Json<AssignBody>>,
) -> Response {
    if scope != Scope::All {
        return error(
            StatusCode::FORBIDDEN,
            "a lane's token cannot add tenants to a lane; use a full admin token",
        );
    }
    let body = body.map(|Json(b)| b).unwrap_or_default();
    if body.contacts.len() > crate::wire::registry_limits::CONTACTS
        || body
            .contacts
            .iter()
            .any(|c| c.is_empty() || c.len() > crate::wire::registry_limits::CONTACT)
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "contacts: at most {} of 1 to {} bytes each",
                crate::wire::registry_limits::CONTACTS,
                crate::wire::registry_limits::CONTACT
            ),
        );
    }
    match app
        .store
        .assign_lane(&deployment, &tenant, &lane, &body.contacts, &actor.0)
        .await
    {
        Ok(adopted) => {
            tracing::info!(lane = %lane, deployment = %deployment, tenant = %tenant, adopted, by = %actor.0, "tenant routed to lane");
            Json(json!({ "lane": lane, "deployment": deployment, "tenant": tenant, "adopted": adopted }))
                .into_response()
        }
        Err(e) => store_error(e),
    }
}

/// `GET /api/v1/lanes/{lane}/events`: server-sent `lane` events whenever
/// something in the lane may have changed (`hello` first, `resync` after
/// falling behind).
pub async fn events(
    State(app): State<Arc<App>>,
    Extension(scope): Extension<Scope>,
    Path(lane): Path<String>,
) -> Response {
    if let Some(r) = refused(&scope, &lane) {
        return r;
    }
    let state = Follower {
        rx: app.bus.subscribe(),
        shutdown: app.shutdown.subscribe(),
        last: app.store.lanes(Some(&lane)).await.ok(),
        tick: {
            let mut t = tokio::time::interval(POLL);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        },
        app,
        lane,
        greeted: false,
    };
    let stream = futures::stream::unfold(state, |mut s| async move {
        let ev = s.next().await?;
        Some((Ok::<_, Infallible>(ev), s))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

struct Follower {
    app: Arc<App>,
    rx: broadcast::Receiver<Arc<Change>>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    lane: String,
    /// The lane as last seen in the database (other replicas' changes).
    last: Option<Vec<LaneRow>>,
    tick: tokio::time::Interval,
    greeted: bool,
}

impl Follower {
    async fn next(&mut self) -> Option<SseEvent> {
        if !self.greeted {
            self.greeted = true;
            return Some(sse("hello", &self.lane));
        }
        let shared = self.app.replica.is_some();
        loop {
            let got = tokio::select! {
                r = self.rx.recv() => Some(r),
                _ = self.shutdown.wait_for(|s| *s) => return None,
                _ = self.tick.tick(), if shared => None,
            };
            match got {
                Some(Ok(c)) => {
                    if matches!(&*c, Change::Lane(l) if *l == self.lane) {
                        self.last = self.app.store.lanes(Some(&self.lane)).await.ok();
                        return Some(sse("lane", &self.lane));
                    }
                }
                Some(Err(broadcast::error::RecvError::Lagged(_))) => {
                    return Some(sse("resync", &self.lane));
                }
                Some(Err(broadcast::error::RecvError::Closed)) => return None,
                None => {
                    let now = self.app.store.lanes(Some(&self.lane)).await.ok();
                    if now.is_some() && now != self.last {
                        self.last = now;
                        return Some(sse("lane", &self.lane));
                    }
                }
            }
        }
    }
}

fn sse(name: &str, lane: &str) -> SseEvent {
    SseEvent::default()
        .event(name)
        .data(json!({ "lane": lane }).to_string())
}
