//! The overview's open circuits: a real managed operator scrapes a test
//! exporter (LiteLLM-named metrics) behind an annotated Service; a model
//! deployment in outage shows as one open circuit on the deployment's
//! row, named by tenant, Service and deployment id, and the count goes
//! back to 0 when it recovers.

use super::*;
use k8s_openapi::api::core::v1::Service;
use support::exporter::Exporter;

#[tokio::test]
async fn the_overview_shows_open_circuits_per_deployment() {
    let _cluster = CLUSTER.read().await;
    let ns = support::operator::restricted_namespace("b-dash-circ").await;
    let cp = ControlPlane::start(&[]);
    let dep = "circuits";
    let token = cp.create_deployment(dep);
    let _op = support::operator::OperatorProcess::start_managed(
        &ns.name,
        "c",
        &["--circuit-scrape-interval", "1s"],
        &cp.base,
        &token,
    );
    let exporter = Exporter::start().await;
    exporter.set(|e| {
        e.states.insert("d1".into(), ("azure/gpt-4o".into(), 2));
        e.states.insert("d2".into(), ("claude".into(), 0));
    });
    let svc: Service = serde_json::from_value(json!({
        "metadata": {
            "name": "litellm",
            "labels": {"autonomic.sh/metrics": "true"},
            "annotations": {"autonomic.sh/metrics": "http/metrics"},
        },
        "spec": {"type": "ExternalName", "externalName": "localhost",
                 "ports": [{"name": "http", "port": exporter.port}]}
    }))
    .unwrap();
    ns.api::<Service>()
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();

    let (_admin, s) = logged_in(&cp).await;
    let row = format!(r#"table#deployments tr[data-deployment="{dep}"]"#);
    let wait = Duration::from_secs(40);
    s.wait_for_in(&format!(r#"{row} td.circuits[data-count="1"]"#), wait)
        .await;
    let item = format!(
        r#"{row} td.circuits li[data-tenant="{}"][data-service="litellm"] .circuit"#,
        ns.name
    );
    assert_eq!(s.text(&item).await, "d1");
    assert!(
        s.text(&format!("{row} td.circuits"))
            .await
            .contains("1 open")
    );
    s.screenshot("overview-circuits").await;

    exporter.set(|e| e.states.get_mut("d1").unwrap().1 = 0);
    s.wait_for_in(&format!(r#"{row} td.circuits[data-count="0"]"#), wait)
        .await;
    s.close().await;
}
