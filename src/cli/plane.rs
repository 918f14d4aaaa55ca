//! Reaching the control plane from the CLI (`exo attach`, `exo fs`,
//! `exo support`): the flags, the admin token, the WebSocket dial and the
//! JSON API call, with refusals turned into plain messages.

use clap::Args;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

#[derive(Debug, Clone, Args)]
pub struct PlaneArgs {
    /// Base URL of the control plane.
    #[arg(
        long,
        env = "EXO_CONTROL_PLANE",
        default_value = "http://127.0.0.1:8700",
        global = true
    )]
    pub control_plane: String,
    /// File holding the control plane's admin token (or set
    /// EXO_CP_ADMIN_TOKEN); needed once the control plane has one.
    #[arg(long, env = "EXO_CP_ADMIN_TOKEN_FILE", global = true)]
    pub admin_token_file: Option<std::path::PathBuf>,
}

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Why the control plane could not be reached; the token is never part of
/// a message.
#[derive(Debug, thiserror::Error)]
pub enum PlaneError {
    #[error("admin token file {}: {source}", path.display())]
    TokenFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("admin token file {} is empty", .0.display())]
    EmptyTokenFile(std::path::PathBuf),
    #[error("the admin token is not a valid header value")]
    TokenHeader,
    #[error("bad control-plane URL {base}: {source}")]
    Url {
        base: String,
        #[source]
        source: tokio_tungstenite::tungstenite::Error,
    },
    #[error("refused by the control plane (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
    #[error("{base}: {source}")]
    Http {
        base: String,
        #[source]
        source: crate::net::NetError,
    },
    #[error("{base} answered {status} with a body that is not JSON")]
    NotJson { base: String, status: u16 },
    #[error("connect {base}: {source}")]
    Connect {
        base: String,
        #[source]
        source: tokio_tungstenite::tungstenite::Error,
    },
}

impl PlaneArgs {
    /// The admin token from `--admin-token-file` or `EXO_CP_ADMIN_TOKEN`.
    pub fn admin_token(&self) -> Result<Option<String>, PlaneError> {
        if let Some(p) = &self.admin_token_file {
            let t = std::fs::read_to_string(p).map_err(|source| PlaneError::TokenFile {
                path: p.clone(),
                source,
            })?;
            let t = t.trim();
            if t.is_empty() {
                return Err(PlaneError::EmptyTokenFile(p.clone()));
            }
            return Ok(Some(t.to_owned()));
        }
        Ok(std::env::var("EXO_CP_ADMIN_TOKEN")
            .ok()
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty()))
    }

    /// `ws(s)://` form of the base URL, without a trailing `/`.
    pub fn ws_base(&self) -> String {
        let base = self.control_plane.trim_end_matches('/');
        if let Some(r) = base.strip_prefix("https://") {
            format!("wss://{r}")
        } else if let Some(r) = base.strip_prefix("http://") {
            format!("ws://{r}")
        } else {
            base.to_owned()
        }
    }

    /// Dials `{base}{path_and_query}` with the admin token. An HTTP
    /// refusal (offline deployment, missing capability, bad token) comes
    /// back as its status and the server's message.
    pub async fn dial(&self, path_and_query: &str) -> Result<Socket, PlaneError> {
        let base = self.ws_base();
        let url = format!("{base}{path_and_query}");
        let mut req = url
            .as_str()
            .into_client_request()
            .map_err(|source| PlaneError::Url {
                base: base.clone(),
                source,
            })?;
        if let Some(t) = self.admin_token()? {
            let v = format!("Bearer {t}")
                .parse()
                .map_err(|_| PlaneError::TokenHeader)?;
            req.headers_mut().insert("authorization", v);
        }
        let cfg = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(4 << 20));
        let (ws, _) = tokio_tungstenite::connect_async_with_config(req, Some(cfg), false)
            .await
            .map_err(|e| match e {
                tokio_tungstenite::tungstenite::Error::Http(r) => {
                    let body = r
                        .body()
                        .as_ref()
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                        .unwrap_or_default();
                    let msg = serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v.get("error").and_then(|e| e.as_str().map(str::to_owned)))
                        .unwrap_or(body);
                    PlaneError::Refused {
                        status: r.status().as_u16(),
                        message: msg,
                    }
                }
                source => PlaneError::Connect {
                    base: base.clone(),
                    source,
                },
            })?;
        Ok(ws)
    }
}

/// How long one API call may take, the answer included.
const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

impl PlaneArgs {
    /// Calls the JSON API: `method path` with the admin token and an
    /// optional JSON body. A refusal (4xx, 5xx) comes back as its status
    /// and the server's message; the token is never part of an error.
    pub async fn call(
        &self,
        method: hyper::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, PlaneError> {
        use http_body_util::Full;
        use hyper::body::Bytes;
        let base = self.control_plane.trim_end_matches('/').to_owned();
        let net = |source| PlaneError::Http {
            base: base.clone(),
            source,
        };
        let client = if base.starts_with("https://") {
            crate::net::client()
        } else {
            crate::net::plain_client()
        }
        .map_err(net)?;
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("{base}{path}"))
            .header("accept", "application/json");
        if let Some(t) = self.admin_token()? {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let payload = match body {
            Some(v) => {
                req = req.header("content-type", "application/json");
                Bytes::from(v.to_string())
            }
            None => Bytes::new(),
        };
        let req = req
            .body(Full::new(payload))
            .map_err(|_| PlaneError::TokenHeader)?;
        let answer = crate::net::send(&client, req, CALL_DEADLINE)
            .await
            .map_err(net)?;
        let status = answer.status.as_u16();
        let value: Option<serde_json::Value> = serde_json::from_slice(&answer.body).ok();
        if !answer.status.is_success() {
            let message = value
                .as_ref()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(&answer.body).trim().to_owned());
            return Err(PlaneError::Refused { status, message });
        }
        value.ok_or(PlaneError::NotJson { base, status })
    }
}

/// Percent-encodes a URL path segment or query value.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
