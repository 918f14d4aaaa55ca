//! The deployment page: pod control, CSRF, live deltas.

use super::*;

// ------------------------------------------------------------------ deployment

#[tokio::test]
async fn restart_on_the_deployment_page_rolls_the_pod_and_is_audited() {
    let _cluster = CLUSTER.read().await;
    let ns = namespace_with_agent("dash-restart", "worker").await;
    let (cp, _op) = upstream_support::managed_operator(&ns.name, "pods").await;
    let pods: Api<Pod> = ns.api();
    let before = support::operator::the_pod(&pods, "agent", "worker").await;
    let old_uid = before.metadata.uid.clone().unwrap();

    let (_admin, s) = logged_in(&cp).await;
    s.goto("/deployments/pods").await;
    let row = agent_row(&ns.name, "worker");
    s.wait_for(&format!("{row} .phase")).await;
    s.wait_for(&format!(r#"{row} a.shell"#)).await;
    s.click(&format!(r#"{row} button[data-action="restart"]"#))
        .await;
    let status = s
        .wait_js(
            "the outcome in #action-status",
            Duration::from_secs(40),
            "const e = document.querySelector('#action-status[role=\"status\"]');
             const t = e && e.textContent.trim();
             return t ? t : null;",
            vec![],
        )
        .await;
    let status = status.as_str().unwrap().to_lowercase();
    assert!(
        !status.contains("error") && !status.contains("fail"),
        "restart reported {status:?}"
    );

    // The pod rolls on the cluster: a new one replaces it.
    let after = support::operator::wait_pod(
        &pods,
        "agent",
        "worker",
        "a new pod for worker after the restart",
        |p| p.metadata.uid.as_deref() != Some(old_uid.as_str()),
    )
    .await;
    println!(
        "pod {} replaced by {}",
        before.metadata.name.unwrap(),
        after.metadata.name.unwrap()
    );

    // And the audit page shows what was issued.
    s.goto("/deployments/pods/audit").await;
    s.wait_for(r#"body[data-page="audit"]"#).await;
    s.wait_for_in(
        r#"table#audit tr[data-id][data-action="pod_control.issued"]"#,
        Duration::from_secs(20),
    )
    .await;
    s.close().await;
}

#[tokio::test]
async fn a_post_with_the_cookie_but_without_the_csrf_token_is_refused() {
    let _cluster = CLUSTER.read().await;
    let ns = namespace_with_agent("dash-csrf", "worker").await;
    let agents = ns.api::<Agent>();
    let (cp, _op) = upstream_support::managed_operator(&ns.name, "csrf").await;
    let (admin, s) = logged_in(&cp).await;
    s.goto("/deployments/csrf").await;
    s.wait_for(&agent_row(&ns.name, "worker")).await;
    let csrf = s
        .js(
            "const m = document.querySelector('meta[name=\"exo-csrf\"]');
             return m ? m.getAttribute('content') : null;",
            vec![],
        )
        .await;
    let csrf = csrf
        .as_str()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| panic!("no <meta name=\"exo-csrf\"> on the deployment page"))
        .to_owned();

    let path = "/api/v1/deployments/csrf/pod-control";
    let pause = json!({"action": "pause", "namespace": ns.name, "agent": "worker"});
    for (what, token) in [("no", None), ("a wrong", Some("not-the-token"))] {
        let (status, body) = page_post(&s, path, &pause, token).await;
        assert_eq!(status, 403, "{what} CSRF token: {body}");
        assert!(
            body.contains("missing or wrong CSRF token"),
            "{what} CSRF token: {body}"
        );
    }
    assert!(
        !agents.get("worker").await.unwrap().spec.paused,
        "a refused request paused the agent"
    );
    let audit = api_get(&cp, &admin, "/api/v1/deployments/csrf/audit");
    assert!(
        !audit["audit"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["action"] == "pod_control.issued"),
        "a refused request was issued: {audit}"
    );

    // With the session's token it is carried out.
    let (status, body) = page_post(&s, path, &pause, Some(&csrf)).await;
    assert_eq!(status, 200, "{body}");
    assert!(agents.get("worker").await.unwrap().spec.paused);

    // A Bearer request carries no ambient credential and needs none.
    let bearer = format!("Bearer {admin}");
    let resume = json!({"action": "resume", "namespace": ns.name, "agent": "worker"}).to_string();
    let r = request(
        &cp.addr,
        "POST",
        path,
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        &resume,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!agents.get("worker").await.unwrap().spec.paused);
    s.close().await;
}

/// A Tenant (cluster-scoped) is listed with its phase, and its operation
/// and current step as details; its namespace cell says it has none.
#[tokio::test]
async fn a_tenant_is_listed_with_its_phase_and_current_step() {
    use exo::crd::tenant::Tenant;
    let _cluster = CLUSTER.read().await;
    let ns = TestNamespace::new("dash-tenant").await;
    install_crds(&ns.client).await;
    let tenants = Api::<Tenant>::all(ns.client.clone());
    let mut t = Tenant::new(&ns.name, Default::default());
    t.metadata.labels =
        Some([(exo::meta::LABEL_FLEET_NAMESPACE.to_owned(), ns.name.clone())].into());
    tenants.create(&PostParams::default(), &t).await.unwrap();
    tenants
        .patch_status(
            &ns.name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({ "status": {
                "phase": "Onboarding", "operation": "onboard", "currentStep": "quota-applied",
                "observedGeneration": 1,
                "steps": [
                    { "name": "namespace-created", "owner": "operator", "state": "Done" },
                    { "name": "quota-applied", "owner": "operator", "state": "Running" }] } })),
        )
        .await
        .unwrap();
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("tenant");
    let _c = Connector::start(&cp.base, &token, &ns.name, &[]);
    let (_admin, s) = logged_in(&cp).await;
    s.goto("/deployments/tenant").await;
    let row = format!(
        r#"table#resources tr[data-kind="Tenant"][data-name="{}"]"#,
        ns.name
    );
    let cells = s
        .wait_js(
            "the Tenant's row with its phase and step",
            Duration::from_secs(30),
            "const tr = document.querySelector(arguments[0]);
             if (!tr) return null;
             const text = [...tr.children].map(c => c.textContent.trim());
             return text[4].includes('quota-applied') ? text : null;",
            vec![json!(row)],
        )
        .await;
    // A new spec the status is not about yet: shown Stale, not Onboarding.
    tenants
        .patch(
            &ns.name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"settings": {"wave": "canary"}}})),
        )
        .await
        .unwrap();
    s.wait_js(
        "the Tenant's row shown Stale",
        Duration::from_secs(30),
        "const tr = document.querySelector(arguments[0]);
         return tr && tr.children[3].textContent.trim() === 'Stale' ? true : null;",
        vec![json!(row)],
    )
    .await;
    let _ = tenants
        .delete(&ns.name, &kube::api::DeleteParams::default())
        .await;
    assert_eq!(cells[0], "Tenant", "{cells}");
    assert_eq!(cells[1], "—", "{cells}");
    assert_eq!(cells[3], "Onboarding", "{cells}");
    assert_eq!(
        cells[4], "onboard · step quota-applied · 1/2 steps done",
        "{cells}"
    );
    s.close().await;
}

#[tokio::test]
async fn a_delta_reaches_the_open_page_without_a_reload() {
    let _cluster = CLUSTER.read().await;
    let ns = namespace_with_agent("dash-live", "early").await;
    let agents = ns.api::<Agent>();
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("live");
    let c = Connector::start(&cp.base, &token, &ns.name, &[]);
    connector_until(&c, "the connector", |h| h["state"] == "connected").await;

    let (_admin, s) = logged_in(&cp).await;
    s.goto("/deployments/live").await;
    s.wait_for(&agent_row(&ns.name, "early")).await;
    s.wait_for(r#"body[data-live="open"]"#).await;
    s.js("window.__exoMarker = 1; return true;", vec![]).await;

    agents
        .create(&PostParams::default(), &agent("late"))
        .await
        .unwrap();
    let created = Instant::now();
    s.wait_for_in(&agent_row(&ns.name, "late"), Duration::from_secs(10))
        .await;
    println!(
        "the new Agent's row appeared {} ms after its create returned",
        created.elapsed().as_millis()
    );
    let marker = s.js("return window.__exoMarker === 1;", vec![]).await;
    assert_eq!(marker, json!(true), "the page reloaded");

    // The filter matches by name.
    s.type_into("input#filter", "late").await;
    let shown = s
        .wait_js(
            "the filter to hide early",
            Duration::from_secs(5),
            "const v = r => { const e = document.querySelector(r); return !!e && e.offsetParent !== null; };
             return (v(arguments[1]) && !v(arguments[0])) ? true : null;",
            vec![
                json!(agent_row(&ns.name, "early")),
                json!(agent_row(&ns.name, "late")),
            ],
        )
        .await;
    assert_eq!(shown, json!(true));
    s.close().await;
}

#[tokio::test]
async fn the_shell_page_runs_a_command_in_the_agents_pod() {
    let _cluster = CLUSTER.read().await;
    let ns = namespace_with_agent("dash-shell", "worker").await;
    let (cp, _op) = upstream_support::managed_operator(&ns.name, "shell").await;
    let pods: Api<Pod> = ns.api();
    support::operator::the_pod(&pods, "agent", "worker").await;

    let (admin, s) = logged_in(&cp).await;
    s.goto("/deployments/shell").await;
    let row = agent_row(&ns.name, "worker");
    s.click(&format!("{row} a.shell")).await;
    s.wait_for(r#"body[data-page="shell"]"#).await;
    // xterm takes keys through its helper textarea and draws rows as text.
    s.wait_for_in(".xterm-helper-textarea", Duration::from_secs(20))
        .await;
    s.wait_js(
        "the shell's socket to open",
        Duration::from_secs(30),
        "const r = document.querySelector('.xterm-rows');
         return r && r.textContent.trim().length > 0 ? true : null;",
        vec![],
    )
    .await;
    // The typed line holds `$((6 * 7))`, so `exo-42` on screen is output.
    s.type_into(".xterm-helper-textarea", "echo \"exo-$((6 * 7))\"\u{E007}")
        .await;
    s.wait_js(
        "the command's output in the terminal",
        Duration::from_secs(30),
        "const r = document.querySelector('.xterm-rows');
         return r && r.textContent.includes('exo-42') ? true : null;",
        vec![],
    )
    .await;
    s.screenshot("shell").await;
    let audit = api_get(&cp, &admin, "/api/v1/deployments/shell/audit");
    assert!(
        audit.to_string().contains("attach.opened"),
        "the session is audited: {audit}"
    );
    s.close().await;
}
