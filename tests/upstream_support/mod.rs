#![allow(clippy::expect_used, clippy::unwrap_used, dead_code)] // test code
//! Real processes for the upstream tests: `exo control-plane serve` and
//! `exo operator connect` (the binary under test), plus a tiny HTTP client
//! for their JSON endpoints. Children are killed when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

pub mod raw;
pub mod shell;

pub fn exo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_exo"))
}

/// Reads the first stdout line of a child and returns what follows `prefix`.
fn first_line(child: &mut Child, prefix: &str, log: &Path) -> String {
    let out = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .expect("read stdout");
    line.trim()
        .strip_prefix(prefix)
        .unwrap_or_else(|| {
            panic!(
                "expected {prefix:?} on stdout, got {line:?}; stderr:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        })
        .to_owned()
}

/// Which store the control planes of this run use:
/// `EXO_TEST_CP_BACKEND=postgres` runs every suite on a fresh PostgreSQL
/// database per control plane (`scripts/test` does both).
pub fn postgres_backend() -> bool {
    match std::env::var("EXO_TEST_CP_BACKEND").as_deref() {
        Ok("postgres") => true,
        Ok("sqlite") | Err(_) => false,
        Ok(other) => panic!("EXO_TEST_CP_BACKEND={other:?}: use sqlite or postgres"),
    }
}

/// A fresh PostgreSQL database (its URL), made on a thread of its own so
/// that sync and async tests alike can call it.
pub fn fresh_postgres(prefix: &str) -> String {
    let prefix = prefix.to_owned();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(crate::support::postgres::fresh_database(&prefix))
    })
    .join()
    .expect("create a test database")
}

pub struct ControlPlane {
    pub dir: tempfile::TempDir,
    /// `--db`: the SQLite file in `dir`, or a PostgreSQL URL.
    pub db: String,
    pub base: String,
    pub addr: String,
    args: Vec<String>,
    child: Option<Child>,
    starts: u32,
}

impl ControlPlane {
    pub fn db(&self) -> &str {
        &self.db
    }

    /// Starts a control plane on a free port with `extra` flags, on the
    /// run's backend ([`postgres_backend`]).
    pub fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = if postgres_backend() {
            fresh_postgres("cp")
        } else {
            dir.path().join("cp.sqlite").display().to_string()
        };
        Self::start_on(dir, db, extra)
    }

    /// Starts a control plane on `db` (a replica, when several share one
    /// PostgreSQL database).
    pub fn start_on(dir: tempfile::TempDir, db: String, extra: &[&str]) -> Self {
        let mut cp = ControlPlane {
            dir,
            db,
            base: String::new(),
            addr: "127.0.0.1:0".into(),
            args: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
            starts: 0,
        };
        cp.spawn();
        cp
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let log = self.dir.path().join(format!("cp-{}.log", self.starts));
        let mut child = exo()
            .arg("control-plane")
            .arg("--db")
            .arg(self.db())
            .args(["serve", "--listen", &self.addr])
            .args(&self.args)
            .env(
                "RUST_LOG",
                std::env::var("EXO_TEST_CP_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn control plane");
        self.base = first_line(&mut child, "listening on ", &log);
        self.addr = self.base.trim_start_matches("http://").to_owned();
        self.child = Some(child);
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` (e.g. `-INT`, `-TERM`) and waits for the exit.
    pub fn signal(&mut self, signal: &str) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("a running control plane");
        send_signal(c.id(), signal);
        c.wait().expect("wait for the control plane")
    }

    /// Starts again (after [`ControlPlane::signal`]) on the same address
    /// and database.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "still running");
        self.spawn();
    }

    /// Kills and starts again on the same address and database.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn admin(&self, args: &[&str]) -> std::process::Output {
        exo()
            .arg("control-plane")
            .arg("--db")
            .arg(self.db())
            .args(args)
            .output()
            .expect("run exo control-plane")
    }

    /// Creates a deployment and returns its token (printed once on stdout).
    pub fn create_deployment(&self, name: &str) -> String {
        let out = self.admin(&["deployment", "create", name]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        assert!(token.starts_with("exo_dt_"), "token line: {token}");
        token
    }

    /// `admin-token create`: `(token, id)`. The token was printed on stdout
    /// only; its id goes to stderr.
    pub fn create_admin_token(&self) -> (String, String) {
        let out = self.admin(&["admin-token", "create"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        assert!(token.starts_with("exo_at_"), "stdout holds no admin token");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains(&token));
        let id = err
            .split_whitespace()
            .find(|w| w.starts_with("adm_"))
            .unwrap_or_else(|| panic!("no id in {err:?}"))
            .to_owned();
        (token, id)
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        http(&self.addr, "GET", path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        http(&self.addr, "POST", path, Some(body))
    }

    /// The deployment's stored alerts (newest first), or its active ones
    /// (`active`: longest active first).
    pub fn alerts(&self, deployment: &str, active: bool) -> Vec<Value> {
        let (path, field) = if active {
            ("alerts/active", "active")
        } else {
            ("alerts", "alerts")
        };
        let (status, v) = self.get(&format!("/api/v1/deployments/{deployment}/{path}"));
        assert_eq!(status, 200, "{v}");
        v[field].as_array().cloned().unwrap_or_default()
    }

    pub fn deployment(&self, name: &str) -> Value {
        let (status, v) = self.get(&format!("/api/v1/deployments/{name}"));
        assert_eq!(status, 200, "{v}");
        v
    }

    /// `(name, resourceVersion)` of a kind, sorted.
    pub fn resources(&self, name: &str, kind: &str) -> Vec<(String, String)> {
        let (_, v) = self.get(&format!("/api/v1/deployments/{name}/resources"));
        let mut out: Vec<(String, String)> = v["resources"]
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .filter(|r| r["kind"] == kind)
            .map(|r| {
                (
                    r["name"].as_str().unwrap_or_default().to_owned(),
                    r["resourceVersion"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        out.sort();
        out
    }

    pub fn stats(&self) -> Value {
        self.get("/api/v1/stats").1
    }

    pub fn log(&self) -> String {
        (1..=self.starts)
            .map(|i| {
                std::fs::read_to_string(self.dir.path().join(format!("cp-{i}.log")))
                    .unwrap_or_default()
            })
            .collect()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A minimal HTTP/1.1 client (one request per connection) for JSON APIs.
pub fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status: u16 = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad response {resp:?}"));
    let text = resp.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    let v = serde_json::from_str(text).unwrap_or(Value::String(text.to_owned()));
    (status, v)
}

/// `exo operator connect` against a control plane, watching one namespace.
pub struct Connector {
    child: Child,
    pub health_addr: String,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Connector {
    pub fn start(base: &str, token: &str, namespace: &str, extra: &[&str]) -> Self {
        Self::start_env(base, &[("AUTONOMIC_AUTH_TOKEN", token)], namespace, extra)
    }

    /// Like [`Connector::start`] with the token and anything else given by
    /// `env`, e.g. `[("AUTONOMIC_AUTH_TOKEN_FILE", path)]`.
    pub fn start_env(base: &str, env: &[(&str, &str)], namespace: &str, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("connector.log");
        let mut child = exo()
            .args([
                "operator",
                "connect",
                "--namespace",
                namespace,
                "--health-listen",
                "127.0.0.1:0",
            ])
            .args(extra)
            .env("KUBECONFIG", &crate::support::env().kubeconfig)
            .env("AUTONOMIC_MANAGED", "true")
            .env("AUTONOMIC_BASE_URL", base)
            .envs(env.iter().copied())
            .env(
                "RUST_LOG",
                std::env::var("EXO_TEST_CP_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn connector");
        let url = first_line(&mut child, "health on ", &log);
        let health_addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/health")
            .to_owned();
        Connector {
            child,
            health_addr,
            log,
            _dir: dir,
        }
    }

    pub fn health(&self) -> Value {
        http(&self.health_addr, "GET", "/health", None).1
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Connector {
    /// Sends `signal` (e.g. `-TERM`) and waits for the exit.
    pub fn signal(&mut self, signal: &str) -> std::process::ExitStatus {
        send_signal(self.child.id(), signal);
        self.child.wait().expect("wait for the connector")
    }
}

/// `kill SIGNAL PID`.
pub fn send_signal(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill {signal} {pid}");
}

/// The `connection.closed` outcomes of a deployment's audit, oldest first.
pub fn closes(cp: &ControlPlane, deployment: &str) -> Vec<String> {
    let (status, v) = cp.get(&format!(
        "/api/v1/deployments/{deployment}/audit?limit=10000"
    ));
    assert_eq!(status, 200, "{v}");
    let out: Vec<String> = v["audit"]
        .as_array()
        .expect("audit rows")
        .iter()
        .filter(|r| r["action"] == "connection.closed")
        .map(|r| r["outcome"].as_str().unwrap_or_default().to_owned())
        .collect();
    out
}

impl Drop for Connector {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The Python interpreter of `.venv-test/` (made by `scripts/py-deps`).
pub fn python() -> PathBuf {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    ONCE.call_once(|| {
        let st = Command::new(root.join("scripts/py-deps"))
            .status()
            .expect("run scripts/py-deps");
        assert!(st.success(), "scripts/py-deps failed");
    });
    root.join(".venv-test/bin/python")
}

pub fn python_client(base: &str, token: &str, mode: &str) -> Command {
    let mut c = Command::new(python());
    c.arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/client.py"))
        .args([base, mode])
        .env("EXO_TOKEN", token);
    c
}

/// The CRDs and the admission policy, as every other test installs them.
#[allow(unused_imports)] // not every test binary that shares this module calls it
pub use crate::support::install_crds;

/// A minimal Agent (runtime and agentlet pinned by a made-up digest).
pub fn agent(name: &str) -> exo::crd::Agent {
    let image = format!("registry.test/agent@sha256:{}", "a".repeat(64));
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "Agent",
        "metadata": { "name": name },
        "spec": { "runtime": { "image": image }, "agentlet": { "image": image } }
    }))
    .unwrap()
}

/// An AgentFS object.
pub fn agentfs(name: &str, size: &str) -> exo::crd::AgentFS {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
        "metadata": { "name": name },
        "spec": { "size": size, "maxSize": "10Gi" }
    }))
    .unwrap()
}

/// Polls the connector's /health until `pred` holds.
pub async fn connector_until(c: &Connector, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    crate::support::eventually(what, Duration::from_secs(30), || {
        let h = c.health();
        let ok = pred(&h);
        async move { ok.then_some(h) }
    })
    .await
}

/// A control plane with deployment `deployment`, and a managed
/// `exo operator run` watching `namespace` that leads and is connected to it
/// with its capabilities.
pub async fn managed_operator(
    namespace: &str,
    deployment: &str,
) -> (ControlPlane, crate::support::operator::OperatorProcess) {
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment(deployment);
    let op = crate::support::operator::OperatorProcess::start_managed(
        namespace,
        "a",
        &[],
        &cp.base,
        &token,
    );
    op.wait_leader().await;
    crate::support::eventually(
        "the operator to connect with its capabilities",
        Duration::from_secs(30),
        || async {
            let d = cp.deployment(deployment);
            (d["connected"] == true
                && d["capabilities"]
                    .as_array()?
                    .iter()
                    .any(|c| c == "mount-filesystems"))
            .then_some(())
        },
    )
    .await;
    (cp, op)
}

/// A control plane older than the `Rollout`, `Tenant`, `App` and
/// `AnalysisRun` kinds: its `welcome` has no `accepts_rollouts`,
/// `accepts_tenants`, `accepts_apps` or `accepts_analysis_runs` (and it
/// would close the connection on any of them). Accepts one connection, answers
/// its hello, and returns every resource frame's `(kind, name)` until an
/// AgentFS named `until` has arrived in a delta.
pub async fn older_peer(
    until: &'static str,
) -> (String, tokio::task::JoinHandle<Vec<(String, String)>>) {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let mut seen = Vec::new();
        while let Some(Ok(msg)) = ws.next().await {
            let Message::Text(t) = msg else { continue };
            let f: Value = serde_json::from_str(t.as_str()).unwrap();
            let of = |r: &Value| {
                (
                    r["kind"].as_str().unwrap().to_owned(),
                    r["name"].as_str().unwrap().to_owned(),
                )
            };
            match f["type"].as_str().unwrap() {
                "hello" => {
                    let welcome = serde_json::json!({ "type": "welcome", "protocol": 1,
                        "deployment": "old", "connection_id": f["connection_id"],
                        "heartbeat_interval_ms": 15000 });
                    ws.send(Message::Text(welcome.to_string().into()))
                        .await
                        .unwrap();
                }
                "snapshot" => seen.extend(f["resources"].as_array().unwrap().iter().map(of)),
                "delta" => {
                    let r = of(&f["resource"]);
                    let done = r.0 == "AgentFS" && r.1 == until;
                    seen.push(r);
                    if done {
                        return seen;
                    }
                }
                _ => {}
            }
        }
        seen
    });
    (base, task)
}

/// `operator connect` where the apiserver hides one kind (a proxy answers
/// the apiserver's own 404 for `plural`) streams every other kind: the
/// first snapshot (one AgentFS) does not wait for the kind it cannot list,
/// and the connector says so in its log.
pub async fn streams_the_rest_without(
    prefix: &str,
    plural: &'static str,
    kind: &str,
    plural_kind: &str,
) {
    use kube::api::PostParams;
    let ns = crate::support::TestNamespace::new(prefix).await;
    install_crds(&ns.client).await;
    ns.api::<exo::crd::AgentFS>()
        .create(&PostParams::default(), &agentfs("kept", "1Gi"))
        .await
        .unwrap();
    let proxy = crate::support::proxy::HidingProxy::start(ns.client.clone(), plural).await;
    let dir = crate::support::scratch();
    let kubeconfig = proxy.kubeconfig(&dir);
    let cp = ControlPlane::start(&[]);
    let deployment = prefix.trim_start_matches("up-");
    let token = cp.create_deployment(deployment);
    let c = Connector::start_env(
        &cp.base,
        &[
            ("AUTONOMIC_AUTH_TOKEN", &token),
            ("KUBECONFIG", kubeconfig.to_str().unwrap()),
        ],
        &ns.name,
        &[],
    );
    crate::support::eventually(
        &format!("the snapshot without {plural_kind}"),
        Duration::from_secs(30),
        || async { (cp.resources(deployment, "AgentFS").len() == 1).then_some(()) },
    )
    .await;
    assert!(cp.resources(deployment, kind).is_empty());
    assert_eq!(cp.deployment(deployment)["snapshots_completed"], 1);
    assert!(
        proxy.hidden_hits.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the connection never asked for {plural_kind}"
    );
    assert!(
        c.log().contains(&format!("{plural_kind} cannot be listed")),
        "{}",
        c.log()
    );
}

/// Towards a control plane older than `kind` (an [`older_peer`]), `exo
/// operator connect` in `ns` streams the other kinds and none of `kind`:
/// an AgentFS made before the connection and one made after `change` (a
/// change to the `kind` object the test made) arrive, the `kind` object
/// never does, and the connector says it holds `plural_kind` back.
pub async fn an_older_peer_gets_no<T>(
    ns: &crate::support::TestNamespace,
    kind: &str,
    plural_kind: &str,
    change: impl std::future::Future<Output = T>,
) {
    use kube::api::PostParams;
    let fs = ns.api::<exo::crd::AgentFS>();
    fs.create(&PostParams::default(), &agentfs("before", "1Gi"))
        .await
        .unwrap();
    let (base, peer) = older_peer("after").await;
    let c = Connector::start(&base, "exo_dt_not_checked_by_this_peer", &ns.name, &[]);
    crate::support::eventually("the connection", Duration::from_secs(30), || async {
        (c.health()["state"] == "connected").then_some(())
    })
    .await;
    // A change of the kind, then an AgentFS one: the peer reads until the latter.
    let _ = change.await;
    fs.create(&PostParams::default(), &agentfs("after", "1Gi"))
        .await
        .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(40), peer)
        .await
        .expect("the AgentFS delta")
        .unwrap();
    assert!(
        seen.contains(&("AgentFS".into(), "before".into())),
        "{seen:?}"
    );
    assert!(seen.iter().all(|(k, _)| k != kind), "{seen:?}");
    assert!(
        c.log().contains(&format!("does not take {plural_kind}")),
        "{}",
        c.log()
    );
}
