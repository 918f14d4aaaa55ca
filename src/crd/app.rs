//! `App` (short name `app`): one pod running an app image with its own
//! storage: an always-on workspace volume holding the code, and, with
//! `database.postgres`, a Postgres sidecar with a database volume.
//!
//! Rules (product agentfs document, "App storage"): both volumes grow the
//! AgentFS way (grow-only, capped at `maxSize`; the CRD refuses a size
//! above `maxSize`, `deploy/app-admission.yaml` refuses a shrink); they go
//! with the App unless `retain: true`, in which case they outlive it and
//! are listed as `Retained`.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::AgentFSPhase;

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "App",
    namespaced,
    shortname = "app",
    category = "autonomic",
    status = "AppStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Image", type_ = "string", json_path = ".spec.image"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Workspace",
        type_ = "string",
        json_path = ".spec.workspace.size"
    ),
    printcolumn(
        name = "Database",
        type_ = "string",
        json_path = ".spec.database.postgres.size"
    ),
    printcolumn(name = "Pod", type_ = "string", json_path = ".status.podName"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppSpec {
    /// The app's image; its container mounts the workspace at `/workspace`.
    #[x_kube(validation = Rule::new("self.size() > 0 && !self.contains(' ')").message("image must be a non-empty image reference"))]
    pub image: String,
    /// The always-on volume holding the code.
    pub workspace: AppVolume,
    /// A Postgres sidecar with a volume of its own. Once set it stays
    /// (the admission policy refuses removing it): its volume holds data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<AppDatabase>,
    /// Keep both volumes, and their data, after the App is deleted.
    #[serde(default)]
    pub retain: bool,
    /// The node tier the pod runs on, as for a Tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_tier: Option<String>,
    /// The uid (and gid) the pod runs as, as for a Tool (default 65532).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    /// Backups of both volumes, as an AgentFS's (docs/backups.md, "App
    /// volumes"): the workspace to `<repository>/workspace`, the database
    /// to `<repository>/database`. None: no backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<super::BackupPolicy>,
}

/// A volume's size: grow-only, capped at `maxSize` (as an AgentFS's).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[x_kube(validation = Rule::new("quantity(string(self.size)).compareTo(quantity(string(self.maxSize))) <= 0").message("size must not exceed maxSize"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppVolume {
    /// Requested capacity, e.g. `1Gi`. Grow-only.
    pub size: Quantity,
    /// The ceiling for `size`. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("maxSize is immutable"))]
    pub max_size: Quantity,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppDatabase {
    pub postgres: AppPostgres,
}

/// The Postgres sidecar: its image and its volume, mounted at its data
/// folder.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[x_kube(validation = Rule::new("quantity(string(self.size)).compareTo(quantity(string(self.maxSize))) <= 0").message("size must not exceed maxSize"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppPostgres {
    #[x_kube(validation = Rule::new("self.size() > 0 && !self.contains(' ')").message("image must be a non-empty image reference"))]
    pub image: String,
    /// Requested capacity of the database volume. Grow-only.
    pub size: Quantity,
    /// The ceiling for `size`. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("maxSize is immutable"))]
    pub max_size: Quantity,
    /// The command exec'd in the sidecar before its volume is backed up,
    /// so that the copy holds a consistent dump (a non-zero exit fails
    /// that backup, and nothing is pushed). Default: a `pg_dumpall` into
    /// `exo-backup.sql` at the volume's root (docs/backups.md).
    #[x_kube(validation = Rule::new("self.size() > 0").message("backupHook must name a command"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_hook: Option<Vec<String>>,
}

impl AppPostgres {
    /// The database volume's sizes, as a workspace's.
    pub fn volume(&self) -> AppVolume {
        AppVolume {
            size: self.size.clone(),
            max_size: self.max_size.clone(),
        }
    }
}

/// Which of an App's two volumes.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum AppVolumeKind {
    Workspace,
    Database,
}

impl AppVolumeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AppVolumeKind::Workspace => "workspace",
            AppVolumeKind::Database => "database",
        }
    }

    /// The spec field that sets its size, for messages.
    pub fn size_field(self) -> &'static str {
        match self {
            AppVolumeKind::Workspace => "spec.workspace.size",
            AppVolumeKind::Database => "spec.database.postgres.size",
        }
    }
}

impl std::fmt::Display for AppVolumeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AppSpec {
    /// The volumes this spec asks for, workspace first.
    pub fn volumes(&self) -> Vec<(AppVolumeKind, AppVolume)> {
        let mut v = vec![(AppVolumeKind::Workspace, self.workspace.clone())];
        if let Some(db) = &self.database {
            v.push((AppVolumeKind::Database, db.postgres.volume()));
        }
        v
    }
}

#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum AppPhase {
    /// Volumes or the pod are being made.
    #[default]
    Pending,
    /// The pod runs and is ready.
    Running,
    /// A volume was refused, or the pod cannot run; conditions say why.
    Error,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AppPhase>,
    /// The generation this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<AppVolumeStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<AppVolumeStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What the backups of each volume did. Written by the backup task
    /// alone, as a merge patch: the reconciler's apply of the rest never
    /// lists it, so it neither removes nor overwrites it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<AppBackupStatus>,
}

/// The backup status of an App's volumes, each for the App generation
/// whose policy it followed (their own `observedGeneration`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppBackupStatus {
    #[serde(default)]
    pub workspace: super::BackupStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<super::BackupStatus>,
}

impl AppBackupStatus {
    pub fn volume(&self, kind: AppVolumeKind) -> Option<&super::BackupStatus> {
        match kind {
            AppVolumeKind::Workspace => Some(&self.workspace),
            AppVolumeKind::Database => self.database.as_ref(),
        }
    }
}

/// One volume as its PVC has it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppVolumeStatus {
    /// As an AgentFS's: Pending, Bound, Resizing or Error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AgentFSPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc_name: Option<String>,
    /// What the PVC asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<Quantity>,
    /// What the volume has; differs from `requested` while an expansion is
    /// in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<Quantity>,
}

impl AppStatus {
    pub fn volume(&self, kind: AppVolumeKind) -> Option<&AppVolumeStatus> {
        match kind {
            AppVolumeKind::Workspace => self.workspace.as_ref(),
            AppVolumeKind::Database => self.database.as_ref(),
        }
    }
}
