//! The HTTP JSON API (the HTML status page is `dashboard::status`).
//!
//! Authentication is the `admin` module's middleware (admin tokens); the
//! operators' WebSocket endpoint takes deployment tokens instead.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::fs::unavailable;
use crate::controlplane::App;
use crate::controlplane::live::LiveError;
use crate::controlplane::model::{MAX_ALERTS_PER_DEPLOYMENT, NewAudit};
use crate::controlplane::store::StoreError;
use crate::controlplane::view;
use crate::controlplane::ws::MAX_COMMAND_TIMEOUT;
use crate::wire::{self, Command, CommandRequest, Frame, PodAction, PodControlRequest};

pub(crate) fn error(status: StatusCode, msg: impl std::fmt::Display) -> Response {
    (status, Json(json!({ "error": msg.to_string() }))).into_response()
}

async fn unknown(app: &App, name: &str) -> Option<Response> {
    match app.store.deployment_exists(name).await {
        Ok(true) => None,
        Ok(false) => Some(error(
            StatusCode::NOT_FOUND,
            format!("deployment {name:?} does not exist"),
        )),
        Err(e) => Some(error(StatusCode::INTERNAL_SERVER_ERROR, e)),
    }
}

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn list(State(app): State<Arc<App>>) -> Response {
    match view::all(&app).await {
        Ok(views) => Json(json!({ "deployments": views })).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

pub async fn get(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    match view::deployment(&app, &name).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

pub async fn resources(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    Json(json!({ "resources": app.live.resources(&name) })).into_response()
}

#[derive(Debug, Deserialize)]
pub struct AuditQuery {
    #[serde(default)]
    limit: Option<usize>,
    /// Paging cursor: only records older than the one with this `id`.
    #[serde(default)]
    before: Option<i64>,
}

pub async fn audit(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(q): Query<AuditQuery>,
) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    let limit = q.limit.unwrap_or(200).clamp(1, 10_000);
    match app.store.list_audit_before(&name, limit, q.before).await {
        Ok(rows) => {
            // Oldest first; a full page may have older records behind it.
            let next_before = (rows.len() == limit)
                .then(|| rows.first().map(|r| r.id))
                .flatten();
            Json(json!({ "audit": rows, "next_before": next_before })).into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

#[derive(Debug, Deserialize)]
pub struct AlertsQuery {
    #[serde(default)]
    limit: Option<usize>,
    /// Paging cursor: only alerts received before the one with this `id`.
    #[serde(default)]
    before: Option<i64>,
}

/// A deployment's alerts, newest first; `next_before` pages on.
pub async fn alerts(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(q): Query<AlertsQuery>,
) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    let limit = q.limit.unwrap_or(100).clamp(1, MAX_ALERTS_PER_DEPLOYMENT);
    let rows = match app.store.list_alerts(&name, limit, q.before).await {
        Ok(rows) => rows,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let total = match app.store.alert_summary(&name).await {
        Ok(s) => s.count,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    // A full page may have more behind it; a short one is the end.
    let next_before = (rows.len() == limit)
        .then(|| rows.last().map(|r| r.id))
        .flatten();
    Json(json!({ "alerts": rows, "total": total, "next_before": next_before })).into_response()
}

/// A deployment's active alerts (`active` module), longest active first.
pub async fn active_alerts(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    match app.store.list_active(&name).await {
        Ok(rows) => Json(json!({ "count": rows.len(), "active": rows })).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// A deployment's tenants as its operator registered them (enrollment and
/// support lane), by name.
pub async fn tenants(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    match app.store.list_tenants(&name).await {
        Ok(rows) => Json(json!({ "count": rows.len(), "tenants": rows })).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncidentsQuery {
    /// Only this tenant's incidents.
    pub tenant: Option<String>,
}

/// A deployment's incidents, newest first (at most 500): the support
/// lanes' view, the detail included (secrets masked).
pub async fn incidents(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(q): Query<IncidentsQuery>,
) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    match app.store.list_incidents(&name, q.tenant.as_deref()).await {
        Ok(rows) => Json(json!({ "count": rows.len(), "incidents": rows })).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

pub async fn stats(State(app): State<Arc<App>>) -> Response {
    Json(app.stats.to_json()).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandBody {
    command: Command,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    actor: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodControlBody {
    action: PodAction,
    namespace: String,
    agent: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    actor: Option<String>,
}

fn timeout_of(ms: Option<u64>) -> Duration {
    ms.map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(30))
        .min(MAX_COMMAND_TIMEOUT)
}

pub async fn command(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Json(body): Json<CommandBody>,
) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    if body.command.streams() {
        return error(
            StatusCode::BAD_REQUEST,
            format!("a copy streams its bytes: use the WebSocket /api/v1/deployments/{name}/fs"),
        );
    }
    if let Some(why) = unavailable(&app, &name, body.command.capability()) {
        return error(StatusCode::CONFLICT, why);
    }
    let timeout = timeout_of(body.timeout_ms);
    let id = wire::random_id();
    let actor = body.actor.unwrap_or_else(|| "api".into());
    let target = serde_json::to_value(&body.command).unwrap_or_default();
    let frame = Frame::Command(CommandRequest {
        id: id.clone(),
        deadline_ms: deadline(timeout),
        actor: actor.clone(),
        command: body.command,
    });
    dispatch(&app, &name, &id, &actor, "command", target, frame, timeout).await
}

pub async fn pod_control(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Json(body): Json<PodControlBody>,
) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    let timeout = timeout_of(body.timeout_ms);
    let id = wire::random_id();
    let actor = body.actor.unwrap_or_else(|| "api".into());
    let target = json!({ "action": body.action, "namespace": body.namespace, "agent": body.agent });
    let frame = Frame::PodControl(PodControlRequest {
        id: id.clone(),
        deadline_ms: deadline(timeout),
        actor: actor.clone(),
        action: body.action,
        namespace: body.namespace,
        agent: body.agent,
    });
    dispatch(
        &app,
        &name,
        &id,
        &actor,
        "pod_control",
        target,
        frame,
        timeout,
    )
    .await
}

fn deadline(timeout: Duration) -> u64 {
    wire::now_ms().saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
}

#[allow(clippy::too_many_arguments)]
async fn dispatch(
    app: &App,
    name: &str,
    id: &str,
    actor: &str,
    what: &str,
    target: serde_json::Value,
    frame: Frame,
    timeout: Duration,
) -> Response {
    let action = format!("{what}.issued");
    let audit = |outcome: &'static str| {
        let record = NewAudit {
            deployment: name,
            connection_id: None,
            source: "server",
            actor,
            action: &action,
            target: id,
            outcome,
            detail: Some(target.clone()),
        };
        async move { app.store.append_audit(&record).await }
    };
    // The record is committed before the caller hears the outcome: a
    // result that cannot be audited is not acknowledged as one.
    let unaudited = |e: StoreError| {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the outcome could not be written to the audit log: {e}"),
        )
    };
    let rx = match app.live.request(name, id, frame) {
        Ok(rx) => rx,
        Err(e @ LiveError::Offline(_)) => {
            if let Err(a) = audit("refused: offline").await {
                return unaudited(a);
            }
            return error(StatusCode::CONFLICT, e);
        }
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let (outcome, response) = match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(res)) => {
            let status = if res.ok {
                StatusCode::OK
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            (
                if res.ok { "ok" } else { "failed" },
                (status, Json(json!(res))).into_response(),
            )
        }
        Ok(Err(_)) => {
            app.live.forget(id);
            (
                "connection lost",
                error(
                    StatusCode::BAD_GATEWAY,
                    "the operator connection closed before answering",
                ),
            )
        }
        Err(_) => {
            app.live.forget(id);
            (
                "timed out",
                error(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!("no result within {} ms", timeout.as_millis()),
                ),
            )
        }
    };
    match audit(outcome).await {
        Ok(()) => response,
        Err(e) => unaudited(e),
    }
}
