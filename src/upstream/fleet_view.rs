//! Reads the fleet view across clusters from the control plane
//! (`GET /api/v1/fleet/rollouts`, `wire::fleet`): the CLI's gates with an
//! admin token, an operator for one tenant with its deployment token.
//!
//! Guarantees: one call within [`DEADLINE`], its answer included; an error
//! names the URL (with the query) and, for a refusal, the status and the
//! server's message; the token is sent in the `Authorization` header only,
//! never in a URL, a message or a `Debug`.

use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request};

use crate::net::{self, NetError};
use crate::wire::fleet::{FLEET_ROLLOUTS_PATH, FleetView};
use crate::wire::token::SecretToken;

/// How long one read may take, its answer included.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The largest answer read (100 clusters of 100 tenants is far below).
const MAX_BODY: usize = 64 << 20;

/// Longest part of a refusal's body quoted in a message.
const QUOTED: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum FleetViewError {
    #[error("control plane URL {0:?} is not http(s):// or ws(s)://")]
    BadUrl(String),
    #[error("{url}: {source}")]
    Net {
        url: String,
        #[source]
        source: NetError,
    },
    #[error("{url}: {status}: {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    #[error("{url}: the answer is not a fleet view: {source}")]
    Parse {
        url: String,
        #[source]
        source: serde_json::Error,
    },
}

/// The endpoint's URL under `base` (`ws`/`wss` taken as `http`/`https`,
/// the operator's upstream URL), with the tenant as a query.
pub fn url(base: &str, tenant: Option<&str>) -> Result<String, FleetViewError> {
    let b = base.trim().trim_end_matches('/');
    let http = if let Some(r) = b.strip_prefix("wss://") {
        format!("https://{r}")
    } else if let Some(r) = b.strip_prefix("ws://") {
        format!("http://{r}")
    } else if b.starts_with("https://") || b.starts_with("http://") {
        b.to_owned()
    } else {
        return Err(FleetViewError::BadUrl(base.to_owned()));
    };
    Ok(match tenant {
        Some(t) => format!("{http}{FLEET_ROLLOUTS_PATH}?tenant={}", net::query_value(t)),
        None => format!("{http}{FLEET_ROLLOUTS_PATH}"),
    })
}

/// The server's message in a refusal: its JSON `error`, or the start of
/// the body.
fn message(body: &[u8]) -> String {
    let text = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    crate::wire::clip_marked(text.trim(), QUOTED).into_owned()
}

/// Reads the fleet view (one tenant's Rollouts when `tenant` is given).
pub async fn fetch(
    base_url: &str,
    token: &SecretToken,
    tenant: Option<&str>,
) -> Result<FleetView, FleetViewError> {
    let url = url(base_url, tenant)?;
    let client = net::client().map_err(|source| FleetViewError::Net {
        url: url.clone(),
        source,
    })?;
    fetch_with(&client, &url, token).await
}

/// [`fetch`] over a caller's client, at a URL made by [`url`].
pub async fn fetch_with(
    client: &net::Client,
    url: &str,
    token: &SecretToken,
) -> Result<FleetView, FleetViewError> {
    let net_err = |source| FleetViewError::Net {
        url: url.to_owned(),
        source,
    };
    let req = Request::builder()
        .method(Method::GET)
        .uri(url)
        .header("authorization", format!("Bearer {}", token.expose()))
        .header("accept", "application/json")
        .body(Full::new(Bytes::new()))
        .map_err(|_| FleetViewError::BadUrl(url.to_owned()))?;
    let answer = net::send_limited(client, req, DEADLINE, MAX_BODY)
        .await
        .map_err(net_err)?;
    if !answer.status.is_success() {
        return Err(FleetViewError::Refused {
            url: url.to_owned(),
            status: answer.status.as_u16(),
            message: message(&answer.body),
        });
    }
    serde_json::from_slice(&answer.body).map_err(|source| FleetViewError::Parse {
        url: url.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_take_the_upstream_forms_and_quote_the_tenant() {
        assert_eq!(
            url("https://cp.example/", None).unwrap(),
            "https://cp.example/api/v1/fleet/rollouts"
        );
        assert_eq!(
            url("wss://cp.example", Some("acme")).unwrap(),
            "https://cp.example/api/v1/fleet/rollouts?tenant=acme"
        );
        assert_eq!(
            url("ws://127.0.0.1:8700", Some("a b&c")).unwrap(),
            "http://127.0.0.1:8700/api/v1/fleet/rollouts?tenant=a%20b%26c"
        );
        assert!(matches!(
            url("cp.example", None),
            Err(FleetViewError::BadUrl(_))
        ));
    }

    #[test]
    fn a_refusal_quotes_the_servers_message_never_the_token() {
        assert_eq!(
            message(br#"{"error":"a deployment token reads one tenant's Rollouts"}"#),
            "a deployment token reads one tenant's Rollouts"
        );
        assert_eq!(message(b"plain text\n"), "plain text");
        assert!(message(&[b'x'; 5000]).len() <= QUOTED);
        let e = FleetViewError::Refused {
            url: url("http://h", None).unwrap(),
            status: 403,
            message: "no".into(),
        };
        assert_eq!(e.to_string(), "http://h/api/v1/fleet/rollouts: 403: no");
    }

    /// Nothing is listening: the error names the URL, and neither it nor
    /// its `Debug` holds the token.
    #[tokio::test]
    async fn an_unreachable_server_is_named_without_the_token() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let token = SecretToken::new("exo_dt_0123456789abcdef");
        let e = fetch(&format!("http://{addr}"), &token, Some("acme"))
            .await
            .unwrap_err();
        let shown = format!("{e} {e:?}");
        assert!(
            shown.contains(&format!("http://{addr}/api/v1/fleet/rollouts?tenant=acme")),
            "{shown}"
        );
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
    }
}

/// What an operator reads the fleet view with: its upstream URL and its
/// deployment token (the file's current content when it has one, so a
/// rotated token is used at once). The token is in no message or `Debug`.
#[derive(Clone)]
pub struct Access {
    pub base_url: String,
    pub token: SecretToken,
    pub token_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("base_url", &self.base_url)
            .field("token", &"<redacted>")
            .finish()
    }
}

impl Access {
    pub fn of(cfg: &super::UpstreamConfig) -> Self {
        Access {
            base_url: cfg.base_url.clone(),
            token: cfg.token.clone(),
            token_file: cfg.token_file.clone(),
        }
    }

    /// One tenant's Rollouts in every cluster (a deployment token may read
    /// no more).
    pub async fn tenant(&self, tenant: &str) -> Result<FleetView, FleetViewError> {
        let token = match &self.token_file {
            Some(p) => match std::fs::read_to_string(p) {
                Ok(t) if !t.trim().is_empty() => SecretToken::new(t.trim()),
                _ => self.token.clone(),
            },
            None => self.token.clone(),
        };
        fetch(&self.base_url, &token, Some(tenant)).await
    }
}
