#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The tenant outbox end to end, on the real apiserver with a real
//! `exo operator run`: an agent posts an incident with its own token and
//! name, the operator stores it as an `Incident` in its own namespace
//! before it answers, a retry stores nothing twice, and the agent reads it
//! back without the detail. Wrong identities, bad bodies and a past rate
//! are refused with the field or limit named and store nothing. A planted
//! stack trace, internal hostname, address, canary provider key and the
//! agent's own token reach no tenant-facing answer and no log; the key and
//! the token do not reach the stored detail either.

mod support;

use std::time::Duration;

use exo::crd::{Agent, AgentPhase, Incident, IncidentState, Severity};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use support::operator::{
    OperatorProcess, agent, agent_token, create, restricted_namespace, wait_for,
};

/// A canary in a provider key's shape (Anthropic), never a real key.
const CANARY_KEY: &str = "sk-ant-api03-CANARYcanaryCANARYcanary0123456789";
const HOST: &str = "billing-db.corp.internal";
const ADDRESS: &str = "10.42.7.19";

/// One request to the operator: `(status, headers, body)`.
fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, String) {
    let a = support::raw_http::request(addr, method, path, headers, body);
    (a.status, a.head, a.body)
}

fn report(key: &str) -> Value {
    json!({
        "severity": "error",
        "summary": format!("The calendar sync failed talking to {HOST} at {ADDRESS}:5432"),
        "detail": format!(
            "Traceback (most recent call last):\n  File \"sync.py\", line 42, in run\n\
             ConnectionError: {HOST}:5432 refused\nusing key {CANARY_KEY}"
        ),
        "correlationId": "conv-7",
        "idempotencyKey": key,
    })
}

async fn incidents_of(home: &str, tenant: &str) -> Vec<Incident> {
    let client = support::client().await;
    Api::<Incident>::namespaced(client, home)
        .list(&ListParams::default().labels(&format!("{}={tenant}", exo::meta::LABEL_TENANT)))
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn an_agent_reports_an_incident_and_reads_back_only_its_friendly_side() {
    let ns = restricted_namespace("inc").await;
    let other = support::TestNamespace::new("inc-other").await;
    let op = OperatorProcess::start_with(&ns.name, "leader", &["--incident-rate", "1"]);
    op.wait_ready().await;
    let agents = ns.api::<Agent>();
    create(&agents, &agent("assistant")).await;
    wait_for(&agents, "assistant", "Active", |a| {
        a.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
    })
    .await;
    let token = agent_token(&ns.name, "assistant").await;
    let me = format!("{}/assistant", ns.name);
    let auth = format!("Bearer {token}");
    let who = [
        ("Authorization", auth.as_str()),
        ("X-Exo-Agent", me.as_str()),
    ];
    let addr = op.addr.clone();

    // Stored before the answer, and a retry is the same incident.
    let body = serde_json::to_vec(&report("k-1")).unwrap();
    let (status, _, answer) = request(&addr, "POST", "/v1/incidents", &who, &body);
    assert_eq!(status, 202, "{answer}");
    let id = serde_json::from_str::<Value>(&answer).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stored = incidents_of(&ns.name, &ns.name).await;
    assert_eq!(stored.len(), 1, "stored before the 202");
    let inc = &stored[0];
    assert_eq!(inc.metadata.name.as_deref(), Some(id.as_str()));
    assert_eq!(inc.spec.agent, "assistant", "the agent its token proved");
    assert_eq!(inc.spec.severity, Severity::Error);
    assert_eq!(inc.state(), IncidentState::Received);
    assert!(
        inc.spec.detail.contains("Traceback") && inc.spec.detail.contains(HOST),
        "support keeps the technical detail: {}",
        inc.spec.detail
    );
    for gone in [CANARY_KEY, token.as_str()] {
        assert!(
            !inc.spec.detail.contains(gone),
            "a secret in the stored detail"
        );
    }
    assert!(
        inc.spec.detail.contains("[masked: Anthropic key]"),
        "{}",
        inc.spec.detail
    );
    let (status, _, again) = request(&addr, "POST", "/v1/incidents", &who, &body);
    assert_eq!(status, 200, "a retry: {again}");
    assert_eq!(
        serde_json::from_str::<Value>(&again).unwrap()["id"],
        id.as_str()
    );
    assert_eq!(
        incidents_of(&ns.name, &ns.name).await.len(),
        1,
        "stored once"
    );

    // The tenant's view: state and the redacted summary, nothing else.
    let (status, head, view) = request(&addr, "GET", &format!("/v1/incidents/{id}"), &who, b"");
    assert_eq!(status, 200, "{view}");
    assert!(
        head.to_ascii_lowercase()
            .contains("cache-control: no-store"),
        "{head}"
    );
    let v: Value = serde_json::from_str(&view).unwrap();
    assert_eq!(v["id"], id.as_str());
    assert_eq!(v["state"], "received");
    assert_eq!(
        v["summary"],
        "The calendar sync failed talking to [host] at [address]"
    );
    for gone in [
        HOST,
        ADDRESS,
        CANARY_KEY,
        "Traceback",
        "sync.py",
        token.as_str(),
        "conv-7",
    ] {
        assert!(!view.contains(gone), "{gone} reached the tenant: {view}");
    }

    // Another tenant's agent, with a valid token of its own, cannot read
    // it: answered like an incident that does not exist.
    let other_token = "another-tenants-token-0123456789";
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": exo::cluster::build::agent_secret_name("spy"), "namespace": other.name},
        "stringData": {exo::meta::TOKEN_KEY: other_token},
    }))
    .unwrap();
    other
        .api::<Secret>()
        .create(&PostParams::default(), &s)
        .await
        .unwrap();
    let spy = format!("{}/spy", other.name);
    let spy_auth = format!("Bearer {other_token}");
    let spy_who = [
        ("Authorization", spy_auth.as_str()),
        ("X-Exo-Agent", spy.as_str()),
    ];
    let (status, _, _) = request(&addr, "GET", &format!("/v1/incidents/{id}"), &spy_who, b"");
    assert_eq!(status, 404, "another tenant's incident");
    let (status, _, _) = request(
        &addr,
        "GET",
        "/v1/incidents/inc-000000000000000000000000",
        &spy_who,
        b"",
    );
    assert_eq!(status, 404, "a missing one looks the same");

    // Identity problems: one 401 for all, nothing stored.
    let wrong = "Bearer not-the-token".to_owned();
    let posts: Vec<(&str, Vec<(&str, &str)>)> = vec![
        (
            "a wrong token",
            vec![
                ("Authorization", wrong.as_str()),
                ("X-Exo-Agent", me.as_str()),
            ],
        ),
        ("no token", vec![("X-Exo-Agent", me.as_str())]),
        ("no agent", vec![("Authorization", auth.as_str())]),
        (
            "another agent's name",
            vec![
                ("Authorization", auth.as_str()),
                ("X-Exo-Agent", spy.as_str()),
            ],
        ),
        (
            "a bad agent name",
            vec![
                ("Authorization", auth.as_str()),
                ("X-Exo-Agent", "Not_A/Name"),
            ],
        ),
    ];
    for (what, headers) in posts {
        let body = serde_json::to_vec(&report(&format!("k-{what}").replace(' ', "-"))).unwrap();
        let (status, head, _) = request(&addr, "POST", "/v1/incidents", &headers, &body);
        assert_eq!(status, 401, "{what}");
        assert!(
            head.contains("WWW-Authenticate") || head.contains("www-authenticate"),
            "{what}: {head}"
        );
    }

    // Bad bodies: refused naming the field or the limit, nothing stored.
    let mut no_summary = report("k-2");
    no_summary.as_object_mut().unwrap().remove("summary");
    let mut fatal = report("k-3");
    fatal["severity"] = json!("fatal");
    let mut slash = report("k-4");
    slash["idempotencyKey"] = json!("a/b");
    let big = vec![b'x'; exo::incident::MAX_BODY_BYTES + 10];
    let bad: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "a missing field",
            serde_json::to_vec(&no_summary).unwrap(),
            400,
            "missing field `summary`",
        ),
        (
            "an unknown severity",
            serde_json::to_vec(&fatal).unwrap(),
            400,
            "unknown variant `fatal`",
        ),
        (
            "a bad key",
            serde_json::to_vec(&slash).unwrap(),
            400,
            "field idempotencyKey",
        ),
        ("an oversized body", big, 413, "larger than 32768 bytes"),
        ("not JSON", b"{".to_vec(), 400, "bad body"),
    ];
    for (what, body, want_status, want) in bad {
        let (status, _, text) = request(&addr, "POST", "/v1/incidents", &who, &body);
        assert_eq!(status, want_status, "{what}: {text}");
        assert!(text.contains(want), "{what}: {text}");
    }
    assert_eq!(
        incidents_of(&ns.name, &ns.name).await.len(),
        1,
        "nothing more stored"
    );

    // The agent's rate: 1 a minute, a burst of 5; the two posts above
    // used two. The third past the burst is refused with Retry-After.
    let mut refused = None;
    for i in 0..6 {
        let body = serde_json::to_vec(&report(&format!("burst-{i}"))).unwrap();
        let (status, head, text) = request(&addr, "POST", "/v1/incidents", &who, &body);
        if status == 429 {
            refused = Some((i, head, text));
            break;
        }
        assert_eq!(status, 202, "{text}");
    }
    let (at, head, text) = refused.expect("a post past the rate refused");
    assert_eq!(at, 3, "5 in a burst, 2 used before");
    assert!(text.contains("more than 1 incident(s) a minute"), "{text}");
    assert!(head.to_ascii_lowercase().contains("retry-after:"), "{head}");

    // Nothing planted reached the log: not the key, the token, the
    // address, the host or the trace.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = op.log();
    for gone in [
        CANARY_KEY,
        token.as_str(),
        other_token,
        HOST,
        ADDRESS,
        "Traceback",
    ] {
        assert!(!log.contains(gone), "{gone} reached the operator's log");
    }
    assert!(log.contains("incident received"), "the receipt is logged");
    // Nor any Event, in the tenant's namespace or the operator's (here the
    // same one) or anywhere else the test cluster holds.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::all(support::client().await);
    let all =
        serde_json::to_string(&events.list(&ListParams::default()).await.unwrap().items).unwrap();
    for gone in [CANARY_KEY, token.as_str(), HOST, ADDRESS, "Traceback"] {
        assert!(!all.contains(gone), "{gone} reached an Event");
    }
    // The platform's view: `exo incident list|show`, with the detail
    // (secrets masked); a bad id is refused naming the shape.
    let exo = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_exo"))
            .args(args)
            .env("KUBECONFIG", &support::env().kubeconfig)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, err) = exo(&[
        "incident", "list", "-n", &ns.name, "--tenant", &ns.name, "-o", "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 4, "{out}");
    let (code, out, err) = exo(&["incident", "show", &id, "-n", &ns.name]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("Severity:    error") && out.contains("Traceback"),
        "{out}"
    );
    assert!(
        out.contains("[masked: Anthropic key]") && !out.contains(CANARY_KEY),
        "{out}"
    );
    assert!(!out.contains(token.as_str()), "the agent's token in show");
    let (code, _, err) = exo(&["incident", "show", "inc-../x", "-n", &ns.name]);
    assert_eq!(code, Some(2));
    assert!(err.contains("not an incident id"), "{err}");

    let (_, metrics) = op.get("/metrics").unwrap();
    assert!(
        metrics.contains("exo_operator_incidents_total{outcome=\"stored\"} 4"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("incidents"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
