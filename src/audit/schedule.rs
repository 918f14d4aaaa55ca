//! The operator's scheduled audit (leader only): every interval, the same
//! collection and rules as `exo audit`, over each followed Fleet's tenants,
//! published where operators look:
//! - an Event per finding when it appears (`AuditFinding`, on the object)
//!   and when it clears (`AuditCleared`);
//! - `exo_operator_audit_findings{rule}`;
//! - one condition per rule in the Fleet's `status.audit`, stamped with the
//!   Fleet generation (a merge patch of that field alone);
//! - keyed upstream alerts (`audit/…`), resolved when the finding clears.
//!
//! A run that cannot read the cluster sets every rule's condition to
//! `Unknown` (reason `AuditFailed`) instead of keeping a stale `True`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::runtime::events::EventType;
use tracing::{info, warn};

use super::{Finding, Rule, Snapshot, check, collect};
use crate::alerts::{AlertBook, AlertSink};
use crate::cluster::apply::Ctx;
use crate::cluster::conditions::keep_transitions;
use crate::cluster::events::Reason;
use crate::cluster::metrics::{Controller, ResultLabels, RuleLabels};
use crate::crd::Fleet;
use crate::rollout::actuate::follows_fleet;
use crate::wire::{Alert, Severity};

#[derive(Clone)]
pub struct AuditConfig {
    pub interval: Duration,
    pub alerts: AlertSink,
    /// Where a new finding is told (`auditFinding`).
    pub notifier: crate::notify::Notifier,
}

/// The API version and kind of a finding's object, for its Event.
fn reference(f: &Finding) -> ObjectReference {
    let (kind, name) = f.object.split_once('/').unwrap_or(("Pod", &f.object));
    let api_version = match kind {
        "NetworkPolicy" => "networking.k8s.io/v1",
        _ => "v1",
    };
    ObjectReference {
        api_version: Some(api_version.to_owned()),
        kind: Some(kind.to_owned()),
        name: Some(name.to_owned()),
        namespace: (!f.namespace.is_empty()).then(|| f.namespace.clone()),
        ..ObjectReference::default()
    }
}

/// The tenant namespaces of `fleet`: its Rollouts, by their labels naming
/// the Fleet and its namespace (not another namespace's Fleet of the same
/// name).
fn tenants_of(snap: &Snapshot, fleet: &Fleet) -> BTreeSet<String> {
    let (name, ns) = (fleet.name_any(), fleet.namespace().unwrap_or_default());
    snap.rollouts
        .iter()
        .filter(|r| follows_fleet(r.labels(), &name, &ns))
        .filter_map(|r| r.namespace())
        .collect()
}

/// The `auditFinding` notification of a new finding: about its tenant
/// when its namespace is one (a tenant's namespace is its name). Pure.
fn finding_event(f: &Finding, tenants: &BTreeSet<String>) -> crate::notify::Event {
    let e = crate::notify::Event::new(
        crate::notify::EventKind::AuditFinding,
        format!("{}: {}/{}: {}", f.rule, f.namespace, f.object, f.message),
    );
    if tenants.contains(&f.namespace) {
        e.tenant(&f.namespace)
    } else {
        e
    }
}

/// One condition per rule for `findings` (pure).
pub fn conditions(
    findings: &[Finding],
    generation: Option<i64>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Vec<Condition> {
    Rule::ALL
        .iter()
        .map(|r| {
            let mine: Vec<&Finding> = findings.iter().filter(|f| f.rule == *r).collect();
            let message = if mine.is_empty() {
                format!("no {r} finding")
            } else {
                let first: Vec<String> = mine
                    .iter()
                    .take(3)
                    .map(|f| format!("{}/{}: {}", f.namespace, f.object, f.message))
                    .collect();
                format!("{} {r} finding(s): {}", mine.len(), first.join("; "))
            };
            Condition {
                type_: r.condition().to_owned(),
                status: if mine.is_empty() { "True" } else { "False" }.to_owned(),
                reason: if mine.is_empty() { "Clean" } else { "Findings" }.to_owned(),
                message: crate::wire::clip_to(&message, 1024).to_owned(),
                observed_generation: generation,
                last_transition_time: now.clone(),
            }
        })
        .collect()
}

fn failed_conditions(
    why: &str,
    generation: Option<i64>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Vec<Condition> {
    Rule::ALL
        .iter()
        .map(|r| Condition {
            type_: r.condition().to_owned(),
            status: "Unknown".to_owned(),
            reason: "AuditFailed".to_owned(),
            message: crate::wire::clip_to(why, 1024).to_owned(),
            observed_generation: generation,
            last_transition_time: now.clone(),
        })
        .collect()
}

async fn write_fleet(ctx: &Ctx, fleet: &Fleet, mut conds: Vec<Condition>, findings: usize) {
    let old = fleet
        .status
        .as_ref()
        .and_then(|s| s.audit.as_ref())
        .map(|a| a.conditions.clone())
        .unwrap_or_default();
    keep_transitions(&mut conds, &old);
    let body = serde_json::json!({"audit": {
        "conditions": conds,
        "lastRunTime": crate::rollout::now(),
        "findings": findings,
    }});
    let ns = fleet.namespace().unwrap_or_default();
    if let Err(e) = ctx
        .merge_status::<Fleet>(Controller::Rollout, &ns, &fleet.name_any(), body)
        .await
    {
        warn!(fleet = %fleet.name_any(), error = %e, "cannot write the Fleet's audit status");
    }
}

/// Seconds after which an unchanged result is written again (lastRunTime).
const REFRESH_S: i64 = 60;

/// What one run found, by key (kept between runs for Events).
type Seen = BTreeMap<String, Finding>;

async fn run_once(ctx: &Ctx, cfg: &AuditConfig, seen: &mut Seen, book: &mut AlertBook) {
    // The operator's Fleet cache (those of the followed namespace); none
    // when Fleets are not watched.
    let fleets: Vec<Arc<Fleet>> = ctx
        .fleets
        .as_ref()
        .map(|store| store.state())
        .unwrap_or_default();
    let now = crate::rollout::now();
    // No Fleet, nothing to audit for: the findings are kept per Fleet's
    // tenants, so a collection now would be read by no rule.
    let collected = if fleets.is_empty() {
        Ok((Snapshot::default(), Default::default()))
    } else {
        collect(&ctx.client).await
    };
    let snap = match collected {
        Ok((s, _)) => s,
        Err(e) => {
            warn!(error = %e, "audit failed");
            ctx.metrics
                .audit_runs
                .get_or_create(&ResultLabels { result: "error" })
                .inc();
            for f in &fleets {
                let conds = failed_conditions(&e.to_string(), f.metadata.generation, &now);
                write_fleet(ctx, f, conds, 0).await;
            }
            return;
        }
    };
    let mut all: Seen = BTreeMap::new();
    let mut tenant_namespaces = BTreeSet::new();
    for fleet in &fleets {
        let tenants = tenants_of(&snap, fleet);
        tenant_namespaces.extend(tenants.iter().cloned());
        let found = if tenants.is_empty() {
            Vec::new()
        } else {
            check(&snap, &tenants, &BTreeSet::new())
        };
        let conds = conditions(&found, fleet.metadata.generation, &now);
        let unchanged = fleet
            .status
            .as_ref()
            .and_then(|s| s.audit.as_ref())
            .is_some_and(|a| {
                let recent = a
                    .last_run_time
                    .as_ref()
                    .is_some_and(|t| now.0.as_second() - t.0.as_second() < REFRESH_S);
                recent
                    && a.findings as usize == found.len()
                    && a.conditions.len() == conds.len()
                    && a.conditions.iter().zip(&conds).all(|(x, y)| {
                        x.type_ == y.type_
                            && x.status == y.status
                            && x.message == y.message
                            && x.observed_generation == y.observed_generation
                    })
            });
        // Written when a result changed, and otherwise at least every
        // REFRESH_S, so a stopped audit shows as an old lastRunTime rather
        // than a fresh-looking `True`.
        if !unchanged {
            write_fleet(ctx, fleet, conds, found.len()).await;
        }
        for f in found {
            all.insert(f.key(), f);
        }
    }
    for r in Rule::ALL {
        let n = all.values().filter(|f| f.rule == r).count();
        ctx.metrics
            .audit_findings
            .get_or_create(&RuleLabels { rule: r.as_str() })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    for (key, f) in &all {
        if !seen.contains_key(key) {
            info!(rule = %f.rule, namespace = %f.namespace, object = %f.object, finding = %f.message, "audit finding");
            let note = format!("{}: {}", f.rule, f.message);
            cfg.notifier.emit(finding_event(f, &tenant_namespaces));
            ctx.event_on(reference(f), EventType::Warning, Reason::AuditFinding, note)
                .await;
        }
    }
    for (key, f) in seen.iter() {
        if !all.contains_key(key) {
            info!(rule = %f.rule, namespace = %f.namespace, object = %f.object, "audit finding cleared");
            let note = format!("{} finding cleared: {}", f.rule, f.message);
            ctx.event_on(reference(f), EventType::Normal, Reason::AuditCleared, note)
                .await;
        }
    }
    let alerts: Vec<Alert> = all
        .iter()
        .map(|(key, f)| {
            Alert::new(
                Severity::Warning,
                f.rule.reason(),
                &f.namespace,
                &f.object,
                &f.message,
            )
            .keyed(key.clone())
        })
        .collect();
    for a in book.reconcile("audit/", alerts) {
        cfg.alerts.send(a);
    }
    ctx.metrics
        .audit_runs
        .get_or_create(&ResultLabels { result: "ok" })
        .inc();
    *seen = all;
}

/// The leader task: one audit now, then one every interval.
pub async fn run(ctx: Arc<Ctx>, cfg: AuditConfig) {
    let mut seen = Seen::new();
    let mut book = AlertBook::new();
    loop {
        run_once(&ctx, &cfg, &mut seen, &mut book).await;
        tokio::time::sleep(cfg.interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{FleetSpec, Rollout, RolloutSpec};
    use crate::meta::{LABEL_FLEET, LABEL_FLEET_NAMESPACE};

    fn rollout(tenant: &str, labels: &[(&str, &str)]) -> Rollout {
        let mut r = Rollout::new(
            "release",
            RolloutSpec {
                tenant: tenant.into(),
                wave: "fleet".into(),
                release: "r1".into(),
                commit: "c".into(),
                desired_hash: String::new(),
                settings: Default::default(),
            },
        );
        r.metadata.namespace = Some(tenant.into());
        r.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        r
    }

    #[test]
    fn a_findings_notification_is_about_its_tenant_when_it_has_one() {
        let f = Finding::new(
            Rule::Mounts,
            "acme",
            "Pod/agent-1".into(),
            "mounts a Secret".into(),
        );
        let tenants = BTreeSet::from(["acme".to_owned()]);
        let e = finding_event(&f, &tenants);
        assert_eq!(e.kind, crate::notify::EventKind::AuditFinding);
        assert_eq!(e.tenants, ["acme"]);
        assert_eq!(e.message, "mounts: acme/Pod/agent-1: mounts a Secret");
        // Outside the tenants (the operator's own namespace, say): about
        // the fleet as a whole.
        assert!(finding_event(&f, &BTreeSet::new()).tenants.is_empty());
    }

    #[test]
    fn a_fleets_tenants_are_the_rollouts_naming_it_and_its_namespace() {
        let mut fleet = Fleet::new(
            "fleet",
            serde_json::from_value::<FleetSpec>(
                serde_json::json!({"url": "git://example.invalid/f.git"}),
            )
            .unwrap(),
        );
        fleet.metadata.namespace = Some("team-a".into());
        let snap = Snapshot {
            rollouts: vec![
                rollout(
                    "a-1",
                    &[(LABEL_FLEET, "fleet"), (LABEL_FLEET_NAMESPACE, "team-a")],
                ),
                // Another namespace's Fleet of the same name.
                rollout(
                    "b-1",
                    &[(LABEL_FLEET, "fleet"), (LABEL_FLEET_NAMESPACE, "team-b")],
                ),
                // Another Fleet in the same namespace.
                rollout(
                    "a-2",
                    &[(LABEL_FLEET, "other"), (LABEL_FLEET_NAMESPACE, "team-a")],
                ),
                // No namespace label (written before it existed): until the
                // engine applies it again, it names no Fleet for sure.
                rollout("old", &[(LABEL_FLEET, "fleet")]),
            ],
            ..Snapshot::default()
        };
        assert_eq!(
            tenants_of(&snap, &fleet),
            BTreeSet::from(["a-1".to_owned()])
        );
    }
}
