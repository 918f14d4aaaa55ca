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

mod support;
mod upstream_support;

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

// ------------------------------------------------------------------ log in

#[tokio::test]
async fn a_wrong_token_is_refused_and_the_right_one_opens_a_strict_session() {
    let ns = TestNamespace::new("dash-login").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[]);
    let dep = cp.create_deployment("login");
    let _c = Connector::start(&cp.base, &dep, &ns.name, &[]);
    let admin = admin_token(&cp);
    let s = Session::open(&cp.base).await;

    // Not logged in: every page sends you to /login.
    s.goto("/").await;
    s.wait_for(r#"body[data-page="login"] form#login"#).await;
    assert_eq!(s.path().await, "/login");

    // A wrong token is refused, and no cookie is set.
    let wrong = format!("exo_at_{}", "0".repeat(64));
    s.type_into("form#login input#token", &wrong).await;
    s.click(r#"form#login [type="submit"]"#).await;
    let error = s.wait_for("#login-error").await;
    assert!(
        error.is_displayed().await.unwrap(),
        "#login-error is hidden"
    );
    assert!(
        !s.describe().await.contains(&wrong),
        "the refused token is echoed on the page"
    );
    let cookies = s.client.get_all_cookies().await.unwrap();
    assert!(
        cookies.iter().all(|c| c.name() != "exo_session"),
        "a session cookie after a refused login"
    );

    // The right one opens a session: an HttpOnly, SameSite=Strict cookie
    // holding an id, not the token.
    log_in(&s, &admin).await;
    let c = s.client.get_named_cookie("exo_session").await.unwrap();
    assert_eq!(c.http_only(), Some(true), "exo_session is not HttpOnly");
    // fantoccini does not re-export the cookie crate's SameSite.
    assert_eq!(
        format!("{:?}", c.same_site()),
        "Some(Strict)",
        "exo_session is not SameSite=Strict"
    );
    assert!(!c.value().is_empty() && !c.value().contains(&admin[7..]));
    assert!(
        !s.describe().await.contains(&admin[7..]),
        "the admin token reached the page"
    );

    // The session works: the overview shows the deployment, live.
    let row = r#"table#deployments tr[data-deployment="login"]"#;
    s.wait_for(&format!(r#"{row} span.state[data-state="online"]"#))
        .await;
    s.wait_for(r#"body[data-live="open"]"#).await;
    s.click(&format!("{row} a")).await;
    s.wait_for(r#"body[data-page="deployment"] table#resources"#)
        .await;
    assert_eq!(s.path().await, "/deployments/login");

    // The same over plain HTTP: the Set-Cookie header's flags.
    let (path, field) = login_form_at(&s).await;
    let refused = post_login(&cp, &path, &field, &wrong);
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert!(refused.set_cookies().is_empty(), "{}", refused.head);
    assert!(!refused.body.contains(&wrong) && !refused.head.contains(&wrong));
    let ok = post_login(&cp, &path, &field, &admin);
    let set = ok.set_cookies();
    let session = set
        .iter()
        .find(|c| c.starts_with("exo_session="))
        .unwrap_or_else(|| panic!("no exo_session cookie; status {}: {}", ok.status, ok.head));
    let attrs: Vec<String> = session
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_ascii_lowercase())
        .collect();
    for want in ["httponly", "samesite=strict", "path=/", "max-age=43200"] {
        assert!(
            attrs.iter().any(|a| a == want),
            "Set-Cookie exo_session lacks {want}: {attrs:?}"
        );
    }
    assert!(
        !attrs.iter().any(|a| a == "secure"),
        "Secure on plain http: {attrs:?}"
    );
    assert!(!session.contains(&admin[7..]), "the cookie holds the token");
    let pair = cookie_pair(session);
    let api = request(
        &cp.addr,
        "GET",
        "/api/v1/deployments/login",
        &[("Cookie", &pair)],
        "",
    );
    assert_eq!(api.status, 200, "{}", api.body);
    let none = request(&cp.addr, "GET", "/api/v1/deployments/login", &[], "");
    assert_eq!(none.status, 401, "{}", none.body);

    // Logging out ends the browser's session.
    s.goto("/").await;
    s.wait_for(r#"body[data-page="overview"]"#).await;
    s.click("button#logout").await;
    s.wait_for(r#"body[data-page="login"]"#).await;
    s.goto("/").await;
    s.wait_for(r#"body[data-page="login"]"#).await;
    s.close().await;
}

/// [`login_form`] on a fresh login page.
async fn login_form_at(s: &Session) -> (String, String) {
    s.goto("/login").await;
    s.wait_for("form#login input#token").await;
    login_form(s).await
}

#[tokio::test]
async fn a_session_ends_at_its_ttl_and_the_page_goes_back_to_login() {
    let cp = ControlPlane::start(&["--session-ttl", "3s"]);
    cp.create_deployment("ttl");
    let (_admin, s) = logged_in(&cp).await;
    s.wait_for(r#"table#deployments tr[data-deployment="ttl"]"#)
        .await;
    let c = s.client.get_named_cookie("exo_session").await.unwrap();
    let pair = format!("exo_session={}", c.value());
    let works = request(
        &cp.addr,
        "GET",
        "/api/v1/deployments",
        &[("Cookie", &pair)],
        "",
    );
    assert_eq!(works.status, 200, "{}", works.body);

    // The server ends it at its expiry.
    let started = Instant::now();
    eventually(
        "the server to refuse the expired session",
        Duration::from_secs(20),
        || {
            let r = request(
                &cp.addr,
                "GET",
                "/api/v1/deployments",
                &[("Cookie", &pair)],
                "",
            );
            async move { (r.status == 401).then_some(()) }
        },
    )
    .await;
    println!(
        "session refused {:?} after the check began (ttl 3s)",
        started.elapsed()
    );

    // And the page sends you back to /login.
    s.client.refresh().await.unwrap();
    s.wait_for(r#"body[data-page="login"] form#login"#).await;
    assert_eq!(s.path().await, "/login");
    s.close().await;
}

// ------------------------------------------------------------------ overview

#[tokio::test]
async fn the_overview_shows_an_online_and_a_degraded_deployment_in_their_colours() {
    let ns = TestNamespace::new("dash-over").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[
        "--degraded-after",
        "3s",
        "--offline-after",
        "10m",
        "--heartbeat-interval",
        "500ms",
    ]);
    let steady = cp.create_deployment("steady");
    let silent = cp.create_deployment("silent");
    let c = Connector::start(
        &cp.base,
        &steady,
        &ns.name,
        &["--heartbeat-interval", "500ms"],
    );
    connector_until(&c, "steady to connect", |h| h["state"] == "connected").await;
    // Says hello, then nothing: degraded once 3 s pass without a frame.
    let _quiet = upstream_support::raw::raw_client(&cp, &silent).await;

    let (admin, s) = logged_in(&cp).await;
    let state = |dep: &str, st: &str| {
        format!(r#"table#deployments tr[data-deployment="{dep}"] span.state[data-state="{st}"]"#)
    };
    s.wait_for_in(&state("silent", "degraded"), Duration::from_secs(30))
        .await;
    s.wait_for(&state("steady", "online")).await;
    let online_bg = s
        .computed_style(&state("steady", "online"), "background-color")
        .await;
    let degraded_bg = s
        .computed_style(&state("silent", "degraded"), "background-color")
        .await;
    assert_eq!(online_bg, rgb(ONLINE), "online's colour");
    assert_eq!(degraded_bg, rgb(DEGRADED), "degraded's colour");
    // Both at once: the steady one did not go degraded meanwhile.
    assert_eq!(
        s.attr(
            r#"table#deployments tr[data-deployment="steady"] span.state"#,
            "data-state"
        )
        .await
        .as_deref(),
        Some("online")
    );
    let d = api_get(&cp, &admin, "/api/v1/deployments/silent");
    assert_eq!(d["state"], "degraded", "{d}");
    for col in [".heartbeat", ".version", ".capabilities", ".alerts"] {
        s.wait_for(&format!(
            r#"table#deployments tr[data-deployment="steady"] {col}"#
        ))
        .await;
    }
    let shot = s.screenshot("overview").await;
    println!("screenshot: {}", shot.display());
    s.close().await;
}

// ------------------------------------------------------------------ waves

/// `(wave, tenants)` of the example fleet, in wave order.
fn waves(prefix: &str) -> Vec<(&'static str, Vec<String>)> {
    vec![
        ("canary", vec![format!("{prefix}-platform")]),
        ("low-risk", vec![format!("{prefix}-acme")]),
        (
            "fleet",
            ["globex", "initech", "umbrella"]
                .iter()
                .map(|t| format!("{prefix}-{t}"))
                .collect(),
        ),
    ]
}

/// Whether every tenant row of `wave` shows `release`, current (not
/// stale), with every step done.
const WAVE_DONE: &str = "const [wave, tenants, release] = arguments;
    const sec = document.querySelector(`section.wave[data-wave=\"${wave}\"]`);
    if (!sec) return false;
    return tenants.every(t => {
      const tr = sec.querySelector(`tr.tenant[data-tenant=\"${t}\"]`);
      if (!tr || tr.dataset.stale === 'true') return false;
      const rel = tr.querySelector('.release');
      const steps = tr.querySelectorAll('td.step');
      return rel && rel.textContent.trim() === release && steps.length > 0
        && Array.from(steps).every(s => s.dataset.state === 'done');
    });";

/// Whether a tenant row of `wave` is on `release` with a step not done
/// yet, or every row is done there.
const WAVE_MOVING: &str = "const [wave, tenants, release] = arguments;
    const sec = document.querySelector(`section.wave[data-wave=\"${wave}\"]`);
    if (!sec) return false;
    const rows = tenants.map(t => sec.querySelector(`tr.tenant[data-tenant=\"${t}\"]`));
    const on = rows.filter(tr => tr && tr.querySelector('.release')
      && tr.querySelector('.release').textContent.trim() === release);
    const moving = on.some(tr => Array.from(tr.querySelectorAll('td.step'))
      .some(s => s.dataset.state !== 'done'));
    return moving || on.length === tenants.length;";

/// Records every state a step cell takes, with its colour then: the
/// computed background of the cell or, when that is transparent, of the
/// first element inside it that has one (the contract names the cell, the
/// page may paint a chip in it).
const RECORD_STEPS: &str = "window.__exoSeen = [];
    const colourOf = td => {
      for (const e of [td, ...td.querySelectorAll('*')]) {
        const c = getComputedStyle(e).backgroundColor;
        if (c && c !== 'transparent' && c !== 'rgba(0, 0, 0, 0)') return c;
      }
      return 'none';
    };
    const rec = td => {
      const tr = td.closest('tr.tenant');
      const rel = tr && tr.querySelector('.release');
      window.__exoSeen.push([tr ? tr.dataset.tenant : null, td.dataset.step, td.dataset.state,
        rel ? rel.textContent.trim() : null, colourOf(td)]);
    };
    document.querySelectorAll('td.step').forEach(rec);
    new MutationObserver(ms => {
      for (const m of ms) {
        if (m.type === 'attributes' && m.target.matches('td.step')) rec(m.target);
        for (const n of m.addedNodes) {
          if (n.nodeType !== 1) continue;
          if (n.matches('td.step')) rec(n);
          n.querySelectorAll('td.step').forEach(rec);
        }
      }
    }).observe(document.body, {subtree: true, childList: true, attributes: true,
                               attributeFilter: ['data-state']});
    return true;";

/// Whether a computed colour belongs to a step state's family (the
/// contract names families: done green, running blue, pending grey,
/// waiting amber, failed red).
fn colour_fits(state: &str, css: &str) -> bool {
    let Some((r, g, b)) = channels(css) else {
        return false;
    };
    let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
    match state {
        "done" => g > r && g > b,
        "running" => b > r && b >= g,
        "pending" => (r.max(g).max(b) - r.min(g).min(b)) < 40,
        "waiting" => r >= g && g > b + 30 && r > b + 60,
        "failed" => r > 2 * g && r > 2 * b,
        _ => false,
    }
}

#[tokio::test]
async fn the_waves_page_follows_a_three_wave_rollout_step_by_step() {
    let _cluster = CLUSTER.write().await;
    // Tenant namespaces are named after the prefix; a unique one keeps a
    // rerun clear of the last run's namespaces while they terminate.
    let prefix = format!("dw{}", support::unique_suffix());
    let fx = Fixture::new(&prefix, example_files(&prefix)).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("fleet");
    let admin = admin_token(&cp);
    let op = Operator::start_env(
        &fx.ns.name,
        &support::env().kubeconfig,
        "a",
        &[],
        &[
            ("AUTONOMIC_MANAGED", "true"),
            ("AUTONOMIC_BASE_URL", &cp.base),
            ("AUTONOMIC_AUTH_TOKEN", &token),
        ],
    );
    fx.wait_all(OLD, &op).await;

    let s = Session::open(&cp.base).await;
    log_in(&s, &admin).await;
    s.goto("/deployments/fleet/waves").await;
    s.wait_for(r#"body[data-page="waves"]"#).await;
    let plan = waves(&prefix);
    for (wave, tenants) in &plan {
        s.wait_js(
            &format!("wave {wave} verified on {OLD}"),
            Duration::from_secs(60),
            WAVE_DONE,
            vec![json!(wave), json!(tenants), json!(OLD)],
        )
        .await;
    }
    let order = s
        .js(
            "return Array.from(document.querySelectorAll('section.wave')).map(s => s.dataset.wave);",
            vec![],
        )
        .await;
    assert_eq!(order, json!(["canary", "low-risk", "fleet"]), "wave order");
    for (_, tenants) in &plan {
        for t in tenants {
            for col in [".commit", ".verified-at"] {
                s.wait_for(&format!(r#"tr.tenant[data-tenant="{t}"] {col}"#))
                    .await;
            }
        }
    }
    s.js(RECORD_STEPS, vec![]).await;

    // The rollout, driven like a user does, while the page watches.
    let root = fx.root();
    let kubeconfig = support::env().kubeconfig.clone();
    let rollout = tokio::task::spawn_blocking(move || {
        std::process::Command::new(support::fleet::EXO)
            .args(["release", "rollout", NEW, "--timeout", "3m"])
            .current_dir(root)
            .env("KUBECONFIG", kubeconfig)
            .output()
            .expect("run exo release rollout")
    });
    for (wave, tenants) in &plan {
        if *wave == "fleet" {
            // The picture mid-flight (README): the fleet wave on its way,
            // or done already when it was quicker than the page's wait.
            s.wait_js(
                "the fleet wave moving",
                Duration::from_secs(180),
                WAVE_MOVING,
                vec![json!(wave), json!(tenants), json!(NEW)],
            )
            .await;
            let shot = s.screenshot("waves-progress").await;
            println!("wave {wave} in progress: {}", shot.display());
        }
        s.wait_js(
            &format!("wave {wave} verified on {NEW}"),
            Duration::from_secs(180),
            WAVE_DONE,
            vec![json!(wave), json!(tenants), json!(NEW)],
        )
        .await;
        let shot = s.screenshot(&format!("waves-{wave}")).await;
        println!("wave {wave} verified on {NEW}: {}", shot.display());
    }
    let o = rollout.await.unwrap();
    let text = support::fleet::out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", tail(&op.log()));
    for (_, tenants) in &plan {
        for t in tenants {
            fx.wait_phase(t, NEW, RolloutPhase::Verified, &op).await;
        }
    }

    // Every state a step took on the page was shown in its colour, and the
    // page showed the saga advance (steps not yet done on the new release).
    let seen = s.js("return window.__exoSeen;", vec![]).await;
    let seen = seen.as_array().expect("recorded steps");
    let mut states = std::collections::BTreeMap::<String, String>::new();
    for rec in seen {
        let (state, colour) = (rec[2].as_str().unwrap_or(""), rec[4].as_str().unwrap_or(""));
        assert!(
            colour_fits(state, colour),
            "step {} of {} shown {state} in {colour}",
            rec[1],
            rec[0]
        );
        states.entry(state.to_owned()).or_insert(colour.to_owned());
    }
    println!("step states seen with their colours: {states:?}");
    for (_, tenants) in &plan {
        for t in tenants {
            assert!(
                seen.iter()
                    .any(|r| r[0] == json!(t) && r[3] == json!(NEW) && r[2] != json!("done")),
                "the page never showed {t}'s saga on {NEW} before it was done"
            );
        }
    }
    s.close().await;
}

// ------------------------------------------------------------------ deployment

#[tokio::test]
async fn restart_on_the_deployment_page_rolls_the_pod_and_is_audited() {
    let _cluster = CLUSTER.read().await;
    let ns = namespace_with_agent("dash-restart", "worker").await;
    let (cp, _op) = upstream_support::managed_operator(&ns.name, "pods").await;
    let pods: Api<Pod> = ns.api();
    let before = support::operator::the_pod(&pods, "agent", "worker").await;
    let old_uid = before.metadata.uid.clone().unwrap();

    let (_admin, s) = logged_in(&cp).await;
    s.goto("/deployments/pods").await;
    let row = agent_row(&ns.name, "worker");
    s.wait_for(&format!("{row} .phase")).await;
    s.wait_for(&format!(r#"{row} a.shell"#)).await;
    s.click(&format!(r#"{row} button[data-action="restart"]"#))
        .await;
    let status = s
        .wait_js(
            "the outcome in #action-status",
            Duration::from_secs(40),
            "const e = document.querySelector('#action-status[role=\"status\"]');
             const t = e && e.textContent.trim();
             return t ? t : null;",
            vec![],
        )
        .await;
    let status = status.as_str().unwrap().to_lowercase();
    assert!(
        !status.contains("error") && !status.contains("fail"),
        "restart reported {status:?}"
    );

    // The pod rolls on the cluster: a new one replaces it.
    let after = support::operator::wait_pod(
        &pods,
        "agent",
        "worker",
        "a new pod for worker after the restart",
        |p| p.metadata.uid.as_deref() != Some(old_uid.as_str()),
    )
    .await;
    println!(
        "pod {} replaced by {}",
        before.metadata.name.unwrap(),
        after.metadata.name.unwrap()
    );

    // And the audit page shows what was issued.
    s.goto("/deployments/pods/audit").await;
    s.wait_for(r#"body[data-page="audit"]"#).await;
    s.wait_for_in(
        r#"table#audit tr[data-id][data-action="pod_control.issued"]"#,
        Duration::from_secs(20),
    )
    .await;
    s.close().await;
}

#[tokio::test]
async fn a_post_with_the_cookie_but_without_the_csrf_token_is_refused() {
    let _cluster = CLUSTER.read().await;
    let ns = namespace_with_agent("dash-csrf", "worker").await;
    let agents = ns.api::<Agent>();
    let (cp, _op) = upstream_support::managed_operator(&ns.name, "csrf").await;
    let (admin, s) = logged_in(&cp).await;
    s.goto("/deployments/csrf").await;
    s.wait_for(&agent_row(&ns.name, "worker")).await;
    let csrf = s
        .js(
            "const m = document.querySelector('meta[name=\"exo-csrf\"]');
             return m ? m.getAttribute('content') : null;",
            vec![],
        )
        .await;
    let csrf = csrf
        .as_str()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| panic!("no <meta name=\"exo-csrf\"> on the deployment page"))
        .to_owned();

    let path = "/api/v1/deployments/csrf/pod-control";
    let pause = json!({"action": "pause", "namespace": ns.name, "agent": "worker"});
    for (what, token) in [("no", None), ("a wrong", Some("not-the-token"))] {
        let (status, body) = page_post(&s, path, &pause, token).await;
        assert_eq!(status, 403, "{what} CSRF token: {body}");
        assert!(
            body.contains("missing or wrong CSRF token"),
            "{what} CSRF token: {body}"
        );
    }
    assert!(
        !agents.get("worker").await.unwrap().spec.paused,
        "a refused request paused the agent"
    );
    let audit = api_get(&cp, &admin, "/api/v1/deployments/csrf/audit");
    assert!(
        !audit["audit"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["action"] == "pod_control.issued"),
        "a refused request was issued: {audit}"
    );

    // With the session's token it is carried out.
    let (status, body) = page_post(&s, path, &pause, Some(&csrf)).await;
    assert_eq!(status, 200, "{body}");
    assert!(agents.get("worker").await.unwrap().spec.paused);

    // A Bearer request carries no ambient credential and needs none.
    let bearer = format!("Bearer {admin}");
    let resume = json!({"action": "resume", "namespace": ns.name, "agent": "worker"}).to_string();
    let r = request(
        &cp.addr,
        "POST",
        path,
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        &resume,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!agents.get("worker").await.unwrap().spec.paused);
    s.close().await;
}

#[tokio::test]
async fn a_delta_reaches_the_open_page_without_a_reload() {
    let _cluster = CLUSTER.read().await;
    let ns = namespace_with_agent("dash-live", "early").await;
    let agents = ns.api::<Agent>();
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("live");
    let c = Connector::start(&cp.base, &token, &ns.name, &[]);
    connector_until(&c, "the connector", |h| h["state"] == "connected").await;

    let (_admin, s) = logged_in(&cp).await;
    s.goto("/deployments/live").await;
    s.wait_for(&agent_row(&ns.name, "early")).await;
    s.wait_for(r#"body[data-live="open"]"#).await;
    s.js("window.__exoMarker = 1; return true;", vec![]).await;

    agents
        .create(&PostParams::default(), &agent("late"))
        .await
        .unwrap();
    let created = Instant::now();
    s.wait_for_in(&agent_row(&ns.name, "late"), Duration::from_secs(10))
        .await;
    println!(
        "the new Agent's row appeared {} ms after its create returned",
        created.elapsed().as_millis()
    );
    let marker = s.js("return window.__exoMarker === 1;", vec![]).await;
    assert_eq!(marker, json!(true), "the page reloaded");

    // The filter matches by name.
    s.type_into("input#filter", "late").await;
    let shown = s
        .wait_js(
            "the filter to hide early",
            Duration::from_secs(5),
            "const v = r => { const e = document.querySelector(r); return !!e && e.offsetParent !== null; };
             return (v(arguments[1]) && !v(arguments[0])) ? true : null;",
            vec![
                json!(agent_row(&ns.name, "early")),
                json!(agent_row(&ns.name, "late")),
            ],
        )
        .await;
    assert_eq!(shown, json!(true));
    s.close().await;
}
