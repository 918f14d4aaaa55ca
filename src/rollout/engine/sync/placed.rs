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
