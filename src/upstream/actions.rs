//! Carrying out what the control plane asks: tunnelled commands and pod
//! control. Pod control acts on the Agent resource only (never on pods):
//! pause/resume set `spec.paused`, restart stamps the annotation
//! [`RESTART_ANNOTATION`] that the reconciler rolls the pod on.

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::crd::{Agent, AgentFS};
use crate::wire::{Command, PodAction};

/// Annotation whose change makes the reconciler roll an agent's pod.
pub const RESTART_ANNOTATION: &str = "autonomic.sh/restart-requested-at";
/// Field manager of every write the upstream connection makes.
pub const FIELD_MANAGER: &str = "exo-upstream";

#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("invalid request: {0}")]
    Invalid(String),
}

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ActionError {
    let what = what.into();
    move |source| ActionError::Kube { what, source }
}

pub async fn run_command(
    client: &kube::Client,
    cmd: &Command,
) -> Result<serde_json::Value, ActionError> {
    match cmd {
        Command::AgentfsCreate {
            namespace,
            fs_name,
            size,
            max_size,
            retain,
        } => {
            let obj: AgentFS = serde_json::from_value(json!({
                "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
                "metadata": { "name": fs_name, "namespace": namespace },
                "spec": { "size": size, "maxSize": max_size, "retain": retain }
            }))
            .map_err(|e| ActionError::Invalid(format!("AgentFS {namespace}/{fs_name}: {e}")))?;
            let api: Api<AgentFS> = Api::namespaced(client.clone(), namespace);
            let created = api
                .create(&PostParams::default(), &obj)
                .await
                .map_err(kube_err(format!("create AgentFS {namespace}/{fs_name}")))?;
            Ok(json!({
                "namespace": namespace, "name": fs_name,
                "uid": created.metadata.uid, "resourceVersion": created.metadata.resource_version,
            }))
        }
        Command::AgentfsList { namespace } => {
            let api: Api<AgentFS> = match namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(kube_err("list AgentFS"))?;
            let items: Vec<_> = list
                .items
                .iter()
                .map(|fs| {
                    let st = fs.status.as_ref();
                    json!({
                        "namespace": fs.metadata.namespace, "name": fs.metadata.name,
                        "size": fs.spec.size, "maxSize": fs.spec.max_size,
                        "phase": st.and_then(|s| s.phase),
                        "requested": st.and_then(|s| s.requested.clone()),
                        "provisioned": st.and_then(|s| s.provisioned.clone()),
                    })
                })
                .collect();
            Ok(json!({ "items": items }))
        }
    }
}

pub async fn pod_control(
    client: &kube::Client,
    action: PodAction,
    namespace: &str,
    agent: &str,
) -> Result<serde_json::Value, ActionError> {
    let api: Api<Agent> = Api::namespaced(client.clone(), namespace);
    let patch = match action {
        PodAction::Pause => json!({ "spec": { "paused": true } }),
        PodAction::Resume => json!({ "spec": { "paused": false } }),
        PodAction::Restart => {
            let at = k8s_openapi::jiff::Timestamp::now().to_string();
            json!({ "metadata": { "annotations": { RESTART_ANNOTATION: at } } })
        }
    };
    let patched = api
        .patch(
            agent,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await
        .map_err(kube_err(format!(
            "{} Agent {namespace}/{agent}",
            action.as_str()
        )))?;
    Ok(json!({
        "namespace": namespace, "agent": agent, "action": action,
        "paused": patched.spec.paused,
        "restartRequestedAt": patched.metadata.annotations.as_ref().and_then(|a| a.get(RESTART_ANNOTATION)),
    }))
}
