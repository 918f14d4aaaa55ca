//! The sync's pure parts: when a fetch is due, the order of publishing and applying.

use super::*;
use std::time::Instant;

fn fetch(at: Instant, generation: i64, requested: Option<&str>) -> Fetch {
    Fetch {
        at,
        generation: Some(generation),
        requested: requested.map(str::to_owned),
    }
}

#[test]
fn a_fetch_is_due_after_the_interval_a_spec_change_or_a_sync_request_only() {
    let t0 = Instant::now();
    let hour = Duration::from_secs(3600);
    let last = fetch(t0, 1, Some("a"));
    let soon = t0 + Duration::from_secs(60);
    // A tenant's gate, another annotation: not due, the rest left.
    assert_eq!(
        fetch(soon, 1, Some("a")).not_due(Some(&last), hour),
        Some(hour - Duration::from_secs(60))
    );
    // The first time, a new spec, a new request, the interval over.
    assert_eq!(fetch(soon, 1, Some("a")).not_due(None, hour), None);
    assert_eq!(fetch(soon, 2, Some("a")).not_due(Some(&last), hour), None);
    assert_eq!(fetch(soon, 1, Some("b")).not_due(Some(&last), hour), None);
    assert_eq!(fetch(soon, 1, None).not_due(Some(&last), hour), None);
    assert_eq!(
        fetch(t0 + hour, 1, Some("a")).not_due(Some(&last), hour),
        None
    );
}

/// The order the issue of a 1 s stall was about: a Rollout woken by
/// the spec the sync writes must find the new target already
/// published, so the publication comes first.
#[tokio::test]
async fn the_sync_is_published_before_its_specs_are_written() {
    let fleet = || crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    let loaded = |commit: &str| {
        Arc::new(Loaded {
            commit: commit.to_owned(),
            fleet: fleet(),
            policy: Policy {
                interval: Duration::from_secs(60),
                prune: true,
                suspend: false,
                reverify: Duration::from_secs(60),
                drift: Default::default(),
            },
            tenants: BTreeMap::new(),
        })
    };
    let state = State::default();
    let key = "ns/fleet".to_owned();
    state
        .loaded
        .write()
        .await
        .insert(key.clone(), loaded("old"));
    let seen = state
        .publish_then(key.clone(), loaded("new"), |l| {
            let state = &state;
            let key = key.clone();
            async move {
                // What a Rollout woken by a spec written now reads.
                let now = state.loaded.read().await.get(&key).cloned();
                (l.commit.clone(), now.map(|n| n.commit.clone()))
            }
        })
        .await;
    assert_eq!(seen, ("new".to_owned(), Some("new".to_owned())));
}
