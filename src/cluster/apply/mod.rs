//! The thin write edge shared by the reconcilers: server-side apply with
//! the one field manager, create, delete (NotFound is success), status
//! apply, Events — each write counted in the metrics, and none made by a
//! replica that does not hold the Lease.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::info;

use super::error::{Error, Result, is_not_found};
use super::events::Reason;
use super::metrics::{Controller, Metrics, Verb};
use super::pods::PodSet;
use crate::crd::{Agent, AgentFS, Tool};
use crate::meta::FIELD_MANAGER;

mod create;
mod events;
mod finalizer;

pub use finalizer::with_finalizer;

/// What every reconcile gets.
pub struct Ctx {
    pub client: Client,
    pub metrics: Arc<Metrics>,
    /// `true` while this replica holds the Lease.
    pub leader: watch::Receiver<bool>,
    /// Until when it may write; every write checks it.
    pub fence: Arc<super::leader::Fence>,
    pub recorder: Recorder,
    /// Who the recorder reports as (for [`Ctx::event_distinct`]).
    pub reporter: Reporter,
    /// The operator's pods (label `app.kubernetes.io/managed-by: exo`),
    /// fed by the one shared watch.
    pub pods: Store<Pod>,
    /// The operator's Services, likewise.
    pub services: Store<Service>,
    /// Every Agent in scope, from the one Agent watch (the Agent
    /// controller's own store).
    pub agents: Store<Agent>,
    /// Every Tool in scope (the Tool controller's store).
    pub tools: Store<Tool>,
    /// Every AgentFS in scope (the AgentFS controller's store).
    pub filesystems: Store<AgentFS>,
    /// Every App in scope (the App controller's store); `None` without
    /// their CRD or RBAC.
    pub apps: Option<Store<crate::crd::App>>,
    /// Exo's baseline ConfigMaps (label `app.kubernetes.io/managed-by:
    /// exo`), for the GitOps engine's drift check.
    pub configmaps: Store<ConfigMap>,
    /// Exo's NetworkPolicies (managed-by label), for the drift check.
    pub network_policies: Store<k8s_openapi::api::networking::v1::NetworkPolicy>,
    /// Every Rollout in scope (the one Rollout watch); `None` without their CRD or RBAC.
    pub rollouts: Option<Store<crate::crd::Rollout>>,
    /// The Tenants in scope (cluster-scoped; those of the Fleet namespace
    /// when the operator follows one), from the one shared Tenant watch;
    /// `None` without their CRD or RBAC.
    pub tenants: Option<Store<crate::crd::tenant::Tenant>>,
    /// The Fleets in scope (those of the Fleet namespace when the operator
    /// follows one), from the one Fleet watch: the GitOps engine's sync,
    /// the monitors' thresholds and the audit read it. `None` without
    /// their CRD or RBAC.
    pub fleets: Option<Store<crate::crd::Fleet>>,
    /// The AnalysisRuns in the Fleet namespace (all namespaces when the
    /// operator follows every Fleet), from the one AnalysisRun watch: what
    /// the upstream connection streams. `None` without their CRD or RBAC.
    pub analysis_runs: Option<Store<crate::crd::AnalysisRun>>,
    /// `true` once every cache has listed once; reconciles wait for it.
    pub caches_synced: watch::Receiver<bool>,
    /// Told of every change to the Agent, Tool, AgentFS, App, Pod, Rollout,
    /// Tenant and AnalysisRun caches (the upstream connection streams them
    /// from there).
    pub hubs: super::feeds::Hubs,
    /// Agents (`namespace/name/uid`) whose token Secret is known to exist:
    /// Secrets are not watched (no list/watch RBAC on Secrets), so this
    /// spares a read per reconcile.
    pub secrets_seen: Mutex<HashSet<String>>,
    /// Statuses held back while their workload comes up.
    pub holds: super::conditions::Holds,
    /// Pods created but not yet in the cache.
    pub expected: super::pods::Expected,
}

/// What [`Ctx::create_pod`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// Created it now.
    Now,
    /// It existed already (a conflict).
    Existed,
    /// Created a moment ago and not in the cache yet: nothing sent.
    Expected,
}

fn kind_label<K: Resource<DynamicType = ()>>() -> &'static str {
    match K::kind(&()).as_ref() {
        "Pod" => "Pod",
        "Service" => "Service",
        "Secret" => "Secret",
        "PersistentVolumeClaim" => "PersistentVolumeClaim",
        "Agent" => "Agent",
        "Tool" => "Tool",
        "AgentFS" => "AgentFS",
        "App" => "App",
        "ConfigMap" => "ConfigMap",
        "Namespace" => "Namespace",
        "Rollout" => "Rollout",
        "Inventory" => "Inventory",
        "Fleet" => "Fleet",
        "NetworkPolicy" => "NetworkPolicy",
        "Tenant" => "Tenant",
        "AnalysisRun" => "AnalysisRun",
        "ServiceAccount" => "ServiceAccount",
        "ResourceQuota" => "ResourceQuota",
        "LimitRange" => "LimitRange",
        "PersistentVolume" => "PersistentVolume",
        _ => "Other",
    }
}

/// A namespaced object the write path can read and write: what every
/// method below takes.
pub trait Namespaced:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()> + Clone + Debug + DeserializeOwned
{
}

/// A cluster-scoped object the write path can read and write (a
/// Namespace, a `Tenant`, a PersistentVolume).
pub trait ClusterScoped:
    Resource<Scope = ClusterResourceScope, DynamicType = ()> + Clone + Debug + DeserializeOwned
{
}

impl<K> ClusterScoped for K where
    K: Resource<Scope = ClusterResourceScope, DynamicType = ()> + Clone + Debug + DeserializeOwned
{
}

impl<K> Namespaced for K where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + DeserializeOwned
{
}

impl Ctx {
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// Refuses a write once this replica's lease is not current (see
    /// `leader::Fence`); every write below asks first.
    pub(crate) fn fenced(&self) -> Result<()> {
        if self.fence.holds() {
            let now = i64::try_from(crate::wire::now_ms()).unwrap_or(i64::MAX);
            self.metrics.last_write_sent_ms.set(now);
            Ok(())
        } else {
            self.metrics.writes_fenced.inc();
            Err(Error::NotLeader)
        }
    }

    pub fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The pods in `ns` carrying `labels` and controlled by `owner_uid`
    /// (a label alone could be forged by any pod in the namespace), from
    /// the cache. It may lag the operator's own last write by a moment:
    /// a pod just created is remembered until it shows up here
    /// ([`Ctx::create_pod`]), and every other write it leads to is
    /// idempotent (delete with a uid precondition).
    pub fn owned_pods(
        &self,
        ns: &str,
        labels: &BTreeMap<String, String>,
        owner_uid: &str,
    ) -> Vec<Pod> {
        self.pods
            .state()
            .into_iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(ns)
                    && p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == owner_uid && o.controller == Some(true))
                    && labels
                        .iter()
                        .all(|(k, v)| p.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
            })
            .map(|p| {
                // Shown by the cache: no longer expected.
                if let Some(name) = &p.metadata.name {
                    self.expected.seen(&format!("{ns}/{name}"));
                }
                Pod::clone(&p)
            })
            .collect()
    }

    /// The cached Service `ns/name`.
    pub fn service(&self, ns: &str, name: &str) -> Option<Arc<Service>> {
        self.services.get(&ObjectRef::new(name).within(ns))
    }

    /// Whether every cache has listed once.
    pub fn caches_synced(&self) -> bool {
        *self.caches_synced.borrow()
    }

    /// Server-side apply of `obj` (forced: the operator owns these fields).
    pub async fn apply<K>(&self, c: Controller, obj: &K) -> Result<K>
    where
        K: Namespaced + Serialize,
    {
        let (ns, name) = ns_name(obj)?;
        self.apply_in(c, self.api(&ns), &name, obj, || format!("{ns}/{name}"))
            .await
    }

    /// Server-side apply of a cluster-scoped object (a tenant's Namespace).
    pub async fn apply_cluster<K>(&self, c: Controller, obj: &K) -> Result<K>
    where
        K: ClusterScoped + Serialize,
    {
        let name = obj
            .meta()
            .name
            .clone()
            .ok_or(Error::MissingField("metadata.name"))?;
        let api = Api::<K>::all(self.client.clone());
        self.apply_in(c, api, &name, obj, || name.clone()).await
    }

    /// The one server-side apply: fenced, forced, counted, and an error
    /// that names the kind and `at`.
    async fn apply_in<K>(
        &self,
        c: Controller,
        api: Api<K>,
        name: &str,
        obj: &K,
        at: impl FnOnce() -> String,
    ) -> Result<K>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + Serialize + DeserializeOwned,
    {
        self.fenced()?;
        let out = api
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(obj),
            )
            .await
            .map_err(|e| Error::kube(format!("apply {} {}", K::kind(&()), at()), e))?;
        self.metrics.wrote(c, kind_label::<K>(), Verb::Apply);
        Ok(out)
    }

    /// Deletes `name` if its uid is still `uid` (when given); a missing
    /// object is success.
    pub async fn delete<K>(
        &self,
        c: Controller,
        ns: &str,
        name: &str,
        uid: Option<String>,
    ) -> Result<()>
    where
        K: Namespaced,
    {
        let preconditions = uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        });
        self.delete_if::<K>(c, ns, name, preconditions).await
    }

    /// Deletes `obj` only if it is still the version read (uid and
    /// resourceVersion preconditions): a concurrent update wins.
    pub async fn delete_unchanged<K>(&self, c: Controller, obj: &K) -> Result<()>
    where
        K: Namespaced,
    {
        let meta = obj.meta();
        let (ns, name) = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        let preconditions = Some(Preconditions {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
        });
        self.delete_if::<K>(c, &ns, &name, preconditions).await
    }

    /// The one delete: fenced, in the background, under `preconditions`;
    /// a missing object or a failed precondition (409: someone else's
    /// version won) is success.
    async fn delete_if<K>(
        &self,
        c: Controller,
        ns: &str,
        name: &str,
        preconditions: Option<Preconditions>,
    ) -> Result<()>
    where
        K: Namespaced,
    {
        self.delete_in(c, self.api::<K>(ns), name, preconditions, || {
            format!("{ns}/{name}")
        })
        .await
    }

    /// Deletes a cluster-scoped object (a tenant's Namespace); a missing
    /// one is success.
    pub async fn delete_cluster<K>(&self, c: Controller, name: &str) -> Result<()>
    where
        K: ClusterScoped,
    {
        self.delete_in(c, Api::<K>::all(self.client.clone()), name, None, || {
            name.to_owned()
        })
        .await
    }

    async fn delete_in<K>(
        &self,
        c: Controller,
        api: Api<K>,
        name: &str,
        preconditions: Option<Preconditions>,
        at: impl FnOnce() -> String,
    ) -> Result<()>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
    {
        self.fenced()?;
        let dp = DeleteParams {
            preconditions,
            ..DeleteParams::background()
        };
        match api.delete(name, &dp).await {
            Ok(_) => {
                self.metrics.wrote(c, kind_label::<K>(), Verb::Delete);
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(Error::kube(format!("delete {} {}", K::kind(&()), at()), e)),
        }
    }

    /// A merge patch of metadata (finalizers, owner references) guarded
    /// by `resource_version`: a concurrent edit conflicts instead of being
    /// clobbered.
    pub async fn patch_metadata<K>(
        &self,
        c: Controller,
        ns: &str,
        name: &str,
        resource_version: Option<String>,
        metadata: serde_json::Value,
    ) -> Result<()>
    where
        K: Namespaced,
    {
        self.fenced()?;
        let api: Api<K> = self.api(ns);
        let mut metadata = metadata;
        if let (Some(rv), Some(m)) = (resource_version, metadata.as_object_mut()) {
            m.insert("resourceVersion".to_owned(), serde_json::Value::String(rv));
        }
        let body = serde_json::json!({ "metadata": metadata });
        let r = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await;
        self.counted::<K>(
            c,
            Verb::Patch,
            || format!("patch {} {ns}/{name}", K::kind(&())),
            r,
        )
    }

    /// Counts a write that went through; a missing object is success (it
    /// is gone, nothing to write), anything else an error naming `what`.
    fn counted<K: Resource<DynamicType = ()>>(
        &self,
        c: Controller,
        verb: Verb,
        what: impl FnOnce() -> String,
        result: std::result::Result<K, kube::Error>,
    ) -> Result<()> {
        match result {
            Ok(_) => {
                self.metrics.wrote(c, kind_label::<K>(), verb);
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(Error::kube(what(), e)),
        }
    }

    /// A merge patch of some status fields alone (e.g. a Fleet's
    /// `status.audit`), leaving the rest of the status, which another
    /// writer applies, as it is.
    pub async fn merge_status<K>(
        &self,
        c: Controller,
        ns: &str,
        name: &str,
        status: serde_json::Value,
    ) -> Result<()>
    where
        K: Namespaced,
    {
        self.fenced()?;
        let body = serde_json::json!({ "status": status });
        let r = self
            .api::<K>(ns)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
            .await;
        self.counted::<K>(
            c,
            Verb::Status,
            || format!("status {} {ns}/{name}", K::kind(&())),
            r,
        )
    }

    /// Writes `status` through the status subresource with server-side
    /// apply, so fields the operator stops setting are removed.
    pub async fn apply_status<K>(
        &self,
        c: Controller,
        ns: &str,
        name: &str,
        status: &impl Serialize,
    ) -> Result<()>
    where
        K: Namespaced,
    {
        self.apply_status_in(c, self.api::<K>(ns), name, status, || {
            format!("{ns}/{name}")
        })
        .await
    }

    /// [`Ctx::apply_status`] of a cluster-scoped object (a `Tenant`).
    pub async fn apply_cluster_status<K>(
        &self,
        c: Controller,
        name: &str,
        status: &impl Serialize,
    ) -> Result<()>
    where
        K: ClusterScoped,
    {
        let api = Api::<K>::all(self.client.clone());
        self.apply_status_in(c, api, name, status, || name.to_owned())
            .await
    }

    async fn apply_status_in<K>(
        &self,
        c: Controller,
        api: Api<K>,
        name: &str,
        status: &impl Serialize,
        at: impl FnOnce() -> String,
    ) -> Result<()>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
    {
        self.fenced()?;
        let body = serde_json::json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "status": status,
        });
        let r = api
            .patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await;
        self.counted::<K>(
            c,
            Verb::Status,
            || format!("status {} {}", K::kind(&()), at()),
            r,
        )
    }

    /// Deletes the stale pods in `set` that are not yet going away, with
    /// one Event on `owner`: a roll towards `desired`, or a removal
    /// (`removed_because`) when there is no desired pod. Returns whether
    /// it deleted anything.
    pub async fn retire_pods<K: Resource<DynamicType = ()>>(
        &self,
        c: Controller,
        owner: &K,
        ns: &str,
        set: &PodSet<'_>,
        desired: Option<&Pod>,
        removed_because: &str,
    ) -> Result<bool> {
        let mut deleted = Vec::new();
        for p in set.to_delete() {
            let name = p.metadata.name.clone().unwrap_or_default();
            self.delete::<Pod>(c, ns, &name, p.metadata.uid.clone())
                .await?;
            deleted.push(name);
        }
        if deleted.is_empty() {
            return Ok(false);
        }
        let pods = deleted.join(", ");
        let (reason, note) = match desired {
            None => (
                Reason::PodRemoved,
                format!("{removed_because}: pod {pods} deleted"),
            ),
            Some(d) => (
                Reason::PodRolled,
                format!(
                    "the pod template changed: pod {pods} is replaced by {}",
                    d.metadata.name.as_deref().unwrap_or_default()
                ),
            ),
        };
        self.event(owner, EventType::Normal, reason, note).await;
        info!(pods = %pods, "old pods deleted");
        Ok(true)
    }
}

fn ns_name<K: Resource>(obj: &K) -> Result<(String, String)> {
    let m = obj.meta();
    Ok((
        m.namespace
            .clone()
            .ok_or(Error::MissingField("metadata.namespace"))?,
        m.name.clone().ok_or(Error::MissingField("metadata.name"))?,
    ))
}
