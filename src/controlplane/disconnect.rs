//! The control plane's own alert for a lost operator: key
//! [`KEY`] (`plane/disconnected`), reason [`REASON`]. An operator cannot
//! report that it is gone, so the server raises it: as a `warning` when a
//! connection ends uncleanly (no close frame, a broken socket, no pong, a
//! protocol error), as `critical` once the deployment is offline (no frame
//! for `offline_after`, connected or not). It clears when the deployment is
//! connected again (registration), or, for a silent connected one, when its
//! frames make it online again.
//!
//! Guarantees: a clean goodbye (close 1000 from the operator, or this
//! server shutting down) raises nothing at once; the deployment still gets
//! the critical alert if it stays away for `offline_after`. Decisions for
//! one deployment are serialised, so a lost connection's late "raise" can
//! never land after its successor's "clear". The offline check runs every
//! `offline_after / 10` (1 s to 30 s), only over deployments that connected
//! since this server started; it writes only on a change.
//!
//! With replicas, a deployment whose last holder died or left is watched
//! by the live replica with the lowest id, from its row.
//!
//! Caveat: after a restart of a single control plane, a deployment that
//! was connected before and never comes back is shown offline but not
//! alerted (this server never saw it connected).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::App;
use super::model::{DeploymentView, Health, Origin, PLANE_PREFIX, Source};
use crate::wire::{Alert, Severity};

/// The key of the disconnect alert.
pub const KEY: &str = "plane/disconnected";
/// Its reason.
pub const REASON: &str = "UpstreamDisconnected";

const _: () = assert!(KEY.len() > PLANE_PREFIX.len());

/// What happened to a deployment's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// A new connection registered.
    Registered,
    /// The connection holding the deployment ended (no successor).
    Lost { clean: bool, reason: String },
    /// The periodic check.
    Tick { connected: bool, state: Health },
}

/// What to do about the disconnect alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// Raise it (or raise it again with another severity and message).
    Raise(Severity, String),
    Clear,
}

/// Pure: the step for `trigger` when the alert is `active` (its severity)
/// or not. `offline_after` only words the message.
pub fn decide(trigger: &Trigger, active: Option<Severity>, offline_after: Duration) -> Step {
    match trigger {
        Trigger::Registered if active.is_some() => Step::Clear,
        Trigger::Registered => Step::Nothing,
        Trigger::Lost {
            clean: false,
            reason,
        } if active.is_none() => {
            Step::Raise(Severity::Warning, format!("connection lost: {reason}"))
        }
        Trigger::Lost { .. } => Step::Nothing,
        Trigger::Tick { state, .. } if *state == Health::Offline => {
            if active == Some(Severity::Critical) {
                Step::Nothing
            } else {
                Step::Raise(
                    Severity::Critical,
                    format!(
                        "offline: no frame from the operator for {} s",
                        offline_after.as_secs()
                    ),
                )
            }
        }
        Trigger::Tick {
            connected: true,
            state: Health::Online,
        } if active.is_some() => Step::Clear,
        Trigger::Tick { .. } => Step::Nothing,
    }
}

/// Serialises the decisions (see the module's guarantees).
#[derive(Debug, Default)]
pub struct DisconnectAlerts {
    lock: tokio::sync::Mutex<()>,
}

/// What the alert names: the operator's host (its pod) as last seen.
fn object(host: &str, deployment: &str) -> String {
    if host.is_empty() {
        format!("Operator/{deployment}")
    } else {
        format!("Operator/{host}")
    }
}

impl App {
    /// Looks at the deployment's disconnect alert after `trigger` and raises
    /// or clears it. `host`, `boot_id` and `connection_id` describe the
    /// connection concerned. Store errors are logged: the next trigger or
    /// tick tries again.
    pub async fn on_connection(
        &self,
        deployment: &str,
        trigger: Trigger,
        host: &str,
        boot_id: Option<&str>,
        connection_id: Option<&str>,
    ) {
        let _serial = self.disconnects.lock.lock().await;
        // A lost connection whose successor registered meanwhile is no
        // disconnect.
        if matches!(trigger, Trigger::Lost { .. }) {
            if self.live.is_connected(deployment) {
                return;
            }
            // Nor is one whose operator is connected to another replica.
            if let Some(r) = &self.replica
                && matches!(r.owner(deployment).await, Ok(Some(_)))
            {
                return;
            }
        }
        let active = match self.store.active(deployment, KEY).await {
            Ok(a) => a,
            Err(e) => {
                warn!(%deployment, error = %e, "disconnect alert: cannot read the active set");
                return;
            }
        };
        let severity = active.as_ref().map(|a| a.alert.severity);
        let origin = Origin {
            deployment,
            boot_id,
            connection_id,
            source: Source::ControlPlane,
        };
        let alert = match decide(&trigger, severity, self.cfg.offline_after) {
            Step::Nothing => return,
            Step::Raise(sev, message) => {
                Alert::new(sev, REASON, "", object(host, deployment), message).keyed(KEY)
            }
            Step::Clear => {
                let Some(a) = active else { return };
                Alert::new(a.alert.severity, REASON, "", a.alert.object, "")
                    .keyed(KEY)
                    .resolving("connected again")
            }
        };
        if let Err(e) = self.store.insert_alert(&origin, &alert).await {
            warn!(%deployment, error = %e, "disconnect alert: write failed");
        } else {
            tracing::info!(%deployment, severity = alert.severity.as_str(), state = ?alert.state, message = %alert.message, "disconnect alert");
        }
    }
}

/// With replicas: the deployments whose last holder is gone, judged from
/// their rows, when this replica watches them (`Replica::orphans`), less
/// those this one knows itself. No other replica's check covers them, so
/// an operator that never comes back after its replica died is still
/// alerted on.
async fn orphans(
    app: &App,
    known: &[(String, bool, Health, String)],
) -> Vec<(String, bool, Health, String)> {
    let Some(r) = &app.replica else {
        return Vec::new();
    };
    let rows = match r.orphans().await {
        Ok(rows) => rows,
        Err(e) => {
            warn!(error = %e, "disconnect check: orphaned deployments unreadable");
            return Vec::new();
        }
    };
    let mine: HashSet<&str> = known.iter().map(|k| k.0.as_str()).collect();
    rows.iter()
        .filter(|h| !mine.contains(h.deployment.as_str()))
        .map(|h| {
            let host = h.hello.as_ref().map(|x| x.host.hostname.clone());
            let state = DeploymentView::from_holding(h, app.live.thresholds).state;
            (h.deployment.clone(), false, state, host.unwrap_or_default())
        })
        .collect()
}

/// The offline check: every `offline_after / 10` (1 s to 30 s).
pub async fn watch(app: Arc<App>) {
    let every = (app.cfg.offline_after / 10).clamp(Duration::from_secs(1), Duration::from_secs(30));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let active = match app.store.active_severities(KEY).await {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "disconnect check: cannot read the active set");
                continue;
            }
        };
        let mut known = app.live.known();
        known.extend(orphans(&app, &known).await);
        for (dep, connected, state, host) in known {
            let trigger = Trigger::Tick { connected, state };
            // Only a change is worth the lock and a write.
            if decide(&trigger, active.get(&dep).copied(), app.cfg.offline_after) != Step::Nothing {
                app.on_connection(&dep, trigger, &host, None, None).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFF: Duration = Duration::from_secs(300);

    fn lost(clean: bool) -> Trigger {
        Trigger::Lost {
            clean,
            reason: "socket ended".into(),
        }
    }

    fn tick(connected: bool, state: Health) -> Trigger {
        Trigger::Tick { connected, state }
    }

    #[test]
    fn raised_on_an_unclean_loss_and_cleared_on_reconnect() {
        let w = Some(Severity::Warning);
        let c = Some(Severity::Critical);
        let raise_w = Step::Raise(Severity::Warning, "connection lost: socket ended".into());
        let raise_c = Step::Raise(
            Severity::Critical,
            "offline: no frame from the operator for 300 s".into(),
        );
        let cases = [
            (lost(false), None, raise_w),
            // Already raised: not again (a flapping connection).
            (lost(false), w, Step::Nothing),
            // A goodbye is not an outage (yet).
            (lost(true), None, Step::Nothing),
            (Trigger::Registered, w, Step::Clear),
            (Trigger::Registered, None, Step::Nothing),
            // Offline escalates, once.
            (tick(false, Health::Offline), None, raise_c.clone()),
            (tick(false, Health::Offline), w, raise_c.clone()),
            (tick(true, Health::Offline), None, raise_c),
            (tick(false, Health::Offline), c, Step::Nothing),
            // Away, not yet offline: left as it is.
            (tick(false, Health::Degraded), w, Step::Nothing),
            (tick(false, Health::Online), w, Step::Nothing),
            (tick(true, Health::Degraded), c, Step::Nothing),
            // Connected and talking again.
            (tick(true, Health::Online), c, Step::Clear),
            (tick(true, Health::Online), None, Step::Nothing),
        ];
        for (trigger, active, want) in cases {
            assert_eq!(
                decide(&trigger, active, OFF),
                want,
                "{trigger:?} {active:?}"
            );
        }
    }

    #[test]
    fn the_alert_names_the_operator() {
        assert_eq!(
            object("exo-operator-7f9c", "prod"),
            "Operator/exo-operator-7f9c"
        );
        assert_eq!(object("", "prod"), "Operator/prod");
    }
}
