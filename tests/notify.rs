#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Notifications end to end: a real `exo operator run` follows a fleet on
//! the git daemon (or on Gitea), kwok runs the pods, and the operator's
//! notifications go to real HTTP receivers started here and to Gitea's
//! commit status API. The receivers check the HMAC-SHA256 signature over
//! the exact body with the key the test planted; a receiver answering 500
//! twice gets the event on the third attempt; one that is down, and one
//! that refuses, cost a `NotificationFailed` Event and a metric, never the
//! rollout; the planted secrets appear in no log line, Event or status.
//!
//! Tests here run one at a time (each runs an operator that watches the
//! whole cluster), with tenant namespaces prefixed per test.

mod support;

use std::time::Duration;

use exo::crd::{NotificationProvider, NotificationRule, RolloutPhase};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use support::fleet::{Fixture, Operator, example_files, out, tail};
use support::notify::{Receiver, provider, rule, secret, signed_with};
use support::{TestNamespace, eventually};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const OLD: &str = "2026.11.0";
const NEW: &str = "2026.11.1";
const WAIT: Duration = Duration::from_secs(90);

/// The value of the sample of `metric` whose labels hold every one of
/// `labels` (`key="value"`), on the operator's `/metrics`.
fn sample(op: &Operator, metric: &str, labels: &[&str]) -> Option<u64> {
    let (_, text) = support::operator::http_get(&op.addr, "/metrics")?;
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
}

/// Waits for a `NotificationFailed` Event on rule `rule` in `ns` whose
/// note holds every one of `words`, and returns the note.
async fn failure_note(ns: &str, rule: &str, words: &[&str]) -> String {
    eventually(
        &format!("a NotificationFailed Event on rule {rule} saying {words:?}"),
        WAIT,
        || async {
            support::events(ns, "NotificationFailed")
                .await
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(rule))
                .filter_map(|e| e.note)
                .find(|note| words.iter().all(|w| note.contains(w)))
        },
    )
    .await
}

/// The `Ready` condition of an object's status, when it is for its
/// current generation: (status, reason, message).
fn ready(
    status: Option<&exo::crd::NotificationStatus>,
    generation: Option<i64>,
) -> Option<(String, String, String)> {
    let c = status?.ready_for(generation)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until `name` has a `Ready` condition for its generation.
async fn ready_of<K>(
    api: Api<K>,
    name: &str,
    status: fn(&K) -> Option<&exo::crd::NotificationStatus>,
) -> (String, String, String)
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(
        &format!("{} {name} to have a status", K::kind(&())),
        WAIT,
        || async {
            let o = api.get(name).await.ok()?;
            ready(status(&o), o.meta().generation)
        },
    )
    .await
}

async fn provider_ready(ns: &TestNamespace, name: &str) -> (String, String, String) {
    ready_of(ns.api::<NotificationProvider>(), name, |p| {
        p.status.as_ref()
    })
    .await
}

async fn rule_ready(ns: &TestNamespace, name: &str) -> (String, String, String) {
    ready_of(ns.api::<NotificationRule>(), name, |r| r.status.as_ref()).await
}

/// Fails when `needle` is in the operator's log, in any Event of the
/// namespaces given, or in any provider's or rule's status.
async fn nowhere(needle: &str, op: &Operator, fx: &Fixture) {
    assert!(
        !op.log().contains(needle),
        "a secret is in the operator's log"
    );
    let client = fx.ns.client.clone();
    let mut namespaces = fx.tenants();
    namespaces.push(fx.ns.name.clone());
    for ns in namespaces {
        let events = Api::<Event>::namespaced(client.clone(), &ns)
            .list(&ListParams::default())
            .await
            .unwrap();
        let text = serde_json::to_string(&events.items).unwrap();
        assert!(!text.contains(needle), "a secret is in an Event in {ns}");
    }
    let providers = fx.ns.api::<NotificationProvider>();
    let rules = fx.ns.api::<NotificationRule>();
    let text = serde_json::to_string(&(
        providers
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| p.status.clone())
            .collect::<Vec<_>>(),
        rules
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|r| r.status.clone())
            .collect::<Vec<_>>(),
    ))
    .unwrap();
    assert!(
        !text.contains(needle),
        "a secret is in a provider's or rule's status"
    );
}

#[tokio::test]
async fn webhooks_get_signed_events_retries_and_failures_are_reported() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::new("nw", example_files("nw")).await;
    let ns = &fx.ns;
    // The HMAC key is the canary: it must be in nothing the operator shows.
    let key = format!("exo-canary-{}", support::unique_suffix());
    let hook = Receiver::start(&[]).await;
    let flaky = Receiver::start(&[(500, "busy"), (500, "busy")]).await;
    // A receiver that refuses, echoing the key it was configured with.
    let echo = Receiver::start(&[(400, &format!("bad signature for key {key}"))]).await;
    let down = format!("http://127.0.0.1:{}/hook", support::operator::free_port());
    secret(ns, "hook-key", "hmacKey", &key).await;
    for (name, url) in [
        ("hook", hook.url.as_str()),
        ("flaky", flaky.url.as_str()),
        ("echo", echo.url.as_str()),
        ("down", down.as_str()),
    ] {
        provider(
            ns,
            name,
            serde_json::json!({"type": "webhook", "address": url, "secretRef": "hook-key"}),
        )
        .await;
    }
    provider(
        ns,
        "no-secret",
        serde_json::json!({"type": "webhook", "address": hook.url, "secretRef": "gone"}),
    )
    .await;
    let t = |name: &str| format!("nw-{name}");
    rule(
        ns,
        "everything",
        serde_json::json!({"providerRef": "hook",
            "events": ["promoted", "verified", "rolledBack", "driftReverted"]}),
    )
    .await;
    rule(
        ns,
        "flaky",
        serde_json::json!({"providerRef": "flaky", "events": ["verified"], "tenants": [t("acme")]}),
    )
    .await;
    rule(
        ns,
        "echo",
        serde_json::json!({"providerRef": "echo", "events": ["verified"], "tenants": [t("globex")]}),
    )
    .await;
    rule(
        ns,
        "down",
        serde_json::json!({"providerRef": "down", "events": ["verified"], "tenants": [t("initech")]}),
    )
    .await;
    rule(
        ns,
        "no-secret",
        serde_json::json!({"providerRef": "no-secret", "events": ["verified"]}),
    )
    .await;
    rule(
        ns,
        "orphan",
        serde_json::json!({"providerRef": "missing", "events": ["verified"]}),
    )
    .await;

    let op = Operator::start(&ns.name, &support::env().kubeconfig, "a");
    // The rollout completes whatever the receivers do.
    fx.wait_all(OLD, &op).await;

    // Every tenant's `verified`, signed over the exact body with the key.
    let verified = eventually("a verified event per tenant", WAIT, || async {
        let got = hook.events("verified");
        let of: std::collections::BTreeSet<String> = got
            .iter()
            .filter_map(|d| Some(d.json()["tenants"][0].as_str()?.to_owned()))
            .collect();
        (of.len() == fx.tenants().len()).then_some(got)
    })
    .await;
    for d in &verified {
        assert!(
            signed_with(d, key.as_bytes()),
            "bad signature: {:?}",
            d.headers
        );
        assert!(!signed_with(d, b"another key"));
        assert_eq!(d.header("x-exo-event"), "verified");
        assert_eq!(d.header("x-exo-delivery"), d.json()["id"]);
        let body = d.json();
        assert_eq!(body["release"], OLD);
        assert_eq!(body["severity"], "info");
        assert_eq!(body["tenants"].as_array().map(Vec::len), Some(1));
    }
    let tenants: std::collections::BTreeSet<String> = verified
        .iter()
        .map(|d| d.json()["tenants"][0].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tenants, fx.tenants().into_iter().collect());
    let platform = fx.rollout(&t("platform")).await.unwrap();
    let of_platform = verified
        .iter()
        .find(|d| d.json()["tenants"][0] == t("platform").as_str())
        .unwrap()
        .json();
    assert_eq!(of_platform["commit"], platform.spec.commit.as_str());
    assert_eq!(of_platform["wave"], "canary");

    // 500, 500, then 200: delivered on the third attempt, the same event
    // each time, and both failures counted.
    let name = format!("namespace=\"{}\"", ns.name);
    eventually("the flaky receiver's delivery", WAIT, || async {
        sample(
            &op,
            "exo_notifications_total",
            &[&name, "provider=\"flaky\"", "result=\"delivered\""],
        )
        .filter(|n| *n == 1)
    })
    .await;
    let tries = flaky.got();
    assert_eq!(tries.len(), 3, "{tries:?}");
    assert!(
        tries
            .iter()
            .all(|d| d.body == tries[0].body && signed_with(d, key.as_bytes()))
    );
    assert_eq!(tries[0].json()["tenants"], serde_json::json!([t("acme")]));
    assert_eq!(
        sample(
            &op,
            "exo_notification_attempt_failures_total",
            &[&name, "provider=\"flaky\"", "reason=\"refused\""]
        ),
        Some(2)
    );

    // Down: retried, then an Event on the rule and the failure counted,
    // long after the tenant was verified.
    let initech = t("initech");
    let note = failure_note(
        &ns.name,
        "down",
        &["NotificationProvider", "/down", "5 attempt(s)", &initech],
    )
    .await;
    assert!(note.contains("unreachable"), "{note}");
    assert_eq!(
        sample(
            &op,
            "exo_notifications_total",
            &[&name, "provider=\"down\"", "result=\"failed\""]
        ),
        Some(1)
    );

    // A refusal is not retried; what the receiver echoed is masked.
    let note = failure_note(&ns.name, "echo", &["HTTP 400"]).await;
    assert!(note.contains("[redacted]"), "{note}");
    assert_eq!(echo.got().len(), 1, "a 400 is not retried");

    // Statuses name what is wrong.
    let (s, reason, message) = provider_ready(ns, "hook").await;
    assert_eq!(
        (s.as_str(), reason.as_str()),
        ("True", "Ready"),
        "{message}"
    );
    let (s, reason, message) = provider_ready(ns, "no-secret").await;
    assert_eq!((s.as_str(), reason.as_str()), ("False", "SecretNotFound"));
    assert!(
        message.contains(&format!("Secret {}/gone", ns.name)),
        "{message}"
    );
    let (s, reason, _) = rule_ready(ns, "no-secret").await;
    assert_eq!((s.as_str(), reason.as_str()), ("False", "ProviderNotReady"));
    let (s, reason, message) = rule_ready(ns, "orphan").await;
    assert_eq!((s.as_str(), reason.as_str()), ("False", "ProviderNotFound"));
    assert!(message.contains("spec.providerRef"), "{message}");
    // The rule whose provider has no Secret reports each delivery too.
    failure_note(&ns.name, "no-secret", &["/gone"]).await;

    // A hand edit put back: `driftReverted`, about that tenant.
    let umbrella = t("umbrella");
    let agents: Api<exo::crd::Agent> = Api::namespaced(ns.client.clone(), &umbrella);
    let pinned = agents.get("assistant").await.unwrap().spec.runtime.image;
    let hand_edit = format!(
        "{}@sha256:{}",
        pinned.split('@').next().unwrap(),
        "0".repeat(64)
    );
    agents
        .patch(
            "assistant",
            &kube::api::PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..kube::api::PatchParams::default()
            },
            &kube::api::Patch::Merge(
                serde_json::json!({"spec": {"runtime": {"image": hand_edit}}}),
            ),
        )
        .await
        .unwrap();
    let drift = eventually("a driftReverted event", WAIT, || async {
        hook.events("driftReverted").pop()
    })
    .await;
    assert!(signed_with(&drift, key.as_bytes()));
    let body = drift.json();
    assert_eq!(
        (&body["tenants"], &body["severity"]),
        (
            &serde_json::json!([umbrella]),
            &serde_json::json!("warning")
        )
    );
    let message = body["message"].as_str().unwrap_or("");
    assert!(
        message.contains("Agent/assistant") && message.contains("spec.runtime.image"),
        "{message}"
    );

    // A promotion and a rollback of the canary wave.
    let o = fx.exo(&["release", "promote", NEW, "--wave", "canary"]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", out(&o), tail(&op.log()));
    fx.wait_phase(&t("platform"), NEW, RolloutPhase::Verified, &op)
        .await;
    let promoted = eventually("a promoted event", WAIT, || async {
        hook.events("promoted").pop()
    })
    .await;
    assert!(signed_with(&promoted, key.as_bytes()));
    let body = promoted.json();
    assert_eq!(
        (&body["wave"], &body["release"], &body["severity"]),
        (
            &serde_json::json!("canary"),
            &serde_json::json!(NEW),
            &serde_json::json!("info")
        )
    );
    assert_eq!(body["tenants"], serde_json::json!([t("platform")]));
    assert_eq!(
        body["message"],
        format!("wave canary promoted from {OLD} to {NEW}")
    );
    eventually("verified on the new release", WAIT, || async {
        hook.events("verified")
            .iter()
            .any(|d| d.json()["release"] == NEW)
            .then_some(())
    })
    .await;
    let o = fx.exo(&["release", "rollback", "--wave", "canary"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let back = eventually("a rolledBack event", WAIT, || async {
        hook.events("rolledBack").pop()
    })
    .await;
    let body = back.json();
    assert_eq!(
        (&body["release"], &body["severity"]),
        (&serde_json::json!(OLD), &serde_json::json!("error"))
    );
    assert_eq!(
        body["message"],
        format!("wave canary rolled back from {NEW} to {OLD}")
    );
    assert_eq!(hook.events("promoted").len(), 1, "each move is told once");
    fx.wait_phase(&t("platform"), OLD, RolloutPhase::Verified, &op)
        .await;

    nowhere(&key, &op, &fx).await;
}

#[tokio::test]
async fn commit_statuses_go_from_pending_to_success_on_gitea() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::on_gitea("ng", example_files("ng")).await;
    let ns = &fx.ns;
    let repo = fx.gitea.as_ref().unwrap();
    let gitea = &repo.gitea;
    let token = std::fs::read_to_string(&gitea.token_file)
        .unwrap()
        .trim()
        .to_owned();
    secret(ns, "forge", "token", &token).await;
    provider(
        ns,
        "gitea",
        serde_json::json!({"type": "gitea", "address": gitea.url, "secretRef": "forge",
            "repository": format!("{}/{}", repo.owner, repo.name)}),
    )
    .await;
    let platform = "ng-platform";
    rule(
        ns,
        "statuses",
        serde_json::json!({"providerRef": "gitea", "tenants": [platform]}),
    )
    .await;
    let op = Operator::start(&ns.name, &support::env().kubeconfig, "a");
    let (s, _, message) = provider_ready(ns, "gitea").await;
    assert_eq!(s, "True", "{message}");
    assert!(
        message.contains(&format!("{}/{}", repo.owner, repo.name)),
        "{message}"
    );

    // The statuses of `context` on `commit`, oldest first: (id, state).
    let statuses = |commit: String, context: String| {
        let path = format!(
            "/repos/{}/{}/commits/{commit}/statuses?limit=50",
            repo.owner, repo.name
        );
        let (code, body) = gitea.api("GET", &path, None);
        assert_eq!(code, 200, "{body}");
        let mut out: Vec<(u64, String)> = body
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s["context"] == context.as_str())
            .map(|s| {
                (
                    s["id"].as_u64().unwrap(),
                    s["status"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        out.sort();
        out
    };
    let context = format!("exo/{platform}");
    let pending_then_success = |commit: String| {
        let states: Vec<String> = statuses(commit, context.clone())
            .into_iter()
            .map(|(_, s)| s)
            .collect();
        let pending = states.iter().position(|s| s == "pending")?;
        let success = states.iter().rposition(|s| s == "success")?;
        (pending < success && states.last().map(String::as_str) == Some("success"))
            .then_some(states)
    };

    let ro = fx
        .wait_phase(platform, OLD, RolloutPhase::Verified, &op)
        .await;
    let first = ro.spec.commit.clone();
    eventually(
        "pending, then success, on the first commit",
        WAIT,
        || async { pending_then_success(first.clone()) },
    )
    .await;
    // Only the selected tenant has a status.
    let (_, all) = gitea.api(
        "GET",
        &format!(
            "/repos/{}/{}/commits/{first}/statuses?limit=50",
            repo.owner, repo.name
        ),
        None,
    );
    let contexts: std::collections::BTreeSet<String> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["context"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(contexts, [context.clone()].into());

    // A promotion is a new commit: its own pending, then success.
    let o = fx.exo(&["release", "promote", NEW, "--wave", "canary"]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", out(&o), tail(&op.log()));
    let ro = fx
        .wait_phase(platform, NEW, RolloutPhase::Verified, &op)
        .await;
    let second = ro.spec.commit.clone();
    assert_ne!(first, second);
    let states = eventually(
        "pending, then success, on the promotion's commit",
        WAIT,
        || async { pending_then_success(second.clone()) },
    )
    .await;
    assert!(!states.contains(&"failure".to_owned()), "{states:?}");

    // A rollback fails the release it leaves, on the commit that brought it.
    let o = fx.exo(&["release", "rollback", "--wave", "canary"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    eventually("failure on the rolled-back commit", WAIT, || async {
        let last = statuses(second.clone(), context.clone()).pop()?;
        (last.1 == "failure").then_some(())
    })
    .await;
    let ro = fx
        .wait_phase(platform, OLD, RolloutPhase::Verified, &op)
        .await;
    let third = ro.spec.commit.clone();
    eventually(
        "pending, then success, on the rollback's commit",
        WAIT,
        || async { pending_then_success(third.clone()) },
    )
    .await;

    nowhere(&token, &op, &fx).await;
}

#[tokio::test]
async fn bad_addresses_and_event_kinds_are_refused_naming_the_field() {
    let ns = TestNamespace::new("nb").await;
    support::install_crds(&ns.client).await;
    let providers = ns.api::<NotificationProvider>();
    let p: NotificationProvider = serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "NotificationProvider",
        "metadata": {"name": "ftp"},
        "spec": {"type": "webhook", "address": "ftp://example.com/hook", "secretRef": "k"}
    }))
    .unwrap();
    let e = providers
        .create(&PostParams::default(), &p)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("spec.address") && e.contains("address must be an http:// or https:// URL"),
        "{e}"
    );
    // An unknown provider type, and a repository that is not owner/name.
    for (spec, field) in [
        (
            serde_json::json!({"type": "teams", "address": "https://x"}),
            "spec.type",
        ),
        (
            serde_json::json!({"type": "gitea", "address": "https://x", "repository": "fleet"}),
            "spec.repository",
        ),
    ] {
        let p: serde_json::Value = serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "NotificationProvider",
            "metadata": {"name": "bad"}, "spec": spec
        });
        let e = Api::<kube::api::DynamicObject>::namespaced_with(
            ns.client.clone(),
            &ns.name,
            &kube::api::ApiResource::erase::<NotificationProvider>(&()),
        )
        .create(&PostParams::default(), &serde_json::from_value(p).unwrap())
        .await
        .unwrap_err()
        .to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
    let r: serde_json::Value = serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "NotificationRule",
        "metadata": {"name": "deployed"},
        "spec": {"providerRef": "hook", "events": ["verified", "deployed"]}
    });
    let e = Api::<kube::api::DynamicObject>::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &kube::api::ApiResource::erase::<NotificationRule>(&()),
    )
    .create(&PostParams::default(), &serde_json::from_value(r).unwrap())
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("spec.events[1]") && e.contains("deployed"),
        "{e}"
    );
}
