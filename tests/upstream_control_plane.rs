#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The reference control plane against clients: a Python `websockets`
//! client nobody here wrote, a raw client for bad frames, and `exo operator connect`. Thresholds are
//! shortened by flags; every wait polls a condition with a deadline.

mod support;
mod upstream_support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use exo::wire::{Frame, SnapshotChunk, close};
use serde_json::json;
use support::{TestNamespace, eventually};
use upstream_support::raw::{Socket, dial, next_close, raw_client, send, send_text};
use upstream_support::{Connector, ControlPlane, connector_until, install_crds, python_client};

fn until_deployment(
    cp: &ControlPlane,
    name: &str,
    what: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> impl std::future::Future<Output = serde_json::Value> {
    let v = || cp.deployment(name);
    let what = what.to_owned();
    async move {
        eventually(&what, Duration::from_secs(30), || {
            let d = v();
            let ok = pred(&d);
            async move { ok.then_some(d) }
        })
        .await
    }
}

#[tokio::test]
async fn python_client_registers_streams_and_is_shown_online() {
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("py");
    let mut child = python_client(&cp.base, &token, "register")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "READY py", "python client output");

    let d = until_deployment(&cp, "py", "the python client's snapshot", |d| {
        d["snapshots_completed"] == 1 && d["deltas_applied"] == 3
    })
    .await;
    assert_eq!(d["state"], "online");
    assert_eq!(d["connected"], true);
    assert_eq!(d["agent_version"], "python-client/1");
    // Deltas sent between the two chunks won over the snapshot's content.
    assert_eq!(
        cp.resources("py", "Agent"),
        [
            ("a".to_owned(), "2".to_owned()),
            ("c".into(), "1".into()),
            ("d".into(), "1".into())
        ]
    );
    let (_, audit) = cp.get("/api/v1/deployments/py/audit");
    let actions: Vec<(&str, &str)> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["source"].as_str().unwrap(), a["action"].as_str().unwrap()))
        .collect();
    assert!(
        actions.contains(&("server", "connection.opened")),
        "{actions:?}"
    );
    assert!(
        actions.contains(&("operator", "client.registered")),
        "{actions:?}"
    );
    let (status, page) = cp.get("/status");
    assert_eq!(status, 200);
    assert!(page.as_str().unwrap().contains(">online<"), "{page}");

    drop(child.stdin.take());
    child.wait().unwrap();
    let d = until_deployment(&cp, "py", "the disconnect", |d| d["connected"] == false).await;
    assert_eq!(d["disconnects"], 1);
}

#[tokio::test]
async fn heartbeat_silence_degrades_then_goes_offline() {
    // Pings every 100 ms keep the socket alive: pongs must not count as frames.
    let cp = ControlPlane::start(&[
        "--degraded-after",
        "1500ms",
        "--offline-after",
        "3s",
        "--ping-interval",
        "100ms",
    ]);
    let token = cp.create_deployment("quiet");
    let mut child = python_client(&cp.base, &token, "register")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("READY"), "{line}");
    let mut seen = Vec::new();
    let d = eventually("offline after silence", Duration::from_secs(30), || {
        let d = cp.deployment("quiet");
        let state = d["state"].as_str().unwrap().to_owned();
        if seen.last() != Some(&state) {
            seen.push(state.clone());
        }
        async move { (state == "offline").then_some(d) }
    })
    .await;
    assert_eq!(seen.first().map(String::as_str), Some("online"), "{seen:?}");
    assert!(seen.contains(&"degraded".to_owned()), "{seen:?}");
    // Judged from frames, not from the socket, which is still up.
    assert_eq!(d["connected"], true);
    drop(child.stdin.take());
    child.wait().unwrap();
}

#[tokio::test]
async fn bad_frames_get_a_clear_close_and_the_server_survives() {
    let cp = ControlPlane::start(&["--max-frame-bytes", "65536"]);
    let token = cp.create_deployment("bad");
    let run = |mode: &str| -> serde_json::Value {
        let out = python_client(&cp.base, &token, mode).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
            panic!(
                "{mode}: {e}: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    };
    let cases = [
        ("oversized", 1009, "frame exceeds the limit of 65536 bytes"),
        ("malformed", 4003, "malformed frame"),
        ("binary", 1003, "binary messages are not supported"),
        ("version", 4001, "unsupported protocol version 999"),
    ];
    for (mode, code, reason) in cases {
        let v = run(mode);
        assert_eq!(v["close_code"], code, "{mode}: {v}");
        let got = v["close_reason"].as_str().unwrap_or_default();
        assert!(got.starts_with(reason), "{mode}: {got:?}");
    }
    assert_eq!(cp.stats()["frames_rejected"], 4);
    // Still serving: the status API and a well-behaved client.
    assert_eq!(cp.get("/healthz").0, 200);
    let mut child = python_client(&cp.base, &token, "register")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "READY bad");
    drop(child.stdin.take());
    child.wait().unwrap();
}

/// Sends `frame` and returns the reason of the 4003 close that must follow.
async fn protocol_error(mut ws: Socket, frame: &serde_json::Value) -> String {
    send_text(&mut ws, &frame.to_string()).await;
    let c = next_close(&mut ws).await;
    assert_eq!(u16::from(c.code), close::PROTOCOL_ERROR, "{c:?}");
    c.reason.as_str().to_owned()
}

/// The 4003 reasons `docs/protocol.md` lists, from a raw client: each names
/// what was wrong, whole, inside the 123 bytes of a close frame.
#[tokio::test]
async fn protocol_errors_get_reasons_that_name_the_problem_whole() {
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("reasons");
    let chunk = |id: &str, n: u32| {
        Frame::Snapshot(SnapshotChunk {
            snapshot_id: id.into(),
            chunk: n,
            last: false,
            resources: Vec::new(),
        })
    };

    // A chunk of another snapshot than the one in progress.
    let mut ws = raw_client(&cp, &token).await;
    send(&mut ws, &chunk("s1", 0)).await;
    let other = serde_json::to_value(chunk("s2", 1)).unwrap();
    assert_eq!(
        protocol_error(ws, &other).await,
        r#"bad snapshot: chunk 1 has snapshot_id "s2", but snapshot "s1" is in progress"#
    );

    // An unknown type, long and multi-byte: named, clipped on a char
    // boundary and marked, not cut mid-word by the frame limit.
    let long = format!("subscribe_{}", "é".repeat(100));
    let unknown = json!({ "type": long, "topic": "x" });
    let reason = protocol_error(raw_client(&cp, &token).await, &unknown).await;
    assert!(
        reason.starts_with(r#"malformed frame: unknown type "subscribe_éé"#)
            && reason.ends_with("é…\"")
            && reason.len() <= close::MAX_REASON_BYTES,
        "{reason:?}"
    );

    // A first delta with seq 0.
    let delta = json!({"type": "delta", "seq": 0, "op": "upsert",
        "resource": {"kind": "Agent", "namespace": "t", "name": "a", "resourceVersion": "1"}});
    let reason = protocol_error(raw_client(&cp, &token).await, &delta).await;
    assert!(
        reason.starts_with("bad delta: delta seq 0 is not after 0"),
        "{reason:?}"
    );

    // `"protocol": "1"` is a malformed frame, not a version mismatch.
    let hello = json!({"type": "hello", "protocol": "1", "agent_version": "t",
        "boot_id": "b", "connection_id": "c"});
    let reason = protocol_error(dial(&cp, &token).await, &hello).await;
    assert!(
        reason.starts_with("malformed frame: invalid type: string \"1\", expected u32"),
        "{reason:?}"
    );
    assert_eq!(cp.stats()["frames_rejected"], 4);
}

#[tokio::test]
async fn wrong_token_gets_401_and_no_retry_storm() {
    let cp = ControlPlane::start(&[]);
    cp.create_deployment("locked");
    let out = python_client(&cp.base, "exo_dt_not-a-real-token", "register")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"status": 401}"#
    );

    let ns = TestNamespace::new("up-401").await;
    install_crds(&ns.client).await;
    // With a 20 ms backoff a hot loop would dial hundreds of times.
    let c = Connector::start(
        &cp.base,
        "exo_dt_not-a-real-token",
        &ns.name,
        &[
            "--backoff-base",
            "20ms",
            "--backoff-max",
            "40ms",
            "--fatal-retry",
            "1h",
        ],
    );
    let h = connector_until(&c, "the connector to give up on the token", |h| {
        h["state"] == "unauthorized"
    })
    .await;
    assert!(
        h["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("HTTP 401"),
        "{h}"
    );
    assert!(h["next_retry_in_ms"].as_u64().unwrap() > 60_000, "{h}");
    // Observe a window in which a retry storm would show.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        assert_eq!(c.health()["dial_attempts"], 1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        cp.stats()["auth_rejected"],
        2,
        "python once, connector once"
    );
    assert!(!c.log().contains("not-a-real-token"), "token in the log");
}

#[tokio::test]
async fn revoked_token_disconnects_at_once() {
    let cp = ControlPlane::start(&["--token-check-interval", "200ms"]);
    let token = cp.create_deployment("rev");
    let ns = TestNamespace::new("up-revoke").await;
    install_crds(&ns.client).await;
    let c = Connector::start(&cp.base, &token, &ns.name, &["--fatal-retry", "1h"]);
    connector_until(&c, "connected", |h| h["state"] == "connected").await;
    until_deployment(&cp, "rev", "registered", |d| d["connected"] == true).await;

    let out = cp.admin(&["token", "revoke", "rev"]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "revoke prints no token");
    let h = connector_until(&c, "the revocation to reach the connector", |h| {
        h["state"] == "unauthorized"
    })
    .await;
    assert!(
        h["last_close"]
            .as_str()
            .unwrap()
            .contains("4002 token revoked"),
        "{h}"
    );
    let d = cp.deployment("rev");
    assert_eq!(d["connected"], false);
    assert!(
        d["last_close"].as_str().unwrap().contains("token revoked"),
        "{d}"
    );
    assert_eq!(c.health()["dial_attempts"], 1);
    assert!(!cp.log().contains(&token[7..]), "token in the server log");
    assert!(!c.log().contains(&token[7..]), "token in the connector log");
}

#[tokio::test]
async fn rotation_keeps_the_old_token_during_the_overlap_only() {
    let cp = ControlPlane::start(&["--token-check-interval", "200ms"]);
    let old = cp.create_deployment("rot");
    let ns = TestNamespace::new("up-rotate").await;
    install_crds(&ns.client).await;
    let c = Connector::start(&cp.base, &old, &ns.name, &["--fatal-retry", "1h"]);
    connector_until(&c, "connected on the old token", |h| {
        h["state"] == "connected"
    })
    .await;

    let out = cp.admin(&["token", "rotate", "rot", "--overlap", "10s"]);
    assert!(out.status.success());
    let new = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(new.starts_with("exo_dt_") && new != old);
    // Right after the rotation both tokens are valid.
    let listing = cp.admin(&["token", "list", "rot"]);
    let text = String::from_utf8(listing.stdout).unwrap();
    assert_eq!(text.matches("\ttrue").count(), 2, "{text}");
    assert!(
        !text.contains(&old[7..]) && !text.contains(&new[7..]),
        "{text}"
    );
    assert_eq!(c.health()["state"], "connected");

    // After the overlap the old token's connection is closed.
    let h = connector_until(&c, "the old token to expire", |h| {
        h["state"] == "unauthorized"
    })
    .await;
    assert!(
        h["last_close"]
            .as_str()
            .unwrap()
            .contains("4002 token revoked"),
        "{h}"
    );
    let c2 = Connector::start(&cp.base, &new, &ns.name, &[]);
    connector_until(&c2, "connected on the new token", |h| {
        h["state"] == "connected"
    })
    .await;
    assert_eq!(cp.deployment("rot")["connected"], true);
}

/// Each connection is a file descriptor: started with the usual soft limit
/// of 1024, the control plane raises it to the hard limit itself.
#[test]
fn serve_raises_its_open_file_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("prlimit")
        .arg("--nofile=1024:4096")
        .arg(env!("CARGO_BIN_EXE_exo"))
        .arg("control-plane")
        .arg("--db")
        .arg(dir.path().join("cp.sqlite"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prlimit (util-linux) is part of the test environment");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("listening on "), "{line:?}");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let row = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let nums: Vec<&str> = row.split_whitespace().skip(3).take(2).collect();
    assert_eq!(nums, ["4096", "4096"], "{row}");
}
