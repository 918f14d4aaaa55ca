//! Resolving image tags to digests against real OCI registries (oci-client).
//!
//! Guarantees:
//! - one HEAD manifest request per distinct `repository:tag` in a run (the
//!   results are cached for the run); a multi-arch image resolves to its
//!   index digest, because the request accepts index media types;
//! - at most `max_in_flight` requests at once;
//! - credentials come from the docker config (`$DOCKER_CONFIG/config.json`
//!   or `~/.docker/config.json`, `auths` entries) and are never printed;
//! - loopback registries (127.0.0.0/8, localhost, [::1]) speak plain HTTP,
//!   as docker treats them; every other registry must speak HTTPS unless
//!   named with `plain_http`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error("{image}: tag not found in the registry")]
    NotFound { image: String },
    #[error("{image}: registry {registry} is unreachable: {reason}")]
    Unreachable {
        image: String,
        registry: String,
        reason: String,
    },
    #[error(
        "{image}: registry {registry} refused the credentials (check the docker config for {registry})"
    )]
    Auth { image: String, registry: String },
    #[error("{image}: {reason}")]
    Invalid { image: String, reason: String },
    #[error("{image}: registry {registry} answered: {reason}")]
    Registry {
        image: String,
        registry: String,
        reason: String,
    },
    #[error("{path}: {reason}")]
    DockerConfig { path: PathBuf, reason: String },
}

/// Registry credentials from a docker config file. Debug never shows them.
#[derive(Clone, Default)]
pub struct Credentials {
    by_registry: BTreeMap<String, (String, String)>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("registries", &self.by_registry.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(serde::Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl Credentials {
    /// The docker config at `$DOCKER_CONFIG/config.json` or
    /// `~/.docker/config.json`; none when neither exists.
    pub fn from_docker_config() -> Result<Self, PinError> {
        let path = match std::env::var_os("DOCKER_CONFIG") {
            Some(dir) => PathBuf::from(dir).join("config.json"),
            None => match std::env::var_os("HOME") {
                Some(home) => PathBuf::from(home).join(".docker/config.json"),
                None => return Ok(Self::default()),
            },
        };
        if !path.exists() {
            return Ok(Self::default());
        }
        Self::from_file(&path)
    }

    pub fn from_file(path: &Path) -> Result<Self, PinError> {
        let bad = |reason: String| PinError::DockerConfig {
            path: path.to_owned(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        // Never echo serde's message: it can quote the file's content.
        let cfg: DockerConfig = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not valid JSON at line {}", e.line())))?;
        let mut by_registry = BTreeMap::new();
        for (registry, a) in cfg.auths {
            let host = registry
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .split('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            let pair = match (a.username, a.password, a.auth) {
                (Some(u), Some(p), _) => Some((u, p)),
                (_, _, Some(b64)) => {
                    use base64::Engine as _;
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(b64.trim())
                        .map_err(|_| bad(format!("auths.{registry}.auth is not base64")))?;
                    let text = String::from_utf8(raw)
                        .map_err(|_| bad(format!("auths.{registry}.auth is not UTF-8")))?;
                    text.split_once(':')
                        .map(|(u, p)| (u.to_owned(), p.to_owned()))
                }
                _ => None,
            };
            if let Some(pair) = pair {
                by_registry.insert(host, pair);
            }
        }
        Ok(Self { by_registry })
    }

    pub fn with(mut self, registry: &str, user: &str, password: &str) -> Self {
        self.by_registry
            .insert(registry.to_owned(), (user.to_owned(), password.to_owned()));
        self
    }

    fn for_registry(&self, registry: &str) -> RegistryAuth {
        match self.by_registry.get(registry) {
            Some((u, p)) => RegistryAuth::Basic(u.clone(), p.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ResolverOptions {
    pub max_in_flight: usize,
    pub plain_http: BTreeSet<String>,
    pub timeout: Duration,
}

impl Default for ResolverOptions {
    fn default() -> Self {
        Self {
            max_in_flight: 16,
            plain_http: BTreeSet::new(),
            timeout: Duration::from_secs(20),
        }
    }
}

/// `repository:tag` to resolve.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TagRef {
    pub repository: String,
    pub tag: String,
}

impl std::fmt::Display for TagRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.repository, self.tag)
    }
}

fn registry_of(repository: &str) -> &str {
    repository.split('/').next().unwrap_or(repository)
}

fn is_loopback(registry: &str) -> bool {
    let host = registry
        .rsplit_once(':')
        .filter(|(h, p)| !h.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .map_or(registry, |(h, _)| h);
    host == "localhost" || host == "[::1]" || host.starts_with("127.")
}

/// Resolves every distinct ref once, `max_in_flight` at a time.
pub async fn resolve_all(
    refs: &[TagRef],
    creds: &Credentials,
    opts: &ResolverOptions,
) -> BTreeMap<TagRef, Result<String, PinError>> {
    let distinct: BTreeSet<&TagRef> = refs.iter().collect();
    let mut plain: Vec<String> = opts.plain_http.iter().cloned().collect();
    plain.extend(
        distinct
            .iter()
            .map(|r| registry_of(&r.repository))
            .filter(|r| is_loopback(r))
            .map(str::to_owned),
    );
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(plain),
        connect_timeout: Some(opts.timeout),
        read_timeout: Some(opts.timeout),
        ..ClientConfig::default()
    });
    let client = &client;
    futures::stream::iter(distinct)
        .map(|r| async move {
            let result = resolve_one(client, r, creds).await;
            (r.clone(), result)
        })
        .buffer_unordered(opts.max_in_flight.max(1))
        .collect()
        .await
}

async fn resolve_one(client: &Client, r: &TagRef, creds: &Credentials) -> Result<String, PinError> {
    let image = r.to_string();
    let registry = registry_of(&r.repository).to_owned();
    let reference: Reference =
        image
            .parse()
            .map_err(|e: oci_client::ParseError| PinError::Invalid {
                image: image.clone(),
                reason: e.to_string(),
            })?;
    let auth = creds.for_registry(&registry);
    client
        .fetch_manifest_digest(&reference, &auth)
        .await
        .map_err(|e| classify(e, &image, &registry))
}

fn classify(e: OciDistributionError, image: &str, registry: &str) -> PinError {
    let image = image.to_owned();
    let registry = registry.to_owned();
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => PinError::NotFound { image },
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => PinError::Auth { image, registry },
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<String> = envelope
                .errors
                .iter()
                .map(|e| format!("{:?}", e.code))
                .collect();
            let text = codes.join(",").to_ascii_uppercase();
            if text.contains("MANIFEST_UNKNOWN")
                || text.contains("NAME_UNKNOWN")
                || text.contains("MANIFESTUNKNOWN")
                || text.contains("NAMEUNKNOWN")
            {
                PinError::NotFound { image }
            } else if text.contains("UNAUTHORIZED") || text.contains("DENIED") {
                PinError::Auth { image, registry }
            } else {
                PinError::Registry {
                    image,
                    registry,
                    reason: codes.join(", "),
                }
            }
        }
        OciDistributionError::ServerError { code: 404, .. } => PinError::NotFound { image },
        OciDistributionError::ServerError {
            code: 401 | 403, ..
        } => PinError::Auth { image, registry },
        OciDistributionError::ServerError { code, .. } => PinError::Registry {
            image,
            registry,
            reason: format!("HTTP {code}"),
        },
        OciDistributionError::RequestError(err) => PinError::Unreachable {
            image,
            registry,
            reason: if err.is_timeout() {
                "timed out".into()
            } else if err.is_connect() {
                "connection refused or no route".into()
            } else {
                // reqwest's Display carries the URL, never credentials.
                err.to_string()
            },
        },
        other => PinError::Registry {
            image,
            registry,
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registries_are_plain_http() {
        for r in [
            "127.0.0.1:25000",
            "localhost:5000",
            "localhost",
            "[::1]:5000",
            "127.1.2.3",
        ] {
            assert!(is_loopback(r), "{r}");
        }
        for r in ["ghcr.io", "registry.example:5000", "10.0.0.1:5000"] {
            assert!(!is_loopback(r), "{r}");
        }
    }

    #[test]
    fn docker_config_auths_parse_and_never_show() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(
            &path,
            r#"{"auths":{"https://reg.example:5000/v1/":{"auth":"dXNlcjpzM2NyZXQ="},"other.example":{"username":"u","password":"p"}}}"#,
        )
        .unwrap();
        let c = Credentials::from_file(&path).unwrap();
        assert_eq!(
            c.for_registry("reg.example:5000"),
            RegistryAuth::Basic("user".into(), "s3cret".into())
        );
        assert_eq!(
            c.for_registry("other.example"),
            RegistryAuth::Basic("u".into(), "p".into())
        );
        assert_eq!(c.for_registry("nobody"), RegistryAuth::Anonymous);
        assert!(!format!("{c:?}").contains("s3cret"));

        std::fs::write(&path, r#"{"auths": {"x": {"auth": "s3cret-but-broken"}"#).unwrap();
        let err = Credentials::from_file(&path).unwrap_err().to_string();
        assert!(!err.contains("s3cret"), "{err}");
    }
}
