//! Resolving image tags to digests against real OCI registries (the
//! distribution API over `crate::net`; oci-client parses the references).
//!
//! Guarantees:
//! - one HEAD manifest request per distinct `repository:tag` in a run (the
//!   results are cached for the run), plus, per registry, what its
//!   challenge asks for once: nothing, the docker config's pair, or a
//!   Bearer token for many repositories at once; a multi-arch image
//!   resolves to its index digest, because the request accepts index
//!   media types; a registry that answers HEAD without a digest has its
//!   manifest fetched and hashed;
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

use crate::net;

pub mod challenge;
mod registry;

mod reader;
pub use reader::Reader;
pub use registry::Object;
use registry::{Registry, Target};

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

    fn for_registry(&self, registry: &str) -> Option<(&str, &str)> {
        self.by_registry
            .get(registry)
            .map(|(u, p)| (u.as_str(), p.as_str()))
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

/// Whether `registry` (`host[:port]`) is a loopback address, which docker
/// (and so `pin` and `backup`) speaks plain HTTP to. Pure.
pub fn is_loopback(registry: &str) -> bool {
    let host = registry
        .rsplit_once(':')
        .filter(|(h, p)| !h.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .map_or(registry, |(h, _)| h);
    host == "localhost" || host == "[::1]" || host.starts_with("127.")
}

/// Resolves every distinct ref once, `max_in_flight` at a time: each
/// registry's challenge is learned first (concurrently, from its first
/// ref), then every other ref is one HEAD request on a kept-alive
/// connection. An unreachable registry fails its refs at once.
pub async fn resolve_all(
    refs: &[TagRef],
    creds: &Credentials,
    opts: &ResolverOptions,
) -> BTreeMap<TagRef, Result<String, PinError>> {
    let distinct: BTreeSet<&TagRef> = refs.iter().collect();
    let mut out = BTreeMap::new();
    // Per registry as the refs name it: its host for URLs, its refs.
    let mut groups: BTreeMap<String, (String, Vec<Target>)> = BTreeMap::new();
    for r in distinct {
        let at = match locate(r) {
            Ok(at) => at,
            Err(e) => {
                out.insert(r.clone(), Err(e));
                continue;
            }
        };
        groups
            .entry(at.registry)
            .or_insert_with(|| (at.host, Vec::new()))
            .1
            .push(Target {
                tag_ref: r.clone(),
                path: at.path,
                tag: r.tag.clone(),
            });
    }
    let client = match client_for(groups.keys(), opts) {
        Ok(c) => c,
        Err(e) => {
            for (name, (_, targets)) in groups {
                for t in targets {
                    let err = PinError::Unreachable {
                        image: t.tag_ref.to_string(),
                        registry: name.clone(),
                        reason: e.to_string(),
                    };
                    out.insert(t.tag_ref, Err(err));
                }
            }
            return out;
        }
    };
    let client = &client;
    let learned = learn_all(client, groups, creds, opts).await;
    let mut rest: Vec<(&Registry, &Target)> = Vec::new();
    for (reg, targets, first) in &learned {
        let mut targets = targets.iter();
        match first {
            Some(Err(PinError::Unreachable { reason, .. })) => {
                for t in targets {
                    let err = PinError::Unreachable {
                        image: t.tag_ref.to_string(),
                        registry: reg.name.clone(),
                        reason: reason.clone(),
                    };
                    out.insert(t.tag_ref.clone(), Err(err));
                }
                continue;
            }
            Some(result) => {
                if let Some(t) = targets.next() {
                    out.insert(t.tag_ref.clone(), result.clone());
                }
            }
            None => {}
        }
        rest.extend(targets.map(|t| (reg, t)));
    }
    let resolved: Vec<(TagRef, Result<String, PinError>)> = futures::stream::iter(rest)
        .map(|(reg, t)| async move { (t.tag_ref.clone(), reg.resolve(client, t).await) })
        .buffer_unordered(opts.max_in_flight.max(1))
        .collect()
        .await;
    out.extend(resolved);
    out
}

/// Each registry of `groups` (by name: its host and targets) with its
/// challenge learned from its first target, concurrently; the first
/// target's answer when it already gave one (see [`Registry::learn`]).
async fn learn_all(
    client: &net::Client,
    groups: BTreeMap<String, (String, Vec<Target>)>,
    creds: &Credentials,
    opts: &ResolverOptions,
) -> Vec<(Registry, Vec<Target>, Option<Result<String, PinError>>)> {
    futures::future::join_all(
        groups
            .into_iter()
            .map(|(name, (host, targets))| async move {
                let mut reg = registry_for(&name, &host, creds, opts);
                let paths: BTreeSet<&str> = targets.iter().map(|t| t.path.as_str()).collect();
                let paths: Vec<&str> = paths.into_iter().collect();
                let first = match targets.first() {
                    Some(first) => reg.learn(client, first, &paths).await,
                    None => None,
                };
                (reg, targets, first)
            }),
    )
    .await
}

/// Whether `name` is spoken to in plain http.
fn speaks_plain(opts: &ResolverOptions, name: &str) -> bool {
    opts.plain_http.contains(name) || is_loopback(name)
}

/// One client for the registries `names`: the system's roots are read
/// only when some registry speaks https.
fn client_for<'a>(
    mut names: impl Iterator<Item = &'a String>,
    opts: &ResolverOptions,
) -> Result<net::Client, net::NetError> {
    if names.all(|n| speaks_plain(opts, n)) {
        net::plain_client()
    } else {
        net::client()
    }
}

/// The registry `name` at `host`, with its credentials.
fn registry_for(name: &str, host: &str, creds: &Credentials, opts: &ResolverOptions) -> Registry {
    // Docker Hub's credentials are kept under its index's name.
    let basic = creds.for_registry(name).or_else(|| {
        (name == HUB)
            .then(|| creds.for_registry("index.docker.io"))
            .flatten()
    });
    Registry::new(name, host, speaks_plain(opts, name), basic, opts.timeout)
}

/// Where a repository lives, as docker resolves a name: a first segment
/// with a `.` or a `:`, or `localhost`, names the registry; any other name
/// is on Docker Hub, a one-segment name under `library/`. Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Location {
    /// The registry as the refs name it (messages, credentials, plain http).
    registry: String,
    /// The host to call.
    host: String,
    /// The repository's path inside the registry.
    path: String,
}

const HUB: &str = "docker.io";
const HUB_API: &str = "registry-1.docker.io";

fn locate(r: &TagRef) -> Result<Location, PinError> {
    let invalid = |reason: String| PinError::Invalid {
        image: r.to_string(),
        reason,
    };
    if !valid_tag(&r.tag) {
        return Err(invalid(format!(
            "tag {:?} is not a tag (letters, digits, '_', '.', '-'; at most 128; not starting with '.' or '-')",
            r.tag
        )));
    }
    let at = location_of(&r.repository);
    if !at
        .registry
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
    {
        return Err(invalid(format!(
            "registry {:?} is not a host[:port]",
            at.registry
        )));
    }
    if let Some(bad) = at.path.split('/').find(|c| !valid_path_component(c)) {
        return Err(invalid(format!(
            "repository path component {bad:?} is not lowercase letters and digits joined by '.', '_', '__' or '-'"
        )));
    }
    Ok(at)
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}` (the distribution spec's tag). Pure.
pub fn valid_tag(tag: &str) -> bool {
    tag.len() <= 128
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*` (the distribution spec's path
/// component). Pure.
pub fn valid_path_component(c: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = c.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    if !alnum(first) || !alnum(last) {
        return false;
    }
    // Between alphanumerics: one '.', one or two '_', or any run of '-'.
    let mut run: Vec<u8> = Vec::new();
    for &b in bytes {
        if alnum(b) {
            let ok = run.is_empty()
                || run == b"."
                || run == b"_"
                || run == b"__"
                || run.iter().all(|&x| x == b'-');
            if !ok {
                return false;
            }
            run.clear();
        } else if b"._-".contains(&b) {
            run.push(b);
        } else {
            return false;
        }
    }
    true
}

fn location_of(repository: &str) -> Location {
    let hub = |path: &str| Location {
        registry: HUB.to_owned(),
        host: HUB_API.to_owned(),
        path: if path.contains('/') {
            path.to_owned()
        } else {
            format!("library/{path}")
        },
    };
    match repository.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            if matches!(
                first,
                "docker.io" | "index.docker.io" | "registry-1.docker.io"
            ) {
                hub(rest)
            } else {
                Location {
                    registry: first.to_owned(),
                    host: first.to_owned(),
                    path: rest.to_owned(),
                }
            }
        }
        _ => hub(repository),
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
    fn names_are_located_as_docker_resolves_them() {
        let at = |repo: &str| {
            let l = location_of(repo);
            (l.registry, l.host, l.path)
        };
        let own = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
        assert_eq!(
            at("127.0.0.1:25000/exo/broker"),
            own("127.0.0.1:25000", "127.0.0.1:25000", "exo/broker")
        );
        assert_eq!(at("ghcr.io/a/b/c"), own("ghcr.io", "ghcr.io", "a/b/c"));
        assert_eq!(at("localhost/app"), own("localhost", "localhost", "app"));
        assert_eq!(
            at("busybox"),
            own("docker.io", "registry-1.docker.io", "library/busybox")
        );
        assert_eq!(
            at("team/app"),
            own("docker.io", "registry-1.docker.io", "team/app")
        );
        assert_eq!(
            at("docker.io/busybox"),
            own("docker.io", "registry-1.docker.io", "library/busybox")
        );
    }

    #[test]
    fn malformed_refs_are_named_before_any_request() {
        let r = |repository: &str, tag: &str| {
            locate(&TagRef {
                repository: repository.into(),
                tag: tag.into(),
            })
            .map(|l| l.path)
            .map_err(|e| e.to_string())
        };
        assert_eq!(
            r("reg:5000/a.b/c__d/e-f--g", "v1.2_3-x"),
            Ok("a.b/c__d/e-f--g".into())
        );
        for (repo, tag) in [
            ("reg:5000/Upper", "1"),
            ("reg:5000/a..b", "1"),
            ("reg:5000/a___b", "1"),
            ("reg:5000/-a", "1"),
            ("reg:5000/a/", "1"),
            ("reg:5000/a b", "1"),
            ("reg:5000/a", ".1"),
            ("reg:5000/a", ""),
            ("reg:5000/a", "a/b"),
            ("re g:5000/a", "1"),
        ] {
            let err = r(repo, tag).expect_err(&format!("{repo}:{tag}"));
            assert!(err.starts_with(&format!("{repo}:{tag}: ")), "{err}");
        }
        assert!(r("reg:5000/a", &"t".repeat(129)).is_err());
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
        assert_eq!(c.for_registry("reg.example:5000"), Some(("user", "s3cret")));
        assert_eq!(c.for_registry("other.example"), Some(("u", "p")));
        assert_eq!(c.for_registry("nobody"), None);
        assert!(!format!("{c:?}").contains("s3cret"));

        std::fs::write(&path, r#"{"auths": {"x": {"auth": "s3cret-but-broken"}"#).unwrap();
        let err = Credentials::from_file(&path).unwrap_err().to_string();
        assert!(!err.contains("s3cret"), "{err}");
    }
}
