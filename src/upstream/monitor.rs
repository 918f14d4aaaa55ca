//! The `wedged-upstream` monitor, pure: it looks at [`HealthReport`]s
//! taken now and then and says what the operator reports about its own
//! upstream connection: whether it is connected, how many connections were
//! lost since the last look (one Kubernetes Event each look that saw any),
//! and the keyed alert [`WEDGED_KEY`].
//!
//! A wedge starts when `/health` says wedged (connected, silent past
//! `wedged_after`) or when the connection gave a silent socket up itself
//! (a silent drop). It ends once a connection has been up and not wedged
//! for `healthy_after`. The alert fires when a wedge starts and resolves
//! when it ends, through an [`AlertBook`]; it cannot travel on the wedged
//! socket, so the sink holds it and it arrives on the next connection.

use std::time::{Duration, Instant};

use super::health::HealthReport;
use crate::alerts::AlertBook;
use crate::wire::{Alert, Severity};

/// The key of the alert.
pub const WEDGED_KEY: &str = "monitor/wedged-upstream";
/// Its reason.
pub const WEDGED_REASON: &str = "UpstreamWedged";

/// What one look found.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub connected: bool,
    /// A wedge holds (the `wedged` gauge).
    pub wedged: bool,
    /// A wedge started at this look (an Event).
    pub wedge_started: Option<String>,
    /// Established connections lost since the last look, and how many of
    /// them were silent drops.
    pub new_disconnects: u64,
    pub new_silent_drops: u64,
    /// The alerts to send.
    pub alerts: Vec<Alert>,
}

#[derive(Debug, Clone)]
struct Wedge {
    message: String,
    healthy_since: Option<Instant>,
}

/// The monitor's memory between looks.
#[derive(Debug)]
pub struct Monitor {
    healthy_after: Duration,
    namespace: String,
    object: String,
    disconnects: u64,
    silent_drops: u64,
    wedge: Option<Wedge>,
    book: AlertBook,
}

impl Monitor {
    /// `object` (`Kind/name`) and `namespace` are what the alert names.
    pub fn new(healthy_after: Duration, namespace: &str, object: &str) -> Self {
        Self {
            healthy_after,
            namespace: namespace.to_owned(),
            object: object.to_owned(),
            disconnects: 0,
            silent_drops: 0,
            wedge: None,
            book: AlertBook::new(),
        }
    }

    pub fn observe(&mut self, r: &HealthReport, now: Instant) -> Observation {
        let new_disconnects = r.disconnects.saturating_sub(self.disconnects);
        let new_silent_drops = r.silent_drops.saturating_sub(self.silent_drops);
        self.disconnects = r.disconnects;
        self.silent_drops = r.silent_drops;
        let mut wedge_started = None;
        if r.wedged || new_silent_drops > 0 {
            match &mut self.wedge {
                Some(w) => w.healthy_since = None,
                None => {
                    let message = if r.wedged {
                        format!(
                            "the upstream socket is wedged: nothing received for {} s (limit {} s)",
                            r.last_event_age_ms.unwrap_or(0) / 1000,
                            r.wedged_after_ms / 1000
                        )
                    } else {
                        format!(
                            "the upstream socket went silent and was given up ({})",
                            r.last_close.as_deref().unwrap_or("no reason recorded")
                        )
                    };
                    wedge_started = Some(message.clone());
                    self.wedge = Some(Wedge {
                        message,
                        healthy_since: None,
                    });
                }
            }
        } else if let Some(w) = &mut self.wedge {
            if r.connected {
                let since = *w.healthy_since.get_or_insert(now);
                if now.saturating_duration_since(since) >= self.healthy_after {
                    self.wedge = None;
                }
            } else {
                w.healthy_since = None;
            }
        }
        let current: Vec<Alert> = self
            .wedge
            .iter()
            .map(|w| {
                Alert::new(
                    Severity::Warning,
                    WEDGED_REASON,
                    self.namespace.clone(),
                    self.object.clone(),
                    w.message.clone(),
                )
                .keyed(WEDGED_KEY)
            })
            .collect();
        Observation {
            connected: r.connected,
            wedged: self.wedge.is_some(),
            wedge_started,
            new_disconnects,
            new_silent_drops,
            alerts: self.book.reconcile(WEDGED_KEY, current),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::health::{ConnState, HealthHandle};
    use crate::wire::AlertState;

    fn report(state: ConnState, wedged: bool, disconnects: u64, silent: u64) -> HealthReport {
        let mut r = HealthHandle::new("b").report().unwrap();
        r.state = state;
        r.connected = state == ConnState::Connected;
        r.wedged = wedged;
        r.disconnects = disconnects;
        r.silent_drops = silent;
        r.last_event_age_ms = Some(95_000);
        r.wedged_after_ms = 90_000;
        r
    }

    #[test]
    fn a_wedge_alerts_once_and_resolves_after_a_healthy_while() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut m = Monitor::new(s(30), "exo-system", "Operator/op-1");
        let o = m.observe(&report(ConnState::Connected, false, 0, 0), t0);
        assert!(o.alerts.is_empty() && !o.wedged && o.connected);

        // Wedged while connected: the alert is raised (the sink holds it).
        let o = m.observe(&report(ConnState::Connected, true, 0, 0), t0 + s(1));
        assert!(o.wedged);
        assert!(
            o.wedge_started
                .as_deref()
                .unwrap()
                .contains("95 s (limit 90 s)")
        );
        assert_eq!(o.alerts.len(), 1);
        let a = &o.alerts[0];
        assert_eq!((a.key.as_str(), a.state), (WEDGED_KEY, AlertState::Firing));
        assert_eq!(
            (a.namespace.as_str(), a.object.as_str()),
            ("exo-system", "Operator/op-1")
        );

        // Given up (a silent drop) and redialling: the same wedge, no resend.
        let o = m.observe(&report(ConnState::Backoff, false, 1, 1), t0 + s(2));
        assert!(o.wedged && o.alerts.is_empty() && o.wedge_started.is_none());
        assert_eq!((o.new_disconnects, o.new_silent_drops), (1, 1));

        // Connected again: healthy only after `healthy_after`.
        let o = m.observe(&report(ConnState::Connected, false, 1, 1), t0 + s(3));
        assert!(o.wedged && o.alerts.is_empty());
        assert_eq!(o.new_disconnects, 0);
        let o = m.observe(&report(ConnState::Connected, false, 1, 1), t0 + s(20));
        assert!(o.wedged);
        let o = m.observe(&report(ConnState::Connected, false, 1, 1), t0 + s(33));
        assert!(!o.wedged);
        assert_eq!(o.alerts.len(), 1);
        assert_eq!(o.alerts[0].state, AlertState::Resolved);
        assert!(
            m.observe(&report(ConnState::Connected, false, 1, 1), t0 + s(40))
                .alerts
                .is_empty()
        );
    }

    #[test]
    fn a_silent_drop_is_a_wedge_and_a_plain_loss_is_not() {
        let t0 = Instant::now();
        let mut m = Monitor::new(Duration::from_secs(30), "", "Operator/x");
        let o = m.observe(&report(ConnState::Backoff, false, 1, 0), t0);
        assert!(!o.wedged && o.alerts.is_empty());
        assert_eq!(o.new_disconnects, 1);
        let o = m.observe(&report(ConnState::Backoff, false, 2, 1), t0);
        assert!(o.wedged);
        assert!(o.wedge_started.unwrap().contains("given up"));
        // Flapping back to not connected restarts the healthy clock.
        let s = Duration::from_secs;
        m.observe(&report(ConnState::Connected, false, 2, 1), t0 + s(1));
        m.observe(&report(ConnState::Backoff, false, 3, 1), t0 + s(25));
        let o = m.observe(&report(ConnState::Connected, false, 3, 1), t0 + s(40));
        assert!(o.wedged, "up for 0 s since the last loss");
    }
}
