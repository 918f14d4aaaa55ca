//! Which cluster of a fleet this operator runs in: the name `--cluster`
//! gives, or else the deployment name the control plane's `welcome` says
//! its token belongs to (a cluster's name in `clusters/` is its
//! deployment's). Shared by the upstream connection, which learns it,
//! and the rollout engine, which applies only the tenants placed on it.

use std::sync::{Arc, RwLock};

use tracing::warn;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Known {
    /// Not known yet.
    Unknown,
    /// Given by the operator's flag: the welcome does not change it.
    Given(String),
    /// Learned from the control plane.
    Learned(String),
}

/// A cheap handle; clones share the name.
#[derive(Debug, Clone)]
pub struct ClusterName(Arc<RwLock<Known>>);

impl ClusterName {
    /// `given` is the operator's `--cluster`, if set.
    pub fn new(given: Option<String>) -> Self {
        ClusterName(Arc::new(RwLock::new(match given {
            Some(n) => Known::Given(n),
            None => Known::Unknown,
        })))
    }

    /// The name, once known.
    pub fn get(&self) -> Option<String> {
        match &*self.0.read().unwrap_or_else(|e| e.into_inner()) {
            Known::Unknown => None,
            Known::Given(n) | Known::Learned(n) => Some(n.clone()),
        }
    }

    /// The deployment name a control plane's welcome gave: the name, unless
    /// the flag gave one (a different one is logged, and the flag's kept).
    pub fn learn(&self, deployment: &str) {
        let mut known = self.0.write().unwrap_or_else(|e| e.into_inner());
        match &*known {
            Known::Given(n) if n != deployment => warn!(
                cluster = %n,
                deployment,
                "--cluster differs from the control plane's deployment name; the fleet's placement uses --cluster"
            ),
            Known::Given(_) => {}
            _ => *known = Known::Learned(deployment.to_owned()),
        }
    }
}

impl Default for ClusterName {
    fn default() -> Self {
        ClusterName::new(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_and_the_welcome_fills_in() {
        let given = ClusterName::new(Some("eu".into()));
        given.learn("us");
        assert_eq!(given.get().as_deref(), Some("eu"));
        let learned = ClusterName::default();
        assert_eq!(learned.get(), None);
        let shared = learned.clone();
        shared.learn("us");
        assert_eq!(learned.get().as_deref(), Some("us"));
        shared.learn("eu");
        assert_eq!(learned.get().as_deref(), Some("eu"));
    }
}
