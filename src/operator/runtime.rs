//! Wires the operator together: CRD check, HTTP endpoints, leader
//! election, the controllers (Agent, Tool, AgentFS, and App where its CRD
//! is installed), leader-only background tasks and
//! graceful shutdown.
//!
//! Every replica watches (so a standby's caches are warm and `/readyz`
//! means "watches synced"), but only the Lease holder reconciles: the
//! reconcilers return at once on a standby, and gaining the Lease
//! re-reconciles every object. Rollouts are watched the same way; the
//! GitOps engine that drives them is a leader task over that cache. So are
//! the cluster-scoped Tenants (of the Fleet namespace, when there is one)
//! and the AnalysisRuns (in the Fleet namespace), whose caches the upstream
//! connection streams.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::http::{self, HttpState};
use super::leader_tasks::run_leader_tasks;
pub use super::leader_tasks::{LeaderTask, Stop};
use super::{agent, agentfs, app, tool};
use crate::cluster::apply::Ctx;
use crate::cluster::error::{Error, is_not_found, is_unlistable};
use crate::cluster::feeds::{
    Hubs, Owners, agent_feed, app_of_pvc, child_feed, children, configmap_feed, fleet_tenants,
    managed_feed, own_feed, selected_feed,
};
use crate::cluster::leader::{self, LeaderConfig};
use crate::cluster::metrics::Metrics;
use crate::crd::tenant::Tenant;
use crate::crd::{Agent, AgentFS, AnalysisRun, App, Fleet, Rollout, Tool};
use crate::meta::CONTROLLER_NAME;

/// How long in-flight reconciles get to finish after a shutdown request.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub struct OperatorConfig {
    /// Watch one namespace, or all when `None`.
    pub namespace: Option<String>,
    /// Watch only the Fleets in this namespace and the Tenants they own
    /// (label `autonomic.sh/fleet-namespace`), or all when `None`.
    pub fleet_namespace: Option<String>,
    pub metrics_addr: SocketAddr,
    pub leader: LeaderConfig,
    /// Reconciles running at once, per controller.
    pub concurrency: u16,
    pub leader_tasks: Vec<LeaderTask>,
    /// Agent check-ins taken by the HTTP server, read by the leader's
    /// `silent` monitor (`super::monitor`).
    pub checkins: Arc<super::monitor::checkin::Checkins>,
    /// Agents' incident reports, kept in the operator's namespace.
    pub incidents: Arc<super::http::incidents::Intake>,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Operator(#[from] Error),
    #[error("cannot serve HTTP on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A namespaced kind the operator lists at start (to probe its CRD).
trait Listed:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> Listed for K where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
{
}

/// Fails with a clear message when a CRD is not installed.
async fn check_crd<K>(client: &Client, namespace: Option<&str>) -> Result<(), Error>
where
    K: Listed,
{
    let kind = crd_name::<K>();
    match probe::<K>(client, namespace).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Err(Error::CrdMissing { kind }),
        Err(e) => Err(Error::kube(format!("list {kind}"), e)),
    }
}

fn crd_name<K: Resource<DynamicType = ()>>() -> &'static str {
    match K::kind(&()).as_ref() {
        "Agent" => "agents.autonomic.sh",
        "Tool" => "tools.autonomic.sh",
        "Rollout" => "rollouts.autonomic.sh",
        "Tenant" => "tenants.autonomic.sh",
        "Fleet" => "fleets.autonomic.sh",
        "App" => "apps.autonomic.sh",
        "AnalysisRun" => "analysisruns.autonomic.sh",
        _ => "agentfs.autonomic.sh",
    }
}

/// One list of at most one object's metadata: can `K` be listed at all?
async fn probe<K>(client: &Client, namespace: Option<&str>) -> Result<(), kube::Error>
where
    K: Listed,
{
    api::<K>(client, namespace)
        .list_metadata(&ListParams::default().limit(1))
        .await
        .map(|_| ())
}

/// Whether an optional kind can be watched in `namespace` (all when
/// `None`): without its CRD (or RBAC to list it) the operator runs its
/// controllers and streams the other kinds upstream; `without` says what is
/// lost. Looked at once, at start: installing the CRD later takes a restart.
async fn listable<K>(client: &Client, namespace: Option<&str>, without: &str) -> Result<bool, Error>
where
    K: Listed,
{
    let kind = crd_name::<K>();
    match probe::<K>(client, namespace).await {
        Ok(()) => Ok(true),
        Err(e) if is_unlistable(&e) => {
            warn!(crd = kind, error = %e, "{}s cannot be listed (CRD not installed, or no RBAC): not watched; {without}", K::kind(&()));
            Ok(false)
        }
        Err(e) => Err(Error::kube(format!("list {kind}"), e)),
    }
}

/// Whether the Tenants `selector` picks (all when `None`) can be watched;
/// optional like Rollouts, and looked at once, at start.
async fn tenants_listable(client: &Client, selector: Option<&str>) -> Result<bool, Error> {
    let kind = crd_name::<Tenant>();
    let mut lp = ListParams::default().limit(1);
    if let Some(s) = selector {
        lp = lp.labels(s);
    }
    match Api::<Tenant>::all(client.clone()).list_metadata(&lp).await {
        Ok(_) => Ok(true),
        Err(e) if is_unlistable(&e) => {
            warn!(crd = kind, error = %e, "Tenants cannot be listed (CRD not installed, or no RBAC): not watched, not streamed upstream");
            Ok(false)
        }
        Err(e) => Err(Error::kube(format!("list {kind}"), e)),
    }
}

/// Yields once each time `rx` turns `true`.
fn became_leader(rx: watch::Receiver<bool>) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            if rx.changed().await.is_err() {
                return None;
            }
            if *rx.borrow_and_update() {
                return Some(((), rx));
            }
        }
    })
}

/// Runs the operator until `shutdown` turns `true`.
pub async fn run(
    client: Client,
    cfg: OperatorConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<(), RuntimeError> {
    let ns = cfg.namespace.as_deref();
    check_crd::<Agent>(&client, ns).await?;
    check_crd::<Tool>(&client, ns).await?;
    check_crd::<AgentFS>(&client, ns).await?;
    // Apps came later than the other kinds: an install without their CRD
    // (or RBAC) keeps running everything else.
    let watch_apps =
        listable::<App>(&client, ns, "Apps are not reconciled and not streamed").await?;
    let watch_rollouts = listable::<Rollout>(&client, ns, "the GitOps engine will not run").await?;
    let fleet_ns = cfg.fleet_namespace.as_deref();
    let watch_fleets = listable::<Fleet>(
        &client,
        fleet_ns,
        "the GitOps engine will not run, the monitors use their flags only, and the audit has nothing to audit",
    )
    .await?;
    let watch_runs = listable::<AnalysisRun>(
        &client,
        fleet_ns,
        "the waves' analysis runs are not streamed upstream",
    )
    .await?;
    let tenant_selector = cfg.fleet_namespace.as_deref().map(fleet_tenants);
    let watch_tenants = tenants_listable(&client, tenant_selector.as_deref()).await?;

    let metrics = Arc::new(Metrics::new());
    let (leader_tx, leader_rx) = watch::channel(false);
    let (ready_tx, ready_rx) = watch::channel(false);

    let (addr, serve) = http::bind(
        cfg.metrics_addr,
        HttpState {
            metrics: metrics.clone(),
            ready: ready_rx,
            leader: leader_rx.clone(),
            client: Some(client.clone()),
            checkins: cfg.checkins.clone(),
            incidents: cfg.incidents.clone(),
        },
    )
    .await
    .map_err(|source| RuntimeError::Bind {
        addr: cfg.metrics_addr,
        source,
    })?;
    let http_task = tokio::spawn(serve);
    debug!(%addr, "http bound");

    // The election stops after the leader tasks have: the upstream socket
    // closes before the Lease is released to a standby, which would
    // otherwise connect and evict it.
    let (election_stop_tx, election_stop) = watch::channel(false);
    let fence = Arc::new(leader::Fence::default());
    let election = tokio::spawn(leader::run(
        client.clone(),
        cfg.leader.clone(),
        leader_tx,
        fence.clone(),
        metrics.clone(),
        election_stop,
    ));

    // One watch per child kind, and one for Agents, feeds both the cache
    // the reconcilers read (no apiserver read per reconcile) and the
    // controllers' triggers. The cache takes each event before the trigger
    // fires, so a reconcile sees at least the change that woke it,
    // deletions included.
    let (pods_store, pods_writer) = reflector::store::<Pod>();
    let (services_store, services_writer) = reflector::store::<Service>();
    let (agents_store, agents_writer) = reflector::store::<Agent>();
    let (tools_store, tools_writer) = reflector::store::<Tool>();
    let (fs_store, fs_writer) = reflector::store::<AgentFS>();
    let (apps_store, apps_writer) = reflector::store::<App>();
    let hubs = Hubs::default();
    let (agent_tx, agent_rx) = futures::channel::mpsc::unbounded();
    let (tool_tx, tool_rx) = futures::channel::mpsc::unbounded();
    let (fs_tx, fs_rx) = futures::channel::mpsc::unbounded();
    let (app_tx, app_rx) = futures::channel::mpsc::unbounded();
    let agents_feed = agent_feed(
        api::<Agent>(&client, ns),
        agents_writer,
        hubs.agents.clone(),
        agent_tx.clone(),
        fs_tx.clone(),
    );
    let tools_feed = own_feed(
        api::<Tool>(&client, ns),
        tools_writer,
        hubs.tools.clone(),
        Some(tool_tx.clone()),
    );
    let fs_feed = own_feed(
        api::<AgentFS>(&client, ns),
        fs_writer,
        hubs.filesystems.clone(),
        Some(fs_tx),
    );
    // Without Apps watched nothing reads `app_rx`: it is dropped below,
    // and a wake sent for an App's pod is dropped with it.
    let apps_feed = {
        let (api, hub, wake) = (api::<App>(&client, ns), hubs.apps.clone(), app_tx.clone());
        async move {
            if watch_apps {
                own_feed(api, apps_writer, hub, Some(wake)).await;
            }
        }
    };
    let owners = Owners {
        agents: agent_tx,
        tools: tool_tx,
        apps: app_tx,
    };
    let pod_feed = child_feed(
        api::<Pod>(&client, ns),
        pods_writer,
        Some(hubs.pods.clone()),
        owners.clone(),
    );
    let service_feed = child_feed(api::<Service>(&client, ns), services_writer, None, owners);
    let ccfg = ControllerConfig::default().concurrency(cfg.concurrency);
    let stop = || {
        let mut s = shutdown.clone();
        async move {
            let _ = s.wait_for(|v| *v).await;
        }
    };

    // Secrets are not watched: the operator only reads its own by name
    // (`get`), so its RBAC needs no list/watch over every Secret.
    // Agents come from `agent_feed` (their own changes) and the child
    // feeds (their pods and Services), all through `agent_rx`; Tools and
    // AgentFS likewise from their own feeds: the controllers run no watch
    // of their own (the AgentFS one watches only its PVCs).
    let agents = Controller::for_stream(futures::stream::pending(), agents_store.clone())
        .with_config(ccfg.clone())
        .reconcile_on(agent_rx)
        .reconcile_all_on(became_leader(leader_rx.clone()))
        .graceful_shutdown_on(stop());
    let tools = Controller::for_stream(futures::stream::pending(), tools_store)
        .with_config(ccfg.clone())
        .reconcile_on(tool_rx)
        .reconcile_all_on(became_leader(leader_rx.clone()))
        .graceful_shutdown_on(stop());
    let filesystems = Controller::for_stream(futures::stream::pending(), fs_store)
        .with_config(ccfg.clone())
        .owns(
            api::<PersistentVolumeClaim>(&client, ns),
            children("agentfs"),
        )
        .reconcile_on(fs_rx)
        .reconcile_all_on(became_leader(leader_rx.clone()))
        .graceful_shutdown_on(stop());
    // An App's PVCs are watched by label, not by owner: retained ones
    // have no owner reference.
    let apps = watch_apps.then(|| {
        Controller::for_stream(futures::stream::pending(), apps_store.clone())
            .with_config(ccfg)
            .watches(
                api::<PersistentVolumeClaim>(&client, ns),
                children("app"),
                |pvc| app_of_pvc(&pvc),
            )
            .reconcile_on(app_rx)
            .reconcile_all_on(became_leader(leader_rx.clone()))
            .graceful_shutdown_on(stop())
    });

    let (configmaps_store, configmaps_writer) = reflector::store::<ConfigMap>();
    let cm_feed = configmap_feed(api::<ConfigMap>(&client, ns), configmaps_writer);
    let (policies_store, policies_writer) = reflector::store::<NetworkPolicy>();
    let np_feed = managed_feed(api::<NetworkPolicy>(&client, ns), policies_writer);
    // The one Rollout watch: the engine's controller (leader-only, woken
    // through the hub) and its sync read this cache, and so does the
    // upstream relay. Without it the store stays empty and is not waited for.
    let (rollouts_store, rollouts_writer) = reflector::store::<Rollout>();
    let rollout_feed = {
        let (api, hub) = (api::<Rollout>(&client, ns), hubs.rollouts.clone());
        async move {
            if watch_rollouts {
                own_feed(api, rollouts_writer, hub, None).await;
            }
        }
    };
    // The one Tenant watch (cluster-scoped): what the upstream relay
    // streams. Without it the store stays empty and is not waited for.
    let (tenants_store, tenants_writer) = reflector::store::<Tenant>();
    let tenant_feed = {
        let (api, hub) = (Api::<Tenant>::all(client.clone()), hubs.tenants.clone());
        let mut wc = watcher::Config::default();
        if let Some(s) = &tenant_selector {
            wc = wc.labels(s);
        }
        async move {
            if watch_tenants {
                selected_feed(api, wc, tenants_writer, hub, None).await;
            }
        }
    };
    // The one Fleet watch (in the Fleet namespace when one is followed):
    // the engine's sync (woken through the hub), the monitors and the
    // audit read this cache.
    let (fleets_store, fleets_writer) = reflector::store::<Fleet>();
    let fleet_feed = {
        let (api, hub) = (api::<Fleet>(&client, fleet_ns), hubs.fleets.clone());
        async move {
            if watch_fleets {
                own_feed(api, fleets_writer, hub, None).await;
            }
        }
    };
    // The one AnalysisRun watch (in the Fleet namespace, where the engine
    // makes them): what the upstream relay streams. The engine's analysis
    // task lists the runs itself (it keeps its own writes between lists).
    let (runs_store, runs_writer) = reflector::store::<AnalysisRun>();
    let run_feed = {
        let (api, hub) = (
            api::<AnalysisRun>(&client, fleet_ns),
            hubs.analysis_runs.clone(),
        );
        async move {
            if watch_runs {
                own_feed(api, runs_writer, hub, None).await;
            }
        }
    };
    let (caches_tx, caches_rx) = watch::channel(false);

    let reporter = Reporter {
        controller: CONTROLLER_NAME.to_owned(),
        instance: Some(cfg.leader.identity.clone()),
    };
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        metrics: metrics.clone(),
        leader: leader_rx.clone(),
        fence,
        pods: pods_store.clone(),
        agents: agents_store.clone(),
        tools: tools.store(),
        filesystems: filesystems.store(),
        apps: watch_apps.then(|| apps_store.clone()),
        configmaps: configmaps_store.clone(),
        network_policies: policies_store.clone(),
        rollouts: watch_rollouts.then(|| rollouts_store.clone()),
        tenants: watch_tenants.then(|| tenants_store.clone()),
        fleets: watch_fleets.then(|| fleets_store.clone()),
        analysis_runs: watch_runs.then(|| runs_store.clone()),
        services: services_store.clone(),
        caches_synced: caches_rx,
        hubs,
        secrets_seen: std::sync::Mutex::default(),
        holds: Default::default(),
        expected: Default::default(),
        recorder: Recorder::new(client.clone(), reporter.clone()),
        reporter,
    });
    // Ready once the primary watches have listed everything once.
    let stores = (agents.store(), tools.store(), filesystems.store());
    let ready_metrics = metrics.clone();
    let ready_task = tokio::spawn(async move {
        let ok = synced(&stores.0).await
            && synced(&stores.1).await
            && synced(&stores.2).await
            && synced(&pods_store).await
            && synced(&services_store).await
            && synced(&configmaps_store).await
            && synced(&policies_store).await
            && (!watch_apps || synced(&apps_store).await)
            && (!watch_rollouts || synced(&rollouts_store).await)
            && (!watch_tenants || synced(&tenants_store).await)
            && (!watch_fleets || synced(&fleets_store).await)
            && (!watch_runs || synced(&runs_store).await);
        caches_tx.send_replace(ok);
        if ok {
            info!("watches synced: ready");
            ready_tx.send_replace(true);
            ready_metrics.ready.set(1);
        }
    });
    {
        let metrics = metrics.clone();
        let mut r = leader_rx.clone();
        tokio::spawn(async move {
            while r.changed().await.is_ok() {
                metrics.leader.set(i64::from(*r.borrow()));
            }
        });
    }
    let leader_tasks = tokio::spawn(run_leader_tasks(
        ctx.clone(),
        leader_rx.clone(),
        cfg.leader_tasks,
        shutdown.clone(),
    ));

    let controllers = async {
        tokio::join!(
            agents_feed,
            tools_feed,
            fs_feed,
            apps_feed,
            pod_feed,
            service_feed,
            cm_feed,
            np_feed,
            rollout_feed,
            tenant_feed,
            fleet_feed,
            run_feed,
            agents
                .run(agent::reconcile, agent::error_policy, ctx.clone())
                .for_each(log),
            tools
                .run(tool::reconcile, tool::error_policy, ctx.clone())
                .for_each(log),
            filesystems
                .run(agentfs::reconcile, agentfs::error_policy, ctx.clone())
                .for_each(log),
            async {
                if let Some(apps) = apps {
                    apps.run(app::reconcile, app::error_policy, ctx.clone())
                        .for_each(log)
                        .await;
                }
            },
        )
    };
    // A controller asked to stop before its first list completed can wait
    // for a store that is no longer fed; never let that hold up exiting.
    let grace = {
        let mut s = shutdown.clone();
        async move {
            let _ = s.wait_for(|v| *v).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        }
    };
    tokio::select! {
        _ = controllers => {}
        _ = grace => warn!(grace = ?SHUTDOWN_GRACE, "controllers did not stop in time; exiting anyway"),
    }
    info!("controllers stopped");
    // Ends on shutdown once its tasks have (within their grace).
    if let Err(e) = leader_tasks.await {
        warn!(error = %e, "leader tasks ended abnormally");
    }
    election_stop_tx.send_replace(true);
    if let Err(e) = election.await {
        warn!(error = %e, "election task ended abnormally");
    }
    ready_task.abort();
    http_task.abort();
    // Let in-flight Events finish.
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(())
}

/// Waits until `store` has seen its first complete list. Polled again
/// and again: the store's readiness signal wakes only its latest waiter,
/// and the controller itself waits on it too.
async fn synced<K>(store: &kube::runtime::reflector::Store<K>) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(200), store.wait_until_ready()).await {
            Ok(r) => return r.is_ok(),
            Err(_) => continue,
        }
    }
}

async fn log<K, E1, E2>(
    res: Result<
        (ObjectRef<K>, kube::runtime::controller::Action),
        kube::runtime::controller::Error<E1, E2>,
    >,
) where
    K: Resource,
    E1: std::error::Error + 'static,
    E2: std::error::Error + 'static,
{
    match res {
        Ok((obj, _)) => debug!(object = %obj, "reconciled"),
        Err(e) => debug!(error = %e, "reconcile error"),
    }
}
