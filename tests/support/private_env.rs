//! A test environment of one test binary's own: `scripts/testenv up` in a
//! folder of its own, on ports 50 past the shared environment's. The
//! scenarios that stop etcd or the apiserver run on it, so that no other
//! suite shares their outage. Or a second cluster alone
//! ([`PrivateEnv::cluster_only`], ports 70 past), beside the shared
//! environment whose registry, git and PostgreSQL it shares. It is taken
//! down (and its folder removed) when dropped, also on a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How far this environment's ports are from the shared one's (which may be
/// shifted itself, by `EXO_TESTENV_PORT_OFFSET`).
const PORT_SHIFT: u32 = 50;

/// Likewise for a cluster-only environment: apart from the shared one's
/// and from a full private one's (etcd's peer port is 10 above its client
/// port, so shifts 10 apart would collide).
const CLUSTER_PORT_SHIFT: u32 = 70;

pub struct PrivateEnv {
    pub state: PathBuf,
    offset: u32,
    /// Only the Kubernetes parts (`EXO_TESTENV_CLUSTER_ONLY=1`).
    cluster_only: bool,
}

fn testenv() -> PathBuf {
    super::repo_root().join("scripts/testenv")
}

impl PrivateEnv {
    /// Brings the environment up and points every helper of this binary at
    /// it (`support::use_env`).
    pub fn up(name: &str) -> Self {
        let env = Self::bring_up(name, PORT_SHIFT, false);
        super::use_env(&env.state);
        env
    }

    /// Brings up a second cluster alone (`scripts/testenv` in cluster-only
    /// mode: etcd, the apiserver, controller-manager, scheduler, kwok and
    /// the volume provisioner) and leaves this binary's helpers on the
    /// shared environment: its registry, git and PostgreSQL serve both.
    pub fn cluster_only(name: &str) -> Self {
        Self::bring_up(name, CLUSTER_PORT_SHIFT, true)
    }

    fn bring_up(name: &str, shift: u32, cluster_only: bool) -> Self {
        let shared: u32 = std::env::var("EXO_TESTENV_PORT_OFFSET")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let state = std::env::temp_dir().join(format!("exo-{name}-{}", std::process::id()));
        // Not a tempfile folder (0700): the PostgreSQL server runs as its own
        // user and must reach its folder inside.
        std::fs::create_dir_all(&state).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let env = PrivateEnv {
            state,
            offset: shared + shift,
            cluster_only,
        };
        println!(
            "private test environment{} in {} (ports +{})",
            if cluster_only { " (cluster only)" } else { "" },
            env.state.display(),
            env.offset
        );
        env.run(&["up"]);
        env
    }

    /// `scripts/testenv ARGS` on this environment; panics with its output
    /// when it fails.
    pub fn run(&self, args: &[&str]) {
        let out = self
            .testenv()
            .args(args)
            .output()
            .expect("run scripts/testenv");
        assert!(
            out.status.success(),
            "scripts/testenv {args:?} in {}: {}\n{}{}",
            self.state.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops `etcd` or `kube-apiserver` (SIGTERM, then SIGKILL after 5 s).
    pub fn stop(&self, name: &str) {
        self.run(&["stop", name]);
    }

    /// Starts it again and waits until it answers (etcd keeps its data).
    pub fn start(&self, name: &str) {
        self.run(&["start", name]);
    }

    fn etcd(&self) -> String {
        let text = std::fs::read_to_string(self.state.join("env")).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("EXO_TEST_ETCD="))
            .expect("EXO_TEST_ETCD in the env file")
            .to_owned()
    }

    /// A POST of `body` to etcd's JSON gateway (`/v3/...`).
    fn etcd_post(&self, path: &str, body: &serde_json::Value) -> serde_json::Value {
        let out = Command::new("curl")
            .args(["-sf", "-X", "POST", "--data-binary"])
            .arg(body.to_string())
            .arg(format!("{}{path}", self.etcd()))
            .output()
            .expect("run curl");
        assert!(
            out.status.success(),
            "etcd {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Compacts etcd at its current revision (physically), so that nothing
    /// older can be watched from it any more; returns that revision.
    pub fn compact(&self) -> u64 {
        // Any read answers with the store's revision in its header.
        let head = self.etcd_post("/v3/kv/range", &serde_json::json!({"key": "L3JlZ2lzdHJ5"}));
        let revision: u64 = head["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("no revision in {head}"));
        self.etcd_post(
            "/v3/kv/compaction",
            &serde_json::json!({"revision": revision.to_string(), "physical": true}),
        );
        revision
    }

    /// The log of one of its processes.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.state.join("logs").join(format!("{name}.log")))
            .unwrap_or_default()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.state.join("kubeconfig")
    }

    /// A kube client for its admin.
    pub async fn client(&self) -> kube::Client {
        super::client_for(&self.kubeconfig()).await
    }

    /// `scripts/testenv` on this environment, arguments to add. Its ports
    /// come from its offset alone: a port set for the shared environment
    /// (`EXO_TESTENV_GITEA_PORT`, ...) would be that one's.
    fn testenv(&self) -> Command {
        let mut c = Command::new(testenv());
        for (key, _) in std::env::vars_os() {
            if key
                .to_str()
                .is_some_and(|k| k.starts_with("EXO_TESTENV_") && k.ends_with("_PORT"))
            {
                c.env_remove(key);
            }
        }
        c.env("EXO_TESTENV_DIR", &self.state)
            .env("EXO_TESTENV_PORT_OFFSET", self.offset.to_string())
            .env(
                "EXO_TESTENV_CLUSTER_ONLY",
                if self.cluster_only { "1" } else { "0" },
            );
        c
    }

    pub fn path(&self) -> &Path {
        &self.state
    }
}

impl Drop for PrivateEnv {
    fn drop(&mut self) {
        let _ = self.testenv().arg("down").output();
        let _ = std::fs::remove_dir_all(&self.state);
    }
}
