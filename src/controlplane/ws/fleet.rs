//! What a connection writes into the fleet-wide projection of Rollouts
//! (`store`'s `fleet_rollouts`), so that every replica can answer
//! `GET /api/v1/fleet/rollouts` from the database.
//!
//! Guarantees: a completed snapshot makes the deployment's rows what the
//! resource view holds then (deltas received during the snapshot
//! included), and a Rollout delta changes one row; the write follows the
//! view's own, in the order of the connection's frames. A failed write is
//! repaired by the next Rollout frame of the connection, which then
//! writes the whole set again from the view.

use tracing::warn;

use super::Session;
use crate::controlplane::model::RolloutRow;
use crate::wire::{Delta, DeltaOp, Resource, ResourceKind};

/// A Rollout's row, the wire `Resource` as JSON; `None` for other kinds.
pub fn row(r: &Resource) -> Option<RolloutRow> {
    if r.key.kind != ResourceKind::Rollout {
        return None;
    }
    let resource = serde_json::to_string(r).ok()?;
    Some(RolloutRow {
        namespace: r.key.namespace.clone(),
        name: r.key.name.clone(),
        resource,
    })
}

/// What a delta asks of the projection: `None` when it is not a Rollout's.
pub fn change(d: &Delta) -> Option<(String, String, Option<String>)> {
    if d.resource.key.kind != ResourceKind::Rollout {
        return None;
    }
    let json = match d.op {
        DeltaOp::Upsert => Some(row(&d.resource)?.resource),
        DeltaOp::Remove => None,
    };
    Some((
        d.resource.key.namespace.clone(),
        d.resource.key.name.clone(),
        json,
    ))
}

impl Session {
    /// After a snapshot's last chunk: the view's Rollouts replace the
    /// deployment's rows.
    pub(super) async fn project_all(&mut self) {
        let dep = self.auth.deployment.clone();
        // Cloned under the view's lock, encoded outside it.
        let Some(rollouts) = self.app.live.with_session(&dep, &self.session, |v| {
            v.resources()
                .filter(|r| r.key.kind == ResourceKind::Rollout)
                .cloned()
                .collect::<Vec<_>>()
        }) else {
            return; // evicted meanwhile
        };
        let rows: Vec<RolloutRow> = rollouts.iter().filter_map(row).collect();
        match self
            .app
            .store
            .replace_rollouts(&dep, &self.session, &rows)
            .await
        {
            Ok(_) => self.fleet_dirty = false,
            Err(e) => {
                self.fleet_dirty = true;
                warn!(deployment = %dep, error = %e, "fleet projection write failed; rewritten at the next Rollout frame");
            }
        }
    }

    /// After a delta the view took: one row, or the whole set again when
    /// an earlier write failed.
    pub(super) async fn project_one(&mut self, change: (String, String, Option<String>)) {
        if self.fleet_dirty {
            return self.project_all().await;
        }
        let dep = self.auth.deployment.clone();
        let (namespace, name, json) = change;
        if let Err(e) = self
            .app
            .store
            .put_rollout(&dep, &self.session, &namespace, &name, json.as_deref())
            .await
        {
            self.fleet_dirty = true;
            warn!(deployment = %dep, error = %e, "fleet projection write failed; rewritten at the next Rollout frame");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(kind: ResourceKind, op: DeltaOp) -> Delta {
        let mut r = Resource::bare(kind, "rollout", "7");
        r.key.namespace = "acme".into();
        r.spec = serde_json::json!({"wave": "canary"});
        Delta {
            seq: 1,
            op,
            resource: r,
        }
    }

    #[test]
    fn only_rollouts_reach_the_projection() {
        assert_eq!(change(&delta(ResourceKind::Agent, DeltaOp::Upsert)), None);
        assert!(row(&delta(ResourceKind::Pod, DeltaOp::Upsert).resource).is_none());
        let (ns, name, json) = change(&delta(ResourceKind::Rollout, DeltaOp::Upsert)).unwrap();
        assert_eq!((ns.as_str(), name.as_str()), ("acme", "rollout"));
        let back: Resource = serde_json::from_str(&json.unwrap()).unwrap();
        assert_eq!(back, delta(ResourceKind::Rollout, DeltaOp::Upsert).resource);
        let (_, _, removed) = change(&delta(ResourceKind::Rollout, DeltaOp::Remove)).unwrap();
        assert_eq!(removed, None);
    }
}
