#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The operator as a process: endpoints, leader election and failover
//! between two replicas, idempotency (a restart over an unchanged fleet
//! writes nothing), and the refusal to start without a CRD.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use exo::crd::{Agent, AgentFS, AgentPhase, Tool};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use kube::api::{Api, ListParams};
use support::eventually;
use support::operator::{
    OperatorProcess, agent, agentfs, create, mount, restricted_namespace, tool, wait_for,
};

fn phase(a: &Agent) -> Option<AgentPhase> {
    a.status.as_ref()?.phase
}

async fn versions<K>(api: &Api<K>) -> BTreeMap<String, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| {
            (
                o.meta().name.clone().unwrap(),
                o.meta().resource_version.clone().unwrap(),
            )
        })
        .collect()
}

/// resourceVersions of every object of the fleet and its children.
async fn fleet(ns: &support::TestNamespace) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    let prefix = |kind: &str, m: BTreeMap<String, String>| {
        m.into_iter()
            .map(move |(k, v)| (format!("{kind}/{k}"), v))
            .collect::<Vec<_>>()
    };
    all.extend(prefix("agent", versions(&ns.api::<Agent>()).await));
    all.extend(prefix("tool", versions(&ns.api::<Tool>()).await));
    all.extend(prefix("agentfs", versions(&ns.api::<AgentFS>()).await));
    all.extend(prefix("pod", versions(&ns.api::<Pod>()).await));
    all.extend(prefix("service", versions(&ns.api::<Service>()).await));
    all.extend(prefix("secret", versions(&ns.api::<Secret>()).await));
    all.extend(prefix(
        "pvc",
        versions(&ns.api::<PersistentVolumeClaim>()).await,
    ));
    all
}

#[tokio::test]
async fn restart_over_an_unchanged_fleet_makes_zero_writes() {
    let ns = restricted_namespace("op-idem").await;
    let mut op = OperatorProcess::start(&ns.name, "first");
    let agents = ns.api::<Agent>();
    create(&ns.api::<AgentFS>(), &agentfs("ws", "1Gi", "2Gi", false)).await;
    for i in 0..5 {
        let mut a = agent(&format!("a{i}"));
        a.spec.filesystems = Some(vec![mount("ws", None, i % 2 == 0)]);
        create(&agents, &a).await;
    }
    create(&ns.api::<Tool>(), &tool("t", true)).await;
    create(&ns.api::<Tool>(), &tool("off", false)).await;
    for i in 0..5 {
        wait_for(&agents, &format!("a{i}"), "Active", |a| {
            phase(a) == Some(AgentPhase::Active)
        })
        .await;
    }
    wait_for(&ns.api::<AgentFS>(), "ws", "all five mounting", |f| {
        f.status.as_ref().is_some_and(|s| s.mounted_by.len() == 5)
    })
    .await;
    wait_for(&ns.api::<Tool>(), "t", "Ready", |t| {
        t.status.as_ref().and_then(|s| s.phase) == Some(exo::crd::ToolPhase::Ready)
    })
    .await;
    assert!(op.writes() > 0, "the first run did write");
    op.terminate();

    let before = fleet(&ns).await;
    let second = OperatorProcess::start(&ns.name, "second");
    second.wait_ready().await;
    second.wait_leader().await;
    // Leadership triggers a full re-reconcile; wait until every object was
    // reconciled at least once by this replica.
    let objects = 5 + 2 + 1;
    eventually(
        "the second replica to reconcile everything",
        Duration::from_secs(30),
        || async {
            let n = second.metric("exo_operator_reconciles_total")?;
            (n >= objects).then_some(())
        },
    )
    .await;
    assert_eq!(
        second.writes(),
        0,
        "a restart over an unchanged fleet wrote:\n{}",
        second.get("/metrics").unwrap().1
    );
    assert_eq!(fleet(&ns).await, before, "resourceVersions changed");
}

#[tokio::test]
async fn endpoints_and_leader_failover_between_two_replicas() {
    let ns = restricted_namespace("op-lead").await;
    let mut one = OperatorProcess::start(&ns.name, "one");
    one.wait_ready().await;
    one.wait_leader().await;
    let two = OperatorProcess::start(&ns.name, "two");
    two.wait_ready().await;

    // Endpoints: health with capabilities, readiness, metrics.
    let (code, body) = two.get("/healthz").unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("mount-filesystems"), "{body}");
    assert_eq!(two.get("/readyz").unwrap().0, 200);
    let (_, metrics) = two.get("/metrics").unwrap();
    assert!(metrics.contains("exo_operator_leader 0"), "{metrics}");
    assert_eq!(two.get("/nope").unwrap().0, 404);

    // The Lease names the leader and advertises the capability.
    let leases: Api<Lease> = ns.api();
    let lease = leases.get("exo-operator").await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("one"));
    assert_eq!(
        lease.metadata.annotations.unwrap()["autonomic.sh/capabilities"],
        "mount-filesystems"
    );

    // Only the leader reconciles.
    let agents = ns.api::<Agent>();
    create(&agents, &agent("x")).await;
    wait_for(&agents, "x", "Active", |a| {
        phase(a) == Some(AgentPhase::Active)
    })
    .await;
    assert!(one.writes() > 0);
    assert_eq!(two.writes(), 0, "the standby wrote");

    // Kill the leader without a chance to release: the standby takes over
    // once the Lease expires, and reconciles.
    one.kill();
    two.wait_leader().await;
    let lease = leases.get("exo-operator").await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("two"));
    assert!(lease.lease_transitions.unwrap() >= 1);
    create(&agents, &agent("y")).await;
    wait_for(&agents, "y", "Active under the new leader", |a| {
        phase(a) == Some(AgentPhase::Active)
    })
    .await;
    assert!(two.writes() > 0);
}

#[tokio::test]
async fn graceful_stop_releases_the_lease() {
    let ns = restricted_namespace("op-release").await;
    let mut one = OperatorProcess::start(&ns.name, "one");
    one.wait_leader().await;
    let status = one.terminate();
    assert!(status.success(), "exit status {status:?}\n{}", one.log());
    let lease = ns
        .api::<Lease>()
        .get("exo-operator")
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(lease.holder_identity, None, "the lease was released");
    // `--log-format json`: every line is one JSON object with a level.
    let log = one.log();
    assert!(log.contains("released the lease"), "{log}");
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string(), "{line}");
    }

    // Stopped right after it starts (watches maybe not synced yet): it
    // still exits, cleanly.
    for i in 0..3 {
        let mut early =
            OperatorProcess::start_with(&ns.name, &format!("early{i}"), &["--lease-name", "early"]);
        eventually(
            "the http endpoint",
            std::time::Duration::from_secs(30),
            || async { early.get("/healthz").map(|_| ()) },
        )
        .await;
        let status = early.terminate();
        assert!(status.success(), "exit status {status:?}\n{}", early.log());
    }
}

/// A loopback HTTP proxy in front of the real apiserver that hides one
/// `autonomic.sh` resource: its requests go to a resource name no CRD
/// serves, so the 404 the operator sees is the apiserver's own answer for
/// a CRD that is not installed. Everything else is passed through with the
/// test's admin client. The shared CRDs stay installed.
struct HidingProxy {
    url: String,
    /// Requests for the hidden resource.
    hidden_hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HidingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct ProxyState {
    client: kube::Client,
    plural: &'static str,
    hidden_hits: Arc<AtomicUsize>,
}

async fn forward(
    axum::extract::State(st): axum::extract::State<ProxyState>,
    req: axum::extract::Request,
) -> axum::response::Response {
    use http_body_util::BodyExt;
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let path =
        if path.starts_with("/apis/autonomic.sh/") && path.ends_with(&format!("/{}", st.plural)) {
            st.hidden_hits.fetch_add(1, Ordering::SeqCst);
            format!("{path}-not-installed")
        } else {
            path.to_owned()
        };
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let mut out = axum::http::Request::builder()
        .method(parts.method)
        .uri(format!("{path}{query}"));
    for (k, v) in &parts.headers {
        if k != axum::http::header::HOST {
            out = out.header(k, v);
        }
    }
    let resp = st
        .client
        .send(out.body(kube::client::Body::from(body.to_vec())).unwrap())
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

impl HidingProxy {
    async fn start(client: kube::Client, plural: &'static str) -> Self {
        let hidden_hits = Arc::default();
        let state = ProxyState {
            client,
            plural,
            hidden_hits: Arc::clone(&hidden_hits),
        };
        let app = axum::Router::new().fallback(forward).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        HidingProxy {
            url,
            hidden_hits,
            task,
        }
    }

    /// A kubeconfig that reaches the apiserver only through this proxy.
    fn kubeconfig(&self, dir: &tempfile::TempDir) -> std::path::PathBuf {
        let path = dir.path().join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: proxy, cluster: {{server: \"{}\"}}}}]\n\
             users: [{{name: proxy, user: {{}}}}]\n\
             contexts: [{{name: proxy, context: {{cluster: proxy, user: proxy}}}}]\n\
             current-context: proxy\n",
            self.url
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// `exo operator run` stops at once when a CRD is not installed: exit code
/// 2 and a message naming exactly the missing CRD.
#[tokio::test]
async fn a_missing_crd_stops_the_operator_with_a_message_naming_it() {
    let ns = restricted_namespace("op-nocrd").await;
    let crds = [
        ("agents", "agents.autonomic.sh"),
        ("tools", "tools.autonomic.sh"),
        ("agentfs", "agentfs.autonomic.sh"),
    ];
    for (plural, crd) in crds {
        let proxy = HidingProxy::start(ns.client.clone(), plural).await;
        let dir = support::scratch();
        let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_exo"))
            .args(["operator", "run", "--namespace", &ns.name])
            .args(["--lease-namespace", &ns.name, "--identity", "nocrd"])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .env("KUBECONFIG", proxy.kubeconfig(&dir))
            .env("RUST_LOG", "info,kube=warn")
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .unwrap_or_else(|_| panic!("the operator kept running without the {crd} CRD"))
            .expect("run exo operator run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{crd}: {stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with("exo operator: "))
            .unwrap_or_else(|| panic!("{crd}: no error line in\n{stderr}"));
        assert!(
            line.contains(&format!("the {crd} CRD is not installed")),
            "{line}"
        );
        for (_, other) in crds.iter().filter(|(_, c)| *c != crd) {
            assert!(
                !stderr.contains(other),
                "{crd} missing, {other} named:\n{stderr}"
            );
        }
        assert!(
            proxy.hidden_hits.load(Ordering::SeqCst) > 0,
            "{crd}: the operator never asked for it"
        );
    }
}
