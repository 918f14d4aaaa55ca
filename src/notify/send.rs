//! The thin HTTP edge: one attempt at a rendered delivery, over the one
//! outbound client (`net`) for a `POST`, through the forge's edge
//! (`forge::Gitea`) for a commit status. Whether a failure is worth
//! another attempt is the error's to say.
//!
//! Guarantees: an error names the receiver by what may be shown (a
//! Secret's address only by the Secret's name) and never carries a secret;
//! the answer's body is cut short.

use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request};

use super::payload::{Outgoing, Post};
use crate::forge::{ForgeError, Gitea};
use crate::net;

/// How long one attempt may take, the answer included.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// Why one attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("{to}: {source}")]
    Unreachable {
        to: String,
        #[source]
        source: net::NetError,
    },
    #[error("{to}: HTTP {status}: {body}")]
    Status {
        to: String,
        status: u16,
        body: String,
    },
    #[error("{to}: cannot build the request: {reason}")]
    Request { to: String, reason: String },
    #[error(transparent)]
    Forge(#[from] ForgeError),
}

/// Statuses a later attempt may get past: the receiver's own trouble, a
/// timeout, a rate limit.
fn transient(status: u16) -> bool {
    status >= 500 || status == 408 || status == 429
}

impl SendError {
    /// Whether another attempt may succeed (an unreachable receiver, a
    /// 5xx, 408 or 429); a refusal (other 4xx) will not.
    pub fn retryable(&self) -> bool {
        match self {
            SendError::Unreachable { .. } => true,
            SendError::Status { status, .. } => transient(*status),
            SendError::Request { .. } => false,
            SendError::Forge(e) => match e {
                ForgeError::Unreachable { .. } | ForgeError::Tls { .. } => true,
                ForgeError::Status { status, .. } => transient(*status),
                _ => false,
            },
        }
    }

    /// A bounded label for metrics and Event reasons' notes.
    pub fn category(&self) -> &'static str {
        match self {
            SendError::Unreachable { .. } => "unreachable",
            SendError::Status { .. } | SendError::Forge(ForgeError::Status { .. }) => "refused",
            SendError::Forge(ForgeError::Unreachable { .. }) => "unreachable",
            SendError::Request { .. } | SendError::Forge(_) => "invalid",
        }
    }
}

/// The start of an answer, for a message.
fn shown(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        .trim()
        .to_owned()
}

/// One attempt at `out`.
pub async fn attempt(client: &net::Client, out: &Outgoing) -> Result<(), SendError> {
    match out {
        Outgoing::Post(p) => post(client, p).await,
        Outgoing::Status {
            dialect,
            settings,
            repo,
            sha,
            body,
        } => {
            let forge = Gitea::with_client(settings, *dialect, client.clone());
            Ok(forge.set_status(repo, sha, body).await?)
        }
    }
}

async fn post(client: &net::Client, p: &Post) -> Result<(), SendError> {
    let to = p.address.to_string();
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(p.address.url())
        .header("user-agent", concat!("exo/", env!("CARGO_PKG_VERSION")));
    for (name, value) in &p.headers {
        req = req.header(*name, value);
    }
    let req = req
        .body(Full::new(Bytes::from(p.body.clone())))
        .map_err(|e| SendError::Request {
            to: to.clone(),
            // The builder's error names the part it refused, not its value.
            reason: e.to_string(),
        })?;
    let answer =
        net::send(client, req, DEADLINE)
            .await
            .map_err(|source| SendError::Unreachable {
                to: to.clone(),
                source,
            })?;
    if answer.status.is_success() {
        return Ok(());
    }
    Err(SendError::Status {
        to,
        status: answer.status.as_u16(),
        body: shown(&answer.body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_failures_are_retried() {
        let status = |status| SendError::Status {
            to: "x".into(),
            status,
            body: String::new(),
        };
        for s in [500, 502, 503, 408, 429] {
            assert!(status(s).retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 410, 422] {
            assert!(!status(s).retryable(), "{s}");
        }
        let down = SendError::Unreachable {
            to: "x".into(),
            source: net::NetError::Unreachable("connection refused".into()),
        };
        assert!(down.retryable());
        assert_eq!(down.category(), "unreachable");
    }
}
