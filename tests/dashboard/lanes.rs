//! A support lane's page, logged in with that lane's own token: its
//! incidents live, acknowledging one (which reaches the cluster), and
//! another lane out of reach.

use super::*;
use exo::crd::{AgentPhase, Incident, IncidentState};

/// Posts an incident as agent `worker`; returns its id.
fn post_incident(addr: &str, ns: &str, token: &str, key: &str, summary: &str) -> String {
    let body = json!({
        "severity": "error",
        "summary": summary,
        "detail": "Traceback (most recent call last): boom",
        "idempotencyKey": key,
    })
    .to_string();
    let bearer = format!("Bearer {token}");
    let who = format!("{ns}/worker");
    let r = request(
        addr,
        "POST",
        "/v1/incidents",
        &[
            ("Authorization", &bearer),
            ("X-Exo-Agent", &who),
            ("Content-Type", "application/json"),
        ],
        &body,
    );
    assert!(r.status == 202 || r.status == 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    v["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_lane_token_sees_its_lane_live_acknowledges_and_reaches_no_other() {
    let _cluster = CLUSTER.read().await;
    let ns = support::operator::restricted_namespace("dash-lane").await;
    let agents = ns.api::<Agent>();
    agents
        .create(&PostParams::default(), &agent("worker"))
        .await
        .unwrap();
    let (cp, op) = upstream_support::managed_operator(&ns.name, "lanes").await;
    support::operator::wait_for(&agents, "worker", "Active", |x| {
        x.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
    })
    .await;
    let token = support::operator::agent_token(&ns.name, "worker").await;
    let first = post_incident(&op.addr, &ns.name, &token, "k1", "The first report failed.");
    let (status, v) = upstream_support::http(
        &cp.addr,
        "PUT",
        &format!("/api/v1/lanes/desk/tenants/lanes/{}", ns.name),
        Some(&json!({})),
    );
    assert_eq!(status, 200, "{v}");
    // A full admin's overview lists the lane, with its open incident.
    let (_admin, full) = logged_in(&cp).await;
    let lane_row = r#"table#lanes tr[data-lane="desk"]"#;
    full.wait_for_in(
        &format!("{lane_row} a[href=\"/lanes/desk\"]"),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(full.text(&format!("{lane_row} .open")).await, "1");
    full.close().await;
    let lane_token = {
        let out = cp.admin(&["admin-token", "create", "--lane", "desk"]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };

    // Logged in with the lane's token, the root is the lane's page.
    let s = Session::open(&cp.base).await;
    s.goto("/login").await;
    s.wait_for(r#"form#login input#token"#).await;
    s.type_into("form#login input#token", &lane_token).await;
    s.click(r#"form#login [type="submit"]"#).await;
    s.wait_for(r#"body[data-page="lane"]"#).await;
    assert_eq!(s.path().await, "/lanes/desk");
    let row = |id: &str, state: &str| {
        format!(r#"table#incidents tr[data-id="{id}"][data-state="{state}"]"#)
    };
    s.wait_for_in(&row(&first, "routed"), Duration::from_secs(30))
        .await;
    assert!(
        s.text("table#incidents")
            .await
            .contains("The first report failed."),
        "the summary is shown"
    );

    // A new incident appears without a reload.
    s.js("window.__marker = 1; return null;", vec![]).await;
    let second = post_incident(
        &op.addr,
        &ns.name,
        &token,
        "k2",
        "The second report failed.",
    );
    s.wait_for_in(&row(&second, "routed"), Duration::from_secs(30))
        .await;
    assert_eq!(
        s.js("return window.__marker === 1;", vec![]).await,
        Value::Bool(true),
        "the page was reloaded"
    );

    // Acknowledge the first: the row follows, and so does the cluster.
    s.click(&format!(r#"{} button.act-ack"#, row(&first, "routed")))
        .await;
    s.wait_for_in(&row(&first, "acknowledged"), Duration::from_secs(30))
        .await;
    let incidents: Api<Incident> = ns.api();
    eventually(
        "the acknowledgement in the cluster",
        Duration::from_secs(60),
        || async {
            let i = incidents.get(&first).await.ok()?;
            (i.state() == IncidentState::Acknowledged).then_some(())
        },
    )
    .await;

    // Another lane, the fleet and a deployment are out of reach.
    for path in ["/lanes/other", "/deployments/lanes", "/api/v1/deployments"] {
        let status = s
            .client
            .execute_async(
                "const [path, done] = arguments;
                 fetch(path, {credentials: 'same-origin'}).then(r => done(r.status)).catch(() => done(0));",
                vec![json!(path)],
            )
            .await
            .unwrap();
        assert_eq!(status, json!(403), "{path}");
    }
    s.close().await;
}
