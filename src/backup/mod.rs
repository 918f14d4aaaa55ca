//! AgentFS backups as OCI artifacts: a volume's tar stream cut into
//! content-defined chunks, each a blob in a registry, named in order by
//! one OCI image manifest whose config holds the file list and tree hash.
//!
//! - `chunk`: content-defined chunking of the stream (fastcdc v2020) and
//!   each chunk's sha256;
//! - `manifest`: the artifact's format, built and strictly validated
//!   (pure);
//! - `store`: the registry, over the distribution API (thin I/O);
//! - `take`: one backup, in one pass over the stream;
//! - `restore`: one restore, every byte checked before it reaches the sink;
//! - `access`: the repository a volume's policy names, with its Secret's
//!   credentials (thin I/O);
//! - `select`: which backups a repository holds, and which one `latest`, a
//!   digest or a time means;
//! - `volume`: a restore into an AgentFS through a pod that mounts it,
//!   proven by the pod's own tree hash (`exo fs restore` and the drills).
//!
//! Guarantees:
//! - the stream passes through `agentfs::tarstream::Walker`, both ways, so
//!   what a backup or a restore refuses, and the per-file sha256 and tree
//!   hash it computes, are those of `exo fs cp` and `exo fs`;
//! - a chunk already in the repository is not uploaded again (HEAD first);
//!   the manifest is pushed last, so no manifest names a missing blob;
//! - a restore writes a chunk to its sink only after its sha256 matched the
//!   manifest and the walker accepted it, and reports success only after
//!   every file's sha256 and the tree hash matched the config;
//! - memory is bounded by about two maximum chunks and the file list, never
//!   the volume;
//! - no credential or token is in any message or Debug output.
//!
//! Each file has its own error enum; each maps to a [`Category`] for Event
//! reasons and metric labels.

pub mod access;
pub mod chunk;
pub mod manifest;
pub mod restore;
pub mod select;
pub mod store;
pub mod take;
#[cfg(test)]
pub(crate) mod testdata;
pub mod volume;

pub use chunk::{Chunk, ChunkError, ChunkSizes};
pub use manifest::{Backup, BackupConfig, ManifestError, Volume};
pub use restore::{Prepared, RestoreError, Restored, prepare, restore};
pub use store::{Credentials, Options, Repository, StoreError};
pub use take::{BackupError, Taken, backup};

use std::time::Duration;

/// A bounded set of error categories for Event reasons and metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// The volume's content was refused (a link, a special file, an
    /// escaping name, a limit): permanent until the volume changes.
    Refused,
    /// An artifact or a blob failed a check: a tampered manifest or config,
    /// a corrupted blob, a restored file that differs. Permanent.
    Integrity,
    /// The registry refused the credentials. Permanent until they change.
    Auth,
    /// The manifest, tag or repository is not in the registry.
    NotFound,
    /// The registry could not be reached, or did not answer in time.
    Unreachable,
    /// The registry answered with an error of its own.
    Registry,
    /// The input stream or the sink failed.
    Io,
    /// A setting is invalid (chunk sizes, repository name, tag).
    Invalid,
}

impl Category {
    pub const ALL: [Category; 8] = [
        Category::Refused,
        Category::Integrity,
        Category::Auth,
        Category::NotFound,
        Category::Unreachable,
        Category::Registry,
        Category::Io,
        Category::Invalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Refused => "refused",
            Category::Integrity => "integrity",
            Category::Auth => "auth",
            Category::NotFound => "not_found",
            Category::Unreachable => "unreachable",
            Category::Registry => "registry",
            Category::Io => "io",
            Category::Invalid => "invalid",
        }
    }

    /// Whether trying again later may succeed without anyone changing
    /// anything.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Category::Unreachable | Category::Registry | Category::Io
        )
    }

    /// How long to wait before retrying: short for a registry that did not
    /// answer, long for what a human must fix.
    pub fn retry_after(self) -> Duration {
        match self {
            Category::Unreachable | Category::Registry | Category::Io => Duration::from_secs(30),
            Category::NotFound | Category::Auth => Duration::from_secs(300),
            Category::Refused | Category::Integrity | Category::Invalid => {
                Duration::from_secs(3600)
            }
        }
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_bounded_and_distinct() {
        let names: std::collections::BTreeSet<_> =
            Category::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), Category::ALL.len());
        assert!(Category::Unreachable.is_transient());
        assert!(!Category::Integrity.is_transient());
        assert!(Category::Unreachable.retry_after() < Category::Integrity.retry_after());
    }
}
