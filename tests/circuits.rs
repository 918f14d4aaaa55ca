#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Circuit telemetry against the real apiserver, a real managed `exo
//! operator run` (scraping once a second) and a real control plane: a
//! test exporter (`support::exporter`, an HTTP server in this process
//! serving LiteLLM-named metrics) sits behind an `ExternalName` Service
//! labelled and annotated `autonomic.sh/metrics`. It flips a deployment
//! into outage: `circuit/open` fires (the control plane's active alerts,
//! an Event on the Service, `exo_circuits_open`), and clears when it
//! recovers. Failed requests over a Fleet's threshold raise
//! `model/failures`, which clears once the window passes them. A failing
//! scrape is counted and reported, never fatal. Bad settings are refused
//! naming the field: by the apiserver (a Fleet's metric name, window,
//! thresholds), by the operator (a window of 0, a Service's annotation)
//! and by the CLI (a flag).

mod support;
mod upstream_support;

use std::time::Duration;

use exo::crd::{CircuitSettings, Fleet, FleetSpec};
use k8s_openapi::api::core::v1::Service;
use kube::api::PostParams;
use serde_json::{Value, json};
use support::exporter::Exporter;
use support::operator::{OperatorProcess, restricted_namespace};
use support::{TestNamespace, eventually};
use upstream_support::ControlPlane;

/// `exo_circuits_<name>{<labels>}`, if the operator shows it.
fn series(op: &OperatorProcess, name: &str, labels: &str) -> Option<f64> {
    op.sample(&format!("exo_circuits_{name}"), labels)
}

async fn until_series(op: &OperatorProcess, name: &str, labels: &str, want: f64) {
    op.until_sample(
        &format!("exo_circuits_{name}"),
        labels,
        want,
        Duration::from_secs(40),
    )
    .await;
}

/// A Service for the exporter: `ExternalName` `localhost`, so the operator
/// (outside the cluster here) reaches it by the same rule as a gateway run
/// outside a cluster.
fn exporter_service(name: &str, port: u16, annotation: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {"autonomic.sh/metrics": "litellm"},
            "annotations": {"autonomic.sh/metrics": annotation},
        },
        "spec": {
            "type": "ExternalName",
            "externalName": "localhost",
            "ports": [{"name": "http", "port": port}],
        }
    }))
    .unwrap()
}

/// The active alert `key` at the control plane, once it is there.
async fn until_active(cp: &ControlPlane, dep: &str, key: &str) -> Value {
    eventually(
        &format!("the alert {key} active at the control plane"),
        Duration::from_secs(30),
        || async { cp.alerts(dep, true).into_iter().find(|a| a["key"] == key) },
    )
    .await
}

/// The stored alerts with `key` (newest first).
fn listed(cp: &ControlPlane, dep: &str, key: &str) -> Vec<Value> {
    cp.alerts(dep, false)
        .into_iter()
        .filter(|a| a["key"] == key)
        .collect()
}

async fn until_event(ns: &TestNamespace, reason: &str, service: &str) -> String {
    eventually(
        &format!("a {reason} Event on Service {service}"),
        Duration::from_secs(40),
        || async {
            support::events(&ns.name, reason)
                .await
                .into_iter()
                .find(|e| {
                    e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some("Service") && r.name.as_deref() == Some(service)
                    })
                })
                .map(|e| e.note.unwrap_or_default())
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_in_outage_opens_a_circuit_and_recovery_closes_it() {
    let ns = restricted_namespace("b-circuits").await;
    let cp = ControlPlane::start(&[]);
    let dep = "b-circuits";
    let token = cp.create_deployment(dep);
    let op = OperatorProcess::start_managed(
        &ns.name,
        "c",
        &[
            "--circuit-scrape-interval",
            "1s",
            "--circuit-scrape-timeout",
            "1s",
        ],
        &cp.base,
        &token,
    );
    let exporter = Exporter::start().await;
    exporter.set(|e| {
        e.states.insert("d1".into(), ("azure/gpt-4o".into(), 0));
        e.states.insert("d2".into(), ("claude-3-5".into(), 0));
    });
    let services = ns.api::<Service>();
    services
        .create(
            &PostParams::default(),
            &exporter_service("litellm", exporter.port, "http/metrics"),
        )
        .await
        .unwrap();
    let tenant = format!("tenant=\"{}\"", ns.name);
    // Read and healthy: one target, nothing open, nothing fired.
    until_series(&op, "targets", &tenant, 1.0).await;
    until_series(&op, "open", &tenant, 0.0).await;
    assert!(exporter.scrapes() > 0);
    assert!(
        cp.alerts(dep, true).is_empty(),
        "{:?}",
        cp.alerts(dep, true)
    );

    // Traffic with fallbacks: the ratio over the window.
    exporter.set(|e| {
        e.requests = 200;
        e.fallbacks_succeeded = 15;
        e.fallbacks_failed = 5;
    });
    until_series(&op, "fallback_ratio", &tenant, 0.1).await;
    let labels = format!("{tenant},outcome=\"succeeded\"");
    assert_eq!(series(&op, "fallbacks", &labels), Some(15.0));

    // d1 goes into complete outage.
    exporter.set(|e| e.states.get_mut("d1").unwrap().1 = 2);
    until_series(&op, "open", &tenant, 1.0).await;
    let key = format!("circuit/open/{}/litellm/d1", ns.name);
    let fired = until_active(&cp, dep, &key).await;
    assert_eq!(fired["reason"], "CircuitOpen", "{fired}");
    assert_eq!(fired["object"], "Service/litellm", "{fired}");
    assert_eq!(fired["namespace"], ns.name.as_str(), "{fired}");
    assert!(
        fired["message"].as_str().unwrap().contains("azure/gpt-4o"),
        "{fired}"
    );
    let note = until_event(&ns, "CircuitOpen", "litellm").await;
    assert!(
        note.contains("azure/gpt-4o") && note.contains("d1"),
        "{note}"
    );
    // The other deployment is not in outage; the alert went up once.
    assert_eq!(cp.alerts(dep, true).len(), 1, "{:?}", cp.alerts(dep, true));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(listed(&cp, dep, &key).len(), 1, "sent once while it holds");

    // It recovers: the gauge, the alert and an Event say so.
    exporter.set(|e| e.states.get_mut("d1").unwrap().1 = 0);
    until_series(&op, "open", &tenant, 0.0).await;
    eventually(
        "the circuit/open alert resolved",
        Duration::from_secs(30),
        || async { cp.alerts(dep, true).is_empty().then_some(()) },
    )
    .await;
    let history = listed(&cp, dep, &key);
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(
        history[0]["message"], "cleared",
        "newest first: {history:?}"
    );
    until_event(&ns, "CircuitClosed", "litellm").await;

    // The exporter fails: counted, reported, never fatal; the target is
    // down and the operator keeps scraping.
    exporter.set(|e| e.status = 503);
    until_series(&op, "targets_down", &tenant, 1.0).await;
    let note = until_event(&ns, "MetricsScrapeFailed", "litellm").await;
    assert!(note.contains("HTTP 503"), "{note}");
    assert!(series(&op, "scrapes_total", "result=\"status\"").unwrap_or(0.0) >= 1.0);
    exporter.set(|e| e.status = 200);
    until_series(&op, "targets_down", &tenant, 0.0).await;
    until_event(&ns, "MetricsScrapeRecovered", "litellm").await;
    assert!(
        op.log().contains("circuit telemetry started"),
        "{}",
        op.log()
    );
}

/// The Fleet's threshold and window: failed requests of one model over
/// the threshold raise `model/failures`; it clears once the window has
/// passed them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_requests_over_the_fleets_threshold_raise_model_failures() {
    let ns = restricted_namespace("b-modelfail").await;
    let cp = ControlPlane::start(&[]);
    let dep = "b-modelfail";
    let token = cp.create_deployment(dep);
    let op = OperatorProcess::start_managed(
        &ns.name,
        "c",
        &["--circuit-scrape-interval", "1s"],
        &cp.base,
        &token,
    );
    let fleets = ns.api::<Fleet>();
    let mut fleet = Fleet::new(
        "fleet",
        FleetSpec {
            url: "git://127.0.0.1:1/none.git".into(),
            allow_insecure: true,
            // Nothing to sync: only its circuit settings are read.
            suspend: true,
            circuits: CircuitSettings {
                model_failures: 3,
                window: "8s".into(),
                ..CircuitSettings::default()
            },
            ..FleetSpec::default()
        },
    );
    fleet.metadata.namespace = Some(ns.name.clone());
    fleets.create(&PostParams::default(), &fleet).await.unwrap();
    let stored = fleets.get("fleet").await.unwrap();
    assert_eq!(
        stored.spec.circuits.model_failures, 3,
        "the Fleet CRD in the apiserver has spec.circuits"
    );
    let logged = || {
        op.log()
            .lines()
            .any(|l| l.contains("circuit settings") && l.contains("Some(3)"))
    };
    eventually(
        "the Fleet's circuit settings in force",
        Duration::from_secs(30),
        || async { logged().then_some(()) },
    )
    .await;
    let exporter = Exporter::start().await;
    exporter.set(|e| {
        e.states.insert("d1".into(), ("gpt-4o".into(), 0));
        e.failed.insert("gpt-4o".into(), 1);
    });
    ns.api::<Service>()
        .create(
            &PostParams::default(),
            &exporter_service("gateway", exporter.port, &exporter.port.to_string()),
        )
        .await
        .unwrap();
    let tenant = format!("tenant=\"{}\"", ns.name);
    until_series(&op, "targets", &tenant, 1.0).await;
    until_series(&op, "models_failing", &tenant, 0.0).await;
    exporter.set(|e| *e.failed.get_mut("gpt-4o").unwrap() += 4);
    until_series(&op, "models_failing", &tenant, 1.0).await;
    let key = format!("model/failures/{}/gateway/gpt-4o", ns.name);
    let fired = until_active(&cp, dep, &key).await;
    assert_eq!(fired["reason"], "ModelFailures", "{fired}");
    let note = until_event(&ns, "ModelFailures", "gateway").await;
    assert!(note.contains("at least 3 requests within 8s"), "{note}");
    // No more failures: once 8 s have passed them, it clears.
    until_series(&op, "models_failing", &tenant, 0.0).await;
    eventually(
        "the model/failures alert resolved",
        Duration::from_secs(30),
        || async { cp.alerts(dep, true).is_empty().then_some(()) },
    )
    .await;
    until_event(&ns, "ModelFailuresCleared", "gateway").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_are_refused_naming_the_field() {
    let ns = restricted_namespace("b-circbad").await;
    // The apiserver: a metric name that is not one, a window that is not
    // a duration.
    let fleets = ns.api::<Fleet>();
    for (patch, field, why) in [
        (
            json!({"metrics": {"requests": "total requests"}}),
            "spec.circuits.metrics.requests",
            "must be a Prometheus metric name",
        ),
        (
            json!({"window": "soon"}),
            "spec.circuits.window",
            "window must be a duration",
        ),
        (
            json!({"outageAt": 1, "cooledDownAt": 1}),
            "spec.circuits",
            "cooledDownAt must be below outageAt (or 0: off)",
        ),
    ] {
        let fleet: Fleet = serde_json::from_value(json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "Fleet",
            "metadata": {"name": "fleet"},
            "spec": {"url": "git://127.0.0.1:1/none.git", "allowInsecure": true,
                     "suspend": true, "circuits": patch},
        }))
        .unwrap();
        let e = fleets
            .create(&PostParams::default(), &fleet)
            .await
            .expect_err("refused by the apiserver");
        let text = e.to_string();
        assert!(
            text.contains(field) && text.contains(why),
            "{field}: {why}: {text}"
        );
    }

    // The operator: a window of 0 passes the CRD's syntax rule but not the
    // operator's check; the section is refused whole, an Event on the
    // Fleet names the field, and the settings in force stay the defaults.
    let zero: Fleet = serde_json::from_value(json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "Fleet",
        "metadata": {"name": "fleet"},
        "spec": {"url": "git://127.0.0.1:1/none.git", "allowInsecure": true,
                 "suspend": true, "circuits": {"window": "0s", "modelFailures": 3}},
    }))
    .unwrap();
    fleets.create(&PostParams::default(), &zero).await.unwrap();
    let op = OperatorProcess::start_with(&ns.name, "c", &["--circuit-scrape-interval", "1s"]);
    let refused = eventually(
        "a CircuitSettingsInvalid Event on the Fleet",
        Duration::from_secs(40),
        || async {
            support::events(&ns.name, "CircuitSettingsInvalid")
                .await
                .into_iter()
                .find(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Fleet"))
                .and_then(|e| e.note)
        },
    )
    .await;
    assert!(
        refused.contains("spec.circuits.window must be longer than 0"),
        "{refused}"
    );
    assert!(
        !op.log().contains("Some(3)"),
        "nothing of the refused section is in force: {}",
        op.log()
    );

    // A labelled Service whose annotation names no port of it is not
    // scraped, and an Event says why.
    ns.api::<Service>()
        .create(
            &PostParams::default(),
            &exporter_service("broken", 9, "grpc/metrics"),
        )
        .await
        .unwrap();
    let note = until_event(&ns, "MetricsTargetInvalid", "broken").await;
    assert!(
        note.contains("annotation autonomic.sh/metrics \"grpc/metrics\"")
            && note.contains("no port named \"grpc\""),
        "{note}"
    );
    let tenant = format!("tenant=\"{}\"", ns.name);
    assert_eq!(series(&op, "targets", &tenant), None, "not a target");

    // The CLI: a scrape interval of 0 (it would scrape without pause).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_exo"))
        .args(["operator", "run", "--circuit-scrape-interval", "0s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--circuit-scrape-interval") && stderr.contains("must be longer than 0"),
        "{stderr}"
    );
}
