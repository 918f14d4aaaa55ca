#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Token rotation without an operator restart: `exo operator connect` reads
//! its token from `AUTONOMIC_AUTH_TOKEN_FILE` (as mounted from a Secret) and
//! picks up a rotated token, both during the overlap (it redials on its own)
//! and after a refusal (it does not wait out `--fatal-retry`). Real control
//! plane and operator processes, real apiserver.

mod support;
mod upstream_support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::{TestNamespace, eventually};
use upstream_support::{Connector, ControlPlane, connector_until, install_crds};

/// Replaces the file the way the kubelet updates a Secret volume: the new
/// content appears at once, never half-written.
fn write_atomically(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Rotates and returns `(token, token id)`; the id is on stderr.
fn rotate(cp: &ControlPlane, dep: &str, overlap: &str) -> (String, String) {
    let out = cp.admin(&["token", "rotate", dep, "--overlap", overlap]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let err = String::from_utf8(out.stderr).unwrap();
    let id = err
        .split_whitespace()
        .skip_while(|w| *w != "token")
        .nth(1)
        .unwrap_or_else(|| panic!("no token id in {err:?}"))
        .to_owned();
    (token, id)
}

/// The token id of the newest `connection.opened` audit record.
fn last_opened_token_id(cp: &ControlPlane, dep: &str) -> Option<String> {
    let (_, v) = cp.get(&format!("/api/v1/deployments/{dep}/audit?limit=1000"));
    v["audit"]
        .as_array()?
        .iter()
        .rev()
        .find(|a| a["action"] == "connection.opened")
        .and_then(|a| a["detail"]["token_id"].as_str().map(str::to_owned))
}

fn connection_id(cp: &ControlPlane, dep: &str) -> Option<String> {
    let d: Value = cp.deployment(dep);
    (d["connected"] == true)
        .then(|| d["connection_id"].as_str().map(str::to_owned))
        .flatten()
}

#[tokio::test]
async fn a_rotated_token_file_is_picked_up_without_a_restart() {
    let ns = TestNamespace::new("up-rotate").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&["--token-check-interval", "200ms"]);
    let first = cp.create_deployment("rot");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    write_atomically(&file, &format!("{first}\n"));
    let file_arg = file.display().to_string();
    // A refused token would normally wait 5 minutes: the test finishing in
    // seconds shows the rotation, not the retry timer, brought it back.
    let c = Connector::start_env(
        &cp.base,
        &[("AUTONOMIC_AUTH_TOKEN_FILE", &file_arg)],
        &ns.name,
        &["--token-reload-interval", "200ms", "--fatal-retry", "300s"],
    );
    connector_until(&c, "the first connection", |h| h["state"] == "connected").await;
    let conn1 = connection_id(&cp, "rot").expect("connected");

    // 1. Rotation with an overlap: the operator switches by itself while the
    //    old token is still valid.
    let (second, second_id) = rotate(&cp, "rot", "60s");
    write_atomically(&file, &second);
    eventually(
        "a connection on the rotated token",
        Duration::from_secs(20),
        || async {
            let id = connection_id(&cp, "rot")?;
            (id != conn1 && last_opened_token_id(&cp, "rot").as_deref() == Some(&second_id))
                .then_some(())
        },
    )
    .await;
    let conn2 = connection_id(&cp, "rot").unwrap();

    // 2. Rotation without an overlap, before the Secret is updated: the
    //    token in use expires at once, the server closes the connection
    //    (4002) and the operator backs off for --fatal-retry.
    let out = cp.admin(&["token", "rotate", "rot", "--overlap", "0s"]);
    assert!(out.status.success());
    let third = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    connector_until(&c, "the refusal of the expired token", |h| {
        h["state"] == "unauthorized"
    })
    .await;
    assert_ne!(connection_id(&cp, "rot").as_deref(), Some(conn2.as_str()));

    //    The refused operator picks up the new file content within seconds,
    //    not after --fatal-retry (300 s).
    write_atomically(&file, &third);
    connector_until(&c, "reconnection with the third token", |h| {
        h["state"] == "connected"
    })
    .await;
    let d = cp.deployment("rot");
    assert_eq!(d["connected"], true, "{d}");

    // 3. A broken file is reported by path, never by content.
    write_atomically(&file, "exo_dt_not a token");
    let out = cp.admin(&["token", "revoke", "rot"]);
    assert!(out.status.success());
    connector_until(&c, "the error naming the file", |h| {
        h["last_error"]
            .as_str()
            .is_some_and(|e| e.contains(&file_arg))
            || h["last_close"]
                .as_str()
                .is_some_and(|e| e.contains(&file_arg))
    })
    .await;

    let log = c.log();
    for t in [&first, &second, &third] {
        assert!(
            !log.contains(t.as_str()),
            "a token leaked into the operator log"
        );
        assert!(
            !cp.log().contains(t.as_str()),
            "a token leaked into the control plane log"
        );
    }
    assert!(
        !log.contains("not a token"),
        "the file content leaked into the log"
    );
}
