//! The cluster-wide pieces every test needs: the CRDs, generated from the
//! Rust types, and the admission policy as `deploy/` ships it.

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

/// Applies `deploy/agentfs-admission.yaml` as it ships (the policy that
/// refuses deleting a mounted AgentFS, and its binding), so the tests test
/// that file and not a copy.
async fn install_admission(client: &kube::Client) {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    use kube::api::{Patch, PatchParams};
    let path = repo_root().join("deploy/agentfs-admission.yaml");
    let text = std::fs::read_to_string(&path).expect("read deploy/agentfs-admission.yaml");
    let params = PatchParams::apply("exo-tests").force();
    for doc in text.split("\n---\n") {
        let obj: serde_json::Value =
            exo::yaml::from_str(&path, doc).expect("parse deploy/agentfs-admission.yaml");
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
    admission_enforced(client).await;
}

/// The apiserver enforces a new policy only once its admission plugin has
/// seen the policy and the binding, a moment after they are written: wait
/// until a dry-run delete of a mounted probe AgentFS is refused, so no
/// test races that window. The probe is then detached and deleted.
async fn admission_enforced(client: &kube::Client) {
    use kube::api::{Patch, PatchParams};
    const PROBES: &str = "exo-admission-probe";
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
