#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The dashboard in a real browser: headless Chromium over WebDriver
//! (`tests/support/browser.rs`) against a real `exo control-plane serve`,
//! real operators (`exo operator connect`, `exo operator run`) and the test
//! apiserver. What the tests rely on is `docs/dashboard.md`, "Page
//! structure". Each test has its own serve process, database and namespace;
//! they share one chromedriver.
//!
//! The waves test runs an operator that watches every namespace, so it
//! holds [`CLUSTER`] for writing while the tests with operators of their own
//! hold it for reading.

#[path = "../support/mod.rs"]
mod support;
#[path = "../upstream_support/mod.rs"]
mod upstream_support;

mod analysis;
mod circuits;
mod deployment;
mod fleet;
mod lanes;
mod login;
mod storage;
mod waves;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use exo::crd::{Agent, RolloutPhase};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::browser::{Session, channels, rgb};
use support::fleet::{Fixture, Operator, example_files, tail};
use support::{TestNamespace, eventually};
use upstream_support::{Connector, ControlPlane, agent, connector_until, install_crds};

static CLUSTER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

const OLD: &str = "2026.11.0";
const NEW: &str = "2026.11.1";
const ONLINE: &str = "#1a7f37";
const DEGRADED: &str = "#9a6700";

// ------------------------------------------------------------------ helpers

/// A raw HTTP response.
struct Response {
    status: u16,
    /// The status line and headers as sent.
    head: String,
    body: String,
}

impl Response {
    /// The values of every `Set-Cookie` header.
    fn set_cookies(&self) -> Vec<String> {
        self.head
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("set-cookie")
                    .then(|| v.trim().to_owned())
            })
            .collect()
    }
}

/// One HTTP/1.1 request (one connection) with `headers`.
fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    let resp = String::from_utf8_lossy(&resp).into_owned();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad response to {method} {path}: {head:?}"));
    Response {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// `exo control-plane admin-token create`: the token, never printed.
fn admin_token(cp: &ControlPlane) -> String {
    cp.create_admin_token().0
}

/// An admin token and a browser logged in with it.
async fn logged_in(cp: &ControlPlane) -> (String, Session) {
    let admin = admin_token(cp);
    let s = Session::open(&cp.base).await;
    log_in(&s, &admin).await;
    (admin, s)
}

/// A fresh namespace with the CRDs and one Agent `name`.
async fn namespace_with_agent(prefix: &str, name: &str) -> TestNamespace {
    let ns = TestNamespace::new(prefix).await;
    install_crds(&ns.client).await;
    ns.api::<Agent>()
        .create(&PostParams::default(), &agent(name))
        .await
        .unwrap();
    ns
}

/// GET an API path with the admin token.
fn api_get(cp: &ControlPlane, admin: &str, path: &str) -> Value {
    let bearer = format!("Bearer {admin}");
    let r = request(&cp.addr, "GET", path, &[("Authorization", &bearer)], "");
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("GET {path}: {e}: {}", r.body))
}

/// Logs the browser in through the login form and waits for the overview.
async fn log_in(s: &Session, token: &str) {
    s.goto("/login").await;
    s.wait_for(r#"body[data-page="login"] form#login input#token[type="password"]"#)
        .await;
    s.type_into("form#login input#token", token).await;
    s.click(r#"form#login [type="submit"]"#).await;
    s.wait_for(r#"body[data-page="overview"]"#).await;
}

/// How the login form posts, read from the page: (path, field name).
async fn login_form(s: &Session) -> (String, String) {
    let v = s
        .js(
            "const f = document.querySelector('form#login');
             const i = document.querySelector('form#login input#token');
             return [new URL(f.getAttribute('action') || location.href, location.href).pathname,
                     (f.getAttribute('method') || 'get').toLowerCase(),
                     i.getAttribute('name') || 'token'];",
            vec![],
        )
        .await;
    assert_eq!(v[1], "post", "form#login must post the token: {v}");
    (
        v[0].as_str().unwrap().to_owned(),
        v[2].as_str().unwrap().to_owned(),
    )
}

/// Posts the login form with a plain HTTP client.
fn post_login(cp: &ControlPlane, path: &str, field: &str, token: &str) -> Response {
    request(
        &cp.addr,
        "POST",
        path,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &format!("{field}={token}"),
    )
}

/// `exo_session=<id>` out of a `Set-Cookie` value.
fn cookie_pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().trim().to_owned()
}

/// A `fetch` from inside the page (its cookie, its origin): (status, body).
async fn page_post(s: &Session, path: &str, body: &Value, csrf: Option<&str>) -> (u16, String) {
    let v = s
        .client
        .execute_async(
            "const [path, body, csrf, done] = arguments;
             const headers = {'Content-Type': 'application/json'};
             if (csrf !== null) headers['X-CSRF-Token'] = csrf;
             fetch(path, {method: 'POST', headers, body: JSON.stringify(body), credentials: 'same-origin'})
               .then(async r => done([r.status, await r.text()]))
               .catch(e => done([0, String(e)]));",
            vec![json!(path), body.clone(), json!(csrf)],
        )
        .await
        .unwrap_or_else(|e| panic!("fetch {path} from the page: {e}"));
    (
        v[0].as_u64().unwrap() as u16,
        v[1].as_str().unwrap().to_owned(),
    )
}

fn agent_row(ns: &str, name: &str) -> String {
    format!(r#"table#resources tr[data-kind="Agent"][data-namespace="{ns}"][data-name="{name}"]"#)
}
