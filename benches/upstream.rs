#![allow(clippy::expect_used, clippy::unwrap_used)] // benchmark code: a panic is a failed run
//! Upstream benchmarks (results in BENCHMARKS.md, section "Upstream").
//!
//! Run with the test environment up:
//!   set -a; eval "$(scripts/testenv env)"; set +a
//!   cargo bench --bench upstream -- [latency N] [rss N] [reconnect N]
//!
//! - latency: change -> Delta latency. The operator side (`exo::upstream::run`)
//!   watches a fresh namespace of the real apiserver; a minimal protocol
//!   server here timestamps each delta. Latency = delta arrival minus the
//!   moment the create request was sent (an upper bound: it includes the
//!   apiserver's own write).
//! - rss: resident memory of a real `exo control-plane serve` per connection,
//!   with N simulated operators (hello, a 10-resource snapshot, heartbeats).
//! - reconnect: N simulated operators with the operator's backoff policy
//!   (500 ms base, full jitter); the control plane is restarted and the
//!   spread of their reconnect times is reported.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use kube::api::{Api, PostParams};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use exo::controlplane::Store;
use exo::upstream::backoff::{Backoff, random_u64};
use exo::wire::{self, Frame, Hello, HostMeta, Resource, ResourceKey, ResourceKind};

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn summary(name: &str, mut v: Vec<f64>, unit: &str) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name}: n={} p50={:.1}{unit} p90={:.1}{unit} p99={:.1}{unit} max={:.1}{unit}",
        v.len(),
        pct(&v, 0.5),
        pct(&v, 0.9),
        pct(&v, 0.99),
        v.last().copied().unwrap_or(f64::NAN)
    );
}

// ------------------------------------------------------------------ latency

async fn latency(n: usize) {
    let client = kube::Client::try_default()
        .await
        .expect("KUBECONFIG of the test env");
    let ns_name = format!("exo-bench-{}", &wire::random_id()[..8]);
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(serde_json::json!({"metadata": {"name": ns_name}})).unwrap(),
    )
    .await
    .unwrap();

    // A minimal server: welcome, then timestamp every delta by name.
    let arrivals: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let arr = arrivals.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let arr = arr.clone();
            tokio::spawn(async move {
                let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                while let Some(Ok(msg)) = ws.next().await {
                    let Message::Text(t) = msg else { continue };
                    match Frame::from_json(t.as_str()) {
                        Ok(Frame::Hello(h)) => {
                            let w = Frame::Welcome(wire::Welcome {
                                protocol: 1,
                                deployment: "bench".into(),
                                connection_id: h.connection_id,
                                heartbeat_interval_ms: 15000,
                            });
                            ws.send(Message::Text(w.to_json().unwrap().into()))
                                .await
                                .unwrap();
                        }
                        Ok(Frame::Delta(d)) => {
                            arr.lock()
                                .unwrap()
                                .insert(d.resource.key.name, Instant::now());
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    let mut cfg = exo::upstream::UpstreamConfig::new(
        format!("http://{addr}"),
        exo::controlplane::token::SecretToken::new("bench"),
    );
    cfg.namespace = Some(ns_name.clone());
    let health = exo::upstream::health_handle();
    let h = health.clone();
    let c = client.clone();
    tokio::spawn(async move { exo::upstream::run(c, cfg, h, std::future::pending()).await });
    while !health.is_connected() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let fs: Api<exo::crd::AgentFS> = Api::namespaced(client.clone(), &ns_name);
    let mut lat = Vec::new();
    for i in 0..n {
        let name = format!("b{i}");
        let obj: exo::crd::AgentFS = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
            "metadata": {"name": name}, "spec": {"size": "1Gi", "maxSize": "2Gi"}
        }))
        .unwrap();
        let t0 = Instant::now();
        fs.create(&PostParams::default(), &obj).await.unwrap();
        let deadline = t0 + Duration::from_secs(10);
        loop {
            if let Some(at) = arrivals.lock().unwrap().get(&name) {
                lat.push(at.saturating_duration_since(t0).as_secs_f64() * 1000.0);
                break;
            }
            assert!(Instant::now() < deadline, "no delta for {name}");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    summary("change->delta latency (from create request)", lat, "ms");
    let _ = nss.delete(&ns_name, &Default::default()).await;
}

// ------------------------------------------------------------------ control plane process

struct Cp {
    child: Child,
    addr: String,
}

fn start_cp(db: &std::path::Path, listen: &str) -> Cp {
    let mut child = Command::new(env!("CARGO_BIN_EXE_exo"))
        .arg("control-plane")
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", listen])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .trim_start_matches("listening on http://")
        .to_owned();
    Cp { child, addr }
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn res(i: usize) -> Resource {
    Resource {
        key: ResourceKey {
            kind: ResourceKind::Agent,
            namespace: "bench".into(),
            name: format!("a{i}"),
        },
        uid: wire::random_id(),
        resource_version: "1".into(),
        phase: Some("Active".into()),
        labels: Default::default(),
        spec: serde_json::json!({"runtime": {"image": "r@sha256:0"}}),
        status: serde_json::json!({"phase": "Active"}),
    }
}

/// Connects, says hello, sends a 10-resource snapshot; returns the socket.
async fn sim_connect(
    addr: &str,
    token: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    String,
> {
    let mut req = format!("ws://{addr}/api/v1/connect")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .map_err(|e| e.to_string())?;
    let hello = Frame::Hello(Hello {
        protocol: 1,
        agent_version: "bench".into(),
        boot_id: wire::random_id(),
        connection_id: wire::random_id(),
        host: HostMeta::default(),
    });
    ws.send(Message::Text(hello.to_json().unwrap().into()))
        .await
        .map_err(|e| e.to_string())?;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(_))) => break,
            Some(Ok(_)) => {}
            other => return Err(format!("no welcome: {other:?}")),
        }
    }
    let snap = Frame::Snapshot(wire::SnapshotChunk {
        snapshot_id: wire::random_id(),
        chunk: 0,
        last: true,
        resources: (0..10).map(res).collect(),
    });
    ws.send(Message::Text(snap.to_json().unwrap().into()))
        .await
        .map_err(|e| e.to_string())?;
    Ok(ws)
}

fn tokens(db: &std::path::Path, n: usize) -> Vec<String> {
    let store = Store::open(db).unwrap();
    (0..n)
        .map(|i| {
            store
                .create_deployment(&format!("d{i}"))
                .unwrap()
                .1
                .expose()
                .to_owned()
        })
        .collect()
}

async fn rss(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cp.sqlite");
    let toks = tokens(&db, n);
    let mut cp = start_cp(&db, "127.0.0.1:0");
    // Warm up the allocator and the first connection path.
    let warm = sim_connect(&cp.addr, &toks[0]).await.unwrap();
    drop(warm);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(cp.child.id());
    let mut socks = Vec::new();
    for t in &toks {
        socks.push(sim_connect(&cp.addr, t).await.unwrap());
    }
    // Wait until the server shows every deployment online.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = exo_http_get(&cp.addr, "/api/v1/deployments");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let connected = v["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["connected"] == true && d["resources"] == 10)
            .count();
        if connected == n {
            break;
        }
        assert!(Instant::now() < deadline, "only {connected}/{n} connected");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = rss_kib(cp.child.id());
    println!(
        "control plane RSS: {n} connections (10 resources each): before {before} KiB, after {after} KiB, {:.1} KiB per connection",
        (after.saturating_sub(before)) as f64 / n as f64
    );
    drop(socks);
    let _ = cp.child.kill();
    let _ = cp.child.wait();
}

fn exo_http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    r.split_once("\r\n\r\n")
        .map(|x| x.1.to_owned())
        .unwrap_or_default()
}

async fn reconnect(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cp.sqlite");
    let toks = tokens(&db, n);
    let mut cp = start_cp(&db, "127.0.0.1:0");
    let addr = cp.addr.clone();
    let restarted_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Duration, u32)>();
    let (up_tx, mut up_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for t in toks {
        let addr = addr.clone();
        let tx = tx.clone();
        let up_tx = up_tx.clone();
        let restarted_at = restarted_at.clone();
        tokio::spawn(async move {
            let mut ws = sim_connect(&addr, &t).await.unwrap();
            let _ = up_tx.send(());
            // Wait for the server to go away.
            while let Some(Ok(_)) = ws.next().await {}
            let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
            let mut attempts = 0;
            loop {
                tokio::time::sleep(b.next_delay(random_u64())).await;
                attempts += 1;
                if sim_connect(&addr, &t).await.is_ok() {
                    let since = restarted_at
                        .lock()
                        .unwrap()
                        .map(|r| r.elapsed())
                        .unwrap_or_default();
                    let _ = tx.send((since, attempts));
                    return;
                }
            }
        });
    }
    for _ in 0..n {
        up_rx.recv().await.unwrap();
    }
    let _ = cp.child.kill();
    let _ = cp.child.wait();
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    cp = start_cp(&db, &addr);
    *restarted_at.lock().unwrap() = Some(Instant::now());
    let down = killed.elapsed();
    let mut times = Vec::new();
    let mut attempts = Vec::new();
    for _ in 0..n {
        let (d, a) = rx.recv().await.unwrap();
        times.push(d.as_secs_f64() * 1000.0);
        attempts.push(a as f64);
    }
    println!(
        "reconnect: control plane down for {:.1} s",
        down.as_secs_f64()
    );
    summary("reconnect time after restart", times, "ms");
    summary("dial attempts per client", attempts, "");
    let _ = cp.child.kill();
    let _ = cp.child.wait();
}

fn main() {
    // `cargo test --all-targets` runs this binary without `--bench`: the
    // benchmarks need minutes and the test environment, so only `cargo
    // bench` runs them.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("upstream benchmarks: run them with `cargo bench --bench upstream`");
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut it = args.iter();
    let mut ran = false;
    while let Some(what) = it.next() {
        let n: usize = it.next().and_then(|n| n.parse().ok()).unwrap_or(100);
        ran = true;
        match what.as_str() {
            "latency" => rt.block_on(latency(n)),
            "rss" => rt.block_on(rss(n)),
            "reconnect" => rt.block_on(reconnect(n)),
            other => panic!("unknown benchmark {other}"),
        }
    }
    if !ran {
        rt.block_on(latency(200));
        rt.block_on(rss(500));
        rt.block_on(reconnect(200));
    }
}
