#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The push receiver `POST /hooks/fleet/<namespace>/<name>` of a real
//! `exo operator run` process against the real apiserver: a signed push
//! stamps the Fleet's sync-requested annotation; every refusal leaves it
//! as it was and names what is wrong without echoing the key or signature.

mod support;

use std::time::Duration;

use exo::crd::Fleet;

use exo::meta::ANNOTATION_SYNC_REQUESTED;
use hmac::{Hmac, Mac};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use sha2::Sha256;
use support::operator::{OperatorProcess, create};

const TOKEN: &str = "hook-key-not-for-logs-4f1c";

/// A Fleet whose URL goes nowhere: this test checks the receiver, not the
/// engine's fetch. A long interval keeps the engine from syncing on its own.
fn fleet(name: &str, secret_ref: Option<&str>) -> Fleet {
    let mut spec = serde_json::json!({
        "url": "http://127.0.0.1:9/nowhere.git",
        "allowInsecure": true,
        "interval": "1h",
    });
    if let Some(s) = secret_ref {
        spec["webhookSecretRef"] = s.into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "Fleet",
        "metadata": { "name": name }, "spec": spec
    }))
    .expect("Fleet fixture")
}

fn secret(name: &str, key: &str, value: &str) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some([(key.to_owned(), ByteString(value.as_bytes().to_vec()))].into()),
        ..Default::default()
    }
}

/// The hex HMAC-SHA256 a sender puts in its header, computed here with the
/// crate directly rather than through the receiver's code.
fn sign(key: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// One raw HTTP/1.1 request; `(status, body)`.
fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let a = support::raw_http::request(addr, method, path, headers, body);
    (a.status, a.body)
}

/// What is tried, headers sent, body, status wanted, text the answer holds.
type Refusal<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a [u8], u16, &'a str);

async fn stamp(fleets: &Api<Fleet>, name: &str) -> Option<String> {
    fleets
        .get(name)
        .await
        .unwrap()
        .metadata
        .annotations
        .and_then(|a| a.get(ANNOTATION_SYNC_REQUESTED).cloned())
}

#[tokio::test]
async fn signed_pushes_request_a_sync_and_everything_else_is_refused() {
    let ns = support::TestNamespace::new("hooks").await;
    support::install_crds(&ns.client).await;
    let fleets = ns.api::<Fleet>();
    let secrets = ns.api::<Secret>();
    create(&secrets, &secret("hook", "token", &format!("{TOKEN}\n"))).await;
    create(&secrets, &secret("wrong-key", "password", TOKEN)).await;
    create(&fleets, &fleet("main", Some("hook"))).await;
    create(&fleets, &fleet("open", None)).await;
    create(&fleets, &fleet("lost", Some("absent"))).await;
    create(&fleets, &fleet("keyless", Some("wrong-key"))).await;
    create(&fleets, &fleet("misnamed", Some("Not_A_Name"))).await;

    let cache = tempfile::tempdir().unwrap();
    let op = OperatorProcess::start_with(
        &ns.name,
        "hooks",
        &["--gitops-cache", &cache.path().display().to_string()],
    );
    op.wait_ready().await;
    let addr = op.addr.clone();
    let path = format!("/hooks/fleet/{}/main", ns.name);
    let body = br#"{"ref":"refs/heads/main","after":"0123abcd"}"#;
    let good = sign(TOKEN, body);
    let github = format!("sha256={good}");
    let post = |path: &str, headers: &[(&str, &str)], body: &[u8]| {
        request(&addr, "POST", path, headers, body)
    };

    // GitHub style: accepted, and the annotation is an RFC 3339 time.
    assert_eq!(stamp(&fleets, "main").await, None);
    let (status, text) = post(&path, &[("X-Hub-Signature-256", &github)], body);
    assert_eq!((status, text.as_str()), (202, "sync requested\n"));
    let first = stamp(&fleets, "main")
        .await
        .expect("annotation after the push");
    first
        .parse::<k8s_openapi::jiff::Timestamp>()
        .unwrap_or_else(|e| panic!("{first:?} is not RFC 3339: {e}"));

    // Gitea style: accepted, and a new stamp so the engine sees a change.
    let (status, _) = post(&path, &[("X-Gitea-Signature", &good)], body);
    assert_eq!(status, 202);
    let second = stamp(&fleets, "main").await.expect("annotation");
    assert_ne!(first, second, "a second push must change the annotation");

    // Refusals that must not write.
    let flipped = format!("sha256={}", sign("another key", body));
    let tampered = br#"{"ref":"refs/heads/main","after":"ffffffff"}"#;
    let cases: Vec<Refusal> = vec![
        (
            "wrong key",
            vec![("X-Hub-Signature-256", &flipped)],
            body,
            401,
            "does not match",
        ),
        (
            "tampered body",
            vec![("X-Hub-Signature-256", &github)],
            tampered,
            401,
            "does not match",
        ),
        ("no signature", vec![], body, 401, "no X-Hub-Signature-256"),
        (
            "malformed",
            vec![("X-Hub-Signature-256", &good)],
            body,
            401,
            "is not sha256=",
        ),
        (
            "gitea wrong",
            vec![("X-Gitea-Signature", &flipped[7..])],
            body,
            401,
            "does not match",
        ),
    ];
    for (what, headers, sent, want, text_has) in cases {
        let (status, text) = post(&path, &headers, sent);
        assert_eq!(status, want, "{what}: {text}");
        assert!(text.contains(text_has), "{what}: {text}");
        assert!(
            !text.contains(&good) && !text.contains(TOKEN),
            "{what} echoes: {text}"
        );
        assert_eq!(
            stamp(&fleets, "main").await.as_ref(),
            Some(&second),
            "{what} wrote"
        );
    }

    // What the Fleet and its Secret say.
    let at = |name: &str| format!("/hooks/fleet/{}/{name}", ns.name);
    let signed = [("X-Hub-Signature-256", github.as_str())];
    let (status, text) = post(&at("absent"), &signed, body);
    assert_eq!(status, 404, "{text}");
    assert!(
        text.contains(&format!("Fleet {}/absent not found", ns.name)),
        "{text}"
    );
    let (status, text) = post(&at("open"), &signed, body);
    assert_eq!(status, 403, "{text}");
    assert!(
        text.contains(&format!(
            "Fleet {}/open has no spec.webhookSecretRef",
            ns.name
        )),
        "{text}"
    );
    assert_eq!(stamp(&fleets, "open").await, None);
    let (status, text) = post(&at("lost"), &signed, body);
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains(&format!("Secret {}/absent", ns.name)),
        "{text}"
    );
    let (status, text) = post(&at("keyless"), &signed, body);
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains(&format!("Secret {}/wrong-key has no key token", ns.name)),
        "{text}"
    );
    assert!(!text.contains(TOKEN), "{text}");
    let (status, text) = post(&at("misnamed"), &signed, body);
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains("(\"Not_A_Name\") is not a Secret name"),
        "{text}"
    );

    // HTTP-level refusals.
    assert_eq!(request(&addr, "GET", &path, &[], b"").0, 405);
    assert_eq!(
        post(&format!("/hooks/fleet/{}/Main", ns.name), &signed, body).0,
        404
    );
    assert_eq!(
        post(&format!("/hooks/fleet/{}/main/x", ns.name), &signed, body).0,
        404
    );
    let big = vec![b' '; (1 << 20) + 1];
    let big_sig = format!("sha256={}", sign(TOKEN, &big));
    assert_eq!(
        post(&path, &[("X-Hub-Signature-256", &big_sig)], &big).0,
        413
    );
    // Without Content-Length the limit holds while reading.
    let mut chunked = format!("{:x}\r\n", big.len()).into_bytes();
    chunked.extend_from_slice(&big);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let (status, _) = post(
        &path,
        &[
            ("Transfer-Encoding", "chunked"),
            ("X-Hub-Signature-256", &big_sig),
        ],
        &chunked,
    );
    assert_eq!(status, 413);
    assert_eq!(stamp(&fleets, "main").await.as_ref(), Some(&second));

    // One structured line per hook, and neither the key nor a signature in the log.
    let log = op.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("push hook")).collect();
    assert!(
        lines.iter().any(|l| l.contains("\"outcome\":\"accepted\"")
            && l.contains(&format!("\"fleet\":\"{}/main\"", ns.name))),
        "{log}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("\"outcome\":\"bad_signature\"")),
        "{log}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("\"outcome\":\"no_secret_ref\"")),
        "{log}"
    );
    assert!(!log.contains(TOKEN), "the log holds the key");
    assert!(!log.contains(&good), "the log holds a signature");
}

/// End to end with the engine: a Fleet that would not fetch for an hour
/// picks up a new commit once a signed push arrives; a badly signed one
/// changes nothing.
#[tokio::test]
async fn a_signed_push_syncs_the_fleet_at_once() {
    use support::fleet::{Fixture, Operator, example_files};
    let fx = Fixture::with_spec(
        "gh",
        example_files("gh"),
        serde_json::json!({"interval": "1h", "webhookSecretRef": "hook"}),
    )
    .await;
    create(&fx.ns.api::<Secret>(), &secret("hook", "token", TOKEN)).await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    let fleets = fx.ns.api::<Fleet>();
    let fetched = |fleets: Api<Fleet>| async move {
        fleets
            .get("fleet")
            .await
            .ok()
            .and_then(|f| f.status)
            .and_then(|s| s.fetched_commit)
    };
    support::eventually("the first sync", Duration::from_secs(60), || {
        let fleets = fleets.clone();
        async move { fetched(fleets).await }
    })
    .await;
    let text = String::from_utf8(fx.served_file("manifests/gh-acme/assistant.yaml")).unwrap();
    let commit = fx.push(
        &[(
            "manifests/gh-acme/assistant.yaml",
            Some(text.replace("name: assistant", "name: pushed").as_bytes()),
        )],
        "a commit the interval would not see for an hour",
    );
    let path = format!("/hooks/fleet/{}/fleet", fx.ns.name);
    let body = br#"{"ref":"refs/heads/main"}"#;

    let bad = sign("not-the-key", body);
    let (status, _) = request(
        &op.addr,
        "POST",
        &path,
        &[("X-Gitea-Signature", bad.as_str())],
        body,
    );
    assert_eq!(status, 401);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_ne!(
        fetched(fleets.clone()).await.as_deref(),
        Some(commit.as_str()),
        "a refused push syncs nothing"
    );

    let good = format!("sha256={}", sign(TOKEN, body));
    let (status, answer) = request(
        &op.addr,
        "POST",
        &path,
        &[("X-Hub-Signature-256", good.as_str())],
        body,
    );
    assert_eq!(status, 202, "{answer}");
    support::eventually("the pushed commit synced", Duration::from_secs(20), || {
        let fleets = fleets.clone();
        let commit = commit.clone();
        async move {
            let f = fleets.get("fleet").await.ok()?;
            (f.status?.applied_commit.as_deref() == Some(commit.as_str())).then_some(())
        }
    })
    .await;
    let _ = op.log();
}
