//! Upstream settings. The operator reads them from the environment:
//! `AUTONOMIC_MANAGED=true` turns the connection on and then requires
//! `AUTONOMIC_BASE_URL` and a token, either `AUTONOMIC_AUTH_TOKEN` (read
//! once) or `AUTONOMIC_AUTH_TOKEN_FILE` (a file mounted from the Secret, read
//! again before every dial so a rotated token is picked up without a
//! restart); anything else means unmanaged (no connection). `Debug` never
//! shows the token, and no error quotes a token file's content.

use std::path::PathBuf;
use std::time::Duration;

use crate::wire::token::SecretToken;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("AUTONOMIC_MANAGED=true but {0} is not set")]
    Missing(&'static str),
    #[error("AUTONOMIC_BASE_URL {0:?} must start with http://, https://, ws:// or wss://")]
    BadUrl(String),
    #[error("AUTONOMIC_MANAGED must be true or false, not {0:?}")]
    BadManaged(String),
    #[error("set only one of AUTONOMIC_AUTH_TOKEN and AUTONOMIC_AUTH_TOKEN_FILE")]
    TwoTokens,
    #[error("token file {path}: {reason}")]
    TokenFile { path: String, reason: String },
    #[error("{field}: {reason}")]
    BadDuration {
        field: &'static str,
        #[source]
        reason: crate::duration::DurationError,
    },
}

#[derive(Clone)]
pub struct UpstreamConfig {
    /// `http(s)://host:port[/prefix]` of the control plane.
    pub base_url: String,
    /// The token as read at start-up (or given by the caller).
    pub token: SecretToken,
    /// When set, the token is read from this file before every dial, and a
    /// change of its content while connected redials with the new token.
    pub token_file: Option<PathBuf>,
    /// How often a connected operator looks at `token_file` for a rotation.
    pub token_reload_interval: Duration,
    /// Watch one namespace only; `None` watches all.
    pub namespace: Option<String>,
    /// Label selector for the Pods streamed as the fourth wire kind.
    pub pod_selector: String,
    pub heartbeat_interval: Duration,
    /// Backstop full snapshot cadence.
    pub snapshot_interval: Duration,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// After losing an established connection, the first redial is uniform
    /// in `[0, reconnect_spread]` (capped by `backoff_max`), so operators
    /// that lost a restarting control plane together do not return together.
    pub reconnect_spread: Duration,
    /// A connection that lived this long resets the backoff.
    pub healthy_after: Duration,
    /// Delay before redialling after a refusal that will repeat (401,
    /// revoked token, unsupported protocol, eviction): no hot loop.
    pub fatal_retry: Duration,
    /// Nothing received (the server pings) for this long: the socket is dead.
    pub read_timeout: Duration,
    /// Connected with nothing received for longer than this: `/health`
    /// answers 503 (`AUTONOMIC_WEDGED_AFTER`). Above `read_timeout` it means
    /// the connection failed to give the socket up itself.
    pub wedged_after: Duration,
    pub dial_timeout: Duration,
    pub chunk_max_resources: usize,
    pub chunk_max_bytes: usize,
    pub max_frame_bytes: usize,
    pub agent_version: String,
    /// Sent in `hello`; the control plane sends AgentFS commands only when
    /// it holds `mount-filesystems`, and `incident_update`s only when it
    /// holds `incident-updates`.
    pub capabilities: Vec<String>,
    /// The helper pod `exo fs` starts when no running pod mounts a volume.
    pub fs_helper: crate::agentfs::helper::HelperOpts,
    /// Largest copy (file bytes) accepted in either direction.
    pub fs_max_bytes: u64,
    /// The tenant registrations the tenant sagas ask for; the connection
    /// sends them and hands back the acks (shared with the tenant engine).
    pub registrations: super::registrations::Registrations,
    /// The incidents the leader's dispatcher asks to deliver; the
    /// connection sends them and hands back each ack with its lane.
    pub incidents: super::registrations::Incidents,
    /// The `incident_update`s from the control plane, for the leader's
    /// dispatcher to record.
    pub incident_updates: super::inbox::IncidentInbox,
    /// This cluster's name in the fleet, learned from the welcome unless
    /// `--cluster` gave it (shared with the rollout engine).
    pub cluster_name: crate::cluster::identity::ClusterName,
}

impl std::fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamConfig")
            .field("base_url", &self.base_url)
            .field("token", &"<redacted>")
            .field("token_file", &self.token_file)
            .field("namespace", &self.namespace)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("snapshot_interval", &self.snapshot_interval)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("reconnect_spread", &self.reconnect_spread)
            .field("fatal_retry", &self.fatal_retry)
            .field("read_timeout", &self.read_timeout)
            .field("wedged_after", &self.wedged_after)
            .finish_non_exhaustive()
    }
}

/// The default label selector for streamed Pods.
pub const DEFAULT_POD_SELECTOR: &str = "app.kubernetes.io/managed-by=exo";

impl UpstreamConfig {
    /// Product defaults for a base URL and token.
    pub fn new(base_url: impl Into<String>, token: SecretToken) -> Self {
        Self {
            base_url: base_url.into(),
            token,
            token_file: None,
            token_reload_interval: Duration::from_secs(5),
            namespace: None,
            pod_selector: DEFAULT_POD_SELECTOR.into(),
            heartbeat_interval: Duration::from_secs(15),
            snapshot_interval: Duration::from_secs(300),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
            reconnect_spread: Duration::from_secs(15),
            healthy_after: Duration::from_secs(30),
            fatal_retry: Duration::from_secs(300),
            read_timeout: Duration::from_secs(60),
            wedged_after: super::health::DEFAULT_WEDGED_AFTER,
            dial_timeout: Duration::from_secs(10),
            chunk_max_resources: 200,
            chunk_max_bytes: 256 * 1024,
            max_frame_bytes: crate::wire::DEFAULT_MAX_FRAME_BYTES,
            agent_version: env!("CARGO_PKG_VERSION").into(),
            capabilities: crate::cluster::CAPABILITIES
                .iter()
                .map(|c| (*c).to_owned())
                .collect(),
            fs_helper: crate::agentfs::helper::HelperOpts::default(),
            fs_max_bytes: crate::agentfs::tarstream::Limits::default().max_bytes,
            registrations: super::registrations::Registrations::new(),
            incidents: super::registrations::Incidents::new(),
            incident_updates: super::inbox::IncidentInbox::default(),
            cluster_name: crate::cluster::identity::ClusterName::default(),
        }
    }

    /// Reads the process environment; `Ok(None)` means unmanaged.
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        match get("AUTONOMIC_MANAGED").as_deref().map(str::trim) {
            None | Some("") | Some("false") => return Ok(None),
            Some("true") => {}
            Some(other) => return Err(ConfigError::BadManaged(other.to_owned())),
        }
        let url = get("AUTONOMIC_BASE_URL")
            .filter(|v| !v.trim().is_empty())
            .ok_or(ConfigError::Missing("AUTONOMIC_BASE_URL"))?;
        let token = get("AUTONOMIC_AUTH_TOKEN").filter(|v| !v.trim().is_empty());
        let file = get("AUTONOMIC_AUTH_TOKEN_FILE")
            .filter(|v| !v.trim().is_empty())
            .map(|v| PathBuf::from(v.trim()));
        let mut cfg = match (token, file) {
            (Some(_), Some(_)) => return Err(ConfigError::TwoTokens),
            (None, None) => return Err(ConfigError::Missing("AUTONOMIC_AUTH_TOKEN")),
            (Some(t), None) => Self::new(url.trim(), SecretToken::new(t.trim())),
            (None, Some(path)) => {
                let t = read_token_file(&path)?;
                let mut cfg = Self::new(url.trim(), t);
                cfg.token_file = Some(path);
                cfg
            }
        };
        if let Some(v) = get("AUTONOMIC_WEDGED_AFTER").filter(|v| !v.trim().is_empty()) {
            cfg.wedged_after =
                crate::duration::parse(&v).map_err(|reason| ConfigError::BadDuration {
                    field: "AUTONOMIC_WEDGED_AFTER",
                    reason,
                })?;
        }
        cfg.ws_url()?;
        Ok(Some(cfg))
    }

    /// The token to dial with now: the file's current content when a token
    /// file is configured, otherwise the token read at start-up.
    pub fn current_token(&self) -> Result<SecretToken, ConfigError> {
        match &self.token_file {
            Some(path) => read_token_file(path),
            None => Ok(self.token.clone()),
        }
    }

    /// The WebSocket URL: the base URL with its scheme mapped to ws/wss and
    /// the connect path appended.
    pub fn ws_url(&self) -> Result<String, ConfigError> {
        let base = self.base_url.trim_end_matches('/');
        let rest = if let Some(r) = base.strip_prefix("https://") {
            format!("wss://{r}")
        } else if let Some(r) = base.strip_prefix("http://") {
            format!("ws://{r}")
        } else if base.starts_with("ws://") || base.starts_with("wss://") {
            base.to_owned()
        } else {
            return Err(ConfigError::BadUrl(self.base_url.clone()));
        };
        Ok(format!("{rest}{}", crate::wire::CONNECT_PATH))
    }
}

/// Reads a token file (trailing whitespace and newlines trimmed). Errors
/// name the file and the problem, never the content.
pub fn read_token_file(path: &std::path::Path) -> Result<SecretToken, ConfigError> {
    let err = |reason: String| ConfigError::TokenFile {
        path: path.display().to_string(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
    // A Secret key is small; refuse to slurp a wrongly mounted large file.
    if meta.len() > 4096 {
        return Err(err(format!(
            "{} bytes; a token file holds at most 4096",
            meta.len()
        )));
    }
    let raw = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let text = String::from_utf8(raw).map_err(|_| err("not UTF-8 text".into()))?;
    let t = text.trim();
    if t.is_empty() {
        return Err(err("empty".into()));
    }
    if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(err(
            "holds more than one word; put only the token in it".into()
        ));
    }
    Ok(SecretToken::new(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn unmanaged_unless_true() {
        assert!(UpstreamConfig::from_lookup(lookup(&[])).unwrap().is_none());
        assert!(
            UpstreamConfig::from_lookup(lookup(&[("AUTONOMIC_MANAGED", "false")]))
                .unwrap()
                .is_none()
        );
        assert_eq!(
            UpstreamConfig::from_lookup(lookup(&[("AUTONOMIC_MANAGED", "yes")])).unwrap_err(),
            ConfigError::BadManaged("yes".into())
        );
    }

    #[test]
    fn managed_needs_url_and_token_and_hides_the_token() {
        assert_eq!(
            UpstreamConfig::from_lookup(lookup(&[("AUTONOMIC_MANAGED", "true")])).unwrap_err(),
            ConfigError::Missing("AUTONOMIC_BASE_URL")
        );
        let cfg = UpstreamConfig::from_lookup(lookup(&[
            ("AUTONOMIC_MANAGED", "true"),
            ("AUTONOMIC_BASE_URL", "https://cp.example/"),
            ("AUTONOMIC_AUTH_TOKEN", "exo_dt_sekrit"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(cfg.ws_url().unwrap(), "wss://cp.example/api/v1/connect");
        assert!(!format!("{cfg:?}").contains("sekrit"));
        let bad = UpstreamConfig::new("ftp://x", SecretToken::new("t"));
        assert!(bad.ws_url().is_err());
    }

    #[test]
    fn wedged_after_is_a_duration() {
        let base = [
            ("AUTONOMIC_MANAGED", "true"),
            ("AUTONOMIC_BASE_URL", "http://cp:8700"),
            ("AUTONOMIC_AUTH_TOKEN", "t"),
        ];
        let cfg = UpstreamConfig::from_lookup(lookup(&base)).unwrap().unwrap();
        assert_eq!(cfg.wedged_after, Duration::from_secs(90));
        let mut with = base.to_vec();
        with.push(("AUTONOMIC_WEDGED_AFTER", "2m"));
        let cfg = UpstreamConfig::from_lookup(lookup(&with)).unwrap().unwrap();
        assert_eq!(cfg.wedged_after, Duration::from_secs(120));
        with.pop();
        with.push(("AUTONOMIC_WEDGED_AFTER", "soon"));
        let e = UpstreamConfig::from_lookup(lookup(&with)).unwrap_err();
        assert!(e.to_string().starts_with("AUTONOMIC_WEDGED_AFTER: "), "{e}");
    }

    #[test]
    fn token_file_is_read_on_demand_and_never_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "exo_dt_first\n").unwrap();
        let p = path.display().to_string();
        let cfg = UpstreamConfig::from_lookup(lookup(&[
            ("AUTONOMIC_MANAGED", "true"),
            ("AUTONOMIC_BASE_URL", "http://cp:8700"),
            ("AUTONOMIC_AUTH_TOKEN_FILE", &p),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(cfg.token.expose(), "exo_dt_first");
        std::fs::write(&path, "exo_dt_second").unwrap();
        assert_eq!(cfg.current_token().unwrap().expose(), "exo_dt_second");
        std::fs::write(&path, "exo_dt_a exo_dt_b").unwrap();
        let e = cfg.current_token().unwrap_err().to_string();
        assert!(e.contains(&p) && !e.contains("exo_dt_a"), "{e}");
        std::fs::write(&path, "  \n").unwrap();
        assert!(
            cfg.current_token()
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        std::fs::remove_file(&path).unwrap();
        assert!(cfg.current_token().unwrap_err().to_string().contains(&p));
        assert_eq!(
            UpstreamConfig::from_lookup(lookup(&[
                ("AUTONOMIC_MANAGED", "true"),
                ("AUTONOMIC_BASE_URL", "http://cp:8700"),
                ("AUTONOMIC_AUTH_TOKEN", "t"),
                ("AUTONOMIC_AUTH_TOKEN_FILE", &p),
            ]))
            .unwrap_err(),
            ConfigError::TwoTokens
        );
    }
}
