//! The HTTP key actuator's client: a LiteLLM-compatible key server
//! (`/key/info`, `/key/generate`, `/key/delete`), bearer-token
//! authenticated. Answers are shown with anything key-shaped masked; the
//! token is never in a message.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};

use crate::net;

use super::{AccessError, Scopes};

/// How long one call may take, its answer included.
const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// A LiteLLM-compatible key server.
pub struct KeyServer {
    url: String,
    token: String,
    client: net::Client,
}

impl KeyServer {
    pub fn new(url: &str, token: &str) -> Result<Self, AccessError> {
        let client = net::client().map_err(|e| AccessError::Server {
            url: url.to_owned(),
            path: "",
            reason: e.to_string(),
        })?;
        Ok(KeyServer {
            url: url.to_owned(),
            token: token.to_owned(),
            client,
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &'static str,
        query: Option<String>,
        body: Option<serde_json::Value>,
    ) -> Result<(StatusCode, String), AccessError> {
        let fail = |reason: String| AccessError::Server {
            url: self.url.clone(),
            path,
            reason,
        };
        let uri = match query {
            Some(q) => format!("{}{path}?{q}", self.url),
            None => format!("{}{path}", self.url),
        };
        let bytes = body
            .map(|b| serde_json::to_vec(&b).unwrap_or_default())
            .unwrap_or_default();
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| fail(format!("bad request: {e}")))?;
        // An answer that broke off is a failed call: the key actuator's
        // exactly-once record asks `/key/info` before it tries again.
        let answer = net::send(&self.client, req, CALL_DEADLINE)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let (status, body) = (answer.status, answer.body);
        // Only the start of an answer, for the message; never a key.
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        Ok((status, text))
    }

    fn refused(&self, path: &'static str, status: StatusCode, text: &str) -> AccessError {
        let reason = if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            format!("{status}: the actuator's token was refused")
        } else {
            format!("{status}: {}", redact_keys(text))
        };
        AccessError::Server {
            url: self.url.clone(),
            path,
            reason,
        }
    }

    /// Whether the server knows `key`.
    pub async fn exists(&self, key: &str) -> Result<bool, AccessError> {
        let (status, text) = self
            .call(
                Method::GET,
                "/key/info",
                Some(format!("key={}", net::query_value(key))),
                None,
            )
            .await?;
        match status {
            s if s.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            s => Err(self.refused("/key/info", s, &text)),
        }
    }

    /// Registers `key` for `tenant` with its scopes.
    pub async fn generate(
        &self,
        tenant: &str,
        key: &str,
        scopes: &Scopes,
        max_budget: Option<f64>,
    ) -> Result<(), AccessError> {
        let mut body = serde_json::json!({
            "key": key,
            "key_alias": format!("exo/{tenant}/{}", scopes.hash()),
            "models": scopes.models,
            "metadata": {"tenant": tenant, "capabilities": scopes.capabilities, "managed_by": "exo"},
        });
        if let (Some(b), Some(o)) = (max_budget, body.as_object_mut()) {
            o.insert("max_budget".into(), serde_json::json!(b));
        }
        let (status, text) = self
            .call(Method::POST, "/key/generate", None, Some(body))
            .await?;
        if status.is_success() {
            Ok(())
        } else {
            Err(self.refused("/key/generate", status, &text))
        }
    }

    /// Revokes `keys`; a key the server does not know is revoked already.
    pub async fn delete(&self, keys: &[String]) -> Result<(), AccessError> {
        if keys.is_empty() {
            return Ok(());
        }
        let (status, text) = self
            .call(
                Method::POST,
                "/key/delete",
                None,
                Some(serde_json::json!({ "keys": keys })),
            )
            .await?;
        if status.is_success() || status == StatusCode::NOT_FOUND {
            Ok(())
        } else {
            Err(self.refused("/key/delete", status, &text))
        }
    }
}

/// A server's answer with anything shaped like a key masked.
pub(super) fn redact_keys(text: &str) -> String {
    text.split_inclusive(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .map(|w| {
            if w.starts_with("sk-") || w.starts_with("exo-bt-") || w.starts_with("pk-lf-") {
                "[redacted]".to_owned()
                    + &w[w
                        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                        .len()..]
            } else {
                w.to_owned()
            }
        })
        .collect()
}
