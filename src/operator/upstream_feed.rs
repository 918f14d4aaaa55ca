//! The upstream connection's discovery, read from the operator's own caches
//! (`feeds`): under `operator run` the process keeps one watch per kind.
//!
//! Per kind, a relay subscribes to the cache's [`Hub`] first, waits for the
//! first list, and sends the whole cache as a list (`Init`, `InitApply`s,
//! `InitDone`); then each change, read from the cache. A relist of the
//! operator's watch, or a relay that fell behind the hub, sends the whole
//! cache again, and the upstream tracker turns the difference into deltas.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::runtime::reflector::{self, Store};
use serde::Serialize;
use tokio::sync::{broadcast, mpsc, watch};

use crate::cluster::apply::Ctx;
use crate::cluster::feeds::{Hub, Touch};
use crate::meta::{LABEL_MANAGED_BY, MANAGED_BY};
use crate::upstream::packed::encode;
use crate::upstream::tracker::WatchEvent;
use crate::upstream::{Feed, UpstreamConfig};
use crate::wire::ResourceKind;

type Tx = mpsc::Sender<(ResourceKind, WatchEvent)>;

/// The kinds the operator's caches can feed for `cfg`: Agents, Tools,
/// AgentFS, Rollouts, Tenants, Apps and AnalysisRuns always; Pods when the
/// upstream streams exactly the operator's own (the default selector), else
/// the connection watches Pods itself. Rollouts, Tenants, Apps or
/// AnalysisRuns the operator cannot list (no CRD or RBAC) are fed as an
/// empty list: the connection does not try a watch the operator could not
/// have either.
pub fn feed(ctx: &Arc<Ctx>, cfg: &UpstreamConfig) -> Feed {
    let (tx, events) = mpsc::channel(1024);
    let synced = ctx.caches_synced.clone();
    let mut kinds = vec![
        ResourceKind::Agent,
        ResourceKind::Tool,
        ResourceKind::AgentFS,
        ResourceKind::Rollout,
        ResourceKind::Tenant,
        ResourceKind::App,
        ResourceKind::AnalysisRun,
    ];
    relay(
        ResourceKind::Agent,
        ctx.agents.clone(),
        &ctx.hubs.agents,
        &tx,
        &synced,
    );
    relay(
        ResourceKind::Tool,
        ctx.tools.clone(),
        &ctx.hubs.tools,
        &tx,
        &synced,
    );
    relay(
        ResourceKind::AgentFS,
        ctx.filesystems.clone(),
        &ctx.hubs.filesystems,
        &tx,
        &synced,
    );
    // Unwatched kinds relay a store no watch writes: it lists empty.
    let rollouts = watched_or_empty(&ctx.rollouts);
    relay(
        ResourceKind::Rollout,
        rollouts,
        &ctx.hubs.rollouts,
        &tx,
        &synced,
    );
    let tenants = watched_or_empty(&ctx.tenants);
    relay(
        ResourceKind::Tenant,
        tenants,
        &ctx.hubs.tenants,
        &tx,
        &synced,
    );
    let apps = watched_or_empty(&ctx.apps);
    relay(ResourceKind::App, apps, &ctx.hubs.apps, &tx, &synced);
    let runs = watched_or_empty(&ctx.analysis_runs);
    let hub = &ctx.hubs.analysis_runs;
    relay(ResourceKind::AnalysisRun, runs, hub, &tx, &synced);
    if cfg.pod_selector == format!("{LABEL_MANAGED_BY}={MANAGED_BY}") {
        kinds.push(ResourceKind::Pod);
        relay::<Pod>(
            ResourceKind::Pod,
            ctx.pods.clone(),
            &ctx.hubs.pods,
            &tx,
            &synced,
        );
    }
    Feed { kinds, events }
}

/// The cache of an optional kind, or (not watched) a store no watch
/// writes, which lists empty.
fn watched_or_empty<K>(store: &Option<Store<K>>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store.clone().unwrap_or_else(|| reflector::store::<K>().0)
}

/// Spawns the relay of one kind; it ends when the feed's receiver is gone.
fn relay<K>(
    kind: ResourceKind,
    store: Store<K>,
    hub: &Hub<K>,
    tx: &Tx,
    synced: &watch::Receiver<bool>,
) where
    K: Resource<DynamicType = ()> + Clone + Serialize + Send + Sync + 'static,
{
    // Subscribed before the first read of the cache: no change is missed.
    let touches = hub.subscribe();
    let (tx, mut synced) = (tx.clone(), synced.clone());
    tokio::spawn(async move {
        tokio::select! {
            () = tx.closed() => {}
            () = async {
                if synced.wait_for(|s| *s).await.is_ok() {
                    pass_on(kind, &store, touches, &tx).await;
                }
            } => {}
        }
    });
}

async fn pass_on<K>(
    kind: ResourceKind,
    store: &Store<K>,
    mut touches: broadcast::Receiver<Touch<K>>,
    tx: &Tx,
) where
    K: Resource<DynamicType = ()> + Clone + Serialize,
{
    if !list(kind, store, tx).await {
        return;
    }
    loop {
        let sent = match touches.recv().await {
            Ok(Touch::Applied(r)) => match store.get(&r).and_then(|o| encode(kind, &*o)) {
                Some(w) => tx.send((kind, WatchEvent::Apply(w))).await.is_ok(),
                // Deleted since; its `Deleted` follows.
                None => true,
            },
            Ok(Touch::Deleted(o)) => match encode(kind, &*o) {
                Some(w) => tx.send((kind, WatchEvent::Delete(w))).await.is_ok(),
                None => true,
            },
            Ok(Touch::Relisted) | Err(broadcast::error::RecvError::Lagged(_)) => {
                list(kind, store, tx).await
            }
            Err(broadcast::error::RecvError::Closed) => false,
        };
        if !sent {
            return;
        }
    }
}

/// Sends the whole cache as one list; `false` once the receiver is gone.
async fn list<K>(kind: ResourceKind, store: &Store<K>, tx: &Tx) -> bool
where
    K: Resource<DynamicType = ()> + Clone + Serialize,
{
    if tx.send((kind, WatchEvent::Init)).await.is_err() {
        return false;
    }
    for o in store.state() {
        if let Some(w) = encode(kind, &*o)
            && tx.send((kind, WatchEvent::InitApply(w))).await.is_err()
        {
            return false;
        }
    }
    tx.send((kind, WatchEvent::InitDone)).await.is_ok()
}
