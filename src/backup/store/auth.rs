//! Who the registry takes us for: the credentials, the challenge learned
//! from its first 401 (`fleet::pin::challenge`: none, Basic, or Bearer
//! through docker's token flow) and the tokens it gave, one per scope.
//! Neither the password, the Basic header nor a token is in any message
//! or Debug output.

use std::sync::Arc;

use hyper::body::{Bytes, Incoming};
use hyper::{Method, Response, StatusCode};

use super::wire::request;
use super::{Repository, StoreError};
use crate::fleet::pin::challenge::{self, Challenge};
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

    pub(super) fn basic_header(&self) -> String {
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

/// What the registry asked for, learned from its first 401.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Auth {
    /// Not asked yet, or never refused: send nothing.
    Open,
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
    },
}

impl Repository {
    /// Sends a request with what the registry asks for; on a first 401,
    /// learns its challenge and sends it once more with that.
    pub(super) async fn call(
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
            .map_err(|e| self.malformed(e))?;
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
            .map_err(|e| self.malformed(e))?;
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
}
