#![allow(clippy::expect_used, clippy::unwrap_used)] // benchmark code: a panic is a failed run
//! Upstream benchmarks (results in BENCHMARKS.md, section "Upstream").
//!
//! Run with the test environment up:
//!   set -a; eval "$(scripts/testenv env)"; set +a
//!   cargo bench --bench upstream -- [objects K] [latency N] [rss N] \
//!       [hb-ms MS] [hold S] [reconnect N] [reconnect-nospread N]
//!
//! - objects K: how many Agents and Tools (half each) the latency run puts
//!   into the watched namespace before it measures (default 0).
//! - latency: change -> Delta latency. The operator side (`exo::upstream::run`)
//!   watches a fresh namespace of the real apiserver holding K objects; a
//!   minimal protocol server here timestamps each delta, and a plain kube
//!   watcher on the same namespace timestamps the same change (what a user
//!   gets from a bare watch, the floor). N changes, one at a time: with K = 0
//!   AgentFS creations, otherwise label patches of existing Agents.
//!   Latency = arrival minus the moment the request was sent.
//! - rss: resident memory of a real `exo control-plane serve` per connection,
//!   with N simulated operators (hello, a 10-resource snapshot, a heartbeat
//!   every `hb-ms`, default 5000, for `hold` seconds, default 60). The
//!   simulated operators run in child processes of at most 5000 connections
//!   each (the fd limit); heartbeats sent are compared with the server's
//!   `heartbeats_received`.
//! - reconnect: N simulated operators with the operator's policy (500 ms base,
//!   60 s cap, full jitter, first redial after a loss spread over 15 s);
//!   the control plane is killed, left down 2 s and restarted, and the
//!   spread of their reconnect times is reported per 1 s bucket.
//!   `reconnect-nospread` is the same without the loss spread (plain
//!   backoff from 500 ms), for comparison.

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

fn agent_obj(name: &str) -> exo::crd::Agent {
    let image = format!("registry.test/agent@sha256:{}", "a".repeat(64));
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "Agent",
        "metadata": {"name": name},
        "spec": {"runtime": {"image": image}, "agentlet": {"image": image}}
    }))
    .unwrap()
}

fn tool_obj(name: &str) -> exo::crd::Tool {
    let image = format!("registry.test/tool@sha256:{}", "b".repeat(64));
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "Tool",
        "metadata": {"name": name},
        "spec": {"container": {"image": image}, "enabled": false}
    }))
    .unwrap()
}

/// Creates `k` objects (half Agents `a{i}`, half Tools `t{i}`), 32 at a time.
async fn preload(client: &kube::Client, ns: &str, k: usize) {
    let agents: Api<exo::crd::Agent> = Api::namespaced(client.clone(), ns);
    let tools: Api<exo::crd::Tool> = Api::namespaced(client.clone(), ns);
    let t0 = Instant::now();
    futures::stream::iter(0..k)
        .map(|i| {
            let (agents, tools) = (agents.clone(), tools.clone());
            async move {
                if i % 2 == 0 {
                    agents
                        .create(&PostParams::default(), &agent_obj(&format!("a{}", i / 2)))
                        .await
                        .map(|_| ())
                } else {
                    tools
                        .create(&PostParams::default(), &tool_obj(&format!("t{}", i / 2)))
                        .await
                        .map(|_| ())
                }
            }
        })
        .buffer_unordered(32)
        .for_each(|r| async move { r.unwrap() })
        .await;
    println!(
        "preloaded {k} objects in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

const CHANGED: &str = "exo-bench/changed";

async fn latency(n: usize, objects: usize) {
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
    if objects > 0 {
        preload(&client, &ns_name, objects).await;
    }

    // A minimal server: welcome, count snapshot resources, then timestamp
    // every delta by name.
    let arrivals: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let snapshot_done: Arc<Mutex<Option<(usize, Instant)>>> = Arc::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let arr = arrivals.clone();
    let snap = snapshot_done.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let arr = arr.clone();
            let snap = snap.clone();
            tokio::spawn(async move {
                let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                let mut in_snapshot = 0usize;
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
                        Ok(Frame::Snapshot(c)) => {
                            in_snapshot += c.resources.len();
                            if c.last {
                                *snap.lock().unwrap() = Some((in_snapshot, Instant::now()));
                                in_snapshot = 0;
                            }
                        }
                        Ok(Frame::Delta(d))
                            if objects == 0 || d.resource.labels.contains_key(CHANGED) =>
                        {
                            arr.lock()
                                .unwrap()
                                .entry(d.resource.key.name)
                                .or_insert_with(Instant::now);
                        }
                        _ => {}
                    }
                }
            });
        }
    });

    // The floor: a plain watcher on the same namespace.
    let watched: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let w = watched.clone();
    let listed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let l = listed.clone();
    let c = client.clone();
    let ns2 = ns_name.clone();
    tokio::spawn(async move {
        use kube::runtime::watcher;
        let note = |name: Option<String>, labelled: bool| {
            if let Some(name) = name
                && (objects == 0 || labelled)
            {
                w.lock().unwrap().entry(name).or_insert_with(Instant::now);
            }
        };
        if objects == 0 {
            let api: Api<exo::crd::AgentFS> = Api::namespaced(c, &ns2);
            let mut s = watcher(api, watcher::Config::default()).boxed();
            while let Some(Ok(ev)) = s.next().await {
                match ev {
                    watcher::Event::InitDone => l.store(true, std::sync::atomic::Ordering::SeqCst),
                    watcher::Event::Apply(o) => note(o.metadata.name, false),
                    _ => {}
                }
            }
        } else {
            let api: Api<exo::crd::Agent> = Api::namespaced(c, &ns2);
            let mut s = watcher(api, watcher::Config::default()).boxed();
            while let Some(Ok(ev)) = s.next().await {
                match ev {
                    watcher::Event::InitDone => l.store(true, std::sync::atomic::Ordering::SeqCst),
                    watcher::Event::Apply(o) => {
                        let labelled = o
                            .metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| l.contains_key(CHANGED));
                        note(o.metadata.name, labelled)
                    }
                    _ => {}
                }
            }
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
    let t_connect = Instant::now();
    tokio::spawn(async move { exo::upstream::run(c, cfg, h, std::future::pending()).await });
    let snapshot_deadline = Instant::now() + Duration::from_secs(300);
    let (snap_n, snap_at) = loop {
        if let Some(s) = *snapshot_done.lock().unwrap() {
            break s;
        }
        assert!(Instant::now() < snapshot_deadline, "no complete snapshot");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    while !listed.load(std::sync::atomic::Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "initial snapshot: {snap_n} resources, complete {:.2} s after start (includes the watches' initial lists)",
        snap_at.saturating_duration_since(t_connect).as_secs_f64()
    );
    assert!(snap_n >= objects, "snapshot holds {snap_n} of {objects}");

    let fs: Api<exo::crd::AgentFS> = Api::namespaced(client.clone(), &ns_name);
    let agents: Api<exo::crd::Agent> = Api::namespaced(client.clone(), &ns_name);
    let mut lat = Vec::new();
    let mut floor = Vec::new();
    for i in 0..n {
        let t0;
        let name;
        if objects == 0 {
            name = format!("b{i}");
            let obj: exo::crd::AgentFS = serde_json::from_value(serde_json::json!({
                "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
                "metadata": {"name": name}, "spec": {"size": "1Gi", "maxSize": "2Gi"}
            }))
            .unwrap();
            t0 = Instant::now();
            fs.create(&PostParams::default(), &obj).await.unwrap();
        } else {
            // Spread the changes over the whole set of Agents.
            name = format!("a{}", (i * 7919) % (objects / 2));
            let patch = serde_json::json!({"metadata": {"labels": {CHANGED: i.to_string()}}});
            t0 = Instant::now();
            agents
                .patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .unwrap();
        }
        let deadline = t0 + Duration::from_secs(10);
        loop {
            let d = arrivals.lock().unwrap().get(&name).copied();
            let w = watched.lock().unwrap().get(&name).copied();
            if let (Some(d), Some(w)) = (d, w) {
                lat.push(d.saturating_duration_since(t0).as_secs_f64() * 1000.0);
                floor.push(w.saturating_duration_since(t0).as_secs_f64() * 1000.0);
                break;
            }
            assert!(Instant::now() < deadline, "no delta for {name}");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    println!("watched objects: {objects} (+ the AgentFS created)");
    summary(
        "change->delta latency, exo upstream (from request)",
        lat,
        "ms",
    );
    summary(
        "change->event latency, plain kube watcher (from request)",
        floor,
        "ms",
    );
    let _ = nss.delete(&ns_name, &Default::default()).await;
}

// ------------------------------------------------------------------ control plane process

struct Cp {
    child: Child,
    addr: String,
}

fn start_cp(db: &std::path::Path, listen: &str) -> Cp {
    start_cp_with(db, listen, &[])
}

fn start_cp_with(db: &std::path::Path, listen: &str, extra: &[&str]) -> Cp {
    let mut child = Command::new(env!("CARGO_BIN_EXE_exo"))
        .arg("control-plane")
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", listen])
        .args(extra)
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

fn stats(addr: &str) -> serde_json::Value {
    serde_json::from_str(&exo_http_get(addr, "/api/v1/stats")).unwrap()
}

/// `(connected with 10 resources, online, degraded, offline)` per the API.
fn states(addr: &str) -> (usize, usize, usize, usize) {
    let v: serde_json::Value =
        serde_json::from_str(&exo_http_get(addr, "/api/v1/deployments")).unwrap();
    let ds = v["deployments"].as_array().unwrap();
    let count = |f: &dyn Fn(&serde_json::Value) -> bool| ds.iter().filter(|d| f(d)).count();
    (
        count(&|d| d["connected"] == true && d["resources"] == 10),
        count(&|d| d["state"] == "online"),
        count(&|d| d["state"] == "degraded"),
        count(&|d| d["state"] == "offline"),
    )
}

fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Child-process mode: `count` simulated operators from line `start` of the
/// token file; each sends a heartbeat every `hb` until `hold` after all are
/// connected, keeps answering pings 3 s more, then reports on stdout.
async fn sim_clients(
    addr: String,
    tokens: String,
    start: usize,
    count: usize,
    hb: Duration,
    hold: Duration,
) {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let toks: Vec<String> = std::fs::read_to_string(tokens)
        .unwrap()
        .lines()
        .skip(start)
        .take(count)
        .map(str::to_owned)
        .collect();
    let sent = Arc::new(AtomicU64::new(0));
    let closed = Arc::new(AtomicU64::new(0));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let failed = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    futures::stream::iter(toks)
        .map(|t| {
            let addr = addr.clone();
            async move { sim_connect(&addr, &t).await }
        })
        .buffer_unordered(64)
        .for_each(|r| {
            let (sent, closed, failed) = (sent.clone(), closed.clone(), failed.clone());
            let mut stop = stop_rx.clone();
            async move {
                let Ok(ws) = r else {
                    failed.fetch_add(1, Relaxed);
                    return;
                };
                tokio::spawn(async move {
                    let (mut sink, mut stream) = ws.split();
                    // A random phase, as real operators have.
                    let phase = Duration::from_millis(random_u64() % hb.as_millis().max(1) as u64);
                    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + phase, hb);
                    let mut sending = true;
                    loop {
                        tokio::select! {
                            _ = tick.tick(), if sending => {
                                let f = Frame::Heartbeat(wire::Heartbeat { sent_at_ms: wire::now_ms(), resources: 10 });
                                if sink.send(Message::Text(f.to_json().unwrap().into())).await.is_err() {
                                    closed.fetch_add(1, Relaxed);
                                    return;
                                }
                                sent.fetch_add(1, Relaxed);
                            }
                            r = stop.changed() => {
                                if r.is_err() || *stop.borrow() { sending = false; }
                                if r.is_err() { break; }
                            }
                            m = stream.next() => match m {
                                Some(Ok(_)) => {}
                                _ => { closed.fetch_add(1, Relaxed); return; }
                            },
                        }
                    }
                    // Keep the socket open (and answering pings) until exit.
                    while let Some(Ok(_)) = stream.next().await {}
                });
            }
        })
        .await;
    println!(
        "connected {} failed {} in {:.1} s",
        count as u64 - failed.load(Relaxed),
        failed.load(Relaxed),
        t0.elapsed().as_secs_f64()
    );
    tokio::time::sleep(hold).await;
    stop_tx.send_replace(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!(
        "sent {} closed {}",
        sent.load(Relaxed),
        closed.load(Relaxed)
    );
    drop(stop_tx);
}

async fn rss(n: usize, hb: Duration, hold: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cp.sqlite");
    let t_tok = Instant::now();
    let toks = tokens(&db, n + 1);
    println!(
        "created {} deployments in {:.1} s",
        n + 1,
        t_tok.elapsed().as_secs_f64()
    );
    let tok_file = dir.path().join("tokens");
    std::fs::write(&tok_file, toks[1..].join("\n")).unwrap();
    let mut cp = start_cp_with(
        &db,
        "127.0.0.1:0",
        &["--heartbeat-interval", &format!("{}ms", hb.as_millis())],
    );
    let pid = cp.child.id();
    // Warm up the allocator and the first connection path.
    let warm = sim_connect(&cp.addr, &toks[0]).await.unwrap();
    drop(warm);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    let cpu0 = cpu_ticks(pid);
    let t0 = Instant::now();
    // At most 5000 sockets per client process: each side needs one fd per
    // connection and the limit is 20000.
    let per = 5000;
    let mut children = Vec::new();
    for start in (0..n).step_by(per) {
        let count = per.min(n - start);
        let mut c = Command::new(std::env::current_exe().unwrap())
            .args(["--bench", "sim-clients", &cp.addr])
            .arg(&tok_file)
            .args([
                start.to_string(),
                count.to_string(),
                hb.as_millis().to_string(),
                hold.as_secs().to_string(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(c.stdout.take().unwrap());
        children.push((c, out));
    }
    for (_, out) in &mut children {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        println!("client process: {}", line.trim());
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (connected, ..) = states(&cp.addr);
        if connected == n {
            break;
        }
        assert!(Instant::now() < deadline, "only {connected}/{n} connected");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let t_all = t0.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(pid);
    println!(
        "control plane RSS: {n} connections (10 resources each): before {before} KiB, after {after} KiB, {:.1} KiB per connection; all shown connected after {:.1} s",
        (after.saturating_sub(before)) as f64 / n as f64,
        t_all.as_secs_f64()
    );
    // Watch the states while heartbeats flow.
    let mut worst = (0, 0);
    let t_hold = Instant::now();
    let cpu_hold0 = cpu_ticks(pid);
    while t_hold.elapsed() + Duration::from_secs(8) < hold {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (_, online, degraded, offline) = states(&cp.addr);
        worst = (worst.0.max(degraded), worst.1.max(offline));
        if online + degraded + offline < n {
            println!("states: only {} of {n} judged", online + degraded + offline);
        }
    }
    let hold_cpu = (cpu_ticks(pid) - cpu_hold0) as f64 / 100.0 / t_hold.elapsed().as_secs_f64();
    let mut sent = 0u64;
    let mut closed = 0u64;
    for (mut c, mut out) in children {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let w: Vec<&str> = line.split_whitespace().collect();
        sent += w[1].parse::<u64>().unwrap();
        closed += w[3].parse::<u64>().unwrap();
        let _ = c.wait();
    }
    let peak = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_owned()))
        .unwrap_or_default();
    let received = stats(&cp.addr)["heartbeats_received"].as_u64().unwrap();
    println!(
        "heartbeats: sent {sent}, received {received}, dropped {}; sockets closed early {closed}; worst seen during hold: degraded {}, offline {}",
        sent as i64 - received as i64,
        worst.0,
        worst.1
    );
    println!(
        "control plane CPU: {:.1} s to accept {n}; {:.1}% of one core while holding them (heartbeat every {} ms); peak RSS {peak}",
        (cpu_hold0 - cpu0) as f64 / 100.0,
        hold_cpu * 100.0,
        hb.as_millis()
    );
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

async fn reconnect(n: usize, spread: bool) {
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
            if spread {
                // What `exo::upstream::run` does after losing a connection.
                b.after_loss(
                    exo::upstream::UpstreamConfig::new(
                        "http://x",
                        exo::controlplane::token::SecretToken::new("x"),
                    )
                    .reconnect_spread,
                );
            }
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
    let mut buckets = vec![0usize; 1];
    for t in &times {
        let b = (*t / 1000.0) as usize;
        if buckets.len() <= b {
            buckets.resize(b + 1, 0);
        }
        buckets[b] += 1;
    }
    let max = buckets.iter().copied().max().unwrap_or(0);
    println!(
        "reconnects per 1 s bucket after the restart ({}): {:?}; largest bucket {:.1}% of {n}",
        if spread {
            "operator policy"
        } else {
            "plain backoff, no loss spread"
        },
        buckets,
        max as f64 * 100.0 / n as f64
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
    if args.first().map(String::as_str) == Some("sim-clients") {
        let a = &args[1..];
        rt.block_on(sim_clients(
            a[0].clone(),
            a[1].clone(),
            a[2].parse().unwrap(),
            a[3].parse().unwrap(),
            Duration::from_millis(a[4].parse().unwrap()),
            Duration::from_secs(a[5].parse().unwrap()),
        ));
        return;
    }
    let mut it = args.iter();
    let mut ran = false;
    let mut objects = 0;
    let mut hb = Duration::from_secs(5);
    let mut hold = Duration::from_secs(60);
    while let Some(what) = it.next() {
        let n: usize = it.next().and_then(|n| n.parse().ok()).unwrap_or(100);
        match what.as_str() {
            "objects" => objects = n,
            "hb-ms" => hb = Duration::from_millis(n as u64),
            "hold" => hold = Duration::from_secs(n as u64),
            "latency" => rt.block_on(latency(n, objects)),
            "rss" => rt.block_on(rss(n, hb, hold)),
            "reconnect" => rt.block_on(reconnect(n, true)),
            "reconnect-nospread" => rt.block_on(reconnect(n, false)),
            other => panic!("unknown benchmark {other}"),
        }
        ran |= !matches!(what.as_str(), "objects" | "hb-ms" | "hold");
    }
    if !ran {
        rt.block_on(latency(200, 0));
        rt.block_on(rss(500, hb, hold));
        rt.block_on(reconnect(200, true));
    }
}
