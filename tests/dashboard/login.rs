//! Logging in, sessions and the fleet overview.

use super::*;

// ------------------------------------------------------------------ log in

#[tokio::test]
async fn a_wrong_token_is_refused_and_the_right_one_opens_a_strict_session() {
    let ns = TestNamespace::new("dash-login").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[]);
    let dep = cp.create_deployment("login");
    let _c = Connector::start(&cp.base, &dep, &ns.name, &[]);
    let admin = admin_token(&cp);
    let s = Session::open(&cp.base).await;

    // Not logged in: every page sends you to /login.
    s.goto("/").await;
    s.wait_for(r#"body[data-page="login"] form#login"#).await;
    assert_eq!(s.path().await, "/login");

    // A wrong token is refused, and no cookie is set.
    let wrong = format!("exo_at_{}", "0".repeat(64));
    s.type_into("form#login input#token", &wrong).await;
    s.click(r#"form#login [type="submit"]"#).await;
    let error = s.wait_for("#login-error").await;
    assert!(
        error.is_displayed().await.unwrap(),
        "#login-error is hidden"
    );
    assert!(
        !s.describe().await.contains(&wrong),
        "the refused token is echoed on the page"
    );
    let cookies = s.client.get_all_cookies().await.unwrap();
    assert!(
        cookies.iter().all(|c| c.name() != "exo_session"),
        "a session cookie after a refused login"
    );

    // The right one opens a session: an HttpOnly, SameSite=Strict cookie
    // holding an id, not the token.
    log_in(&s, &admin).await;
    let c = s.client.get_named_cookie("exo_session").await.unwrap();
    assert_eq!(c.http_only(), Some(true), "exo_session is not HttpOnly");
    // fantoccini does not re-export the cookie crate's SameSite.
    assert_eq!(
        format!("{:?}", c.same_site()),
        "Some(Strict)",
        "exo_session is not SameSite=Strict"
    );
    assert!(!c.value().is_empty() && !c.value().contains(&admin[7..]));
    assert!(
        !s.describe().await.contains(&admin[7..]),
        "the admin token reached the page"
    );

    // The session works: the overview shows the deployment, live.
    let row = r#"table#deployments tr[data-deployment="login"]"#;
    s.wait_for(&format!(r#"{row} span.state[data-state="online"]"#))
        .await;
    s.wait_for(r#"body[data-live="open"]"#).await;
    s.click(&format!("{row} a")).await;
    s.wait_for(r#"body[data-page="deployment"] table#resources"#)
        .await;
    assert_eq!(s.path().await, "/deployments/login");

    // The same over plain HTTP: the Set-Cookie header's flags.
    let (path, field) = login_form_at(&s).await;
    let refused = post_login(&cp, &path, &field, &wrong);
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert!(refused.set_cookies().is_empty(), "{}", refused.head);
    assert!(!refused.body.contains(&wrong) && !refused.head.contains(&wrong));
    let ok = post_login(&cp, &path, &field, &admin);
    let set = ok.set_cookies();
    let session = set
        .iter()
        .find(|c| c.starts_with("exo_session="))
        .unwrap_or_else(|| panic!("no exo_session cookie; status {}: {}", ok.status, ok.head));
    let attrs: Vec<String> = session
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_ascii_lowercase())
        .collect();
    for want in ["httponly", "samesite=strict", "path=/", "max-age=43200"] {
        assert!(
            attrs.iter().any(|a| a == want),
            "Set-Cookie exo_session lacks {want}: {attrs:?}"
        );
    }
    assert!(
        !attrs.iter().any(|a| a == "secure"),
        "Secure on plain http: {attrs:?}"
    );
    assert!(!session.contains(&admin[7..]), "the cookie holds the token");
    let pair = cookie_pair(session);
    let api = request(
        &cp.addr,
        "GET",
        "/api/v1/deployments/login",
        &[("Cookie", &pair)],
        "",
    );
    assert_eq!(api.status, 200, "{}", api.body);
    let none = request(&cp.addr, "GET", "/api/v1/deployments/login", &[], "");
    assert_eq!(none.status, 401, "{}", none.body);

    // Logging out ends the browser's session.
    s.goto("/").await;
    s.wait_for(r#"body[data-page="overview"]"#).await;
    s.click("button#logout").await;
    s.wait_for(r#"body[data-page="login"]"#).await;
    s.goto("/").await;
    s.wait_for(r#"body[data-page="login"]"#).await;
    s.close().await;
}

/// [`login_form`] on a fresh login page.
async fn login_form_at(s: &Session) -> (String, String) {
    s.goto("/login").await;
    s.wait_for("form#login input#token").await;
    login_form(s).await
}

#[tokio::test]
async fn a_session_ends_at_its_ttl_and_the_page_goes_back_to_login() {
    let cp = ControlPlane::start(&["--session-ttl", "3s"]);
    cp.create_deployment("ttl");
    let (_admin, s) = logged_in(&cp).await;
    s.wait_for(r#"table#deployments tr[data-deployment="ttl"]"#)
        .await;
    let c = s.client.get_named_cookie("exo_session").await.unwrap();
    let pair = format!("exo_session={}", c.value());
    let works = request(
        &cp.addr,
        "GET",
        "/api/v1/deployments",
        &[("Cookie", &pair)],
        "",
    );
    assert_eq!(works.status, 200, "{}", works.body);

    // The server ends it at its expiry.
    let started = Instant::now();
    eventually(
        "the server to refuse the expired session",
        Duration::from_secs(20),
        || {
            let r = request(
                &cp.addr,
                "GET",
                "/api/v1/deployments",
                &[("Cookie", &pair)],
                "",
            );
            async move { (r.status == 401).then_some(()) }
        },
    )
    .await;
    println!(
        "session refused {:?} after the check began (ttl 3s)",
        started.elapsed()
    );

    // And the page sends you back to /login.
    s.client.refresh().await.unwrap();
    s.wait_for(r#"body[data-page="login"] form#login"#).await;
    assert_eq!(s.path().await, "/login");
    s.close().await;
}

// ------------------------------------------------------------------ overview

#[tokio::test]
async fn the_overview_shows_an_online_and_a_degraded_deployment_in_their_colours() {
    let ns = TestNamespace::new("dash-over").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[
        "--degraded-after",
        "3s",
        "--offline-after",
        "10m",
        "--heartbeat-interval",
        "500ms",
    ]);
    let steady = cp.create_deployment("steady");
    let silent = cp.create_deployment("silent");
    let c = Connector::start(
        &cp.base,
        &steady,
        &ns.name,
        &["--heartbeat-interval", "500ms"],
    );
    connector_until(&c, "steady to connect", |h| h["state"] == "connected").await;
    // Says hello, then nothing: degraded once 3 s pass without a frame.
    let _quiet = upstream_support::raw::raw_client(&cp, &silent).await;

    let (admin, s) = logged_in(&cp).await;
    let state = |dep: &str, st: &str| {
        format!(r#"table#deployments tr[data-deployment="{dep}"] span.state[data-state="{st}"]"#)
    };
    s.wait_for_in(&state("silent", "degraded"), Duration::from_secs(30))
        .await;
    s.wait_for(&state("steady", "online")).await;
    let online_bg = s
        .computed_style(&state("steady", "online"), "background-color")
        .await;
    let degraded_bg = s
        .computed_style(&state("silent", "degraded"), "background-color")
        .await;
    assert_eq!(online_bg, rgb(ONLINE), "online's colour");
    assert_eq!(degraded_bg, rgb(DEGRADED), "degraded's colour");
    // Both at once: the steady one did not go degraded meanwhile.
    assert_eq!(
        s.attr(
            r#"table#deployments tr[data-deployment="steady"] span.state"#,
            "data-state"
        )
        .await
        .as_deref(),
        Some("online")
    );
    let d = api_get(&cp, &admin, "/api/v1/deployments/silent");
    assert_eq!(d["state"], "degraded", "{d}");
    for col in [".heartbeat", ".version", ".capabilities", ".alerts"] {
        s.wait_for(&format!(
            r#"table#deployments tr[data-deployment="steady"] {col}"#
        ))
        .await;
    }
    let shot = s.screenshot("overview").await;
    println!("screenshot: {}", shot.display());
    s.close().await;
}
