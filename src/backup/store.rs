//! A backup repository in an OCI registry: the distribution API's calls a
//! backup and a restore need, over `crate::net`'s client (thin I/O).
//!
//! Why not oci-client: it is a dev-dependency only (ARCHITECTURE.md, the
//! dependency note on `exo release pin`), it has no manifest DELETE (which
//! retention needs) and keeps its tokens to itself, so a DELETE would need
//! a second auth path; and its `pull_blob` writes the bytes out before it
//! checks their digest, where a restore must check a chunk before any of it
//! reaches `tar -x`.
//!
//! Guarantees:
//! - the registry's challenge is learned from its first 401 (none, Basic,
//!   or Bearer through docker's token flow, `fleet::pin::challenge`), and
//!   a Bearer token is fetched once per scope;
//! - a blob read is hashed as it streams, cut off past its stated size, and
//!   refused on a mismatch that names the blob (layer index and digest);
//! - a manifest read by digest is checked against that digest;
//! - the password, the Basic header and any token are in no message and no
//!   Debug output; credentials go only to the registry's own origin and
//!   its token service;
//! - every call has a deadline: `timeout`, plus the time a blob needs at
//!   `min_rate`.
//!
//! `auth` (credentials, challenge, tokens), `error` (the enum and how an
//! answer's refusal is read), `wire` (requests, headers, bodies).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::{Bytes, Incoming};
use hyper::{Method, Response, StatusCode};
use sha2::{Digest as _, Sha256};

use super::manifest::{MANIFEST_MEDIA_TYPE, MAX_MANIFEST_BYTES, is_sha256_digest};
use crate::fleet::pin;
use crate::net;

mod auth;
mod error;
mod wire;

use auth::Auth;
use wire::{header, next_link, read_hashed, request};

pub use auth::Credentials;
pub use error::{Blob, StoreError};

/// How a repository is spoken to.
#[derive(Debug, Clone)]
pub struct Options {
    /// Deadline of a call that carries no blob.
    pub timeout: Duration,
    /// A blob transfer may take `timeout` plus its size at this rate
    /// (bytes per second).
    pub min_rate: u64,
    /// `http` rather than `https`; `None`: only for a loopback registry,
    /// as docker does.
    pub plain_http: Option<bool>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            min_rate: 1 << 20,
            plain_http: None,
        }
    }
}

/// What `push_blob` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    Uploaded,
    /// Mounted from the `mount_from` repository: no bytes sent.
    Mounted,
}

/// A manifest as read, with the digest of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    pub digest: String,
    pub bytes: Bytes,
}

/// One repository in one registry. Cheap to share by reference; its
/// connections are pooled. Debug never shows a credential or token.
pub struct Repository {
    registry: String,
    path: String,
    base: String,
    credentials: Option<Credentials>,
    mount_from: Option<String>,
    client: net::Client,
    auth: Mutex<Auth>,
    /// `Bearer …` values by scope.
    tokens: Mutex<HashMap<String, Arc<str>>>,
    options: Options,
}

impl std::fmt::Debug for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repository")
            .field("registry", &self.registry)
            .field("path", &self.path)
            .field("user", &self.credentials.as_ref().map(Credentials::user))
            .field("mount_from", &self.mount_from)
            .finish_non_exhaustive()
    }
}

impl Repository {
    /// `registry` is `host[:port]`; `path` the repository's path in it
    /// (`backups/team-a/work`), checked against docker's name rules.
    pub fn new(
        registry: &str,
        path: &str,
        credentials: Option<Credentials>,
        options: Options,
    ) -> Result<Self, StoreError> {
        let invalid = |why: String| StoreError::Invalid {
            repository: format!("{registry}/{path}"),
            why,
        };
        if registry.is_empty()
            || !registry
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        {
            return Err(invalid("the registry is not a host[:port]".into()));
        }
        check_path(registry, path)?;
        let plain = options
            .plain_http
            .unwrap_or_else(|| pin::is_loopback(registry));
        let client = if plain {
            net::plain_client()
        } else {
            net::client()
        }
        .map_err(|e| invalid(e.to_string()))?;
        Ok(Self {
            registry: registry.to_owned(),
            path: path.to_owned(),
            base: format!("{}://{registry}", if plain { "http" } else { "https" }),
            credentials,
            mount_from: None,
            client,
            auth: Mutex::new(Auth::Open),
            tokens: Mutex::new(HashMap::new()),
            options,
        })
    }

    /// Blobs missing here are first asked to be mounted from `path`, a
    /// repository of the same registry (an earlier name of the volume):
    /// the registry links them without a byte sent, where it allows.
    pub fn mount_from(mut self, path: &str) -> Result<Self, StoreError> {
        check_path(&self.registry, path)?;
        self.mount_from = Some(path.to_owned());
        Ok(self)
    }

    pub fn registry(&self) -> &str {
        &self.registry
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// `registry/path`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.path)
    }

    /// Whether the repository holds the blob.
    /// Whether the registry speaks the distribution API: `GET /v2/`
    /// answers 200 (after the credentials, when it asks for them) with
    /// `Docker-Distribution-API-Version: registry/2.0`, as the distribution
    /// registry, Harbor, GHCR, Gitea and zot send. Anything else (a web
    /// server that answers every path with 200, say, which would make
    /// every blob look present) is refused before a backup sends or skips
    /// a byte.
    pub async fn check_api(&self) -> Result<(), StoreError> {
        let what = "GET /v2/".to_owned();
        let url = format!("{}/v2/", self.base);
        self.timed(&what, self.options.timeout, async {
            let resp = self
                .call(
                    Method::GET,
                    &url,
                    &[],
                    Bytes::new(),
                    &self.push_scope(),
                    &what,
                )
                .await?;
            let version = header(&resp, "docker-distribution-api-version");
            if resp.status().is_success() && version.as_deref() == Some("registry/2.0") {
                return Ok(());
            }
            if resp.status() == StatusCode::UNAUTHORIZED || resp.status() == StatusCode::FORBIDDEN {
                return Err(self.refused(resp, &what).await);
            }
            Err(StoreError::NotRegistry {
                registry: self.registry.clone(),
                status: resp.status().as_u16(),
            })
        })
        .await
    }

    pub async fn blob_exists(&self, digest: &str, what: Blob) -> Result<bool, StoreError> {
        self.digest_arg(digest)?;
        let what = format!("HEAD {what} {digest}");
        let url = format!("{}/v2/{}/blobs/{digest}", self.base, self.path);
        let deadline = self.options.timeout;
        self.timed(&what, deadline, async {
            let resp = self
                .call(
                    Method::HEAD,
                    &url,
                    &[],
                    Bytes::new(),
                    &self.pull_scope(),
                    &what,
                )
                .await?;
            match resp.status() {
                s if s.is_success() => Ok(true),
                StatusCode::NOT_FOUND => Ok(false),
                _ => Err(self.refused(resp, &what).await),
            }
        })
        .await
    }

    /// Uploads a blob whose digest the caller computed (or mounts it from
    /// `mount_from`). The registry checks the digest against the bytes.
    pub async fn push_blob(
        &self,
        digest: &str,
        data: Bytes,
        what: Blob,
    ) -> Result<Pushed, StoreError> {
        self.digest_arg(digest)?;
        let what = format!("upload of {what} {digest}");
        let deadline = self.blob_deadline(data.len() as u64);
        self.timed(&what, deadline, async {
            let uploads = format!("{}/v2/{}/blobs/uploads/", self.base, self.path);
            let (url, mut scope) = match &self.mount_from {
                Some(from) => (
                    format!(
                        "{uploads}?mount={}&from={}",
                        net::query_value(digest),
                        net::query_value(from)
                    ),
                    vec![
                        format!("repository:{}:pull,push", self.path),
                        format!("repository:{from}:pull"),
                    ],
                ),
                None => (uploads, self.push_scope()),
            };
            let resp = self
                .call(Method::POST, &url, &[], Bytes::new(), &scope, &what)
                .await?;
            match resp.status() {
                StatusCode::CREATED if self.mount_from.is_some() => return Ok(Pushed::Mounted),
                StatusCode::ACCEPTED => {}
                _ => return Err(self.refused(resp, &what).await),
            }
            scope.truncate(1);
            let location = self.location(&resp, &what)?;
            let sep = if location.contains('?') { '&' } else { '?' };
            let url = format!("{location}{sep}digest={}", net::query_value(digest));
            let headers = [
                ("content-type", "application/octet-stream".to_owned()),
                ("content-length", data.len().to_string()),
            ];
            let resp = self
                .call(Method::PUT, &url, &headers, data, &scope, &what)
                .await?;
            if resp.status() != StatusCode::CREATED {
                return Err(self.refused(resp, &what).await);
            }
            Ok(Pushed::Uploaded)
        })
        .await
    }

    /// Pushes a manifest under `reference` (a tag or its digest); its
    /// digest, checked against the registry's when it says one.
    pub async fn push_manifest(&self, reference: &str, bytes: Bytes) -> Result<String, StoreError> {
        self.reference_arg(reference)?;
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        let what = format!("push of manifest {reference}");
        let url = format!("{}/v2/{}/manifests/{reference}", self.base, self.path);
        let deadline = self.blob_deadline(bytes.len() as u64);
        self.timed(&what, deadline, async {
            let headers = [("content-type", MANIFEST_MEDIA_TYPE.to_owned())];
            let resp = self
                .call(
                    Method::PUT,
                    &url,
                    &headers,
                    bytes,
                    &self.push_scope(),
                    &what,
                )
                .await?;
            if resp.status() != StatusCode::CREATED {
                return Err(self.refused(resp, &what).await);
            }
            match header(&resp, "docker-content-digest") {
                Some(theirs) if theirs != digest => Err(StoreError::Mismatch {
                    what: format!("manifest {reference}"),
                    digest: digest.clone(),
                    found: theirs,
                    bytes: 0,
                }),
                _ => Ok(digest),
            }
        })
        .await
    }

    /// The manifest `reference` (a tag or a digest) names. Read by
    /// digest, its bytes must hash to it.
    pub async fn pull_manifest(&self, reference: &str) -> Result<Pulled, StoreError> {
        self.reference_arg(reference)?;
        let what = format!("manifest {reference}");
        let url = format!("{}/v2/{}/manifests/{reference}", self.base, self.path);
        self.timed(&what, self.blob_deadline(MAX_MANIFEST_BYTES), async {
            let headers = [("accept", MANIFEST_MEDIA_TYPE.to_owned())];
            let resp = self
                .call(
                    Method::GET,
                    &url,
                    &headers,
                    Bytes::new(),
                    &self.pull_scope(),
                    &what,
                )
                .await?;
            if !resp.status().is_success() {
                return Err(self.refused(resp, &what).await);
            }
            let (bytes, found) = read_hashed(resp.into_body(), MAX_MANIFEST_BYTES)
                .await
                .map_err(|e| self.read_error(e, &what, reference, MAX_MANIFEST_BYTES))?;
            if reference.starts_with("sha256:") && found != reference {
                return Err(StoreError::Mismatch {
                    what: what.clone(),
                    digest: reference.to_owned(),
                    found,
                    bytes: bytes.len() as u64,
                });
            }
            Ok(Pulled {
                digest: found,
                bytes,
            })
        })
        .await
    }

    /// A blob's bytes, hashed as they stream and refused unless they are
    /// `size` bytes hashing to `digest`. A redirect (a registry backed by
    /// an object store) is followed once, without credentials.
    pub async fn pull_blob(
        &self,
        digest: &str,
        size: u64,
        what: Blob,
    ) -> Result<Bytes, StoreError> {
        self.digest_arg(digest)?;
        let what = what.to_string();
        let url = format!("{}/v2/{}/blobs/{digest}", self.base, self.path);
        self.timed(&what, self.blob_deadline(size), async {
            let mut resp = self
                .call(
                    Method::GET,
                    &url,
                    &[],
                    Bytes::new(),
                    &self.pull_scope(),
                    &what,
                )
                .await?;
            if resp.status().is_redirection() {
                let to = self.location(&resp, &what)?;
                let req = request(Method::GET, &to, &[], None, Bytes::new())
                    .map_err(|e| self.malformed(e))?;
                resp = self
                    .client
                    .request(req)
                    .await
                    .map_err(|e| self.unreachable(&what, &net::chain(&e)))?;
            }
            if !resp.status().is_success() {
                return Err(self.refused(resp, &what).await);
            }
            let (bytes, found) = read_hashed(resp.into_body(), size)
                .await
                .map_err(|e| self.read_error(e, &what, digest, size))?;
            if found != digest || bytes.len() as u64 != size {
                return Err(StoreError::Mismatch {
                    what: what.clone(),
                    digest: digest.to_owned(),
                    found,
                    bytes: bytes.len() as u64,
                });
            }
            Ok(bytes)
        })
        .await
    }

    /// Every tag, following the registry's pages; none for a repository
    /// that does not exist yet.
    pub async fn list_tags(&self) -> Result<Vec<String>, StoreError> {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let what = "the tag list".to_owned();
        let mut url = format!("{}/v2/{}/tags/list?n=1000", self.base, self.path);
        let mut tags = Vec::new();
        // Bound on pages: 1000 pages of 1000 tags.
        for _ in 0..1000 {
            let deadline = self.options.timeout;
            let (page, next) = self
                .timed(&what, deadline, async {
                    let resp = self
                        .call(
                            Method::GET,
                            &url,
                            &[],
                            Bytes::new(),
                            &self.pull_scope(),
                            &what,
                        )
                        .await?;
                    if resp.status() == StatusCode::NOT_FOUND {
                        return Ok((Page { tags: None }, None));
                    }
                    if !resp.status().is_success() {
                        return Err(self.refused(resp, &what).await);
                    }
                    let next = next_link(header(&resp, "link").as_deref());
                    let (body, _) = read_hashed(resp.into_body(), 16 << 20)
                        .await
                        .map_err(|e| self.read_error(e, &what, "-", 16 << 20))?;
                    let page: Page =
                        serde_json::from_slice(&body).map_err(|_| StoreError::Registry {
                            registry: self.registry.clone(),
                            what: what.clone(),
                            status: 200,
                            codes: ": not a tag list".into(),
                        })?;
                    Ok((page, next))
                })
                .await?;
            tags.extend(page.tags.unwrap_or_default());
            match next {
                Some(n) if n.starts_with('/') => url = format!("{}{n}", self.base),
                Some(n) if n.starts_with(&format!("{}/", self.base)) => url = n,
                _ => return Ok(tags),
            }
        }
        Ok(tags)
    }

    /// Deletes the manifest `digest` (and so every tag on it); one that is
    /// already gone is success. The registry's garbage collection frees
    /// blobs no manifest names any more.
    pub async fn delete_manifest(&self, digest: &str) -> Result<(), StoreError> {
        self.digest_arg(digest)?;
        let what = format!("delete of manifest {digest}");
        let url = format!("{}/v2/{}/manifests/{digest}", self.base, self.path);
        let scope = vec![format!("repository:{}:pull,push,delete", self.path)];
        self.timed(&what, self.options.timeout, async {
            let resp = self
                .call(Method::DELETE, &url, &[], Bytes::new(), &scope, &what)
                .await?;
            match resp.status() {
                s if s.is_success() => Ok(()),
                StatusCode::NOT_FOUND => Ok(()),
                _ => Err(self.refused(resp, &what).await),
            }
        })
        .await
    }

    // ------------------------------------------------------------ the calls

    fn pull_scope(&self) -> Vec<String> {
        vec![format!("repository:{}:pull", self.path)]
    }

    fn push_scope(&self) -> Vec<String> {
        vec![format!("repository:{}:pull,push", self.path)]
    }

    fn blob_deadline(&self, bytes: u64) -> Duration {
        self.options.timeout + Duration::from_secs(bytes / self.options.min_rate.max(1))
    }

    async fn timed<T>(
        &self,
        what: &str,
        deadline: Duration,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        tokio::time::timeout(deadline, call)
            .await
            .map_err(|_| StoreError::Deadline {
                registry: self.registry.clone(),
                what: what.to_owned(),
                secs: deadline.as_secs(),
            })?
    }

    /// The upload or redirect location an answer names, made absolute.
    fn location(&self, resp: &Response<Incoming>, what: &str) -> Result<String, StoreError> {
        match header(resp, "location") {
            Some(l) if l.starts_with('/') => Ok(format!("{}{l}", self.base)),
            Some(l) if l.starts_with("http://") || l.starts_with("https://") => Ok(l),
            _ => Err(StoreError::Registry {
                registry: self.registry.clone(),
                what: what.to_owned(),
                status: resp.status().as_u16(),
                codes: ": no Location in the answer".into(),
            }),
        }
    }

    // ------------------------------------------------------------ errors

    fn digest_arg(&self, digest: &str) -> Result<(), StoreError> {
        if is_sha256_digest(digest) {
            Ok(())
        } else {
            Err(self.invalid(format!(
                "{digest:?} is not \"sha256:\" and 64 lowercase hex digits"
            )))
        }
    }

    fn reference_arg(&self, reference: &str) -> Result<(), StoreError> {
        if is_sha256_digest(reference) || pin::valid_tag(reference) {
            Ok(())
        } else {
            Err(self.invalid(format!(
                "{reference:?} is neither a tag nor a sha256 digest"
            )))
        }
    }
}

/// `path` under docker's rules: components of lowercase letters and digits
/// joined by `.`, `_`, `__` or `-`, separated by `/`.
fn check_path(registry: &str, path: &str) -> Result<(), StoreError> {
    let invalid = |why: String| StoreError::Invalid {
        repository: format!("{registry}/{path}"),
        why,
    };
    if path.is_empty() || path.len() > 255 {
        return Err(invalid(
            "the repository path must be 1 to 255 characters".into(),
        ));
    }
    match path.split('/').find(|c| !pin::valid_path_component(c)) {
        Some(bad) => Err(invalid(format!(
            "path component {bad:?} is not lowercase letters and digits joined by '.', '_', '__' or '-'"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
