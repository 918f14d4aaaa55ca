//! The registry side of `pin`: HEAD manifest requests over one pooled
//! client. A registry's challenge is learned once, from the first
//! request's answer, and a Bearer registry's token is fetched once per
//! run for many repositories at once (one `scope` per repository), so 200
//! refs cost 200 HEAD requests and a token or two, not a `/v2/` probe and
//! a token per ref.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use sha2::Digest as _;

use super::challenge::{self, Challenge};
use super::{PinError, TagRef};
use crate::net::{self, NetError};

/// Every manifest type a tag can name: an index (multi-arch) resolves to
/// the index's digest, as `docker pull` and skopeo do.
const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
    application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.docker.distribution.manifest.v2+json";

/// Scopes asked for in one token request (keeps the URL short).
const SCOPES_PER_TOKEN: usize = 32;

/// One ref to resolve, where it lives.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub tag_ref: TagRef,
    /// The repository's path inside the registry (`team/app`).
    pub path: String,
    pub tag: String,
}

impl Target {
    fn image(&self) -> String {
        self.tag_ref.to_string()
    }
}

/// One registry of the run: where it is, how it wants to be asked, and
/// the tokens it gave. Its Debug never shows a credential.
pub(super) struct Registry {
    /// As the refs name it (messages, credentials).
    pub name: String,
    base: String,
    basic: Option<String>,
    challenge: Challenge,
    tokens: Mutex<HashMap<String, Arc<str>>>,
    timeout: Duration,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("name", &self.name)
            .field("base", &self.base)
            .field("challenge", &self.challenge)
            .finish_non_exhaustive()
    }
}

/// What [`Registry::get`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Object {
    Manifest,
    Blob,
}

/// A HEAD's answer, classified.
enum Answer {
    Digest(String),
    /// 2xx without a digest header: the body must be hashed.
    NoDigest,
    NotFound,
    Refused(Option<Challenge>),
    Other,
}

impl Registry {
    pub fn new(
        name: &str,
        host: &str,
        plain_http: bool,
        basic: Option<(&str, &str)>,
        timeout: Duration,
    ) -> Self {
        use base64::Engine as _;
        let scheme = if plain_http { "http" } else { "https" };
        Registry {
            name: name.to_owned(),
            base: format!("{scheme}://{host}"),
            basic: basic.map(|(u, p)| {
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
                )
            }),
            challenge: Challenge::Open,
            tokens: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    fn unreachable(&self, t: &Target, e: &NetError) -> PinError {
        PinError::Unreachable {
            image: t.image(),
            registry: self.name.clone(),
            reason: e.to_string(),
        }
    }

    fn refused(&self, t: &Target) -> PinError {
        PinError::Auth {
            image: t.image(),
            registry: self.name.clone(),
        }
    }

    /// Asks for `first` without credentials and learns the registry's
    /// challenge from the answer; a Bearer registry's token for every path
    /// in `paths` is fetched then. The result is `first`'s, when the
    /// answer already gave it. An unreachable registry fails `first`, and
    /// the caller fails the rest the same way rather than wait for each.
    pub async fn learn(
        &mut self,
        client: &net::Client,
        first: &Target,
        paths: &[&str],
    ) -> Option<Result<String, PinError>> {
        let answer = match self.head(client, first, None).await {
            Ok(a) => a,
            Err(e) => return Some(Err(e)),
        };
        match answer {
            Answer::Refused(Some(c)) => {
                self.challenge = c;
                if let Challenge::Bearer { .. } = self.challenge {
                    for chunk in paths.chunks(SCOPES_PER_TOKEN) {
                        if let Err(e) = self.fetch_token(client, first, chunk).await {
                            return Some(Err(e));
                        }
                    }
                }
                None
            }
            Answer::Digest(d) => Some(Ok(d)),
            Answer::NotFound => Some(Err(PinError::NotFound {
                image: first.image(),
            })),
            Answer::Refused(None) => Some(Err(self.refused(first))),
            Answer::NoDigest | Answer::Other => None,
        }
    }

    /// `t`'s digest.
    pub async fn resolve(&self, client: &net::Client, t: &Target) -> Result<String, PinError> {
        let mut auth = self.auth_for(client, t).await?;
        let mut retried = false;
        loop {
            let answer = self.head(client, t, auth.as_deref()).await?;
            return match answer {
                Answer::Digest(d) => Ok(d),
                Answer::NotFound => Err(PinError::NotFound { image: t.image() }),
                // A token asked for with many scopes may not carry this
                // one: ask for this repository alone, once.
                Answer::Refused(_)
                    if !retried && matches!(self.challenge, Challenge::Bearer { .. }) =>
                {
                    retried = true;
                    auth = Some(self.fetch_token(client, t, &[t.path.as_str()]).await?);
                    continue;
                }
                Answer::Refused(_) => Err(self.refused(t)),
                Answer::NoDigest | Answer::Other => {
                    self.get_digest(client, t, auth.as_deref()).await
                }
            };
        }
    }

    /// The Authorization value for `t`: none, the docker config's pair, or
    /// the path's token (asked for now when the batch did not cover it).
    async fn auth_for(
        &self,
        client: &net::Client,
        t: &Target,
    ) -> Result<Option<Arc<str>>, PinError> {
        match &self.challenge {
            Challenge::Open => Ok(None),
            Challenge::Basic => Ok(self.basic.as_deref().map(Arc::from)),
            Challenge::Bearer { .. } => {
                let cached = self
                    .tokens
                    .lock()
                    .ok()
                    .and_then(|m| m.get(&t.path).cloned());
                match cached {
                    Some(token) => Ok(Some(token)),
                    None => self
                        .fetch_token(client, t, &[t.path.as_str()])
                        .await
                        .map(Some),
                }
            }
        }
    }

    fn manifest_url(&self, t: &Target) -> String {
        format!("{}/v2/{}/manifests/{}", self.base, t.path, t.tag)
    }

    /// GETs `t`'s manifest (`Object::Manifest`, `t.tag` a tag or digest)
    /// or the blob `t.tag` names (`Object::Blob`), at most `limit` bytes;
    /// `None` when the registry has no such object. A blob's bytes are
    /// checked against its digest by the caller.
    pub async fn get(
        &self,
        client: &net::Client,
        t: &Target,
        object: Object,
        limit: usize,
    ) -> Result<Option<Bytes>, PinError> {
        let url = match object {
            Object::Manifest => self.manifest_url(t),
            Object::Blob => format!("{}/v2/{}/blobs/{}", self.base, t.path, t.tag),
        };
        let mut auth = self.auth_for(client, t).await?;
        let mut retried = false;
        loop {
            let req = self.request(t, Method::GET, &url, auth.as_deref())?;
            let a = net::send_limited(client, req, self.timeout, limit)
                .await
                .map_err(|e| self.unreachable(t, &e))?;
            if a.status.is_success() {
                return Ok(Some(a.body));
            }
            let refused = a.status == StatusCode::UNAUTHORIZED || a.status == StatusCode::FORBIDDEN;
            if refused && !retried && matches!(self.challenge, Challenge::Bearer { .. }) {
                retried = true;
                auth = Some(self.fetch_token(client, t, &[t.path.as_str()]).await?);
                continue;
            }
            return match classify(a.status, &a.body, &t.image(), &self.name) {
                PinError::NotFound { .. } => Ok(None),
                e => Err(e),
            };
        }
    }

    /// A request for `t` (the URL, the token service's or the manifest's).
    /// Only a value that is not one fails: a registry's realm or token
    /// with a character a header cannot carry (never shown).
    fn request(
        &self,
        t: &Target,
        method: Method,
        url: &str,
        auth: Option<&str>,
    ) -> Result<Request<Full<Bytes>>, PinError> {
        let mut req = Request::builder()
            .method(method)
            .uri(url)
            .header("accept", ACCEPT);
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        req.body(Full::new(Bytes::new()))
            .map_err(|e| PinError::Registry {
                image: t.image(),
                registry: self.name.clone(),
                reason: format!("cannot form the request: {e}"),
            })
    }

    async fn head(
        &self,
        client: &net::Client,
        t: &Target,
        auth: Option<&str>,
    ) -> Result<Answer, PinError> {
        let req = self.request(t, Method::HEAD, &self.manifest_url(t), auth)?;
        let a = net::send(client, req, self.timeout)
            .await
            .map_err(|e| self.unreachable(t, &e))?;
        Ok(match a.status {
            s if s.is_success() => match a
                .headers
                .get("docker-content-digest")
                .and_then(|v| v.to_str().ok())
                .filter(|d| is_digest(d))
            {
                Some(d) => Answer::Digest(d.to_owned()),
                None => Answer::NoDigest,
            },
            StatusCode::NOT_FOUND => Answer::NotFound,
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                // A registry may offer several (Gitea: Bearer and Basic);
                // Bearer is the one that scopes a token to the repository.
                let offered: Vec<Challenge> = a
                    .headers
                    .get_all("www-authenticate")
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .filter_map(challenge::parse)
                    .collect();
                let bearer = offered
                    .iter()
                    .find(|c| matches!(c, Challenge::Bearer { .. }))
                    .cloned();
                Answer::Refused(bearer.or_else(|| offered.into_iter().next()))
            }
            _ => Answer::Other,
        })
    }

    /// The manifest itself, hashed; for a registry that answers HEAD
    /// without a digest, or not at all. Its error body names the reason.
    async fn get_digest(
        &self,
        client: &net::Client,
        t: &Target,
        auth: Option<&str>,
    ) -> Result<String, PinError> {
        let req = self.request(t, Method::GET, &self.manifest_url(t), auth)?;
        let a = net::send(client, req, self.timeout)
            .await
            .map_err(|e| self.unreachable(t, &e))?;
        if a.status.is_success() {
            return Ok(format!("sha256:{:x}", sha2::Sha256::digest(&a.body)));
        }
        Err(classify(a.status, &a.body, &t.image(), &self.name))
    }

    /// A token for `paths` from the registry's realm, remembered for each
    /// of them. The token is never in a message.
    async fn fetch_token(
        &self,
        client: &net::Client,
        t: &Target,
        paths: &[&str],
    ) -> Result<Arc<str>, PinError> {
        let Challenge::Bearer { realm, service } = &self.challenge else {
            return Err(self.refused(t));
        };
        let mut query: Vec<String> = service
            .iter()
            .map(|s| format!("service={}", net::query_value(s)))
            .collect();
        query.extend(paths.iter().map(|p| {
            format!(
                "scope={}",
                net::query_value(&format!("repository:{p}:pull"))
            )
        }));
        let sep = if realm.contains('?') { '&' } else { '?' };
        let url = format!("{realm}{sep}{}", query.join("&"));
        let req = self.request(t, Method::GET, &url, self.basic.as_deref())?;
        // A plain-http registry's client trusts no roots; an https realm
        // gets one that does.
        let own;
        let client = if realm.starts_with("https://") && self.base.starts_with("http://") {
            own = net::client().map_err(|e| PinError::Unreachable {
                image: t.image(),
                registry: self.name.clone(),
                reason: format!("its token service: {e}"),
            })?;
            &own
        } else {
            client
        };
        let a = net::send(client, req, self.timeout)
            .await
            .map_err(|e| PinError::Unreachable {
                image: t.image(),
                registry: self.name.clone(),
                reason: format!("its token service: {e}"),
            })?;
        if a.status == StatusCode::UNAUTHORIZED || a.status == StatusCode::FORBIDDEN {
            return Err(self.refused(t));
        }
        #[derive(serde::Deserialize)]
        struct TokenAnswer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let token = serde_json::from_slice::<TokenAnswer>(&a.body)
            .ok()
            .filter(|_| a.status.is_success())
            .and_then(|t| t.token.or(t.access_token))
            .filter(|t| !t.is_empty())
            .ok_or_else(|| PinError::Registry {
                image: t.image(),
                registry: self.name.clone(),
                reason: format!(
                    "its token service answered HTTP {} without a token",
                    a.status.as_u16()
                ),
            })?;
        let value: Arc<str> = Arc::from(format!("Bearer {token}"));
        if let Ok(mut m) = self.tokens.lock() {
            for p in paths {
                m.insert((*p).to_owned(), value.clone());
            }
        }
        Ok(value)
    }
}

/// `sha256:` and 64 hex digits (or another algorithm's name and hex).
fn is_digest(d: &str) -> bool {
    d.split_once(':').is_some_and(|(alg, hex)| {
        !alg.is_empty()
            && alg
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && hex.len() >= 32
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

/// A refusal's reason, from the distribution spec's error envelope
/// (`{"errors":[{"code":"MANIFEST_UNKNOWN",…}]}`) when there is one. Pure.
pub(super) fn classify(status: StatusCode, body: &[u8], image: &str, registry: &str) -> PinError {
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: String,
    }
    let codes: Vec<String> = serde_json::from_slice::<Envelope>(body)
        .map(|e| e.errors.into_iter().map(|e| e.code).collect())
        .unwrap_or_default();
    let has = |c: &str| codes.iter().any(|x| x.eq_ignore_ascii_case(c));
    let image = image.to_owned();
    let registry = registry.to_owned();
    if status == StatusCode::NOT_FOUND || has("MANIFEST_UNKNOWN") || has("NAME_UNKNOWN") {
        PinError::NotFound { image }
    } else if status == StatusCode::UNAUTHORIZED
        || status == StatusCode::FORBIDDEN
        || has("UNAUTHORIZED")
        || has("DENIED")
    {
        PinError::Auth { image, registry }
    } else if codes.is_empty() {
        PinError::Registry {
            image,
            registry,
            reason: format!("HTTP {}", status.as_u16()),
        }
    } else {
        PinError::Registry {
            image,
            registry,
            reason: format!("HTTP {}: {}", status.as_u16(), codes.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_named_from_the_status_and_the_envelope() {
        let r = |s: u16, body: &str| {
            classify(
                StatusCode::from_u16(s).unwrap(),
                body.as_bytes(),
                "r/a:1",
                "r",
            )
            .to_string()
        };
        assert_eq!(r(404, ""), "r/a:1: tag not found in the registry");
        assert_eq!(
            r(
                400,
                r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"x"}]}"#
            ),
            "r/a:1: tag not found in the registry"
        );
        assert!(r(401, "").contains("refused the credentials"));
        assert!(r(400, r#"{"errors":[{"code":"DENIED"}]}"#).contains("refused the credentials"));
        assert_eq!(
            r(
                500,
                r#"{"errors":[{"code":"UNKNOWN"},{"code":"UNSUPPORTED"}]}"#
            ),
            "r/a:1: registry r answered: HTTP 500: UNKNOWN, UNSUPPORTED"
        );
        assert_eq!(r(502, "<html>"), "r/a:1: registry r answered: HTTP 502");
    }

    #[test]
    fn digests_are_checked_for_shape() {
        assert!(is_digest(
            "sha256:998c8a0e057cc55cbab5ab1d3e00e3e00fd07cadbcb929813c184e392654353d"
        ));
        assert!(!is_digest("sha256:"));
        assert!(!is_digest(
            "998c8a0e057cc55cbab5ab1d3e00e3e00fd07cadbcb929813c184e39"
        ));
        assert!(!is_digest(
            "SHA256:998c8a0e057cc55cbab5ab1d3e00e3e00fd07cadbcb929813c18"
        ));
        assert!(!is_digest(
            "sha256:zz8c8a0e057cc55cbab5ab1d3e00e3e00fd07cadbcb929813c18"
        ));
    }

    #[test]
    fn debug_never_shows_the_credentials() {
        let r = Registry::new(
            "r",
            "r",
            true,
            Some(("u", "s3cret")),
            Duration::from_secs(1),
        );
        if let Ok(mut m) = r.tokens.lock() {
            m.insert("a".into(), Arc::from("Bearer t0ken"));
        }
        let shown = format!("{r:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0ken"),
            "{shown}"
        );
        assert!(!shown.contains(&{
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode("u:s3cret")
        }));
    }
}
