//! A backup restored into an AgentFS: [`super::restore`]'s checked stream
//! piped into `tar -x` in a pod that mounts the volume
//! (`agentfs::transfer::Upload::begin_root`), and the tree hash the pod
//! computes over what landed compared with the backup's. `exo fs restore`
//! and the operator's restore drills both call [`restore_into`]; each
//! creates and deletes its own target (thin I/O).
//!
//! Why here: the CLI and the operator both need it, and the CLI should not
//! reach into the operator; `agentfs` cannot hold it, since `backup`
//! already builds on `agentfs` (its walker) and the reverse would be a
//! cycle.
//!
//! Guarantees:
//! - the target is refused, naming it, while any pod but the volume's own
//!   `exo fs` helper mounts its claim (named), while an agent declares it
//!   (named), and unless its root is empty (the first entry named); the
//!   root is checked again, in the pod, right before the files move in;
//! - nothing is written before the backup's manifest and config passed
//!   their checks (the caller's [`super::restore::prepare`]);
//! - the files land in a staging folder; they move to the volume's root
//!   only after every chunk, every file's sha256 and the tree hash
//!   matched the backup, and the pod's own `sha256sum` listing of the
//!   staged files hashed to the backup's tree hash (the live proof);
//! - after any failure the staging folder is removed: the target is as
//!   empty as it was.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use tokio::io::AsyncReadExt;

use super::restore::{Prepared, RestoreError, Restored};
use super::store::Repository;
use crate::agentfs::FsError;
use crate::agentfs::exec::{self, Target};
use crate::agentfs::helper::{self, HelperOpts};
use crate::agentfs::script::Op;
use crate::agentfs::transfer::Upload;
use crate::cluster::build::pvc_name;
use crate::crd::AgentFS;
use crate::wire::fs::CHUNK_BYTES;

/// How long a volume created for a restore may take to be reachable: its
/// claim is new, and may be provisioned only once the helper pod asks.
pub const NEW_VOLUME_READY: Duration = Duration::from_secs(180);

/// What a restore into a volume did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntoVolume {
    /// What the restore wrote, checked against the backup.
    pub restored: Restored,
    /// The pod the files were unpacked in.
    pub pod: String,
    /// The tree hash of the pod's `sha256sum` listing of what landed.
    pub landed: String,
}

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error(
        "AgentFS {volume} is mounted by pod {pod}; a restore never writes into a volume in use (stop the pod, or restore --to a new name)"
    )]
    Mounted { volume: String, pod: String },
    #[error(
        "AgentFS {volume} is declared by agent(s) {agents}; a restore never writes into a volume in use (detach it, or restore --to a new name)"
    )]
    Declared { volume: String, agents: String },
    #[error(
        "AgentFS {volume} is not empty (it holds {entry:?}); a restore fills only an empty volume (restore --to a new name)"
    )]
    NotEmpty { volume: String, entry: String },
    #[error("AgentFS {volume} is being deleted")]
    Deleting { volume: String },
    #[error("AgentFS {volume}: {source}")]
    Fs {
        volume: String,
        #[source]
        source: FsError,
    },
    #[error("backup {digest} into AgentFS {volume}: {source}")]
    Restore {
        digest: String,
        volume: String,
        #[source]
        source: RestoreError,
    },
}

impl VolumeError {
    /// The restore's own error, when the backup is what failed (a chunk,
    /// a file, the tree hash), not the volume.
    pub fn restore_error(&self) -> Option<&RestoreError> {
        match self {
            VolumeError::Restore { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn key(fs: &AgentFS) -> String {
    format!(
        "{}/{}",
        fs.metadata.namespace.as_deref().unwrap_or_default(),
        fs.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The pod to restore `fs` through, after the checks of the module
/// comment (in use, not empty).
pub async fn check_target(
    client: &Client,
    fs: &AgentFS,
    helper: &HelperOpts,
) -> Result<Target, VolumeError> {
    let volume = key(fs);
    let ns = fs.metadata.namespace.clone().unwrap_or_default();
    let name = fs.metadata.name.clone().unwrap_or_default();
    let on_fs = |source| VolumeError::Fs {
        volume: volume.clone(),
        source,
    };
    if fs.metadata.deletion_timestamp.is_some() {
        return Err(VolumeError::Deleting { volume });
    }
    let status = fs.status.clone().unwrap_or_default();
    let pvc = status.pvc_name.unwrap_or_else(|| pvc_name(&name));
    let pods = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .map_err(|e| on_fs(FsError::kube(format!("list pods in {ns}"), e)))?;
    if let Some(pod) = helper::others_mounting(&pods.items, &pvc, &name)
        .into_iter()
        .next()
    {
        return Err(VolumeError::Mounted { volume, pod });
    }
    // An agent that declares it may not have its pod yet.
    if !status.mounted_by.is_empty() {
        return Err(VolumeError::Declared {
            volume,
            agents: status.mounted_by.join(", "),
        });
    }
    let t = helper::target(client, fs, true, helper)
        .await
        .map_err(on_fs)?;
    if !t.helper {
        // Only a pod that appeared since the list can be chosen here.
        return Err(VolumeError::Mounted { volume, pod: t.pod });
    }
    let out = exec::output(client, &t, Op::Empty, &[], 4096)
        .await
        .map_err(on_fs)?;
    let entry = String::from_utf8_lossy(&out).trim_end().to_owned();
    if !entry.is_empty() {
        return Err(VolumeError::NotEmpty { volume, entry });
    }
    Ok(t)
}

/// Restores `prepared` (a backup of `repo`) into the empty, unused volume
/// `fs`. `progress` is told the stream's bytes as they are written.
pub async fn restore_into(
    client: &Client,
    fs: &AgentFS,
    repo: &Repository,
    prepared: Prepared,
    helper: &HelperOpts,
    mut progress: impl FnMut(u64),
) -> Result<IntoVolume, VolumeError> {
    let volume = key(fs);
    let digest = prepared.digest().to_owned();
    let top = prepared.config().top.clone();
    let tree_hash = prepared.config().tree_hash.clone();
    let limits = prepared.limits();
    let on_fs = |source| VolumeError::Fs {
        volume: volume.clone(),
        source,
    };
    let t = check_target(client, fs, helper).await?;
    let mut up = Upload::begin_root(client, t, &top, limits, helper)
        .await
        .map_err(on_fs)?;

    // The restore writes into one end of a pipe; its other end is fed to
    // the pod. Either side stopping ends the other: a failed upload drops
    // the reader (the restore's next write fails), a failed restore drops
    // the writer (the feed sees the end).
    let (writer, mut reader) = tokio::io::duplex(CHUNK_BYTES);
    let restoring = prepared.write_to(repo, writer);
    let upload = &mut up;
    let feeding = async move {
        let mut buf = vec![0u8; CHUNK_BYTES];
        loop {
            let n = reader
                .read(&mut buf)
                .await
                .map_err(|e| FsError::io("the restore's stream", e))?;
            if n == 0 {
                return Ok::<(), FsError>(());
            }
            upload.write(&buf[..n]).await?;
            progress(n as u64);
        }
    };
    let (restored, fed) = tokio::join!(restoring, feeding);
    let restored = match (restored, fed) {
        (Ok(r), Ok(())) => r,
        // The pod's side failed first (the restore then could not write).
        (Ok(_) | Err(RestoreError::Sink(_)), Err(e)) => {
            up.abort().await;
            return Err(on_fs(e));
        }
        (Err(source), _) => {
            up.abort().await;
            return Err(VolumeError::Restore {
                digest,
                volume,
                source,
            });
        }
    };
    // The pod's listing of the staged files must hash to the backup's
    // tree hash (and to what the walker saw) before they move into place;
    // `finish` removes the staging folder when it does not.
    let landed = up.finish(Some(&tree_hash)).await.map_err(on_fs)?;
    Ok(IntoVolume {
        restored,
        pod: landed.pod,
        landed: landed.sha256,
    })
}
