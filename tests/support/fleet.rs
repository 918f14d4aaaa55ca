//! A fleet served over git and a real `exo operator run` following it:
//! the fixture the GitOps tests share (`tests/rollout.rs`, `tests/gitops.rs`).
//! Tenants are the example fleet's, renamed `<prefix>-<tenant>` so each
//! test has its own namespaces.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use exo::crd::{Fleet as FleetCr, Rollout, RolloutPhase};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};

use super::TestNamespace;

pub const EXO: &str = env!("CARGO_BIN_EXE_exo");

pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The example fleet's files, tenants renamed `<prefix>-<tenant>`.
pub fn example_files(prefix: &str) -> BTreeMap<String, Vec<u8>> {
    pub fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut files = BTreeMap::new();
    for d in ["manifests", "releases", "configmaps"] {
        walk(repo_root(), &repo_root().join(d), &mut files);
    }
    let tenants = ["platform", "acme", "globex", "initech", "umbrella"];
    files
        .into_iter()
        .map(|(path, content)| {
            let mut path = path;
            for t in tenants {
                if let Some(rest) = path.strip_prefix(&format!("manifests/{t}/")) {
                    path = format!("manifests/{prefix}-{t}/{rest}");
                }
            }
            let mut content = content;
            if path.starts_with("releases/") {
                let text = String::from_utf8(content).unwrap();
                content = text
                    .replace("[platform]", &format!("[{prefix}-platform]"))
                    .replace("[acme]", &format!("[{prefix}-acme]"))
                    .into_bytes();
            }
            (path, content)
        })
        .collect()
}

pub fn tenants(prefix: &str) -> Vec<String> {
    ["platform", "acme", "globex", "initech", "umbrella"]
        .iter()
        .map(|t| format!("{prefix}-{t}"))
        .collect()
}

/// Appends `env` to the runtime (or tool) container of a manifest.
pub fn add_env(
    files: &mut BTreeMap<String, Vec<u8>>,
    path: &str,
    container_key: &str,
    name: &str,
    value: &str,
) {
    let text = String::from_utf8(files[path].clone()).unwrap();
    let needle = format!("  {container_key}:\n");
    assert!(text.contains(&needle), "{path} has no {container_key}");
    let text = text.replacen(
        &needle,
        &format!(
            "  {container_key}:\n    env:\n      - name: {name}\n        value: \"{value}\"\n"
        ),
        1,
    );
    files.insert(path.to_owned(), text.into_bytes());
}

pub struct Operator {
    pub child: Child,
    pub log: PathBuf,
    /// Where its /metrics (and the push receiver) are served.
    pub addr: String,
    _cache: tempfile::TempDir,
}

impl Operator {
    pub fn start(ns: &str, kubeconfig: &Path, identity: &str) -> Self {
        Self::start_with(ns, kubeconfig, identity, &[])
    }

    /// [`Operator::start`] with more arguments (e.g. `--audit-interval 1s`).
    pub fn start_with(ns: &str, kubeconfig: &Path, identity: &str, extra: &[&str]) -> Self {
        Self::start_env(ns, kubeconfig, identity, extra, &[])
    }

    /// [`Operator::start_with`] with more environment, e.g. `AUTONOMIC_*`
    /// for a managed operator connected to a control plane.
    pub fn start_env(
        ns: &str,
        kubeconfig: &Path,
        identity: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> Self {
        let cache = super::scratch();
        let addr = format!("127.0.0.1:{}", super::operator::free_port());
        let log = std::env::temp_dir().join(format!("exo-rollout-{ns}-{identity}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(EXO)
            .args([
                "operator",
                "run",
                "--lease-name",
                "exo-rollout-test",
                "--lease-namespace",
                ns,
            ])
            .args([
                "--identity",
                identity,
                "--lease-duration",
                "3",
                "--metrics-addr",
                &addr,
            ])
            .args([
                "--fleet-namespace",
                ns,
                "--verify-grace",
                "3",
                "--rollout-poll-ms",
                "200",
            ])
            .arg("--gitops-cache")
            .arg(cache.path())
            .args(extra)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,kube=warn")
            // A managed operator serves the upstream /health too; not on its
            // default port, which another test's operator may hold.
            .env(
                "EXO_UPSTREAM_HEALTH_ADDR",
                format!("127.0.0.1:{}", super::operator::free_port()),
            )
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start exo operator run");
        Operator {
            child,
            log,
            addr,
            _cache: cache,
        }
    }

    /// Sends `sig` (`-STOP`, `-CONT`, ...) with kill(1).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    /// SIGKILL: no cleanup, no Lease release.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The sum of a metric's samples on /metrics.
    pub fn metric(&self, name: &str) -> Option<u64> {
        let (_, body) = super::operator::http_get(&self.addr, "/metrics")?;
        Some(exo::cluster::metrics::sum_samples(&body, name))
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Writes the operator's key actuator Secret (`exo-key-actuator`) in `ns`.
pub async fn key_actuator(ns: &TestNamespace, fields: &[(&str, &str)]) {
    key_actuator_in(&ns.client, &ns.name, fields).await;
}

/// [`key_actuator`] in the namespace `ns` of the cluster `client` talks to.
pub async fn key_actuator_in(client: &kube::Client, ns: &str, fields: &[(&str, &str)]) {
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "exo-key-actuator", "namespace": ns},
        "stringData": fields.iter().map(|(k, v)| ((*k).to_owned(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
    }))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns)
        .patch(
            "exo-key-actuator",
            &kube::api::PatchParams::apply("exo-tests").force(),
            &kube::api::Patch::Apply(&secret),
        )
        .await
        .expect("write the key actuator Secret");
}

/// A fleet served over git, a local clone to run the CLI in, the namespace
/// holding the Fleet resource, and cleanup of the tenant namespaces.
pub struct Fixture {
    pub prefix: String,
    pub ns: TestNamespace,
    /// The served repository. On Gitea, `url` is Gitea's and `path` a
    /// local bare copy that [`Fixture::push`] and [`Fixture::served_file`]
    /// bring up to date with it first.
    pub repo: super::GitRepo,
    pub work: tempfile::TempDir,
    /// The repository on Gitea, for a fleet served there.
    pub gitea: Option<super::gitea::Repo>,
}

impl Fixture {
    pub async fn new(prefix: &str, files: BTreeMap<String, Vec<u8>>) -> Self {
        Self::with_spec(prefix, files, serde_json::json!({})).await
    }

    /// Like [`Fixture::new`], with more Fleet spec fields.
    pub async fn with_spec(
        prefix: &str,
        files: BTreeMap<String, Vec<u8>>,
        extra: serde_json::Value,
    ) -> Self {
        Self::build(prefix, files, extra, false).await
    }

    /// Like [`Fixture::new`], the fleet served by the test environment's
    /// Gitea (a public repository of its own, which the operator fetches
    /// over HTTP), and the clone allowed to push there with the admin's
    /// token (a credential store file): the CLI can open pull requests.
    pub async fn on_gitea(prefix: &str, files: BTreeMap<String, Vec<u8>>) -> Self {
        Self::build(prefix, files, serde_json::json!({}), true).await
    }

    async fn build(
        prefix: &str,
        files: BTreeMap<String, Vec<u8>>,
        extra: serde_json::Value,
        on_gitea: bool,
    ) -> Self {
        let ns = TestNamespace::new(prefix).await;
        super::install_crds(&ns.client).await;
        // The tenant sagas' key actuator: the Kubernetes one (a test that
        // needs none, or the HTTP one, replaces or deletes it).
        key_actuator(&ns, &[("type", "kubernetes")]).await;
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        let mut repo = super::create_git_repo(&format!("fleet-{prefix}"), &refs);
        let work = super::scratch();
        let store = work.path().join("git-credentials");
        let gitea = on_gitea.then(|| {
            let g = super::gitea::Gitea::get();
            let served = g.create_repo(&format!("fleet-{prefix}-{}", super::unique_suffix()));
            g.grant_push(&repo.path, &store);
            served.push_main(&repo.path);
            repo.url = served.clone_url.clone();
            served
        });
        let clone =
            git2::Repository::clone(&repo.url, work.path().join("fleet")).expect("clone the fleet");
        let mut cfg = clone.config().unwrap();
        cfg.set_str("user.name", "exo-test").unwrap();
        cfg.set_str("user.email", "test@exo.invalid").unwrap();
        if let Some(g) = &gitea {
            g.gitea.grant_push(&work.path().join("fleet"), &store);
        }
        let mut spec =
            serde_json::json!({"url": repo.url, "allowInsecure": true, "interval": "2s"});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        let fleet: FleetCr = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "Fleet",
            "metadata": {"name": "fleet", "namespace": ns.name},
            "spec": spec
        }))
        .unwrap();
        ns.api::<FleetCr>()
            .create(&PostParams::default(), &fleet)
            .await
            .expect("create Fleet");
        Fixture {
            prefix: prefix.to_owned(),
            ns,
            repo,
            work,
            gitea,
        }
    }

    pub fn root(&self) -> PathBuf {
        self.work.path().join("fleet")
    }

    pub fn exo(&self, args: &[&str]) -> Output {
        self.exo_env(args, &[])
    }

    /// [`Fixture::exo`] with more environment, e.g. a forge's.
    pub fn exo_env(&self, args: &[&str], envs: &[(&str, String)]) -> Output {
        Command::new(EXO)
            .args(args)
            .current_dir(self.root())
            .env("KUBECONFIG", &super::env().kubeconfig)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .output()
            .expect("run exo")
    }

    pub fn tenants(&self) -> Vec<String> {
        tenants(&self.prefix)
    }

    /// `exo release rollout <release>` started in the clone, its output
    /// piped.
    pub fn rollout_cli(&self, release: &str) -> Child {
        Command::new(EXO)
            .args(["release", "rollout", release, "--timeout", "10m"])
            .current_dir(self.root())
            .env("KUBECONFIG", &super::env().kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub async fn rollout(&self, tenant: &str) -> Option<Rollout> {
        rollout_in(&self.ns.client, tenant).await
    }

    /// Waits until `tenant`'s saga is in `phase` on `release`, by a status
    /// written for the Rollout's current spec (a status left over from an
    /// earlier spec does not count).
    pub async fn wait_phase(
        &self,
        tenant: &str,
        release: &str,
        phase: RolloutPhase,
        op: &Operator,
    ) -> Rollout {
        wait_phase_in(&self.ns.client, tenant, release, phase, op).await
    }

    /// Waits (up to 90 s) until `tenant`'s Rollout satisfies `check`.
    pub async fn wait_until(
        &self,
        tenant: &str,
        what: &str,
        op: &Operator,
        check: impl Fn(&Rollout) -> bool,
    ) -> Rollout {
        wait_until_in(&self.ns.client, tenant, what, op, check).await
    }

    /// Commits the served repository's `main` with `changes` applied
    /// (path -> new content, or `None` to delete) and returns the commit.
    pub fn push(&self, changes: &[(&str, Option<&[u8]>)], message: &str) -> String {
        if let Some(g) = &self.gitea {
            g.fetch_main(&self.repo.path);
        }
        let repo = git2::Repository::open_bare(&self.repo.path).unwrap();
        let head = repo
            .find_reference("refs/heads/main")
            .unwrap()
            .peel_to_commit()
            .unwrap();
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        head.tree()
            .unwrap()
            .walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
                if entry.kind() == Some(git2::ObjectType::Blob) {
                    let blob = repo.find_blob(entry.id()).unwrap();
                    files.insert(
                        format!("{dir}{}", entry.name().unwrap()),
                        blob.content().to_vec(),
                    );
                }
                git2::TreeWalkResult::Ok
            })
            .unwrap();
        for (path, content) in changes {
            match content {
                Some(c) => {
                    files.insert((*path).to_owned(), c.to_vec());
                }
                None => {
                    files.remove(*path);
                }
            }
        }
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        let id = super::commit_files(&repo, &refs, message, Some(&head)).to_string();
        if let Some(g) = &self.gitea {
            g.push_main(&self.repo.path);
        }
        id
    }

    /// A file of the served repository's `main`.
    pub fn served_file(&self, path: &str) -> Vec<u8> {
        if let Some(g) = &self.gitea {
            g.fetch_main(&self.repo.path);
        }
        let repo = git2::Repository::open_bare(&self.repo.path).unwrap();
        let commit = repo
            .find_reference("refs/heads/main")
            .unwrap()
            .peel_to_commit()
            .unwrap();
        let entry = commit.tree().unwrap().get_path(Path::new(path)).unwrap();
        repo.find_blob(entry.id()).unwrap().content().to_vec()
    }

    /// Asks the engine to sync now (what the push receiver and
    /// `exo release promote` do).
    pub async fn request_sync(&self) {
        let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
        let patch = serde_json::json!({"metadata": {"annotations": {
            exo::meta::ANNOTATION_SYNC_REQUESTED: stamp}}});
        self.ns
            .api::<FleetCr>()
            .patch(
                "fleet",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap();
    }

    /// Merge-patches the Fleet's spec.
    pub async fn patch_fleet(&self, spec: serde_json::Value) {
        self.ns
            .api::<FleetCr>()
            .patch(
                "fleet",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&serde_json::json!({ "spec": spec })),
            )
            .await
            .unwrap();
    }

    pub async fn wait_all(&self, release: &str, op: &Operator) {
        for t in self.tenants() {
            self.wait_phase(&t, release, RolloutPhase::Verified, op)
                .await;
        }
    }

    /// The wave pointers as the served repository's `main` has them.
    pub fn served_waves(&self) -> exo::release::WavePointers {
        let text = self.served_file("releases/waves.yaml");
        exo::yaml::from_str(Path::new("waves.yaml"), std::str::from_utf8(&text).unwrap()).unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let names = self.tenants();
        super::cleanup(move |client| async move {
            for n in names {
                let _ = Api::<exo::crd::tenant::Tenant>::all(client.clone())
                    .delete(&n, &DeleteParams::background())
                    .await;
                let _ = Api::<Namespace>::all(client.clone())
                    .delete(&n, &DeleteParams::background())
                    .await;
            }
        });
    }
}

/// `tenant`'s Rollout in the cluster `client` talks to.
pub async fn rollout_in(client: &kube::Client, tenant: &str) -> Option<Rollout> {
    Api::<Rollout>::namespaced(client.clone(), tenant)
        .get_opt("release")
        .await
        .ok()
        .flatten()
}

/// [`Fixture::wait_phase`] in the cluster `client` talks to, which `op`
/// serves.
pub async fn wait_phase_in(
    client: &kube::Client,
    tenant: &str,
    release: &str,
    phase: RolloutPhase,
    op: &Operator,
) -> Rollout {
    let what = format!("{tenant} to be {phase:?} on {release}");
    wait_until_in(client, tenant, &what, op, |r| {
        r.current_status()
            .is_some_and(|s| s.release.as_deref() == Some(release) && s.phase == Some(phase))
    })
    .await
}

/// [`Fixture::wait_until`] in the cluster `client` talks to, which `op`
/// serves.
pub async fn wait_until_in(
    client: &kube::Client,
    tenant: &str,
    what: &str,
    op: &Operator,
    check: impl Fn(&Rollout) -> bool,
) -> Rollout {
    let found = tokio::time::timeout(Duration::from_secs(90), async {
        loop {
            if let Some(r) = rollout_in(client, tenant).await
                && check(&r)
            {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    match found {
        Ok(r) => r,
        Err(_) => {
            let now = rollout_in(client, tenant).await;
            panic!(
                "timed out waiting for {what}; rollout {now:#?}\noperator log tail:\n{}",
                tail(&op.log())
            );
        }
    }
}

pub fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(25)..].join("\n")
}

pub fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn digest_of(release_file: &[u8], component: &str) -> String {
    let r: exo::release::Release = exo::yaml::from_str(
        Path::new("r.yaml"),
        std::str::from_utf8(release_file).unwrap(),
    )
    .unwrap();
    r.spec
        .components
        .iter()
        .find(|c| c.name == component)
        .unwrap()
        .image
        .clone()
}
