//! Who may use the API and the dashboard: the middleware on every admin
//! route.
//!
//! A request is let in by one of:
//! - `Authorization: Bearer <admin token>` (scripts, `exo attach`): no
//!   ambient credential, so no CSRF token is asked for;
//! - the dashboard's session cookie (`session`): a state-changing request
//!   must also carry the session's CSRF token in `X-CSRF-Token`, and a
//!   WebSocket upgrade must come from this server's own origin; otherwise
//!   403 and nothing is done. The session's admin token is re-checked on
//!   every request, so revoking it ends the session;
//! - nothing, while no admin token exists (the open, loopback-only mode).
//!
//! A token limited to one support lane is let in only to that lane's
//! routes ([`Scope::allows_path`]); elsewhere it gets 403 naming the lane.
//! A deployment token (`exo_dt_`, an operator's) is let in to the fleet
//! view alone ([`Scope::Deployment`]; its handler asks for `?tenant=`).
//! Handlers read the [`Scope`] from the request's extensions.
//!
//! A browser asking for a page without a session is sent to `/login`; an
//! API client gets 401 with a message that says what is missing, never the
//! presented value.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use tracing::warn;

use super::hop::PEER_HEADER;
use crate::controlplane::App;
pub use crate::controlplane::model::Scope;
pub use crate::controlplane::session::CSRF_HEADER;
use crate::controlplane::session::{self, Session};
use crate::wire::fleet::FLEET_ROLLOUTS_PATH;
use crate::wire::token::{SecretToken, TOKEN_PREFIX};

/// How a request was let in; page handlers read it for the CSRF token.
#[derive(Debug, Clone)]
pub enum Via {
    /// No admin token exists: the API is open.
    Open,
    Bearer,
    Session(Session),
    /// Forwarded by another replica (`hop`), which authenticated the caller.
    Peer,
}

/// Who was let in, for the records an action leaves: an admin token's id
/// (never the token), `token-file`, `open` or `peer`.
#[derive(Debug, Clone)]
pub struct Actor(pub String);

enum Verdict {
    Allowed(Via, Scope, Actor),
    Missing,
    Invalid,
    Failed(String),
}

fn bearer(headers: &HeaderMap) -> Option<Option<SecretToken>> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let t = v.strip_prefix("Bearer ").map(str::trim).unwrap_or("");
    Some((!t.is_empty()).then(|| SecretToken::new(t)))
}

/// The session id the request's cookie names, if any.
pub fn cookie_session(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(session::from_cookie_header)
}

async fn judge(app: &App, headers: &HeaderMap) -> Verdict {
    if let Some(presented) = headers.get(PEER_HEADER) {
        let ok = app
            .replica
            .as_ref()
            .zip(presented.to_str().ok())
            .is_some_and(|(r, p)| r.is_peer(p));
        return if ok {
            // The replica that forwarded it let it in for a deployment's
            // route, which a lane token cannot reach.
            Verdict::Allowed(Via::Peer, Scope::All, Actor("peer".into()))
        } else {
            Verdict::Invalid
        };
    }
    let required = match app.admin.required(&app.store).await {
        Ok(on) => on,
        Err(e) => return Verdict::Failed(e.to_string()),
    };
    if !required {
        return Verdict::Allowed(Via::Open, Scope::All, Actor("open".into()));
    }
    // An Authorization header decides alone: a wrong Bearer token is not
    // rescued by a cookie.
    if let Some(presented) = bearer(headers) {
        let Some(token) = presented else {
            return Verdict::Invalid;
        };
        return match app.admin.hash_scope(&app.store, &token.hash()).await {
            Ok(Some((id, scope))) => Verdict::Allowed(Via::Bearer, scope, Actor(id)),
            Ok(None) if token.expose().starts_with(TOKEN_PREFIX) => {
                deployment_token(app, &token).await
            }
            Ok(None) => Verdict::Invalid,
            Err(e) => Verdict::Failed(e.to_string()),
        };
    }
    let Some(id) = cookie_session(headers) else {
        return Verdict::Missing;
    };
    let Some(s) = app.sessions.get(id) else {
        return Verdict::Missing;
    };
    match app.admin.hash_scope(&app.store, &s.admin_hash).await {
        Ok(Some((id, scope))) => Verdict::Allowed(Via::Session(s), scope, Actor(id)),
        Ok(None) => {
            app.sessions.close(id);
            Verdict::Missing
        }
        Err(e) => Verdict::Failed(e.to_string()),
    }
}

/// A deployment's own token (as its operator presents it upstream): let
/// in with [`Scope::Deployment`], which reaches the fleet view alone.
async fn deployment_token(app: &App, token: &SecretToken) -> Verdict {
    match app.store.authenticate(token).await {
        Ok(Some(auth)) => Verdict::Allowed(
            Via::Bearer,
            Scope::Deployment(auth.deployment),
            Actor(auth.token_id),
        ),
        Ok(None) => Verdict::Invalid,
        Err(e) => Verdict::Failed(e.to_string()),
    }
}

fn changes_state(m: &Method) -> bool {
    !matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether the request's `Origin` is this server (`scheme://Host`).
pub fn same_origin(headers: &HeaderMap, tls: bool) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let scheme = if tls { "https" } else { "http" };
    origin == format!("{scheme}://{host}")
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// A page a browser navigates to (as opposed to the API).
fn is_page(req: &Request) -> bool {
    let p = req.uri().path();
    req.method() == Method::GET
        && (p == "/"
            || p == "/status"
            || p.starts_with("/deployments")
            || p.starts_with("/lanes")
            || p.starts_with("/fleet"))
}

fn forbidden(msg: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        Json(serde_json::json!({ "error": msg })),
    )
        .into_response()
}

/// Middleware for every admin route.
pub async fn require(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let msg = match judge(&app, req.headers()).await {
        Verdict::Allowed(via, scope, actor) => {
            if !scope.allows_path(req.uri().path()) {
                app.stats
                    .admin_rejected
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let msg = match &scope {
                    Scope::Lane(lane) => {
                        tracing::info!(path = %req.uri().path(), lane, "refused: outside the token's lane");
                        format!(
                            "this admin token is limited to support lane {lane:?}: only /api/v1/lanes/{lane} \
                             and /lanes/{lane} are open to it"
                        )
                    }
                    Scope::Deployment(d) => {
                        tracing::info!(path = %req.uri().path(), deployment = %d, "refused: a deployment token outside the fleet view");
                        format!(
                            "a deployment token reads only {FLEET_ROLLOUTS_PATH}?tenant=NAME; \
                             use an admin token for the rest"
                        )
                    }
                    Scope::All => String::new(),
                };
                return forbidden(&msg);
            }
            if let Via::Session(s) = &via {
                if changes_state(req.method()) {
                    let presented = req
                        .headers()
                        .get(CSRF_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    if !s.csrf_matches(presented) {
                        app.stats
                            .admin_rejected
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::info!(path = %req.uri().path(), "refused: missing or wrong CSRF token");
                        return forbidden("missing or wrong CSRF token");
                    }
                }
                if is_upgrade(req.headers()) && !same_origin(req.headers(), app.cfg.tls.is_some()) {
                    tracing::info!(path = %req.uri().path(), "refused: WebSocket from another origin");
                    return forbidden(
                        "a WebSocket opened with the session cookie must come from this server's pages",
                    );
                }
            }
            req.extensions_mut().insert(via);
            req.extensions_mut().insert(scope);
            req.extensions_mut().insert(actor);
            return next.run(req).await;
        }
        Verdict::Failed(e) => {
            warn!(error = %e, "admin token lookup failed");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({ "error": "admin token lookup failed" })),
            )
                .into_response();
        }
        Verdict::Missing => {
            "admin token required: send `Authorization: Bearer <admin token>` \
             (create one with `exo control-plane admin-token create`), or log in at /login"
        }
        Verdict::Invalid => "invalid admin token (unknown or revoked)",
    };
    app.stats
        .admin_rejected
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::info!(path = %req.uri().path(), "admin request refused: {msg}");
    if is_page(&req) {
        let next = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let to = format!("/login?next={}", percent_encode(next));
        return Redirect::to(&to).into_response();
    }
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            "Bearer realm=\"exo control plane\"",
        )],
        Json(serde_json::json!({ "error": msg })),
    )
        .into_response()
}

/// Percent-encodes everything but unreserved characters and `/`.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where to go after logging in: a path on this server only (`/x`, never
/// `//host` or `https://…`), so the login page is no open redirect.
pub fn local_target(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n,
        _ => "/",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn bearer_and_cookie_are_read_from_their_headers() {
        let h = headers(&[("authorization", "Bearer exo_at_x")]);
        assert_eq!(bearer(&h).unwrap().unwrap().expose(), "exo_at_x");
        assert!(
            bearer(&headers(&[("authorization", "Bearer ")]))
                .unwrap()
                .is_none()
        );
        assert!(
            bearer(&headers(&[("authorization", "Basic abc")]))
                .unwrap()
                .is_none()
        );
        assert!(bearer(&HeaderMap::new()).is_none());
        let h = headers(&[("cookie", "a=1"), ("cookie", "exo_session=exo_s_z")]);
        assert_eq!(cookie_session(&h), Some("exo_s_z"));
    }

    #[test]
    fn origin_must_be_this_server() {
        let ok = headers(&[
            ("origin", "http://127.0.0.1:8700"),
            ("host", "127.0.0.1:8700"),
        ]);
        assert!(same_origin(&ok, false));
        assert!(!same_origin(&ok, true), "scheme counts");
        let other = headers(&[
            ("origin", "http://evil.example"),
            ("host", "127.0.0.1:8700"),
        ]);
        assert!(!same_origin(&other, false));
        assert!(!same_origin(&headers(&[("host", "h")]), false), "no Origin");
    }

    #[test]
    fn only_local_paths_are_login_targets() {
        assert_eq!(
            local_target(Some("/deployments/a/waves")),
            "/deployments/a/waves"
        );
        for bad in ["//evil.example/x", "https://evil.example", "x", "/\\evil"] {
            assert_eq!(local_target(Some(bad)), "/", "{bad}");
        }
        assert_eq!(local_target(None), "/");
        assert_eq!(percent_encode("/a?b=c d"), "/a%3Fb%3Dc%20d");
    }
}
