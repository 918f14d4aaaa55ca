//! The notifications' delivery task (leader only): it watches the
//! `NotificationProvider`s and `NotificationRule`s of the followed
//! namespace, keeps their `Ready` status, drains the operator's
//! [`Notices`] queue, and hands each notice a rule selects to its
//! provider's worker, which delivers it with retries
//! ([`deliver`]).
//!
//! Guarantees:
//! - nothing here blocks an emitter: the queue is bounded and each
//!   provider's worker has a bounded queue of its own; what overflows is
//!   counted (`exo_notifications_dropped_total`, `result="dropped"`);
//! - one provider's notices go out one at a time, in the order they were
//!   emitted (a commit's `pending` never lands after its `success`), and a
//!   slow or dead receiver holds only its own provider's queue;
//! - a delivery that fails after its retries is a `NotificationFailed`
//!   Event on the rule and `result="failed"` in `exo_notifications_total`;
//! - a provider's secret is read from its Secret when a notice is
//!   delivered and is in no log line, Event, status or error;
//! - the workers stop with the term (they are aborted with the task), so a
//!   replica that lost the Lease sends nothing more.

mod deliver;
mod status;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::cluster::apply::Ctx;
use crate::crd::{NotificationProvider, NotificationRule};
use crate::notify::select::select;
use crate::notify::{Backoff, Notice, Notices};

/// How many deliveries wait per provider at most.
const PROVIDER_QUEUE: usize = 256;

#[derive(Debug, Clone)]
pub struct NotifyConfig {
    /// What the emitters queued.
    pub notices: Notices,
    /// Where providers and rules are watched (the followed Fleets'
    /// namespace); every namespace when `None`.
    pub namespace: Option<String>,
    pub backoff: Backoff,
    /// How often every status is checked again (a Secret created or fixed
    /// later is not watched).
    pub recheck: Duration,
}

impl NotifyConfig {
    pub fn new(notices: Notices, namespace: Option<String>) -> Self {
        NotifyConfig {
            notices,
            namespace,
            backoff: Backoff::default(),
            recheck: Duration::from_secs(30),
        }
    }
}

fn api<K>(ctx: &Ctx, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    }
}

/// The leader task: runs until the term ends (the runtime drops it).
pub async fn run(ctx: Arc<Ctx>, cfg: NotifyConfig) {
    let ns = cfg.namespace.as_deref();
    let providers: Api<NotificationProvider> = api(&ctx, ns);
    let rules: Api<NotificationRule> = api(&ctx, ns);
    let probe = ListParams::default().limit(1);
    if let Err(e) = providers.list(&probe).await.and(rules.list(&probe).await) {
        warn!(error = %e, "notifications off: NotificationProviders or NotificationRules cannot be listed (install their CRDs and RBAC, then restart the operator)");
        discard(&cfg.notices).await;
        return;
    }
    let (provider_store, provider_writer) = reflector::store::<NotificationProvider>();
    let (rule_store, rule_writer) = reflector::store::<NotificationRule>();
    // Either watch's change wakes the status pass.
    let changes = futures::stream::select(
        watcher(providers, watcher::Config::default())
            .default_backoff()
            .reflect(provider_writer)
            .map(|_| ()),
        watcher(rules, watcher::Config::default())
            .default_backoff()
            .reflect(rule_writer)
            .map(|_| ()),
    );
    let watched = status::run(
        ctx.clone(),
        provider_store.clone(),
        rule_store.clone(),
        changes,
        cfg.recheck,
    );
    let routed = route(ctx, cfg, provider_store, rule_store);
    info!("notifications started");
    tokio::join!(watched, routed);
}

/// Without the kinds there is no rule: what is emitted goes nowhere (and
/// is not counted as dropped).
async fn discard(notices: &Notices) {
    loop {
        let _ = notices.next().await;
    }
}

/// One provider's delivery: the rule that selected the notice, the
/// provider as cached, the notice and the tenants it names.
pub(super) struct Job {
    pub rule: Arc<NotificationRule>,
    pub provider: Arc<NotificationProvider>,
    pub notice: Notice,
    pub tenants: Vec<String>,
}

/// Drains the queue into the providers' workers.
async fn route(
    ctx: Arc<Ctx>,
    cfg: NotifyConfig,
    providers: Store<NotificationProvider>,
    rules: Store<NotificationRule>,
) {
    let (_, _) = tokio::join!(providers.wait_until_ready(), rules.wait_until_ready());
    let client = match crate::net::client() {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "notifications off: no TLS roots for the outbound client");
            discard(&cfg.notices).await;
            return;
        }
    };
    // Aborted with this task: a worker never outlives the term.
    let mut workers: JoinSet<()> = JoinSet::new();
    let mut queues: HashMap<ObjectRef<NotificationProvider>, mpsc::Sender<Job>> = HashMap::new();
    let mut dropped_seen = 0;
    loop {
        let notice = cfg.notices.next().await;
        let dropped = cfg.notices.dropped();
        if dropped > dropped_seen {
            ctx.metrics.notify.dropped(dropped - dropped_seen);
            warn!(
                dropped,
                "notification queue full; the oldest notices were dropped"
            );
            dropped_seen = dropped;
        }
        for rule in rules.state() {
            let ns = rule.metadata.namespace.clone().unwrap_or_default();
            let key = ObjectRef::new(&rule.spec.provider_ref).within(&ns);
            let Some(provider) = providers.get(&key) else {
                continue;
            };
            let Some(tenants) = select(&rule.spec, provider.spec.type_, &notice) else {
                continue;
            };
            let queue = queues.entry(key.clone()).or_insert_with(|| {
                let (tx, rx) = mpsc::channel(PROVIDER_QUEUE);
                workers.spawn(deliver::worker(
                    ctx.clone(),
                    client.clone(),
                    cfg.backoff,
                    rx,
                ));
                tx
            });
            let job = Job {
                rule: rule.clone(),
                provider,
                notice: notice.clone(),
                tenants,
            };
            if queue.try_send(job).is_err() {
                ctx.metrics.notify.delivery(&ns, &key.name, "dropped");
                warn!(provider = %key, rule = %rule.metadata.name.as_deref().unwrap_or_default(), kind = notice.label(), "provider's queue full; notification dropped");
            }
        }
    }
}
