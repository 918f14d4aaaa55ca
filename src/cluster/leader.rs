//! Leader election through a `coordination.k8s.io/v1` Lease that the
//! operator creates itself.
//!
//! Guarantees: at most one replica believes it leads at a time, provided
//! clocks advance at similar rates: a follower only takes the Lease after
//! it has seen the same record unchanged for `lease_duration` (measured on
//! its own monotonic clock, as client-go does), and a leader steps down as
//! soon as it has failed to renew for `renew_deadline` (< lease_duration).
//! Writes use the Lease's resourceVersion, so two candidates racing for it
//! cannot both win. On shutdown the leader releases the Lease so a standby
//! takes over at once.
//!
//! Writes are fenced: the leader may write until `renew_deadline` after the
//! start of its last successful renewal ([`Fence`]), on the monotonic
//! clock, which runs on while the process is stopped. A leader frozen past
//! its lease (SIGSTOP, a long pause) finds its fence passed the moment it
//! resumes, before the election loop has run again, so it writes nothing
//! a new leader may already be writing.
//!
//! The Lease carries the [`crate::meta::ANNOTATION_CAPABILITIES`] annotation: the
//! operator's advertised capabilities (`mount-filesystems`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::CAPABILITIES;
use super::metrics::{Controller, Metrics, Verb};
use crate::meta::{ANNOTATION_CAPABILITIES, LABEL_MANAGED_BY, MANAGED_BY};

#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub lease_name: String,
    pub lease_namespace: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// Renew deadline 2/3 and retry period 1/5 of the lease duration.
    pub fn with_duration(
        lease_name: String,
        lease_namespace: String,
        identity: String,
        lease_duration: Duration,
    ) -> Self {
        LeaderConfig {
            lease_name,
            lease_namespace,
            identity,
            renew_deadline: lease_duration * 2 / 3,
            retry_period: (lease_duration / 5).max(Duration::from_millis(200)),
            lease_duration,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lease {0}: {1}")]
    Api(String, #[source] kube::Error),
}

/// Until when this replica may write as the leader (see the module's
/// guarantees). Read by every write of `apply::Ctx`.
#[derive(Debug)]
pub struct Fence {
    base: Instant,
    /// Nanoseconds after `base`; 0 when not leading.
    until: AtomicU64,
}

impl Default for Fence {
    fn default() -> Self {
        Fence {
            base: Instant::now(),
            until: AtomicU64::new(0),
        }
    }
}

impl Fence {
    /// Whether a write may go out now.
    pub fn holds(&self) -> bool {
        let until = self.until.load(Ordering::Acquire);
        until != 0 && Instant::now() < self.base + Duration::from_nanos(until)
    }

    fn extend(&self, until: Instant) {
        let nanos = until.saturating_duration_since(self.base).as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX).max(1);
        self.until.store(nanos, Ordering::Release);
    }

    fn revoke(&self) {
        self.until.store(0, Ordering::Release);
    }
}

/// What one round of the election decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Leading,
    Following,
}

/// The record last seen and when (on our monotonic clock) it last changed.
struct Observed {
    holder: Option<String>,
    renew: Option<Timestamp>,
    since: Instant,
}

/// Runs the election until `shutdown` fires, publishing leadership on
/// `tx` and the write deadline on `fence`. Releases the Lease on shutdown
/// if held.
pub async fn run(
    client: Client,
    cfg: LeaderConfig,
    tx: watch::Sender<bool>,
    fence: std::sync::Arc<Fence>,
    metrics: std::sync::Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &cfg.lease_namespace);
    // Every Lease write sent is counted with the others
    // (`exo_operator_api_writes_total{controller="Leader",kind="Lease"}`).
    let wrote = |verb| metrics.wrote(Controller::Leader, "Lease", verb);
    let mut observed: Option<Observed> = None;
    let mut last_renew = Instant::now();
    loop {
        let leading = *tx.borrow();
        // The renewal counts from before it was sent: the apiserver may
        // have stamped it any time after this.
        let sent = Instant::now();
        match try_acquire_or_renew(&api, &cfg, &mut observed, &wrote).await {
            Ok(Outcome::Leading) => {
                last_renew = sent;
                fence.extend(sent + cfg.renew_deadline);
                if !leading {
                    info!(identity = %cfg.identity, lease = %cfg.lease_name, "became leader");
                    tx.send_replace(true);
                }
            }
            Ok(Outcome::Following) => {
                fence.revoke();
                if leading {
                    warn!(identity = %cfg.identity, "lost the lease to another replica");
                    tx.send_replace(false);
                }
            }
            Err(e) => {
                warn!(error = %e, "lease round failed");
                if leading && last_renew.elapsed() >= cfg.renew_deadline {
                    warn!(identity = %cfg.identity, "could not renew the lease in time: stepping down");
                    fence.revoke();
                    tx.send_replace(false);
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(cfg.retry_period) => {}
            _ = shutdown.changed() => break,
        }
    }
    if *tx.borrow() {
        fence.revoke();
        tx.send_replace(false);
        if let Err(e) = release(&api, &cfg, &wrote).await {
            warn!(error = %e, "could not release the lease");
        } else {
            info!(identity = %cfg.identity, "released the lease");
        }
    }
}

fn lease_meta(cfg: &LeaderConfig) -> ObjectMeta {
    ObjectMeta {
        name: Some(cfg.lease_name.clone()),
        namespace: Some(cfg.lease_namespace.clone()),
        labels: Some(BTreeMap::from([(
            LABEL_MANAGED_BY.to_owned(),
            MANAGED_BY.to_owned(),
        )])),
        annotations: Some(BTreeMap::from([(
            ANNOTATION_CAPABILITIES.to_owned(),
            CAPABILITIES.join(","),
        )])),
        ..ObjectMeta::default()
    }
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

async fn try_acquire_or_renew(
    api: &Api<Lease>,
    cfg: &LeaderConfig,
    observed: &mut Option<Observed>,
    wrote: &impl Fn(Verb),
) -> Result<Outcome, LeaderError> {
    let err = |e| LeaderError::Api(cfg.lease_name.clone(), e);
    let now = Timestamp::now();
    let Some(mut lease) = api.get_opt(&cfg.lease_name).await.map_err(err)? else {
        let lease = Lease {
            metadata: lease_meta(cfg),
            spec: Some(LeaseSpec {
                holder_identity: Some(cfg.identity.clone()),
                lease_duration_seconds: Some(secs(cfg.lease_duration)),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        wrote(Verb::Create);
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Outcome::Leading),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Following),
            Err(e) => Err(err(e)),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let renew = spec.renew_time.as_ref().map(|t| t.0);
    let changed = observed
        .as_ref()
        .is_none_or(|o| o.holder != holder || o.renew != renew);
    if changed {
        *observed = Some(Observed {
            holder: holder.clone(),
            renew,
            since: Instant::now(),
        });
    }
    let duration = spec
        .lease_duration_seconds
        .map(|s| Duration::from_secs(u64::try_from(s).unwrap_or(1)))
        .unwrap_or(cfg.lease_duration);
    let ours = holder.as_deref() == Some(cfg.identity.as_str());
    let expired = holder.is_none()
        || observed
            .as_ref()
            .is_some_and(|o| o.since.elapsed() >= duration);
    if !ours && !expired {
        return Ok(Outcome::Following);
    }
    let mut new_spec = spec.clone();
    if !ours {
        new_spec.acquire_time = Some(MicroTime(now));
        new_spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        new_spec.holder_identity = Some(cfg.identity.clone());
    }
    new_spec.renew_time = Some(MicroTime(now));
    new_spec.lease_duration_seconds = Some(secs(cfg.lease_duration));
    lease.spec = Some(new_spec);
    let meta = lease_meta(cfg);
    lease
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(meta.annotations.unwrap_or_default());
    lease
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(meta.labels.unwrap_or_default());
    // `replace` sends the resourceVersion we read: a concurrent writer makes it conflict.
    wrote(Verb::Replace);
    match api
        .replace(&cfg.lease_name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => {
            if !ours {
                info!(identity = %cfg.identity, previous = holder.as_deref().unwrap_or(""), "took over an expired lease");
            }
            Ok(Outcome::Leading)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Following),
        Err(e) => Err(err(e)),
    }
}

async fn release(
    api: &Api<Lease>,
    cfg: &LeaderConfig,
    wrote: &impl Fn(Verb),
) -> Result<(), LeaderError> {
    let err = |e| LeaderError::Api(cfg.lease_name.clone(), e);
    let Some(mut lease) = api.get_opt(&cfg.lease_name).await.map_err(err)? else {
        return Ok(());
    };
    let Some(spec) = lease.spec.as_mut() else {
        return Ok(());
    };
    if spec.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    wrote(Verb::Replace);
    api.replace(&cfg.lease_name, &PostParams::default(), &lease)
        .await
        .map_err(err)?;
    Ok(())
}
