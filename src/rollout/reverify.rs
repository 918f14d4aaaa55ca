//! Continuous live verification. A verified tenant's pods are checked again
//! every `spec.reverifyInterval` of its Fleet (jittered per tenant by up to
//! a tenth, so tenants do not all exec at once): every container's
//! `imageID` must carry the pinned digest, and the mounted baseline must
//! hash to the release's, exactly as the saga's `verified/*` step checks.
//!
//! A mismatch sets the Rollout's `ContentDrift` condition (naming the pod
//! and the files), emits a `ContentDrift` Event, counts
//! `exo_operator_content_drift_total`, raises an upstream alert (one per
//! pod, `critical`, reason `ContentDrift`), and applies the Fleet's
//! `driftPolicy`: `heal` deletes the pod (its reconciler makes a new one,
//! with freshly mounted content) and runs the saga again so the new pod is
//! verified; `alert` only reports.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::events::EventType;
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use super::desired::TenantTarget;
use super::saga::Outcome;
use super::verify::{ContentError, check_content};
use super::workload::{current_pod, expects_pod, pod_rolled};
use crate::alerts::AlertSink;
use crate::cluster::apply::Ctx;
use crate::cluster::conditions::set_condition;
use crate::cluster::events::Reason;
use crate::cluster::metrics::Controller;
use crate::crd::{CONDITION_CONTENT_DRIFT, DriftPolicy, LiveCheck, Rollout, RolloutStatus};
use crate::wire::{Alert, Severity};

/// Pods checked at once per tenant.
const CONCURRENCY: usize = 8;

/// A stable fraction in [0, 1) per key, so each tenant keeps its place in
/// the schedule across restarts. Pure.
pub fn jitter(key: &str) -> f64 {
    let d = Sha256::digest(key.as_bytes());
    let n = u16::from_be_bytes([d[0], d[1]]);
    f64::from(n) / 65536.0
}

/// How long until `status`'s tenant is due for a re-check: `interval`
/// (plus up to a tenth, by tenant) after the last check of every pod (a
/// re-check, or a saga run over the whole tenant). A run over a changed
/// set checked only its pods, so it does not postpone the re-check of the
/// others. Zero when due. Pure.
pub fn due_in(status: &RolloutStatus, key: &str, interval: Duration, now: Time) -> Duration {
    // A status from before the changed set: its run covered every pod.
    let legacy_verified = status
        .verified_at
        .as_ref()
        .filter(|_| status.changed.is_none());
    let base = status
        .last_live_check
        .as_ref()
        .and_then(|c| c.at.as_ref())
        .into_iter()
        .chain(status.last_full_check.as_ref())
        .chain(legacy_verified)
        .map(|t| t.0.as_millisecond())
        .max();
    let Some(base) = base else {
        return Duration::ZERO;
    };
    let period = interval.as_secs_f64() * (1.0 + jitter(key) / 10.0);
    let due = base + (period * 1000.0) as i64;
    let left = due - now.0.as_millisecond();
    if left <= 0 {
        Duration::ZERO
    } else {
        Duration::from_millis(u64::try_from(left).unwrap_or(0))
    }
}

/// One pod found not to run what the release pins.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub pod: String,
    pub uid: Option<String>,
    pub message: String,
}

/// What one re-check found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveResult {
    pub pods: u32,
    pub problems: Vec<Problem>,
    /// Pods that could not be checked now (rolling, exec refused).
    pub skipped: Vec<String>,
}

/// Checks every pod of the tenant's workloads once. Pods come from the
/// operator's cache; only the execs reach the apiserver. For a release
/// that names signing keys, `signatures` (the Rollout's record) must cover
/// every digest a pod runs.
pub async fn run(
    op: &Ctx,
    ns: &str,
    target: &TenantTarget,
    signatures: &[crate::crd::ImageSignature],
) -> LiveResult {
    let signed = target.release.spec.signatures.is_some();
    let pods: Vec<Pod> = op
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns))
        .map(|p| Pod::clone(&p))
        .collect();
    let pods = &pods;
    let mut checks = Vec::new();
    for w in target.desired.workloads.iter().filter(|w| expects_pod(w)) {
        checks.push(async move {
            let pod = match current_pod(w, pods) {
                Ok(p) => p,
                Err(_) => return (0, None, Some(format!("{} {}: rolling", w.kind(), w.name()))),
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            match pod_rolled(w, pod) {
                Outcome::Done => {}
                Outcome::Failed(m) => {
                    return (
                        1,
                        Some(Problem {
                            pod: name,
                            uid: pod.metadata.uid.clone(),
                            message: m,
                        }),
                        None,
                    );
                }
                Outcome::Pending(m) | Outcome::Waiting(m) => return (0, None, Some(m)),
            }
            if signed && let Some(m) = super::signed::unverified_running(w, pod, signatures) {
                let problem = Problem {
                    pod: name,
                    uid: pod.metadata.uid.clone(),
                    message: m,
                };
                return (1, Some(problem), None);
            }
            if matches!(w, super::saga::Workload::Agent(a) if a.spec.baseline.is_some()) {
                op.metrics.live_check_execs.inc();
            }
            match check_content(op, ns, &target.release, &target.desired.baselines, w, pod).await {
                Ok(()) => (1, None, None),
                Err(ContentError::Mismatch { message, .. }) => (
                    1,
                    Some(Problem {
                        pod: name,
                        uid: pod.metadata.uid.clone(),
                        message,
                    }),
                    None,
                ),
                Err(ContentError::Blocked(o)) => {
                    let m = match o {
                        Outcome::Pending(m) | Outcome::Waiting(m) | Outcome::Failed(m) => m,
                        Outcome::Done => String::new(),
                    };
                    (0, None, Some(m))
                }
            }
        });
    }
    let results: Vec<(u32, Option<Problem>, Option<String>)> = futures::stream::iter(checks)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut out = LiveResult::default();
    for (n, problem, skipped) in results {
        out.pods += n;
        out.problems.extend(problem);
        out.skipped.extend(skipped);
    }
    out.problems.sort_by(|a, b| a.pod.cmp(&b.pod));
    out
}

fn drift_condition(
    status: &str,
    reason: &str,
    message: String,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: CONDITION_CONTENT_DRIFT.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: super::now(),
        observed_generation: generation,
    }
}

/// Writes what a re-check found into `status`, reports a mismatch, and
/// heals it when the policy says so. Returns why the saga must run again
/// (pods were replaced), or `None`.
pub async fn record(
    op: &Ctx,
    ro: &Rollout,
    status: &mut RolloutStatus,
    result: &LiveResult,
    policy: DriftPolicy,
    alerts: &AlertSink,
) -> Option<String> {
    let generation = ro.metadata.generation;
    let ok = result.problems.is_empty();
    let message = if ok {
        let mut m = format!("{} pod(s) match the release", result.pods);
        if !result.skipped.is_empty() {
            m.push_str(&format!("; not checked now: {}", result.skipped.join("; ")));
        }
        m
    } else {
        result
            .problems
            .iter()
            .map(|p| p.message.clone())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let at = super::now();
    if result.skipped.is_empty() {
        // Every pod of the tenant was looked at.
        status.last_full_check = Some(at.clone());
    }
    status.last_live_check = Some(LiveCheck {
        at: Some(at),
        pods: result.pods,
        ok,
        message: Some(message.clone()),
    });
    if ok {
        let had_drift = status
            .conditions
            .iter()
            .any(|c| c.type_ == CONDITION_CONTENT_DRIFT);
        if had_drift {
            set_condition(
                &mut status.conditions,
                drift_condition("False", "Verified", message, generation),
            );
        }
        return None;
    }
    op.metrics.content_drift.inc();
    warn!(namespace = ?ro.metadata.namespace, %message, ?policy, "live content drift");
    op.event(
        ro,
        EventType::Warning,
        Reason::ContentDrift,
        message.clone(),
    )
    .await;
    let ns = ro.metadata.namespace.clone().unwrap_or_default();
    for p in &result.problems {
        alerts.send(Alert::new(
            Severity::Critical,
            "ContentDrift",
            ns.clone(),
            format!("Pod/{}", p.pod),
            p.message.clone(),
        ));
    }
    match policy {
        DriftPolicy::Alert => {
            set_condition(
                &mut status.conditions,
                drift_condition("True", "Detected", message, generation),
            );
            None
        }
        DriftPolicy::Heal => {
            set_condition(
                &mut status.conditions,
                drift_condition("True", "Healing", message.clone(), generation),
            );
            let mut replaced = Vec::new();
            for p in &result.problems {
                match op
                    .delete::<Pod>(Controller::Rollout, &ns, &p.pod, p.uid.clone())
                    .await
                {
                    Ok(()) => replaced.push(p.pod.clone()),
                    Err(e) => {
                        warn!(namespace = %ns, pod = %p.pod, error = %e, "cannot replace a drifted pod")
                    }
                }
            }
            info!(namespace = %ns, pods = %replaced.join(","), "replacing drifted pods");
            Some(format!(
                "live content drift ({message}); pod(s) {} replaced, verifying again",
                replaced.join(", ")
            ))
        }
    }
}

/// Once the saga verified again after a heal, the drift it healed is
/// over. Returns whether the status changed.
pub fn clear_healed(status: &mut RolloutStatus, generation: Option<i64>) -> bool {
    let healing = status
        .conditions
        .iter()
        .any(|c| c.type_ == CONDITION_CONTENT_DRIFT && c.status == "True" && c.reason == "Healing");
    if !healing {
        return false;
    }
    set_condition(
        &mut status.conditions,
        drift_condition(
            "False",
            "Healed",
            "the drifted pods were replaced and verified again".into(),
            generation,
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn the_schedule_is_jittered_per_tenant_and_counts_from_the_last_check() {
        let ten = Duration::from_secs(600);
        let mut s = RolloutStatus::default();
        assert_eq!(
            due_in(&s, "t", ten, at(1_000)),
            Duration::ZERO,
            "never verified: due"
        );
        s.verified_at = Some(at(1_000));
        let left = due_in(&s, "acme", ten, at(1_000));
        assert!(left >= ten && left <= ten + ten / 10, "{left:?}");
        assert_eq!(due_in(&s, "acme", ten, at(1_000 + 661)), Duration::ZERO);
        s.last_live_check = Some(LiveCheck {
            at: Some(at(1_500)),
            ..LiveCheck::default()
        });
        assert!(
            due_in(&s, "acme", ten, at(1_661)) > Duration::ZERO,
            "from the last check"
        );
        // A run over a changed set checked only its pods: the others are
        // due from the last full check, not from that run's `verifiedAt`.
        let mut partial = RolloutStatus {
            verified_at: Some(at(5_000)),
            last_full_check: Some(at(1_000)),
            changed: Some(crate::crd::ChangedSet {
                agents: vec!["a1".into()],
                ..Default::default()
            }),
            ..RolloutStatus::default()
        };
        assert_eq!(due_in(&partial, "acme", ten, at(1_661)), Duration::ZERO);
        partial.changed = Some(crate::crd::ChangedSet {
            all: true,
            ..Default::default()
        });
        partial.last_full_check = Some(at(5_000));
        assert!(due_in(&partial, "acme", ten, at(1_661)) > Duration::ZERO);
        let a = jitter("acme");
        assert!((0.0..1.0).contains(&a));
        assert_eq!(a, jitter("acme"));
        assert_ne!(a, jitter("globex"));
    }

    #[test]
    fn a_heal_is_cleared_once_verified_again() {
        let mut s = RolloutStatus::default();
        assert!(!clear_healed(&mut s, Some(1)));
        s.conditions
            .push(drift_condition("True", "Healing", "pod x".into(), Some(1)));
        assert!(clear_healed(&mut s, Some(1)));
        assert_eq!(s.conditions[0].status, "False");
        assert_eq!(s.conditions[0].reason, "Healed");
        let mut alerted = RolloutStatus::default();
        alerted
            .conditions
            .push(drift_condition("True", "Detected", "pod x".into(), Some(1)));
        assert!(
            !clear_healed(&mut alerted, Some(1)),
            "alert stays until a check passes"
        );
    }
}
