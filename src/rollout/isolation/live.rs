//! The cluster side of isolation: the saga's `network-isolated` step, and
//! the drift pass that puts a deleted or edited policy back and deletes an
//! Exo policy git no longer builds.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::api::ListParams;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use super::differs;
use crate::crd::DriftRecord;
use crate::meta::{LABEL_MANAGED_BY, MANAGED_BY};
use crate::operator::apply::Ctx;
use crate::operator::events::Reason;
use crate::operator::metrics::{Controller, KindLabels};
use crate::rollout::saga::Outcome;
use crate::rollout::workload::{StepCtx, blocked, blocked_op};

fn managed() -> ListParams {
    ListParams::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"))
}

/// The step: apply every desired policy, delete Exo's policies that are
/// not desired, then check from one list that the namespace holds exactly
/// the desired ones, as built.
pub async fn isolate(ctx: &StepCtx<'_>) -> Outcome {
    let ns = ctx.namespace;
    for p in ctx.policies {
        if let Err(e) = ctx.op.apply(Controller::Rollout, p).await {
            return blocked_op(&format!("apply NetworkPolicy {ns}/{}", p.name_any()), &e);
        }
    }
    let api = ctx.op.api::<NetworkPolicy>(ns);
    let live = match api.list(&managed()).await {
        Ok(l) => l.items,
        Err(e) => return blocked(&format!("list NetworkPolicies in {ns}"), &e),
    };
    for l in &live {
        if !ctx.policies.iter().any(|p| p.name_any() == l.name_any()) {
            if let Err(e) = ctx.op.delete_unchanged(Controller::Rollout, l).await {
                return blocked_op(&format!("delete NetworkPolicy {ns}/{}", l.name_any()), &e);
            }
            info!(namespace = %ns, policy = %l.name_any(), "NetworkPolicy git no longer builds deleted");
        }
    }
    for p in ctx.policies {
        let name = p.name_any();
        let Some(l) = live.iter().find(|l| l.name_any() == name) else {
            return Outcome::Pending(format!("NetworkPolicy {ns}/{name} not there yet"));
        };
        let fields = differs(l, p);
        if !fields.is_empty() {
            return Outcome::Pending(format!(
                "NetworkPolicy {ns}/{name} differs in {}",
                fields.join(", ")
            ));
        }
    }
    Outcome::Done
}

/// What the drift pass did to one tenant's policies.
#[derive(Debug, Default)]
pub struct PolicyDrift {
    pub record: Option<DriftRecord>,
    pub changed: bool,
}

/// Puts back a desired policy that is missing or differs (from the cache,
/// confirmed by one read), and deletes an Exo policy that is not desired.
pub async fn revert(op: &Ctx, ns: &str, desired: &[NetworkPolicy]) -> PolicyDrift {
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
                    at: Some(crate::rollout::now()),
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
