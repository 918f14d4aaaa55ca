//! Which of a fleet's tenants this operator applies: all of them in a
//! single-cluster fleet, else those placed on its cluster
//! (`clusters/`, [`crate::fleet::cluster`]). A live tenant the sync does
//! not apply any more is offboarded here by its lifecycle saga, as one
//! whose folder is gone; one whose placement says `move: verify-first`
//! stays until the control plane shows it verified where it goes
//! ([`held_here`]: the Tenants and the fleet view read, the rest pure).

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use tracing::{info, warn};

use super::super::Error;
use super::SyncCtx;
use crate::crd::Fleet as FleetCr;
use crate::fleet::Fleet;
use crate::release::WaveName;

/// The tenants to apply on cluster `cluster` (`None` while the name is not
/// known); `None` means every tenant. Pure.
pub(super) fn placed_here(
    fleet: &Fleet,
    cluster: Option<&str>,
) -> Result<Option<BTreeSet<String>>, Error> {
    let Some(declared) = fleet.clusters.as_deref() else {
        return Ok(None);
    };
    let cluster = cluster.ok_or(Error::ClusterUnknown)?;
    if fleet.cluster(cluster).is_none() {
        let names: Vec<&str> = declared.iter().map(|c| c.value.name()).collect();
        return Err(Error::UndeclaredCluster {
            cluster: cluster.to_owned(),
            declared: if names.is_empty() {
                "it declares none".to_owned()
            } else {
                format!("declared: {}", names.join(", "))
            },
        });
    }
    Ok(Some(fleet.tenants_on(cluster)))
}

/// The live tenants of this Fleet that are placed elsewhere now, with
/// `move: verify-first`, and not yet verified on every cluster they are
/// placed on (each with why it stays). A tenant whose folder is gone is
/// not held: there is nowhere for it to go.
pub(super) async fn held_here(
    ctx: &SyncCtx,
    f: &FleetCr,
    ns: &str,
    loaded: &crate::fleet::Fleet,
    here: &std::collections::BTreeSet<String>,
    assignment: &[(String, WaveName, String)],
) -> BTreeMap<String, String> {
    use crate::crd::tenant::placement::MovePolicy;
    use crate::fleet::cluster::{Placed, move_policy};
    let mut held = BTreeMap::new();
    let live = match super::tenants::fleet_tenants(&ctx.op, &f.name_any(), ns).await {
        Ok(l) => l,
        Err(e) => {
            warn!(fleet = %f.name_any(), error = %e, "cannot read the Tenants; tenants leaving this cluster stay for now");
            return assignment
                .iter()
                .filter(|(t, _, _)| !here.contains(t))
                .filter(|(t, _, _)| {
                    loaded
                        .tenants
                        .get(t)
                        .is_some_and(|x| move_policy(x) == MovePolicy::VerifyFirst)
                })
                .map(|(t, _, _)| (t.clone(), format!("{t} stays: {e}")))
                .collect();
        }
    };
    for (name, t) in &live {
        if here.contains(name) || t.spec.offboarding {
            continue;
        }
        let Some(gt) = loaded.tenants.get(name) else {
            continue;
        };
        if move_policy(gt) != MovePolicy::VerifyFirst {
            continue;
        }
        let (Placed::On(new), Some((_, _, release))) = (
            loaded.placed(gt),
            assignment.iter().find(|(t, _, _)| t == name),
        ) else {
            continue;
        };
        let answer = match &ctx.cfg.fleet_view {
            Some(access) => access.tenant(name).await.map_err(|e| e.to_string()),
            None => Err("this operator is not connected to a control plane".to_owned()),
        };
        let view = answer.as_ref().map_err(String::as_str);
        if let Some(why) = still_needed(name, release, &new, view, now_secs()) {
            info!(tenant = %name, %why, "verify-first: the tenant stays on this cluster");
            held.insert(name.clone(), why);
        }
    }
    held
}

fn now_secs() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::tenant::placement::Placement;
    use crate::fleet::cluster::ClusterDoc;

    fn example() -> Fleet {
        crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn single_cluster_fleets_apply_everything_and_placed_ones_their_share() {
        let mut fleet = example();
        assert!(placed_here(&fleet, None).unwrap().is_none());
        assert!(placed_here(&fleet, Some("eu")).unwrap().is_none());
        let doc = |name: &str| ClusterDoc::sourced(name, &[]);
        fleet.clusters = Some(vec![doc("eu"), doc("us")]);
        std::sync::Arc::make_mut(fleet.tenants.get_mut("acme").unwrap()).placement =
            Some(Placement {
                clusters: vec!["eu".into(), "us".into()],
                ..Placement::default()
            });
        std::sync::Arc::make_mut(fleet.tenants.get_mut("globex").unwrap()).placement =
            Some(Placement {
                clusters: vec!["us".into()],
                ..Placement::default()
            });
        assert_eq!(
            placed_here(&fleet, Some("eu")).unwrap(),
            Some(BTreeSet::from(["acme".to_owned()]))
        );
        assert_eq!(
            placed_here(&fleet, Some("us")).unwrap(),
            Some(BTreeSet::from(["acme".to_owned(), "globex".to_owned()]))
        );
        let unknown = placed_here(&fleet, None).unwrap_err();
        assert_eq!(unknown.reason(), "ClusterUnknown");
        let other = placed_here(&fleet, Some("ap")).unwrap_err();
        assert_eq!(other.reason(), "UndeclaredCluster");
        assert_eq!(
            other.to_string(),
            "this operator's cluster \"ap\" is not declared in clusters/ (declared: eu, us)"
        );
    }
}

/// Whether a tenant that `move: verify-first` moves off this cluster must
/// stay here for now: `None` once it is verified on `release` on every
/// cluster it is placed on now (`new`), as the control plane's fleet view
/// says (`view`, `None` when there is no control plane or it did not
/// answer, and then it stays: nothing vouches for the new placement).
/// Else why it stays. Pure.
pub(super) fn still_needed(
    tenant: &str,
    release: &str,
    new: &BTreeSet<String>,
    view: Result<&crate::wire::fleet::FleetView, &str>,
    now: i64,
) -> Option<String> {
    use crate::rollout::gates::pairs::{Pairs, from_view, pair_standing};
    let view = match view {
        Ok(v) => v,
        Err(why) => {
            return Some(format!(
                "{tenant} stays until it is verified on {} (move: verify-first), and the control plane cannot tell: {why}",
                join(new)
            ));
        }
    };
    let (clusters, last_seen) = from_view(view, |r| {
        r.spec.tenant == tenant && r.metadata.namespace.as_deref() == Some(tenant)
    });
    let pairs = Pairs {
        placed: [(tenant.to_owned(), new.clone())].into(),
        clusters,
        last_seen,
    };
    let standing = pair_standing(release, &pairs, now);
    if standing.all_verified() {
        return None;
    }
    let waiting: Vec<String> = standing
        .waiting
        .iter()
        .map(ToString::to_string)
        .chain(
            standing
                .failed
                .iter()
                .map(|f| format!("{} failed", f.tenant)),
        )
        .collect();
    Some(format!(
        "{tenant} stays until it is verified on {} (move: verify-first): {}",
        join(new),
        waiting.join("; ")
    ))
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod held_tests {
    use super::*;
    use crate::wire::fleet::{ClusterState, FleetRollout, FleetView};
    use crate::wire::{Resource, ResourceKey, ResourceKind};

    fn view(us_online: bool, phase: &str) -> FleetView {
        FleetView {
            clusters: vec![ClusterState {
                deployment: "us".into(),
                online: us_online,
                last_seen: None,
            }],
            rollouts: vec![FleetRollout {
                deployment: "us".into(),
                resource: Resource {
                    key: ResourceKey {
                        kind: ResourceKind::Rollout,
                        namespace: "acme".into(),
                        name: "release".into(),
                    },
                    uid: String::new(),
                    resource_version: "1".into(),
                    generation: Some(1),
                    created: None,
                    phase: Some(phase.into()),
                    labels: Default::default(),
                    spec: serde_json::json!({"tenant": "acme", "wave": "fleet", "release": "r1", "commit": "c", "desiredHash": "h"}),
                    status: serde_json::json!({"phase": phase, "observedGeneration": 1, "desiredHash": "h", "release": "r1", "verifiedReleases": ["r1"]}),
                },
            }],
        }
    }

    #[test]
    fn a_verify_first_move_waits_for_the_new_cluster() {
        let new = BTreeSet::from(["us".to_owned()]);
        assert_eq!(
            still_needed("acme", "r1", &new, Ok(&view(true, "Verified")), 0),
            None
        );
        let running = still_needed("acme", "r1", &new, Ok(&view(true, "Progressing")), 0).unwrap();
        assert!(
            running.contains("acme@us is Progressing on r1"),
            "{running}"
        );
        let offline = still_needed("acme", "r1", &new, Ok(&view(false, "Verified")), 0).unwrap();
        assert!(
            offline.contains("acme@us is unknown: cluster us is offline"),
            "{offline}"
        );
        let other = still_needed("acme", "r2", &new, Ok(&view(true, "Verified")), 0).unwrap();
        assert!(other.contains("acme@us"), "{other}");
        let blind = still_needed("acme", "r1", &new, Err("no control plane"), 0).unwrap();
        assert!(
            blind.ends_with("the control plane cannot tell: no control plane"),
            "{blind}"
        );
    }
}
