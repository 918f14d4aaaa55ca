//! Fetching the fleet repository with git2 and reading it at one commit.
//!
//! Guarantees:
//! - the URL must be `https://` to a public host unless insecure access is
//!   allowed explicitly (loopback, private and link-local addresses, `http`,
//!   `git` and `file` are refused otherwise);
//! - the checkout is written from git objects, never by `git checkout`:
//!   symlinks, submodules, path components `.`/`..`/`.git`, names with `/`,
//!   and files over the size limit are refused with the offending path, and
//!   nothing of that commit is used;
//! - a commit is materialised once, into a folder named after it; a
//!   refused commit is not used, and what its write had taken over is
//!   removed (the sync keeps its last good load in memory; the next
//!   checkout is then written afresh);
//! - the previous checkout is taken over and patched, not written again:
//!   an entry whose git id and mode are the ones it wrote stays as it is
//!   (the same id is the same names, modes and bytes, checked when it was
//!   written; a folder is not even entered), a changed file is written, a
//!   removed one removed. So a one-file change writes one file, whatever
//!   the size of its folder. The previous checkout loses its completion
//!   mark first, so it is never trusted half-patched;
//! - credentials go only to git2's credential callback; they are never
//!   logged or put in errors.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use git2::{FetchOptions, ObjectType, RemoteCallbacks, Repository};

mod ids;
mod push;
pub use ids::Ids;
use ids::{Sizes, entry_ids};
pub use push::{Committed, commit_file};

/// Total bytes a checkout may hold.
pub const MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024;
/// Default per-file limit.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum GitSyncError {
    #[error("repository URL refused: {0}")]
    UrlRefused(String),
    /// git2's own message is what the user reads (its `Display` adds class
    /// and code numbers); the git2 error stays the `#[source]`.
    #[error("fetch from {url} failed: {}", .source.message())]
    Fetch {
        url: String,
        #[source]
        source: git2::Error,
    },
    /// The push was refused (a rule on the branch, say), or raced past
    /// its retries.
    #[error("push to {url} refused: {reason}")]
    Push { url: String, reason: String },
    #[error("{path} at {commit}: {reason}")]
    Edit {
        commit: String,
        path: String,
        reason: String,
    },
    #[error("branch {branch:?} not found in {url}")]
    NoBranch { url: String, branch: String },
    #[error("commit {commit}: {path}: {reason}")]
    Refused {
        commit: String,
        path: String,
        reason: String,
    },
    #[error("git: {}", .0.message())]
    Git(#[from] git2::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Username and password (or token) for HTTPS. Debug redacts both.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(<redacted>)")
    }
}

#[derive(Debug, Clone)]
pub struct Source {
    pub url: String,
    pub branch: String,
    pub credentials: Option<Credentials>,
    pub allow_insecure: bool,
    pub max_file_bytes: u64,
    /// Fetch the branch's whole history rather than its head alone: a
    /// Fleet that verifies every commit since the last applied one
    /// (`spec.verify.mode: all-since`) walks it. A shallow mirror is
    /// deepened on its next fetch.
    pub full_history: bool,
}

fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host_port.strip_prefix('[') {
        return v6.split(']').next();
    }
    Some(host_port.split(':').next().unwrap_or(host_port))
}

fn is_local(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost")
        || host.ends_with(".localhost")
        || host.ends_with(".local")
    {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64
        }
        Ok(IpAddr::V6(v6)) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
        Err(_) => false,
    }
}

/// Refuses URLs that are not HTTPS to a public host, unless allowed.
pub fn check_url(url: &str, allow_insecure: bool) -> Result<(), GitSyncError> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    let Some(scheme) = scheme else {
        return Err(GitSyncError::UrlRefused(format!(
            "{url:?} is not a URL (scheme://host/path)"
        )));
    };
    if url.split_once("://").is_some_and(|(_, r)| {
        r.split('/')
            .next()
            .is_some_and(|a| a.contains('@') && a.contains(':'))
    }) {
        return Err(GitSyncError::UrlRefused(
            "the URL carries a password; put credentials in the Secret named by secretRef".into(),
        ));
    }
    if allow_insecure {
        return Ok(());
    }
    if scheme != "https" {
        return Err(GitSyncError::UrlRefused(format!(
            "{scheme}:// is not allowed; use https:// (or set allowInsecure)"
        )));
    }
    match host_of(url) {
        Some(h) if is_local(h) => Err(GitSyncError::UrlRefused(format!(
            "host {h} is loopback or local-network; set allowInsecure to allow it"
        ))),
        Some(_) => Ok(()),
        None => Err(GitSyncError::UrlRefused(format!("{url:?} has no host"))),
    }
}

/// A commit materialised on disk.
#[derive(Debug, Clone)]
pub struct Checkout {
    pub commit: String,
    pub path: PathBuf,
    pub ids: Ids,
}

/// Fetches `source.branch` into a bare mirror under `cache` and
/// materialises its head commit under `cache/checkouts/<commit>`.
pub fn sync(source: &Source, cache: &Path) -> Result<Checkout, GitSyncError> {
    let fetched = fetch(source, cache)?;
    fetched.checkout(cache, source.max_file_bytes, None)
}

/// The mirror after a fetch, and the branch's head in it.
pub struct Fetched {
    repo: Repository,
    head: git2::Oid,
}

impl Fetched {
    /// The mirror, to read the fetched commits (their signatures) before
    /// any of them is materialised.
    pub fn repo(&self) -> &Repository {
        &self.repo
    }

    /// The branch's head, as fetched.
    pub fn head(&self) -> git2::Oid {
        self.head
    }

    /// Materialises the fetched head under `cache/checkouts/<commit>`,
    /// reusing what `previous` (the last checkout's ids) knows of the
    /// trees that did not change.
    pub fn checkout(
        &self,
        cache: &Path,
        max_file: u64,
        previous: Option<&Ids>,
    ) -> Result<Checkout, GitSyncError> {
        let commit = self.repo.find_commit(self.head)?;
        materialise(&self.repo, &commit, cache, max_file, previous)
    }
}

/// The callbacks that hand `source`'s credentials, if any, to git2: one
/// attempt, so a wrong password does not loop.
fn callbacks(source: &Source) -> RemoteCallbacks<'static> {
    let mut callbacks = RemoteCallbacks::new();
    if let Some(c) = source.credentials.clone() {
        let mut tried = false;
        callbacks.credentials(move |_url, _user, _allowed| {
            if tried {
                return Err(git2::Error::from_str("credentials refused"));
            }
            tried = true;
            git2::Cred::userpass_plaintext(&c.username, &c.password)
        });
    }
    callbacks
}

/// Fetches `source.branch` into the bare mirror under `cache` (made on
/// first use).
pub fn fetch(source: &Source, cache: &Path) -> Result<Fetched, GitSyncError> {
    check_url(&source.url, source.allow_insecure)?;
    let mirror = cache.join("mirror.git");
    let repo = match Repository::open_bare(&mirror) {
        Ok(r) => r,
        Err(_) => {
            std::fs::create_dir_all(&mirror).map_err(|e| GitSyncError::Io {
                path: mirror.clone(),
                source: e,
            })?;
            Repository::init_bare(&mirror)?
        }
    };
    let mut opts = FetchOptions::new();
    opts.remote_callbacks(callbacks(source));
    if !source.full_history {
        opts.depth(1);
    } else if repo.is_shallow() {
        // libgit2's GIT_FETCH_DEPTH_UNSHALLOW: the history a shallow
        // mirror left out is fetched too.
        opts.depth(i32::MAX);
    }
    let refspec = format!("+refs/heads/{b}:refs/remotes/origin/{b}", b = source.branch);
    {
        let mut remote = repo.remote_anonymous(&source.url)?;
        remote
            .fetch(&[&refspec], Some(&mut opts), None)
            .map_err(|e| GitSyncError::Fetch {
                url: source.url.clone(),
                source: e,
            })?;
    }
    let reference = repo
        .find_reference(&format!("refs/remotes/origin/{}", source.branch))
        .map_err(|_| GitSyncError::NoBranch {
            url: source.url.clone(),
            branch: source.branch.clone(),
        })?;
    let head = reference.peel_to_commit()?.id();
    drop(reference);
    Ok(Fetched { repo, head })
}

/// Writes `commit` under `cache/checkouts/<commit>` (once), keeping only
/// that checkout.
fn materialise(
    repo: &Repository,
    commit: &git2::Commit<'_>,
    cache: &Path,
    max_file: u64,
    known: Option<&Ids>,
) -> Result<Checkout, GitSyncError> {
    let id = commit.id().to_string();
    let path = cache.join("checkouts").join(&id);
    let mut ids = entry_ids(repo, &commit.tree()?, known);
    if path.join(".exo-complete").exists() {
        // Checked when it was written; the sizes are learnt again when a
        // later checkout moves its folders over.
        return Ok(Checkout {
            commit: id,
            path,
            ids,
        });
    }
    let staging = cache.join("checkouts").join(format!(".{id}.partial"));
    let _ = std::fs::remove_dir_all(&staging);
    let previous = previous_checkout(repo, cache, &id);
    let mut write = Write {
        repo,
        odb: repo.odb()?,
        commit: &id,
        max_file,
        total: 0,
        known: known.map(|k| &k.sizes),
        sizes: HashMap::new(),
    };
    let result = write.tree(
        &commit.tree()?,
        previous.as_ref().map(|(t, p)| (t, p.as_path())),
        &staging,
        "",
    );
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    ids.sizes = write.sizes;
    let io = |source| GitSyncError::Io {
        path: path.clone(),
        source,
    };
    std::fs::write(staging.join(".exo-complete"), &id).map_err(io)?;
    let _ = std::fs::remove_dir_all(&path);
    std::fs::rename(&staging, &path).map_err(io)?;
    prune_checkouts(cache, &id);
    Ok(Checkout {
        commit: id,
        path,
        ids,
    })
}

/// Keeps only the newest checkout.
fn prune_checkouts(cache: &Path, keep: &str) {
    if let Ok(entries) = std::fs::read_dir(cache.join("checkouts")) {
        for e in entries.flatten() {
            if e.file_name().to_str() != Some(keep) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// The newest complete checkout other than `keep`, with its tree, made
/// ready to give up its folders: its completion mark is removed first.
fn previous_checkout<'r>(
    repo: &'r Repository,
    cache: &Path,
    keep: &str,
) -> Option<(git2::Tree<'r>, PathBuf)> {
    let entries = std::fs::read_dir(cache.join("checkouts")).ok()?;
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name();
        let Some(name) = name.to_str().filter(|n| *n != keep) else {
            continue;
        };
        if !path.join(".exo-complete").exists() {
            continue;
        }
        let Some(tree) = git2::Oid::from_str(name)
            .ok()
            .and_then(|oid| repo.find_commit(oid).ok())
            .and_then(|c| c.tree().ok())
        else {
            continue;
        };
        std::fs::remove_file(path.join(".exo-complete")).ok()?;
        return Some((tree, path));
    }
    None
}

/// Removes a file or a folder (not following a link); gone already is fine.
fn remove(path: &Path) -> std::io::Result<()> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// One commit being written out: the limits and the bytes so far.
struct Write<'r, 'c> {
    repo: &'r Repository,
    /// Opened once: an unchanged file's size is read from its header.
    odb: git2::Odb<'r>,
    commit: &'c str,
    max_file: u64,
    total: u64,
    /// The last checkout's tree sizes.
    known: Option<&'c HashMap<git2::Oid, Sizes>>,
    /// This checkout's, for the next one: the trees moved over.
    sizes: HashMap<git2::Oid, Sizes>,
}

impl Write<'_, '_> {
    fn io(path: &Path, source: std::io::Error) -> GitSyncError {
        GitSyncError::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// Writes `tree` into `dir`. With `old` (the previous checkout's tree
    /// at the same place, and its folder), that folder is taken over whole
    /// and only what differs is changed: an entry with the same id and mode
    /// stays as it is (a folder is not even entered), a changed file is
    /// written again, a changed folder is patched the same way, and what
    /// the new tree no longer has is removed. So a one-file change writes
    /// one file, whatever the size of its folder.
    fn tree(
        &mut self,
        tree: &git2::Tree<'_>,
        old: Option<(&git2::Tree<'_>, &Path)>,
        dir: &Path,
        prefix: &str,
    ) -> Result<(), GitSyncError> {
        let old = old
            .and_then(|(t, from)| (from == dir || std::fs::rename(from, dir).is_ok()).then_some(t));
        if old.is_none() {
            std::fs::create_dir_all(dir).map_err(|e| Self::io(dir, e))?;
        }
        for entry in tree.iter() {
            let raw = String::from_utf8_lossy(entry.name_bytes()).into_owned();
            let shown = format!("{prefix}{raw}");
            let refuse = |reason: &str| GitSyncError::Refused {
                commit: self.commit.to_owned(),
                path: shown.clone(),
                reason: reason.to_owned(),
            };
            if raw.is_empty()
                || raw == "."
                || raw == ".."
                || raw.eq_ignore_ascii_case(".git")
                || raw.contains('/')
                || raw.contains('\\')
                || raw.contains('\0')
            {
                return Err(refuse("path component leaves the checkout or is reserved"));
            }
            let target = dir.join(&raw);
            let was = old.and_then(|t| t.get_name_bytes(entry.name_bytes()));
            let same = was
                .as_ref()
                .is_some_and(|w| w.id() == entry.id() && w.filemode() == entry.filemode());
            // What stands at `target` is of another kind: out of the way.
            if let Some(w) = &was
                && !same
                && w.kind() != entry.kind()
            {
                remove(&target).map_err(|e| Self::io(&target, e))?;
            }
            let mode = entry.filemode();
            match (entry.kind(), mode) {
                (_, 0o120000) => {
                    return Err(refuse("symlinks are not allowed in a fleet repository"));
                }
                (Some(ObjectType::Commit), _) => {
                    return Err(refuse("submodules are not allowed in a fleet repository"));
                }
                (Some(ObjectType::Tree), _) => {
                    let sub = self.repo.find_tree(entry.id())?;
                    if same {
                        self.count(&sub, &shown)?;
                        continue;
                    }
                    let old_sub = was
                        .filter(|w| w.kind() == Some(ObjectType::Tree))
                        .and_then(|w| self.repo.find_tree(w.id()).ok());
                    let old_sub = old_sub.as_ref().map(|t| (t, target.as_path()));
                    self.tree(&sub, old_sub, &target, &format!("{shown}/"))?;
                }
                (Some(ObjectType::Blob), _) => {
                    if same {
                        let (size, _) = self.odb.read_header(entry.id())?;
                        self.add(size as u64, &shown)?;
                        continue;
                    }
                    let blob = self.repo.find_blob(entry.id())?;
                    self.add(blob.size() as u64, &shown)?;
                    std::fs::write(&target, blob.content()).map_err(|e| Self::io(&target, e))?;
                }
                _ => return Err(refuse("unsupported tree entry")),
            }
        }
        // What the previous tree had and this one has not.
        for gone in old.iter().flat_map(|t| t.iter()) {
            if tree.get_name_bytes(gone.name_bytes()).is_none() {
                let path = dir.join(String::from_utf8_lossy(gone.name_bytes()).as_ref());
                remove(&path).map_err(|e| Self::io(&path, e))?;
            }
        }
        Ok(())
    }

    /// Counts the bytes of a folder moved over, against the limits: from
    /// what the last checkout learnt of the same tree id, or read once.
    fn count(&mut self, tree: &git2::Tree<'_>, shown: &str) -> Result<(), GitSyncError> {
        let sizes = match self.known.and_then(|k| k.get(&tree.id())) {
            Some(s) => s.clone(),
            None => self.sizes_of(tree)?,
        };
        if let Some((size, below)) = &sizes.largest {
            // The per-file limit: the largest file names itself.
            self.add_to_total(0, *size, &format!("{shown}/{below}"))?;
        }
        self.add_to_total(sizes.bytes, 0, shown)?;
        self.sizes.insert(tree.id(), sizes);
        Ok(())
    }

    /// A tree's byte count and largest file, from the object database's
    /// headers (no file is read).
    fn sizes_of(&self, tree: &git2::Tree<'_>) -> Result<Sizes, GitSyncError> {
        let mut out = Sizes {
            bytes: 0,
            largest: None,
        };
        for e in tree.iter() {
            let name = String::from_utf8_lossy(e.name_bytes()).into_owned();
            let (bytes, largest) = match e.kind() {
                Some(ObjectType::Tree) => {
                    let sub = self.sizes_of(&self.repo.find_tree(e.id())?)?;
                    (
                        sub.bytes,
                        sub.largest.map(|(n, p)| (n, format!("{name}/{p}"))),
                    )
                }
                _ => {
                    let (size, _) = self.odb.read_header(e.id())?;
                    (size as u64, Some((size as u64, name)))
                }
            };
            out.bytes += bytes;
            if largest.as_ref().map(|l| l.0) > out.largest.as_ref().map(|l| l.0) {
                out.largest = largest;
            }
        }
        Ok(out)
    }

    /// Adds one file's bytes: over the per-file or the total limit refuses.
    fn add(&mut self, size: u64, shown: &str) -> Result<(), GitSyncError> {
        self.add_to_total(size, size, shown)
    }

    /// Adds `bytes` to the checkout's total, where the largest file among
    /// them has `largest` bytes: over the per-file or the total limit
    /// refuses, naming `shown`.
    fn add_to_total(&mut self, bytes: u64, largest: u64, shown: &str) -> Result<(), GitSyncError> {
        let refuse = |reason: String| GitSyncError::Refused {
            commit: self.commit.to_owned(),
            path: shown.to_owned(),
            reason,
        };
        if largest > self.max_file {
            return Err(refuse(format!(
                "{largest} bytes is over the {} byte file limit",
                self.max_file
            )));
        }
        self.total += bytes;
        if self.total > MAX_TOTAL_BYTES {
            return Err(refuse(format!(
                "the checkout exceeds {MAX_TOTAL_BYTES} bytes"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
