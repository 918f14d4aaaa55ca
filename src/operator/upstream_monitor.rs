//! The operator's view of its own upstream connection (leader only): runs
//! the connection and, beside it, looks at its health every second to set
//! the `exo_operator_upstream_*` metrics, publish Kubernetes Events and
//! raise the `monitor/wedged-upstream` alert (`upstream::monitor`, pure).
//!
//! Events go on the operator's own Pod (`POD_NAME`, `POD_NAMESPACE`,
//! `POD_UID` from the downward API), where `kubectl describe pod` shows them
//! beside the kubelet's liveness-probe Events; outside a Pod they go on the
//! leader Lease. At most one `UpstreamDisconnected` Event per look (one per
//! lost connection, never one per redial), one `UpstreamWedged` per wedge.
//! Losing the Lease stops this task: the connection closes with a close
//! frame; the gauges are set back to 0 then.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};
use tracing::warn;

use super::runtime::{LeaderTask, Stop};
use crate::alerts::{AlertQueue, AlertSink};
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::cluster::metrics::{DisconnectCause, DisconnectLabels, Metrics};
use crate::upstream::monitor::Monitor;
use crate::upstream::{HealthHandle, UpstreamConfig};

/// How often the health is looked at.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// What the Events are about: the operator's Pod, else the Lease.
pub fn event_target(lease_name: &str, lease_namespace: &str) -> ObjectReference {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (var("POD_NAME"), var("POD_NAMESPACE")) {
        (Some(name), Some(namespace)) => ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(name),
            namespace: Some(namespace),
            uid: var("POD_UID"),
            ..ObjectReference::default()
        },
        _ => ObjectReference {
            api_version: Some("coordination.k8s.io/v1".into()),
            kind: Some("Lease".into()),
            name: Some(lease_name.to_owned()),
            namespace: Some(lease_namespace.to_owned()),
            ..ObjectReference::default()
        },
    }
}

/// Sets the gauges back to 0 when the task ends (a lost Lease aborts it).
struct Gauges(Arc<Metrics>);

impl Drop for Gauges {
    fn drop(&mut self) {
        self.0.upstream_connected.set(0);
        self.0.upstream_wedged.set(0);
    }
}

/// The leader task: the upstream connection and its monitor. The monitor
/// (what it counted, a wedge it raised) is kept across leadership terms of
/// this process, like the health handle and the alert queue, so a new term
/// neither counts old disconnects again nor forgets to resolve.
pub fn leader_task(
    cfg: UpstreamConfig,
    health: HealthHandle,
    queue: AlertQueue,
    sink: AlertSink,
    target: ObjectReference,
) -> LeaderTask {
    let object = format!(
        "Operator/{}",
        target.name.clone().unwrap_or_else(|| "exo".into())
    );
    let namespace = target.namespace.clone().unwrap_or_default();
    let monitor = Arc::new(Mutex::new(Monitor::new(
        cfg.healthy_after,
        &namespace,
        &object,
    )));
    let task = Task {
        cfg,
        health,
        queue,
        sink,
        target,
        monitor,
    };
    Arc::new(move |ctx, stop| Box::pin(task.clone().run(ctx, stop)))
}

/// What the leader task keeps across terms.
#[derive(Clone)]
struct Task {
    cfg: UpstreamConfig,
    health: HealthHandle,
    queue: AlertQueue,
    sink: AlertSink,
    target: ObjectReference,
    monitor: Arc<Mutex<Monitor>>,
}

impl Task {
    /// Runs the upstream connection and its monitor until the term ends:
    /// the connection then closes with a close frame (1000) and returns.
    async fn run(self, ctx: Arc<Ctx>, stop: Stop) {
        let monitor = watch(
            ctx.clone(),
            self.health.clone(),
            self.sink,
            self.target,
            self.monitor,
        );
        // Discovery from the operator's caches: no second set of watches.
        let feed = super::upstream_feed::feed(&ctx, &self.cfg);
        let connection = crate::upstream::run_fed(
            ctx.client.clone(),
            self.cfg,
            self.health,
            self.queue,
            Some(feed),
            stop.requested(),
        );
        tokio::select! {
            r = connection => if let Err(e) = r {
                tracing::error!(error = %e, "upstream connection stopped");
            },
            () = monitor => {}
        }
    }
}

async fn watch(
    ctx: Arc<Ctx>,
    health: HealthHandle,
    sink: AlertSink,
    target: ObjectReference,
    monitor: Arc<Mutex<Monitor>>,
) {
    let gauges = Gauges(ctx.metrics.clone());
    let mut tick = tokio::time::interval(LOOK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(report) = health.report() else {
            continue;
        };
        let o = monitor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe(&report, Instant::now());
        let m = &gauges.0;
        m.upstream_connected.set(i64::from(o.connected));
        m.upstream_wedged.set(i64::from(o.wedged));
        let count = |cause, n: u64| {
            m.upstream_disconnects
                .get_or_create(&DisconnectLabels { cause })
                .inc_by(n);
        };
        count(DisconnectCause::silent, o.new_silent_drops);
        count(
            DisconnectCause::other,
            o.new_disconnects.saturating_sub(o.new_silent_drops),
        );
        if o.new_disconnects > 0 {
            let last = report.last_close.as_deref().unwrap_or("no reason recorded");
            let note = if o.new_disconnects == 1 {
                format!("upstream connection to the control plane lost: {last}")
            } else {
                format!(
                    "upstream connection to the control plane lost {} times; last: {last}",
                    o.new_disconnects
                )
            };
            publish(&ctx, &target, Reason::UpstreamDisconnected, note);
        }
        if let Some(why) = o.wedge_started {
            publish(&ctx, &target, Reason::UpstreamWedged, why);
        }
        for a in o.alerts {
            sink.send(a);
        }
    }
}

/// In the background: the monitor never waits for an Event.
fn publish(ctx: &Ctx, target: &ObjectReference, reason: Reason, note: String) {
    let ev = Event {
        type_: EventType::Warning,
        reason: reason.as_str().to_owned(),
        note: Some(note),
        action: reason.action().to_owned(),
        secondary: None,
    };
    let recorder = ctx.recorder.clone();
    let reference = target.clone();
    tokio::spawn(async move {
        if let Err(e) = recorder.publish(&ev, &reference).await {
            warn!(reason = reason.as_str(), error = %e, "could not publish an Event");
        }
    });
}
