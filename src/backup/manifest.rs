//! The backup artifact: an OCI image manifest (schema 2) with its own
//! `artifactType`, whose layers are the stream's chunks in order and whose
//! config says what the stream holds. Pure: bytes in, checked values out.
//!
//! The config (`application/vnd.exo.agentfs.backup.config.v1+json`):
//! `format` (1), `volume` (namespace, name), `created` (RFC 3339), `top`
//! (the archive's one top name), `treeHash` (`tarstream::digest_of` of the
//! files, what `exo fs` shows), `fileBytes`, `streamBytes`, `chunks`,
//! `chunking` (the sizes the stream was cut with), `files` (path, size,
//! sha256; sorted in byte order) and `dirs` (sorted).
//!
//! [`verify`] refuses, naming the field, anything that does not hold
//! together: a media or artifact type, a digest's shape, a config whose
//! bytes do not hash to its descriptor, layer sizes that do not add up to
//! `streamBytes`, an unsorted or duplicated name, a file list whose hash is
//! not the stated tree hash, annotations that disagree with the config.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::Category;
use super::chunk::ChunkSizes;
use crate::agentfs::tarstream;

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const ARTIFACT_TYPE: &str = "application/vnd.exo.agentfs.backup.v1+json";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.exo.agentfs.backup.config.v1+json";
pub const CHUNK_MEDIA_TYPE: &str = "application/vnd.exo.agentfs.backup.chunk.v1";
/// The config's `format` this code writes and reads.
pub const FORMAT: u32 = 1;
/// The manifest's creation time (RFC 3339), as the OCI spec names it.
pub const ANNOTATION_CREATED: &str = "org.opencontainers.image.created";
/// The tree hash, on the manifest too, so a listing need not fetch configs.
pub const ANNOTATION_TREE_HASH: &str = "sh.autonomic.exo.backup.tree-hash";
/// The number of files, on the manifest too (decimal), so a listing need
/// not fetch configs. Optional on read: backups written before it lack it.
pub const ANNOTATION_FILES: &str = "sh.autonomic.exo.backup.files";
/// The bytes of file data (decimal); optional on read like
/// [`ANNOTATION_FILES`].
pub const ANNOTATION_FILE_BYTES: &str = "sh.autonomic.exo.backup.file-bytes";
/// Bound on a config blob: 100,000 files of long names fit.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;
/// Bound on a manifest: a 10 GiB volume in 1 MiB chunks is about 2 MB.
pub const MAX_MANIFEST_BYTES: u64 = 8 << 20;

/// An OCI content descriptor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    #[serde(default)]
    pub digest: String,
    #[serde(default)]
    pub size: u64,
}

/// The OCI image manifest, as read: missing fields come as empty values so
/// that the check names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    #[serde(default)]
    pub schema_version: u32,
    #[serde(default)]
    pub media_type: String,
    #[serde(default)]
    pub artifact_type: String,
    #[serde(default)]
    pub config: Descriptor,
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// Which volume a backup is of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Volume {
    pub namespace: String,
    pub name: String,
}

/// One file of the volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
}

/// The config blob: what the stream holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupConfig {
    pub format: u32,
    pub volume: Volume,
    pub created: String,
    pub top: String,
    pub tree_hash: String,
    pub file_bytes: u64,
    pub stream_bytes: u64,
    pub chunks: u64,
    pub chunking: ChunkSizes,
    pub files: Vec<FileEntry>,
    pub dirs: Vec<String>,
}

impl BackupConfig {
    /// The config of a walked stream.
    pub fn of_walk(
        volume: Volume,
        created: String,
        walked: &tarstream::Manifest,
        stream_bytes: u64,
        chunks: u64,
        chunking: ChunkSizes,
    ) -> Self {
        Self {
            format: FORMAT,
            volume,
            created,
            top: walked.top.clone(),
            tree_hash: walked.digest(),
            file_bytes: walked.bytes(),
            stream_bytes,
            chunks,
            chunking,
            files: walked
                .files
                .iter()
                .map(|(path, f)| FileEntry {
                    path: path.clone(),
                    size: f.size,
                    sha256: f.sha256.clone(),
                })
                .collect(),
            dirs: walked.dirs.iter().cloned().collect(),
        }
    }

    /// The files as the walker's manifest holds them, for comparison.
    pub fn file_map(&self) -> BTreeMap<String, tarstream::FileSum> {
        self.files
            .iter()
            .map(|f| {
                (
                    f.path.clone(),
                    tarstream::FileSum {
                        size: f.size,
                        sha256: f.sha256.clone(),
                    },
                )
            })
            .collect()
    }
}

/// A manifest and its config that were checked together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    pub manifest: ImageManifest,
    pub config: BackupConfig,
}

/// What `build` made: the exact bytes to push, and their digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub manifest: Vec<u8>,
    /// `sha256:` digest of `manifest`.
    pub digest: String,
    pub config: Vec<u8>,
    pub config_descriptor: Descriptor,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("the backup's {what} is not valid JSON for it: {detail}")]
    Json { what: &'static str, detail: String },
    #[error("field schemaVersion: 2 expected, found {found}")]
    SchemaVersion { found: u32 },
    #[error("field {field}: {expected:?} expected, found {found:?}")]
    MediaType {
        field: String,
        expected: &'static str,
        found: String,
    },
    #[error("field {field}: {found:?} is not \"sha256:\" and 64 lowercase hex digits")]
    Digest { field: String, found: String },
    #[error("field {field}: {size} bytes {why}")]
    Size {
        field: String,
        size: u64,
        why: String,
    },
    #[error("field config.digest: states {stated}, the config's bytes hash to {actual}")]
    ConfigDigest { stated: String, actual: String },
    #[error("field config.size: states {stated} bytes, the config has {actual}")]
    ConfigSize { stated: u64, actual: u64 },
    #[error("field annotations.{key}: {why}")]
    Annotation { key: &'static str, why: String },
    #[error("field format (config): version {found} is not supported (this reads {FORMAT})")]
    Format { found: u32 },
    #[error("field {field}: {found:?} is not an RFC 3339 time")]
    Time { field: &'static str, found: String },
    #[error("field chunking (config): {why}")]
    Chunking { why: String },
    #[error("field streamBytes (config): states {stated} bytes, the layers add up to {layers}")]
    StreamLength { stated: u64, layers: u64 },
    #[error("field chunks (config): states {stated}, the manifest has {layers} layers")]
    ChunkCount { stated: u64, layers: u64 },
    #[error("field {field}: {path:?} comes after {previous:?}; names must be sorted in byte order")]
    Order {
        field: String,
        path: String,
        previous: String,
    },
    #[error("field {field}: {path:?} is listed twice")]
    Duplicate { field: String, path: String },
    #[error("field {field}: {path:?} does not lie under the top name {top:?}")]
    OutsideTop {
        field: String,
        path: String,
        top: String,
    },
    #[error("field {field}: {found:?} is not 64 lowercase hex digits")]
    FileDigest { field: String, found: String },
    #[error("field fileBytes (config): states {stated}, the files add up to {sum}")]
    FileBytes { stated: u64, sum: u64 },
    #[error("field {field}: states {stated}, the file list hashes to {computed}")]
    TreeHash {
        field: &'static str,
        stated: String,
        computed: String,
    },
    #[error("could not serialize the backup's {what}: {detail}")]
    Serialize { what: &'static str, detail: String },
}

impl ManifestError {
    pub fn category(&self) -> Category {
        match self {
            ManifestError::Serialize { .. } => Category::Invalid,
            _ => Category::Integrity,
        }
    }
}

/// `sha256:` and 64 lowercase hex digits.
pub fn is_sha256_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(is_hex64)
}

fn is_hex64(h: &str) -> bool {
    h.len() == 64
        && h.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn sha256_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn serialize<T: Serialize>(what: &'static str, v: &T) -> Result<Vec<u8>, ManifestError> {
    serde_json::to_vec(v).map_err(|e| ManifestError::Serialize {
        what,
        detail: e.to_string(),
    })
}

/// The artifact for `config` with `layers` (the chunks' descriptors, in
/// stream order), checked as a reader would check it.
pub fn build(config: &BackupConfig, layers: Vec<Descriptor>) -> Result<Built, ManifestError> {
    let config_bytes = serialize("config", config)?;
    let config_descriptor = Descriptor {
        media_type: CONFIG_MEDIA_TYPE.to_owned(),
        digest: sha256_of(&config_bytes),
        size: config_bytes.len() as u64,
    };
    let manifest = ImageManifest {
        schema_version: 2,
        media_type: MANIFEST_MEDIA_TYPE.to_owned(),
        artifact_type: ARTIFACT_TYPE.to_owned(),
        config: config_descriptor.clone(),
        layers,
        annotations: BTreeMap::from([
            (ANNOTATION_CREATED.to_owned(), config.created.clone()),
            (ANNOTATION_TREE_HASH.to_owned(), config.tree_hash.clone()),
            (ANNOTATION_FILES.to_owned(), config.files.len().to_string()),
            (
                ANNOTATION_FILE_BYTES.to_owned(),
                config.file_bytes.to_string(),
            ),
        ]),
    };
    let manifest_bytes = serialize("manifest", &manifest)?;
    verify(&manifest_bytes, &config_bytes)?;
    Ok(Built {
        digest: sha256_of(&manifest_bytes),
        manifest: manifest_bytes,
        config: config_bytes,
        config_descriptor,
    })
}

/// Both checks: the manifest, then its config against it.
pub fn verify(manifest: &[u8], config: &[u8]) -> Result<Backup, ManifestError> {
    let manifest = parse_manifest(manifest)?;
    let config = check_config(&manifest, config)?;
    Ok(Backup { manifest, config })
}

/// The manifest alone: everything that can be checked before the config
/// is fetched.
pub fn parse_manifest(bytes: &[u8]) -> Result<ImageManifest, ManifestError> {
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(ManifestError::Size {
            field: "manifest".into(),
            size: bytes.len() as u64,
            why: format!("pass the bound of {MAX_MANIFEST_BYTES}"),
        });
    }
    let m: ImageManifest = serde_json::from_slice(bytes).map_err(|e| ManifestError::Json {
        what: "manifest",
        detail: e.to_string(),
    })?;
    if m.schema_version != 2 {
        return Err(ManifestError::SchemaVersion {
            found: m.schema_version,
        });
    }
    media_type("mediaType", &m.media_type, MANIFEST_MEDIA_TYPE)?;
    media_type("artifactType", &m.artifact_type, ARTIFACT_TYPE)?;
    media_type("config.mediaType", &m.config.media_type, CONFIG_MEDIA_TYPE)?;
    digest_shape("config.digest", &m.config.digest)?;
    if m.config.size == 0 || m.config.size > MAX_CONFIG_BYTES {
        return Err(ManifestError::Size {
            field: "config.size".into(),
            size: m.config.size,
            why: format!("is not within 1..={MAX_CONFIG_BYTES}"),
        });
    }
    for (i, l) in m.layers.iter().enumerate() {
        media_type(
            &format!("layers[{i}].mediaType"),
            &l.media_type,
            CHUNK_MEDIA_TYPE,
        )?;
        digest_shape(&format!("layers[{i}].digest"), &l.digest)?;
        if l.size == 0 {
            return Err(ManifestError::Size {
                field: format!("layers[{i}].size"),
                size: 0,
                why: "is no chunk".into(),
            });
        }
    }
    let created = annotation(&m, ANNOTATION_CREATED)?;
    if created.parse::<k8s_openapi::jiff::Timestamp>().is_err() {
        return Err(ManifestError::Time {
            field: "annotations.org.opencontainers.image.created",
            found: created.to_owned(),
        });
    }
    if !is_hex64(annotation(&m, ANNOTATION_TREE_HASH)?) {
        return Err(ManifestError::Annotation {
            key: ANNOTATION_TREE_HASH,
            why: "is not 64 lowercase hex digits".into(),
        });
    }
    Ok(m)
}

/// The config's bytes against the checked manifest: its digest and size,
/// then everything it states, against itself and the layers.
pub fn check_config(m: &ImageManifest, bytes: &[u8]) -> Result<BackupConfig, ManifestError> {
    let actual = sha256_of(bytes);
    if actual != m.config.digest {
        return Err(ManifestError::ConfigDigest {
            stated: m.config.digest.clone(),
            actual,
        });
    }
    if bytes.len() as u64 != m.config.size {
        return Err(ManifestError::ConfigSize {
            stated: m.config.size,
            actual: bytes.len() as u64,
        });
    }
    let c: BackupConfig = serde_json::from_slice(bytes).map_err(|e| ManifestError::Json {
        what: "config",
        detail: e.to_string(),
    })?;
    if c.format != FORMAT {
        return Err(ManifestError::Format { found: c.format });
    }
    if c.created.parse::<k8s_openapi::jiff::Timestamp>().is_err() {
        return Err(ManifestError::Time {
            field: "created (config)",
            found: c.created.clone(),
        });
    }
    if annotation(m, ANNOTATION_CREATED)? != c.created {
        return Err(ManifestError::Annotation {
            key: ANNOTATION_CREATED,
            why: format!("differs from the config's created {:?}", c.created),
        });
    }
    c.chunking
        .check()
        .map_err(|e| ManifestError::Chunking { why: e.to_string() })?;
    // The layers: their count and sizes against what the config states.
    if m.layers.len() as u64 != c.chunks {
        return Err(ManifestError::ChunkCount {
            stated: c.chunks,
            layers: m.layers.len() as u64,
        });
    }
    let mut layers = 0u64;
    for (i, l) in m.layers.iter().enumerate() {
        if l.size > u64::from(c.chunking.max) {
            return Err(ManifestError::Size {
                field: format!("layers[{i}].size"),
                size: l.size,
                why: format!("pass the chunking's max of {}", c.chunking.max),
            });
        }
        layers = layers.saturating_add(l.size);
    }
    if layers != c.stream_bytes {
        return Err(ManifestError::StreamLength {
            stated: c.stream_bytes,
            layers,
        });
    }
    // The file list: sorted, unique, under the top name, well-formed.
    let under_top = |p: &str| {
        p == c.top
            || p.strip_prefix(c.top.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    };
    let mut sum = 0u64;
    for (i, f) in c.files.iter().enumerate() {
        let field = format!("files[{i}].path");
        if i > 0 {
            sorted(&field, &c.files[i - 1].path, &f.path)?;
        }
        if !under_top(&f.path) {
            return Err(ManifestError::OutsideTop {
                field,
                path: f.path.clone(),
                top: c.top.clone(),
            });
        }
        if !is_hex64(&f.sha256) {
            return Err(ManifestError::FileDigest {
                field: format!("files[{i}].sha256"),
                found: f.sha256.clone(),
            });
        }
        sum = sum.saturating_add(f.size);
    }
    for (i, d) in c.dirs.iter().enumerate() {
        let field = format!("dirs[{i}]");
        if i > 0 {
            sorted(&field, &c.dirs[i - 1], d)?;
        }
        if !under_top(d) {
            return Err(ManifestError::OutsideTop {
                field,
                path: d.clone(),
                top: c.top.clone(),
            });
        }
    }
    if sum != c.file_bytes {
        return Err(ManifestError::FileBytes {
            stated: c.file_bytes,
            sum,
        });
    }
    let computed = tarstream::digest_of(
        &c.files
            .iter()
            .map(|f| (f.path.clone(), f.sha256.clone()))
            .collect(),
    );
    if computed != c.tree_hash {
        return Err(ManifestError::TreeHash {
            field: "treeHash (config)",
            stated: c.tree_hash.clone(),
            computed,
        });
    }
    let annotated = annotation(m, ANNOTATION_TREE_HASH)?;
    if annotated != c.tree_hash {
        return Err(ManifestError::TreeHash {
            field: "annotations.sh.autonomic.exo.backup.tree-hash",
            stated: annotated.to_owned(),
            computed,
        });
    }
    for (key, value) in [
        (ANNOTATION_FILES, c.files.len() as u64),
        (ANNOTATION_FILE_BYTES, c.file_bytes),
    ] {
        if let Some(stated) = m.annotations.get(key)
            && stated.parse::<u64>().ok() != Some(value)
        {
            return Err(ManifestError::Annotation {
                key,
                why: format!("states {stated:?}, the config {value}"),
            });
        }
    }
    Ok(c)
}

/// The number of files and bytes of file data the manifest's annotations
/// state, when it has both (a listing's shortcut: [`check_config`] holds
/// them to the config on every restore).
pub fn annotated_counts(m: &ImageManifest) -> Option<(u64, u64)> {
    let count = |key| m.annotations.get(key).and_then(|v| v.parse::<u64>().ok());
    Some((count(ANNOTATION_FILES)?, count(ANNOTATION_FILE_BYTES)?))
}

fn media_type(field: &str, found: &str, expected: &'static str) -> Result<(), ManifestError> {
    if found == expected {
        Ok(())
    } else {
        Err(ManifestError::MediaType {
            field: field.to_owned(),
            expected,
            found: found.to_owned(),
        })
    }
}

fn digest_shape(field: &str, d: &str) -> Result<(), ManifestError> {
    if is_sha256_digest(d) {
        Ok(())
    } else {
        Err(ManifestError::Digest {
            field: field.to_owned(),
            found: d.to_owned(),
        })
    }
}

fn annotation<'m>(m: &'m ImageManifest, key: &'static str) -> Result<&'m str, ManifestError> {
    m.annotations
        .get(key)
        .map(String::as_str)
        .ok_or(ManifestError::Annotation {
            key,
            why: "is missing".into(),
        })
}

fn sorted(field: &str, previous: &str, path: &str) -> Result<(), ManifestError> {
    match previous.as_bytes().cmp(path.as_bytes()) {
        std::cmp::Ordering::Less => Ok(()),
        std::cmp::Ordering::Equal => Err(ManifestError::Duplicate {
            field: field.to_owned(),
            path: path.to_owned(),
        }),
        std::cmp::Ordering::Greater => Err(ManifestError::Order {
            field: field.to_owned(),
            path: path.to_owned(),
            previous: previous.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests;
