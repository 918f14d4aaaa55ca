#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Incidents from the outbox to the support lane and back, end to end: a
//! managed `exo operator run` on the real apiserver, ten agents posting
//! with their own tokens, the control plane on SQLite (or PostgreSQL with
//! `EXO_TEST_CP_BACKEND=postgres`).
//!
//! While 1000 incidents come in, the operator is killed -9 three times and
//! the control plane restarted twice; the tenant is put in a lane by hand
//! half-way, and support acknowledges and resolves incidents while the
//! operators come and go. In the end every incident is in the lane exactly
//! once, every one is acknowledged (or resolved), the cluster's copies and
//! the tenant's view show it, and the canary key planted in the detail is
//! stored nowhere. Then the lane-scoped tokens: one lane's token reaches
//! its lane and nothing else, on the API, the dashboard and `exo support`.

mod support;
mod upstream_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use exo::crd::{Agent, AgentPhase, Incident, IncidentState};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::eventually;
use support::operator::{
    OperatorProcess, agent, agent_token, create, restricted_namespace, wait_for,
};
use upstream_support::{ControlPlane, exo, http};

const CANARY_KEY: &str = "sk-ant-api03-CANARYcanaryCANARYcanary0123456789";
const AGENTS: usize = 10;
const TOTAL: usize = 1000;
const LANE: &str = "desk";

/// Posts incident `n` from agent `a` to whichever operator is current,
/// until it is stored (the same key again is the same incident). Returns
/// its id.
fn post(addr: &Mutex<String>, ns: &str, a: usize, token: &str, n: usize) -> String {
    let body = serde_json::to_vec(&json!({
        "severity": "error",
        "summary": format!("Report {n} could not be sent."),
        "detail": format!("attempt {n} failed with key {CANARY_KEY}"),
        "idempotencyKey": format!("a{a}-{n}"),
    }))
    .unwrap();
    let who = format!("{ns}/a{a}");
    let auth = format!("Bearer {token}");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let target = addr.lock().unwrap().clone();
        if let Some((status, text)) = try_post(&target, &auth, &who, &body)
            && (status == 202 || status == 200)
        {
            let v: Value = serde_json::from_str(&text).unwrap();
            return v["id"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "incident {n} of a{a} never stored"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One POST; `None` when the operator is not there (killed, starting).
fn try_post(addr: &str, auth: &str, who: &str, body: &[u8]) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let head = format!(
        "POST /v1/incidents HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Authorization: {auth}\r\nX-Exo-Agent: {who}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_owned()))
}

/// The lane's incidents (all of them: up to 5000).
fn lane_rows(cp: &ControlPlane, state: Option<&str>) -> Vec<Value> {
    let q = state.map(|s| format!("&state={s}")).unwrap_or_default();
    let (status, v) = cp.get(&format!("/api/v1/lanes/{LANE}/incidents?limit=5000{q}"));
    assert_eq!(status, 200, "{v}");
    v["incidents"].as_array().cloned().unwrap_or_default()
}

/// Acknowledges (or resolves) every incident in `ids` through the API.
fn act_all(cp: &ControlPlane, ids: &[String], verb: &str) {
    for id in ids {
        let (status, v) = cp.post(
            &format!("/api/v1/lanes/{LANE}/incidents/{id}/{verb}"),
            &json!({}),
        );
        assert!(status == 200, "{verb} {id}: {status} {v}");
    }
}

/// Waits until `posted` reaches `n`.
async fn until_posted(posted: &AtomicUsize, n: usize) {
    eventually(
        &format!("{n} incidents posted"),
        Duration::from_secs(120),
        || async { (posted.load(Ordering::Relaxed) >= n).then_some(()) },
    )
    .await;
}

/// One HTTP request with a bearer token or a cookie: (status, head, body).
fn as_token(
    addr: &str,
    method: &str,
    path: &str,
    auth: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in auth {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (h, b) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let status = h.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, h.to_owned(), b.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_incidents_reach_the_lane_once_and_supports_answers_come_back() {
    let mut cp = ControlPlane::start(&[]);
    let dep = "incidents";
    let token = cp.create_deployment(dep);
    let ns = restricted_namespace("upinc").await;
    let base = cp.base.clone();
    let start = |id: &str| {
        OperatorProcess::start_managed(&ns.name, id, &["--incident-rate", "6000"], &base, &token)
    };
    let mut op = start("a");
    op.wait_leader().await;
    let agents = ns.api::<Agent>();
    for a in 0..AGENTS {
        create(&agents, &agent(&format!("a{a}"))).await;
    }
    let mut tokens = Vec::new();
    for a in 0..AGENTS {
        let name = format!("a{a}");
        wait_for(&agents, &name, "Active", |x| {
            x.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
        })
        .await;
        tokens.push(agent_token(&ns.name, &name).await);
    }

    // Ten agents post 100 incidents each, to whichever operator is up.
    let addr = std::sync::Arc::new(Mutex::new(op.addr.clone()));
    let posted = std::sync::Arc::new(AtomicUsize::new(0));
    let posters: Vec<_> = (0..AGENTS)
        .map(|a| {
            let (addr, posted, token, ns) = (
                addr.clone(),
                posted.clone(),
                tokens[a].clone(),
                ns.name.clone(),
            );
            std::thread::spawn(move || {
                (0..TOTAL / AGENTS)
                    .map(|j| {
                        let id = post(&addr, &ns, a, &token, a + AGENTS * j);
                        posted.fetch_add(1, Ordering::Relaxed);
                        id
                    })
                    .collect::<Vec<String>>()
            })
        })
        .collect();
    let mut logs = Vec::new();
    let mut next_operator = |op: &mut OperatorProcess, id: &str| {
        op.kill(); // SIGKILL
        logs.push(op.log());
        let fresh = start(id);
        *addr.lock().unwrap() = fresh.addr.clone();
        std::mem::replace(op, fresh)
    };

    // The tenant has no lane yet: its first incidents wait unrouted, then
    // a lane by hand takes them in (and their operator is told).
    until_posted(&posted, 150).await;
    let (status, v) = cp.get("/api/v1/lanes");
    assert_eq!((status, v["count"].as_u64()), (200, Some(0)), "{v}");
    let (status, v) = http(
        &cp.addr,
        "PUT",
        &format!("/api/v1/lanes/{LANE}/tenants/{dep}/{}", ns.name),
        Some(&json!({ "contacts": ["oncall@desk.test"] })),
    );
    assert_eq!(status, 200, "{v}");
    println!("lane created; {} waiting incidents moved in", v["adopted"]);

    // Kill 1.
    until_posted(&posted, 250).await;
    let _ = next_operator(&mut op, "b");
    op.wait_ready().await;
    // Restart 1.
    until_posted(&posted, 400).await;
    cp.restart();
    // Support acknowledges what is in the lane so far.
    until_posted(&posted, 500).await;
    let first: Vec<String> = lane_rows(&cp, Some("routed"))
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!first.is_empty());
    act_all(&cp, &first, "ack");
    // Kill 2.
    let _ = next_operator(&mut op, "c");
    op.wait_ready().await;
    // Restart 2, and some resolved while it is away from its operator.
    until_posted(&posted, 700).await;
    cp.restart();
    let resolved: Vec<String> = first.iter().take(100).cloned().collect();
    act_all(&cp, &resolved, "resolve");
    // Kill 3.
    until_posted(&posted, 750).await;
    let _ = next_operator(&mut op, "d");
    op.wait_ready().await;
    let mut posted_ids: BTreeMap<String, usize> = BTreeMap::new();
    for (a, p) in posters.into_iter().enumerate() {
        for id in p.join().unwrap() {
            *posted_ids.entry(id).or_default() += 1;
        }
        let _ = a;
    }
    assert_eq!(posted_ids.len(), TOTAL, "distinct keys, distinct ids");
    // A retry of the first post is the same incident.
    let again = post(&addr, &ns.name, 0, &tokens[0], 0);
    assert!(posted_ids.contains_key(&again));

    // Every incident in the lane exactly once ...
    let rows = eventually(
        "every incident in the lane",
        Duration::from_secs(120),
        || async {
            let rows = lane_rows(&cp, None);
            (rows.len() >= TOTAL).then_some(rows)
        },
    )
    .await;
    let ids: BTreeSet<String> = rows
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(rows.len(), TOTAL, "stored once each");
    assert_eq!(
        ids,
        posted_ids.keys().cloned().collect::<BTreeSet<_>>(),
        "the lane holds what was posted, by id"
    );
    // ... and every one acknowledged.
    let rest: Vec<String> = lane_rows(&cp, Some("routed"))
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    act_all(&cp, &rest, "ack");
    let (_, l) = cp.get(&format!("/api/v1/lanes/{LANE}"));
    assert_eq!(l["routed"], 0, "{l}");
    assert_eq!(l["resolved"].as_u64(), Some(resolved.len() as u64), "{l}");
    assert_eq!(
        l["acknowledged"].as_u64(),
        Some((TOTAL - resolved.len()) as u64),
        "{l}"
    );

    // The way back down: the cluster's copies follow, across the kills.
    let client = support::client().await;
    let incidents: Api<Incident> = Api::namespaced(client, &ns.name);
    let resolved_set: BTreeSet<&String> = resolved.iter().collect();
    // Waits for the cluster to show support's answers; on a timeout, says
    // where the incidents are (and keeps the logs when DEBUG_INC is set).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let list = incidents.list(&ListParams::default()).await.unwrap().items;
        let mut off = BTreeMap::new();
        for i in &list {
            let name = i.metadata.name.clone().unwrap_or_default();
            let want = if resolved_set.contains(&name) {
                IncidentState::Resolved
            } else {
                IncidentState::Acknowledged
            };
            let lane = i.status.as_ref().and_then(|s| s.lane.clone());
            if i.state() != want || lane.as_deref() != Some(LANE) {
                *off.entry(format!("{:?} in {lane:?}, want {want:?}", i.state()))
                    .or_insert(0) += 1;
            }
        }
        if list.len() == TOTAL && off.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            if std::env::var("DEBUG_INC").is_ok() {
                std::fs::write("/tmp/cp.log", cp.log()).unwrap();
                std::fs::write("/tmp/op.log", op.log()).unwrap();
            }
            let (_, l) = cp.get(&format!("/api/v1/lanes/{LANE}"));
            panic!(
                "the cluster's copies did not follow in 120 s: {} incidents, off: {off:?}; lane {l}",
                list.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eventually(
        "every update confirmed by the operator",
        Duration::from_secs(60),
        || async {
            lane_rows(&cp, None)
                .iter()
                .all(|r| r["delivered"] == true)
                .then_some(())
        },
    )
    .await;
    // The tenant's view follows: resolved, with nothing of the detail.
    let one = resolved[0].clone();
    let owner = rows
        .iter()
        .find(|r| r["id"] == one.as_str())
        .map(|r| r["agent"].as_str().unwrap().to_owned())
        .unwrap();
    let k: usize = owner.trim_start_matches('a').parse().unwrap();
    let who = format!("{}/{owner}", ns.name);
    let bearer = format!("Bearer {}", tokens[k]);
    let (status, _, view) = as_token(
        &op.addr,
        "GET",
        &format!("/v1/incidents/{one}"),
        &[("Authorization", &bearer), ("X-Exo-Agent", &who)],
        "",
    );
    assert_eq!(status, 200, "{view}");
    let v: Value = serde_json::from_str(&view).unwrap();
    assert_eq!(v["state"], "resolved", "{v}");
    assert!(
        !view.contains("attempt") && !view.contains(CANARY_KEY),
        "{view}"
    );

    // The support view: the detail, the key masked.
    for r in &rows {
        assert!(
            r["detail"]
                .as_str()
                .unwrap()
                .contains("[masked: Anthropic key]"),
            "{r}"
        );
    }
    logs.push(op.log());
    assert!(!serde_json::to_string(&rows).unwrap().contains(CANARY_KEY));
    assert!(!cp.log().contains(CANARY_KEY), "in the control plane's log");
    for (i, log) in logs.iter().enumerate() {
        assert!(!log.contains(CANARY_KEY), "in operator {i}'s log");
    }

    lane_scoped_tokens(&cp, dep, &ns.name, &one);
}

/// One lane's token reaches that lane and nothing else: the API, the
/// dashboard, and `exo support`.
fn lane_scoped_tokens(cp: &ControlPlane, dep: &str, tenant: &str, resolved: &str) {
    let token = |lane: Option<&str>| {
        let mut args = vec!["admin-token", "create"];
        if let Some(l) = lane {
            args.extend(["--lane", l]);
        }
        let out = cp.admin(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let full = token(None);
    let desk = token(Some(LANE));
    let other = token(Some("other"));
    let bearer = |t: &str| format!("Bearer {t}");
    let get = |t: &str, path: &str| {
        let b = bearer(t);
        as_token(&cp.addr, "GET", path, &[("Authorization", &b)], "")
    };

    // Its own lane: yes.
    let (s, _, body) = get(&desk, &format!("/api/v1/lanes/{LANE}/incidents"));
    assert_eq!(s, 200, "{body}");
    let (s, _, body) = get(&desk, "/api/v1/lanes");
    assert_eq!(s, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["count"], 1, "{v}");
    assert_eq!(v["lanes"][0]["lane"], LANE, "{v}");
    // Anything else: no, and nothing of the lane in the answer.
    for path in [
        format!("/api/v1/lanes/{LANE}/incidents"),
        format!("/api/v1/lanes/{LANE}/incidents/{resolved}"),
        format!("/api/v1/lanes/{LANE}/events"),
        format!("/api/v1/deployments/{dep}/incidents"),
        "/api/v1/deployments".to_owned(),
        "/api/v1/events".to_owned(),
        format!("/lanes/{LANE}"),
        format!("/deployments/{dep}"),
        "/status".to_owned(),
    ] {
        let (s, _, body) = get(&other, &path);
        assert_eq!(s, 403, "{path}: {body}");
        assert!(
            !body.contains("Report ") && !body.contains("masked"),
            "{path} leaked: {body}"
        );
    }
    let b = bearer(&desk);
    let (s, _, body) = as_token(
        &cp.addr,
        "PUT",
        &format!("/api/v1/lanes/{LANE}/tenants/{dep}/{tenant}-2"),
        &[("Authorization", &b), ("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!(s, 403, "a lane's token widened its lane: {body}");

    // The dashboard: a session opened with the other lane's token.
    let (s, head, _) = as_token(
        &cp.addr,
        "POST",
        "/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &format!("token={other}&next=/"),
    );
    assert_eq!(s, 303, "{head}");
    let cookie = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("set-cookie")
                .then(|| v.trim().split(';').next().unwrap().to_owned())
        })
        .unwrap();
    let page = |path: &str| as_token(&cp.addr, "GET", path, &[("Cookie", &cookie)], "");
    let (s, head, _) = page("/");
    assert_eq!(
        s, 303,
        "the root sends a lane's session to its lane: {head}"
    );
    assert!(head.contains("/lanes/other"), "{head}");
    assert_eq!(page("/lanes/other").0, 200);
    for path in [
        format!("/lanes/{LANE}"),
        format!("/api/v1/lanes/{LANE}/incidents"),
        format!("/api/v1/lanes/{LANE}/events"),
        format!("/deployments/{dep}"),
    ] {
        let (s, _, body) = page(&path);
        assert_eq!(s, 403, "{path} with the other lane's session: {body}");
    }

    // `exo support` with each token.
    let support = |t: &str, args: &[&str]| {
        exo()
            .args(["support", "--control-plane", &cp.base])
            .args(args)
            .env("EXO_CP_ADMIN_TOKEN", t)
            .output()
            .unwrap()
    };
    let out = support(&desk, &["lane", "list"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(LANE) && text.contains(tenant), "{text}");
    let out = support(&desk, &["show", resolved]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("resolved") && text.contains("[masked: Anthropic key]"),
        "{text}"
    );
    let out = support(&desk, &["ack", resolved]);
    assert_eq!(out.status.code(), Some(1), "ack of a resolved one: {out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("resolved already"),
        "{out:?}"
    );
    let out = support(&desk, &["resolve", resolved]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("already"),
        "{out:?}"
    );
    let out = support(&other, &["show", resolved, "--lane", LANE]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("403") && err.contains("other"), "{err}");
    assert!(!err.contains(&other), "the token was printed");
    let out = support(
        &full,
        &["list", "--lane", LANE, "--limit", "5", "-o", "json"],
    );
    assert!(out.status.success(), "{out:?}");
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.len(), 5);
}
