//! One restore: the manifest and config fetched and checked together, then
//! the chunks in order, each checked, walked and only then written to the
//! sink as the volume's tar stream (the caller pipes it into `tar -x` in a
//! pod that mounts an empty volume).
//!
//! Guarantees:
//! - nothing reaches the sink before the manifest and config passed
//!   `manifest::verify` and the config fits `limits` ([`prepare`], which a
//!   caller runs before it creates or opens the target);
//! - a chunk reaches the sink only after its sha256 and size matched its
//!   layer and the walker (`tarstream::Walker`, the one `exo fs cp` uses:
//!   links, special files and escaping names refused) accepted it;
//! - each file's size is checked when its header arrives and its sha256
//!   when its data ends, against the config; the first difference stops
//!   the restore and names the file;
//! - success means every file's sha256, the folder list and the tree hash
//!   matched the config. The sink has then had the whole stream; after an
//!   error it has had a prefix, and the caller discards the target.
//! - memory: one chunk, the walker, and the config's file list.

use std::collections::BTreeMap;

use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::Category;
use super::manifest::{self, BackupConfig, ManifestError, Volume};
use super::store::{Blob, Repository, StoreError};
use crate::agentfs::tarstream::{Event, FileSum, Limits, StreamError, WalkError, Walker};

/// What a restore wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The manifest's digest (a tag resolved).
    pub digest: String,
    pub volume: Volume,
    pub created: String,
    pub tree_hash: String,
    pub files: u64,
    pub file_bytes: u64,
    /// The tar stream's length.
    pub bytes_total: u64,
    pub chunks: u64,
}

/// How a restored file differs from the backup's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// In the stream, not in the config.
    Unexpected,
    /// In the config, not in the stream.
    Missing,
    Size {
        stated: u64,
        found: u64,
    },
    Content {
        stated: String,
        found: String,
    },
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Unexpected => f.write_str("the stream holds it, the file list does not"),
            Difference::Missing => f.write_str("the file list holds it, the stream does not"),
            Difference::Size { stated, found } => {
                write!(f, "{found} bytes, the file list states {stated}")
            }
            Difference::Content { stated, found } => {
                write!(f, "sha256 {found}, the file list states {stated}")
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("backup {reference} is refused: {source}")]
    Manifest {
        reference: String,
        #[source]
        source: ManifestError,
    },
    #[error("backup {reference} holds {what}, over this restore's limit of {limit}")]
    OverLimit {
        reference: String,
        what: &'static str,
        limit: u64,
    },
    #[error("the restored tar stream was refused: {0}")]
    Stream(#[source] StreamError),
    #[error("restored file {path:?} differs from the backup: {difference}")]
    Differs {
        path: String,
        difference: Difference,
    },
    #[error("restored folder {path:?} differs from the backup: {difference}")]
    DirDiffers {
        path: String,
        difference: Difference,
    },
    #[error("the restored tree hashes to {computed}, the backup states {stated}")]
    TreeHash { stated: String, computed: String },
    #[error("writing the restored stream: {0}")]
    Sink(#[source] std::io::Error),
}

impl RestoreError {
    pub fn category(&self) -> Category {
        match self {
            RestoreError::Store(e) => e.category(),
            RestoreError::Manifest { source, .. } => source.category(),
            RestoreError::OverLimit { .. } => Category::Invalid,
            RestoreError::Stream(_)
            | RestoreError::Differs { .. }
            | RestoreError::DirDiffers { .. }
            | RestoreError::TreeHash { .. } => Category::Integrity,
            RestoreError::Sink(_) => Category::Io,
        }
    }

    /// The first file found to differ, if that is what stopped the restore.
    pub fn differing_file(&self) -> Option<&str> {
        match self {
            RestoreError::Differs { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// A backup whose manifest and config were fetched and checked together
/// and fit the restore's limits: nothing has been written yet. What a
/// caller needs before it opens the sink (the archive's top name, the
/// tree hash to expect) is here.
#[derive(Debug, Clone)]
pub struct Prepared {
    reference: String,
    digest: String,
    manifest: manifest::ImageManifest,
    config: BackupConfig,
    limits: Limits,
}

impl Prepared {
    /// The name it was asked for: a tag or a digest.
    pub fn reference(&self) -> &str {
        &self.reference
    }

    /// The manifest's digest (the reference resolved).
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// What the backup states: top name, files, tree hash.
    pub fn config(&self) -> &BackupConfig {
        &self.config
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Streams the chunks into `sink`, each checked before it is written.
    /// See the module comment.
    pub async fn write_to<W: AsyncWrite + Unpin>(
        self,
        repo: &Repository,
        mut sink: W,
    ) -> Result<Restored, RestoreError> {
        let Prepared {
            digest,
            manifest: m,
            config,
            limits,
            ..
        } = self;
        let stated = config.file_map();
        let check = Check { stated: &stated };
        let mut walker = Walker::new(Some(&config.top), limits);
        for (i, layer) in m.layers.iter().enumerate() {
            let data = repo
                .pull_blob(&layer.digest, layer.size, Blob::Layer(i))
                .await?;
            walker
                .feed(&data, &mut |e| check.event(e))
                .map_err(|e| match e {
                    WalkError::Stream(e) => RestoreError::Stream(e),
                    WalkError::Sink(e) => e,
                })?;
            sink.write_all(&data).await.map_err(RestoreError::Sink)?;
        }
        sink.flush().await.map_err(RestoreError::Sink)?;
        let walked = walker.finish().map_err(RestoreError::Stream)?;

        if let Some(path) = stated.keys().find(|p| !walked.files.contains_key(*p)) {
            return Err(RestoreError::Differs {
                path: path.clone(),
                difference: Difference::Missing,
            });
        }
        let stated_dirs: std::collections::BTreeSet<&String> = config.dirs.iter().collect();
        if let Some(path) = stated_dirs.iter().find(|d| !walked.dirs.contains(**d)) {
            return Err(RestoreError::DirDiffers {
                path: (*path).clone(),
                difference: Difference::Missing,
            });
        }
        if let Some(path) = walked.dirs.iter().find(|d| !stated_dirs.contains(d)) {
            return Err(RestoreError::DirDiffers {
                path: path.clone(),
                difference: Difference::Unexpected,
            });
        }
        let computed = walked.digest();
        if computed != config.tree_hash {
            return Err(RestoreError::TreeHash {
                stated: config.tree_hash,
                computed,
            });
        }
        Ok(Restored {
            digest,
            volume: config.volume,
            created: config.created,
            tree_hash: config.tree_hash,
            files: walked.files.len() as u64,
            file_bytes: walked.bytes(),
            bytes_total: config.stream_bytes,
            chunks: config.chunks,
        })
    }
}

/// Fetches and checks the manifest `reference` names (a tag or a manifest
/// digest) and its config, against each other and `limits`.
pub async fn prepare(
    repo: &Repository,
    reference: &str,
    limits: Limits,
) -> Result<Prepared, RestoreError> {
    let pulled = repo.pull_manifest(reference).await?;
    let refused = |source| RestoreError::Manifest {
        reference: reference.to_owned(),
        source,
    };
    let m = manifest::parse_manifest(&pulled.bytes).map_err(refused)?;
    let config_bytes = repo
        .pull_blob(&m.config.digest, m.config.size, Blob::Config)
        .await?;
    let config = manifest::check_config(&m, &config_bytes).map_err(refused)?;
    drop(config_bytes);
    let over = |what, limit| RestoreError::OverLimit {
        reference: reference.to_owned(),
        what,
        limit,
    };
    if config.file_bytes > limits.max_bytes {
        return Err(over("more file bytes", limits.max_bytes));
    }
    if (config.files.len() + config.dirs.len()) as u64 > limits.max_entries {
        return Err(over("more entries", limits.max_entries));
    }
    Ok(Prepared {
        reference: reference.to_owned(),
        digest: pulled.digest,
        manifest: m,
        config,
        limits,
    })
}

/// Restores the backup `reference` (a tag or a manifest digest) of `repo`
/// into `sink` as its tar stream: [`prepare`], then
/// [`Prepared::write_to`]. See the module comment.
pub async fn restore<W: AsyncWrite + Unpin>(
    repo: &Repository,
    reference: &str,
    sink: W,
    limits: Limits,
) -> Result<Restored, RestoreError> {
    prepare(repo, reference, limits)
        .await?
        .write_to(repo, sink)
        .await
}

/// Each file against the config as the walker reports it: its size at its
/// header, its sha256 at its end.
struct Check<'a> {
    stated: &'a BTreeMap<String, FileSum>,
}

impl Check<'_> {
    fn event(&self, e: Event<'_>) -> Result<(), RestoreError> {
        let differs = |path: &str, difference| RestoreError::Differs {
            path: path.to_owned(),
            difference,
        };
        match e {
            Event::FileStart { path, size, .. } => match self.stated.get(path) {
                None => Err(differs(path, Difference::Unexpected)),
                Some(f) if f.size != size => Err(differs(
                    path,
                    Difference::Size {
                        stated: f.size,
                        found: size,
                    },
                )),
                Some(_) => Ok(()),
            },
            Event::FileEnd { path, sha256 } => match self.stated.get(path) {
                Some(f) if f.sha256 != sha256 => Err(differs(
                    path,
                    Difference::Content {
                        stated: f.sha256.clone(),
                        found: sha256.to_owned(),
                    },
                )),
                Some(_) => Ok(()),
                None => Err(differs(path, Difference::Unexpected)),
            },
            Event::Dir { .. } | Event::Data(_) => Ok(()),
        }
    }
}
