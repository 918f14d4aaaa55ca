//! The fleet view across clusters (issue 34, part 5; BENCHMARKS.md, "Fleet
//! view across clusters"): `deployments` simulated operators, each one
//! WebSocket speaking the real protocol with `TENANTS` tenants' Rollouts,
//! spread evenly over three `serve` replicas on one PostgreSQL database.
//! Measured:
//! - `GET /api/v1/fleet/rollouts` (the whole fleet, what `exo release
//!   status --control-plane` reads) and `?tenant=` (one tenant across
//!   every cluster, what a gate on one tenant reads), `queries` each,
//!   asked of the replicas in turn over kept-alive connections with an
//!   admin token; beside them `GET /healthz` on the same connections (the
//!   HTTP round trip's floor);
//! - the gate's decision time: a pair's Rollout turns Verified (a delta
//!   from its operator) and a reader polling `?tenant=` on another replica
//!   sees it; the time from the delta's send to that answer. `trials`
//!   times, each on another (cluster, tenant) pair, after that pair was
//!   first set Progressing at a new generation.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use exo::wire::fleet::FleetView;
use exo::wire::{self, Delta, DeltaOp, Frame, Resource, ResourceKey, ResourceKind};

use crate::sim::{Cp, start_cp_with, tokens};
use crate::summary;

/// Tenants per simulated cluster.
pub const TENANTS: usize = 10;

const WAVES: [&str; 3] = ["canary", "low-risk", "fleet"];

/// A tenant's Rollout as an operator streams it: the saga's steps in the
/// status, stamped for `generation`.
pub fn rollout(tenant: usize, generation: i64, phase: &str) -> Resource {
    let t = format!("t{tenant}");
    let steps: Vec<serde_json::Value> = [
        "isolated",
        "configmaps-published",
        "repointed/broker",
        "pods-rolled/broker",
        "verified/broker",
        "repointed/router",
        "pods-rolled/router",
        "verified/router",
        "repointed/agents",
        "pods-rolled/agents",
        "verified/agents",
        "pruned",
    ]
    .iter()
    .map(|s| {
        serde_json::json!({"name": s, "state": "Done", "owner": "exo-operator-0",
            "startedAt": "2026-12-07T04:00:00Z", "finishedAt": "2026-12-07T04:00:01Z"})
    })
    .collect();
    Resource {
        key: ResourceKey {
            kind: ResourceKind::Rollout,
            namespace: t.clone(),
            name: "rollout".into(),
        },
        uid: format!("uid-{t}"),
        resource_version: format!("{generation}-{phase}"),
        generation: Some(generation),
        created: None,
        phase: Some(phase.into()),
        labels: Default::default(),
        spec: serde_json::json!({"tenant": t, "wave": WAVES[tenant % 3], "release": "2026.11.1",
            "commit": "0123456789abcdef0123456789abcdef01234567",
            "desiredHash": format!("sha256:{generation:064}")}),
        status: serde_json::json!({"phase": phase, "observedGeneration": generation,
            "desiredHash": format!("sha256:{generation:064}"), "release": "2026.11.1",
            "steps": steps}),
    }
}

/// One simulated operator: hello, a snapshot of its tenants' Rollouts,
/// a heartbeat every 5 s, and the deltas sent to it on `rx`.
async fn operator(addr: String, token: String, mut rx: mpsc::UnboundedReceiver<Frame>) {
    let mut ws = crate::sim::sim_hello(&addr, &token).await.unwrap();
    let snap = Frame::Snapshot(wire::SnapshotChunk {
        snapshot_id: wire::random_id(),
        chunk: 0,
        last: true,
        resources: (0..TENANTS).map(|t| rollout(t, 1, "Verified")).collect(),
    });
    ws.send(Message::Text(snap.to_json().unwrap().into()))
        .await
        .unwrap();
    let (mut sink, mut stream) = ws.split();
    let mut beat = tokio::time::interval(Duration::from_secs(5));
    loop {
        let f = tokio::select! {
            _ = beat.tick() => Frame::Heartbeat(wire::Heartbeat { sent_at_ms: wire::now_ms(), resources: TENANTS as u64 }),
            f = rx.recv() => match f { Some(f) => f, None => return },
            m = stream.next() => match m { Some(Ok(_)) => continue, _ => return },
        };
        if sink
            .send(Message::Text(f.to_json().unwrap().into()))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// One kept-alive HTTP/1.1 connection with an admin token.
struct Http {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    token: String,
}

impl Http {
    async fn open(addr: &str, token: &str) -> Self {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        Self {
            sender,
            token: token.to_owned(),
        }
    }

    async fn get(&mut self, path: &str) -> Bytes {
        let req = hyper::Request::get(path)
            .header("host", "bench")
            .header("authorization", format!("Bearer {}", self.token))
            .body(Full::new(Bytes::new()))
            .unwrap();
        self.sender.ready().await.unwrap();
        let res = self.sender.send_request(req).await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        res.into_body().collect().await.unwrap().to_bytes()
    }

    async fn view(&mut self, path: &str) -> FleetView {
        serde_json::from_slice(&self.get(path).await).unwrap()
    }
}

/// `queries` GETs of `path`, the replicas in turn: times in ms, and the
/// last answer's size.
async fn series(conns: &mut [Http], path: &str, queries: usize) -> (Vec<f64>, usize) {
    let mut times = Vec::with_capacity(queries);
    let mut size = 0;
    for i in 0..queries + 20 {
        let n = conns.len();
        let c = &mut conns[i % n];
        let t = Instant::now();
        size = c.get(path).await.len();
        if i >= 20 {
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    (times, size)
}

pub async fn fleet(deployments: usize, queries: usize, trials: usize) {
    let pg = crate::postgres::fresh_database("bench_fleet").await;
    let toks = tokens(&pg, deployments).await;
    let store = exo::controlplane::Store::connect(&pg).await.unwrap();
    let (_, admin) = store.create_admin_token(None).await.unwrap();
    let admin = admin.expose().to_owned();
    let mut replicas: Vec<Cp> = (0..3)
        .map(|i| start_cp_with(&pg, "127.0.0.1:0", &["--replica-id", &format!("r{i}")]))
        .collect();
    let started = Instant::now();
    let mut ops = Vec::with_capacity(deployments);
    for (i, t) in toks.iter().enumerate() {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(operator(replicas[i % 3].addr.clone(), t.clone(), rx));
        ops.push(tx);
    }
    let mut conns = Vec::new();
    for r in &replicas {
        conns.push(Http::open(&r.addr, &admin).await);
    }
    let want = deployments * TENANTS;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v = conns[0].view(wire::fleet::FLEET_ROLLOUTS_PATH).await;
        if v.rollouts.len() == want && v.clusters.iter().all(|c| c.online) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never all listed: {} of {want}",
            v.rollouts.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "fleet: {deployments} clusters x {TENANTS} tenants connected and listed after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (t, size) = series(&mut conns, wire::fleet::FLEET_ROLLOUTS_PATH, queries).await;
    summary(&format!("fleet: whole fleet ({size} bytes)"), t, "ms");
    let one = format!("{}?tenant=t3", wire::fleet::FLEET_ROLLOUTS_PATH);
    let (t, size) = series(&mut conns, &one, queries).await;
    summary(&format!("fleet: one tenant ({size} bytes)"), t, "ms");
    let (t, _) = series(&mut conns, "/healthz", queries).await;
    summary("fleet: GET /healthz (floor)", t, "ms");

    // The gate's decision time, on another pair each trial.
    let mut decide = Vec::with_capacity(trials);
    let mut polls = 0usize;
    for k in 0..trials {
        let d = (k * 7) % deployments;
        let tenant = k % TENANTS;
        let name = format!("d{d}");
        let generation = 2 + k as i64;
        let path = format!("{}?tenant=t{tenant}", wire::fleet::FLEET_ROLLOUTS_PATH);
        let reader = (d % 3 + 1) % 3; // a replica that does not hold d
        let seen = |v: &FleetView, phase: &str| {
            v.rollouts.iter().any(|r| {
                r.deployment == name
                    && r.resource.generation == Some(generation)
                    && r.resource.status["phase"] == phase
                    && r.resource.status["observedGeneration"] == generation
            })
        };
        let send = |seq: u64, phase: &str| {
            ops[d]
                .send(Frame::Delta(Delta {
                    seq,
                    op: DeltaOp::Upsert,
                    resource: rollout(tenant, generation, phase),
                }))
                .unwrap();
        };
        // Deltas of one connection carry increasing seqs.
        send(2 * k as u64 + 1, "Progressing");
        while !seen(&conns[reader].view(&path).await, "Progressing") {}
        let t = Instant::now();
        send(2 * k as u64 + 2, "Verified");
        loop {
            polls += 1;
            if seen(&conns[reader].view(&path).await, "Verified") {
                break;
            }
        }
        decide.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    summary(
        "fleet: gate decision after the last pair's delta",
        decide,
        "ms",
    );
    println!("fleet: {polls} polls in {trials} trials");
    drop(ops);
    for cp in &mut replicas {
        let _ = cp.child.kill();
        let _ = cp.child.wait();
    }
    crate::postgres::drop_database(&pg).await;
}
