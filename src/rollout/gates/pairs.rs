//! The gate of a fleet that spans clusters, pure: a wave is verified only
//! when every (tenant, cluster) pair its placement makes is verified on the
//! release, by a status computed for the Rollout's current spec.
//!
//! Guarantees:
//! - the pairs come from git (each tenant of the wave and each cluster it
//!   is placed on), not from what happens to be reported: a cluster that
//!   never reported, or has no Rollout of the tenant, makes that pair
//!   unknown;
//! - a pair on a cluster whose operator is not connected now is unknown,
//!   whatever its last reported status said (that status may be stale);
//! - an unknown pair is never verified: the gate waits, naming the pair
//!   (`tenant@cluster`) and why.

use std::collections::{BTreeMap, BTreeSet};

use super::{Analysis, GateFailure, Standing, WaveStanding, decide, standing};
use crate::crd::Rollout;
use crate::release::{Gates, WaveName};
use crate::rollout::summary::summarize;
use crate::wire::fleet::FleetView;
use crate::wire::{Resource, ResourceKind};

/// One cluster's Rollouts as the control plane has them.
#[derive(Debug, Clone)]
pub struct ClusterRollouts {
    pub cluster: String,
    /// Its operator is connected now.
    pub online: bool,
    pub rollouts: Vec<Rollout>,
}

/// Why nobody can vouch for a pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnknownWhy {
    /// The control plane knows no deployment of that name.
    NoSuchCluster { cluster: String },
    /// Its operator is not connected; `last_seen` when the control plane
    /// last heard from it.
    Offline {
        cluster: String,
        last_seen: Option<String>,
    },
    /// Connected, but it reports no Rollout of the tenant (yet).
    NoRollout { cluster: String },
}

impl std::fmt::Display for UnknownWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnknownWhy::NoSuchCluster { cluster } => write!(
                f,
                "the control plane has no deployment {cluster:?} (is its operator connected with that cluster's token?)"
            ),
            UnknownWhy::Offline {
                cluster,
                last_seen: Some(t),
            } => write!(f, "cluster {cluster} is offline (last seen {t})"),
            UnknownWhy::Offline {
                cluster,
                last_seen: None,
            } => write!(f, "cluster {cluster} is offline (never connected)"),
            UnknownWhy::NoRollout { cluster } => {
                write!(f, "cluster {cluster} reports no Rollout of the tenant yet")
            }
        }
    }
}

/// What the gate of a multi-cluster wave reads: where the wave's tenants
/// are placed (from git) and what each cluster reports (from the control
/// plane).
#[derive(Debug, Clone, Default)]
pub struct Pairs {
    /// Each tenant of the wave and the clusters it is placed on.
    pub placed: BTreeMap<String, BTreeSet<String>>,
    pub clusters: Vec<ClusterRollouts>,
    /// An offline cluster's last contact, for the message.
    pub last_seen: BTreeMap<String, String>,
}

/// A wire Rollout as the kind: its spec and status as sent, its
/// generation (a status stamped with another is stale). `None` for
/// another kind or a spec that does not parse.
pub fn to_rollout(r: &Resource) -> Option<Rollout> {
    if r.key.kind != ResourceKind::Rollout {
        return None;
    }
    let spec = serde_json::from_value(r.spec.clone()).ok()?;
    let mut out = Rollout::new(&r.key.name, spec);
    out.metadata.namespace = Some(r.key.namespace.clone());
    out.metadata.generation = r.generation;
    out.metadata.resource_version = Some(r.resource_version.clone());
    if !r.uid.is_empty() {
        out.metadata.uid = Some(r.uid.clone());
    }
    if !r.labels.is_empty() {
        out.metadata.labels = Some(r.labels.clone());
    }
    out.status = if r.status.is_null() {
        None
    } else {
        serde_json::from_value(r.status.clone()).ok()
    };
    Some(out)
}

/// Each cluster of the control plane's fleet view with the Rollouts
/// `keep` takes, and the offline clusters' last contact. Pure.
pub fn from_view(
    view: &FleetView,
    keep: impl Fn(&Rollout) -> bool,
) -> (Vec<ClusterRollouts>, BTreeMap<String, String>) {
    let clusters = view
        .clusters
        .iter()
        .map(|c| ClusterRollouts {
            cluster: c.deployment.clone(),
            online: c.online,
            rollouts: view
                .rollouts
                .iter()
                .filter(|r| r.deployment == c.deployment)
                .filter_map(|r| to_rollout(&r.resource))
                .filter(|r| keep(r))
                .collect(),
        })
        .collect();
    let last_seen = view
        .clusters
        .iter()
        .filter_map(|c| Some((c.deployment.clone(), c.last_seen.clone()?)))
        .collect();
    (clusters, last_seen)
}

/// The pair's name in messages.
pub fn pair(tenant: &str, cluster: &str) -> String {
    format!("{tenant}@{cluster}")
}

/// How the pairs stand on `release`.
pub fn pair_standing(release: &str, pairs: &Pairs, now: i64) -> WaveStanding {
    let Pairs {
        placed,
        clusters,
        last_seen,
    } = pairs;
    let mut out = WaveStanding::default();
    for (tenant, on) in placed {
        for cluster in on {
            let name = pair(tenant, cluster);
            let unknown = |why| super::Waiting {
                tenant: name.clone(),
                release: release.to_owned(),
                why: super::Unverified::Unknown(why),
            };
            let Some(view) = clusters.iter().find(|c| c.cluster == *cluster) else {
                out.waiting.push(unknown(UnknownWhy::NoSuchCluster {
                    cluster: cluster.clone(),
                }));
                continue;
            };
            if !view.online {
                out.waiting.push(unknown(UnknownWhy::Offline {
                    cluster: cluster.clone(),
                    last_seen: last_seen.get(cluster).cloned(),
                }));
                continue;
            }
            let Some(r) = view.rollouts.iter().find(|r| {
                r.spec.tenant == *tenant || r.metadata.namespace.as_deref() == Some(tenant)
            }) else {
                out.waiting.push(unknown(UnknownWhy::NoRollout {
                    cluster: cluster.clone(),
                }));
                continue;
            };
            let mut summary = summarize(r, now);
            summary.tenant = name;
            match standing(r, summary, release) {
                Standing::Verified { at } => out.verified_at.push(at),
                Standing::Failed(f) => out.failed.push(f),
                Standing::Waiting(w) => out.waiting.push(w),
            }
        }
    }
    out
}

/// [`super::check`] for a fleet that spans clusters: the gates of
/// `target` for `release`, over the pairs of the wave before it.
pub fn check_pairs(
    target: WaveName,
    release: &str,
    gates: &Gates,
    pairs: &Pairs,
    analysis: Analysis<'_>,
    now: i64,
) -> Result<(), GateFailure> {
    let Some(prev) = target.previous() else {
        return Ok(());
    };
    let standing = pair_standing(release, pairs, now);
    decide(prev, release, gates, standing, analysis, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{RolloutPhase, RolloutSpec, RolloutStatus};

    const NOW: i64 = 1_800_000_000;

    fn rollout(tenant: &str, release: &str, phase: RolloutPhase) -> Rollout {
        let mut r = Rollout::new(
            "release",
            RolloutSpec {
                tenant: tenant.into(),
                wave: "canary".into(),
                release: release.into(),
                commit: "c1".into(),
                desired_hash: "h1".into(),
                settings: Default::default(),
            },
        );
        r.metadata.namespace = Some(tenant.into());
        r.metadata.generation = Some(2);
        r.status = Some(RolloutStatus {
            phase: Some(phase),
            observed_generation: Some(2),
            desired_hash: Some("h1".into()),
            release: Some(release.into()),
            verified_releases: if phase == RolloutPhase::Verified {
                vec![release.into()]
            } else {
                vec![]
            },
            ..RolloutStatus::default()
        });
        r
    }

    fn cluster(name: &str, online: bool, rollouts: Vec<Rollout>) -> ClusterRollouts {
        ClusterRollouts {
            cluster: name.into(),
            online,
            rollouts,
        }
    }

    fn placed(pairs: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        pairs
            .iter()
            .map(|(t, cs)| {
                (
                    (*t).to_owned(),
                    cs.iter().map(|c| (*c).to_owned()).collect(),
                )
            })
            .collect()
    }

    fn gates() -> Gates {
        Gates {
            require_verification: true,
            ..Gates::default()
        }
    }

    fn check(
        placed: &BTreeMap<String, BTreeSet<String>>,
        clusters: &[ClusterRollouts],
    ) -> Result<(), GateFailure> {
        let pairs = Pairs {
            placed: placed.clone(),
            clusters: clusters.to_vec(),
            last_seen: BTreeMap::from([("us".to_owned(), "2026-12-07T04:00:00Z".to_owned())]),
        };
        check_pairs(
            WaveName::LowRisk,
            "r2",
            &gates(),
            &pairs,
            Analysis::None,
            NOW,
        )
    }

    #[test]
    fn the_gate_waits_for_every_placed_pair() {
        let both = placed(&[("acme", &["eu", "us"])]);
        let eu_done = cluster(
            "eu",
            true,
            vec![rollout("acme", "r2", RolloutPhase::Verified)],
        );
        let us_running = cluster(
            "us",
            true,
            vec![rollout("acme", "r2", RolloutPhase::Progressing)],
        );
        let err = check(&both, &[eu_done.clone(), us_running])
            .unwrap_err()
            .to_string();
        assert!(err.contains("acme@us is Progressing on r2"), "{err}");
        assert!(!err.contains("acme@eu"), "{err}");
        let us_done = cluster(
            "us",
            true,
            vec![rollout("acme", "r2", RolloutPhase::Verified)],
        );
        assert_eq!(check(&both, &[eu_done.clone(), us_done.clone()]), Ok(()));
        // A tenant placed on one cluster only is not looked for elsewhere.
        let one = placed(&[("acme", &["eu"])]);
        assert_eq!(check(&one, &[eu_done, cluster("us", true, vec![])]), Ok(()));
    }

    #[test]
    fn an_offline_or_silent_cluster_makes_its_pairs_unknown_never_verified() {
        let both = placed(&[("acme", &["eu", "us"])]);
        let eu = cluster(
            "eu",
            true,
            vec![rollout("acme", "r2", RolloutPhase::Verified)],
        );
        // Its last report said Verified, but it is offline now.
        let us_off = cluster(
            "us",
            false,
            vec![rollout("acme", "r2", RolloutPhase::Verified)],
        );
        let err = check(&both, &[eu.clone(), us_off]).unwrap_err().to_string();
        assert!(
            err.contains(
                "acme@us is unknown: cluster us is offline (last seen 2026-12-07T04:00:00Z)"
            ),
            "{err}"
        );
        let err = check(&both, std::slice::from_ref(&eu))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("acme@us is unknown: the control plane has no deployment \"us\""),
            "{err}"
        );
        let err = check(&both, &[eu, cluster("us", true, vec![])])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("acme@us is unknown: cluster us reports no Rollout of the tenant yet"),
            "{err}"
        );
    }

    #[test]
    fn a_stale_status_and_failures_count_per_pair() {
        let both = placed(&[("acme", &["eu", "us"])]);
        let eu = cluster(
            "eu",
            true,
            vec![rollout("acme", "r2", RolloutPhase::Verified)],
        );
        let mut stale = rollout("acme", "r2", RolloutPhase::Verified);
        stale.metadata.generation = Some(3);
        let err = check(&both, &[eu.clone(), cluster("us", true, vec![stale])])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("acme@us has no status for its current spec yet"),
            "{err}"
        );
        let failed = cluster(
            "us",
            true,
            vec![rollout("acme", "r2", RolloutPhase::Failed)],
        );
        let err = check(&both, &[eu, failed]).unwrap_err().to_string();
        assert!(
            err.contains("gate max-failures: 1 tenant(s) of wave canary failed (acme@us)"),
            "{err}"
        );
    }
}
