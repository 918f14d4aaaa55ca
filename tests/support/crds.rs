//! The cluster-wide pieces every test needs: the CRDs, generated from the
//! Rust types, and the admission policies as `deploy/` ships them.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{DeleteParams, PostParams};

use super::{eventually, repo_root};

/// Installs the CRDs with server-side apply and waits until they are served.
pub async fn install_crds(client: &kube::Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in exo::crd::all() {
        let name = crd.metadata.name.clone().unwrap();
        api.patch(
            &name,
            &PatchParams::apply("exo-tests").force(),
            &Patch::Apply(&crd),
        )
        .await
        .expect("apply CRD");
        eventually("the CRD to be established", Duration::from_secs(30), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let c = api.get(&name).await.ok()?;
                c.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                    .then_some(())
            }
        })
        .await;
    }
    install_admission(client).await;
}

/// The admission policies `deploy/` ships: deleting a mounted AgentFS,
/// shrinking an App's volume.
const POLICIES: [&str; 2] = ["deploy/agentfs-admission.yaml", "deploy/app-admission.yaml"];

/// Applies each of [`POLICIES`] as it ships (the policy and its binding),
/// so the tests test those files and not copies.
async fn install_admission(client: &kube::Client) {
    for file in POLICIES {
        install_policy(client, file).await;
    }
    admission_enforced(client).await;
    app_admission_enforced(client).await;
}

async fn install_policy(client: &kube::Client, file: &str) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    use kube::api::{Patch, PatchParams};
    let path = repo_root().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {file}: {e}"));
    let params = PatchParams::apply("exo-tests").force();
    for doc in text.split("\n---\n") {
        let obj: serde_json::Value =
            exo::yaml::from_str(&path, doc).unwrap_or_else(|e| panic!("parse {file}: {e}"));
        let name = obj["metadata"]["name"].as_str().expect("metadata.name");
        let applied = match obj["kind"].as_str() {
            Some("ValidatingAdmissionPolicy") => {
                Api::<ValidatingAdmissionPolicy>::all(client.clone())
                    .patch(name, &params, &Patch::Apply(&obj))
                    .await
                    .map(drop)
            }
            Some("ValidatingAdmissionPolicyBinding") => {
                Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
                    .patch(name, &params, &Patch::Apply(&obj))
                    .await
                    .map(drop)
            }
            other => panic!("{}: unexpected kind {other:?}", path.display()),
        };
        applied.unwrap_or_else(|e| panic!("apply {name} from {}: {e}", path.display()));
    }
}

/// Where the probes of [`admission_enforced`] and
/// [`app_admission_enforced`] are made (no operator watches it).
const PROBES: &str = "exo-admission-probe";

/// The apiserver enforces a new policy only once its admission plugin has
/// seen the policy and the binding, a moment after they are written: wait
/// until a dry-run delete of a mounted probe AgentFS is refused, so no
/// test races that window. The probe is then detached and deleted.
async fn admission_enforced(client: &kube::Client) {
    use kube::api::{Patch, PatchParams};
    let namespaces = Api::<Namespace>::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": { "name": PROBES }
    }))
    .unwrap();
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace {PROBES}: {e}"),
    }
    let name = format!("probe-{}", exo::wire::random_id().to_lowercase());
    let fss = Api::<exo::crd::AgentFS>::namespaced(client.clone(), PROBES);
    let probe: exo::crd::AgentFS = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": { "size": "1Gi", "maxSize": "1Gi" }
    }))
    .unwrap();
    fss.create(&PostParams::default(), &probe)
        .await
        .unwrap_or_else(|e| panic!("create probe AgentFS {PROBES}/{name}: {e}"));
    let mounted = |by: Vec<&str>| Patch::Merge(serde_json::json!({"status": {"mountedBy": by}}));
    fss.patch_status(&name, &PatchParams::default(), &mounted(vec!["probe"]))
        .await
        .expect("mark the probe mounted");
    eventually(
        "the AgentFS delete policy to be enforced",
        Duration::from_secs(30),
        || async {
            match fss
                .delete(
                    &name,
                    &DeleteParams {
                        dry_run: true,
                        ..DeleteParams::default()
                    },
                )
                .await
            {
                Err(kube::Error::Api(e)) if e.code == 403 => Some(()),
                _ => None,
            }
        },
    )
    .await;
    fss.patch_status(&name, &PatchParams::default(), &mounted(vec![]))
        .await
        .expect("detach the probe");
    let _ = fss.delete(&name, &DeleteParams::default()).await;
}

/// Likewise for the App policy: wait until a dry-run shrink of a probe
/// App is refused, then delete the probe.
async fn app_admission_enforced(client: &kube::Client) {
    use kube::api::{Patch, PatchParams};
    let name = format!("probe-{}", exo::wire::random_id().to_lowercase());
    let apps = Api::<exo::crd::App>::namespaced(client.clone(), PROBES);
    let probe: exo::crd::App = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": { "image": "probe", "workspace": { "size": "2Gi", "maxSize": "2Gi" } }
    }))
    .unwrap();
    apps.create(&PostParams::default(), &probe)
        .await
        .unwrap_or_else(|e| panic!("create probe App {PROBES}/{name}: {e}"));
    let shrink = Patch::Merge(serde_json::json!({"spec": {"workspace": {"size": "1Gi"}}}));
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    eventually(
        "the App grow-only policy to be enforced",
        Duration::from_secs(30),
        || async {
            match apps.patch(&name, &dry, &shrink).await {
                Err(kube::Error::Api(e)) if e.message.contains("grow-only") => Some(()),
                _ => None,
            }
        },
    )
    .await;
    let _ = apps.delete(&name, &DeleteParams::default()).await;
}
