//! Immutable, content-addressed baseline ConfigMaps.
//!
//! A source folder `configmaps/<name>/` becomes a ConfigMap named
//! `<name>-<short hash>` with `immutable: true`. The content hash is the
//! sha256 of the `sha256sum` listing of the files in byte order of their
//! names:
//!
//! ```text
//! <sha256 of file>  <file name>\n   (one line per file, names sorted)
//! ```
//!
//! That choice covers names and contents, is deterministic, and lets the
//! rollout verify the content mounted inside a running pod by running
//! `sha256sum` there and hashing its output the same way.
//!
//! Guarantees: changing one byte, adding, removing or renaming a file changes
//! the name. Nothing here edits a published version; a new version is a new
//! object.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::meta::{ANNOTATION_CONTENT_SHA256, LABEL_BASELINE, LABEL_MANAGED_BY};
use crate::names::{LABEL_MAX, is_configmap_key, is_dns1123_label};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use sha2::{Digest, Sha256};

/// Hex characters of the content hash kept in the ConfigMap's name.
pub const SHORT_HASH_LEN: usize = 10;
/// The Kubernetes limit on a ConfigMap's total size.
pub const MAX_CONFIGMAP_BYTES: usize = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConfigMapError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Refused { path: PathBuf, reason: String },
}

/// One baseline version: its source name, files, and content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    pub name: String,
    pub files: BTreeMap<String, Vec<u8>>,
    pub sha256: String,
}

impl Baseline {
    /// Builds a baseline from in-memory files (the pure core).
    pub fn new(name: &str, files: BTreeMap<String, Vec<u8>>) -> Self {
        let sha256 = content_hash(files.iter().map(|(n, c)| (n.as_str(), file_hash(c))));
        Self {
            name: name.to_owned(),
            files,
            sha256,
        }
    }

    /// `<name>-<short hash>`: the immutable version name.
    pub fn version(&self) -> String {
        version_name(&self.name, &self.sha256)
    }

    /// The ConfigMap this version publishes. Text files go in `data`, other
    /// files in `binaryData`.
    pub fn to_configmap(&self) -> ConfigMap {
        let mut data = BTreeMap::new();
        let mut binary = BTreeMap::new();
        for (name, content) in &self.files {
            match std::str::from_utf8(content) {
                Ok(text) => {
                    data.insert(name.clone(), text.to_owned());
                }
                Err(_) => {
                    binary.insert(name.clone(), ByteString(content.clone()));
                }
            }
        }
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(self.version()),
                labels: Some(BTreeMap::from([
                    (LABEL_BASELINE.to_owned(), self.name.clone()),
                    (LABEL_MANAGED_BY.to_owned(), "exo".to_owned()),
                ])),
                annotations: Some(BTreeMap::from([(
                    ANNOTATION_CONTENT_SHA256.to_owned(),
                    self.sha256.clone(),
                )])),
                ..ObjectMeta::default()
            },
            immutable: Some(true),
            data: (!data.is_empty()).then_some(data),
            binary_data: (!binary.is_empty()).then_some(binary),
        }
    }
}

/// `<name>-<first SHORT_HASH_LEN hex of sha256>`.
pub fn version_name(name: &str, sha256: &str) -> String {
    format!("{name}-{}", &sha256[..SHORT_HASH_LEN.min(sha256.len())])
}

/// The baseline name of a version `<name>-<hash>`: the inverse of
/// [`version_name`] (anything else is its own name).
pub fn baseline_name(version: &str) -> &str {
    match version.rsplit_once('-') {
        Some((name, hash))
            if hash.len() == SHORT_HASH_LEN && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            name
        }
        _ => version,
    }
}

/// sha256 of one file, lowercase hex.
pub fn file_hash(content: &[u8]) -> String {
    hex::encode(Sha256::digest(content))
}

/// The content hash from (file name, file sha256) pairs. Sorts by name, so
/// the same set always hashes the same. The pod-side verifier feeds the
/// `sha256sum` output of the mounted files through this.
pub fn content_hash<'a>(files: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let mut sorted: Vec<(&str, String)> = files.into_iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut listing = Sha256::new();
    for (name, digest) in sorted {
        listing.update(format!("{digest}  {name}\n").as_bytes());
    }
    hex::encode(listing.finalize())
}

/// Parses a `sha256sum` listing (the lines [`content_hash`] hashes) into
/// file name -> hash. `None` when a line is not `<64 hex>  <name>` or there
/// are none.
pub fn parse_listing(stdout: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for line in stdout.lines().filter(|l| !l.is_empty()) {
        let (hash, name) = line.split_once("  ")?;
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        out.insert(name.to_owned(), hash.to_owned());
    }
    (!out.is_empty()).then_some(out)
}

/// A DNS-1123 label short enough to carry the hash suffix.
fn valid_source_name(name: &str) -> bool {
    name.len() + 1 + SHORT_HASH_LEN <= LABEL_MAX && is_dns1123_label(name)
}

/// Reads one source folder. Refuses symlinks, sub-folders, names that are not
/// ConfigMap keys, and content over the ConfigMap size limit, naming the path.
pub fn read_source(dir: &Path) -> Result<Baseline, ConfigMapError> {
    let refused = |path: &Path, reason: String| ConfigMapError::Refused {
        path: path.to_owned(),
        reason,
    };
    let read = |path: &Path, source| ConfigMapError::Read {
        path: path.to_owned(),
        source,
    };
    let folder = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| refused(dir, "folder name is not UTF-8".into()))?;
    // `<name>@<label>` lets two sources of one baseline live side by side
    // (one per release that is still live); both build `<name>-<hash>`.
    let (name, label) = match folder.split_once('@') {
        Some((n, l)) => (n, Some(l)),
        None => (folder, None),
    };
    if !valid_source_name(name) {
        return Err(refused(
            dir,
            format!(
                "baseline name {name:?} must be lowercase letters, digits and '-', at most {} characters",
                62 - SHORT_HASH_LEN
            ),
        ));
    }
    if let Some(label) = label
        && !is_configmap_key(label)
    {
        return Err(refused(
            dir,
            format!("label {label:?} after '@' must use only letters, digits, '-', '_' and '.'"),
        ));
    }
    let mut files = BTreeMap::new();
    let mut total = 0usize;
    for entry in std::fs::read_dir(dir).map_err(|e| read(dir, e))? {
        let entry = entry.map_err(|e| read(dir, e))?;
        let path = entry.path();
        // symlink_metadata: a link is refused, never followed out of the tree.
        let meta = std::fs::symlink_metadata(&path).map_err(|e| read(&path, e))?;
        if meta.file_type().is_symlink() {
            return Err(refused(
                &path,
                "symlinks are not allowed in a baseline".into(),
            ));
        }
        if meta.is_dir() {
            return Err(refused(
                &path,
                "sub-folders are not allowed; a ConfigMap is flat".into(),
            ));
        }
        let file_name = entry.file_name();
        let key = file_name
            .to_str()
            .filter(|k| is_configmap_key(k))
            .ok_or_else(|| {
                refused(
                    &path,
                    "file name must use only letters, digits, '-', '_' and '.'".into(),
                )
            })?
            .to_owned();
        total += meta.len() as usize;
        if total > MAX_CONFIGMAP_BYTES {
            return Err(refused(
                dir,
                format!("content exceeds the {MAX_CONFIGMAP_BYTES} byte ConfigMap limit"),
            ));
        }
        let content = std::fs::read(&path).map_err(|e| read(&path, e))?;
        files.insert(key, content);
    }
    if files.is_empty() {
        return Err(refused(
            dir,
            "a baseline folder needs at least one file".into(),
        ));
    }
    Ok(Baseline::new(name, files))
}

/// Reads every folder under `root` (a fleet repository's `configmaps/`),
/// sorted by name.
pub fn read_all(root: &Path) -> Result<Vec<Baseline>, ConfigMapError> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(root).map_err(|source| ConfigMapError::Read {
        path: root.to_owned(),
        source,
    })? {
        let entry = entry.map_err(|source| ConfigMapError::Read {
            path: root.to_owned(),
            source,
        })?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).map_err(|source| ConfigMapError::Read {
            path: path.clone(),
            source,
        })?;
        if meta.file_type().is_symlink() {
            return Err(ConfigMapError::Refused {
                path,
                reason: "symlinks are not allowed under configmaps/".into(),
            });
        }
        if meta.is_dir() {
            dirs.push(path);
        }
    }
    dirs.sort();
    dirs.iter().map(|d| read_source(d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(n, c)| (n.to_string(), c.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn hash_matches_sha256sum_listing() {
        // printf 'hello\n' > a; printf 'x' > b; sha256sum a b | sha256sum
        let b = Baseline::new("persona", files(&[("b", "x"), ("a", "hello\n")]));
        let listing = format!("{}  a\n{}  b\n", file_hash(b"hello\n"), file_hash(b"x"));
        assert_eq!(b.sha256, file_hash(listing.as_bytes()));
        assert_eq!(b.version(), format!("persona-{}", &b.sha256[..10]));
    }

    #[test]
    fn one_byte_or_one_name_changes_the_version() {
        let base = Baseline::new("p", files(&[("a", "hello")]));
        let byte = Baseline::new("p", files(&[("a", "hellp")]));
        let renamed = Baseline::new("p", files(&[("b", "hello")]));
        let added = Baseline::new("p", files(&[("a", "hello"), ("c", "")]));
        for other in [&byte, &renamed, &added] {
            assert_ne!(base.version(), other.version());
        }
        assert_eq!(base, Baseline::new("p", files(&[("a", "hello")])));
    }

    #[test]
    fn configmap_is_immutable_and_labelled() {
        let mut f = files(&[("rules.md", "be kind")]);
        f.insert("blob.bin".into(), vec![0xff, 0x00]);
        let cm = Baseline::new("fleet-rules", f).to_configmap();
        assert_eq!(cm.immutable, Some(true));
        assert!(cm.metadata.name.unwrap().starts_with("fleet-rules-"));
        assert_eq!(cm.data.unwrap()["rules.md"], "be kind");
        assert_eq!(cm.binary_data.unwrap()["blob.bin"].0, vec![0xff, 0x00]);
    }

    #[test]
    fn read_source_refuses_bad_trees() {
        let tmp = tempfile::tempdir().unwrap();
        let mk = |name: &str| {
            let d = tmp.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("ok.md"), "x").unwrap();
            d
        };
        let d = mk("with-link");
        std::os::unix::fs::symlink("/etc/passwd", d.join("passwd")).unwrap();
        assert!(read_source(&d).unwrap_err().to_string().contains("symlink"));

        let d = mk("with-dir");
        std::fs::create_dir(d.join("sub")).unwrap();
        assert!(
            read_source(&d)
                .unwrap_err()
                .to_string()
                .contains("sub-folders")
        );

        let d = mk("with-bad-key");
        std::fs::write(d.join("a b"), "x").unwrap();
        assert!(read_source(&d).unwrap_err().to_string().contains("a b"));

        let d = mk("Upper");
        assert!(
            read_source(&d)
                .unwrap_err()
                .to_string()
                .contains("lowercase")
        );

        let d = mk("too-big");
        std::fs::write(d.join("big"), vec![b'a'; MAX_CONFIGMAP_BYTES + 1]).unwrap();
        assert!(read_source(&d).unwrap_err().to_string().contains("limit"));

        let d = mk("good");
        assert_eq!(read_source(&d).unwrap().files.len(), 1);

        let d = mk("good@2026.11.0");
        let b = read_source(&d).unwrap();
        assert_eq!(b.name, "good");
        assert!(b.version().starts_with("good-"));
    }
}
