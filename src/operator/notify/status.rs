//! The providers' and rules' `Ready` status: checked when either watch
//! sees a change and every `recheck` (a Secret created later is not
//! watched), written only when it says something new, stamped with the
//! generation it was computed for. A provider's check reads its Secret by
//! name; the condition names the field, the Secret or its key, never the
//! value.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use tracing::warn;

use super::deliver::read_secret;
use crate::cluster::apply::Ctx;
use crate::cluster::conditions::{Cond, merge};
use crate::cluster::metrics::Controller;
use crate::crd::{
    CONDITION_READY, NotificationProvider, NotificationRule, NotificationStatus, ProviderType,
};
use crate::notify::check::{ProviderState, Target, check_rule, resolve};

/// Runs the status passes until the term ends; polling `changes` also
/// drives both watches (and so fills the stores the router reads).
pub(super) async fn run(
    ctx: Arc<Ctx>,
    providers: Store<NotificationProvider>,
    rules: Store<NotificationRule>,
    changes: impl Stream<Item = ()> + Send,
    recheck: Duration,
) {
    let mut changes = std::pin::pin!(changes);
    let mut known: BTreeSet<(String, String)> = BTreeSet::new();
    loop {
        let woken = tokio::time::timeout(recheck, changes.next()).await;
        if matches!(woken, Ok(None)) {
            return;
        }
        // A burst of watch events (the first list) makes one pass.
        while let Ok(Some(())) =
            tokio::time::timeout(Duration::from_millis(100), changes.next()).await
        {}
        if providers.wait_until_ready().await.is_err() || rules.wait_until_ready().await.is_err() {
            return;
        }
        pass(&ctx, &providers, &rules, &mut known).await;
    }
}

/// What a provider's check found: its type and why it is not ready.
type Checked = BTreeMap<(String, String), (ProviderType, Result<(), String>)>;

async fn pass(
    ctx: &Ctx,
    providers: &Store<NotificationProvider>,
    rules: &Store<NotificationRule>,
    known: &mut BTreeSet<(String, String)>,
) {
    let mut checked = Checked::new();
    for p in providers.state() {
        let ns = p.namespace().unwrap_or_default();
        let result = check_provider(ctx, &ns, &p).await;
        let cond = match &result {
            Ok(target) => Cond::new(CONDITION_READY, true, "Ready", delivers_to(target)),
            Err((reason, message)) => Cond::new(CONDITION_READY, false, reason, message.clone()),
        };
        write(ctx, p.as_ref(), cond).await;
        let ready = result.map(drop).map_err(|(_, m)| m);
        checked.insert((ns, p.name_any()), (p.spec.type_, ready));
    }
    // A provider that went takes its series with it.
    for gone in known.difference(&checked.keys().cloned().collect()) {
        ctx.metrics.notify.forget(&gone.0, &gone.1);
    }
    *known = checked.keys().cloned().collect();
    for r in rules.state() {
        let ns = r.namespace().unwrap_or_default();
        let provider = match checked.get(&(ns.clone(), r.spec.provider_ref.clone())) {
            None => ProviderState::Missing,
            Some((type_, ready)) => ProviderState::Found {
                type_: *type_,
                ready: ready.as_ref().map(|_| ()).map_err(String::as_str),
            },
        };
        let cond = match check_rule(&ns, &r.spec, provider) {
            Ok(()) => Cond::new(
                CONDITION_READY,
                true,
                "Ready",
                "selects events for its provider",
            ),
            Err(p) => Cond::new(CONDITION_READY, false, p.reason(), p.to_string()),
        };
        write(ctx, r.as_ref(), cond).await;
    }
}

/// Where a ready provider delivers, as may be shown.
fn delivers_to(target: &Target) -> String {
    match target {
        Target::Webhook { address, .. } => format!("signed webhook to {address}"),
        Target::Slack { address } => format!("Slack-compatible webhook to {address}"),
        Target::Forge { settings, repo, .. } => {
            format!("commit statuses on {} at {}", repo, settings.url)
        }
    }
}

/// The provider's check with its Secret: the target, or the condition's
/// reason and message.
async fn check_provider(
    ctx: &Ctx,
    ns: &str,
    p: &NotificationProvider,
) -> Result<Target, (&'static str, String)> {
    let secret = match p.spec.secret_ref.as_deref() {
        None => None,
        Some(name) => match read_secret(ctx, ns, name).await {
            Ok(data) => data,
            Err(e) => {
                return Err((
                    "SecretUnreadable",
                    format!("Secret {ns}/{name} (spec.secretRef) cannot be read: {e}"),
                ));
            }
        },
    };
    resolve(ns, &p.spec, &secret).map_err(|problem| (problem.reason(), problem.to_string()))
}

/// The two kinds' shared status handling.
trait HasStatus:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + serde::Serialize
{
    fn status(&self) -> Option<&NotificationStatus>;
}

impl HasStatus for NotificationProvider {
    fn status(&self) -> Option<&NotificationStatus> {
        self.status.as_ref()
    }
}

impl HasStatus for NotificationRule {
    fn status(&self) -> Option<&NotificationStatus> {
        self.status.as_ref()
    }
}

/// Writes `cond` as the object's `Ready` condition, for its generation,
/// unless the status says exactly that already.
async fn write<K: HasStatus>(ctx: &Ctx, obj: &K, cond: Cond) {
    let generation = obj.meta().generation;
    let old = obj.status().cloned().unwrap_or_default();
    let conditions = merge(
        &old.conditions,
        &[cond],
        generation,
        k8s_openapi::jiff::Timestamp::now(),
    );
    let new = NotificationStatus {
        observed_generation: generation,
        conditions,
    };
    if new == old {
        return;
    }
    let ns = obj.meta().namespace.clone().unwrap_or_default();
    let name = obj.meta().name.clone().unwrap_or_default();
    if let Err(e) = ctx
        .apply_status::<K>(Controller::Notify, &ns, &name, &new)
        .await
    {
        warn!(namespace = %ns, %name, kind = %K::kind(&()), error = %e, "cannot write the status");
    }
}
