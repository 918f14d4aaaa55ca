//! The pod roll that Agents and Tools share: retire the pods the desired
//! one replaces (or all of them when there is none), create the desired pod
//! once every old one is gone (recreate order: pod specs are immutable),
//! and, when asked, restart a failed pod.
//!
//! Thin I/O over [`PodSet`]'s pure split; every write goes through
//! [`Ctx`].

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::runtime::events::EventType;
use tracing::info;

use super::phase::{PodState, pod_state};
use crate::cluster::apply::{Created, Ctx};
use crate::cluster::error::Result;
use crate::cluster::events::Reason;
use crate::cluster::metrics::Controller;
use crate::cluster::pods::PodSet;

/// How long to wait for old pods to go, or for the cache to show a pod
/// just created.
const SETTLE: Duration = Duration::from_secs(2);

/// Where the roll left the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rolled {
    pub state: PodState,
    /// The pod to name in the status.
    pub shown: Option<String>,
    pub requeue: Option<Duration>,
}

/// What the owner asks of its pod beyond the desired spec.
#[derive(Debug, Clone, Copy)]
pub struct Roll<'a> {
    /// Why the pods go when nothing is desired (paused, disabled).
    pub removed_because: &'a str,
    /// The owner's status names no pod yet: the first creation is
    /// announced (a replacement was announced by `PodRolled` already).
    pub first: bool,
    /// A failed pod is deleted and recreated (`restartPolicy` is not
    /// `Never`).
    pub restart_failed: bool,
}

/// Rolls `owner`'s pods in `ns` towards `desired`.
pub async fn roll<K: Resource<DynamicType = ()>>(
    ctx: &Ctx,
    c: Controller,
    owner: &K,
    ns: &str,
    set: &PodSet<'_>,
    desired: Option<&Pod>,
    how: Roll<'_>,
) -> Result<Rolled> {
    let mut requeue = None;
    let mut shown = set.shown().and_then(|p| p.metadata.name.clone());
    let mut state = pod_state(set.shown());
    if ctx
        .retire_pods(c, owner, ns, set, desired, how.removed_because)
        .await?
    {
        state = PodState::Deleting;
    }
    if let Some(desired) = desired {
        let name = desired.metadata.name.clone().unwrap_or_default();
        match set.current {
            // Recreate order: the new pod starts once every old one is gone.
            _ if !set.stale.is_empty() => {
                state = PodState::Deleting;
                requeue = Some(SETTLE);
            }
            None => {
                match ctx.create_pod(c, desired).await? {
                    Created::Now if how.first => {
                        ctx.event(
                            owner,
                            EventType::Normal,
                            Reason::PodCreated,
                            format!("created pod {name}"),
                        )
                        .await;
                        info!(pod = %name, kind = %K::kind(&()), "pod created");
                    }
                    // Created a moment ago; the watch has not shown it yet.
                    Created::Expected => requeue = Some(SETTLE),
                    _ => {}
                }
                shown = Some(name);
                state = PodState::Missing;
            }
            Some(_) if state == PodState::Deleting => requeue = Some(SETTLE),
            Some(p) => {
                if matches!(state, PodState::Failed { .. }) && how.restart_failed {
                    ctx.delete::<Pod>(c, ns, &name, p.metadata.uid.clone())
                        .await?;
                    ctx.event(
                        owner,
                        EventType::Warning,
                        Reason::PodRestarted,
                        format!("pod {name} failed; recreating"),
                    )
                    .await;
                }
            }
        }
    }
    Ok(Rolled {
        state,
        shown,
        requeue,
    })
}
