#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Shared helpers for integration tests against the real test environment
//! (`scripts/testenv up`): the apiserver with kwok nodes, the OCI registries
//! and the git daemon.
//!
//! A missing environment is a test failure with instructions, never a skip.
#![allow(dead_code)]

pub mod backup;
pub mod balancer;
pub mod blackhole;
pub mod browser;
pub mod canary;
pub mod clusters;
pub mod cosign;
mod crds;
pub mod exporter;
pub mod fleet;
pub mod fs;
pub mod gitea;
pub mod image;
pub mod keyserver;
pub mod notify;
pub mod operator;
pub mod postgres;
pub mod private_env;
pub mod prometheus;
pub mod proxy;
pub mod raw_http;
pub mod registry_proxy;

pub use crds::install_crds;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Reference, manifest};
use sha2::{Digest, Sha256};

/// Where the running test environment is, as `scripts/testenv env` prints it.
#[derive(Debug, Clone)]
pub struct TestEnv {
    pub kubeconfig: PathBuf,
    pub registry: String,
    pub registry_auth: String,
    pub registry_user: String,
    pub registry_password: String,
    pub git_base: String,
    pub git_root: PathBuf,
    pub exec_dir: PathBuf,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

static ENV: OnceLock<TestEnv> = OnceLock::new();

/// The `KEY=value` lines of the `env` file `scripts/testenv up` leaves in
/// its state folder (none when it is missing).
fn env_file(state: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(state.join("env")).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn from_vars(state: &Path, get: impl Fn(&str) -> Option<String>) -> TestEnv {
    let get = |key: &str| -> String {
        get(key).unwrap_or_else(|| {
            panic!(
                "the test environment is not running ({key} is not set and {} has no env \
                 file). Run the tests with scripts/test, or start it with \
                 `scripts/testenv up` first.",
                state.display()
            )
        })
    };
    TestEnv {
        kubeconfig: get("KUBECONFIG").into(),
        registry: get("EXO_TEST_REGISTRY"),
        registry_auth: get("EXO_TEST_REGISTRY_AUTH"),
        registry_user: get("EXO_TEST_REGISTRY_USER"),
        registry_password: get("EXO_TEST_REGISTRY_PASSWORD"),
        git_base: get("EXO_TEST_GIT_BASE"),
        git_root: get("EXO_TEST_GIT_ROOT").into(),
        exec_dir: get("EXO_TEST_EXEC_DIR").into(),
    }
}

/// One `scripts/testenv env` variable: from the process environment, or
/// else from the `env` file in the state folder.
pub fn testenv_var(key: &str) -> Option<String> {
    std::env::var(key)
        .ok()
        .filter(|v| !v.is_empty())
        .or_else(|| {
            let state = std::env::var_os("EXO_TESTENV_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo_root().join(".testenv"));
            env_file(&state).remove(key)
        })
}

/// Reads the environment from the process environment, or else from the
/// `env` file that `scripts/testenv up` leaves in its state folder. Panics
/// with instructions when neither is there.
pub fn env() -> &'static TestEnv {
    ENV.get_or_init(|| {
        let state = std::env::var_os("EXO_TESTENV_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo_root().join(".testenv"));
        let vars = env_file(&state);
        // KUBECONFIG is taken only from the env file: a developer's own
        // KUBECONFIG must never point the tests at a real cluster.
        from_vars(&state, |key| {
            std::env::var(key)
                .ok()
                .filter(|v| !v.is_empty() && key != "KUBECONFIG")
                .or_else(|| vars.get(key).cloned())
        })
    })
}

/// Makes every helper of this test binary use the environment whose state
/// folder is `state` (one a test brought up for itself, see
/// `private_env`), from its env file alone. Must come before anything
/// reads [`env`].
pub fn use_env(state: &Path) {
    let vars = env_file(state);
    let e = from_vars(state, |key| vars.get(key).cloned());
    assert!(
        ENV.set(e).is_ok(),
        "use_env after the shared test environment was read"
    );
}

/// Runs the real `kubectl` as the test cluster's admin, in the repository
/// (so `deploy/...` paths work): whether it succeeded, and stdout+stderr.
pub fn kubectl(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", &env().kubeconfig)
        .current_dir(repo_root())
        .output()
        .expect("run kubectl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Copies the folder `from` (files and folders) to `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The first line a child prints on stdout (piped), trimmed.
pub fn first_stdout_line(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("read stdout");
    line.trim().to_owned()
}

/// The Events in `ns` with `reason`.
pub async fn events(ns: &str, reason: &str) -> Vec<k8s_openapi::api::events::v1::Event> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(client().await, ns)
        .list(&kube::api::ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// A kube client for the test cluster's admin.
pub async fn client() -> Client {
    client_for(&env().kubeconfig).await
}

/// A kube client for the admin of the cluster `kubeconfig` names.
pub async fn client_for(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig)
        .unwrap_or_else(|e| panic!("read the test kubeconfig {}: {e}", kubeconfig.display()));
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("load the test kubeconfig");
    Client::try_from(config).expect("build a kube client")
}

/// Polls `check` until it returns `Some`, or panics naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A namespace of its own for one test, deleted when dropped (also on panic).
pub struct TestNamespace {
    pub name: String,
    pub client: Client,
}

pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:x}{:x}{n}", std::process::id() % 0xfff, nanos % 0xfffff)
}

impl TestNamespace {
    /// Creates `exo-test-<prefix>-<unique>` and waits for its default
    /// ServiceAccount, without which the apiserver refuses pods.
    pub async fn new(prefix: &str) -> Self {
        let client = client().await;
        let name = format!("exo-test-{prefix}-{}", unique_suffix());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "exo.test/owner": "cargo-test" } }
        }))
        .expect("namespace object");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create test namespace");
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        eventually(
            "the default service account",
            Duration::from_secs(30),
            || {
                let sas = sas.clone();
                async move { sas.get_opt("default").await.ok().flatten() }
            },
        )
        .await;
        Self { name, client }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let name = self.name.clone();
        cleanup(move |client| async move {
            let _ = Api::<Namespace>::all(client.clone())
                .delete(&name, &DeleteParams::background())
                .await;
            // An operator stopped before its namespace goes leaves its
            // finalizers behind; drop them so the namespace can go.
            release_finalizers::<exo::crd::Agent>(&client, &name).await;
            release_finalizers::<exo::crd::AgentFS>(&client, &name).await;
        });
    }
}

/// Runs `work` with a client of the test environment, on a runtime of its
/// own on a plain thread, and waits for it: `Drop` cannot await, and must
/// not panic, so a cleanup that cannot reach the apiserver does nothing.
pub fn cleanup<F, Fut>(work: F)
where
    F: FnOnce(Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let kubeconfig = env().kubeconfig.clone();
    let done = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            let Ok(kc) = Kubeconfig::read_from(&kubeconfig) else {
                return;
            };
            let Ok(cfg) = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await
            else {
                return;
            };
            let Ok(client) = Client::try_from(cfg) else {
                return;
            };
            work(client).await;
        });
    });
    let _ = done.join();
}

async fn release_finalizers<K>(client: &Client, namespace: &str)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    use kube::api::{ListParams, Patch, PatchParams};
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let Ok(list) = api.list_metadata(&ListParams::default()).await else {
        return;
    };
    for obj in list.items {
        if let Some(n) = obj.metadata.name {
            let _ = api
                .patch_metadata(
                    &n,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
                )
                .await;
        }
    }
}

// ------------------------------------------------------------------ registry

/// An oci-client for the loopback registries (plain HTTP).
pub fn oci_client() -> oci_client::Client {
    oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    })
}

pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// What a push left in the registry.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// `registry/repo:tag`.
    pub reference: String,
    /// The manifest's digest, `sha256:…`.
    pub digest: String,
}

/// Pushes a small single-platform image (one layer, one config, one
/// manifest) and returns its digest, computed here from the manifest bytes.
pub async fn push_image(
    registry: &str,
    repo: &str,
    tag: &str,
    payload: &[u8],
    auth: &RegistryAuth,
) -> Pushed {
    push_platform_image(registry, repo, tag, payload, "amd64", auth).await
}

async fn push_platform_image(
    registry: &str,
    repo: &str,
    tag: &str,
    payload: &[u8],
    arch: &str,
    auth: &RegistryAuth,
) -> Pushed {
    let client = oci_client();
    let reference: Reference = format!("{registry}/{repo}:{tag}")
        .parse()
        .expect("reference");
    client
        .auth(&reference, auth, oci_client::RegistryOperation::Push)
        .await
        .expect("registry auth");
    let layer = payload.to_vec();
    let layer_digest = sha256_digest(&layer);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": arch, "os": "linux",
        "rootfs": { "type": "layers", "diff_ids": [layer_digest] },
        "config": {}
    }))
    .expect("config json");
    let config_digest = sha256_digest(&config);
    client
        .push_blob(&reference, layer.clone(), &layer_digest)
        .await
        .expect("push layer");
    client
        .push_blob(&reference, config.clone(), &config_digest)
        .await
        .expect("push config");
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": manifest::OCI_IMAGE_MEDIA_TYPE,
        "config": { "mediaType": manifest::IMAGE_CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config.len() },
        "layers": [{ "mediaType": manifest::IMAGE_LAYER_MEDIA_TYPE, "digest": layer_digest, "size": layer.len() }]
    }))
    .expect("manifest json");
    let digest = sha256_digest(&manifest);
    client
        .push_manifest_raw(
            &reference,
            manifest,
            manifest::OCI_IMAGE_MEDIA_TYPE.parse().expect("media type"),
        )
        .await
        .expect("push manifest");
    Pushed {
        reference: reference.whole(),
        digest,
    }
}

/// Pushes a two-platform image (amd64 and arm64) under one index tag and
/// returns the index digest.
pub async fn push_multiarch_image(
    registry: &str,
    repo: &str,
    tag: &str,
    auth: &RegistryAuth,
) -> Pushed {
    let mut entries = Vec::new();
    for arch in ["amd64", "arm64"] {
        let one = push_platform_image(
            registry,
            repo,
            &format!("{tag}-{arch}"),
            format!("{repo}:{tag} for {arch}").as_bytes(),
            arch,
            auth,
        )
        .await;
        let client = oci_client();
        let r: Reference = one.reference.parse().expect("reference");
        let (bytes, _) = client
            .pull_manifest_raw(&r, auth, &[manifest::OCI_IMAGE_MEDIA_TYPE])
            .await
            .expect("pull");
        entries.push(serde_json::json!({
            "mediaType": manifest::OCI_IMAGE_MEDIA_TYPE,
            "digest": one.digest, "size": bytes.len(),
            "platform": { "architecture": arch, "os": "linux" }
        }));
    }
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
        "manifests": entries
    }))
    .expect("index json");
    let digest = sha256_digest(&index);
    let reference: Reference = format!("{registry}/{repo}:{tag}")
        .parse()
        .expect("reference");
    oci_client()
        .push_manifest_raw(
            &reference,
            index,
            manifest::OCI_IMAGE_INDEX_MEDIA_TYPE
                .parse()
                .expect("media type"),
        )
        .await
        .expect("push index");
    Pushed {
        reference: reference.whole(),
        digest,
    }
}

// ------------------------------------------------------------------ git

/// A bare repository served by the test environment's git daemon.
pub struct GitRepo {
    /// `git://127.0.0.1:<port>/<name>.git`
    pub url: String,
    /// The bare repository on disk.
    pub path: PathBuf,
    /// The commit that `main` points at.
    pub head: git2::Oid,
}

impl Drop for GitRepo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn signature() -> git2::Signature<'static> {
    git2::Signature::now("Exo Test", "test@exo.invalid").expect("signature")
}

/// Commits `files` (relative path → content) on a new `main` branch of a
/// fresh bare repository under the git daemon's root, and returns its URL.
pub fn create_git_repo(name: &str, files: &[(&str, &[u8])]) -> GitRepo {
    let name = format!("{name}-{}", unique_suffix());
    let path = env().git_root.join(format!("{name}.git"));
    let repo = git2::Repository::init_bare(&path).expect("init bare repo");
    repo.set_head("refs/heads/main").expect("set HEAD");
    let head = commit_files(&repo, files, "initial commit", None);
    GitRepo {
        url: format!("{}/{name}.git", env().git_base),
        path,
        head,
    }
}

/// Writes one commit holding exactly `files` onto `refs/heads/main`.
pub fn commit_files(
    repo: &git2::Repository,
    files: &[(&str, &[u8])],
    message: &str,
    parent: Option<&git2::Commit<'_>>,
) -> git2::Oid {
    let tree = build_tree(repo, files);
    let sig = signature();
    let parents: Vec<&git2::Commit<'_>> = parent.into_iter().collect();
    repo.commit(
        Some("refs/heads/main"),
        &sig,
        &sig,
        message,
        &tree,
        &parents,
    )
    .expect("commit")
}

fn build_tree<'r>(repo: &'r git2::Repository, files: &[(&str, &[u8])]) -> git2::Tree<'r> {
    // Group by first path component and recurse, so nested paths work.
    let mut here: BTreeMap<&str, &[u8]> = BTreeMap::new();
    let mut below: BTreeMap<&str, Vec<(&str, &[u8])>> = BTreeMap::new();
    for (p, content) in files {
        match p.split_once('/') {
            Some((dir, rest)) => below.entry(dir).or_default().push((rest, content)),
            None => {
                here.insert(p, content);
            }
        }
    }
    let mut builder = repo.treebuilder(None).expect("treebuilder");
    for (name, content) in here {
        let blob = repo.blob(content).expect("blob");
        builder.insert(name, blob, 0o100644).expect("insert blob");
    }
    for (dir, entries) in below {
        let sub = build_tree(repo, &entries);
        builder
            .insert(dir, sub.id(), 0o040000)
            .expect("insert tree");
    }
    let oid = builder.write().expect("write tree");
    repo.find_tree(oid).expect("find tree")
}

/// A scratch folder removed on drop.
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

pub fn path_of(dir: &tempfile::TempDir, rel: &str) -> PathBuf {
    Path::new(dir.path()).join(rel)
}

// ------------------------------------------------------------------ audit log

/// One write the test apiserver's audit log recorded (`scripts/testenv`
/// logs writes only, with the User-Agent that sent each).
#[derive(Debug, Clone)]
pub struct AuditWrite {
    /// When the apiserver received it.
    pub received: k8s_openapi::jiff::Timestamp,
    pub verb: String,
    pub uri: String,
    pub code: u64,
}

/// The writes the environment's apiserver logged from `user_agent` (the
/// current audit file and the one rotated out before it), oldest first.
pub fn audit_writes(user_agent: &str) -> Vec<AuditWrite> {
    let logs = env()
        .kubeconfig
        .parent()
        .expect("the kubeconfig's folder")
        .join("logs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&logs)
        .unwrap_or_else(|e| panic!("{}: {e}", logs.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("audit") && n.ends_with(".log"))
        })
        .collect();
    assert!(
        !files.is_empty(),
        "no audit log in {}: the test apiserver must run with one (scripts/testenv down, then up)",
        logs.display()
    );
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if v["userAgent"] != user_agent {
                continue;
            }
            let Some(received) = v["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok())
            else {
                continue;
            };
            out.push(AuditWrite {
                received,
                verb: v["verb"].as_str().unwrap_or_default().to_owned(),
                uri: v["requestURI"].as_str().unwrap_or_default().to_owned(),
                code: v["responseStatus"]["code"].as_u64().unwrap_or(0),
            });
        }
    }
    out.sort_by_key(|w| w.received);
    out
}

/// `name -> resourceVersion` of every object `api` lists.
pub async fn versions<K>(api: &Api<K>) -> BTreeMap<String, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&kube::api::ListParams::default())
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
