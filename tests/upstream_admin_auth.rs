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

/// One request; returns (status, headers, body) of the raw response.
fn request(addr: &str, path: &str, auth: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}\r\n"
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

    // Missing, wrong, or a deployment token: 401 with a clear message that
    // never echoes what was sent.
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
    let (status, _, _) = request(
        &cp.addr,
        "/api/v1/deployments/adm",
        Some(&format!("Bearer {dep_token}")),
    );
    assert_eq!(status, 401, "a deployment token is not an admin token");
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

    // The status page asks a browser for credentials (Basic) and takes the
    // admin token as the password.
    let (status, head, _) = request(&cp.addr, "/", None);
    assert_eq!(status, 401);
    assert!(head.contains("www-authenticate: basic"), "{head}");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("admin:{admin}"));
    let (status, _, body) = request(&cp.addr, "/", Some(&format!("Basic {basic}")));
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
