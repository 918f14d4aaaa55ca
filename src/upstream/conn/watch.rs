//! The connection's own watches, for `operator connect` (which has no
//! caches) and for the kinds a [`super::Feed`] does not carry: each turns
//! watch events into the wire form the tracker folds.
//!
//! Rollouts, Tenants, Apps and AnalysisRuns are optional: where they cannot
//! be listed (the CRD is not installed, or RBAC does not allow it) they are
//! not watched and not waited for, and the other kinds stream as before.
//! AnalysisRuns live in the Fleet's namespace: the watched one, as for
//! Tenants (`operator run` watches them where it follows Fleets). Tenants are
//! cluster-scoped: a connection that watches one namespace streams only
//! the Tenants of that namespace's Fleets (label
//! `autonomic.sh/fleet-namespace`), as the tenant engine drives only those.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::warn;

use super::WIRE_KINDS;
use crate::cluster::error::is_unlistable;
use crate::cluster::feeds::fleet_tenants;
use crate::crd::tenant::Tenant;
use crate::crd::{Agent, AgentFS, AnalysisRun, App, Rollout, Tool};
use crate::upstream::config::UpstreamConfig;
use crate::upstream::packed::encode;
use crate::upstream::tracker::WatchEvent;
use crate::wire::ResourceKind;

/// Starts a watch of each wire kind not in `fed`, and returns the kinds it
/// watches (the ones the first snapshot waits for).
pub(super) async fn spawn_own(
    set: &mut JoinSet<()>,
    client: &kube::Client,
    cfg: &UpstreamConfig,
    fed: &[ResourceKind],
    tx: mpsc::Sender<(ResourceKind, WatchEvent)>,
) -> Vec<ResourceKind> {
    let ns = cfg.namespace.as_deref();
    let wc = || watcher::Config::default();
    let mut kinds = Vec::new();
    for kind in WIRE_KINDS.into_iter().filter(|k| !fed.contains(k)) {
        let tx = tx.clone();
        match kind {
            ResourceKind::Agent => spawn_watch(set, api::<Agent>(client, ns), kind, wc(), tx),
            ResourceKind::Tool => spawn_watch(set, api::<Tool>(client, ns), kind, wc(), tx),
            ResourceKind::AgentFS => spawn_watch(set, api::<AgentFS>(client, ns), kind, wc(), tx),
            ResourceKind::Pod => {
                let pods = wc().labels(&cfg.pod_selector);
                spawn_watch(set, api::<Pod>(client, ns), kind, pods, tx);
            }
            ResourceKind::Rollout => {
                if !spawn_listed(set, api::<Rollout>(client, ns), kind, tx).await {
                    continue;
                }
            }
            ResourceKind::App => {
                if !spawn_listed(set, api::<App>(client, ns), kind, tx).await {
                    continue;
                }
            }
            ResourceKind::AnalysisRun => {
                if !spawn_listed(set, api::<AnalysisRun>(client, ns), kind, tx).await {
                    continue;
                }
            }
            ResourceKind::Tenant => {
                let tenants = Api::<Tenant>::all(client.clone());
                let selector = ns.map(fleet_tenants);
                let (mut lp, mut twc) = (ListParams::default(), wc());
                if let Some(s) = &selector {
                    (lp, twc) = (lp.labels(s), twc.labels(s));
                }
                if !listable(&tenants, &lp).await {
                    continue;
                }
                spawn_watch(set, tenants, kind, twc, tx);
            }
        }
        kinds.push(kind);
    }
    kinds
}

/// Watches every `K` of `api` where `K` can be listed ([`listable`]);
/// whether it does.
async fn spawn_listed<K>(
    set: &mut JoinSet<()>,
    api: Api<K>,
    kind: ResourceKind,
    tx: mpsc::Sender<(ResourceKind, WatchEvent)>,
) -> bool
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug
        + Send
        + 'static,
{
    if !listable(&api, &ListParams::default()).await {
        return false;
    }
    spawn_watch(set, api, kind, watcher::Config::default(), tx);
    true
}

/// Whether `K` (Rollouts, Tenants, Apps, AnalysisRuns) can be listed; a refusal other than "no
/// such CRD" or "forbidden" (the apiserver is away, say) is left to the
/// watch's retries.
async fn listable<K>(api: &Api<K>, lp: &ListParams) -> bool
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let crd = format!("{}.{}", K::plural(&()), K::group(&()));
    let kind = K::kind(&());
    match api.list_metadata(&lp.clone().limit(1)).await {
        Ok(_) => true,
        Err(e) if is_unlistable(&e) => {
            warn!(%crd, error = %e, "{kind}s cannot be listed (CRD not installed, or no RBAC): not streamed");
            false
        }
        Err(e) => {
            warn!(%crd, error = %e, "cannot list {kind}s yet; watching them anyway");
            true
        }
    }
}

pub(super) fn spawn_watch<K>(
    set: &mut JoinSet<()>,
    api: Api<K>,
    kind: ResourceKind,
    wc: watcher::Config,
    tx: mpsc::Sender<(ResourceKind, WatchEvent)>,
) where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    set.spawn(async move {
        let mut stream = watcher(api, wc).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => {
                    warn!(kind = kind.as_str(), error = %e, "watch failed; retrying with backoff");
                    continue;
                }
            };
            let conv = |o: &K| encode(kind, o);
            let mapped = match ev {
                watcher::Event::Init => Some(WatchEvent::Init),
                watcher::Event::InitApply(o) => conv(&o).map(WatchEvent::InitApply),
                watcher::Event::InitDone => Some(WatchEvent::InitDone),
                watcher::Event::Apply(o) => conv(&o).map(WatchEvent::Apply),
                watcher::Event::Delete(o) => conv(&o).map(WatchEvent::Delete),
            };
            if let Some(m) = mapped
                && tx.send((kind, m)).await.is_err()
            {
                break;
            }
        }
    });
}

pub(super) fn api<K>(client: &kube::Client, ns: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
