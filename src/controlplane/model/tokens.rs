//! Deployments and their tokens, and admin tokens: metadata only, never a
//! token's clear text nor its hash.

use serde::Serialize;

/// Prefix of admin tokens, distinct from deployment tokens (`exo_dt_`).
pub const ADMIN_TOKEN_PREFIX: &str = "exo_at_";

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeploymentRow {
    pub name: String,
    pub created_ms: u64,
}

/// A token's metadata; never its clear text nor its hash.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TokenInfo {
    pub id: String,
    pub deployment: String,
    pub created_ms: u64,
    pub expires_ms: Option<u64>,
    pub revoked_ms: Option<u64>,
}

impl TokenInfo {
    pub fn is_valid_at(&self, now: u64) -> bool {
        self.revoked_ms.is_none() && self.expires_ms.is_none_or(|e| now < e)
    }

    /// Who the token authenticates at `now`; `None` once revoked or expired.
    pub fn authenticates(self, now: u64) -> Option<Authenticated> {
        self.is_valid_at(now).then_some(Authenticated {
            deployment: self.deployment,
            token_id: self.id,
        })
    }
}

/// Who a valid token authenticates.
#[derive(Debug, Clone, PartialEq)]
pub struct Authenticated {
    pub deployment: String,
    pub token_id: String,
}

/// An admin token's metadata; never the token nor its hash.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AdminTokenInfo {
    pub id: String,
    pub created_ms: u64,
    pub revoked_ms: Option<u64>,
}
