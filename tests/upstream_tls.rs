#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `wss://`: the control plane serves TLS with a certificate of the test
//! environment's CA (`.testenv/pki`), and a real operator process dials
//! `https://` trusting that CA through `SSL_CERT_FILE`; one that does not
//! trust it is refused by its own TLS check.

mod support;
mod upstream_support;

use std::path::PathBuf;

use exo::crd::AgentFS;
use kube::api::PostParams;
use support::{TestNamespace, eventually};
use upstream_support::{Connector, ControlPlane, agentfs, connector_until, install_crds};

/// The test environment's PKI: its CA and a `127.0.0.1` server certificate.
fn pki() -> PathBuf {
    let dir = support::env()
        .kubeconfig
        .parent()
        .expect("kubeconfig in the test env's state folder")
        .join("pki");
    for f in ["ca.crt", "kwok.crt", "kwok.key"] {
        assert!(
            dir.join(f).is_file(),
            "{} is missing: the test environment makes it (scripts/testenv up)",
            dir.join(f).display()
        );
    }
    dir
}

#[tokio::test]
async fn operators_connect_over_wss_to_a_tls_control_plane() {
    let ns = TestNamespace::new("up-tls").await;
    install_crds(&ns.client).await;
    ns.api::<AgentFS>()
        .create(&PostParams::default(), &agentfs("over-tls", "1Gi"))
        .await
        .unwrap();
    let pki = pki();
    let cert = pki.join("kwok.crt").display().to_string();
    let key = pki.join("kwok.key").display().to_string();
    let ca = pki.join("ca.crt").display().to_string();
    let cp = ControlPlane::start(&["--tls-cert-file", &cert, "--tls-key-file", &key]);
    assert!(cp.base.starts_with("https://"), "{}", cp.base);
    let token = cp.create_deployment("tls");

    // Trusting the test CA: connected, and the snapshot went over TLS.
    let c = Connector::start_env(
        &cp.base,
        &[("AUTONOMIC_AUTH_TOKEN", &token), ("SSL_CERT_FILE", &ca)],
        &ns.name,
        &[],
    );
    let h = connector_until(&c, "a wss connection", |h| {
        h["state"] == "connected" && h["snapshots_sent"].as_u64() >= Some(1)
    })
    .await;
    assert_eq!(h["deployment"], "tls", "{h}");
    eventually(
        "the registration in the control plane's log",
        std::time::Duration::from_secs(10),
        || async { cp.log().contains("connection registered").then_some(()) },
    )
    .await;
    drop(c);

    // Trusting another CA only: the operator refuses the server certificate.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other-ca.crt");
    let out = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=not-the-test-ca", "-keyout"])
        .arg(dir.path().join("other-ca.key"))
        .arg("-out")
        .arg(&other)
        .output()
        .expect("openssl is part of the test environment");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = other.display().to_string();
    let c = Connector::start_env(
        &cp.base,
        &[("AUTONOMIC_AUTH_TOKEN", &token), ("SSL_CERT_FILE", &other)],
        &ns.name,
        &[],
    );
    let h = connector_until(&c, "the TLS refusal", |h| {
        h["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("certificate") || e.contains("UnknownIssuer"))
    })
    .await;
    assert_ne!(h["state"], "connected", "{h}");
    assert!(!c.log().contains(&token), "the token leaked into the log");
}
