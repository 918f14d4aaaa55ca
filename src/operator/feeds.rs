//! The operator's watch feeds: one watch per kind, each filling the cache
//! the reconcilers read and waking the controllers that care. Nothing else
//! in the process watches these kinds.

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tracing::warn;

use super::{LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY};
use crate::crd::{Agent, AgentFS, Tool};

/// Watches the operator's children of one kind into `writer`'s cache and
/// asks for a reconcile of each changed or deleted child's controlling
/// Agent or Tool.
pub(super) async fn child_feed<C>(
    api: Api<C>,
    writer: reflector::store::Writer<C>,
    agents: UnboundedSender<ObjectRef<Agent>>,
    tools: UnboundedSender<ObjectRef<Tool>>,
) where
    C: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let managed = watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"));
    watcher(api, managed)
        .default_backoff()
        .reflect(writer)
        .for_each(|event| {
            match event {
                Ok(
                    watcher::Event::Apply(c)
                    | watcher::Event::Delete(c)
                    | watcher::Event::InitApply(c),
                ) => {
                    let meta = c.meta();
                    let ns = meta.namespace.clone().unwrap_or_default();
                    let owner = meta
                        .owner_references
                        .iter()
                        .flatten()
                        .find(|o| o.controller == Some(true));
                    match owner.map(|o| (o.kind.as_str(), o.name.as_str())) {
                        Some(("Agent", name)) => {
                            let _ = agents.unbounded_send(ObjectRef::new(name).within(&ns));
                        }
                        Some(("Tool", name)) => {
                            let _ = tools.unbounded_send(ObjectRef::new(name).within(&ns));
                        }
                        _ => {}
                    }
                }
                Ok(_) => {}
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
pub(super) async fn agent_feed(
    api: Api<Agent>,
    writer: reflector::store::Writer<Agent>,
    agents: UnboundedSender<ObjectRef<Agent>>,
    filesystems: UnboundedSender<ObjectRef<AgentFS>>,
) {
    watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .for_each(|event| {
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
pub(super) async fn configmap_feed(
    api: Api<ConfigMap>,
    writer: reflector::store::Writer<ConfigMap>,
) {
    managed_feed(api, writer).await
}

/// Exo's objects of one kind (label `app.kubernetes.io/managed-by: exo`)
/// into a cache: the baseline ConfigMaps and the tenants'
/// NetworkPolicies, which the GitOps engine's drift check reads.
pub(super) async fn managed_feed<K>(api: Api<K>, writer: reflector::store::Writer<K>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let managed = watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"));
    watcher(api, managed)
        .default_backoff()
        .reflect(writer)
        .for_each(|event| {
            if let Err(e) = event {
                warn!(kind = %K::kind(&()), error = %e, "watch failed; retrying");
            }
            futures::future::ready(())
        })
        .await;
}

pub(super) fn children(component: &str) -> watcher::Config {
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
