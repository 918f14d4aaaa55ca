//! The fleet view across clusters (`GET /api/v1/fleet/rollouts`): every
//! deployment the control plane knows, whether its operator is connected
//! now, and every cluster's Rollouts. Shared by the control plane, which
//! answers it, and `upstream::fleet_view`, which reads it.
//!
//! Guarantees: every deployment is in `clusters`, also one with no
//! Rollouts or one never connected; `online` means a live connection at
//! the time of the answer, judged the same on every replica; a Rollout of
//! an offline cluster is its last known state, so a reader treats it as
//! unknown, never as verified.

use serde::{Deserialize, Serialize};

use super::Resource;

/// The endpoint's path, relative to the control plane's base URL.
pub const FLEET_ROLLOUTS_PATH: &str = "/api/v1/fleet/rollouts";

/// The answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FleetView {
    /// By deployment name.
    pub clusters: Vec<ClusterState>,
    /// By deployment, namespace and name.
    pub rollouts: Vec<FleetRollout>,
}

/// One deployment (one cluster's operator).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterState {
    pub deployment: String,
    /// A live connection right now.
    pub online: bool,
    /// The control plane's receive time of its last frame (RFC 3339);
    /// `None` when it never connected.
    #[serde(default)]
    pub last_seen: Option<String>,
}

/// One Rollout of one cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetRollout {
    pub deployment: String,
    pub resource: Resource,
}

impl FleetRollout {
    /// The wave its spec names (`spec.wave`).
    pub fn wave(&self) -> Option<&str> {
        self.resource.spec.get("wave").and_then(|w| w.as_str())
    }

    /// The tenant it is for: its namespace.
    pub fn tenant(&self) -> &str {
        &self.resource.key.namespace
    }
}

impl FleetView {
    /// A deployment's entry.
    pub fn cluster(&self, deployment: &str) -> Option<&ClusterState> {
        self.clusters.iter().find(|c| c.deployment == deployment)
    }

    /// A tenant's Rollouts, one per cluster that has one.
    pub fn of_tenant<'a>(&'a self, tenant: &'a str) -> impl Iterator<Item = &'a FleetRollout> {
        self.rollouts.iter().filter(move |r| r.tenant() == tenant)
    }

    /// Keeps only the Rollouts of `wave` (the clusters all stay).
    pub fn keep_wave(&mut self, wave: &str) {
        self.rollouts.retain(|r| r.wave() == Some(wave));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ResourceKind;

    fn rollout(dep: &str, ns: &str, wave: &str) -> FleetRollout {
        let mut r = Resource::bare(ResourceKind::Rollout, "rollout", "1");
        r.key.namespace = ns.into();
        r.spec = serde_json::json!({ "wave": wave, "release": "2026.11.1" });
        FleetRollout {
            deployment: dep.into(),
            resource: r,
        }
    }

    #[test]
    fn the_answer_reads_back_and_filters_by_wave() {
        let mut v = FleetView {
            clusters: vec![
                ClusterState {
                    deployment: "eu".into(),
                    online: true,
                    last_seen: Some("2026-01-02T03:04:05Z".into()),
                },
                ClusterState {
                    deployment: "us".into(),
                    online: false,
                    last_seen: None,
                },
            ],
            rollouts: vec![
                rollout("eu", "acme", "canary"),
                rollout("us", "acme", "canary"),
                rollout("eu", "beta", "fleet"),
            ],
        };
        let text = serde_json::to_string(&v).unwrap();
        assert!(
            text.contains(r#""lastSeen":"2026-01-02T03:04:05Z""#),
            "{text}"
        );
        assert!(text.contains(r#""lastSeen":null"#), "{text}");
        assert!(text.contains(r#""kind":"Rollout""#), "{text}");
        let back: FleetView = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        assert_eq!(v.of_tenant("acme").count(), 2);
        assert!(!v.cluster("us").unwrap().online);
        assert!(v.cluster("ap").is_none());
        v.keep_wave("fleet");
        assert_eq!(v.rollouts.len(), 1);
        assert_eq!(v.rollouts[0].tenant(), "beta");
        assert_eq!(v.clusters.len(), 2, "clusters stay");
    }
}
