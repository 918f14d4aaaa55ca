//! What the operator's health monitors saw at their last look, shared: the
//! monitor task publishes a [`MonitorReadings`] after each look, and the
//! analysis reads the built-in signals `crashloops`, `restarts` and
//! `silentAgents` of a wave's namespaces from it. No I/O: a short lock and
//! an `Arc` clone.
//!
//! A monitor that is off (its threshold unset) or has not looked yet reads
//! as `None`, no data, which a check counts as inconclusive, never as a
//! pass.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

/// One namespace's health at the monitors' last look.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamespaceHealth {
    /// Agents and Tools in a crash loop.
    pub crashloops: u32,
    /// Pod restarts seen within the window, per hour.
    pub restarts_per_hour: f64,
    /// Active Agents that stopped checking in.
    pub silent_agents: u32,
}

/// One look of the monitors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MonitorReadings {
    /// Which monitors were on.
    pub crashloop: bool,
    pub restarts: bool,
    pub silent: bool,
    /// The namespaces with anything to say; one not listed had nothing.
    pub namespaces: BTreeMap<String, NamespaceHealth>,
}

/// The latest [`MonitorReadings`]; `None` until the first look and again
/// when a leadership term ends. Cheap to clone; every clone reads the same.
#[derive(Debug, Clone, Default)]
pub struct MonitorBoard {
    latest: Arc<RwLock<Option<Arc<MonitorReadings>>>>,
}

impl MonitorBoard {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the readings (the monitor task, after each look).
    pub fn publish(&self, r: MonitorReadings) {
        *self.latest.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(r));
    }

    /// Forgets the readings (the monitor task, when its term ends).
    pub fn clear(&self) {
        *self.latest.write().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Whether the monitors have looked in this term: before that, their
    /// signals are not "no data" but "not yet", and a measurement of them
    /// waits.
    pub fn ready(&self) -> bool {
        self.read().is_some()
    }

    fn read(&self) -> Option<Arc<MonitorReadings>> {
        self.latest
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn sum<S: AsRef<str>, T: std::iter::Sum<T>>(
        &self,
        on: impl Fn(&MonitorReadings) -> bool,
        namespaces: &[S],
        value: impl Fn(&NamespaceHealth) -> T,
    ) -> Option<T> {
        let r = self.read()?;
        on(&r).then(|| {
            namespaces
                .iter()
                .filter_map(|n| r.namespaces.get(n.as_ref()))
                .map(value)
                .sum()
        })
    }

    /// Workloads in a crash loop in `namespaces`.
    pub fn crashloops<S: AsRef<str>>(&self, namespaces: &[S]) -> Option<u32> {
        self.sum(|r| r.crashloop, namespaces, |h| h.crashloops)
    }

    /// Pod restarts per hour, summed over `namespaces`.
    pub fn restarts_per_hour<S: AsRef<str>>(&self, namespaces: &[S]) -> Option<f64> {
        self.sum(|r| r.restarts, namespaces, |h| h.restarts_per_hour)
    }

    /// Silent Agents in `namespaces`.
    pub fn silent_agents<S: AsRef<str>>(&self, namespaces: &[S]) -> Option<u32> {
        self.sum(|r| r.silent, namespaces, |h| h.silent_agents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_read_and_monitors_off_are_no_data_and_namespaces_sum() {
        let board = MonitorBoard::new();
        let reader = board.clone();
        assert_eq!(reader.crashloops(&["t1"]), None);
        assert!(!reader.ready());
        let h = |c, r, s| NamespaceHealth {
            crashloops: c,
            restarts_per_hour: r,
            silent_agents: s,
        };
        board.publish(MonitorReadings {
            crashloop: true,
            restarts: true,
            silent: false,
            namespaces: [("t1".into(), h(1, 6.0, 2)), ("t2".into(), h(2, 3.0, 0))].into(),
        });
        assert!(reader.ready());
        assert_eq!(reader.crashloops(&["t1", "t2", "t3"]), Some(3));
        assert_eq!(reader.crashloops(&["t3"]), Some(0));
        assert_eq!(reader.restarts_per_hour(&["t1", "t2"]), Some(9.0));
        assert_eq!(reader.silent_agents(&["t1"]), None, "silent is off");
        board.clear();
        assert_eq!(reader.crashloops(&["t1"]), None);
    }
}
