//! `Fleet` (the git repository a cluster follows) and `Rollout` (one
//! tenant's durable saga towards the release its wave points at).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::InventoryEntry;
use super::saga::SagaStep;

/// The fleet repository the operator syncs, like Flux's GitRepository.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "Fleet",
    namespaced,
    shortname = "fl",
    category = "autonomic",
    status = "FleetStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "URL", type_ = "string", json_path = ".spec.url"),
    printcolumn(name = "Commit", type_ = "string", json_path = ".status.appliedCommit"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetSpec {
    /// `https://…` (or, with `allowInsecure`, `http://`, `git://`, or a
    /// local-network address).
    pub url: String,
    #[serde(default = "default_branch")]
    pub branch: String,
    /// How often to fetch, e.g. `1m`. An annotation
    /// `autonomic.sh/sync-requested-at` asks for a fetch at once.
    #[serde(default = "default_interval")]
    pub interval: String,
    /// A Secret in this namespace with `username` and `password` (or a
    /// token as `password`) for HTTPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// Allow non-HTTPS URLs and loopback or private-network hosts.
    #[serde(default)]
    pub allow_insecure: bool,
    /// Largest file the checkout may hold, in bytes (default 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<i64>,
    /// Delete the objects a tenant's inventory holds once git no longer
    /// has them (default `true`). Objects Exo did not apply are never touched.
    #[serde(default = "default_true")]
    pub prune: bool,
    /// Stop applying, pruning, reverting drift and healing (like `flux
    /// suspend`); fetching goes on and the Fleet's status says what was
    /// fetched. `exo release suspend|resume` sets it.
    #[serde(default)]
    pub suspend: bool,
    /// How often verified pods have their live content and image digests
    /// checked again, e.g. `10m` (jittered by up to a tenth).
    #[serde(default = "default_reverify_interval")]
    pub reverify_interval: String,
    /// What a live-content mismatch found by a re-check does.
    #[serde(default)]
    pub drift_policy: DriftPolicy,
    /// A Secret in this namespace whose key `token` signs push
    /// notifications to `POST /hooks/fleet/<namespace>/<name>` (HMAC-SHA256
    /// of the body, GitHub or Gitea header). Without it the hook is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret_ref: Option<String>,
    /// Thresholds of the operator's health monitors (crash loops, restarts
    /// per tenant, silent agents); flags of `exo operator run` override them.
    // Left out when it is the default, so the CRD's schema defaults nothing
    // into Fleets that do not set it (an older operator's strict reader
    // still reads them).
    #[serde(default, skip_serializing_if = "super::Monitors::is_default")]
    pub monitors: super::Monitors,
    /// Settings of the checks that judge a release's waves (their
    /// `analysis`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<FleetAnalysis>,
    /// How the operator reads the model gateway's and the broker's circuit
    /// telemetry (metric and label names, the `model/failures` threshold);
    /// LiteLLM's names by default. Left out when it is the default, as
    /// `monitors` is.
    #[serde(default, skip_serializing_if = "super::CircuitSettings::is_default")]
    pub circuits: super::CircuitSettings,
    /// Apply only signed commits: which ones must be signed, and the
    /// Secret with the trusted SSH and OpenPGP keys. Without it commits
    /// are not verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<super::FleetVerify>,
}

/// `spec.analysis` of a Fleet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetAnalysis {
    /// `http(s)://host[:port][/path]` of the Prometheus that `prometheus`
    /// checks query (`/api/v1/query` under it). Without it they are
    /// inconclusive.
    #[x_kube(validation = Rule::new("self.startsWith('http://') || self.startsWith('https://')").message("prometheusUrl must be an http:// or https:// URL"))]
    pub prometheus_url: String,
}

/// What a live-content mismatch found by a re-check does.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DriftPolicy {
    /// Replace the pod and verify it again.
    #[default]
    Heal,
    /// Report only (condition, Event, metric, upstream alert).
    Alert,
}

fn default_true() -> bool {
    true
}
fn default_reverify_interval() -> String {
    "10m".into()
}

fn default_branch() -> String {
    "main".into()
}
fn default_interval() -> String {
    "1m".into()
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The commit whose manifests and releases are applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_commit: Option<String>,
    /// The newest commit fetched (differs from `appliedCommit` when it was refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_time: Option<Time>,
    /// Wave -> release, as `releases/waves.yaml` said at `appliedCommit`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub waves: std::collections::BTreeMap<String, String>,
    /// Every baseline ConfigMap version a release at `appliedCommit` pins:
    /// a pod mounting any other version is an audit finding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned_baselines: Vec<String>,
    /// The last audit of this Fleet's tenants (written by the leader's
    /// audit task with a merge patch of this field alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditStatus>,
}

/// What the operator's last audit found, per rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditStatus {
    /// One condition per rule (`Placement`, `Network`, `Credentials`,
    /// `Mounts`, `Immutability`): `True` when the rule found nothing,
    /// stamped with the Fleet generation the audit ran for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_time: Option<Time>,
    /// Findings of the last run, all rules.
    #[serde(default)]
    pub findings: u32,
}

/// One tenant's rollout saga. Created and updated by the operator from the
/// fleet repository; its status is the durable saga state.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "Rollout",
    namespaced,
    shortname = "ro",
    category = "autonomic",
    status = "RolloutStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Wave", type_ = "string", json_path = ".spec.wave"),
    printcolumn(name = "Release", type_ = "string", json_path = ".spec.release"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Step", type_ = "string", json_path = ".status.currentStep"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutSpec {
    pub tenant: String,
    pub wave: String,
    pub release: String,
    /// The fleet commit that last changed what this tenant runs (the
    /// commit at which `desiredHash` was computed).
    pub commit: String,
    /// sha256 over everything rendered for the tenant at (commit,
    /// release): its workloads re-pointed to the release (so the digests
    /// and baseline versions they mount), its AgentFS, and the baselines'
    /// content hashes. The saga runs again whenever it changes.
    #[serde(default)]
    pub desired_hash: String,
    /// The tenant's `tenant.yaml` at `commit` (node tier, allowed egress):
    /// what `exo audit` checks placement and NetworkPolicies against.
    #[serde(default, skip_serializing_if = "is_default")]
    pub settings: crate::crd::tenant::TenantSpec,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum RolloutPhase {
    #[default]
    Pending,
    Progressing,
    /// A step's actuator is missing (e.g. no RBAC for pods/exec); it is
    /// retried, never skipped.
    Waiting,
    Verified,
    Failed,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<RolloutPhase>,
    /// The release the steps below belong to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<SagaStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<Time>,
    /// Releases verified in this tenant, newest first (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verified_releases: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The `metadata.generation` this status was computed for. A reader
    /// trusts the status only when it equals the current generation and
    /// `desiredHash` equals the spec's (see [`Rollout::current_status`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The `spec.desiredHash` the steps above are for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_hash: Option<String>,
    /// The `spec.commit` the steps above are for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_commit: Option<String>,
    /// Deprecated: the inventory now lives in the `Inventory` of the same
    /// name. An operator that finds entries here (written by an older one)
    /// carries them over into that object, then writes this status without
    /// them. Never written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inventory: Vec<InventoryEntry>,
    /// Objects git dropped whose deletion did not finish, with why (at
    /// most [`PENDING_PRUNES_SHOWN`]; the `Pruned` condition gives the
    /// count): what `exo release status` and the dashboard show.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_prunes: Vec<InventoryEntry>,
    /// `Pruned` (False while an object git dropped cannot be deleted) and
    /// `ContentDrift` (True while a re-check found live content that is
    /// not the release's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The last managed object put back to what git says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_drift: Option<DriftRecord>,
    /// The last live re-check of the verified pods, and what it found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_live_check: Option<LiveCheck>,
    /// What this saga run changed, recorded when it starts and before any
    /// step acts: `repointed`, `pods-rolled`, `verified` and
    /// `status-projected` act on these workloads only. Absent (a status
    /// written before this field) means every workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<ChangedSet>,
    /// When every pod of the tenant was last checked live: by the last
    /// re-check, or by a saga run whose changed set was the whole tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_full_check: Option<Time>,
    /// Per image of the release, the cosign signature that verified it
    /// (the saga's `signatures-verified` step; empty when the release asks
    /// for none). Written with the steps above, so it is for the same
    /// `desiredHash`; the live re-check compares running imageIDs with
    /// these digests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<ImageSignature>,
}

/// An image whose cosign signature verified.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSignature {
    /// `repository@sha256:…`, as the release pins it.
    pub image: String,
    /// The trusted key's name (the release's `signatures.keys[].name`).
    pub key: String,
    /// `sha256:` of the key's SubjectPublicKeyInfo.
    pub key_id: String,
    /// The digest of the signed payload that verified.
    pub signature: String,
}

/// The workloads (and baseline ConfigMap versions) a saga run changes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangedSet {
    /// Every workload of the tenant (the lists below are then empty).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// Names of the Agents that change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// Names of the Tools that change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Baseline ConfigMap versions the changed Agents move to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_maps: Vec<String>,
}

/// A managed object found different from git and put back.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftRecord {
    pub at: Option<Time>,
    /// `Agent/name`, `ConfigMap/name`, …
    pub object: String,
    /// The fields that differed (`spec.runtime.image`), or `deleted`.
    pub fields: Vec<String>,
}

/// A live re-check of verified pods.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveCheck {
    pub at: Option<Time>,
    /// Pods checked.
    pub pods: u32,
    /// `true` when every pod's content and image digests matched.
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// How many pending prunes a Rollout's status lists.
pub const PENDING_PRUNES_SHOWN: usize = 20;

/// Condition types on a Rollout.
pub const CONDITION_PRUNED: &str = "Pruned";
pub const CONDITION_CONTENT_DRIFT: &str = "ContentDrift";

impl Rollout {
    /// The status, only when it was computed for the current spec: its
    /// `observedGeneration` is the object's generation and its
    /// `desiredHash` the spec's. Every reader goes through this.
    pub fn current_status(&self) -> Option<&RolloutStatus> {
        let s = self.status.as_ref()?;
        let generation_ok =
            s.observed_generation.is_some() && s.observed_generation == self.metadata.generation;
        let hash_ok = s.desired_hash.as_deref() == Some(self.spec.desired_hash.as_str());
        (generation_ok && hash_ok).then_some(s)
    }

    /// Whether a live re-check currently reports content drift.
    pub fn content_drift(&self) -> Option<&Condition> {
        self.current_status()?
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_CONTENT_DRIFT && c.status == "True")
    }
}
