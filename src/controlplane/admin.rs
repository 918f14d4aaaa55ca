//! Admin authentication of the HTTP API and the status page.
//!
//! Admin tokens (`exo_at_` + 64 hex) are created by `exo control-plane
//! admin-token create`, printed once, and stored only as their SHA-256 like
//! deployment tokens; `serve --admin-token-file` adds one more, kept in
//! memory as its hash. Guarantees:
//! - Once any admin token exists (in the database or given by file; a
//!   revoked one still counts, so revoking the last locks the API), every
//!   route except `/healthz` and the operators' WebSocket endpoint (which
//!   takes deployment tokens) needs one: `Authorization: Bearer <token>`, or
//!   a dashboard session opened with one (`authn`, `session`). A missing or
//!   wrong token gets 401 with a message that says which, never the
//!   presented value.
//! - Without any admin token the API is open, and `serve` then refuses a
//!   non-loopback address unless told `--allow-unauthenticated-api`.
//! - A deployment token is not an admin token (separate table).
//! - An admin token made for one support lane (`admin-token create
//!   --lane`) reaches that lane's API and dashboard page only
//!   ([`Scope`]); anything else is 403, naming the lane.

use std::net::SocketAddr;
use std::path::Path;

pub use super::model::ADMIN_TOKEN_PREFIX;
use super::model::Scope;
use super::store::{Store, StoreError};
use crate::wire::token::hash_token;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("admin token file {path}: {reason}")]
    File { path: String, reason: String },
    #[error(
        "refusing to serve the HTTP API without authentication on {0}: create an admin \
         token (`exo control-plane admin-token create`), pass --admin-token-file, listen on \
         loopback, or pass --allow-unauthenticated-api"
    )]
    Exposed(SocketAddr),
}

/// The server's admin settings: the hash of the `--admin-token-file` token.
#[derive(Clone, Default)]
pub struct AdminAuth {
    file_hash: Option<String>,
}

impl std::fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminAuth")
            .field("token_file", &self.file_hash.is_some())
            .finish()
    }
}

impl AdminAuth {
    /// Reads `--admin-token-file`; errors name the file, never its content.
    pub fn from_file(path: Option<&Path>) -> Result<Self, AdminError> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let err = |reason: String| AdminError::File {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let t = text.trim();
        if t.is_empty() {
            return Err(err("empty".into()));
        }
        if t.len() < 16 || t.chars().any(char::is_whitespace) {
            return Err(err(
                "must hold one token of at least 16 characters and no spaces".into(),
            ));
        }
        Ok(Self {
            file_hash: Some(hash_token(t)),
        })
    }

    /// Whether admin authentication is on: a token file, or any admin
    /// token ever created.
    pub async fn required(&self, store: &Store) -> Result<bool, AdminError> {
        Ok(self.file_hash.is_some() || store.admin_auth_enabled().await?)
    }

    /// Who the admin token with this SHA-256 is (its id; `token-file`
    /// for the file's) and what it may reach now (the file's reaches
    /// everything); `None` when it is not valid.
    pub async fn hash_scope(
        &self,
        store: &Store,
        hash: &str,
    ) -> Result<Option<(String, Scope)>, AdminError> {
        if self.file_hash.as_deref() == Some(hash) {
            return Ok(Some(("token-file".to_owned(), Scope::All)));
        }
        Ok(store.admin_hash_scope(hash).await?)
    }

    /// Refuses an unauthenticated API on a non-loopback address.
    pub async fn check_exposure(
        &self,
        store: &Store,
        listen: SocketAddr,
        allow_unauthenticated: bool,
    ) -> Result<(), AdminError> {
        if self.file_hash.is_some()
            || allow_unauthenticated
            || listen.ip().is_loopback()
            || store.admin_auth_enabled().await?
        {
            return Ok(());
        }
        Err(AdminError::Exposed(listen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::model::AdminTokenInfo;
    use crate::controlplane::test_store::backends;
    use crate::wire::token::SecretToken;

    #[tokio::test]
    async fn admin_tokens_are_hashed_listed_without_secrets_and_revocable() {
        for b in backends().await {
            let store = b.store();
            assert!(!store.admin_auth_enabled().await.unwrap(), "{b}");
            let (info, token) = store.create_admin_token(None).await.unwrap();
            let (second, _) = store.create_admin_token(None).await.unwrap();
            assert!(token.expose().starts_with(ADMIN_TOKEN_PREFIX), "{b}");
            assert!(store.admin_token_valid(&token).await.unwrap(), "{b}");
            assert!(
                !store
                    .admin_token_valid(&SecretToken::new("exo_at_no"))
                    .await
                    .unwrap(),
                "{b}"
            );
            let listed = store.list_admin_tokens().await.unwrap();
            assert_eq!(listed.len(), 2, "{b}");
            assert!(listed.contains(&info) && listed.contains(&second), "{b}");
            let text = format!("{listed:?}");
            assert!(
                !text.contains(&token.expose()[ADMIN_TOKEN_PREFIX.len()..]),
                "{b}"
            );
            store.revoke_admin_token(&info.id).await.unwrap();
            assert!(!store.admin_token_valid(&token).await.unwrap(), "{b}");
            let revoked = |l: &[AdminTokenInfo]| {
                l.iter()
                    .find(|t| t.id == info.id)
                    .and_then(|t| t.revoked_ms)
            };
            let first_revoked = revoked(&store.list_admin_tokens().await.unwrap());
            assert!(first_revoked.is_some(), "{b}");
            // Revoking again is no error and keeps the first time.
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            store.revoke_admin_token(&info.id).await.unwrap();
            assert_eq!(
                revoked(&store.list_admin_tokens().await.unwrap()),
                first_revoked,
                "{b}"
            );
            // Revoking the last token keeps authentication on (locked, not open).
            store.revoke_admin_token(&second.id).await.unwrap();
            assert!(store.admin_auth_enabled().await.unwrap(), "{b}");
            assert!(
                matches!(
                    store.revoke_admin_token("adm_nope").await,
                    Err(StoreError::NoAdminToken(_))
                ),
                "{b}"
            );
            // A deployment token is not an admin token.
            let (_, dep) = store.create_deployment("d").await.unwrap();
            assert!(!store.admin_token_valid(&dep).await.unwrap(), "{b}");
        }
    }

    #[tokio::test]
    async fn exposure_needs_a_token_or_an_explicit_flag() {
        for b in backends().await {
            let store = b.store();
            let open = AdminAuth::default();
            let public: SocketAddr = "0.0.0.0:8700".parse().unwrap();
            let local: SocketAddr = "127.0.0.1:8700".parse().unwrap();
            assert!(
                open.check_exposure(store, local, false).await.is_ok(),
                "{b}"
            );
            assert!(
                matches!(
                    open.check_exposure(store, public, false).await,
                    Err(AdminError::Exposed(_))
                ),
                "{b}"
            );
            assert!(
                open.check_exposure(store, public, true).await.is_ok(),
                "{b}"
            );
            store.create_admin_token(None).await.unwrap();
            assert!(
                open.check_exposure(store, public, false).await.is_ok(),
                "{b}"
            );
        }
    }

    #[tokio::test]
    async fn a_token_file_is_checked_and_never_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("admin");
        std::fs::write(&p, "short words here\n").unwrap();
        let e = AdminAuth::from_file(Some(&p)).unwrap_err().to_string();
        assert!(
            e.contains(&p.display().to_string()) && !e.contains("short"),
            "{e}"
        );
        std::fs::write(&p, "exo_at_0123456789abcdef\n").unwrap();
        let a = AdminAuth::from_file(Some(&p)).unwrap();
        assert_eq!(
            a.file_hash.as_deref(),
            Some(hash_token("exo_at_0123456789abcdef").as_str())
        );
    }
}
