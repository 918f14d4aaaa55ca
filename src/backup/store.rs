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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use sha2::{Digest as _, Sha256};

use super::Category;
use super::manifest::{MANIFEST_MEDIA_TYPE, MAX_MANIFEST_BYTES, is_sha256_digest};
use crate::fleet::pin::{self, challenge, challenge::Challenge};
use crate::net;

/// A registry user and password. Debug shows the user only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    user: String,
    password: String,
}

impl Credentials {
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            password: password.into(),
        }
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    fn basic_header(&self) -> String {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", self.user, self.password))
        )
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

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

/// Which blob a call is about, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blob {
    Config,
    Layer(usize),
    /// A blob pushed or checked outside a manifest's order.
    Any,
}

impl std::fmt::Display for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blob::Config => f.write_str("the config blob"),
            Blob::Layer(i) => write!(f, "layer {i}"),
            Blob::Any => f.write_str("blob"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("backup repository {repository:?}: {why}")]
    Invalid { repository: String, why: String },
    #[error("registry {registry} is unreachable ({what}): {reason}")]
    Unreachable {
        registry: String,
        what: String,
        reason: String,
    },
    #[error("registry {registry} gave no answer in {secs}s ({what})")]
    Deadline {
        registry: String,
        what: String,
        secs: u64,
    },
    #[error("registry {registry} refused the credentials for {repository} ({what})")]
    Auth {
        registry: String,
        repository: String,
        what: String,
    },
    #[error("{what} is not in {repository}")]
    NotFound { repository: String, what: String },
    #[error("registry {registry} answered {what} with HTTP {status}{codes}")]
    Registry {
        registry: String,
        what: String,
        status: u16,
        codes: String,
    },
    #[error("registry {registry} does not allow {what} (HTTP {status})")]
    Unsupported {
        registry: String,
        what: String,
        status: u16,
    },
    #[error(
        "{what} ({digest}) does not match its digest: the registry sent {bytes} bytes hashing to {found}"
    )]
    Mismatch {
        what: String,
        digest: String,
        found: String,
        bytes: u64,
    },
    #[error("{what} ({digest}) is longer than the {limit} bytes it should have")]
    TooLong {
        what: String,
        digest: String,
        limit: u64,
    },
}

impl StoreError {
    pub fn category(&self) -> Category {
        match self {
            StoreError::Invalid { .. } | StoreError::Unsupported { .. } => Category::Invalid,
            StoreError::Unreachable { .. } | StoreError::Deadline { .. } => Category::Unreachable,
            StoreError::Auth { .. } => Category::Auth,
            StoreError::NotFound { .. } => Category::NotFound,
            StoreError::Registry { .. } => Category::Registry,
            StoreError::Mismatch { .. } | StoreError::TooLong { .. } => Category::Integrity,
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

/// What the registry asked for, learned from its first 401.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Auth {
    /// Not asked yet, or never refused: send nothing.
    Open,
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
    },
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
        check_path(path).map_err(invalid)?;
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
        check_path(path).map_err(|why| StoreError::Invalid {
            repository: format!("{}/{path}", self.registry),
            why,
        })?;
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
                    .map_err(|why| self.invalid(why))?;
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

    /// Sends a request with what the registry asks for; on a first 401,
    /// learns its challenge and sends it once more with that.
    async fn call(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, String)],
        body: Bytes,
        scope: &[String],
        what: &str,
    ) -> Result<Response<Incoming>, StoreError> {
        let ours = url.starts_with(&format!("{}/", self.base));
        let mut authorization = if ours {
            self.authorization(scope, what).await?
        } else {
            None
        };
        let mut retried = false;
        loop {
            let req = request(
                method.clone(),
                url,
                headers,
                authorization.as_deref(),
                body.clone(),
            )
            .map_err(|why| self.invalid(why))?;
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| self.unreachable(what, &net::chain(&e)))?;
            if resp.status() != StatusCode::UNAUTHORIZED || retried || !ours {
                return Ok(resp);
            }
            retried = true;
            let offered: Vec<Challenge> = resp
                .headers()
                .get_all("www-authenticate")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .filter_map(challenge::parse)
                .collect();
            // Bearer scopes a token to the repository; prefer it.
            let learned = match offered
                .iter()
                .find(|c| matches!(c, Challenge::Bearer { .. }))
                .or(offered.first())
            {
                Some(Challenge::Basic) => Auth::Basic,
                Some(Challenge::Bearer { realm, service }) => Auth::Bearer {
                    realm: realm.clone(),
                    service: service.clone(),
                },
                Some(Challenge::Open) | None => return Err(self.auth_error(what)),
            };
            if let Ok(mut a) = self.auth.lock() {
                *a = learned;
            }
            authorization = self.authorization(scope, what).await?;
            if authorization.is_none() {
                return Err(self.auth_error(what));
            }
        }
    }

    /// The Authorization value for `scope`: none while the registry has
    /// not asked, the Basic pair, or a token (fetched now if not held).
    async fn authorization(
        &self,
        scope: &[String],
        what: &str,
    ) -> Result<Option<Arc<str>>, StoreError> {
        let auth = self.auth.lock().map(|a| a.clone()).unwrap_or(Auth::Open);
        match auth {
            Auth::Open => Ok(None),
            Auth::Basic => match &self.credentials {
                Some(c) => Ok(Some(Arc::from(c.basic_header()))),
                None => Err(self.auth_error(what)),
            },
            Auth::Bearer { realm, service } => {
                let key = scope.join(" ");
                if let Some(t) = self.tokens.lock().ok().and_then(|m| m.get(&key).cloned()) {
                    return Ok(Some(t));
                }
                let token = self
                    .fetch_token(&realm, service.as_deref(), scope, what)
                    .await?;
                if let Ok(mut m) = self.tokens.lock() {
                    m.insert(key, token.clone());
                }
                Ok(Some(token))
            }
        }
    }

    /// Docker's token flow: the realm, asked with the credentials (if
    /// any) for `scope`. The token is never in a message.
    async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scope: &[String],
        what: &str,
    ) -> Result<Arc<str>, StoreError> {
        let mut query: Vec<String> = service
            .iter()
            .map(|s| format!("service={}", net::query_value(s)))
            .collect();
        query.extend(
            scope
                .iter()
                .map(|s| format!("scope={}", net::query_value(s))),
        );
        let sep = if realm.contains('?') { '&' } else { '?' };
        let url = format!("{realm}{sep}{}", query.join("&"));
        let basic = self.credentials.as_ref().map(Credentials::basic_header);
        let req = request(Method::GET, &url, &[], basic.as_deref(), Bytes::new())
            .map_err(|why| self.invalid(why))?;
        // A plain-http registry's client trusts no roots; an https realm
        // needs one that does.
        let own;
        let client = if realm.starts_with("https://") && self.base.starts_with("http://") {
            own = net::client().map_err(|e| self.unreachable(what, &e.to_string()))?;
            &own
        } else {
            &self.client
        };
        let answer = net::send(client, req, self.options.timeout)
            .await
            .map_err(|e| {
                self.unreachable(&format!("its token service, for {what}"), &e.to_string())
            })?;
        if matches!(
            answer.status,
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        ) {
            return Err(self.auth_error(what));
        }
        #[derive(serde::Deserialize)]
        struct TokenAnswer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token = serde_json::from_slice::<TokenAnswer>(&answer.body)
            .ok()
            .filter(|_| answer.status.is_success())
            .and_then(|t| t.token.or(t.access_token))
            .filter(|t| !t.is_empty())
            .ok_or_else(|| StoreError::Registry {
                registry: self.registry.clone(),
                what: format!("the token request for {what}"),
                status: answer.status.as_u16(),
                codes: ": no token in the answer".into(),
            })?;
        Ok(Arc::from(format!("Bearer {token}")))
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

    fn invalid(&self, why: String) -> StoreError {
        StoreError::Invalid {
            repository: self.name(),
            why,
        }
    }

    fn unreachable(&self, what: &str, reason: &str) -> StoreError {
        StoreError::Unreachable {
            registry: self.registry.clone(),
            what: what.to_owned(),
            reason: reason.to_owned(),
        }
    }

    fn auth_error(&self, what: &str) -> StoreError {
        StoreError::Auth {
            registry: self.registry.clone(),
            repository: self.path.clone(),
            what: what.to_owned(),
        }
    }

    fn read_error(&self, e: ReadError, what: &str, digest: &str, limit: u64) -> StoreError {
        match e {
            ReadError::TooLong => StoreError::TooLong {
                what: what.to_owned(),
                digest: digest.to_owned(),
                limit,
            },
            ReadError::Broken(reason) => self.unreachable(what, &reason),
        }
    }

    /// A refusal, from its status and the distribution spec's error
    /// envelope (`{"errors":[{"code":"BLOB_UNKNOWN",…}]}`): its codes only.
    async fn refused(&self, resp: Response<Incoming>, what: &str) -> StoreError {
        let status = resp.status();
        let body = read_hashed(resp.into_body(), 64 << 10)
            .await
            .map(|(b, _)| b)
            .unwrap_or_default();
        #[derive(serde::Deserialize)]
        struct Envelope {
            errors: Vec<Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            code: String,
        }
        let codes: Vec<String> = serde_json::from_slice::<Envelope>(&body)
            .map(|e| e.errors.into_iter().map(|e| e.code).collect())
            .unwrap_or_default();
        let has = |c: &str| codes.iter().any(|x| x.eq_ignore_ascii_case(c));
        if status == StatusCode::UNAUTHORIZED
            || status == StatusCode::FORBIDDEN
            || has("UNAUTHORIZED")
            || has("DENIED")
        {
            return self.auth_error(what);
        }
        if status == StatusCode::NOT_FOUND {
            return StoreError::NotFound {
                repository: self.name(),
                what: what.to_owned(),
            };
        }
        if status == StatusCode::METHOD_NOT_ALLOWED || has("UNSUPPORTED") {
            return StoreError::Unsupported {
                registry: self.registry.clone(),
                what: what.to_owned(),
                status: status.as_u16(),
            };
        }
        StoreError::Registry {
            registry: self.registry.clone(),
            what: what.to_owned(),
            status: status.as_u16(),
            codes: if codes.is_empty() {
                String::new()
            } else {
                format!(": {}", codes.join(", "))
            },
        }
    }
}

/// `path` under docker's rules: components of lowercase letters and digits
/// joined by `.`, `_`, `__` or `-`, separated by `/`.
fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() || path.len() > 255 {
        return Err("the repository path must be 1 to 255 characters".into());
    }
    match path.split('/').find(|c| !pin::valid_path_component(c)) {
        Some(bad) => Err(format!(
            "path component {bad:?} is not lowercase letters and digits joined by '.', '_', '__' or '-'"
        )),
        None => Ok(()),
    }
}

fn request(
    method: Method,
    url: &str,
    headers: &[(&str, String)],
    authorization: Option<&str>,
    body: Bytes,
) -> Result<Request<Full<Bytes>>, String> {
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    // Never the error's text: it could quote a header's value.
    req.body(Full::new(body))
        .map_err(|_| "cannot form the request (a URL or header value is malformed)".to_owned())
}

fn header(resp: &Response<Incoming>, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The `rel="next"` target of a `Link` header's value. Pure.
fn next_link(link: Option<&str>) -> Option<String> {
    let (target, params) = link?.split_once(';')?;
    params.contains("rel=\"next\"").then(|| {
        target
            .trim()
            .trim_start_matches('<')
            .trim_end_matches('>')
            .to_owned()
    })
}

enum ReadError {
    TooLong,
    Broken(String),
}

/// A body, read to its end while hashed, refused once past `limit`.
async fn read_hashed(mut body: Incoming, limit: u64) -> Result<(Bytes, String), ReadError> {
    let mut hasher = Sha256::new();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ReadError::Broken(net::chain(&e)))?;
        if let Ok(data) = frame.into_data() {
            if out.len() as u64 + data.len() as u64 > limit {
                return Err(ReadError::TooLong);
            }
            hasher.update(&data);
            out.extend_from_slice(&data);
        }
    }
    Ok((
        Bytes::from(out),
        format!("sha256:{}", hex::encode(hasher.finalize())),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_password() {
        let c = Credentials::new("backup", "s3cret-pw");
        let shown = format!("{c:?}");
        assert!(
            shown.contains("backup") && !shown.contains("s3cret"),
            "{shown}"
        );
        let r = Repository::new(
            "127.0.0.1:5000",
            "backups/team-a/work",
            Some(c.clone()),
            Options::default(),
        )
        .unwrap();
        if let Ok(mut m) = r.tokens.lock() {
            m.insert("x".into(), Arc::from("Bearer t0ken"));
        }
        let shown = format!("{r:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0ken"),
            "{shown}"
        );
        let b64 = c.basic_header();
        assert!(!shown.contains(b64.trim_start_matches("Basic ")), "{shown}");
    }

    #[test]
    fn names_are_checked_before_any_request() {
        let new = |reg: &str, path: &str| Repository::new(reg, path, None, Options::default());
        assert!(new("127.0.0.1:5000", "backups/a").is_ok());
        for (reg, path) in [
            ("127.0.0.1:5000", "Backups/a"),
            ("127.0.0.1:5000", "backups//a"),
            ("127.0.0.1:5000", ""),
            ("127.0.0.1:5000", "a/../b"),
            ("reg/istry", "a"),
            ("", "a"),
        ] {
            let e = new(reg, path).unwrap_err();
            assert_eq!(e.category(), Category::Invalid, "{reg} {path}: {e}");
        }
    }

    #[test]
    fn loopback_registries_speak_plain_http() {
        let r = Repository::new("localhost:5000", "a", None, Options::default()).unwrap();
        assert_eq!(r.base, "http://localhost:5000");
        let r = Repository::new("registry.example.com", "a", None, Options::default()).unwrap();
        assert_eq!(r.base, "https://registry.example.com");
    }

    #[tokio::test]
    async fn bad_digests_and_references_are_refused_locally() {
        let r = Repository::new("127.0.0.1:1", "a", None, Options::default()).unwrap();
        let e = r.blob_exists("sha256:abc", Blob::Any).await.unwrap_err();
        assert_eq!(e.category(), Category::Invalid, "{e}");
        let e = r.pull_manifest("../x").await.unwrap_err();
        assert_eq!(e.category(), Category::Invalid, "{e}");
    }

    #[tokio::test]
    async fn an_unreachable_registry_is_named() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let r =
            Repository::new(&format!("127.0.0.1:{port}"), "a", None, Options::default()).unwrap();
        let e = r.list_tags().await.unwrap_err();
        assert_eq!(e.category(), Category::Unreachable, "{e}");
        assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    }

    #[test]
    fn next_links_are_read() {
        assert_eq!(
            next_link(Some("</v2/a/tags/list?last=b&n=2>; rel=\"next\"")).as_deref(),
            Some("/v2/a/tags/list?last=b&n=2")
        );
        assert_eq!(next_link(Some("</v2/a>; rel=\"prev\"")), None);
        assert_eq!(next_link(None), None);
    }
}
