#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Admin authentication of the control plane's HTTP API and status page:
//! real `exo control-plane` processes, a real operator connection (which
//! keeps using its deployment token), and `exo attach` as an API client.

mod support;
mod upstream_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;

use base64::Engine;
use support::TestNamespace;
use upstream_support::{Connector, ControlPlane, connector_until, exo, install_crds};

/// One GET; returns (status, headers, body) of the raw response.
fn request(addr: &str, path: &str, auth: Option<&str>) -> (u16, String, String) {
    let auth = auth.map(|a| ("Authorization", a));
    raw(addr, "GET", path, auth.as_slice(), "")
}

/// One request with these headers and body; (status, lowercased head, body).
fn raw(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut extra = String::new();
    for (k, v) in headers {
        extra.push_str(&format!("{k}: {v}\r\n"));
    }
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap();
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// The `Set-Cookie` of a response head (lowercased), and the cookie pair.
fn session_cookie(head: &str) -> (String, String) {
    let line = head
        .lines()
        .find(|l| l.starts_with("set-cookie: exo_session="))
        .unwrap_or_else(|| panic!("no session cookie in {head}"));
    let value = line.trim_start_matches("set-cookie: ").to_owned();
    let pair = value.split(';').next().unwrap().to_owned();
    (value, pair)
}

#[tokio::test]
async fn a_dashboard_login_opens_a_session_that_needs_csrf_to_act() {
    let cp = ControlPlane::start(&["--session-ttl", "3s"]);
    cp.create_deployment("web");
    let (admin, admin_id) = cp.create_admin_token();
    let form = |t: &str| format!("token={t}&next=%2Fdeployments%2Fweb");
    let urlenc = [("Content-Type", "application/x-www-form-urlencoded")];

    // A wrong token: refused, no cookie, and never echoed.
    let (status, head, body) = raw(
        &cp.addr,
        "POST",
        "/login",
        &urlenc,
        &form("exo_at_wrong1234"),
    );
    assert_eq!(status, 401, "{body}");
    assert!(!head.contains("set-cookie"), "{head}");
    assert!(
        body.contains("id=\"login-error\"") && !body.contains("exo_at_wrong1234"),
        "{body}"
    );

    // The right one: a session cookie with its flags, and back to the page.
    let (status, head, _) = raw(&cp.addr, "POST", "/login", &urlenc, &form(&admin));
    assert_eq!(status, 303, "{head}");
    assert!(head.contains("location: /deployments/web"), "{head}");
    let (set, pair) = session_cookie(&head);
    for flag in ["httponly", "samesite=strict", "path=/", "max-age=3"] {
        assert!(set.contains(flag), "{flag} missing: {set}");
    }
    assert!(
        !set.contains(&admin.to_ascii_lowercase()),
        "the cookie is not the token"
    );
    // The login page from another site is refused.
    let mut cross = urlenc.to_vec();
    cross.push(("Origin", "http://evil.example"));
    assert_eq!(
        raw(&cp.addr, "POST", "/login", &cross, &form(&admin)).0,
        403
    );

    let cookie = [("Cookie", pair.as_str())];
    let (status, head, page) = raw(&cp.addr, "GET", "/deployments/web", &cookie, "");
    assert_eq!(status, 200);
    assert!(
        head.contains("content-security-policy: default-src 'none'"),
        "{head}"
    );
    let csrf = page
        .split("name=\"exo-csrf\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no CSRF meta in {page}"))
        .to_owned();
    assert!(csrf.starts_with("exo_c_"), "{csrf}");
    assert!(!page.contains(&admin), "the token never reaches the page");
    assert_eq!(
        raw(&cp.addr, "GET", "/api/v1/deployments/web", &cookie, "").0,
        200
    );

    // A state-changing request with the cookie needs the CSRF token.
    let body = r#"{"action":"restart","namespace":"t","agent":"a"}"#;
    let mut json = vec![
        ("Content-Type", "application/json"),
        ("Cookie", pair.as_str()),
    ];
    let path = "/api/v1/deployments/web/pod-control";
    let (status, _, text) = raw(&cp.addr, "POST", path, &json, body);
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("CSRF"), "{text}");
    json.push(("X-CSRF-Token", "exo_c_not-this-session"));
    assert_eq!(raw(&cp.addr, "POST", path, &json, body).0, 403);
    json.pop();
    json.push(("X-CSRF-Token", csrf.as_str()));
    let (status, _, text) = raw(&cp.addr, "POST", path, &json, body);
    assert_eq!(
        status, 409,
        "past authentication, refused as offline: {text}"
    );
    let bearer = format!("Bearer {admin}");
    let auth = [("Authorization", bearer.as_str())];
    let audit = raw(&cp.addr, "GET", "/api/v1/deployments/web/audit", &auth, "").2;
    assert!(audit.contains("refused: offline"), "{audit}");

    // A WebSocket opened with the cookie must come from this server.
    let ws = |origin: &str| {
        let h = [
            ("Cookie", pair.as_str()),
            ("Origin", origin),
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ];
        raw(
            &cp.addr,
            "GET",
            "/api/v1/deployments/web/attach?namespace=t&agent=a",
            &h,
            "",
        )
        .0
    };
    assert_eq!(ws("http://evil.example"), 403);
    assert_ne!(ws(&format!("http://{}", cp.addr)), 403);

    // Expiry (3 s): the page sends the browser to the login again.
    std::thread::sleep(std::time::Duration::from_millis(3200));
    assert_eq!(raw(&cp.addr, "GET", "/deployments/web", &cookie, "").0, 303);
    assert_eq!(
        raw(&cp.addr, "GET", "/api/v1/deployments", &cookie, "").0,
        401
    );

    // Revoking the admin token ends its sessions at once.
    let (_, head, _) = raw(&cp.addr, "POST", "/login", &urlenc, &form(&admin));
    let (_, pair) = session_cookie(&head);
    let cookie = [("Cookie", pair.as_str())];
    assert_eq!(
        raw(&cp.addr, "GET", "/api/v1/deployments", &cookie, "").0,
        200
    );
    assert!(
        cp.admin(&["admin-token", "revoke", &admin_id])
            .status
            .success()
    );
    assert_eq!(
        raw(&cp.addr, "GET", "/api/v1/deployments", &cookie, "").0,
        401
    );
    assert!(!cp.log().contains(&admin), "the token is never logged");
}

#[tokio::test]
async fn the_api_needs_an_admin_token_once_one_exists() {
    let ns = TestNamespace::new("up-admin").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[]);
    let dep_token = cp.create_deployment("adm");
    // No admin token yet, on loopback: open, as before.
    assert_eq!(request(&cp.addr, "/api/v1/deployments", None).0, 200);

    let (admin, admin_id) = cp.create_admin_token();
    let bearer = format!("Bearer {admin}");

    // Missing or wrong: 401 with a clear message that never echoes what
    // was sent; a deployment token: 403, it reads the fleet view alone.
    let (status, head, body) = request(&cp.addr, "/api/v1/deployments", None);
    assert_eq!(status, 401, "{body}");
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    assert!(body.contains("admin token required"), "{body}");
    let (status, _, body) = request(&cp.addr, "/api/v1/deployments", Some("Bearer exo_at_wrong"));
    assert_eq!(status, 401);
    assert!(
        body.contains("invalid admin token") && !body.contains("exo_at_wrong"),
        "{body}"
    );
    let (status, _, body) = request(
        &cp.addr,
        "/api/v1/deployments/adm",
        Some(&format!("Bearer {dep_token}")),
    );
    assert_eq!(status, 403, "a deployment token is not an admin token");
    assert!(
        body.contains("/api/v1/fleet/rollouts?tenant=") && !body.contains(&dep_token),
        "{body}"
    );
    for path in [
        "/api/v1/stats",
        "/api/v1/deployments/adm/resources",
        "/api/v1/deployments/adm/audit",
    ] {
        assert_eq!(request(&cp.addr, path, None).0, 401, "{path}");
    }

    // The right token opens the API; /healthz stays open for probes.
    let (status, _, body) = request(&cp.addr, "/api/v1/deployments", Some(&bearer));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"adm\""), "{body}");
    assert_eq!(request(&cp.addr, "/healthz", None).0, 200);

    // A browser is sent to the login page; HTTP Basic is not a way in.
    let (status, head, _) = request(&cp.addr, "/deployments/adm", None);
    assert_eq!(status, 303);
    assert!(
        head.contains("location: /login?next=/deployments/adm"),
        "{head}"
    );
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("admin:{admin}"));
    let (status, _, _) = request(&cp.addr, "/status", Some(&format!("Basic {basic}")));
    assert_eq!(status, 303);
    let (status, _, body) = request(&cp.addr, "/status", Some(&bearer));
    assert_eq!(status, 200);
    assert!(
        body.contains("Exo control plane") && body.contains("adm"),
        "{body}"
    );

    // Operators keep connecting with their deployment tokens.
    let c = Connector::start(&cp.base, &dep_token, &ns.name, &[]);
    connector_until(&c, "connected", |h| h["state"] == "connected").await;

    // `exo attach` is an API client: refused without the token, with a
    // message saying why; with it, it gets past authentication (the agent
    // does not exist, so the operator's error comes back instead).
    let attach = |token: Option<&str>| {
        let mut cmd = exo();
        cmd.args([
            "attach",
            "nobody",
            "-n",
            &ns.name,
            "--deployment",
            "adm",
            "--no-tty",
        ])
        .args(["--control-plane", &cp.base])
        .env_remove("EXO_CP_ADMIN_TOKEN")
        .env_remove("EXO_CP_ADMIN_TOKEN_FILE")
        .stdin(Stdio::null());
        if let Some(t) = token {
            cmd.env("EXO_CP_ADMIN_TOKEN", t);
        }
        cmd.output().unwrap()
    };
    let out = attach(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("401") && err.contains("admin token required"),
        "{err}"
    );
    let out = attach(Some(&admin));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("401"), "{err}");
    assert!(!err.contains(&admin), "the token leaked: {err}");

    // Listing shows ids, never tokens; a revoked token stops working at once.
    let out = cp.admin(&["admin-token", "list"]);
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(
        listed.contains(&admin_id) && !listed.contains(&admin),
        "{listed}"
    );
    let out = cp.admin(&["admin-token", "revoke", &admin_id]);
    assert!(out.status.success());
    assert_eq!(
        request(&cp.addr, "/api/v1/deployments", Some(&bearer)).0,
        401
    );
    let out = cp.admin(&["admin-token", "revoke", "adm_unknown"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));

    assert!(
        !cp.log().contains(&admin),
        "the admin token leaked into the log"
    );
}

#[test]
fn an_admin_token_file_works_and_an_open_api_is_refused_off_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("admin-token");
    let token = format!("exo_at_{}", "f".repeat(64));
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let cp = ControlPlane::start(&["--admin-token-file", file.to_str().unwrap()]);
    assert_eq!(request(&cp.addr, "/api/v1/deployments", None).0, 401);
    assert_eq!(
        request(
            &cp.addr,
            "/api/v1/deployments",
            Some(&format!("Bearer {token}"))
        )
        .0,
        200
    );
    assert!(!cp.log().contains(&token));

    // Without any admin token, a non-loopback address is refused.
    let db = dir.path().join("open.sqlite");
    let out = exo()
        .arg("control-plane")
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("without authentication") && err.contains("admin-token create"),
        "{err}"
    );

    // A bad token file is named, its content is not shown.
    std::fs::write(&file, "two words\n").unwrap();
    let out = exo()
        .arg("control-plane")
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", "127.0.0.1:0", "--admin-token-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(file.to_str().unwrap()) && !err.contains("two words"),
        "{err}"
    );
}
