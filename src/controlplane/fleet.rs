//! The fleet view across clusters (`wire::fleet`), answered by any replica
//! from the shared database: the deployments, whether each has a live
//! connection now, and the fleet projection of their Rollouts (written by
//! the holding replica, `ws::fleet`).
//!
//! Guarantees: every deployment is listed, also one with no Rollouts; with
//! replicas, `online` is read from the connection rows (a session held by
//! a replica whose lease is live), so every replica answers alike; on one
//! server it is the live state. A row that no longer parses is left out
//! and logged, never shown half.

use std::collections::HashMap;

use super::App;
use super::model::{DeploymentRow, StoredRollout};
use super::replica::ReplicaError;
use super::store::StoreError;
use crate::wire::fleet::{ClusterState, FleetRollout, FleetView};

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("connection rows: {0}")]
    Replica(#[from] ReplicaError),
}

/// Whether a deployment is connected now, and when its last frame came
/// (ms since the epoch; `None`: never, as far as is known).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Presence {
    pub online: bool,
    pub last_frame_ms: Option<u64>,
}

fn rfc3339(ms: u64) -> Option<String> {
    let ms = i64::try_from(ms).ok()?;
    k8s_openapi::jiff::Timestamp::from_millisecond(ms)
        .ok()
        .map(|t| t.to_string())
}

/// The answer from what was read: every deployment (by name) with its
/// presence, and the rows in their stored order.
pub fn assemble(
    deployments: &[DeploymentRow],
    presence: &HashMap<String, Presence>,
    rows: Vec<StoredRollout>,
) -> FleetView {
    let mut clusters: Vec<ClusterState> = deployments
        .iter()
        .map(|d| {
            let p = presence.get(&d.name).copied().unwrap_or_default();
            ClusterState {
                deployment: d.name.clone(),
                online: p.online,
                last_seen: p.last_frame_ms.and_then(rfc3339),
            }
        })
        .collect();
    clusters.sort_by(|a, b| a.deployment.cmp(&b.deployment));
    let rollouts = rows
        .into_iter()
        .filter_map(|r| match serde_json::from_str(&r.resource) {
            Ok(resource) => Some(FleetRollout {
                deployment: r.deployment,
                resource,
            }),
            Err(e) => {
                tracing::warn!(deployment = %r.deployment, namespace = %r.namespace, name = %r.name, error = %e, "fleet row does not parse; left out");
                None
            }
        })
        .collect();
    FleetView { clusters, rollouts }
}

/// Who is connected now: the connection rows with replicas, the live
/// state on one server.
async fn presence(app: &App) -> Result<HashMap<String, Presence>, FleetError> {
    if let Some(r) = &app.replica {
        return Ok(r
            .holdings(None)
            .await?
            .into_iter()
            .map(|h| {
                let p = Presence {
                    online: h.connected(),
                    last_frame_ms: Some(h.last_frame_ms),
                };
                (h.deployment, p)
            })
            .collect());
    }
    Ok(app
        .live
        .known()
        .into_iter()
        .map(|(name, online, _, _)| {
            let last_frame_ms = app.live.view(&name).last_frame_at_ms;
            (
                name,
                Presence {
                    online,
                    last_frame_ms,
                },
            )
        })
        .collect())
}

/// The fleet view, one tenant's Rollouts when `tenant` is given and one
/// wave's when `wave` is.
pub async fn view(
    app: &App,
    tenant: Option<&str>,
    wave: Option<&str>,
) -> Result<FleetView, FleetError> {
    let deployments = app.store.list_deployments().await?;
    let presence = presence(app).await?;
    let rows = app.store.fleet_rollouts(tenant).await?;
    let mut v = assemble(&deployments, &presence, rows);
    if let Some(w) = wave {
        v.keep_wave(w);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Resource, ResourceKind};

    fn stored(dep: &str, ns: &str, json: String) -> StoredRollout {
        StoredRollout {
            deployment: dep.into(),
            namespace: ns.into(),
            name: "rollout".into(),
            resource: json,
            updated_ms: 1,
        }
    }

    #[test]
    fn every_deployment_is_listed_and_a_broken_row_left_out() {
        let deps: Vec<DeploymentRow> = ["us", "eu", "ap"]
            .iter()
            .map(|n| DeploymentRow {
                name: (*n).into(),
                created_ms: 0,
            })
            .collect();
        let presence = HashMap::from([
            (
                "eu".to_owned(),
                Presence {
                    online: true,
                    last_frame_ms: Some(1_767_323_045_000),
                },
            ),
            (
                "us".to_owned(),
                Presence {
                    online: false,
                    last_frame_ms: Some(0),
                },
            ),
        ]);
        let mut r = Resource::bare(ResourceKind::Rollout, "rollout", "4");
        r.key.namespace = "acme".into();
        let rows = vec![
            stored("eu", "acme", serde_json::to_string(&r).unwrap()),
            stored("us", "acme", "{not json".into()),
        ];
        let v = assemble(&deps, &presence, rows);
        let names: Vec<_> = v.clusters.iter().map(|c| c.deployment.as_str()).collect();
        assert_eq!(names, ["ap", "eu", "us"]);
        let ap = v.cluster("ap").unwrap();
        assert!(!ap.online && ap.last_seen.is_none(), "never connected");
        let eu = v.cluster("eu").unwrap();
        assert!(eu.online);
        assert_eq!(eu.last_seen.as_deref(), Some("2026-01-02T03:04:05Z"));
        assert_eq!(
            v.cluster("us").unwrap().last_seen.as_deref(),
            Some("1970-01-01T00:00:00Z")
        );
        assert_eq!(v.rollouts.len(), 1);
        assert_eq!(v.rollouts[0].deployment, "eu");
        assert_eq!(v.rollouts[0].resource, r);
    }
}
