#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Three real `exo control-plane serve` replicas on one real PostgreSQL
//! database, with real operators and raw protocol clients: eviction across
//! replicas (also 50 racing reconnects), commands and shells hopping to
//! the replica that holds the operator, a replica killed with SIGKILL, and
//! one view of a silent deployment on every replica.

mod support;
mod upstream_support;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use exo::wire::{self, Frame, Heartbeat, close};
use futures::StreamExt;
use serde_json::{Value, json};
use support::balancer::Balancer;
use support::eventually;
use tokio_tungstenite::tungstenite::Message;
use upstream_support::raw::{self, Socket};
use upstream_support::{Connector, ControlPlane, connector_until, fresh_postgres};

/// Replicas with short leases, so that death is seen in seconds.
const LEASE: &str = "3s";

struct Set {
    db: String,
    replicas: Vec<ControlPlane>,
}

impl Set {
    fn start(n: usize, extra: &[&str]) -> Self {
        let db = fresh_postgres("replicas");
        let replicas = (0..n)
            .map(|i| {
                let id = format!("r{i}");
                let mut args = vec!["--replica-id", &id, "--replica-lease", LEASE];
                args.extend_from_slice(extra);
                ControlPlane::start_on(tempfile::tempdir().unwrap(), db.clone(), &args)
            })
            .collect();
        Self { db, replicas }
    }

    fn r(&self, i: usize) -> &ControlPlane {
        &self.replicas[i]
    }

    /// Every replica's view of a deployment (from the list, so nothing hops).
    fn listed(&self, name: &str) -> Vec<Value> {
        self.replicas
            .iter()
            .filter(|r| r.is_running())
            .map(|r| {
                let (s, v) = r.get("/api/v1/deployments");
                assert_eq!(s, 200, "{v}");
                v["deployments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|d| d["name"] == name)
                    .cloned()
                    .unwrap_or_else(|| panic!("{name} not listed: {v}"))
            })
            .collect()
    }
}

async fn heartbeat(ws: &mut Socket) {
    raw::send(
        ws,
        &Frame::Heartbeat(Heartbeat {
            sent_at_ms: wire::now_ms(),
            resources: 0,
        }),
    )
    .await;
}

/// Reads until the server closes; `None` if it stays open for `within`.
async fn closed_within(ws: &mut Socket, within: Duration) -> Option<(u16, String)> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => return None,
            Ok(Some(Ok(Message::Close(Some(c))))) => {
                return Some((c.code.into(), c.reason.as_str().to_owned()));
            }
            Ok(Some(Ok(_))) => continue,
            Ok(other) => return Some((0, format!("{other:?}"))),
        }
    }
}

#[tokio::test]
async fn a_newer_connection_on_another_replica_evicts_the_older_one() {
    let set = Set::start(3, &[]);
    let token = set.r(0).create_deployment("evict");
    let mut old = raw::raw_client(set.r(0), &token).await;
    heartbeat(&mut old).await;
    let mut new = raw::raw_client(set.r(1), &token).await;
    let (code, reason) = closed_within(&mut old, Duration::from_secs(10))
        .await
        .expect("the older connection is closed");
    assert_eq!(code, close::EVICTED);
    assert_eq!(reason, close::EVICTED_REASON);
    // The newer one stays, and a late cleanup on r0 did not release it.
    heartbeat(&mut new).await;
    assert!(
        closed_within(&mut new, Duration::from_secs(2))
            .await
            .is_none()
    );
    for v in set.listed("evict") {
        assert_eq!(v["connected"], true, "{v}");
        assert_eq!(v["state"], "online", "{v}");
    }
    // The view on the holder's replica, asked anywhere, is the same one.
    let via: Vec<Value> = (0..3).map(|i| set.r(i).deployment("evict")).collect();
    for v in &via {
        assert_eq!(v["session"], via[1]["session"], "{v}");
        assert_eq!(v["evictions"], 1, "{v}");
    }
    // r1 audited the eviction, with the session it displaced.
    let (_, audit) = set.r(2).get("/api/v1/deployments/evict/audit");
    let evicted: Vec<&Value> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "connection.evicted")
        .collect();
    assert_eq!(evicted.len(), 1, "{audit}");
}

#[tokio::test]
async fn fifty_racing_reconnects_leave_exactly_one_survivor_and_no_flap() {
    let set = Arc::new(Set::start(3, &[]));
    let token = set.r(0).create_deployment("race");
    let mut first = raw::raw_client(set.r(0), &token).await;
    heartbeat(&mut first).await;
    // Watch the deployment on every replica all through the race.
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (set, done) = (set.clone(), done.clone());
        tokio::task::spawn_blocking(move || {
            let mut seen = Vec::new();
            while !done.load(Ordering::Relaxed) {
                for v in set.listed("race") {
                    seen.push((v["connected"].clone(), v["state"].clone()));
                }
            }
            seen
        })
    };
    let racers = futures::future::join_all((0..50).map(|i| {
        let set = set.clone();
        let token = token.clone();
        async move { raw::raw_client(set.r(i % 3), &token).await }
    }))
    .await;
    let mut sockets = vec![first];
    sockets.extend(racers);
    // Every socket but one is closed for eviction.
    let outcomes = futures::future::join_all(
        sockets
            .iter_mut()
            .map(|ws| closed_within(ws, Duration::from_secs(8))),
    )
    .await;
    done.store(true, Ordering::Relaxed);
    let seen = watcher.await.unwrap();
    let survivors: Vec<usize> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| o.is_none())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(survivors.len(), 1, "survivors {survivors:?}: {outcomes:?}");
    for o in outcomes.iter().flatten() {
        assert_eq!(o.0, close::EVICTED, "{o:?}");
        assert_eq!(o.1, close::EVICTED_REASON, "{o:?}");
    }
    // The survivor holds it on every replica.
    let mut survivor = sockets.swap_remove(survivors[0]);
    heartbeat(&mut survivor).await;
    assert!(
        closed_within(&mut survivor, Duration::from_secs(2))
            .await
            .is_none()
    );
    let holder = set.r(0).deployment("race");
    for v in set.listed("race") {
        assert_eq!(v["connected"], true, "{v}");
        assert_eq!(v["session"], holder["session"], "{v}");
    }
    // No replica ever showed it disconnected, or anything but online.
    assert!(!seen.is_empty());
    let states: HashSet<String> = seen.iter().map(|(c, s)| format!("{c}/{s}")).collect();
    assert_eq!(
        states,
        HashSet::from(["true/\"online\"".to_owned()]),
        "{} observations",
        seen.len()
    );
    // And no disconnect alert was raised.
    let (_, active) = set.r(2).get("/api/v1/deployments/race/alerts/active");
    assert_eq!(active["count"], 0, "{active}");
    drop(set);
}

#[tokio::test]
async fn a_command_and_a_shell_entered_on_one_replica_reach_an_operator_on_another() {
    let ns = support::TestNamespace::new("rep-hop").await;
    upstream_support::install_crds(&ns.client).await;
    upstream_support::shell::agent_with_pod(&ns).await;
    let set = Set::start(3, &[]);
    let token = set.r(0).create_deployment("shell");
    // The operator is on r2; everything below is asked of r0.
    let c = Connector::start(&set.r(2).base, &token, &ns.name, &[]);
    connector_until(&c, "connected", |h| h["state"] == "connected").await;
    eventually(
        "r0 to see the operator on r2",
        Duration::from_secs(10),
        || {
            let v = set.listed("shell");
            async move { (v[0]["connected"] == true && v[0]["replica"] == "r2").then_some(()) }
        },
    )
    .await;

    let (status, res) = set.r(0).post(
        "/api/v1/deployments/shell/commands",
        &json!({ "command": { "name": "agentfs_list", "namespace": ns.name } }),
    );
    assert_eq!(status, 200, "{res}");
    assert_eq!(res["ok"], true, "{res}");
    let (status, res) = set.r(0).get("/api/v1/deployments/shell/resources");
    assert_eq!(status, 200, "{res}");
    assert!(
        res["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "Agent" && r["name"] == "worker"),
        "{res}"
    );

    let (out, stdout, stderr) = upstream_support::shell::shell_script(set.r(0), &ns.name);
    assert!(
        stdout.contains("exo-42"),
        "stdout: {stdout:?} stderr: {stderr:?}"
    );
    assert!(out.status.success(), "stderr: {stderr}");

    // Audited once, by the replica that carried them out, readable anywhere.
    let (_, audit) = set.r(1).get("/api/v1/deployments/shell/audit");
    let actions: Vec<&str> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    for want in ["command.issued", "attach.opened", "attach.closed"] {
        assert_eq!(
            actions.iter().filter(|a| **a == want).count(),
            1,
            "{want}: {actions:?}"
        );
    }
}

#[tokio::test]
async fn a_killed_replica_is_released_within_its_lease_and_its_operators_move() {
    let ns = support::TestNamespace::new("rep-kill").await;
    upstream_support::install_crds(&ns.client).await;
    let mut set = Set::start(3, &[]);
    let backends = set.replicas.iter().map(|r| r.addr.clone()).collect();
    let lb = Balancer::start(backends);
    // Three operators through the balancer: one lands on each replica.
    let mut connectors = Vec::new();
    for i in 0..3 {
        let name = format!("op{i}");
        let token = set.r(0).create_deployment(&name);
        let c = Connector::start(
            &lb.base,
            &token,
            &ns.name,
            &["--backoff-base", "200ms", "--backoff-max", "1s"],
        );
        connector_until(&c, "connected", |h| h["state"] == "connected").await;
        connectors.push((name, c));
    }
    // A raw client straight to r1 that will not come back.
    let stay = set.r(0).create_deployment("stranded");
    let _stranded = raw::raw_client(set.r(1), &stay).await;
    let on_r1: Vec<String> = eventually("the holders", Duration::from_secs(10), || {
        let rows: Vec<(String, Value)> = connectors
            .iter()
            .map(|(n, _)| (n.clone(), set.listed(n)[0]["replica"].clone()))
            .collect();
        async move {
            rows.iter().all(|(_, r)| r.is_string()).then(|| {
                rows.iter()
                    .filter(|(_, r)| *r == "r1")
                    .map(|(n, _)| n.clone())
                    .collect()
            })
        }
    })
    .await;
    assert!(!on_r1.is_empty(), "one operator per replica in turn");
    // A command for each operator on r1, asked of r0: it hops to r1, which
    // carries it out through the balancer's socket and audits it.
    for name in &on_r1 {
        let (status, res) = set.r(0).post(
            &format!("/api/v1/deployments/{name}/commands"),
            &json!({ "command": { "name": "agentfs_list", "namespace": ns.name } }),
        );
        assert_eq!(status, 200, "{name}: {res}");
        assert_eq!(res["ok"], true, "{name}: {res}");
    }
    let killed = Instant::now();
    set.replicas[1].kill();
    // Its operators reconnect elsewhere, within their backoff.
    for name in &on_r1 {
        eventually(
            &format!("{name} on another replica"),
            Duration::from_secs(20),
            || {
                let v = set.listed(name);
                async move {
                    v.iter()
                        .all(|v| v["connected"] == true && v["replica"] != "r1")
                        .then_some(())
                }
            },
        )
        .await;
    }
    println!("operators moved {:?} after the kill", killed.elapsed());
    // The stranded registration is released within the lease (3 s) and a
    // reap (1 s); allow the statement's own time.
    eventually("the stranded row released", Duration::from_secs(8), || {
        let v = set.listed("stranded");
        async move { v.iter().all(|v| v["connected"] == false).then_some(()) }
    })
    .await;
    println!(
        "dead replica released {:?} after the kill",
        killed.elapsed()
    );
    // No audit record written before the kill is lost.
    let (_, audit) = set
        .r(0)
        .get(&format!("/api/v1/deployments/{}/audit", on_r1[0]));
    let actions: Vec<&str> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    // r1's records from before its death are all there.
    assert!(actions.contains(&"connection.opened"), "{actions:?}");
    assert_eq!(
        actions.iter().filter(|a| **a == "command.issued").count(),
        1,
        "the command r1 carried out: {actions:?}"
    );
    assert!(
        actions
            .iter()
            .filter(|a| **a == "connection.opened")
            .count()
            >= 2,
        "the reconnect is recorded too: {actions:?}"
    );
    let _ = set.db;
}

#[tokio::test]
async fn a_silent_deployment_looks_the_same_on_every_replica() {
    let set = Set::start(3, &["--degraded-after", "2s", "--offline-after", "4s"]);
    let token = set.r(0).create_deployment("quiet");
    let _ws = raw::raw_client(set.r(0), &token).await;
    let fields = |v: &Value| {
        json!({
            "state": v["state"], "connected": v["connected"], "session": v["session"],
            "connection_id": v["connection_id"], "evictions": v["evictions"],
            "disconnects": v["disconnects"], "replica": v["replica"],
        })
    };
    for want in ["degraded", "offline"] {
        let views = eventually(
            &format!("{want} on every replica"),
            Duration::from_secs(15),
            || {
                let v = set.listed("quiet");
                async move { v.iter().all(|v| v["state"] == want).then_some(v) }
            },
        )
        .await;
        let first = fields(&views[0]);
        for v in &views {
            assert_eq!(fields(v), first, "{want}");
        }
        assert_eq!(first["connected"], true, "silent, not gone");
        // The view asked of each replica is the holder's.
        let asked: Vec<Value> = (0..3)
            .map(|i| fields(&set.r(i).deployment("quiet")))
            .collect();
        assert!(asked.iter().all(|a| a["state"] == want), "{asked:?}");
    }
}

#[tokio::test]
async fn an_operator_whose_replica_died_is_alerted_offline_once_by_a_survivor() {
    let mut set = Set::start(3, &["--degraded-after", "2s", "--offline-after", "4s"]);
    let token = set.r(1).create_deployment("orphan");
    // Held by r0, the replica that watches orphans while it lives: its
    // death hands that job to r1.
    let ws = raw::raw_client(set.r(0), &token).await;
    eventually("r0 holding", Duration::from_secs(10), || {
        let v = set.listed("orphan");
        async move { v.iter().all(|v| v["replica"] == "r0").then_some(()) }
    })
    .await;
    set.replicas[0].kill();
    drop(ws);
    // Lease (3 s) and a reap (1 s), then offline (4 s) and a check (1 s).
    let active = eventually(
        "the critical disconnect alert",
        Duration::from_secs(20),
        || {
            let (_, a) = set.r(2).get("/api/v1/deployments/orphan/alerts/active");
            async move {
                a["active"]
                    .as_array()
                    .is_some_and(|a| {
                        a.iter().any(|x| {
                            x["key"] == "plane/disconnected" && x["severity"] == "critical"
                        })
                    })
                    .then_some(a)
            }
        },
    )
    .await;
    assert_eq!(active["count"], 1, "{active}");
    // Raised once, by one replica, though two could see it; give the
    // other a few checks to raise it again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, hist) = set.r(1).get("/api/v1/deployments/orphan/alerts");
    let raised: Vec<&Value> = hist["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["key"] == "plane/disconnected")
        .collect();
    assert_eq!(raised.len(), 1, "{hist}");
    // Back on another replica: cleared.
    let _back = raw::raw_client(set.r(2), &token).await;
    eventually("the alert cleared", Duration::from_secs(10), || {
        let (_, a) = set.r(1).get("/api/v1/deployments/orphan/alerts/active");
        async move { (a["count"] == 0).then_some(()) }
    })
    .await;
}
