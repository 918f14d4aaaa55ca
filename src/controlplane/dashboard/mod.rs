//! The dashboard's server side: the pages (one HTML shell the script
//! renders from the API and the events stream), the embedded assets, login
//! and logout, and the security headers every response carries. See
//! `docs/dashboard.md`.
//!
//! Guarantees:
//! - Every response has the Content-Security-Policy below: scripts and
//!   styles from this server only, no inline script, no framing.
//! - The login form is the only place an admin token is typed; the answer
//!   is a session cookie (`session`), and the token is never echoed, logged
//!   or put in a page.
//! - The CSRF token is put only into the HTML of a page served to its own
//!   session.

pub mod status;

use std::sync::Arc;

use axum::Form;
use axum::extract::{Extension, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::App;
use super::http::authn::{self, Via};
use super::session;
use crate::wire::token::SecretToken;

/// Every file under `dashboard/assets/`, embedded by `build.rs`.
static ASSETS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/dashboard_assets.rs"));

pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; font-src 'self'; frame-ancestors 'none'; \
    base-uri 'none'; form-action 'self'";

/// The pages below a deployment, as `docs/dashboard.md` lists them.
const SUBPAGES: &[&str] = &["waves", "storage", "audit", "shell"];

pub fn asset(path: &str) -> Option<&'static [u8]> {
    ASSETS.iter().find(|(p, _)| *p == path).map(|(_, b)| *b)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, e)| e) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("txt" | "md") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Adds the security headers to every response.
pub async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        // Not `no-referrer`: a form posted under it carries `Origin: null`,
        // and the login checks the origin. Other sites still get nothing.
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

/// `GET /assets/{*path}`: an embedded file, revalidated by its hash.
pub async fn assets(Path(path): Path<String>, headers: HeaderMap) -> Response {
    let Some(bytes) = asset(&path) else {
        return (StatusCode::NOT_FOUND, "no such asset\n").into_response();
    };
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes));
    let etag = format!("\"{}\"", &digest[..16]);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == etag);
    let status = if fresh {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let body = if fresh { Vec::new() } else { bytes.to_vec() };
    (
        status,
        [
            (header::CONTENT_TYPE, content_type(&path).to_owned()),
            (header::CACHE_CONTROL, "no-cache".to_owned()),
            (header::ETAG, etag),
        ],
        body,
    )
        .into_response()
}

/// HTML-escapes text for an element or a quoted attribute.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// An HTML template, or the answer that says it is missing.
fn template(name: &str) -> Result<String, Box<Response>> {
    asset(name)
        .and_then(|b| String::from_utf8(b.to_vec()).ok())
        .ok_or_else(|| {
            Box::new(
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("dashboard asset {name} is missing from this build\n"),
                )
                    .into_response(),
            )
        })
}

/// The shell for one page, with the session's CSRF token.
fn shell(page: &str, via: &Via) -> Response {
    let html = match template("index.html") {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let csrf = match via {
        Via::Session(s) => s.csrf.expose().to_owned(),
        Via::Open | Via::Bearer | Via::Peer => String::new(),
    };
    Html(
        html.replace("{{CSRF}}", &esc(&csrf))
            .replace("{{PAGE}}", page),
    )
    .into_response()
}

/// `GET /`: the fleet; a lane's token is sent on to its lane's page.
pub async fn overview(
    Extension(via): Extension<Via>,
    Extension(scope): Extension<authn::Scope>,
) -> Response {
    match scope {
        authn::Scope::Lane(l) => Redirect::to(&format!("/lanes/{l}")).into_response(),
        authn::Scope::All => shell("overview", &via),
        // The middleware lets a deployment token reach the fleet view only.
        authn::Scope::Deployment(_) => StatusCode::FORBIDDEN.into_response(),
    }
}

/// `GET /fleet/waves`: every cluster's Rollouts by wave, tenant and
/// cluster (`app/fleet-waves.js`), for a full token only (the middleware
/// keeps lane and deployment tokens out).
pub async fn fleet_waves(Extension(via): Extension<Via>) -> Response {
    shell("fleet-waves", &via)
}

/// `GET /lanes/{lane}`: one support lane's incidents, live.
pub async fn lane(
    Path(lane): Path<String>,
    Extension(via): Extension<Via>,
    Extension(scope): Extension<authn::Scope>,
) -> Response {
    if !crate::names::is_dns1123_label(&lane) {
        return (StatusCode::NOT_FOUND, "no such lane\n").into_response();
    }
    if !scope.allows_lane(&lane) {
        return (StatusCode::FORBIDDEN, "this token may not read that lane\n").into_response();
    }
    shell("lane", &via)
}

async fn unknown_deployment(app: &App, name: &str) -> Option<Response> {
    match app.store.deployment_exists(name).await {
        Ok(true) => None,
        Ok(false) => Some(
            (
                StatusCode::NOT_FOUND,
                Html(format!(
                    "<!doctype html><meta charset=\"utf-8\"><title>Not found</title>\
                     <p>Deployment <code>{}</code> does not exist. <a href=\"/\">All deployments</a></p>",
                    esc(name)
                )),
            )
                .into_response(),
        ),
        Err(e) => Some((StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()),
    }
}

pub async fn deployment(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Extension(via): Extension<Via>,
) -> Response {
    unknown_deployment(&app, &name)
        .await
        .unwrap_or_else(|| shell("deployment", &via))
}

pub async fn subpage(
    State(app): State<Arc<App>>,
    Path((name, sub)): Path<(String, String)>,
    Extension(via): Extension<Via>,
) -> Response {
    let Some(page) = SUBPAGES.iter().find(|p| **p == sub) else {
        return (StatusCode::NOT_FOUND, "no such page\n").into_response();
    };
    unknown_deployment(&app, &name)
        .await
        .unwrap_or_else(|| shell(page, &via))
}

#[derive(Debug, Deserialize)]
pub struct NextQuery {
    #[serde(default)]
    next: Option<String>,
}

fn login_page(status: StatusCode, error: Option<&str>, next: &str) -> Response {
    let html = match template("login.html") {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let error = error
        .map(|e| format!("<p id=\"login-error\" role=\"alert\">{}</p>", esc(e)))
        .unwrap_or_default();
    (
        status,
        Html(
            html.replace("{{ERROR}}", &error)
                .replace("{{NEXT}}", &esc(next)),
        ),
    )
        .into_response()
}

/// `GET /login`.
pub async fn login_form(State(app): State<Arc<App>>, Query(q): Query<NextQuery>) -> Response {
    let next = authn::local_target(q.next.as_deref());
    if !app.admin.required(&app.store).await.unwrap_or(true) {
        return Redirect::to(next).into_response();
    }
    login_page(StatusCode::OK, None, next)
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
    #[serde(default)]
    next: Option<String>,
}

/// `POST /login`: a valid admin token opens a session.
pub async fn login(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let next = authn::local_target(form.next.as_deref()).to_owned();
    // A login posted from another site's page is refused (login CSRF).
    if headers.contains_key(header::ORIGIN) && !authn::same_origin(&headers, app.cfg.tls.is_some())
    {
        return login_page(
            StatusCode::FORBIDDEN,
            Some("log in from this server's own login page"),
            &next,
        );
    }
    let token = SecretToken::new(form.token.trim());
    let valid = match app.admin.hash_scope(&app.store, &token.hash()).await {
        Ok(v) => v.is_some() && !token.expose().is_empty(),
        Err(e) => {
            tracing::warn!(error = %e, "admin token lookup failed");
            return login_page(
                StatusCode::SERVICE_UNAVAILABLE,
                Some("admin token lookup failed; try again"),
                &next,
            );
        }
    };
    if !valid {
        app.stats
            .admin_rejected
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!("dashboard login refused: invalid admin token");
        return login_page(
            StatusCode::UNAUTHORIZED,
            Some("invalid admin token (unknown or revoked)"),
            &next,
        );
    }
    let Some(id) = app.sessions.open(token.hash()) else {
        return login_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some("could not open a session"),
            &next,
        );
    };
    tracing::info!("dashboard session opened");
    let cookie = session::set_cookie(&id, app.sessions.ttl(), app.cfg.tls.is_some());
    (
        StatusCode::SEE_OTHER,
        [(header::SET_COOKIE, cookie), (header::LOCATION, next)],
    )
        .into_response()
}

/// `POST /logout` (behind the admin middleware, so CSRF-checked).
pub async fn logout(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Some(id) = authn::cookie_session(&headers) {
        app.sessions.close(id);
    }
    (
        StatusCode::NO_CONTENT,
        [(
            header::SET_COOKIE,
            session::clear_cookie(app.cfg.tls.is_some()),
        )],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_follow_the_extension() {
        assert_eq!(content_type("app.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("vendor/xterm.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("x"), "application/octet-stream");
    }

    #[test]
    fn the_policy_allows_no_inline_script_and_no_framing() {
        assert!(CSP.contains("script-src 'self';"));
        assert!(!CSP.contains("unsafe-inline"));
        assert!(CSP.contains("frame-ancestors 'none'"));
    }
}
