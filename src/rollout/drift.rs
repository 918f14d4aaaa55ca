//! Drift: a managed object that no longer says what git says (a
//! `kubectl edit`, a `kubectl delete`) is put back.
//!
//! The check reads the operator's watch caches, so a steady fleet costs no
//! API request; a suspected drift is confirmed by one fresh read before
//! anything is written (a cache can lag). Each revert is a server-side
//! apply with the one field manager (taking the fields back from whoever
//! changed them), a `DriftReverted` Event on the object naming the fields,
//! and a count in `exo_operator_drift_reverted_total{kind}`.
//!
//! The tenant namespace's NetworkPolicies are kept the same way, from the
//! one NetworkPolicy watch; an Exo policy git no longer builds is deleted.
//! Pods do not roll for a policy, so putting one back does not re-run the
//! saga.

use kube::ResourceExt;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use super::desired::TenantDesired;
use super::diff::diff_paths;
use super::isolation::differs;
use super::saga::Workload;
use super::workload::{agentfs_body, apply_workload};
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::cluster::metrics::{Controller, KindLabels};
use crate::crd::{Agent, AgentFS, DriftRecord, Tool};
use crate::fleet::Fleet;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::networking::v1::NetworkPolicy;

/// What one pass found and did.
#[derive(Debug, Default)]
pub struct Reverted {
    /// The last object put back, for the Rollout's status.
    pub record: Option<DriftRecord>,
    /// Set when a workload was put back: its pod rolls, so the saga must
    /// verify again. The message says what was reverted.
    pub rerun: Option<String>,
    pub changed: bool,
}

/// How `w` differs from what the cache (then a fresh read) shows:
/// `Some(["deleted"])`, the differing fields, or `None`.
fn workload_drift(live: Option<Workload>, want: &Workload) -> Option<Vec<String>> {
    let spec = |w: &Workload| match w {
        Workload::Agent(a) => serde_json::to_value(&a.spec).ok(),
        Workload::Tool(t) => serde_json::to_value(&t.spec).ok(),
    };
    let Some(live) = live else {
        return Some(vec!["deleted".to_owned()]);
    };
    let (l, w) = (spec(&live)?, spec(want)?);
    let fields = diff_paths(&l, &w, "spec");
    (!fields.is_empty()).then_some(fields)
}

fn cached_workload(op: &Ctx, ns: &str, w: &Workload) -> Option<Workload> {
    match w {
        Workload::Agent(_) => op
            .agents
            .get(&ObjectRef::new(w.name()).within(ns))
            .map(|a| Workload::Agent(Agent::clone(&a))),
        Workload::Tool(_) => op
            .tools
            .get(&ObjectRef::new(w.name()).within(ns))
            .map(|t| Workload::Tool(Tool::clone(&t))),
    }
}

async fn read_workload(op: &Ctx, ns: &str, w: &Workload) -> Result<Option<Workload>, kube::Error> {
    Ok(match w {
        Workload::Agent(_) => op
            .api::<Agent>(ns)
            .get_opt(w.name())
            .await?
            .map(Workload::Agent),
        Workload::Tool(_) => op
            .api::<Tool>(ns)
            .get_opt(w.name())
            .await?
            .map(Workload::Tool),
    })
}

fn note(object: &str, fields: &[String]) -> String {
    if fields == ["deleted"] {
        format!("{object} was deleted outside git; restored from git")
    } else {
        format!(
            "{object} differed from git in {}; re-applied from git",
            fields.join(", ")
        )
    }
}

/// Checks every managed object of one tenant against git and puts back
/// what drifted.
pub async fn revert(op: &Ctx, ns: &str, desired: &TenantDesired, fleet: &Fleet) -> Reverted {
    let mut out = Reverted::default();
    let mut rerun = Vec::new();
    let record = |out: &mut Reverted, object: String, fields: Vec<String>, kind: &'static str| {
        op.metrics
            .drift_reverted
            .get_or_create(&KindLabels { kind })
            .inc();
        info!(namespace = %ns, %object, fields = %fields.join(","), "drift reverted");
        out.changed = true;
        out.record = Some(DriftRecord {
            at: Some(super::now()),
            object,
            fields,
        });
    };
    for w in &desired.workloads {
        if workload_drift(cached_workload(op, ns, w), w).is_none() {
            continue;
        }
        let fields = match read_workload(op, ns, w).await {
            Ok(live) => match workload_drift(live, w) {
                Some(f) => f,
                None => continue,
            },
            Err(e) => {
                warn!(namespace = %ns, name = %w.name(), error = %e, "cannot confirm drift");
                continue;
            }
        };
        let object = format!("{}/{}", w.kind(), w.name());
        match apply_workload(op, ns, w).await {
            Ok(applied) => {
                let n = note(&format!("{} {ns}/{}", w.kind(), w.name()), &fields);
                match &applied {
                    Workload::Agent(a) => {
                        op.event(a, EventType::Warning, Reason::DriftReverted, n)
                            .await
                    }
                    Workload::Tool(t) => {
                        op.event(t, EventType::Warning, Reason::DriftReverted, n)
                            .await
                    }
                }
                record(&mut out, object.clone(), fields, w.kind());
                rerun.push(object);
            }
            Err(e) => warn!(namespace = %ns, %object, error = %e, "cannot revert drift"),
        }
    }
    for fs in &desired.filesystems {
        let name = fs.name_any();
        let cached = op.filesystems.get(&ObjectRef::new(&name).within(ns));
        let drifted = |live: Option<&AgentFS>| match live {
            None => Some(vec!["deleted".to_owned()]),
            Some(l) => {
                let f = diff_paths(
                    &serde_json::to_value(&l.spec).unwrap_or_default(),
                    &serde_json::to_value(&fs.spec).unwrap_or_default(),
                    "spec",
                );
                (!f.is_empty()).then_some(f)
            }
        };
        if drifted(cached.as_deref()).is_none() {
            continue;
        }
        let Ok(live) = op.api::<AgentFS>(ns).get_opt(&name).await else {
            continue;
        };
        let Some(fields) = drifted(live.as_ref()) else {
            continue;
        };
        let (obj, _) = agentfs_body(fs, ns);
        match op.apply(Controller::Rollout, &obj).await {
            Ok(applied) => {
                let n = note(&format!("AgentFS {ns}/{name}"), &fields);
                op.event(&applied, EventType::Warning, Reason::DriftReverted, n)
                    .await;
                record(&mut out, format!("AgentFS/{name}"), fields, "AgentFS");
            }
            Err(e) => warn!(namespace = %ns, agentfs = %name, error = %e, "cannot revert drift"),
        }
    }
    for (version, sha) in &desired.baselines {
        if op
            .configmaps
            .get(&ObjectRef::new(version).within(ns))
            .is_some()
        {
            continue;
        }
        match op.api::<ConfigMap>(ns).get_opt(version).await {
            Ok(None) => {}
            _ => continue,
        }
        // An immutable version is only ever re-created with its own content.
        let Some(source) = fleet
            .baselines
            .iter()
            .find(|b| b.value.version() == *version && Some(&b.value.sha256) == sha.as_ref())
        else {
            warn!(namespace = %ns, configmap = %version, "deleted, and the fleet repository has no source for it at this commit");
            continue;
        };
        let mut cm = source.value.to_configmap();
        cm.metadata.namespace = Some(ns.to_owned());
        match op.create(Controller::Rollout, &cm).await {
            Ok(_) => {
                let fields = vec!["deleted".to_owned()];
                let n = note(&format!("ConfigMap {ns}/{version}"), &fields);
                op.event(&cm, EventType::Warning, Reason::DriftReverted, n)
                    .await;
                record(
                    &mut out,
                    format!("ConfigMap/{version}"),
                    fields,
                    "ConfigMap",
                );
            }
            Err(e) => warn!(namespace = %ns, configmap = %version, error = %e, "cannot restore"),
        }
    }
    if !rerun.is_empty() {
        out.rerun = Some(format!(
            "drift reverted ({}); rolling and verifying again",
            rerun.join(", ")
        ));
    }
    out
}

/// What the drift pass did to one tenant's policies.
#[derive(Debug, Default)]
pub struct PolicyDrift {
    pub record: Option<DriftRecord>,
    pub changed: bool,
}

/// Puts back a desired policy that is missing or differs (from the cache,
/// confirmed by one read), and deletes an Exo policy that is not desired.
pub async fn revert_policies(op: &Ctx, ns: &str, desired: &[NetworkPolicy]) -> PolicyDrift {
    let mut out = PolicyDrift::default();
    let api = op.api::<NetworkPolicy>(ns);
    for p in desired {
        let name = p.name_any();
        let drift = |live: Option<&NetworkPolicy>| match live {
            None => Some(vec!["deleted".to_owned()]),
            Some(l) => Some(differs(l, p)).filter(|f| !f.is_empty()),
        };
        let cached = op.network_policies.get(&ObjectRef::new(&name).within(ns));
        if drift(cached.as_deref()).is_none() {
            continue;
        }
        let fields = match api.get_opt(&name).await {
            Ok(live) => match drift(live.as_ref()) {
                Some(f) => f,
                None => continue,
            },
            Err(e) => {
                warn!(namespace = %ns, policy = %name, error = %e, "cannot confirm NetworkPolicy drift");
                continue;
            }
        };
        match op.apply(Controller::Rollout, p).await {
            Ok(applied) => {
                let note = if fields == ["deleted"] {
                    format!("NetworkPolicy {ns}/{name} was deleted outside git; restored")
                } else {
                    format!(
                        "NetworkPolicy {ns}/{name} differed from what Exo builds ({}); re-applied",
                        fields.join(", ")
                    )
                };
                op.event(&applied, EventType::Warning, Reason::DriftReverted, note)
                    .await;
                op.metrics
                    .drift_reverted
                    .get_or_create(&KindLabels {
                        kind: "NetworkPolicy",
                    })
                    .inc();
                info!(namespace = %ns, policy = %name, fields = %fields.join(","), "drift reverted");
                out.changed = true;
                out.record = Some(DriftRecord {
                    at: Some(super::now()),
                    object: format!("NetworkPolicy/{name}"),
                    fields,
                });
            }
            Err(e) => {
                warn!(namespace = %ns, policy = %name, error = %e, "cannot revert NetworkPolicy drift")
            }
        }
    }
    // Exo's policies git no longer builds (a Tool gone, say).
    let extra: Vec<_> = op
        .network_policies
        .state()
        .into_iter()
        .filter(|l| l.namespace().as_deref() == Some(ns))
        .filter(|l| !desired.iter().any(|p| p.name_any() == l.name_any()))
        .collect();
    for l in extra {
        match op.delete_unchanged(Controller::Rollout, l.as_ref()).await {
            Ok(()) => {
                info!(namespace = %ns, policy = %l.name_any(), "NetworkPolicy git no longer builds deleted");
                op.event(
                    l.as_ref(),
                    EventType::Normal,
                    Reason::Pruned,
                    format!(
                        "NetworkPolicy {ns}/{} is no longer built from git; deleted",
                        l.name_any()
                    ),
                )
                .await;
                out.changed = true;
            }
            Err(e) => {
                warn!(namespace = %ns, policy = %l.name_any(), error = %e, "cannot prune NetworkPolicy")
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_says_what_was_put_back() {
        assert_eq!(
            note("Agent a/b", &["deleted".to_owned()]),
            "Agent a/b was deleted outside git; restored from git"
        );
        assert_eq!(
            note(
                "Agent a/b",
                &["spec.paused".to_owned(), "spec.runtime.env".to_owned()]
            ),
            "Agent a/b differed from git in spec.paused, spec.runtime.env; re-applied from git"
        );
    }
}
