//! Deployments and their tokens, and admin tokens: metadata only, never a
//! token's clear text nor its hash.

use serde::Serialize;

use crate::wire::fleet::FLEET_ROLLOUTS_PATH;

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
    /// The one support lane it may read and act on; `None`: everything.
    pub lane: Option<String>,
}

impl AdminTokenInfo {
    pub fn scope(&self) -> Scope {
        Scope::of(self.lane.clone())
    }
}

/// What an admin token (or a session opened with one) may reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "lane")]
pub enum Scope {
    /// The whole API and dashboard.
    All,
    /// One support lane: its incidents (`/api/v1/lanes/{lane}/…`), its
    /// dashboard page (`/lanes/{lane}`) and nothing else.
    Lane(String),
    /// An operator's deployment token (this deployment's): the fleet view
    /// of one tenant ([`FLEET_ROLLOUTS_PATH`] with `?tenant=`, which its
    /// handler checks) and nothing else.
    Deployment(String),
}

impl Scope {
    /// The scope a stored lane column means.
    pub fn of(lane: Option<String>) -> Self {
        lane.map_or(Scope::All, Scope::Lane)
    }

    pub fn allows_lane(&self, lane: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Lane(l) => l == lane,
            Scope::Deployment(_) => false,
        }
    }

    /// Whether a request for `path` is inside the scope. A lane token
    /// reaches its lane's API and page, the lane list (which shows it its
    /// lane only), the root (sent on to its lane's page) and logout.
    pub fn allows_path(&self, path: &str) -> bool {
        let lane = match self {
            Scope::All => return true,
            Scope::Deployment(_) => return path == FLEET_ROLLOUTS_PATH,
            Scope::Lane(lane) => lane,
        };
        let under = |prefix: &str| {
            path.strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix(lane.as_str()))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        matches!(path, "/" | "/logout" | "/api/v1/lanes")
            || under("/api/v1/lanes/")
            || under("/lanes/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_scope_reaches_its_lane_only() {
        let s = Scope::Lane("acme-desk".into());
        for ok in [
            "/",
            "/logout",
            "/api/v1/lanes",
            "/api/v1/lanes/acme-desk",
            "/api/v1/lanes/acme-desk/incidents/inc-1/ack",
            "/lanes/acme-desk",
        ] {
            assert!(s.allows_path(ok), "{ok}");
        }
        for no in [
            "/api/v1/lanes/acme-desk2/incidents",
            "/api/v1/lanes/other",
            "/lanes/acme",
            "/api/v1/deployments",
            "/api/v1/events",
            "/deployments/d",
            "/status",
        ] {
            assert!(!s.allows_path(no), "{no}");
        }
        assert!(s.allows_lane("acme-desk") && !s.allows_lane("other"));
        assert!(Scope::All.allows_path("/api/v1/deployments"));
        let d = Scope::Deployment("eu-west".into());
        assert!(d.allows_path("/api/v1/fleet/rollouts"));
        for no in [
            "/",
            "/api/v1/deployments",
            "/api/v1/deployments/eu-west",
            "/api/v1/events",
            "/api/v1/lanes",
            "/api/v1/fleet/rollouts/x",
        ] {
            assert!(!d.allows_path(no), "{no}");
        }
        assert!(!d.allows_lane("any"));
        assert!(Scope::All.allows_lane("any"));
    }
}
