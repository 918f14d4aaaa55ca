//! `--control-plane URL` for `exo release status|promote|rollout|rollback`:
//! every cluster's Rollouts through the control plane's fleet view
//! (`GET /api/v1/fleet/rollouts`), so a fleet that spans clusters is gated
//! on every placed (tenant, cluster) pair ([`crate::rollout::gates::pairs`]).
//! Without the flag the verbs read the kubeconfig's cluster, which for a
//! fleet with `clusters/` is refused: one cluster cannot vouch for the
//! others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use clap::Args;

use crate::cli::exit;
use crate::crd::Rollout;
use crate::fleet::Fleet;
use crate::fleet::cluster::Placed;
use crate::release::WaveName;
pub use crate::rollout::gates::pairs::to_rollout;
use crate::rollout::gates::pairs::{ClusterRollouts, Pairs, from_view};
use crate::wire::fleet::FleetView;
use crate::wire::token::SecretToken;

#[derive(Debug, Clone, Args, Default)]
pub struct PlaneArg {
    /// Read every cluster's Rollouts through the control plane at this URL
    /// and gate on all of them (a fleet that spans clusters). Without it,
    /// the kubeconfig's cluster is read.
    #[arg(long = "control-plane", value_name = "URL")]
    pub control_plane: Option<String>,
    /// File holding the control plane's admin token (or set
    /// EXO_CP_ADMIN_TOKEN).
    #[arg(long, env = "EXO_CP_ADMIN_TOKEN_FILE", requires = "control_plane")]
    pub admin_token_file: Option<PathBuf>,
}

/// The control plane to read the fleet view from.
pub struct Plane {
    base: String,
    token: SecretToken,
}

impl PlaneArg {
    /// The plane to read, when `--control-plane` is given; `verb` starts
    /// the messages.
    pub fn plane(&self, verb: &str) -> Result<Option<Plane>, u8> {
        let Some(base) = &self.control_plane else {
            return Ok(None);
        };
        let token = match &self.admin_token_file {
            Some(p) => std::fs::read_to_string(p)
                .map_err(|e| {
                    eprintln!("{verb}: admin token file {}: {e}", p.display());
                    exit::UNUSABLE
                })?
                .trim()
                .to_owned(),
            None => std::env::var("EXO_CP_ADMIN_TOKEN")
                .unwrap_or_default()
                .trim()
                .to_owned(),
        };
        if token.is_empty() {
            eprintln!(
                "{verb}: --control-plane needs the control plane's admin token: --admin-token-file or EXO_CP_ADMIN_TOKEN"
            );
            return Err(exit::UNUSABLE);
        }
        Ok(Some(Plane {
            base: base.clone(),
            token: SecretToken::new(token),
        }))
    }
}

/// Refuses a gate read from one cluster when the fleet spans several.
pub fn one_cluster_cannot_vouch(fleet: &Fleet, verb: &str) -> Result<(), u8> {
    if fleet.spans_clusters() {
        eprintln!(
            "{verb}: the fleet places its tenants on clusters (clusters/): the kubeconfig's cluster cannot vouch for the others; read them all with --control-plane URL"
        );
        return Err(exit::UNUSABLE);
    }
    Ok(())
}

/// Each cluster's Rollouts of `fleet`'s tenants, and the offline ones'
/// last contact. Pure.
pub fn clusters_of(
    view: &FleetView,
    fleet: &Fleet,
) -> (Vec<ClusterRollouts>, BTreeMap<String, String>) {
    from_view(view, |r| {
        fleet.tenants.contains_key(&r.spec.tenant)
            && r.metadata.namespace.as_deref() == Some(r.spec.tenant.as_str())
    })
}

/// The pairs of `wave`'s tenants (from git): each with the clusters it is
/// placed on; in a single-cluster fleet, every cluster the control plane
/// knows (each runs every tenant). Pure.
pub fn placed_pairs(
    fleet: &Fleet,
    wave: WaveName,
    known: &[ClusterRollouts],
) -> Result<BTreeMap<String, BTreeSet<String>>, crate::rollout::engine::Error> {
    let everywhere: BTreeSet<String> = known.iter().map(|c| c.cluster.clone()).collect();
    Ok(crate::rollout::engine::assign(fleet)?
        .into_iter()
        .filter(|(_, w, _)| *w == wave)
        .filter_map(|(tenant, _, _)| {
            let t = fleet.tenants.get(&tenant)?;
            let on = match fleet.placed(t) {
                Placed::Everywhere => everywhere.clone(),
                Placed::On(on) => on,
            };
            Some((tenant, on))
        })
        .collect())
}

impl Plane {
    /// The fleet view, or a message.
    pub async fn view(&self, verb: &str) -> Result<FleetView, u8> {
        crate::upstream::fleet_view::fetch(&self.base, &self.token, None)
            .await
            .map_err(|e| {
                eprintln!("{verb}: cannot read the fleet view: {e}");
                exit::UNUSABLE
            })
    }

    /// What the gate of the wave after `wave` reads.
    pub async fn pairs(&self, fleet: &Fleet, wave: WaveName, verb: &str) -> Result<Pairs, u8> {
        let view = self.view(verb).await?;
        let (clusters, last_seen) = clusters_of(&view, fleet);
        let placed = placed_pairs(fleet, wave, &clusters).map_err(|e| {
            eprintln!("{verb}: {e}");
            exit::UNUSABLE
        })?;
        Ok(Pairs {
            placed,
            clusters,
            last_seen,
        })
    }

    /// Every cluster's Rollouts of `fleet`'s tenants, together.
    pub async fn all_rollouts(&self, fleet: &Fleet, verb: &str) -> Result<Vec<Rollout>, u8> {
        let view = self.view(verb).await?;
        Ok(clusters_of(&view, fleet)
            .0
            .into_iter()
            .flat_map(|c| c.rollouts)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::fleet::{ClusterState, FleetRollout};
    use crate::wire::{Resource, ResourceKey, ResourceKind};

    fn wire(deployment: &str, tenant: &str, phase: &str) -> FleetRollout {
        FleetRollout {
            deployment: deployment.into(),
            resource: Resource {
                key: ResourceKey {
                    kind: ResourceKind::Rollout,
                    namespace: tenant.into(),
                    name: "release".into(),
                },
                uid: "u1".into(),
                resource_version: "7".into(),
                generation: Some(2),
                created: None,
                phase: Some(phase.into()),
                labels: Default::default(),
                spec: serde_json::json!({"tenant": tenant, "wave": "canary", "release": "r2", "commit": "c", "desiredHash": "h"}),
                status: serde_json::json!({"phase": phase, "observedGeneration": 2, "desiredHash": "h", "release": "r2"}),
            },
        }
    }

    #[test]
    fn the_view_becomes_rollouts_per_cluster() {
        let fleet = crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let view = FleetView {
            clusters: vec![
                ClusterState {
                    deployment: "eu".into(),
                    online: true,
                    last_seen: Some("2026-12-07T04:00:00Z".into()),
                },
                ClusterState {
                    deployment: "us".into(),
                    online: false,
                    last_seen: None,
                },
            ],
            rollouts: vec![
                wire("eu", "acme", "Verified"),
                wire("us", "acme", "Progressing"),
                wire("eu", "not-a-tenant", "Verified"),
            ],
        };
        let (clusters, last_seen) = clusters_of(&view, &fleet);
        assert_eq!(clusters.len(), 2);
        assert_eq!(
            clusters[0].rollouts.len(),
            1,
            "a Rollout of no fleet tenant is left out"
        );
        let r = &clusters[0].rollouts[0];
        assert_eq!(r.spec.tenant, "acme");
        assert_eq!(r.metadata.generation, Some(2));
        assert_eq!(
            r.current_status().and_then(|s| s.phase),
            Some(crate::crd::RolloutPhase::Verified)
        );
        assert!(!clusters[1].online);
        assert_eq!(last_seen.len(), 1);
        // A single-cluster fleet: every tenant of the wave on every cluster.
        let canary = placed_pairs(&fleet, WaveName::Canary, &clusters).unwrap();
        assert!(!canary.is_empty());
        assert!(canary.values().all(|on| on.len() == 2));
    }
}
