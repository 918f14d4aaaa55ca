//! A sync's writes of its tenants: each tenant's `Tenant`, and, once its
//! lifecycle saga lets it, its AgentFS and Rollout spec.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;
use tracing::info;

use super::super::Error;
use super::SyncCtx;
use crate::cluster::apply::Ctx;
use crate::cluster::metrics::Controller as Writer;
use crate::crd::tenant::{Tenant, TenantResourceSpec};
use crate::crd::{Fleet as FleetCr, Rollout, RolloutSpec};
use crate::fleet;
use crate::meta::{
    ANNOTATION_APPLIED_HASH, LABEL_FLEET, LABEL_FLEET_NAMESPACE, LABEL_TENANT, ROLLOUT_NAME,
};
use crate::rollout::actuate::follows_fleet;
use crate::rollout::desired::TenantTarget;
use crate::rollout::workload::agentfs_body;

/// Each tenant's `Tenant` first (its lifecycle saga enrolls and
/// provisions the namespace and mints its keys), and `offboarding` on the
/// Tenants of this Fleet that git no longer has. Then, for each tenant
/// whose saga has done the steps before its rollout
/// ([`crate::tenant::plan::rollout_may_run`]), its AgentFS (they exist
/// before the Agents that mount them) and its Rollout spec where it
/// changed. Agents and Tools are applied only by sagas. Returns how many
/// Rollout specs changed.
pub(super) async fn apply(
    ctx: &SyncCtx,
    f: &FleetCr,
    fleet_ns: &str,
    loaded: &fleet::Fleet,
    tenants: &BTreeMap<String, Arc<TenantTarget>>,
    commit: &str,
) -> Result<usize, Error> {
    let op = &ctx.op;
    let fleet = f.name_any();
    let apply_failed = |object: String| move |source| Error::Apply { object, source };
    let live = fleet_tenants(op, &fleet, fleet_ns).await?;
    let mut changed = 0;
    for (name, t) in &live {
        if tenants.contains_key(name) || t.spec.offboarding {
            continue;
        }
        let mut gone = Tenant::new(
            name,
            TenantResourceSpec {
                offboarding: true,
                ..t.spec.clone()
            },
        );
        gone.metadata.labels = Some(tenant_labels(name, &fleet, fleet_ns));
        op.apply_cluster(Writer::Rollout, &gone)
            .await
            .map_err(apply_failed(format!("Tenant {name}")))?;
        info!(tenant = %name, "tenant folder gone from git: offboarding");
    }
    for (tenant, target) in tenants {
        let spec = TenantResourceSpec {
            settings: target.desired.settings.clone(),
            tier: target
                .desired
                .settings
                .tier
                .as_deref()
                .and_then(|n| loaded.tiers.as_ref()?.value.tier(n).cloned())
                // Its backup default is the sync's to render into the
                // AgentFS; the lifecycle saga has nothing to do for it.
                .map(|tier| crate::crd::tenant::tiers::Tier {
                    backup: None,
                    ..tier
                }),
            commit: Some(commit.to_owned()),
            offboarding: false,
        };
        let hash = crate::tenant::plan::settings_hash(&spec);
        let current = live.get(tenant);
        let same_tenant = current.is_some_and(|t| {
            !t.spec.offboarding && t.spec.settings == spec.settings && t.spec.tier == spec.tier
        });
        if !same_tenant {
            let mut t = Tenant::new(tenant, spec);
            t.metadata.labels = Some(tenant_labels(tenant, &fleet, fleet_ns));
            op.apply_cluster(Writer::Rollout, &t)
                .await
                .map_err(apply_failed(format!("Tenant {tenant}")))?;
            // Its saga starts for these settings; the Rollout waits for it.
            continue;
        }
        if !crate::tenant::plan::rollout_may_run(&hash, current.and_then(|t| t.status.as_ref())) {
            continue;
        }
        for fs in &target.desired.filesystems {
            let name = fs.name_any();
            let (obj, hash) = agentfs_body(fs, tenant);
            let key = format!("AgentFS/{tenant}/{name}");
            // After a restart the cache tells the object is applied already.
            let cached = op
                .filesystems
                .get(&ObjectRef::new(&name).within(tenant))
                .is_some_and(|live| live.annotations().get(ANNOTATION_APPLIED_HASH) == Some(&hash));
            if cached {
                ctx.state.remember(key.clone(), hash.clone());
            }
            if !ctx.state.unchanged(&key, &hash) {
                op.apply(Writer::Rollout, &obj)
                    .await
                    .map_err(apply_failed(format!("AgentFS {tenant}/{name}")))?;
                ctx.state.remember(key, hash);
            }
        }
        let spec = RolloutSpec {
            tenant: tenant.clone(),
            wave: target.wave.as_str().to_owned(),
            release: target.release.metadata.name.clone(),
            commit: commit.to_owned(),
            desired_hash: target.desired.hash.clone(),
            settings: target.desired.settings.clone(),
        };
        let live = ctx
            .rollouts
            .get(&ObjectRef::new(ROLLOUT_NAME).within(tenant));
        // A Rollout from before the namespace label is applied again once.
        let same = live.as_ref().is_some_and(|r| {
            follows_fleet(r.labels(), &fleet, fleet_ns)
                && r.spec.settings == spec.settings
                && r.spec.tenant == spec.tenant
                && r.spec.wave == spec.wave
                && r.spec.release == spec.release
                && r.spec.desired_hash == spec.desired_hash
        });
        if same {
            continue;
        }
        let mut ro = Rollout::new(ROLLOUT_NAME, spec);
        ro.metadata.namespace = Some(tenant.clone());
        ro.metadata.labels = Some(BTreeMap::from([
            (LABEL_TENANT.to_owned(), tenant.clone()),
            (LABEL_FLEET.to_owned(), fleet.clone()),
            (LABEL_FLEET_NAMESPACE.to_owned(), fleet_ns.to_owned()),
            (
                crate::meta::LABEL_MANAGED_BY.to_owned(),
                crate::meta::MANAGED_BY.to_owned(),
            ),
        ]));
        op.apply(Writer::Rollout, &ro)
            .await
            .map_err(apply_failed(format!("Rollout {tenant}/{ROLLOUT_NAME}")))?;
        changed += 1;
    }
    Ok(changed)
}

/// The Tenants the Fleet `fleet` in `fleet_ns` owns, by name: from the
/// operator's Tenant cache (no LIST per sync), or listed when the operator
/// runs without one. A cache a moment behind the sync's own last write
/// costs at most a Tenant applied again unchanged.
pub(super) async fn fleet_tenants(
    op: &Ctx,
    fleet: &str,
    fleet_ns: &str,
) -> Result<BTreeMap<String, Tenant>, Error> {
    let owned = |t: &Tenant| follows_fleet(t.labels(), fleet, fleet_ns);
    if let Some(cache) = &op.tenants {
        return Ok(cache
            .state()
            .iter()
            .filter(|t| owned(t))
            .map(|t| (t.name_any(), Tenant::clone(t)))
            .collect());
    }
    let selector = format!("{LABEL_FLEET}={fleet},{LABEL_FLEET_NAMESPACE}={fleet_ns}");
    Ok(Api::<Tenant>::all(op.client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::Tenants { source })?
        .items
        .into_iter()
        .map(|t| (t.name_any(), t))
        .collect())
}

fn tenant_labels(tenant: &str, fleet: &str, fleet_ns: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_TENANT.to_owned(), tenant.to_owned()),
        (LABEL_FLEET.to_owned(), fleet.to_owned()),
        (LABEL_FLEET_NAMESPACE.to_owned(), fleet_ns.to_owned()),
        (
            crate::meta::LABEL_MANAGED_BY.to_owned(),
            crate::meta::MANAGED_BY.to_owned(),
        ),
    ])
}
