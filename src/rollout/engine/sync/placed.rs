//! Which of a fleet's tenants this operator applies: all of them in a
//! single-cluster fleet, else those placed on its cluster
//! (`clusters/`, [`crate::fleet::cluster`]). A live tenant the sync does
//! not apply any more is offboarded here by its lifecycle saga, as one
//! whose folder is gone.

use std::collections::BTreeSet;

use super::super::Error;
use crate::fleet::Fleet;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::tenant::placement::Placement;
    use crate::fleet::Sourced;
    use crate::fleet::cluster::{ClusterDoc, ClusterMeta, KIND_CLUSTER};

    fn example() -> Fleet {
        crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn single_cluster_fleets_apply_everything_and_placed_ones_their_share() {
        let mut fleet = example();
        assert!(placed_here(&fleet, None).unwrap().is_none());
        assert!(placed_here(&fleet, Some("eu")).unwrap().is_none());
        let doc = |name: &str| Sourced {
            path: format!("clusters/{name}.yaml").into(),
            value: ClusterDoc {
                api_version: String::new(),
                kind: KIND_CLUSTER.into(),
                metadata: ClusterMeta {
                    name: name.into(),
                    labels: Default::default(),
                },
                spec: Default::default(),
            },
        };
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
