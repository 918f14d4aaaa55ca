//! One backup of one volume: its tar stream, read through a pod that
//! mounts it (an agent's, or a short-lived helper), goes through
//! `backup::backup` to the policy's repository; then the backups past
//! `keep` are deleted. Thin I/O over `agentfs::transfer` and `backup`.
//!
//! Guarantees: nothing stops an agent (the volume is read in place); the
//! registry's credentials are read from the Secret for this call and are
//! in no message; a failure leaves the repository's backups as they were
//! (the manifest goes last, `backup::take`).

use bytes::Bytes;
use kube::{Client, ResourceExt};

use super::plan::Settings;
use crate::agentfs::FsError;
use crate::agentfs::helper::HelperOpts;
use crate::agentfs::tarstream::Limits;
use crate::agentfs::transfer::Download;
use crate::backup::access::{self, AccessError};
use crate::backup::{self, BackupError, ChunkSizes, Repository, StoreError, Taken, Volume, select};
use crate::crd::{AgentFS, BackupPolicy};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error("reading the volume: {0}")]
    Fs(#[from] FsError),
    #[error(transparent)]
    Backup(#[from] BackupError),
    #[error("the repository: {0}")]
    Store(#[from] StoreError),
}

impl RunError {
    /// A bounded reason for the status, Events and metric labels.
    pub fn reason(&self) -> &'static str {
        match self {
            RunError::Access(e) => e.reason(),
            RunError::Fs(_) => "volume",
            RunError::Backup(e) => e.category().as_str(),
            RunError::Store(e) => e.category().as_str(),
        }
    }
}

/// Takes one backup of `fs` now, then deletes the backups past `keep`.
pub async fn backup_now(
    client: &Client,
    fs: &AgentFS,
    s: &Settings,
    policy: &BackupPolicy,
    helper: &HelperOpts,
) -> Result<Taken, RunError> {
    let namespace = fs.namespace().unwrap_or_default();
    let repo = access::open(client, &namespace, policy).await?;
    let download = Download::begin_volume(client, fs, Limits::default(), helper).await?;
    // The checked pieces, then the exec's end (its exit status): a failed
    // `tar` is an error of the stream, so no manifest names its bytes.
    let pieces = futures::stream::unfold(Some(download), |d| async move {
        let mut d = d?;
        match d.next().await {
            Ok(Some(piece)) => Some((Ok(Bytes::from(piece)), Some(d))),
            Ok(None) => match d.finish().await {
                Ok(_) => None,
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
            },
            Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
        }
    });
    let reader = tokio_util::io::StreamReader::new(Box::pin(pieces));
    let volume = Volume {
        namespace: namespace.clone(),
        name: fs.name_any(),
    };
    let taken = backup::backup(
        reader,
        &repo,
        &volume,
        ChunkSizes::default(),
        Limits::default(),
    )
    .await?;
    prune(&repo, s.keep).await?;
    Ok(taken)
}

/// Deletes the manifests of all but the newest `keep` backups (their
/// tags are Unix milliseconds; `latest` names the newest).
pub async fn prune(repo: &Repository, keep: u32) -> Result<usize, RunError> {
    let stamps = select::stamps(&repo.list_tags().await?);
    let mut deleted = 0;
    for old in stamps.iter().skip(keep as usize) {
        let pulled = repo.pull_manifest(&old.to_string()).await?;
        repo.delete_manifest(&pulled.digest).await?;
        deleted += 1;
    }
    Ok(deleted)
}
