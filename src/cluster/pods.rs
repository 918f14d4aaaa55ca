//! Which of an owner's pods is the current one, and which are left over
//! from an earlier template (pure; the reconcilers list, this sorts).
//!
//! Pod names carry the template hash, so a roll creates a pod under a new
//! name once every older pod is gone (recreate order: an agent never runs
//! twice, and a read-write-once volume is never claimed by two pods).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::build::hash_of;

/// How long a pod this replica created counts as existing before the
/// cache shows it (the watch normally delivers it within milliseconds).
pub const EXPECT_FOR: Duration = Duration::from_secs(10);

/// Pods this replica created that its cache has not shown yet, by
/// `namespace/name`. A reconcile that runs between the create and the
/// watch event (the finalizer patch triggers one) would otherwise create
/// the pod again and get a conflict: one wasted request per pod at scale.
#[derive(Debug, Default)]
pub struct Expected(Mutex<HashMap<String, Instant>>);

impl Expected {
    /// Records that `key` was just created.
    pub fn created(&self, key: String, now: Instant) {
        if let Ok(mut map) = self.0.lock() {
            // Keep the map small: entries past their time are dropped.
            map.retain(|_, at| now.saturating_duration_since(*at) < EXPECT_FOR);
            map.insert(key, now);
        }
    }

    /// Whether `key` was created less than [`EXPECT_FOR`] ago and is not
    /// in the cache yet.
    pub fn pending(&self, key: &str, now: Instant) -> bool {
        self.0.lock().is_ok_and(|map| {
            map.get(key)
                .is_some_and(|at| now.saturating_duration_since(*at) < EXPECT_FOR)
        })
    }

    /// The cache shows `key`: it is no longer expected.
    pub fn seen(&self, key: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(key);
        }
    }
}

/// An owner's pods, sorted against the desired pod.
#[derive(Debug, Default)]
pub struct PodSet<'a> {
    /// The pod built from the desired template (same name), if it exists.
    pub current: Option<&'a Pod>,
    /// Pods from other templates: to delete, and to wait for.
    pub stale: Vec<&'a Pod>,
}

impl<'a> PodSet<'a> {
    /// Sorts `pods` against the desired pod's name and template hash;
    /// `desired: None` (paused, disabled) makes every pod stale.
    pub fn split(pods: &'a [Pod], desired: Option<&Pod>) -> Self {
        let mut set = PodSet::default();
        for p in pods {
            let is_current = desired.is_some_and(|d| {
                p.metadata.name == d.metadata.name && hash_of(&p.metadata) == hash_of(&d.metadata)
            });
            if is_current && set.current.is_none() {
                set.current = Some(p);
            } else {
                set.stale.push(p);
            }
        }
        set
    }

    /// Stale pods not yet being deleted.
    pub fn to_delete(&self) -> impl Iterator<Item = &'a Pod> + '_ {
        self.stale
            .iter()
            .copied()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
    }

    /// The pod to report: the current one, else a stale one still there.
    pub fn shown(&self) -> Option<&'a Pod> {
        self.current.or_else(|| self.stale.first().copied())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::meta::ANNOTATION_SPEC_HASH;

    #[test]
    fn expected_pods_count_until_seen_or_their_time_is_up() {
        let e = Expected::default();
        let t0 = Instant::now();
        assert!(!e.pending("ns/a", t0));
        e.created("ns/a".into(), t0);
        assert!(e.pending("ns/a", t0 + Duration::from_secs(1)));
        assert!(!e.pending("ns/a", t0 + EXPECT_FOR));
        e.seen("ns/a");
        assert!(!e.pending("ns/a", t0));
    }

    fn pod(name: &str, hash: &str, deleting: bool) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.to_owned());
        p.metadata.annotations = Some(BTreeMap::from([(
            ANNOTATION_SPEC_HASH.to_owned(),
            hash.to_owned(),
        )]));
        if deleting {
            p.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        }
        p
    }

    #[test]
    fn the_pod_of_the_desired_template_is_current() {
        let pods = [pod("agent-a-11111111", "11111111aa", false)];
        let desired = pod("agent-a-11111111", "11111111aa", false);
        let set = PodSet::split(&pods, Some(&desired));
        assert!(set.current.is_some());
        assert!(set.stale.is_empty());
    }

    #[test]
    fn pods_of_other_templates_are_stale_and_deleted_once() {
        let pods = [
            pod("agent-a-11111111", "11111111aa", true),
            pod("agent-a-22222222", "22222222aa", false),
        ];
        let desired = pod("agent-a-33333333", "33333333aa", false);
        let set = PodSet::split(&pods, Some(&desired));
        assert!(set.current.is_none());
        assert_eq!(set.stale.len(), 2);
        let names: Vec<_> = set.to_delete().map(|p| p.metadata.name.clone()).collect();
        assert_eq!(names, [Some("agent-a-22222222".to_owned())]);
        assert_eq!(
            set.shown().and_then(|p| p.metadata.name.as_deref()),
            Some("agent-a-11111111")
        );
    }

    #[test]
    fn without_a_desired_pod_everything_is_stale() {
        let pods = [pod("tool-t-11111111", "11111111aa", false)];
        let set = PodSet::split(&pods, None);
        assert!(set.current.is_none());
        assert_eq!(set.to_delete().count(), 1);
    }

    #[test]
    fn a_same_named_pod_with_another_hash_is_stale() {
        let pods = [pod("agent-a-11111111", "99999999aa", false)];
        let desired = pod("agent-a-11111111", "11111111aa", false);
        let set = PodSet::split(&pods, Some(&desired));
        assert!(set.current.is_none());
        assert_eq!(set.stale.len(), 1);
    }
}
