//! `AnalysisRun` (short name `ar`): one wave's analysis of one release, in
//! the Fleet's namespace. The operator creates it once every tenant of the
//! wave is verified on the release, measures its checks while the wave
//! soaks, and acts on the outcome (`docs/release-format.md`, "A wave's
//! analysis"). Its spec is what the run judges, copied from the release at
//! the commit the run started at, so a restarted operator resumes the same
//! run; its status holds every measurement, each counted once per slot.
//!
//! A run is its own object, not part of the Fleet's or a Rollout's status:
//! those are written whole by the engine's sync and saga, which would
//! drop fields another writer set, and a run outlives the Rollouts of its
//! wave moving on.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::analysis::{Check, Measurement};

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "AnalysisRun",
    namespaced,
    shortname = "ar",
    category = "autonomic",
    status = "AnalysisRunStatus",
    derive = "PartialEq",
    printcolumn(name = "Wave", type_ = "string", json_path = ".spec.wave"),
    printcolumn(name = "Release", type_ = "string", json_path = ".spec.release"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Message", type_ = "string", json_path = ".status.message"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnalysisRunSpec {
    /// The Fleet (in this namespace) whose wave is judged.
    pub fleet: String,
    /// `canary`, `low-risk` or `fleet`.
    pub wave: String,
    /// The release the wave runs.
    pub release: String,
    /// The fleet commit the checks were read at.
    pub commit: String,
    /// The wave's tenants when the run started, and their namespaces.
    pub tenants: Vec<RunTenant>,
    /// The wave's checks, as the release wrote them.
    pub checks: Vec<Check>,
    /// The soak the counts were planned for (the next wave's
    /// `gates.soakTime`); none for the last wave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<String>,
    /// Promote the next wave when the run passes.
    #[serde(default)]
    pub auto_promote: bool,
}

/// A tenant judged by a run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunTenant {
    pub name: String,
    pub namespace: String,
}

/// Where a run is.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum AnalysisPhase {
    /// Measuring.
    #[default]
    Running,
    /// Every check made its count within its limits.
    Passed,
    /// A check failed more than its `failureLimit`: the wave is rolled back.
    Failed,
    /// A check was inconclusive more than its `inconclusiveLimit`: the wave
    /// is held until a person acts (delete the run to measure again, or
    /// roll back).
    Paused,
    /// The wave stopped running the release before the run ended (a
    /// promotion or a rollback in git): nothing is done.
    Aborted,
}

impl AnalysisPhase {
    /// Whether the run has ended.
    pub fn is_done(self) -> bool {
        self != AnalysisPhase::Running
    }
}

impl std::fmt::Display for AnalysisPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AnalysisPhase::Running => "Running",
            AnalysisPhase::Passed => "Passed",
            AnalysisPhase::Failed => "Failed",
            AnalysisPhase::Paused => "Paused",
            AnalysisPhase::Aborted => "Aborted",
        })
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunStatus {
    /// The run's `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub phase: AnalysisPhase,
    /// The outcome, or what is measured next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The failing or inconclusive check, once the run ended on one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Every measurement, at most one per check and slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measurements: Vec<Measurement>,
    /// What the outcome did in git: the next wave promoted, or this wave
    /// rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<RunAction>,
}

/// A commit an outcome made (or would have made, when nothing changed).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAction {
    pub kind: ActionKind,
    /// The wave whose pointer moved.
    pub wave: String,
    /// The release it points at now.
    pub release: String,
    /// The commit, when one was pushed (none when git already said so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub at: Time,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum ActionKind {
    Promoted,
    RolledBack,
}

impl AnalysisRun {
    /// The status, when it was computed for this spec.
    pub fn current_status(&self) -> Option<&AnalysisRunStatus> {
        let s = self.status.as_ref()?;
        (s.observed_generation.is_some() && s.observed_generation == self.metadata.generation)
            .then_some(s)
    }

    /// The phase of the current status; `Running` when there is none yet
    /// for this spec.
    pub fn phase(&self) -> AnalysisPhase {
        self.current_status().map(|s| s.phase).unwrap_or_default()
    }

    /// When the run started: its creation.
    pub fn started(&self) -> Option<k8s_openapi::jiff::Timestamp> {
        self.metadata.creation_timestamp.as_ref().map(|t| t.0)
    }
}
