//! Pure mapping from observed pod state to Agent and Tool phases.

use k8s_openapi::api::core::v1::Pod;

use crate::crd::{AgentPhase, RestartPolicy, ToolPhase};

/// Container waiting reasons that mean "broken", not "starting".
const BROKEN_WAITING: &[&str] = &[
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// What a pod is doing, reduced to what the phases need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodState {
    Missing,
    /// Has a deletionTimestamp: going away (a roll or a pause).
    Deleting,
    Starting,
    Running {
        ready: bool,
    },
    /// A container cannot run (crash loop, image pull, config error).
    Broken {
        reason: String,
    },
    Succeeded,
    Failed {
        reason: String,
    },
}

pub fn pod_state(pod: Option<&Pod>) -> PodState {
    let Some(pod) = pod else {
        return PodState::Missing;
    };
    if pod.metadata.deletion_timestamp.is_some() {
        return PodState::Deleting;
    }
    let Some(status) = pod.status.as_ref() else {
        return PodState::Starting;
    };
    match status.phase.as_deref() {
        Some("Succeeded") => return PodState::Succeeded,
        Some("Failed") => {
            return PodState::Failed {
                reason: status
                    .reason
                    .clone()
                    .unwrap_or_else(|| "PodFailed".to_owned()),
            };
        }
        _ => {}
    }
    for cs in status.container_statuses.iter().flatten() {
        let waiting = cs.state.as_ref().and_then(|s| s.waiting.as_ref());
        if let Some(reason) = waiting.and_then(|w| w.reason.as_deref())
            && BROKEN_WAITING.contains(&reason)
        {
            return PodState::Broken {
                reason: format!("{}: {reason}", cs.name),
            };
        }
    }
    match status.phase.as_deref() {
        Some("Running") => {
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            PodState::Running { ready }
        }
        _ => PodState::Starting,
    }
}

/// An Agent phase with the reason and message for the `Ready` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report<P> {
    pub phase: P,
    pub reason: &'static str,
    pub message: String,
}

fn report<P>(phase: P, reason: &'static str, message: impl Into<String>) -> Report<P> {
    Report {
        phase,
        reason,
        message: message.into(),
    }
}

pub fn agent_phase(
    deleting: bool,
    paused: bool,
    restart: Option<RestartPolicy>,
    state: &PodState,
) -> Report<AgentPhase> {
    if deleting {
        return report(
            AgentPhase::Terminating,
            "Terminating",
            "the agent is being deleted",
        );
    }
    if paused {
        return match state {
            PodState::Missing => report(
                AgentPhase::Paused,
                "Paused",
                "spec.paused is set; the agent has no pod",
            ),
            _ => report(
                AgentPhase::Paused,
                "Pausing",
                "spec.paused is set; the pod is being removed",
            ),
        };
    }
    let never = restart == Some(RestartPolicy::Never);
    match state {
        PodState::Missing => report(
            AgentPhase::Pending,
            "PodCreating",
            "the pod is being created",
        ),
        PodState::Deleting => report(
            AgentPhase::Pending,
            "PodRolling",
            "the previous pod is being replaced",
        ),
        PodState::Starting => report(AgentPhase::Pending, "PodStarting", "the pod is starting"),
        PodState::Running { ready: true } => {
            report(AgentPhase::Active, "Active", "the pod is running and ready")
        }
        PodState::Running { ready: false } => report(
            AgentPhase::Pending,
            "PodNotReady",
            "the pod is running but not ready",
        ),
        PodState::Broken { reason } => report(AgentPhase::Error, "PodError", reason.clone()),
        PodState::Succeeded => report(
            AgentPhase::Succeeded,
            "Completed",
            "the run completed successfully",
        ),
        PodState::Failed { reason } if never => report(
            AgentPhase::Failed,
            "PodFailed",
            format!("the run failed ({reason}); restartPolicy is Never"),
        ),
        PodState::Failed { reason } => report(
            AgentPhase::Error,
            "PodFailed",
            format!("the pod failed ({reason}); it is being recreated"),
        ),
    }
}

pub fn tool_phase(enabled: bool, state: &PodState) -> Report<ToolPhase> {
    if !enabled {
        return report(
            ToolPhase::Disabled,
            "Disabled",
            "spec.enabled is false; the tool has no pod",
        );
    }
    match state {
        PodState::Running { ready: true } => {
            report(ToolPhase::Ready, "Ready", "the tool pod is ready")
        }
        PodState::Broken { reason } => report(ToolPhase::Error, "PodError", reason.clone()),
        PodState::Failed { reason } => report(
            ToolPhase::Error,
            "PodFailed",
            format!("the tool pod failed ({reason})"),
        ),
        PodState::Succeeded => report(ToolPhase::Error, "PodExited", "the tool pod exited"),
        _ => report(
            ToolPhase::Pending,
            "PodStarting",
            "the tool pod is starting",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn pod_states() {
        let cases = vec![
            (serde_json::json!({"metadata": {}}), PodState::Starting),
            (
                serde_json::json!({"metadata": {}, "status": {"phase": "Pending"}}),
                PodState::Starting,
            ),
            (
                serde_json::json!({"metadata": {}, "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}]}}),
                PodState::Running { ready: true },
            ),
            (
                serde_json::json!({"metadata": {}, "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "False"}]}}),
                PodState::Running { ready: false },
            ),
            (
                serde_json::json!({"metadata": {}, "status": {"phase": "Running",
                    "containerStatuses": [{"name": "runtime", "image": "x", "imageID": "", "ready": false, "restartCount": 3,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
                PodState::Broken {
                    reason: "runtime: CrashLoopBackOff".into(),
                },
            ),
            (
                serde_json::json!({"metadata": {}, "status": {"phase": "Succeeded"}}),
                PodState::Succeeded,
            ),
            (
                serde_json::json!({"metadata": {}, "status": {"phase": "Failed", "reason": "Evicted"}}),
                PodState::Failed {
                    reason: "Evicted".into(),
                },
            ),
            (
                serde_json::json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}}),
                PodState::Deleting,
            ),
        ];
        for (json, want) in cases {
            assert_eq!(pod_state(Some(&pod(json.clone()))), want, "{json}");
        }
        assert_eq!(pod_state(None), PodState::Missing);
    }

    #[test]
    fn agent_phases() {
        use AgentPhase::*;
        let failed = PodState::Failed {
            reason: "Error".into(),
        };
        let broken = PodState::Broken { reason: "x".into() };
        let ready = PodState::Running { ready: true };
        let cases: Vec<(bool, bool, Option<RestartPolicy>, PodState, AgentPhase)> = vec![
            (true, false, None, ready.clone(), Terminating),
            (false, true, None, PodState::Missing, Paused),
            (false, true, None, ready.clone(), Paused),
            (false, false, None, PodState::Missing, Pending),
            (false, false, None, PodState::Starting, Pending),
            (false, false, None, PodState::Deleting, Pending),
            (false, false, None, ready.clone(), Active),
            (
                false,
                false,
                None,
                PodState::Running { ready: false },
                Pending,
            ),
            (false, false, None, broken.clone(), Error),
            (false, false, Some(RestartPolicy::Never), broken, Error),
            (
                false,
                false,
                Some(RestartPolicy::Never),
                PodState::Succeeded,
                Succeeded,
            ),
            (
                false,
                false,
                Some(RestartPolicy::OnFailure),
                PodState::Succeeded,
                Succeeded,
            ),
            (
                false,
                false,
                Some(RestartPolicy::Never),
                failed.clone(),
                Failed,
            ),
            (
                false,
                false,
                Some(RestartPolicy::Always),
                failed.clone(),
                Error,
            ),
            (false, false, None, failed, Error),
        ];
        for (deleting, paused, restart, state, want) in cases {
            let got = agent_phase(deleting, paused, restart, &state);
            assert_eq!(got.phase, want, "{deleting} {paused} {restart:?} {state:?}");
        }
    }

    #[test]
    fn tool_phases() {
        use ToolPhase::*;
        let cases = vec![
            (false, PodState::Running { ready: true }, Disabled),
            (false, PodState::Missing, Disabled),
            (true, PodState::Missing, Pending),
            (true, PodState::Starting, Pending),
            (true, PodState::Running { ready: false }, Pending),
            (true, PodState::Running { ready: true }, Ready),
            (true, PodState::Broken { reason: "x".into() }, Error),
            (true, PodState::Failed { reason: "x".into() }, Error),
        ];
        for (enabled, state, want) in cases {
            assert_eq!(
                tool_phase(enabled, &state).phase,
                want,
                "{enabled} {state:?}"
            );
        }
    }
}
