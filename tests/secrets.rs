#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Secrets are never printed (issue 16): canary values are planted where
//! the product handles secrets, the paths that touch them run against the
//! real components (control plane, `exo operator run` and `connect`, the
//! CLI, kube-apiserver, the basic-auth registry), with right and wrong
//! secrets, and then everything the run produced is scanned
//! (`support::canary`): no canary may appear anywhere, whole or in part.
//!
//! Not covered here: the dashboard's login form, sessions and event
//! stream (`tests/upstream_admin_auth.rs`), TLS, attach and fs sessions,
//! token rotation (`tests/upstream_token_rotation.rs`), push-hook secrets,
//! PostgreSQL's stored rows, and the operator's git fetch from a real https
//! git host (none in the test environment).

mod support;
mod upstream_support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use exo::crd::{Agent, Fleet, Rollout};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use oci_client::secrets::RegistryAuth;
use serde_json::{Value, json};
use support::canary::Canaries;
use support::operator::{OperatorProcess, create, wait_for};
use support::{TestNamespace, eventually};
use upstream_support::{Connector, ControlPlane, connector_until, exo, install_crds};

const WAIT: Duration = Duration::from_secs(60);

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every object of a kind in the namespace, as JSON.
async fn listed<K>(api: &Api<K>) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let items = api.list(&ListParams::default()).await.unwrap().items;
    serde_json::to_string(&items).unwrap()
}

fn object<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).unwrap()
}

/// The one listener here that is not the product or the test environment:
/// a git host that refuses every credential (the environment serves git
/// over git:// only, which carries none). It answers each request 401 with
/// a Basic challenge and keeps the `Authorization` values it was sent.
fn refusing_git_host() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut r = BufReader::new(conn);
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                if let Some((k, v)) = line.split_once(':')
                    && k.eq_ignore_ascii_case("authorization")
                {
                    keep.lock().unwrap().push(v.trim().to_owned());
                }
                line.clear();
            }
            let _ = r.get_mut().write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (addr, seen)
}

/// The Fleet's `Ready` condition as (reason, message).
async fn fleet_ready(fleets: &Api<Fleet>, name: &str) -> Option<(String, String)> {
    let f = fleets.get(name).await.ok()?;
    let c = f
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")?;
    Some((c.reason, c.message))
}

#[test]
fn the_scan_finds_a_canary_whole_in_part_and_encoded() {
    const V: &str = "canary-selftest-00112233445566778899aabb";
    for text in [
        format!("x {V} y"),
        "prefix canary-selftest-00112233…".to_owned(),
        "…33445566778899aa…".to_owned(),
        format!("\"auth\":\"{}\"", b64(&format!("user:{V}"))),
    ] {
        let c = Canaries::default();
        c.watch("self-test", V, 16);
        c.source("planted", text.as_str());
        assert_eq!(c.hits().len(), 1, "not found in {text:?}");
    }
    let c = Canaries::default();
    c.watch("self-test", V, 16);
    c.source(
        "clean",
        "canary-selftest-0011 and 4455667788 stay below the needles",
    );
    assert_eq!(c.assert_clean().0, 1);
}

#[tokio::test]
async fn no_secret_reaches_a_log_an_event_a_status_or_the_control_plane() {
    let started = Instant::now();
    let env = support::env();
    let c = Canaries::default();
    let ns = TestNamespace::new("secrets").await;
    install_crds(&ns.client).await;
    let n = ns.name.as_str();

    // `deployment create` and `admin-token create` print their token on
    // stdout, once, by design: those two outputs (kept by the helpers) are
    // the only output of the run left out of the scan.
    let mut cp = ControlPlane::start(&[]);
    let run_token = cp.create_deployment("run");
    let conn_token = cp.create_deployment("conn");
    let (admin, _) = cp.create_admin_token();
    c.watch("deployment token (operator run)", &run_token, 7);
    c.watch("deployment token (operator connect)", &conn_token, 7);
    c.watch("admin token", &admin, 7);
    let wrong_deployment = c.fresh("exo_dt_", "wrong-deployment-token");
    let wrong_admin = c.fresh("exo_at_", "wrong-admin-token");
    let git_password = c.fresh("", "git-password");
    let provider_key = c.fresh("sk-proj-", "provider-key");
    let wrong_registry = c.fresh("", "wrong-registry-password");
    let wrong_agent = c.fresh("", "wrong-agent-token");
    // The registry's htpasswd is the environment's, the same every run.
    c.watch("registry password", &env.registry_password, 0);
    let user = &env.registry_user;
    let right_auth = b64(&format!("{user}:{}", env.registry_password));
    let wrong_auth = b64(&format!("{user}:{wrong_registry}"));
    c.watch("docker config auth (right)", &right_auth, 0);
    c.watch("docker config auth (wrong)", &wrong_auth, 0);

    // The tenant's objects: a git credential, a provider key, a Fleet
    // using the one, an Agent and a Pod of the tenant's own using the
    // other (an Agent's env is plain by design and cannot name a Secret).
    let secrets: Api<Secret> = ns.api();
    for (name, data) in [
        (
            "git-credentials",
            json!({"username": "exo-git", "password": git_password}),
        ),
        ("provider-keys", json!({"OPENAI_API_KEY": provider_key})),
    ] {
        let s = json!({"metadata": {"name": name}, "stringData": data});
        create(&secrets, &object(s)).await;
    }
    let kubeconfig = kube::config::Kubeconfig::read_from(&env.kubeconfig).unwrap();
    let apiserver = kubeconfig.clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .server
        .clone();
    // First an https URL that is no git server: the kube-apiserver, whose
    // certificate libgit2 does not trust, so this fails in the TLS handshake
    // after the credentials were read from the Secret and before they are
    // asked for. The credential callback itself runs below.
    let https_url = format!("{}/fleet.git", apiserver.unwrap());
    let fleets: Api<Fleet> = ns.api();
    let spec = json!({"url": https_url, "allowInsecure": true, "interval": "2s",
                      "secretRef": "git-credentials"});
    // The scheduled audit takes a Fleet's tenants from the Rollouts
    // labelled with its name and namespace.
    let fleet = json!({"apiVersion": "autonomic.sh/v1alpha1", "kind": "Fleet",
                       "metadata": {"name": n}, "spec": spec});
    create(&fleets, &object(fleet)).await;
    // A Rollout makes the namespace a tenant of that Fleet for the audit;
    // the Fleet never syncs, so nothing drives it.
    let (fleet_label, ns_label) = (exo::meta::LABEL_FLEET, exo::meta::LABEL_FLEET_NAMESPACE);
    let labels = json!({ fleet_label: n, ns_label: n });
    let rollout = json!({"apiVersion": "autonomic.sh/v1alpha1", "kind": "Rollout",
        "metadata": {"name": exo::meta::ROLLOUT_NAME, "labels": labels},
        "spec": {"tenant": n, "wave": "fleet", "release": "r1", "commit": "0".repeat(40)}});
    create(&ns.api::<Rollout>(), &object(rollout)).await;
    create(&ns.api::<Agent>(), &upstream_support::agent("assistant")).await;
    let byo = json!({"metadata": {"name": "byo"}, "spec": {"containers": [{
        "name": "main", "image": "example.invalid/byo:1",
        "envFrom": [{"secretRef": {"name": "provider-keys"}}]}]}});
    create(&ns.api::<Pod>(), &object(byo)).await;

    // Deployment tokens from token files: `operator run` (managed, also
    // following the Fleet and auditing every second) and `operator connect`
    // with the right ones, a second `connect` with a wrong one.
    let dir = support::scratch();
    let token_file = |name: &str, token: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("{token}\n")).unwrap();
        p.display().to_string()
    };
    let run_file = token_file("run", &run_token);
    let cache = dir.path().join("gitops").display().to_string();
    let mut op = OperatorProcess::start_env(
        n,
        "a",
        &["--gitops-cache", &cache, "--audit-interval", "1s"],
        &[
            ("AUTONOMIC_MANAGED", "true"),
            ("AUTONOMIC_BASE_URL", &cp.base),
            ("AUTONOMIC_AUTH_TOKEN_FILE", &run_file),
        ],
    );
    let file = token_file("conn", &conn_token);
    let mut conn = Connector::start_env(&cp.base, &[("AUTONOMIC_AUTH_TOKEN_FILE", &file)], n, &[]);
    let file = token_file("wrong", &wrong_deployment);
    let mut wrong = Connector::start_env(&cp.base, &[("AUTONOMIC_AUTH_TOKEN_FILE", &file)], n, &[]);
    connector_until(&conn, "the right token to connect", |h| {
        h["state"] == "connected"
    })
    .await;
    connector_until(&wrong, "the wrong token to be refused", |h| {
        h["state"] == "unauthorized"
    })
    .await;
    op.wait_leader().await;

    // The admin token opens the API; every response is scanned.
    let api = |path: &str| -> Value {
        let (status, body) = c.request(&cp.addr, "GET", path, Some(&admin));
        assert_eq!(status, 200, "GET {path} as the admin");
        serde_json::from_str(&body).unwrap_or(Value::String(body))
    };
    for d in ["run", "conn"] {
        let what = format!("{d} connected, with the Agent and its pod upstream");
        eventually(&what, WAIT, || async {
            let up = api(&format!("/api/v1/deployments/{d}"))["connected"] == true;
            let r = api(&format!("/api/v1/deployments/{d}/resources"));
            let kinds: Vec<&str> = r["resources"]
                .as_array()?
                .iter()
                .filter_map(|x| x["kind"].as_str())
                .collect();
            (up && kinds.contains(&"Agent") && kinds.contains(&"Pod")).then_some(())
        })
        .await;
    }
    for path in [
        "/api/v1/deployments",
        "/api/v1/deployments/run",
        "/api/v1/deployments/run/resources",
        "/api/v1/deployments/run/audit",
        "/api/v1/deployments/run/alerts",
        "/api/v1/stats",
    ] {
        let (status, _) = c.request(&cp.addr, "GET", path, Some(&wrong_admin));
        assert_eq!(status, 401, "GET {path} with a wrong admin token");
    }

    // The per-agent token the operator made: a check-in with it is taken,
    // one with a wrong token refused.
    let name = exo::cluster::build::agent_secret_name("assistant");
    let s = wait_for(&secrets, &name, "the agent's token Secret", |_| true).await;
    let agent_token = s.data.unwrap()[exo::meta::TOKEN_KEY].0.clone();
    let agent_token = String::from_utf8(agent_token).unwrap();
    c.watch("agent token (made by the operator)", &agent_token, 0);
    let checkin = format!("/checkin/{n}/assistant");
    eventually("a check-in with the agent's token", WAIT, || async {
        (c.request(&op.addr, "POST", &checkin, Some(&agent_token)).0 == 204).then_some(())
    })
    .await;
    let (status, _) = c.request(&op.addr, "POST", &checkin, Some(&wrong_agent));
    assert_eq!(status, 401, "a check-in with a wrong token");

    // Registry password: `exo release pin` against the basic-auth registry
    // with a wrong password (refused), then the right one (pinned).
    let pushed = support::push_image(
        &env.registry_auth,
        "secrets/private",
        "1.0.0",
        b"secrets",
        &RegistryAuth::Basic(user.clone(), env.registry_password.clone()),
    )
    .await;
    let work = support::scratch();
    std::fs::create_dir_all(work.path().join("releases")).unwrap();
    std::fs::create_dir_all(work.path().join(".docker")).unwrap();
    let release = work.path().join("releases/r1.yaml");
    std::fs::write(
        &release,
        format!(
            "apiVersion: autonomic.sh/v1alpha1\nkind: Release\nmetadata:\n  name: r1\nspec:\n  \
             components:\n    - name: c0\n      layer: capability\n      \
             image: {}/secrets/private:1.0.0\n  waves: []\n",
            env.registry_auth
        ),
    )
    .unwrap();
    let pin = |auth: &str, what: &str| {
        let registry = env.registry_auth.as_str();
        let config = json!({"auths": {registry: {"auth": auth}}});
        std::fs::write(work.path().join(".docker/config.json"), config.to_string()).unwrap();
        let o = exo()
            .args(["release", "pin"])
            .current_dir(work.path())
            .env("DOCKER_CONFIG", work.path().join(".docker"))
            .output()
            .unwrap();
        c.source(format!("exo release pin ({what})"), text(&o));
        o
    };
    let o = pin(&wrong_auth, "wrong password");
    assert_eq!(o.status.code(), Some(2), "{}", c.redact(&text(&o)));
    assert!(
        text(&o).contains("refused the credentials"),
        "{}",
        c.redact(&text(&o))
    );
    let o = pin(&right_auth, "right password");
    assert_eq!(o.status.code(), Some(0), "{}", c.redact(&text(&o)));
    let pinned = std::fs::read_to_string(&release).unwrap();
    assert!(pinned.contains(&pushed.digest), "pinned by digest");

    // Git password: the https fetch fails; then the refusing host is
    // offered the Secret's credentials (libgit2's credential callback) and
    // refuses them.
    eventually("the https fetch to fail", WAIT, || async {
        let (reason, message) = fleet_ready(&fleets, n).await?;
        (reason == "FetchFailed" && message.contains(&https_url)).then_some(())
    })
    .await;
    let (host, seen) = refusing_git_host();
    let http_url = format!("http://{host}/fleet.git");
    let patch = Patch::Merge(json!({"spec": {"url": http_url}}));
    fleets
        .patch(n, &PatchParams::default(), &patch)
        .await
        .unwrap();
    eventually(
        "the refused credentials in the Fleet's status",
        WAIT,
        || async {
            let (reason, message) = fleet_ready(&fleets, n).await?;
            (reason == "FetchFailed" && message.contains(&http_url)).then_some(())
        },
    )
    .await;
    let sent = format!("Basic {}", b64(&format!("exo-git:{git_password}")));
    assert!(
        seen.lock().unwrap().contains(&sent),
        "the git password was offered to the git host"
    );

    // Provider key: `exo audit` and the operator's scheduled audit read the
    // tenant's Secrets and pods and report findings by name, upstream too.
    let o = exo()
        .args(["audit", "-n", n, "--rule", "credentials", "-o", "json"])
        .env("KUBECONFIG", &env.kubeconfig)
        .output()
        .unwrap();
    c.source("exo audit", text(&o));
    assert_eq!(o.status.code(), Some(1), "{}", c.redact(&text(&o)));
    assert!(
        text(&o).contains("provider-keys"),
        "the finding names the Secret"
    );
    eventually("the credentials finding upstream", WAIT, || async {
        let alerts = api("/api/v1/deployments/run/alerts").to_string();
        alerts.contains("audit/credentials").then_some(())
    })
    .await;
    eventually("AuditFinding Events", WAIT, || async {
        (!support::events(n, "AuditFinding").await.is_empty()).then_some(())
    })
    .await;

    // Collect: the API as an admin reads it, the connectors' /health, the
    // operator's /metrics, the admin CLI's listings, the namespace's Events
    // and objects (not its Secrets, which hold the canaries by design).
    for d in ["run", "conn"] {
        for sub in [
            "",
            "/resources",
            "/audit?limit=10000",
            "/alerts",
            "/alerts/active",
        ] {
            api(&format!("/api/v1/deployments/{d}{sub}"));
        }
    }
    api("/api/v1/deployments");
    api("/api/v1/stats");
    c.source("connect /health (right token)", conn.health().to_string());
    c.source("connect /health (wrong token)", wrong.health().to_string());
    c.source("operator /metrics", op.get("/metrics").unwrap().1);
    for args in [["deployment", "list"], ["admin-token", "list"]] {
        c.source(
            format!("exo control-plane {}", args.join(" ")),
            text(&cp.admin(&args)),
        );
    }
    c.source("Events", listed(&ns.api::<Event>()).await);
    c.source("Agents", listed(&ns.api::<Agent>()).await);
    c.source("Fleets", listed(&fleets).await);
    c.source("Rollouts", listed(&ns.api::<Rollout>()).await);
    c.source("Pods", listed(&ns.api::<Pod>()).await);

    // Stopping logs too; then every process's output.
    op.terminate();
    conn.signal("-TERM");
    wrong.signal("-TERM");
    cp.signal("-TERM");
    c.source("control plane log", cp.log());
    c.source("operator run log", op.log());
    c.source("operator connect log (right token)", conn.log());
    c.source("operator connect log (wrong token)", wrong.log());
    // The store keeps tokens as SHA-256 only (SQLite: the file and its WAL).
    if !upstream_support::postgres_backend() {
        let mut db = String::new();
        for suffix in ["", "-wal"] {
            if let Ok(bytes) = std::fs::read(format!("{}{suffix}", cp.db())) {
                db.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
        c.source("control plane database", db);
    }

    let (sources, bytes, lines) = c.assert_clean();
    eprintln!(
        "no canary in {sources} sources ({bytes} bytes, {lines} lines), {:.1?}",
        started.elapsed()
    );
    assert!(bytes > 20_000, "too little was scanned: {bytes} bytes");
}
