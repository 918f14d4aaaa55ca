//! Running the operator as a real process (`exo operator run`) scoped to a
//! test namespace, reading its endpoints, and fixtures for its resources.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use exo::crd::{Agent, AgentFS, AgentSpec, Container, FilesystemMount, Tool, ToolSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::{env, eventually};

/// An image reference pinned by a made-up digest: `n` picks the digest.
pub fn image(repo: &str, n: u8) -> String {
    format!(
        "example.invalid/{repo}@sha256:{}",
        format!("{n:02x}").repeat(32)
    )
}

/// `Agent::test(name)`-style fixture: a long-running agent with pinned
/// images and a baseline version.
pub fn agent(name: &str) -> Agent {
    Agent::new(
        name,
        AgentSpec {
            runtime: Container {
                image: image("runtime", 1),
                ..Container::default()
            },
            agentlet: Container {
                image: image("agentlet", 1),
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

/// Creates the ConfigMap `persona-0001` that the [`agent`] fixture's
/// baseline names (the seam makes a pod only once its volumes are there).
pub async fn create_baseline(ns: &super::TestNamespace) {
    let baseline: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "persona-0001" }, "data": { "persona.md": "test" }
        }))
        .expect("ConfigMap fixture");
    create(&ns.api(), &baseline).await;
}

/// An [`agent`] `name` (its baseline created too) that mounts the AgentFS
/// `fs` read-write, waited for until it is Active.
pub async fn active_agent_mounting(ns: &super::TestNamespace, name: &str, fs: &str) {
    create_baseline(ns).await;
    let mut a = agent(name);
    a.spec.filesystems = Some(vec![mount(fs, None, false)]);
    create(&ns.api::<Agent>(), &a).await;
    wait_for(&ns.api::<Agent>(), name, "Active", |a| {
        a.status.as_ref().and_then(|s| s.phase) == Some(exo::crd::AgentPhase::Active)
    })
    .await;
}

pub fn mount(name: &str, path: Option<&str>, read_only: bool) -> FilesystemMount {
    FilesystemMount {
        name: name.into(),
        mount_path: path.map(Into::into),
        read_only,
    }
}

pub fn tool(name: &str, enabled: bool) -> Tool {
    Tool::new(
        name,
        ToolSpec {
            container: Container {
                image: image("tool", 1),
                ..Container::default()
            },
            enabled,
            port: Some(9000),
            node_tier: None,
            run_as_user: None,
        },
    )
}

pub fn agentfs(name: &str, size: &str, max: &str, retain: bool) -> AgentFS {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
        "metadata": { "name": name },
        "spec": { "size": size, "maxSize": max, "retain": retain }
    }))
    .expect("AgentFS fixture")
}

pub async fn create<K>(api: &Api<K>, obj: &K) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&PostParams::default(), obj)
        .await
        .expect("create")
}

/// Waits until `check` holds for the object, returning it.
pub async fn wait_for<K, F>(api: &Api<K>, name: &str, what: &str, check: F) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    F: Fn(&K) -> bool,
{
    eventually(what, Duration::from_secs(30), || {
        let api = api.clone();
        let check = &check;
        async move { api.get_opt(name).await.ok().flatten().filter(|o| check(o)) }
    })
    .await
}

pub async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(what, Duration::from_secs(30), || {
        let api = api.clone();
        async move { matches!(api.get_opt(name).await, Ok(None)).then_some(()) }
    })
    .await
}

/// Deletes `name` expecting the apiserver to refuse it, and returns the
/// refusal. A policy applied a moment ago takes a moment to be in force:
/// server-side dry runs (which run admission, and delete nothing) go first
/// until one is refused.
pub async fn delete_refused<K>(api: &Api<K>, name: &str) -> kube::core::Status
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let dry = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    eventually(
        &format!("the apiserver to refuse deleting {name}"),
        Duration::from_secs(30),
        || async { api.delete(name, &dry).await.is_err().then_some(()) },
    )
    .await;
    match api.delete(name, &DeleteParams::default()).await {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("deleting {name} was not refused by the apiserver: {other:?}"),
    }
}

/// The pods the Agent (`component` "agent") or Tool ("tool") `name` has
/// now, found by label: pod names carry the template hash.
pub async fn pods_of(pods: &Api<Pod>, component: &str, name: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("autonomic.sh/{component}={name}")))
        .await
        .expect("list pods")
        .items
}

/// Waits until the owner has exactly one pod, not terminating, for which
/// `check` holds, and returns it.
pub async fn wait_pod<F>(pods: &Api<Pod>, component: &str, name: &str, what: &str, check: F) -> Pod
where
    F: Fn(&Pod) -> bool,
{
    eventually(what, Duration::from_secs(30), || {
        let check = &check;
        async move {
            match pods_of(pods, component, name).await.as_slice() {
                [p] if p.metadata.deletion_timestamp.is_none() && check(p) => Some(p.clone()),
                _ => None,
            }
        }
    })
    .await
}

/// The owner's one live pod.
pub async fn the_pod(pods: &Api<Pod>, component: &str, name: &str) -> Pod {
    wait_pod(
        pods,
        component,
        name,
        &format!("the one pod of {component} {name}"),
        |_| true,
    )
    .await
}

/// The name of the owner's one live pod.
pub async fn pod_name(pods: &Api<Pod>, component: &str, name: &str) -> String {
    the_pod(pods, component, name)
        .await
        .metadata
        .name
        .expect("pod name")
}

/// Waits until the owner has no pod at all.
pub async fn wait_no_pod(pods: &Api<Pod>, component: &str, name: &str, what: &str) {
    eventually(what, Duration::from_secs(30), || async move {
        pods_of(pods, component, name)
            .await
            .is_empty()
            .then_some(())
    })
    .await
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One `exo operator run` process watching one namespace, with its Lease
/// in that namespace. Killed when dropped.
pub struct OperatorProcess {
    child: Child,
    pub addr: String,
    pub identity: String,
    pub log: PathBuf,
}

impl OperatorProcess {
    /// Starts a replica with a 3 s Lease named `exo-operator`.
    pub fn start(namespace: &str, identity: &str) -> Self {
        Self::start_with(namespace, identity, &[])
    }

    pub fn start_with(namespace: &str, identity: &str, extra: &[&str]) -> Self {
        Self::start_env(namespace, identity, extra, &[])
    }

    /// With extra environment (e.g. `AUTONOMIC_MANAGED` for the upstream
    /// connection).
    pub fn start_env(
        namespace: &str,
        identity: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Self {
        let lease_ns = ["--lease-namespace", namespace];
        Self::spawn(
            namespace,
            identity,
            &lease_ns,
            extra,
            &env().kubeconfig,
            envs,
        )
    }

    /// A managed replica: its upstream connection dials the control plane
    /// at `base` with a deployment `token`.
    pub fn start_managed(
        namespace: &str,
        identity: &str,
        extra: &[&str],
        base: &str,
        token: &str,
    ) -> Self {
        Self::start_env(
            namespace,
            identity,
            extra,
            &[
                ("AUTONOMIC_MANAGED", "true"),
                ("AUTONOMIC_BASE_URL", base),
                ("AUTONOMIC_AUTH_TOKEN", token),
            ],
        )
    }

    /// A replica with its own kubeconfig and Lease namespace.
    pub fn start_as(
        namespace: &str,
        identity: &str,
        lease_namespace: &str,
        kubeconfig: &std::path::Path,
    ) -> Self {
        Self::spawn(
            namespace,
            identity,
            &["--lease-namespace", lease_namespace],
            &[],
            kubeconfig,
            &[],
        )
    }

    fn spawn(
        namespace: &str,
        identity: &str,
        lease: &[&str],
        extra: &[&str],
        kubeconfig: &std::path::Path,
        envs: &[(&str, &str)],
    ) -> Self {
        let addr = format!("127.0.0.1:{}", free_port());
        let log = std::env::temp_dir().join(format!("exo-operator-{namespace}-{identity}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_exo"))
            .args(["operator", "run", "--namespace", namespace])
            .args(lease)
            .args([
                "--identity",
                identity,
                "--metrics-addr",
                &addr,
                "--lease-duration",
                "3",
            ])
            .args(["--log-format", "json"])
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,kube=warn")
            // Managed operators serve the upstream /health too; on its
            // default port, a second one started in parallel would exit.
            .env(
                "EXO_UPSTREAM_HEALTH_ADDR",
                format!("127.0.0.1:{}", free_port()),
            )
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("start exo operator run");
        OperatorProcess {
            child,
            addr,
            identity: identity.to_owned(),
            log,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GET `path`; `(status, body)` or `None` if not listening.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(&self.addr, path)
    }

    /// The value of the sample `metric{labels}` on the operator's
    /// `/metrics` page, if it shows it.
    pub fn sample(&self, metric: &str, labels: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics")?;
        let want = format!("{metric}{{{labels}}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&want))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Waits (up to `timeout`) for the sample `metric{labels}` to be `want`.
    pub async fn until_sample(&self, metric: &str, labels: &str, want: f64, timeout: Duration) {
        eventually(
            &format!("{metric}{{{labels}}} to be {want}"),
            timeout,
            || async { (self.sample(metric, labels) == Some(want)).then_some(()) },
        )
        .await;
    }

    pub async fn wait_ready(&self) {
        eventually(
            &format!("operator {} to be ready", self.identity),
            Duration::from_secs(30),
            || async { (self.get("/readyz")?.0 == 200).then_some(()) },
        )
        .await;
    }

    pub async fn wait_leader(&self) {
        eventually(
            &format!("operator {} to lead", self.identity),
            Duration::from_secs(30),
            || async {
                self.metric("exo_operator_leader")
                    .filter(|v| *v == 1)
                    .map(|_| ())
            },
        )
        .await;
    }

    /// Sum of every sample of `name` in `/metrics`.
    pub fn metric(&self, name: &str) -> Option<u64> {
        let (_, body) = self.get("/metrics")?;
        Some(exo::cluster::metrics::sum_samples(&body, name))
    }

    /// Writes this replica made to the API (all kinds, all verbs), but
    /// for its Lease's.
    pub fn writes(&self) -> u64 {
        let (_, body) = self.get("/metrics").expect("metrics endpoint");
        exo::cluster::metrics::object_writes(&body)
    }

    /// SIGKILL: no chance to release the Lease.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait: a graceful stop that releases the Lease.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().expect("wait for the operator")
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A namespace that enforces the `restricted` Pod Security Standard, with
/// the CRDs installed and one operator watching it.
pub async fn restricted_namespace(prefix: &str) -> super::TestNamespace {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Patch, PatchParams};
    let ns = super::TestNamespace::new(prefix).await;
    super::install_crds(&ns.client).await;
    Api::<Namespace>::all(ns.client.clone())
        .patch(
            &ns.name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest"
            }}})),
        )
        .await
        .expect("label the namespace restricted");
    ns
}

/// `GET path` over plain HTTP/1.0: (status, body).
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

/// The hostPath folder of the volume bound to `claim` (the test
/// environment's provisioner makes hostPath volumes).
pub async fn volume_folder(ns: &super::TestNamespace, claim: &str) -> PathBuf {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    let pvc = ns.api::<PersistentVolumeClaim>().get(claim).await.unwrap();
    let pv_name = pvc.spec.unwrap().volume_name.expect("a bound claim");
    let pv = Api::<PersistentVolume>::all(ns.client.clone())
        .get(&pv_name)
        .await
        .unwrap();
    PathBuf::from(pv.spec.unwrap().host_path.expect("a hostPath volume").path)
}

/// The token the operator made for `agent` in `ns` (its Secret's `token`).
pub async fn agent_token(ns: &str, agent: &str) -> String {
    let client = super::client().await;
    let s = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client, ns)
        .get(&exo::cluster::build::agent_secret_name(agent))
        .await
        .unwrap();
    String::from_utf8(s.data.unwrap()[exo::meta::TOKEN_KEY].0.clone()).unwrap()
}
