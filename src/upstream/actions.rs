//! Carrying out what the control plane asks: tunnelled commands and pod
//! control. Pod control acts on the Agent resource only (never on pods):
//! pause/resume set `spec.paused`, restart stamps the annotation
//! [`ANNOTATION_RESTART_REQUESTED`] that the reconciler rolls the pod on.

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::agentfs::FsError;
use crate::agentfs::helper::HelperOpts;
use crate::agentfs::ops;
use crate::crd::Agent;
use crate::meta::{ANNOTATION_RESTART_REQUESTED, FIELD_MANAGER_UPSTREAM};
use crate::wire::{Command, PodAction};

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
    #[error(transparent)]
    Fs(#[from] FsError),
}

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ActionError {
    let what = what.into();
    move |source| ActionError::Kube { what, source }
}

/// Carries out a request/answer command: the same code the CLI's
/// direct route runs (`agentfs::ops::run`).
pub async fn run_command(
    client: &kube::Client,
    cmd: &Command,
    helper: &HelperOpts,
) -> Result<serde_json::Value, ActionError> {
    Ok(ops::run(client, cmd, helper).await?)
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
            json!({ "metadata": { "annotations": { ANNOTATION_RESTART_REQUESTED: at } } })
        }
    };
    let patched = api
        .patch(
            agent,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER_UPSTREAM.into()),
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
        "restartRequestedAt": patched.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION_RESTART_REQUESTED)),
    }))
}
