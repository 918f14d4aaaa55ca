//! One backup, in one pass over the volume's tar stream: each chunk is
//! walked (`tarstream::Walker`, so the same refusals and sha256s as
//! `exo fs cp`), then HEADed and uploaded only when the repository lacks
//! it; the config and then the manifest go last.
//!
//! Guarantees:
//! - a chunk is uploaded only after the walker accepted it, so a refused
//!   stream leaves at most some unreferenced blobs, which the registry's
//!   garbage collection frees, and no manifest;
//! - no manifest ever names a blob that is not in the repository: every
//!   layer and the config are present before the manifest is pushed;
//! - the manifest is pushed under `<unix-ms>` first, then `latest` is moved
//!   to it, so `latest` never names a backup that is not complete;
//! - memory: the chunker's buffer and one chunk (two maximum chunks), the
//!   file list and the layer list.

use std::collections::HashSet;
use std::convert::Infallible;

use futures::StreamExt;
use hyper::body::Bytes;
use tokio::io::AsyncRead;

use super::Category;
use super::chunk::{ChunkError, ChunkSizes, Chunker};
use super::manifest::{self, BackupConfig, CHUNK_MEDIA_TYPE, Descriptor, ManifestError, Volume};
use super::store::{Blob, Pushed, Repository, StoreError};
use crate::agentfs::tarstream::{Limits, StreamError, WalkError, Walker};

/// The tag that always names the newest complete backup.
pub const LATEST: &str = "latest";

/// What a backup did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The manifest's digest: what a restore names.
    pub digest: String,
    /// Its own tag, the creation time in Unix milliseconds.
    pub tag: String,
    /// The RFC 3339 creation time.
    pub created: String,
    /// The tar stream's length.
    pub bytes_total: u64,
    /// File data in it.
    pub file_bytes: u64,
    /// Blob bytes sent: the chunks uploaded and the config, if it was new.
    pub bytes_uploaded: u64,
    pub chunks: u64,
    pub chunks_uploaded: u64,
    /// Chunks the registry linked from `mount_from` without an upload.
    pub chunks_mounted: u64,
    pub files: u64,
    pub tree_hash: String,
}

/// Progress, after each chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub bytes_read: u64,
    pub chunks: u64,
    pub chunks_uploaded: u64,
    pub bytes_uploaded: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    #[error("the volume's tar stream was refused: {0}")]
    Stream(#[source] StreamError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the backup's manifest: {0}")]
    Manifest(#[from] ManifestError),
}

impl BackupError {
    pub fn category(&self) -> Category {
        match self {
            BackupError::Chunk(e) => e.category(),
            BackupError::Stream(StreamError::Refused { .. } | StreamError::AfterEnd { .. }) => {
                Category::Refused
            }
            // Truncated, empty, or stopped: the stream broke off.
            BackupError::Stream(_) => Category::Io,
            BackupError::Store(e) => e.category(),
            BackupError::Manifest(e) => e.category(),
        }
    }
}

/// Backs up `volume` from `stream` (its tar stream, as `tar -C parent -c
/// top` writes it) to `repo`. See the module comment.
pub async fn backup<R: AsyncRead + Unpin>(
    stream: R,
    repo: &Repository,
    volume: &Volume,
    sizes: ChunkSizes,
    limits: Limits,
) -> Result<Taken, BackupError> {
    backup_with_progress(stream, repo, volume, sizes, limits, |_| {}).await
}

/// `backup`, calling `progress` after each chunk.
pub async fn backup_with_progress<R: AsyncRead + Unpin>(
    stream: R,
    repo: &Repository,
    volume: &Volume,
    sizes: ChunkSizes,
    limits: Limits,
    mut progress: impl FnMut(Progress),
) -> Result<Taken, BackupError> {
    // Milliseconds: the tag is this time, and the config says the same.
    let now = k8s_openapi::jiff::Timestamp::now();
    let created = k8s_openapi::jiff::Timestamp::from_millisecond(now.as_millisecond())
        .unwrap_or(now)
        .to_string();
    let tag = now.as_millisecond().to_string();

    // Nothing is sent, or skipped as present, to what is not a registry.
    repo.check_api().await?;
    let mut walker = Walker::new(None, limits);
    let mut chunker = Chunker::new(stream, sizes)?;
    let mut chunks = std::pin::pin!(chunker.chunks());
    let mut layers: Vec<Descriptor> = Vec::new();
    // A digest met earlier in this stream (zeros, copies) is there already.
    let mut present: HashSet<String> = HashSet::new();
    let mut p = Progress::default();
    let mut chunks_mounted = 0u64;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        walker
            .feed(&chunk.data, &mut |_| Ok::<(), Infallible>(()))
            .map_err(|e| match e {
                WalkError::Stream(e) => BackupError::Stream(e),
            })?;
        let index = layers.len();
        let size = chunk.data.len() as u64;
        layers.push(Descriptor {
            media_type: CHUNK_MEDIA_TYPE.to_owned(),
            digest: chunk.digest.clone(),
            size,
        });
        p.bytes_read += size;
        p.chunks += 1;
        if present.insert(chunk.digest.clone())
            && !repo.blob_exists(&chunk.digest, Blob::Layer(index)).await?
        {
            let pushed = repo
                .push_blob(&chunk.digest, Bytes::from(chunk.data), Blob::Layer(index))
                .await?;
            match pushed {
                Pushed::Uploaded => {
                    p.chunks_uploaded += 1;
                    p.bytes_uploaded += size;
                }
                Pushed::Mounted => chunks_mounted += 1,
            }
        }
        progress(p);
    }
    let walked = walker.finish().map_err(BackupError::Stream)?;
    let config = BackupConfig::of_walk(
        volume.clone(),
        created.clone(),
        &walked,
        p.bytes_read,
        p.chunks,
        sizes,
    );
    let built = manifest::build(&config, layers)?;

    let cd = &built.config_descriptor;
    if !repo.blob_exists(&cd.digest, Blob::Config).await? {
        let pushed = repo
            .push_blob(&cd.digest, Bytes::from(built.config), Blob::Config)
            .await?;
        if pushed == Pushed::Uploaded {
            p.bytes_uploaded += cd.size;
        }
    }
    let manifest = Bytes::from(built.manifest);
    let digest = repo.push_manifest(&tag, manifest.clone()).await?;
    repo.push_manifest(LATEST, manifest).await?;
    Ok(Taken {
        digest,
        tag,
        created,
        bytes_total: p.bytes_read,
        file_bytes: config.file_bytes,
        bytes_uploaded: p.bytes_uploaded,
        chunks: p.chunks,
        chunks_uploaded: p.chunks_uploaded,
        chunks_mounted,
        files: config.files.len() as u64,
        tree_hash: config.tree_hash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::restore::restore;
    use crate::backup::store::Options;

    fn send<T: Send>(_: &T) {}

    /// The operator runs backups and restores on spawned tasks.
    #[test]
    fn backups_and_restores_are_send() {
        let Ok(repo) = Repository::new("127.0.0.1:1", "a", None, Options::default()) else {
            panic!("a valid repository");
        };
        let volume = Volume {
            namespace: "n".into(),
            name: "v".into(),
        };
        let stream: &[u8] = b"";
        let b = backup(
            stream,
            &repo,
            &volume,
            ChunkSizes::default(),
            Limits::default(),
        );
        send(&b);
        let r = restore(&repo, "latest", tokio::io::sink(), Limits::default());
        send(&r);
        fn sync<T: Sync>(_: &T) {}
        sync(&repo);
    }
}
