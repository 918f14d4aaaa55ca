//! Replica to replica: a request about a deployment whose operator is
//! connected to another replica is forwarded there whole, and the answer
//! comes back the same way.
//!
//! What hops: the deployment's view, its resources, commands, pod control,
//! shells (`attach`), copies (`fs`) and its events stream, i.e. everything
//! that needs the live connection. Audit, alerts and the lists are read from the shared
//! database wherever they are asked.
//!
//! How: the request is replayed over plain HTTP to the holder's
//! `--advertise-url`, with the caller's credentials removed and the
//! cluster's peer secret in [`PEER_HEADER`] instead (the first replica has
//! already authenticated the caller and checked its CSRF token). A
//! WebSocket upgrade is forwarded too: once both sides switch protocols the
//! two byte streams are copied into each other, so the shell or copy runs
//! end to end through the first replica. A forwarded request carries
//! [`HOP_HEADER`] and never hops again.
//!
//! When the holder cannot be reached the request is served here, which
//! answers as for an offline deployment (409).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use tracing::{debug, warn};

use crate::controlplane::App;
use crate::controlplane::session::CSRF_HEADER;

/// Carries the cluster's peer secret on a forwarded request.
pub const PEER_HEADER: &str = "x-exo-peer";
/// Names the replica a forwarded request came from.
pub const HOP_HEADER: &str = "x-exo-hop";

/// The deployment a request is about, when it is one that hops: the
/// paths below, and one deployment's events stream
/// (`/api/v1/events?deployment=NAME`).
pub fn hopping_target(path: &str, query: Option<&str>) -> Option<String> {
    if path == "/api/v1/events" {
        return query?
            .split('&')
            .find_map(|kv| kv.strip_prefix("deployment="))
            .filter(|d| crate::names::is_dns1123_label(d))
            .map(str::to_owned);
    }
    hopping_deployment(path).map(str::to_owned)
}

/// The deployment a path is about, when it is one that hops.
pub fn hopping_deployment(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/v1/deployments/")?;
    let (name, sub) = match rest.split_once('/') {
        Some((n, s)) => (n, Some(s)),
        None => (rest, None),
    };
    if name.is_empty() {
        return None;
    }
    match sub {
        None | Some("resources" | "commands" | "pod-control" | "attach" | "fs") => Some(name),
        Some(_) => None,
    }
}

/// Middleware on the admin routes, after authentication.
pub async fn route(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let Some(replica) = app.replica.clone() else {
        return next.run(req).await;
    };
    if req.headers().contains_key(HOP_HEADER) {
        return next.run(req).await;
    }
    let Some(name) = hopping_target(req.uri().path(), req.uri().query()) else {
        return next.run(req).await;
    };
    if app.live.is_connected(&name) {
        return next.run(req).await;
    }
    match replica.owner(&name).await {
        Ok(Some((id, url))) if id != replica.id => {
            debug!(deployment = %name, to = %id, "hop");
            match forward(&url, &replica.id, replica.peer_secret(), req).await {
                Ok(r) => r,
                Err(e) => {
                    warn!(deployment = %name, replica = %id, error = %e, "hop failed");
                    (
                        StatusCode::BAD_GATEWAY,
                        axum::Json(serde_json::json!({
                            "error": format!("the replica holding deployment {name} ({id}) did not answer: {e}")
                        })),
                    )
                        .into_response()
                }
            }
        }
        Ok(_) => next.run(req).await,
        Err(e) => {
            warn!(deployment = %name, error = %e, "holder lookup failed; serving here");
            next.run(req).await
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HopError {
    #[error("bad peer URL {0:?}")]
    Url(String),
    #[error("connect {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("{0}")]
    Http(#[from] hyper::Error),
    #[error("{0}")]
    Request(#[from] axum::http::Error),
}

/// Replays `req` at `base` (an `http://host:port` URL) and returns its
/// answer; upgrades are joined end to end.
async fn forward(
    base: &str,
    from: &str,
    secret: &str,
    mut req: Request,
) -> Result<Response, HopError> {
    let authority = base
        .strip_prefix("http://")
        .map(|a| a.trim_end_matches('/'))
        .filter(|a| !a.is_empty() && !a.contains('/'))
        .ok_or_else(|| HopError::Url(base.to_owned()))?;
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| HopError::Connect(authority.to_owned(), e))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            debug!(error = %e, "hop connection ended");
        }
    });
    let upgrade = hyper::upgrade::on(&mut req);
    let (mut parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    parts.uri = path.parse().map_err(axum::http::Error::from)?;
    for h in [header::AUTHORIZATION, header::COOKIE, header::ORIGIN] {
        parts.headers.remove(h);
    }
    parts.headers.remove(CSRF_HEADER);
    if let Ok(v) = HeaderValue::from_str(authority) {
        parts.headers.insert(header::HOST, v);
    }
    if let Ok(v) = HeaderValue::from_str(secret) {
        parts.headers.insert(PEER_HEADER, v);
    }
    if let Ok(v) = HeaderValue::from_str(from) {
        parts.headers.insert(HOP_HEADER, v);
    }
    let mut answer = sender
        .send_request(axum::http::Request::from_parts(parts, body))
        .await?;
    if answer.status() == StatusCode::SWITCHING_PROTOCOLS {
        let theirs = hyper::upgrade::on(&mut answer);
        tokio::spawn(async move {
            match (upgrade.await, theirs.await) {
                (Ok(ours), Ok(theirs)) => {
                    let mut a = TokioIo::new(ours);
                    let mut b = TokioIo::new(theirs);
                    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
                }
                (a, b) => debug!(ours = a.is_ok(), theirs = b.is_ok(), "hop upgrade failed"),
            }
        });
    }
    let (parts, body) = answer.into_parts();
    Ok(Response::from_parts(parts, Body::new(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_needs_the_connection_hops() {
        let cases = [
            ("/api/v1/deployments/prod", Some("prod")),
            ("/api/v1/deployments/prod/resources", Some("prod")),
            ("/api/v1/deployments/prod/commands", Some("prod")),
            ("/api/v1/deployments/prod/pod-control", Some("prod")),
            ("/api/v1/deployments/prod/attach", Some("prod")),
            ("/api/v1/deployments/prod/fs", Some("prod")),
            ("/api/v1/deployments/prod/audit", None),
            ("/api/v1/deployments/prod/alerts", None),
            ("/api/v1/deployments/prod/alerts/active", None),
            ("/api/v1/deployments/prod/tenants", None),
            ("/api/v1/deployments", None),
            ("/api/v1/deployments/", None),
            ("/deployments/prod", None),
        ];
        for (path, want) in cases {
            assert_eq!(hopping_deployment(path), want, "{path}");
        }
        let events = [
            (Some("deployment=prod"), Some("prod")),
            (Some("x=1&deployment=prod"), Some("prod")),
            (Some("deployment=Bad%20Name"), None),
            (None, None),
        ];
        for (query, want) in events {
            assert_eq!(
                hopping_target("/api/v1/events", query).as_deref(),
                want,
                "{query:?}"
            );
        }
    }
}
