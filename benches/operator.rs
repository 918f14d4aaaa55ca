//! Operator benchmark against the real test environment
//! (`scripts/testenv up`; run with `scripts/bench-operator`).
//!
//! Per run, side by side on the same apiserver:
//! - cold reconcile: N Agents exist, the operator starts; time until every
//!   child exists and until every Agent is `Active`; operator peak RSS;
//! - `kubectl apply --server-side` of the same rendered children (pods,
//!   Services, Secrets owned by the same kind of Agents): wall time and
//!   kubectl peak RSS;
//! - a floor: the same children POSTed by a client that does nothing else
//!   (32 in flight per kind);
//! - steady state: a restart over the unchanged fleet; writes it makes;
//!
//! Then once: operator RSS while watching W objects.
//!
//! Knobs: EXO_BENCH_AGENTS (1000), EXO_BENCH_RUNS (3), EXO_BENCH_WATCHED
//! (10000), EXO_BENCH_CONCURRENCY (the operator's `--concurrency`, 16).
//!
//! `EXO_BENCH_WRITE_FLOOR=1` measures only the write floor of a cold
//! deploy of N Agents ([`write_floor`]), once per run: what
//! `benches/gitops.sh`'s cold deploy is compared with.
//! Prints a Markdown table for BENCHMARKS.md.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a bench: a panic is a failed run

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::knob;
use exo::cluster::build::{self, Owner};
use exo::crd::{Agent, AgentPhase, AgentSpec, Container, Tool, ToolSpec};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::PartialObjectMeta;
use kube::runtime::{reflector, watcher};
use kube::{Client, Config};

fn kubeconfig() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(".testenv/env"))
        .expect("the test environment is not running: scripts/testenv up");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("KUBECONFIG="))
        .expect("KUBECONFIG in .testenv/env");
    PathBuf::from(line)
}

async fn client(path: &PathBuf) -> Client {
    let kc = Kubeconfig::read_from(path).unwrap();
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    cfg.read_timeout = Some(Duration::from_secs(120));
    Client::try_from(cfg).unwrap()
}

fn digest(n: u8) -> String {
    format!("example.invalid/x@sha256:{}", format!("{n:02x}").repeat(32))
}

fn agent(name: &str) -> Agent {
    Agent::new(
        name,
        AgentSpec {
            runtime: Container {
                image: digest(1),
                ..Container::default()
            },
            agentlet: Container {
                image: digest(2),
                ..Container::default()
            },
            baseline: Some(exo::crd::BaselineRef {
                config_map: "persona-0001".into(),
                mount_path: None,
            }),
            ..AgentSpec::default()
        },
    )
}

async fn create_ns(c: &Client, name: &str) {
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    // The default ServiceAccount must exist before pods are accepted.
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(c.clone(), name);
    while sas.get_opt("default").await.unwrap().is_none() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn delete_ns(c: &Client, name: &str) {
    let _ = Api::<Namespace>::all(c.clone())
        .delete(name, &DeleteParams::background())
        .await;
    // No operator runs any more: drop its finalizers so the namespace can go.
    release::<Agent>(c, name).await;
    release::<exo::crd::AgentFS>(c, name).await;
}

async fn wait_gone(c: &Client, name: &str) {
    let nss = Api::<Namespace>::all(c.clone());
    let start = Instant::now();
    while nss.get_opt(name).await.unwrap().is_some() {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "namespace {name} still there after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn release<K>(c: &Client, ns: &str)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(c.clone(), ns);
    let Ok(list) = api.list_metadata(&ListParams::default()).await else {
        return;
    };
    let patch = kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    for o in list.items {
        if let Some(n) = o.metadata.name {
            let _ = api
                .patch_metadata(&n, &kube::api::PatchParams::default(), &patch)
                .await;
        }
    }
}

async fn create_all<K>(api: &Api<K>, objs: Vec<K>) -> Vec<K>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    futures::stream::iter(objs)
        .map(|o| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &o).await }
        })
        .buffer_unordered(32)
        .try_collect()
        .await
        .unwrap()
}

/// The children the operator makes for each of `agents`: pod, headless
/// Service, token Secret.
fn children_of(agents: &[Agent]) -> (Vec<Pod>, Vec<Service>, Vec<Secret>) {
    let (mut pods, mut svcs, mut secrets) = (Vec::new(), Vec::new(), Vec::new());
    for a in agents {
        let owner = Owner::of(a).unwrap();
        pods.push(build::agent_pod(&owner, &a.spec, &[]).unwrap());
        svcs.push(build::agent_service(&owner).unwrap());
        secrets.push(build::agent_secret(&owner, &hex::encode([7u8; 32])));
    }
    (pods, svcs, secrets)
}

/// The write floor of a cold deploy of `n` Agents: every write the
/// operator must make per Agent (the Agent itself, applied from git; its
/// pod, headless Service and token Secret; its finalizer; its first
/// status), made by a client that does nothing else, 32 in flight per
/// kind, the children, finalizers and statuses of created Agents at once.
/// No reads, no waiting for pods, no verification. Seconds.
async fn write_floor(c: &Client, ns: &str, n: usize) -> f64 {
    use kube::api::{Patch, PatchParams};
    create_ns(c, ns).await;
    let agents: Api<Agent> = Api::namespaced(c.clone(), ns);
    let start = Instant::now();
    let created = create_all(&agents, (0..n).map(|i| agent(&format!("a{i}"))).collect()).await;
    let (pods, svcs, secrets) = children_of(&created);
    let names: Vec<String> = created
        .iter()
        .map(|a| a.metadata.name.clone().unwrap())
        .collect();
    let patch_all = |status: bool| {
        let agents = agents.clone();
        let names = names.clone();
        async move {
            futures::stream::iter(names)
                .map(|name| {
                    let agents = agents.clone();
                    async move {
                        let pp = PatchParams::default();
                        if status {
                            let p =
                                Patch::Merge(serde_json::json!({"status": {"phase": "Active"}}));
                            agents.patch_status(&name, &pp, &p).await.map(|_| ())
                        } else {
                            let p = Patch::Merge(serde_json::json!(
                                {"metadata": {"finalizers": [exo::meta::FINALIZER_AGENT]}}
                            ));
                            agents.patch(&name, &pp, &p).await.map(|_| ())
                        }
                    }
                })
                .buffer_unordered(32)
                .try_collect::<Vec<()>>()
                .await
                .unwrap()
        }
    };
    let (pod_api, svc_api, secret_api) = (
        Api::<Pod>::namespaced(c.clone(), ns),
        Api::<Service>::namespaced(c.clone(), ns),
        Api::<Secret>::namespaced(c.clone(), ns),
    );
    tokio::join!(
        create_all(&pod_api, pods),
        create_all(&svc_api, svcs),
        create_all(&secret_api, secrets),
        patch_all(false),
        patch_all(true),
    );
    let secs = start.elapsed().as_secs_f64();
    release::<Agent>(c, ns).await;
    delete_ns(c, ns).await;
    wait_gone(c, ns).await;
    secs
}

struct Op {
    child: Child,
    addr: String,
}

impl Op {
    fn start(ns: &str, kubeconfig: &PathBuf) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(env!("CARGO_BIN_EXE_exo"))
            .args([
                "operator",
                "run",
                "-n",
                ns,
                "--lease-namespace",
                ns,
                "--identity",
                "bench",
            ])
            .args([
                "--metrics-addr",
                &addr,
                "--lease-duration",
                "3",
                "--log-format",
                "json",
            ])
            .args([
                "--concurrency",
                &knob("EXO_BENCH_CONCURRENCY", 16).to_string(),
            ])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Op { child, addr }
    }

    /// The operator's `/metrics` page.
    fn page(&self) -> Option<String> {
        let mut s = std::net::TcpStream::connect(&self.addr).ok()?;
        write!(s, "GET /metrics HTTP/1.0\r\n\r\n").ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        Some(text)
    }

    fn metric(&self, name: &str) -> Option<u64> {
        Some(exo::cluster::metrics::sum_samples(&self.page()?, name))
    }

    /// What the reconcilers wrote (not the Lease renewals).
    fn object_writes(&self) -> Option<u64> {
        Some(exo::cluster::metrics::object_writes(&self.page()?))
    }

    /// (current, peak) resident set size in MiB.
    fn rss(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kb = |key: &str| -> f64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (kb("VmRSS:") / 1024.0, kb("VmHWM:") / 1024.0)
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_until<F, Fut>(what: &str, limit: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !f().await {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn count<K>(api: &Api<K>) -> usize
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list_metadata(&ListParams::default())
        .await
        .map(|l| l.items.len())
        .unwrap_or(0)
}

/// Watch-fed stores of one namespace's pods, Services, Secrets and Agents.
struct Seen {
    pods: reflector::Store<PartialObjectMeta<Pod>>,
    svcs: reflector::Store<PartialObjectMeta<Service>>,
    secrets: reflector::Store<PartialObjectMeta<Secret>>,
    agents: reflector::Store<Agent>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Seen {
    fn start(c: &Client, ns: &str) -> Self {
        fn meta<K>(
            c: &Client,
            ns: &str,
            tasks: &mut Vec<tokio::task::JoinHandle<()>>,
        ) -> reflector::Store<PartialObjectMeta<K>>
        where
            K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
                + Clone
                + serde::de::DeserializeOwned
                + std::fmt::Debug
                + Send
                + Sync
                + 'static,
        {
            let (store, writer) = reflector::store();
            let api: Api<PartialObjectMeta<K>> = Api::namespaced(c.clone(), ns);
            let stream = reflector(writer, watcher(api, watcher::Config::default()));
            tasks.push(tokio::spawn(stream.for_each(|_| async {})));
            store
        }
        let mut tasks = Vec::new();
        let pods = meta::<Pod>(c, ns, &mut tasks);
        let svcs = meta::<Service>(c, ns, &mut tasks);
        let secrets = meta::<Secret>(c, ns, &mut tasks);
        let (agents, writer) = reflector::store();
        let api: Api<Agent> = Api::namespaced(c.clone(), ns);
        let stream = reflector(writer, watcher(api, watcher::Config::default()));
        tasks.push(tokio::spawn(stream.for_each(|_| async {})));
        Seen {
            pods,
            svcs,
            secrets,
            agents,
            tasks,
        }
    }

    async fn synced(&self) {
        self.pods.wait_until_ready().await.unwrap();
        self.svcs.wait_until_ready().await.unwrap();
        self.secrets.wait_until_ready().await.unwrap();
        self.agents.wait_until_ready().await.unwrap();
    }

    /// (pods, Services, Secrets, Active Agents)
    fn counts(&self) -> (usize, usize, usize, usize) {
        let active = self
            .agents
            .state()
            .iter()
            .filter(|a| a.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active))
            .count();
        (
            self.pods.state().len(),
            self.svcs.state().len(),
            self.secrets.state().len(),
            active,
        )
    }

    fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[derive(Default)]
struct Samples(BTreeMap<&'static str, Vec<f64>>);

impl Samples {
    fn add(&mut self, k: &'static str, v: f64) {
        self.0.entry(k).or_default().push(v);
    }
    fn median(&self, k: &str) -> f64 {
        median(self.0.get(k).cloned().unwrap_or_else(|| vec![f64::NAN]))
    }
}

#[tokio::main]
async fn main() {
    // `cargo test --all-targets` runs bench binaries too, without `--bench`:
    // the benchmark is minutes of load, so it only runs under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("benches/operator.rs: skipped outside `cargo bench` (scripts/bench-operator)");
        return;
    }
    let n = knob("EXO_BENCH_AGENTS", 1000);
    let runs = knob("EXO_BENCH_RUNS", 3);
    let watched = knob("EXO_BENCH_WATCHED", 10_000);
    let kc = kubeconfig();
    let c = client(&kc).await;
    let mut s = Samples::default();
    let tag = std::process::id();

    if knob("EXO_BENCH_WRITE_FLOOR", 0) == 1 {
        let mut floors = Vec::new();
        for run in 0..runs {
            let secs = write_floor(&c, &format!("bench-wf-{tag}-{run}"), n).await;
            eprintln!(
                "run {}/{runs}: write floor of {n} Agents ({} writes): {secs:.1} s",
                run + 1,
                6 * n
            );
            floors.push(secs);
        }
        println!(
            "| write floor of a cold deploy: {n} Agents, {} writes, 32 in flight per kind ({runs} runs, median) | {:.1} s |",
            6 * n,
            median(floors)
        );
        return;
    }

    for run in 0..runs {
        eprintln!("run {}/{runs}: {n} agents", run + 1);
        let ns_op = format!("bench-op-{tag}-{run}");
        let ns_kc = format!("bench-kc-{tag}-{run}");
        let ns_fl = format!("bench-fl-{tag}-{run}");
        create_ns(&c, &ns_op).await;
        create_ns(&c, &ns_kc).await;
        create_ns(&c, &ns_fl).await;
        let agents_op: Api<Agent> = Api::namespaced(c.clone(), &ns_op);
        let agents_kc: Api<Agent> = Api::namespaced(c.clone(), &ns_kc);
        create_all(
            &agents_op,
            (0..n).map(|i| agent(&format!("a{i}"))).collect(),
        )
        .await;
        let kc_agents = create_all(
            &agents_kc,
            (0..n).map(|i| agent(&format!("a{i}"))).collect(),
        )
        .await;

        // Operator, cold. Progress is observed through watches, not LISTs:
        // polling 1000-object lists would load the apiserver the operator
        // is being measured against.
        let seen = Seen::start(&c, &ns_op);
        seen.synced().await;
        let start = Instant::now();
        let op = Op::start(&ns_op, &kc);
        let mut children_at = None;
        loop {
            let (pods, svcs, secrets, active) = seen.counts();
            if children_at.is_none() && pods == n && svcs == n && secrets >= n {
                children_at = Some(start.elapsed());
            }
            if active == n {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(900),
                "timed out: {active}/{n} Active"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let active = start.elapsed();
        seen.stop();
        let children = children_at.unwrap_or(active);
        let (_, peak) = op.rss();
        let writes = op.object_writes().unwrap_or(0);
        op.stop();
        s.add("op_children_s", children.as_secs_f64());
        s.add("op_active_s", active.as_secs_f64());
        s.add("op_peak_mib", peak);
        s.add("op_writes", writes as f64);

        // Steady state: a restart over the unchanged fleet.
        let op = Op::start(&ns_op, &kc);
        wait_until("a full resync", Duration::from_secs(300), || {
            let r = op.metric("exo_operator_reconciles_total").unwrap_or(0);
            async move { r >= n as u64 }
        })
        .await;
        let resync_writes = op.object_writes().unwrap_or(u64::MAX);
        let (rss_now, _) = op.rss();
        op.stop();
        s.add("resync_writes", resync_writes as f64);
        s.add("resync_rss_mib", rss_now);

        // kubectl apply --server-side of the same rendered children.
        let mut items = Vec::new();
        for a in &kc_agents {
            let owner = Owner::of(a).unwrap();
            let mut token = [0u8; 32];
            getrandom::fill(&mut token).unwrap();
            items.push(
                serde_json::to_value(build::agent_pod(&owner, &a.spec, &[]).unwrap()).unwrap(),
            );
            items.push(serde_json::to_value(build::agent_service(&owner).unwrap()).unwrap());
            items.push(
                serde_json::to_value(build::agent_secret(&owner, &hex::encode(token))).unwrap(),
            );
        }
        for (item, kind) in items
            .iter_mut()
            .zip(["Pod", "Service", "Secret"].iter().cycle())
        {
            item["apiVersion"] = "v1".into();
            item["kind"] = (*kind).into();
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("children.json");
        std::fs::write(
            &file,
            serde_json::to_vec(
                &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}),
            )
            .unwrap(),
        )
        .unwrap();
        let out = Command::new("/usr/bin/time")
            .args([
                "-f",
                "BENCH %e %M",
                "kubectl",
                "apply",
                "--server-side",
                "--field-manager",
                "exo-bench",
                "-f",
            ])
            .arg(&file)
            .env("KUBECONFIG", &kc)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find(|l| l.starts_with("BENCH "))
            .expect("time output");
        let mut parts = line.split_whitespace().skip(1);
        let secs: f64 = parts.next().unwrap().parse().unwrap();
        let kb: f64 = parts.next().unwrap().parse().unwrap();
        assert!(out.status.success(), "kubectl apply failed: {err}");
        s.add("kubectl_s", secs);
        s.add("kubectl_peak_mib", kb / 1024.0);
        let kpods: Api<Pod> = Api::namespaced(c.clone(), &ns_kc);
        assert_eq!(count(&kpods).await, n);

        // The floor: the same 3000 children POSTed by a client that does
        // nothing else, 32 in flight per kind. No operator can create them faster
        // on this apiserver; the scheduler, kwok and the endpoints
        // controllers react to them as they do for the other two.
        let agents_fl: Api<Agent> = Api::namespaced(c.clone(), &ns_fl);
        let fl_agents = create_all(
            &agents_fl,
            (0..n).map(|i| agent(&format!("a{i}"))).collect(),
        )
        .await;
        let (pods_fl, svcs_fl, secrets_fl) = children_of(&fl_agents);
        let (pod_api, svc_api, secret_api) = (
            Api::<Pod>::namespaced(c.clone(), &ns_fl),
            Api::<Service>::namespaced(c.clone(), &ns_fl),
            Api::<Secret>::namespaced(c.clone(), &ns_fl),
        );
        let start = Instant::now();
        tokio::join!(
            create_all(&pod_api, pods_fl),
            create_all(&svc_api, svcs_fl),
            create_all(&secret_api, secrets_fl),
        );
        let floor = start.elapsed().as_secs_f64();
        s.add("floor_s", floor);

        delete_ns(&c, &ns_op).await;
        delete_ns(&c, &ns_kc).await;
        delete_ns(&c, &ns_fl).await;
        // The next run starts on a quiet cluster, not while kwok and the
        // garbage collector still delete this one's 6000 objects.
        for ns in [&ns_op, &ns_kc, &ns_fl] {
            wait_gone(&c, ns).await;
        }
        eprintln!(
            "  operator: children {:.1}s, active {:.1}s, peak {:.0} MiB, writes {writes}, resync writes {resync_writes}; kubectl: {secs:.1}s, {:.0} MiB; parallel POST floor: {floor:.1}s",
            children.as_secs_f64(),
            active.as_secs_f64(),
            peak,
            kb / 1024.0
        );
    }

    // RSS while watching `watched` objects: disabled Tools (no children).
    eprintln!("watching {watched} objects");
    let ns_w = format!("bench-watch-{tag}");
    create_ns(&c, &ns_w).await;
    let tools: Api<Tool> = Api::namespaced(c.clone(), &ns_w);
    let objs = (0..watched)
        .map(|i| {
            Tool::new(
                &format!("t{i}"),
                ToolSpec {
                    container: Container {
                        image: digest(3),
                        ..Container::default()
                    },
                    enabled: false,
                    port: None,
                    node_tier: None,
                    run_as_user: None,
                },
            )
        })
        .collect();
    create_all(&tools, objs).await;
    let op = Op::start(&ns_w, &kc);
    let start = Instant::now();
    // Each disabled Tool gets exactly one write: its `Disabled` status.
    // (Reconciles are no measure: those before the caches sync return
    // early and count too.)
    wait_until(
        "every tool's status written",
        Duration::from_secs(900),
        || {
            let w = op.object_writes().unwrap_or(0);
            async move { w >= watched as u64 }
        },
    )
    .await;
    let watch_reconcile = start.elapsed();
    let (watch_rss, watch_peak) = op.rss();
    op.stop();
    delete_ns(&c, &ns_w).await;

    println!("| measure ({n} Agents, {runs} runs, medians) | value |");
    println!("| --- | --- |");
    // EXO_BENCH_RUNS=0 measures only the watched objects.
    if runs > 0 {
        println!(
            "| operator cold: all {} children exist | {:.1} s |",
            3 * n,
            s.median("op_children_s")
        );
        println!(
            "| operator cold: all Agents `Active` (incl. scheduling, status) | {:.1} s |",
            s.median("op_active_s")
        );
        println!(
            "| operator peak RSS (cold run) | {:.0} MiB |",
            s.median("op_peak_mib")
        );
        println!(
            "| operator API writes (cold run) | {:.0} |",
            s.median("op_writes")
        );
        println!(
            "| `kubectl apply --server-side` of the same {} children | {:.1} s |",
            3 * n,
            s.median("kubectl_s")
        );
        println!(
            "| kubectl peak RSS | {:.0} MiB |",
            s.median("kubectl_peak_mib")
        );
        println!(
            "| ratio operator children / kubectl apply | {:.2} |",
            s.median("op_children_s") / s.median("kubectl_s")
        );
        println!(
            "| floor: the same {} children POSTed, 32 in flight per kind, nothing else | {:.1} s |",
            3 * n,
            s.median("floor_s")
        );
        println!(
            "| ratio floor / kubectl apply | {:.2} |",
            s.median("floor_s") / s.median("kubectl_s")
        );
        println!(
            "| steady-state restart: API writes | {:.0} |",
            s.median("resync_writes")
        );
        println!(
            "| steady-state RSS after resync | {:.0} MiB |",
            s.median("resync_rss_mib")
        );
    }
    println!(
        "| {watched} watched Tools: time until every status is written | {:.1} s |",
        watch_reconcile.as_secs_f64()
    );
    println!("| {watched} watched Tools: RSS (peak) | {watch_rss:.0} MiB ({watch_peak:.0} MiB) |");
    println!("\nraw: {:?}", s.0);
}
