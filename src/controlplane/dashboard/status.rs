//! The plain HTML status page (`/status`): one table row per deployment,
//! refreshed by the browser every 5 s.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use super::esc;
use crate::controlplane::App;
use crate::controlplane::http::api::error;
use crate::controlplane::model::AlertSummary;
use crate::controlplane::store::StoreError;
use crate::wire;

/// The status page's alert cell: the count (a link to the list) and the
/// newest alert with its age.
fn alerts_cell(name: &str, summary: Result<AlertSummary, StoreError>) -> String {
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
