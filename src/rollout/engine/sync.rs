//! Following Fleets: the operator's one Fleet watch (no listing loop). A
//! Fleet is synced when it appears, when its spec changes, when its
//! `autonomic.sh/sync-requested-at` annotation changes (the push receiver
//! and `exo release promote` set it), and then every `spec.interval`.
//!
//! A sync fetches, checks the commits' signatures when the Fleet asks
//! (`spec.verify`, [`signed`]; a refused commit is not even checked out),
//! loads, lints and assigns tenants to releases; then it
//! renders each tenant's desired state and writes what changed: the
//! tenant's `Tenant` (its lifecycle saga creates the namespace), and, once
//! that saga lets it, its AgentFS and Rollout spec (wave, release,
//! `desiredHash`, and the commit that produced them). A tenant whose
//! rendering did not change gets no write, so a commit that touches one
//! tenant moves only that tenant's saga.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Predicate, predicates};
use tracing::{info, warn};

use super::{
    EngineConfig, Error, Loaded, Policy, State, assign, namespace_of, now, short, source_for,
};
use crate::cluster::apply::Ctx;
use crate::cluster::conditions::keep_transitions;
use crate::cluster::feeds::{Hub, Touch};
use crate::cluster::metrics::Controller as Writer;
use crate::crd::{Fleet as FleetCr, FleetStatus, Rollout};
use crate::release::{WaveName, lint};
use crate::rollout::desired::{Earlier, TenantDesired, TenantTarget};

struct SyncCtx {
    op: Arc<Ctx>,
    cfg: EngineConfig,
    state: Arc<State>,
    rollouts: Store<Rollout>,
}

/// The Fleet controller of one leadership term, over the operator's one
/// Fleet watch (`cluster::feeds`): `fleets` is its cache, and the Fleet
/// hub wakes it for each Fleet that [`Asked`] lets through.
pub(super) async fn run(
    op: Arc<Ctx>,
    cfg: EngineConfig,
    state: Arc<State>,
    fleets: Store<FleetCr>,
    rollouts: Store<Rollout>,
) {
    let asked = asked(&op.hubs.fleets, fleets.clone());
    let ctx = Arc::new(SyncCtx {
        op,
        cfg,
        state,
        rollouts,
    });
    Controller::for_stream(futures::stream::pending(), fleets)
        .reconcile_on(asked)
        .run(
            reconcile,
            |_, e: &Error, _| {
                warn!(error = %e, "fleet sync failed");
                Action::requeue(Duration::from_secs(5))
            },
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// The Fleets that ask for a sync, from the hub: every Fleet in the cache
/// when the term starts (the hub is subscribed first, so no change falls
/// in between), then each one [`Asked`] lets through, also after a relist.
fn asked(
    hub: &Hub<FleetCr>,
    fleets: Store<FleetCr>,
) -> impl futures::Stream<Item = ObjectRef<FleetCr>> + Send + 'static {
    let touches = hub.touches();
    let mut asked = Asked::default();
    futures::stream::once(futures::future::ready(Touch::Relisted))
        .chain(touches)
        .flat_map(move |t| {
            let refs: Vec<ObjectRef<FleetCr>> = match t {
                Touch::Applied(r) => fleets
                    .get(&r)
                    .filter(|f| asked.asks(f))
                    .map(|_| r)
                    .into_iter()
                    .collect(),
                Touch::Deleted(f) => {
                    asked.forget(&f);
                    Vec::new()
                }
                Touch::Relisted => fleets
                    .state()
                    .iter()
                    .filter(|f| asked.asks(f))
                    .map(|f| ObjectRef::from_obj(f.as_ref()))
                    .collect(),
            };
            futures::stream::iter(refs)
        })
}

/// What asks for a sync: a Fleet not seen before, a new generation (the
/// spec) or new annotations (a sync request). The engine's own status
/// writes do not, or every sync would schedule the next one; the
/// `spec.interval` requeue is the controller's own.
#[derive(Default)]
struct Asked(HashMap<ObjectRef<FleetCr>, Option<u64>>);

impl Asked {
    /// Whether `f` asks for a sync since it was last looked at.
    fn asks(&mut self, f: &FleetCr) -> bool {
        let key = predicates::generation
            .combine(predicates::annotations)
            .hash_property(f);
        self.0.insert(ObjectRef::from_obj(f), key) != Some(key)
    }

    fn forget(&mut self, f: &FleetCr) {
        self.0.remove(&ObjectRef::from_obj(f));
    }
}

async fn reconcile(f: Arc<FleetCr>, ctx: Arc<SyncCtx>) -> Result<Action, Error> {
    let ns = namespace_of(f.as_ref())?;
    let policy = match Policy::of(&f) {
        Ok(p) => p,
        Err(e) => {
            // Nothing is fetched or applied for a spec that does not parse;
            // the condition names the field. A spec change wakes it again.
            let mut status = f.status.clone().unwrap_or_default();
            let message = format!("Fleet {ns}/{}: {e}", f.name_any());
            warn!(%message, "fleet spec refused");
            fetch::set_verified(&mut status, signed::kept(&f));
            fetch::set_ready(
                &mut status,
                ready(false, e.reason(), message, f.metadata.generation),
            );
            set_fleet_status(&ctx.op, &f, &ns, status).await;
            return Ok(Action::await_change());
        }
    };
    let key = format!("{ns}/{}", f.name_any());
    let this = Fetch::of(&f, std::time::Instant::now());
    let last = ctx
        .state
        .fetches
        .lock()
        .ok()
        .and_then(|m| m.get(&key).cloned());
    let prev = ctx.state.loaded.read().await.get(&key).cloned();
    if let Some(prev) = prev.filter(|p| p.policy == policy && !policy.suspend)
        && let Some(left) = this.not_due(last.as_ref(), policy.interval)
    {
        // Woken by no sync request, no spec change and before the
        // interval (a tenant's rollout gate opened, an annotation): the
        // commit it has, applied again, and nothing fetched.
        if let Err(e) =
            tenants::apply(&ctx, &f, &ns, &prev.fleet, &prev.tenants, &prev.commit).await
        {
            warn!(fleet = %f.name_any(), error = %e, "applying the fetched commit again failed");
        }
        return Ok(Action::requeue(left));
    }
    if let Ok(mut m) = ctx.state.fetches.lock() {
        m.insert(key.clone(), this);
    }
    let prev = ctx.state.loaded.read().await.get(&key).cloned();
    if let Some(loaded) = sync_one(&ctx, &f, &ns, policy, prev).await {
        ctx.state.loaded.write().await.insert(key, loaded);
    } else if let Some(prev) = ctx.state.loaded.read().await.get(&key).cloned() {
        // A refused commit keeps the last good one, with today's knobs
        // (suspend in particular must hold even when git is broken).
        if prev.policy != policy {
            let kept = Loaded {
                commit: prev.commit.clone(),
                fleet: prev.fleet.clone(),
                policy,
                tenants: prev.tenants.clone(),
                ids: prev.ids.clone(),
            };
            ctx.state.loaded.write().await.insert(key, Arc::new(kept));
        }
    }
    if ctx.cfg.cluster.get().is_none() {
        // Until the control plane's welcome names this cluster, a fleet
        // that places tenants on clusters is looked at again soon.
        return Ok(Action::requeue(policy.interval.min(Duration::from_secs(5))));
    }
    Ok(Action::requeue(policy.interval))
}

/// A fetch of a Fleet's repository: when, and for which spec and sync
/// request, so a wake that asks for neither is told apart.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fetch {
    at: std::time::Instant,
    generation: Option<i64>,
    requested: Option<String>,
}

impl Fetch {
    fn of(f: &FleetCr, at: std::time::Instant) -> Self {
        Fetch {
            at,
            generation: f.metadata.generation,
            requested: f
                .annotations()
                .get(crate::meta::ANNOTATION_SYNC_REQUESTED)
                .cloned(),
        }
    }

    /// `Some(time left)` when a fetch now is not due: the last one was for
    /// the same spec and sync request, less than `interval` ago. Pure.
    fn not_due(&self, last: Option<&Fetch>, interval: Duration) -> Option<Duration> {
        let last = last?;
        if last.generation != self.generation || last.requested != self.requested {
            return None;
        }
        let since = self.at.checked_duration_since(last.at)?;
        interval.checked_sub(since).filter(|left| !left.is_zero())
    }
}

fn ready(status: bool, reason: &str, message: String, generation: Option<i64>) -> Condition {
    Condition {
        type_: "Ready".into(),
        status: if status { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: now(),
        observed_generation: generation,
    }
}

/// Writes the Fleet's status when it says something new. `lastSyncTime`
/// alone is not news: a steady fleet costs no write per interval, and
/// `lastSyncTime` is the time of the last sync that changed the status.
async fn set_fleet_status(op: &Ctx, f: &FleetCr, ns: &str, mut status: FleetStatus) {
    let old = f.status.clone().unwrap_or_default();
    let same_condition = |a: &[Condition], b: &[Condition]| {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.type_ == y.type_
                    && x.status == y.status
                    && x.reason == y.reason
                    && x.message == y.message
                    && x.observed_generation == y.observed_generation
            })
    };
    if old.applied_commit == status.applied_commit
        && old.fetched_commit == status.fetched_commit
        && old.waves == status.waves
        && old.pinned_baselines == status.pinned_baselines
        && same_condition(&old.conditions, &status.conditions)
    {
        return;
    }
    keep_transitions(&mut status.conditions, &old.conditions);
    status.last_sync_time = Some(now());
    if let Err(e) = op
        .apply_status::<FleetCr>(Writer::Rollout, ns, &f.name_any(), &status)
        .await
    {
        warn!(fleet = %f.name_any(), error = %e, "cannot write Fleet status");
    }
}

/// Fetches, checks and applies one Fleet. Returns the loaded fleet when it
/// was good; on any failure the Fleet's status says why and nothing changes.
async fn sync_one(
    ctx: &SyncCtx,
    f: &FleetCr,
    ns: &str,
    policy: Policy,
    prev: Option<Arc<Loaded>>,
) -> Option<Arc<Loaded>> {
    let prev = prev.as_deref();
    let op = &ctx.op;
    let mut status = f.status.clone().unwrap_or_default();
    let generation = f.metadata.generation;
    // `Verified` as it was while the Fleet verifies commits (a sync that
    // stops before the check keeps it), gone when it does not.
    fetch::set_verified(&mut status, signed::kept(f));
    let fail = |mut status: FleetStatus, reason: &str, message: String| {
        warn!(fleet = %f.name_any(), reason, %message, "fleet sync refused");
        fetch::set_ready(&mut status, ready(false, reason, message, generation));
        status
    };
    let source = match source_for(&op.client, f, ns).await {
        Ok(s) => s,
        Err(e) => {
            set_fleet_status(op, f, ns, fail(status, e.reason(), e.to_string())).await;
            return None;
        }
    };
    let mut clock = incremental::Phases::start();
    // Fetch, verify and checkout timed apart: the first is the git
    // transport's, the last grows with what the commit changed.
    let checkout = match fetch::fetch_verified(
        ctx,
        f,
        ns,
        policy,
        source,
        prev,
        &mut status,
        &mut clock,
    )
    .await
    {
        Ok(c) => c,
        Err(stop) => {
            set_fleet_status(op, f, ns, fail(status, stop.reason, stop.message)).await;
            return None;
        }
    };
    let loaded = match incremental::load(&checkout, prev) {
        Ok(fl) => fl,
        Err(e) => {
            let m = format!(
                "commit {}: {}",
                short(&checkout.commit),
                e.to_string().replace('\n', "; ")
            );
            set_fleet_status(op, f, ns, fail(status, "InvalidFleet", m)).await;
            return None;
        }
    };
    clock.mark("load");
    let findings = lint::lint_fleet(&loaded);
    clock.mark("lint");
    if !findings.is_empty() {
        let m = format!(
            "commit {}: {} lint finding(s): {}",
            short(&checkout.commit),
            findings.len(),
            findings
                .iter()
                .take(3)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
        set_fleet_status(op, f, ns, fail(status, "LintFailed", m)).await;
        return None;
    }
    let assignment = match assign(&loaded) {
        Ok(a) => a,
        Err(e) => {
            set_fleet_status(op, f, ns, fail(status, e.reason(), e.to_string())).await;
            return None;
        }
    };
    // A fleet that spans clusters: only the tenants placed on this one.
    let cluster = ctx.cfg.cluster.get();
    let here = match placed::placed_here(&loaded, cluster.as_deref()) {
        Ok(h) => h,
        Err(e) => {
            let m = format!("commit {}: {e}", short(&checkout.commit));
            set_fleet_status(op, f, ns, fail(status, e.reason(), m)).await;
            return None;
        }
    };
    // Tenants moving off this cluster with `move: verify-first` stay
    // until the control plane sees them verified where they go.
    let held = match &here {
        Some(h) => placed::held_here(ctx, f, ns, &loaded, h, &assignment).await,
        None => BTreeMap::new(),
    };
    let mut tenants = BTreeMap::new();
    for (tenant, wave, release) in &assignment {
        if here.as_ref().is_some_and(|h| !h.contains(tenant)) && !held.contains_key(tenant) {
            continue;
        }
        let (Some(t), Some(r)) = (loaded.tenants.get(tenant), loaded.release(release)) else {
            continue;
        };
        // The tier's default backup policy for the tenant's AgentFS that
        // declare none: a change of it renders the tenant again.
        let backup_default = t
            .settings
            .tier
            .as_deref()
            .and_then(|n| loaded.tiers.as_ref()?.value.tier(n))
            .and_then(|tier| tier.backup.as_ref());
        let last = incremental::target(prev, &checkout, tenant, *wave, r)
            .filter(|last| last.desired.backup_default.as_ref() == backup_default);
        let target = last.unwrap_or_else(|| {
            // The folder changed: its unchanged files' objects are taken
            // over from the last render, not rendered again.
            let same_file =
                |p: &Path| incremental::unchanged(prev, &checkout.ids, &p.to_string_lossy());
            let earlier = prev
                .and_then(|p| p.tenants.get(tenant))
                .map(|last| Earlier {
                    target: last,
                    same_file: &same_file,
                });
            Arc::new(TenantTarget {
                wave: *wave,
                release: r.value.clone(),
                desired: TenantDesired::render(t, &r.value, backup_default, earlier),
            })
        });
        tenants.insert(tenant.clone(), target);
    }
    clock.mark("render");
    if policy.suspend {
        let message = format!(
            "suspended: commit {} fetched, nothing applied, pruned or healed until resumed",
            short(&checkout.commit)
        );
        fetch::set_ready(&mut status, ready(true, "Suspended", message, generation));
        set_fleet_status(op, f, ns, status).await;
        return Some(Arc::new(Loaded {
            commit: checkout.commit,
            fleet: loaded,
            policy,
            tenants,
            ids: checkout.ids,
        }));
    }
    let fresh = Arc::new(Loaded {
        commit: checkout.commit.clone(),
        fleet: loaded,
        policy,
        tenants,
        ids: checkout.ids.clone(),
    });
    let key = format!("{ns}/{}", f.name_any());
    // What the waves' tenants run, before this commit's specs are written.
    let wave_tenants = moves::wave_tenants(&ctx.rollouts, &assignment);
    let applied = ctx
        .state
        .publish_then(key.clone(), fresh.clone(), |l| async move {
            tenants::apply(ctx, f, ns, &l.fleet, &l.tenants, &l.commit).await
        })
        .await;
    clock.mark("apply");
    let loaded = &fresh.fleet;
    let changed = match applied {
        Ok(n) => n,
        Err(e) => {
            set_fleet_status(op, f, ns, fail(status, e.reason(), e.to_string())).await;
            return None;
        }
    };
    if status.applied_commit.as_deref() != Some(checkout.commit.as_str()) {
        info!(fleet = %f.name_any(), commit = %short(&checkout.commit), tenants_changed = changed, ms = %clock, "applied fleet commit");
    }
    if let Some(w) = &loaded.waves {
        moves::tell(
            &ctx.state,
            &ctx.cfg.notifier,
            &key,
            f,
            &w.value.spec,
            &wave_tenants,
            &checkout.commit,
        );
    }
    status.applied_commit = Some(checkout.commit.clone());
    status.pinned_baselines = loaded
        .releases
        .iter()
        .flat_map(|r| r.value.spec.config_maps.iter().map(|c| c.version.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    status.waves = loaded
        .waves
        .as_ref()
        .map(|w| {
            WaveName::ORDER
                .iter()
                .map(|n| (n.to_string(), w.value.spec.get(*n).release.clone()))
                .collect()
        })
        .unwrap_or_default();
    let message = match (&here, &cluster) {
        (Some(h), Some(c)) => format!(
            "applied {} to {} tenant(s) placed on cluster {c} (of {} in the fleet){}",
            short(&checkout.commit),
            h.len(),
            assignment.len(),
            held.values()
                .map(|why| format!("; {why}"))
                .collect::<String>()
        ),
        _ => format!(
            "applied {} to {} tenant(s)",
            short(&checkout.commit),
            assignment.len()
        ),
    };
    fetch::set_ready(&mut status, ready(true, "Applied", message, generation));
    set_fleet_status(op, f, ns, status).await;
    Some(fresh)
}

impl State {
    /// Makes `loaded` the Fleet `key`'s sync, then runs `apply` on it (the
    /// writes of its Tenants, AgentFS and Rollout specs). In this order,
    /// so a Rollout woken by the spec the apply writes finds its target
    /// already here, instead of finding the last commit's and looking
    /// again later. An apply that fails keeps it: the commit passed its
    /// checks, and the next sync writes what is missing.
    async fn publish_then<T, F, Fut>(&self, key: String, loaded: Arc<Loaded>, apply: F) -> T
    where
        F: FnOnce(Arc<Loaded>) -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        self.loaded.write().await.insert(key, loaded.clone());
        apply(loaded).await
    }

    /// Whether `body` differs from what this process last applied as `key`
    /// (and, if so, remembers it as applied once `apply` succeeds).
    fn unchanged(&self, key: &str, hash: &str) -> bool {
        self.applied
            .lock()
            .map(|m| m.get(key).map(String::as_str) == Some(hash))
            .unwrap_or(false)
    }

    fn remember(&self, key: String, hash: String) {
        if let Ok(mut m) = self.applied.lock() {
            m.insert(key, hash);
        }
    }
}

mod fetch;
mod incremental;
mod moves;
mod placed;
pub(super) mod signed;
mod tenants;
#[cfg(test)]
mod tests;
