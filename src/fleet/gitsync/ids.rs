//! What a checkout knows of its commit's trees, for the next sync and
//! the next checkout to reuse ([`Ids`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use git2::{ObjectType, Repository};

/// What a sync compares with the last one to reuse what did not change,
/// and what the next checkout reuses:
/// - the git object id of each entry one level under the folders a load
///   can reuse (`manifests/<tenant>`, `configmaps/<baseline>`,
///   `releases/<file>`), and of each file in a tenant folder
///   (`manifests/<tenant>/<file>`): the same id is the same content, so a
///   sync reuses what it loaded and rendered from an unchanged entry;
/// - per tree id, its byte count and largest file, so a folder moved over
///   unchanged is checked against the limits without reading its files.
///
/// Both are kept per tree id and shared with the last checkout's while
/// that id is the same: a commit that changes one file costs the folders
/// on its path, not the repository.
#[derive(Debug, Clone, Default)]
pub struct Ids {
    pub(super) entries: BTreeMap<String, git2::Oid>,
    /// A tenant folder's files, by tenant.
    pub(super) files: BTreeMap<String, Arc<BTreeMap<String, git2::Oid>>>,
    /// By the id of a tenant folder's tree: its files, for the next checkout.
    pub(super) files_by_tree: HashMap<git2::Oid, Arc<BTreeMap<String, git2::Oid>>>,
    /// By tree id: what the size limits need of a folder moved over.
    pub(super) sizes: HashMap<git2::Oid, Sizes>,
}

/// One tree's bytes and its largest file (the path below the tree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sizes {
    pub(super) bytes: u64,
    pub(super) largest: Option<(u64, String)>,
}

impl Ids {
    /// The id of `rel` (`manifests/acme`, `manifests/acme/router.yaml`,
    /// `releases/2026.11.0.yaml`), when the commit has it.
    pub fn get(&self, rel: &str) -> Option<git2::Oid> {
        if let Some((tenant, file)) = rel
            .strip_prefix("manifests/")
            .and_then(|r| r.split_once('/'))
        {
            return self.files.get(tenant)?.get(file).copied();
        }
        self.entries.get(rel).copied()
    }
}

impl FromIterator<(String, git2::Oid)> for Ids {
    /// Ids by path (for tests): `manifests/<tenant>/<file>` paths go to
    /// their tenant's files.
    fn from_iter<I: IntoIterator<Item = (String, git2::Oid)>>(iter: I) -> Self {
        let mut ids = Ids::default();
        let mut files: BTreeMap<String, BTreeMap<String, git2::Oid>> = BTreeMap::new();
        for (rel, id) in iter {
            match rel
                .strip_prefix("manifests/")
                .and_then(|r| r.split_once('/'))
            {
                Some((t, f)) => {
                    files
                        .entry(t.to_owned())
                        .or_default()
                        .insert(f.to_owned(), id);
                }
                None => {
                    ids.entries.insert(rel, id);
                }
            }
        }
        ids.files = files.into_iter().map(|(t, f)| (t, Arc::new(f))).collect();
        ids
    }
}

/// The ids of `tree`'s entries one level under each folder [`Ids`] names,
/// a tenant folder's files taken from `previous` while its tree id is the
/// same.
pub(super) fn entry_ids(repo: &Repository, tree: &git2::Tree<'_>, previous: Option<&Ids>) -> Ids {
    let mut ids = Ids::default();
    for folder in ["manifests", "configmaps", "releases"] {
        let Some(sub) = tree
            .get_name(folder)
            .filter(|e| e.kind() == Some(ObjectType::Tree))
            .and_then(|e| repo.find_tree(e.id()).ok())
        else {
            continue;
        };
        for e in sub.iter() {
            let Ok(name) = e.name() else { continue };
            ids.entries.insert(format!("{folder}/{name}"), e.id());
            // A tenant folder's files too: a changed folder takes over
            // the files in it that did not change.
            if folder != "manifests" || e.kind() != Some(ObjectType::Tree) {
                continue;
            }
            let known = previous.and_then(|p| p.files_by_tree.get(&e.id()));
            let files = match known {
                Some(f) => Arc::clone(f),
                None => {
                    let Ok(t) = repo.find_tree(e.id()) else {
                        continue;
                    };
                    let listed = t
                        .iter()
                        .filter_map(|f| Some((f.name().ok()?.to_owned(), f.id())))
                        .collect();
                    Arc::new(listed)
                }
            };
            ids.files_by_tree.insert(e.id(), Arc::clone(&files));
            ids.files.insert(name.to_owned(), files);
        }
    }
    ids
}
