//! The operator's watch feeds: one watch per kind, each filling the cache
//! the reconcilers read and waking the controllers that care. Nothing else
//! in the process watches these kinds: the upstream connection, the
//! GitOps engine's Rollout and Fleet controllers, the monitors and the
//! audit read the same caches, told of each change through a [`Hub`]. (The tenant engine still runs a Tenant watch
//! of its own, beside the shared one the upstream connection reads.)
//! Every cache holds its objects slimmed (`slim`): no managed fields, no
//! last-applied annotation.

use std::sync::Arc;

use futures::channel::mpsc::UnboundedSender;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;
use tracing::warn;

use super::relist::Relist;
use super::slim;

use crate::crd::tenant::Tenant;
use crate::crd::{Agent, AgentFS, AnalysisRun, App, Fleet, Rollout, Tool};
use crate::meta::{
    LABEL_APP, LABEL_COMPONENT, LABEL_FLEET_NAMESPACE, LABEL_MANAGED_BY, MANAGED_BY,
};

/// A kind the operator watches into a cache.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// What a [`Hub`] tells its subscribers, after the cache has taken it.
#[derive(Debug, Clone)]
pub enum Touch<K: Resource<DynamicType = ()>> {
    /// The object changed or appeared: the cache holds it now.
    Applied(ObjectRef<K>),
    /// The object is gone (from the cache too); this is its last state.
    Deleted(Arc<K>),
    /// The watch listed everything again: re-read the whole cache.
    Relisted,
}

/// How many touches a subscriber may fall behind before it is told it
/// lagged (and re-reads the whole cache). References, not objects, so the
/// ring stays small.
const HUB_CAPACITY: usize = 1024;

/// Tells subscribers of a cache what changed in it. Costs nothing while
/// nobody subscribes (an unmanaged operator).
#[derive(Debug, Clone)]
pub struct Hub<K: Resource<DynamicType = ()>>(broadcast::Sender<Touch<K>>);

impl<K> Default for Hub<K>
where
    K: Resource<DynamicType = ()> + Clone,
{
    fn default() -> Self {
        Hub(broadcast::Sender::new(HUB_CAPACITY))
    }
}

impl<K> Hub<K>
where
    K: Resource<DynamicType = ()> + Clone,
{
    pub fn subscribe(&self) -> broadcast::Receiver<Touch<K>> {
        self.0.subscribe()
    }

    /// The touches from now on, as a stream: subscribed at once, so a
    /// read of the cache after this call misses no change. Falling behind
    /// the hub reads as [`Touch::Relisted`] (re-read the whole cache). Ends
    /// when the hub is gone.
    pub fn touches(&self) -> impl Stream<Item = Touch<K>> + Send + 'static
    where
        K: Send + Sync + 'static,
    {
        futures::stream::unfold(self.subscribe(), |mut rx| async move {
            match rx.recv().await {
                Ok(t) => Some((t, rx)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((Touch::Relisted, rx)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
    }

    /// Passes on one watch event (already in the cache).
    fn tell(&self, event: &watcher::Event<K>) {
        if self.0.receiver_count() == 0 {
            return;
        }
        let touch = match event {
            watcher::Event::Apply(o) => Touch::Applied(ObjectRef::from_obj(o)),
            watcher::Event::Delete(o) => Touch::Deleted(Arc::new(o.clone())),
            watcher::Event::InitDone => Touch::Relisted,
            watcher::Event::Init | watcher::Event::InitApply(_) => return,
        };
        let _ = self.0.send(touch);
    }
}

/// The hubs of the caches the upstream connection streams.
#[derive(Debug, Clone, Default)]
pub struct Hubs {
    pub agents: Hub<Agent>,
    pub tools: Hub<Tool>,
    pub filesystems: Hub<AgentFS>,
    /// The Apps in scope (empty without their CRD or RBAC).
    pub apps: Hub<App>,
    pub pods: Hub<Pod>,
    /// Also what wakes the GitOps engine's Rollout controller: it lives
    /// for a leadership term, the watch for the process.
    pub rollouts: Hub<Rollout>,
    /// The cluster-scoped Tenants in scope (their lifecycle sagas).
    pub tenants: Hub<Tenant>,
    /// The Fleets in scope: what wakes the GitOps engine's sync (leader
    /// only); the monitors and the audit read the cache without a hub.
    pub fleets: Hub<Fleet>,
    /// The AnalysisRuns of the Fleet namespace (every namespace when all
    /// Fleets are followed): streamed upstream only.
    pub analysis_runs: Hub<AnalysisRun>,
}

/// The label selector of the Tenants that the Fleets of one namespace own
/// (the sync labels each Tenant it writes with its Fleet's namespace): what
/// a namespace-scoped operator watches of a cluster-scoped kind.
pub fn fleet_tenants(fleet_namespace: &str) -> String {
    format!("{LABEL_FLEET_NAMESPACE}={fleet_namespace}")
}

/// The one watch of a kind that a controller reconciles (Tools, AgentFS,
/// Rollouts): fills `writer`'s cache (the controller's store), tells
/// `hub`, and wakes the controller, if `wake` is given, for every changed
/// or deleted object. A controller that comes and goes (the engine's,
/// leader-only) subscribes to `hub` instead.
pub async fn own_feed<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    hub: Hub<K>,
    wake: Option<UnboundedSender<ObjectRef<K>>>,
) where
    K: Watched,
{
    selected_feed(api, watcher::Config::default(), writer, hub, wake).await
}

/// [`own_feed`] of the objects `wc` selects (the Tenants of one Fleet
/// namespace, say).
pub async fn selected_feed<K>(
    api: Api<K>,
    wc: watcher::Config,
    writer: reflector::store::Writer<K>,
    hub: Hub<K>,
    wake: Option<UnboundedSender<ObjectRef<K>>>,
) where
    K: Watched,
{
    slim::watch(api, wc)
        .reflect(writer)
        .for_each(|event| {
            match &event {
                Ok(e) => {
                    hub.tell(e);
                    if let Some(wake) = &wake
                        && let watcher::Event::Apply(o)
                        | watcher::Event::InitApply(o)
                        | watcher::Event::Delete(o) = e
                    {
                        let _ = wake.unbounded_send(ObjectRef::from_obj(o));
                    }
                }
                Err(e) => warn!(kind = %K::kind(&()), error = %e, "watch failed; retrying"),
            }
            futures::future::ready(())
        })
        .await;
}

/// The Agent, Tool or App that controls a child.
#[derive(Debug, Clone)]
enum Owner {
    Agent(ObjectRef<Agent>),
    Tool(ObjectRef<Tool>),
    App(ObjectRef<App>),
}

fn owner_of(meta: &kube::api::ObjectMeta) -> Option<Owner> {
    let ns = meta.namespace.clone().unwrap_or_default();
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))?;
    match owner.kind.as_str() {
        "Agent" => Some(Owner::Agent(ObjectRef::new(&owner.name).within(&ns))),
        "Tool" => Some(Owner::Tool(ObjectRef::new(&owner.name).within(&ns))),
        "App" => Some(Owner::App(ObjectRef::new(&owner.name).within(&ns))),
        _ => None,
    }
}

/// The controllers a child feed wakes, one per owner kind. A send to a
/// controller that does not run (Apps without their CRD) fails and is
/// dropped: its receiver is gone.
#[derive(Debug, Clone)]
pub struct Owners {
    pub agents: UnboundedSender<ObjectRef<Agent>>,
    pub tools: UnboundedSender<ObjectRef<Tool>>,
    pub apps: UnboundedSender<ObjectRef<App>>,
}

/// Watches the operator's children of one kind into `writer`'s cache and
/// asks for a reconcile of each changed or deleted child's controlling
/// Agent, Tool or App, also of a child deleted while the watch was cut off
/// and missing from its relist (`relist`).
pub async fn child_feed<C>(
    api: Api<C>,
    writer: reflector::store::Writer<C>,
    hub: Option<Hub<C>>,
    owners: Owners,
) where
    C: Watched,
{
    let wake = move |owner: Owner| match owner {
        Owner::Agent(r) => {
            let _ = owners.agents.unbounded_send(r);
        }
        Owner::Tool(r) => {
            let _ = owners.tools.unbounded_send(r);
        }
        Owner::App(r) => {
            let _ = owners.apps.unbounded_send(r);
        }
    };
    let mut relist: Relist<ObjectRef<C>, Owner> = Relist::default();
    let managed = watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"));
    slim::watch(api, managed)
        .reflect(writer)
        .for_each(|event| {
            if let (Some(hub), Ok(e)) = (&hub, &event) {
                hub.tell(e);
            }
            match event {
                Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => {
                    let owner = owner_of(c.meta());
                    relist.applied(ObjectRef::from_obj(&c), owner.clone());
                    if let Some(o) = owner {
                        wake(o);
                    }
                }
                Ok(watcher::Event::Delete(c)) => {
                    relist.deleted(&ObjectRef::from_obj(&c));
                    if let Some(o) = owner_of(c.meta()) {
                        wake(o);
                    }
                }
                Ok(watcher::Event::Init) => relist.started(),
                Ok(watcher::Event::InitDone) => {
                    let gone = relist.done();
                    if !gone.is_empty() {
                        warn!(
                            kind = %C::kind(&()),
                            count = gone.len(),
                            "relist: children deleted while the watch was away; reconciling their owners"
                        );
                    }
                    gone.into_iter().for_each(&wake);
                }
                Err(e) => warn!(kind = %C::kind(&()), error = %e, "child watch failed; retrying"),
            }
            futures::future::ready(())
        })
        .await;
}

/// The one Agent watch. It fills `writer`'s cache (the Agent controller's
/// store and `Ctx::agents`, which the AgentFS reconciler reads), then wakes
/// the Agent controller for each changed Agent and the AgentFS controller
/// for each volume an Agent mounts or did, deletions included. The cache
/// takes each event before the triggers fire, so an AgentFS reconcile sees
/// at least the Agent change that woke it.
pub async fn agent_feed(
    api: Api<Agent>,
    writer: reflector::store::Writer<Agent>,
    hub: Hub<Agent>,
    agents: UnboundedSender<ObjectRef<Agent>>,
    filesystems: UnboundedSender<ObjectRef<AgentFS>>,
) {
    slim::watch(api, watcher::Config::default())
        .reflect(writer)
        .for_each(|event| {
            if let Ok(e) = &event {
                hub.tell(e);
            }
            match event {
                Ok(watcher::Event::Apply(a) | watcher::Event::InitApply(a)) => {
                    let _ = agents.unbounded_send(ObjectRef::from_obj(&a));
                    for fs in agent_to_filesystems(&a) {
                        let _ = filesystems.unbounded_send(fs);
                    }
                }
                // A gone Agent has nothing left to reconcile, but the
                // volumes it held may now be released.
                Ok(watcher::Event::Delete(a)) => {
                    for fs in agent_to_filesystems(&a) {
                        let _ = filesystems.unbounded_send(fs);
                    }
                }
                Ok(_) => {}
                Err(e) => warn!(error = %e, "agent watch failed; retrying"),
            }
            futures::future::ready(())
        })
        .await;
}

/// Exo's ConfigMaps (the published baseline versions) into a cache the
/// GitOps engine reads for its drift check. No controller is woken: the
/// engine looks at its own pace.
pub async fn configmap_feed(api: Api<ConfigMap>, writer: reflector::store::Writer<ConfigMap>) {
    managed_feed(api, writer).await
}

/// Exo's objects of one kind (label `app.kubernetes.io/managed-by: exo`)
/// into a cache: the baseline ConfigMaps and the tenants'
/// NetworkPolicies, which the GitOps engine's drift check reads.
pub async fn managed_feed<K>(api: Api<K>, writer: reflector::store::Writer<K>)
where
    K: Watched,
{
    let managed = watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"));
    slim::watch(api, managed)
        .reflect(writer)
        .for_each(|event| {
            if let Err(e) = event {
                warn!(kind = %K::kind(&()), error = %e, "watch failed; retrying");
            }
            futures::future::ready(())
        })
        .await;
}

pub fn children(component: &str) -> watcher::Config {
    watcher::Config::default().labels(&format!(
        "{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_COMPONENT}={component}"
    ))
}

/// The AgentFS volumes an Agent mounts now or did until its last status:
/// both must be re-checked when the Agent changes (a detach removes the
/// name from the spec but not yet from the status).
fn agent_to_filesystems(a: &Agent) -> Vec<ObjectRef<AgentFS>> {
    let ns = a.metadata.namespace.clone().unwrap_or_default();
    let mut names: Vec<String> = a
        .spec
        .filesystems
        .iter()
        .flatten()
        .map(|m| m.name.clone())
        .collect();
    names.extend(
        a.status
            .iter()
            .flat_map(|s| s.filesystems.iter().map(|m| m.name.clone())),
    );
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|n| ObjectRef::new(&n).within(&ns))
        .collect()
}

/// The App a PVC of `children("app")` belongs to, by its label. Retained
/// PVCs have no owner reference to follow, so the label is what maps them.
/// (A name longer than a label value is hashed in the label and maps to
/// nothing: such an App sees its PVCs' changes on its backstop requeue.)
pub fn app_of_pvc(
    pvc: &k8s_openapi::api::core::v1::PersistentVolumeClaim,
) -> Option<ObjectRef<App>> {
    let name = pvc.metadata.labels.as_ref()?.get(LABEL_APP)?;
    let ns = pvc.metadata.namespace.as_deref()?;
    Some(ObjectRef::new(name).within(ns))
}
