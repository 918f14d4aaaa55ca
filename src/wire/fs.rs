//! AgentFS on the wire: the results of the `agentfs_*` commands and the
//! chunk frames that carry a copy's bytes (`fs_chunk`, `fs_chunk_ack`,
//! `fs_abort`). See `docs/protocol.md`, "AgentFS".
//!
//! A copy is one `command` (`agentfs_write` or `agentfs_read`) whose bytes
//! follow as `fs_chunk` frames with the command's `id`: server -> client
//! for a write, client -> server for a read. The receiver acknowledges
//! every chunk it has passed on; a sender keeps at most [`WINDOW`] chunks
//! unacknowledged, so neither side buffers more than that. The copy ends
//! with the usual `command_result`.

use serde::{Deserialize, Serialize};

/// Largest number of data bytes in one `fs_chunk` (before base64): a
/// chunk stays well inside the 1 MiB frame limit.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// Chunks a sender may have in flight without an acknowledgement.
pub const WINDOW: u64 = 8;
/// A copy with no chunk or acknowledgement for this long is abandoned.
pub const IDLE_TIMEOUT_MS: u64 = 60_000;
/// The capability an operator advertises when it serves `agentfs_*`
/// commands and mounts file systems on agents.
pub const CAP_MOUNT_FILESYSTEMS: &str = "mount-filesystems";
/// The capability an operator advertises when it reconciles Apps and
/// serves the `app_volumes` and `app_resize` commands.
pub const CAP_APP_STORAGE: &str = "app-storage";

/// One piece of a copy's tar stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FsChunk {
    /// The `id` of the `agentfs_write` / `agentfs_read` command.
    pub id: String,
    /// 0, 1, 2, ... in order; a gap is an error.
    pub seq: u64,
    /// The bytes, base64 (standard alphabet, padded); at most
    /// [`CHUNK_BYTES`] before encoding. Empty on the last chunk is fine.
    #[serde(default)]
    pub data: String,
    /// The stream ends with this chunk.
    #[serde(default)]
    pub last: bool,
    /// On the last chunk: the sender's digest of the files it sent (sha256
    /// of their `sha256sum` listing sorted by path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// The receiver passed chunk `seq` on; the sender may send `seq + WINDOW`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FsChunkAck {
    pub id: String,
    pub seq: u64,
}

/// Either side gives up a copy (the user went away, a check failed). The
/// operator removes what it staged; nothing lands under the final name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FsAbort {
    pub id: String,
    pub reason: String,
}

/// An AgentFS's phase as the list reports it: the resource's own phases,
/// plus `Retained` for a volume whose AgentFS is gone but whose PVC was
/// kept (`retain: true`) and can be reclaimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FsPhase {
    #[default]
    Pending,
    Bound,
    Resizing,
    Error,
    Terminating,
    Retained,
}

impl From<crate::crd::AgentFSPhase> for FsPhase {
    fn from(p: crate::crd::AgentFSPhase) -> Self {
        use crate::crd::AgentFSPhase as P;
        match p {
            P::Pending => FsPhase::Pending,
            P::Bound => FsPhase::Bound,
            P::Resizing => FsPhase::Resizing,
            P::Error => FsPhase::Error,
            P::Terminating => FsPhase::Terminating,
        }
    }
}

impl std::fmt::Display for FsPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// One AgentFS as `agentfs_list` and the other commands report it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsInfo {
    pub namespace: String,
    pub name: String,
    pub phase: FsPhase,
    pub size: String,
    pub max_size: String,
    #[serde(default)]
    pub access_mode: String,
    #[serde(default)]
    pub retain: bool,
    /// What the PVC asks for and what the volume has (they differ while
    /// an expansion is in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<String>,
    #[serde(default)]
    pub mounted_by: Vec<String>,
    /// `spec.backup`: how the volume is backed up (none: it is not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<crate::crd::BackupPolicy>,
    /// `status.backup`: what its backups and restore drills did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_status: Option<crate::crd::BackupStatus>,
    /// The AgentFS's generation: `backupStatus.observedGeneration` behind
    /// it is a status for an older policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// When the AgentFS was created (RFC 3339): a volume that never had a
    /// good backup is stale counted from then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FsList {
    pub items: Vec<FsInfo>,
}

/// One of an App's volumes (`workspace` or `database`) as `app_volumes`
/// and `app_resize` report it. A volume whose App is gone but whose PVC
/// was kept (`retain: true`) has phase `Retained`, and no `maxSize`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppVolumeInfo {
    pub namespace: String,
    pub app: String,
    /// `workspace` or `database`.
    pub volume: String,
    pub phase: FsPhase,
    /// What the App's spec asks for (a retained volume: its PVC's request).
    pub size: String,
    #[serde(default)]
    pub max_size: String,
    #[serde(default)]
    pub retain: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc: Option<String>,
    /// When the volume's last good backup ended (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup: Option<String>,
    /// The reason of the volume's last failed backup, kept until a
    /// success (`hook`, `registry`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AppVolumeList {
    pub items: Vec<AppVolumeInfo>,
}

/// What kind of thing a directory entry is. Symbolic links are shown,
/// never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::Other => "other",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsEntry {
    pub name: String,
    pub kind: EntryKind,
    pub size: u64,
    /// Modification time, Unix seconds.
    pub mtime: i64,
}

/// Real usage of the volume, from `df` in the pod that mounts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FsUsage {
    pub used_bytes: u64,
    pub free_bytes: u64,
    pub total_bytes: u64,
}

/// The answer to `agentfs_ls`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FsListing {
    pub namespace: String,
    pub fs_name: String,
    pub path: String,
    /// The pod the listing ran in (an agent's, or the short-lived helper).
    pub pod: String,
    pub entries: Vec<FsEntry>,
    pub usage: FsUsage,
}

/// The answer to `agentfs_write` and `agentfs_read` (and the direct
/// route's summary): what landed, checked by sha256 end to end.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Transferred {
    /// The final path in the volume (write) or the source path (read).
    pub path: String,
    pub files: u64,
    pub bytes: u64,
    /// sha256 of the files' `sha256sum` listing sorted by path.
    pub sha256: String,
    pub pod: String,
}
