//! A volume's backup policy and what its backups and restore drills did
//! (`AgentFS.spec.backup`, `AgentFS.status.backup`). See docs/backups.md.

use serde::{Deserialize, Serialize};

/// How a volume is backed up: to an OCI repository, every `every`,
/// keeping the newest `keep`, proven by a restore drill every
/// `drillEvery`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupPolicy {
    /// How often a backup is taken: a duration such as `6h`, `1d`, `10s`.
    pub every: String,
    /// How many backups are kept (at least 1); older manifests are deleted
    /// through the registry API, and its garbage collection frees the blobs.
    #[schemars(range(min = 1))]
    pub keep: u32,
    /// `host[:port]/path` of the OCI repository the backups go to.
    pub repository: String,
    /// A Secret in the volume's namespace with `username` and `password`
    /// for the registry. Never printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// How often the latest backup is restored into a scratch volume and
    /// compared (default `7d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drill_every: Option<String>,
    /// No good backup for this long raises `backup/stale` (default twice
    /// `every`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_after: Option<String>,
    /// Plain HTTP to the registry (a loopback test registry only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

/// What the backups of one volume did, for the generation of the policy
/// they ran under (`observedGeneration`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// The AgentFS generation whose policy the fields below follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<BackupRecord>,
    /// The last failed attempt, kept until a later success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<BackupFailure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_drill: Option<DrillRecord>,
    /// The last on-demand request (`autonomic.sh/backup-requested-at`)
    /// that a backup answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_request: Option<String>,
}

/// One good backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupRecord {
    /// RFC 3339, when the backup ended.
    pub time: String,
    /// `sha256:…` of the backup's manifest.
    pub digest: String,
    pub bytes_uploaded: u64,
    pub bytes_total: u64,
    pub files: u64,
    /// The volume's tree hash (`exo fs`'s digest of the file list).
    pub tree_hash: String,
}

/// One failed attempt.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupFailure {
    pub time: String,
    /// A bounded category (`registry`, `exec`, `refused`, `credentials`, …).
    pub reason: String,
    pub message: String,
}

/// One restore drill of a backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrillRecord {
    pub time: String,
    /// The backup restored.
    pub digest: String,
    pub passed: bool,
    /// Why it failed: the first file that differs, or the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the last drill that passed ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_passed: Option<String>,
}
