//! Change -> Delta latency with K watched objects, side by side with a plain
//! kube watcher (see main.rs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use kube::api::{Api, PostParams};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use exo::wire::{self, Frame};

use crate::summary;

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

pub async fn latency(n: usize, objects: usize, snapshot_every: Option<Duration>) {
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
                                accepts_alerts: false,
                                accepts_tenants: false,
                                accepts_rollouts: false,
                                accepts_registrations: false,
                                accepts_incidents: false,
                                accepts_apps: false,
                                accepts_analysis_runs: false,
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
        exo::wire::token::SecretToken::new("bench"),
    );
    cfg.namespace = Some(ns_name.clone());
    if let Some(every) = snapshot_every {
        cfg.snapshot_interval = every;
    }
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
    println!(
        "watched objects: {objects}; backstop snapshot every {}",
        snapshot_every.map_or("300 s (default)".to_owned(), |d| format!(
            "{} ms",
            d.as_millis()
        ))
    );
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
