#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `deploy/` as a platform team applies it: every image pinned by digest
//! (the operator's, the control plane's, with or without a component), and
//! `kubectl apply -k deploy/` and `kubectl apply -k deploy/control-plane/`,
//! pinned by `scripts/image` to the image it just pushed, succeed on the
//! test apiserver, their pods report that digest, and their namespaces
//! enforce the restricted Pod Security Standard.
//!
//! The real applies go through an overlay that moves each install into a
//! namespace of its own and suffixes the cluster-wide names, so the
//! test does not touch `exo-system` or another test's RBAC. The CRDs keep
//! their names (they are the ones every test installs) and stay.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use support::image::built;
use support::{copy_tree, kubectl};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn docs(rendered: &str) -> Vec<serde_json::Value> {
    rendered
        .split("\n---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| exo::yaml::from_str(Path::new("kustomize output"), d).unwrap())
        .collect()
}

/// `kubectl kustomize DIR`, as documents.
fn render(dir: &Path) -> Vec<serde_json::Value> {
    let (ok, out) = kubectl(&["kustomize", dir.to_str().unwrap()]);
    assert!(ok, "kubectl kustomize {}: {out}", dir.display());
    docs(&out)
}

/// An overlay in `root/NAME` over `root/BASE` with `components`, moved to
/// `namespace` and suffixed `-SUFFIX` when given.
fn overlay(
    root: &Path,
    name: &str,
    base: &str,
    components: &[&str],
    isolate: Option<(&str, &str)>,
) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut k = format!("resources: [../{base}]\n");
    if !components.is_empty() {
        let list: Vec<String> = components.iter().map(|c| format!("../{c}")).collect();
        k += &format!("components: [{}]\n", list.join(", "));
    }
    if let Some((namespace, suffix)) = isolate {
        k += &format!(
            "namespace: {namespace}\nnameSuffix: -{suffix}\npatches:\n  - target: {{kind: Namespace}}\n    \
             patch: |-\n      - op: add\n        path: /metadata/labels/exo.test~1owner\n        \
             value: cargo-test\n"
        );
    }
    std::fs::write(dir.join("kustomization.yaml"), k).unwrap();
    dir
}

fn containers(doc: &serde_json::Value) -> Vec<&serde_json::Value> {
    let spec = &doc["spec"]["template"]["spec"];
    ["containers", "initContainers"]
        .iter()
        .flat_map(|k| spec[k].as_array().into_iter().flatten())
        .collect()
}

fn is_pinned(image: &str) -> bool {
    image.split_once("@sha256:").is_some_and(|(name, hex)| {
        !name.is_empty()
            && hex.len() == 64
            && hex
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    })
}

/// Every kustomization and component file under `dir`.
fn kustomizations(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            kustomizations(&p, out);
        } else if p.file_name().is_some_and(|n| n == "kustomization.yaml") {
            out.push(p);
        }
    }
}

#[test]
fn deploy_pins_every_image_by_digest() {
    let mut files = Vec::new();
    kustomizations(&repo().join("deploy"), &mut files);
    assert!(files.len() >= 4, "{files:?}");
    for f in &files {
        let k: serde_json::Value =
            exo::yaml::from_str(f, &std::fs::read_to_string(f).unwrap()).unwrap();
        for img in k["images"].as_array().into_iter().flatten() {
            assert!(img.get("newTag").is_none(), "{}: a tag: {img}", f.display());
            let digest = img["digest"].as_str().unwrap_or_default();
            assert!(
                is_pinned(&format!("x@{digest}")) && digest != format!("sha256:{}", "0".repeat(64)),
                "{}: {img} has no sha256 digest (or a placeholder)",
                f.display()
            );
        }
    }

    // What each install renders to, components included.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&repo().join("deploy"), &dir.path().join("deploy"));
    let installs = [
        ("operator", "deploy", vec![]),
        ("managed", "deploy", vec!["deploy/components/upstream"]),
        ("control-plane", "deploy/control-plane", vec![]),
        (
            "control-plane-tls",
            "deploy/control-plane",
            vec!["deploy/control-plane/components/tls"],
        ),
    ];
    for (name, base, components) in installs {
        let docs = render(&overlay(dir.path(), name, base, &components, None));
        let mut images = 0;
        for doc in &docs {
            for c in containers(doc) {
                let image = c["image"].as_str().unwrap();
                assert!(is_pinned(image), "{name}: {image} is not pinned by digest");
                images += 1;
            }
            if doc["kind"] == "Namespace" {
                assert_eq!(
                    doc["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
                    "{name}: {doc}"
                );
            }
        }
        assert!(images > 0, "{name} renders no container");
        assert!(docs.iter().any(|d| d["kind"] == "Namespace"), "{name}");
    }
}

#[test]
fn the_upstream_component_mounts_the_token_and_tls_is_off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&repo().join("deploy"), &dir.path().join("deploy"));
    let operator = |docs: Vec<serde_json::Value>| {
        docs.into_iter()
            .find(|d| d["kind"] == "Deployment")
            .expect("a Deployment")
    };
    let plain = operator(render(&overlay(dir.path(), "a", "deploy", &[], None)));
    let env = |d: &serde_json::Value| containers(d)[0]["env"].clone();
    assert!(!env(&plain).to_string().contains("AUTONOMIC"), "{plain}");

    let managed = operator(render(&overlay(
        dir.path(),
        "b",
        "deploy",
        &["deploy/components/upstream"],
        None,
    )));
    let env = env(&managed);
    let value = |name: &str| {
        env.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{name} not set: {env}"))["value"]
            .clone()
    };
    assert_eq!(value("AUTONOMIC_MANAGED"), "true");
    assert!(
        value("AUTONOMIC_BASE_URL")
            .as_str()
            .unwrap()
            .starts_with("http")
    );
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .all(|e| e["name"] != "AUTONOMIC_AUTH_TOKEN"),
        "the token is read from a file, not the environment: {env}"
    );
    let file = value("AUTONOMIC_AUTH_TOKEN_FILE");
    let mount = containers(&managed)[0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            file.as_str()
                .unwrap()
                .starts_with(m["mountPath"].as_str().unwrap())
        })
        .unwrap_or_else(|| panic!("{file} is on no mount: {managed}"))
        .clone();
    let volume = managed["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap()
        .clone();
    assert_eq!(
        volume["secret"]["secretName"], "exo-upstream-token",
        "{volume}"
    );
    // Not subPath: a Secret volume mounted whole is refreshed in place.
    assert!(mount.get("subPath").is_none(), "{mount}");

    let cp = operator(render(&overlay(
        dir.path(),
        "c",
        "deploy/control-plane",
        &[],
        None,
    )));
    let args = containers(&cp)[0]["args"].to_string();
    assert!(!args.contains("--tls-cert-file"), "{args}");
    assert!(args.contains("--admin-token-file"), "{args}");
    let tls = operator(render(&overlay(
        dir.path(),
        "d",
        "deploy/control-plane",
        &["deploy/control-plane/components/tls"],
        None,
    )));
    let c = &containers(&tls)[0];
    assert!(c["args"].to_string().contains("--tls-cert-file"), "{c}");
    assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTPS", "{c}");
    assert_eq!(tls["spec"]["strategy"]["type"], "Recreate");
    assert_eq!(tls["spec"]["replicas"], 1);
}

/// Deletes what an install applied, except the CRDs, when dropped.
struct Applied(PathBuf);

impl Drop for Applied {
    fn drop(&mut self) {
        let _ = kubectl(&[
            "delete",
            "-f",
            self.0.to_str().unwrap(),
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

/// Applies `dir` (after writing what to delete afterwards beside it).
fn apply(dir: &Path) -> Applied {
    let rest: Vec<String> = render(dir)
        .into_iter()
        .filter(|d| d["kind"] != "CustomResourceDefinition")
        .map(|d| serde_json::to_string(&d).unwrap())
        .collect();
    let cleanup = dir.join("cleanup.json");
    std::fs::write(
        &cleanup,
        format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{}]}}",
            rest.join(",")
        ),
    )
    .unwrap();
    let guard = Applied(cleanup);
    let (ok, out) = kubectl(&["apply", "-k", dir.to_str().unwrap()]);
    assert!(ok, "kubectl apply -k {}: {out}", dir.display());
    guard
}

/// The pods of `app` in `ns` if there are `count`, all running `reference`.
async fn running(pods: &Api<Pod>, app: &str, count: usize, reference: &str) -> Option<Vec<Pod>> {
    let selector = format!("app.kubernetes.io/name={app}");
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .ok()?;
    let running: Vec<Pod> = list
        .items
        .into_iter()
        .filter(|p| {
            let s = p.status.as_ref();
            s.and_then(|s| s.phase.as_deref()) == Some("Running")
                && s.and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| cs.iter().all(|c| c.image_id == reference))
        })
        .collect();
    (running.len() == count).then_some(running)
}

/// Waits until `count` pods of `app` in `ns` run `reference`.
async fn pods_running(ns: &str, app: &str, count: usize, reference: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(support::client().await, ns);
    let what = format!("{count} {app} pods running {reference} in {ns}");
    support::eventually(&what, Duration::from_secs(90), || {
        running(&pods, app, count, reference)
    })
    .await
}

/// A privileged pod is refused in `ns` (server-side dry run).
async fn refuses_privileged_pods(ns: &str) {
    let pods: Api<Pod> = Api::namespaced(support::client().await, ns);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "privileged-probe"},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "securityContext": {"privileged": true}}]}
    }))
    .unwrap();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let err = pods
        .create(&dry, &pod)
        .await
        .expect_err("a privileged pod was admitted");
    assert!(err.to_string().contains("PodSecurity"), "{ns}: {err}");
}

#[tokio::test]
async fn both_kustomizations_apply_and_their_pods_run_the_pinned_digest() {
    let img = built();
    let root = img.deploy.parent().unwrap().join("overlays");
    let _ = std::fs::remove_dir_all(&root);
    copy_tree(&img.deploy, &root.join("deploy"));
    let (name, digest) = img.reference.split_once('@').unwrap();
    for k in [
        "deploy/kustomization.yaml",
        "deploy/control-plane/kustomization.yaml",
    ] {
        let text = std::fs::read_to_string(root.join(k)).unwrap();
        assert!(
            text.contains(&format!("newName: {name}\n"))
                && text.contains(&format!("digest: {digest}\n")),
            "scripts/image did not pin {k}:\n{text}"
        );
    }
    let sfx = support::unique_suffix();
    let op_ns = format!("exo-test-install-{sfx}");
    let cp_ns = format!("exo-test-cp-{sfx}");
    let op = overlay(&root, "operator", "deploy", &[], Some((&op_ns, &sfx)));
    let cp = overlay(
        &root,
        "control-plane",
        "deploy/control-plane",
        &[],
        Some((&cp_ns, &sfx)),
    );
    let _op = apply(&op);
    let _cp = apply(&cp);

    let client = support::client().await;
    for ns in [&op_ns, &cp_ns] {
        let n = Api::<Namespace>::all(client.clone()).get(ns).await.unwrap();
        let labels = n.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels
                .get("pod-security.kubernetes.io/enforce")
                .map(String::as_str),
            Some("restricted"),
            "{ns}"
        );
        refuses_privileged_pods(ns).await;
    }
    // The ReplicaSets' pods were admitted under `restricted`, scheduled on
    // kwok nodes and report the pinned digest as their imageID.
    pods_running(&op_ns, "exo-operator", 2, &img.reference).await;
    pods_running(&cp_ns, "exo-control-plane", 1, &img.reference).await;
    let pvc = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &cp_ns)
        .get(&format!("exo-control-plane-db-{sfx}"))
        .await
        .unwrap();
    assert_eq!(pvc.status.and_then(|s| s.phase).as_deref(), Some("Bound"));

    // The components are accepted by the apiserver over these installs.
    for (dir, component, ns) in [
        ("operator-managed", "deploy/components/upstream", &op_ns),
        (
            "control-plane-tls",
            "deploy/control-plane/components/tls",
            &cp_ns,
        ),
    ] {
        let base = if ns == &op_ns {
            "deploy"
        } else {
            "deploy/control-plane"
        };
        let o = overlay(&root, dir, base, &[component], Some((ns, &sfx)));
        let (ok, out) = kubectl(&["apply", "-k", o.to_str().unwrap(), "--dry-run=server"]);
        assert!(ok, "{component}: {out}");
    }
}
