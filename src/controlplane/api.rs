//! The HTTP JSON API and the HTML status page.
//!
//! Authentication is the `admin` module's middleware (admin tokens); the
//! operators' WebSocket endpoint takes deployment tokens instead.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::App;
use super::dashboard::esc;
use super::live::LiveError;
use super::model::{AlertSummary, DeploymentView, MAX_ALERTS_PER_DEPLOYMENT, NewAudit};
use super::replica::Holding;
use super::ws::MAX_COMMAND_TIMEOUT;
use crate::wire::{self, Command, CommandRequest, Frame, PodAction, PodControlRequest};

fn error(status: StatusCode, msg: impl std::fmt::Display) -> Response {
    (status, Json(json!({ "error": msg.to_string() }))).into_response()
}

/// With replicas: the database rows of deployments (one, or all). Empty
/// on a single server, or when the database cannot be read (then this
/// server's own view is all there is).
async fn held_rows(app: &App, only: Option<&str>) -> HashMap<String, Holding> {
    let Some(r) = &app.replica else {
        return HashMap::new();
    };
    match r.holdings(only).await {
        Ok(rows) => rows
            .into_iter()
            .map(|h| (h.deployment.clone(), h))
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "connection rows unreadable; showing this replica's view");
            HashMap::new()
        }
    }
}

/// One deployment's view: this server's own when it holds (or last held)
/// the connection, with the cluster-wide counters of the row; the row's
/// otherwise.
fn view_of(app: &App, name: &str, row: Option<&Holding>) -> DeploymentView {
    let Some((h, me)) = row.zip(app.replica.as_ref()) else {
        return app.live.view(name);
    };
    if h.replica != me.id && !app.live.is_connected(name) {
        return DeploymentView::from_holding(h, app.live.thresholds);
    }
    let mut v = app.live.view(name);
    v.connections = h.connections;
    v.evictions = h.evictions;
    v.disconnects = h.disconnects;
    if !v.connected {
        v.last_close = h.last_close.clone();
    }
    v.replica = Some(h.replica.clone());
    v
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
    match app.store.list_deployments().await {
        Ok(rows) => {
            let counts = match app.store.active_counts().await {
                Ok(c) => c,
                Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
            };
            let held = held_rows(&app, None).await;
            let views: Vec<_> = rows
                .iter()
                .map(|r| {
                    let mut v = view_of(&app, &r.name, held.get(&r.name));
                    v.active_alerts = counts.get(&r.name).copied().unwrap_or(0);
                    v
                })
                .collect();
            Json(json!({ "deployments": views })).into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// A deployment's view with its count of active alerts: what the API and
/// the events stream show. An unreadable active set is an error, so no
/// reader is shown a count of 0 it cannot trust.
pub async fn deployment_view(
    app: &App,
    name: &str,
) -> Result<DeploymentView, super::store::StoreError> {
    let mut v = view_of(app, name, held_rows(app, Some(name)).await.get(name));
    v.active_alerts = app.store.list_active(name).await?.len() as u64;
    Ok(v)
}

pub async fn get(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    if let Some(r) = unknown(&app, &name).await {
        return r;
    }
    match deployment_view(&app, &name).await {
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
    if let Some(why) = super::fs::unavailable(&app, &name) {
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
    let unaudited = |e: super::store::StoreError| {
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

/// The status page's alert cell: the count (a link to the list) and the
/// newest alert with its age.
fn alerts_cell(name: &str, summary: Result<AlertSummary, super::store::StoreError>) -> String {
    let s = match summary {
        Ok(s) => s,
        Err(e) => return format!("<span class=\"offline\">{}</span>", esc(&e.to_string())),
    };
    let Some(a) = s.newest else {
        return "0".into();
    };
    let age_s = wire::now_ms().saturating_sub(a.received_ms) as f64 / 1000.0;
    let class = match a.severity {
        wire::Severity::Critical => "offline",
        wire::Severity::Warning => "degraded",
    };
    format!(
        "<a href=\"/api/v1/deployments/{n}/alerts\">{count}</a>, newest: \
         <span class=\"{class}\">{sev}</span> <span title=\"{msg}\">{reason}</span> \
         {obj}{ns} ({age_s:.1} s ago)",
        n = esc(name),
        count = s.count,
        sev = a.severity.as_str(),
        msg = esc(&a.message),
        reason = esc(&a.reason),
        obj = esc(&a.object),
        ns = if a.namespace.is_empty() {
            String::new()
        } else {
            format!(" in {}", esc(&a.namespace))
        },
    )
}

pub async fn page(State(app): State<Arc<App>>) -> Response {
    let rows = match app.store.list_deployments().await {
        Ok(r) => r,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let mut html = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" \
         content=\"5\"><title>Exo control plane</title><link rel=\"stylesheet\" \
         href=\"/assets/status.css\"></head><body><h1>Exo control plane</h1>\
         <p><a href=\"/\">Dashboard</a></p>\
         <table><tr><th>Deployment</th><th>State</th><th>Connected</th><th>Host</th>\
         <th>Agent version</th><th>Capabilities</th><th>Resources</th><th>Last frame</th><th>Evictions</th>\
         <th>Disconnects</th><th>Active alerts</th><th>Alerts</th></tr>",
    );
    let counts = app.store.active_counts().await.unwrap_or_default();
    for r in rows {
        let v = app.live.view(&r.name);
        let summary = app.store.alert_summary(&r.name).await;
        let active = counts.get(&r.name).copied().unwrap_or(0);
        let state = serde_json::to_value(v.state)
            .ok()
            .and_then(|s| s.as_str().map(str::to_owned))
            .unwrap_or_default();
        html.push_str(&format!(
            "<tr><td><a href=\"/api/v1/deployments/{n}\">{n}</a></td><td class=\"{s}\">{s}</td>\
             <td>{c}</td><td>{h}</td><td>{av}</td><td>{caps}</td><td><a href=\"/api/v1/deployments/{n}/resources\">{res}</a></td>\
             <td>{age}</td><td>{ev}</td><td>{dc}</td><td>{act}</td><td>{al}</td></tr>",
            n = esc(&v.name),
            s = state,
            c = if v.connected { "yes" } else { "no" },
            h = esc(v.hostname.as_deref().unwrap_or("-")),
            av = esc(v.agent_version.as_deref().unwrap_or("-")),
            caps = if v.capabilities.is_empty() {
                "-".to_owned()
            } else {
                esc(&v.capabilities.join(", "))
            },
            res = v.resources,
            age = v
                .last_frame_age_ms
                .map(|a| format!("{:.1} s ago", a as f64 / 1000.0))
                .unwrap_or_else(|| "never".into()),
            ev = v.evictions,
            dc = v.disconnects,
            act = if active == 0 {
                "0".to_owned()
            } else {
                format!(
                    "<a class=\"offline\" href=\"/api/v1/deployments/{}/alerts/active\">{active}</a>",
                    esc(&v.name)
                )
            },
            al = alerts_cell(&v.name, summary),
        ));
    }
    html.push_str("</table></body></html>");
    Html(html).into_response()
}
