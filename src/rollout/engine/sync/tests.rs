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

/// The sync policy the tests' Loaded values carry.
fn policy() -> Policy {
    Policy {
        interval: Duration::from_secs(60),
        prune: true,
        suspend: false,
        reverify: Duration::from_secs(60),
        drift: Default::default(),
    }
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
            policy: policy(),
            tenants: BTreeMap::new(),
            ids: crate::fleet::gitsync::Ids::default(),
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

/// The example fleet at two commits that differ in one Agent of `acme`:
/// the second load reuses every other folder and every other tenant's
/// rendered target, and what it loads equals a load from scratch.
#[test]
fn an_unchanged_folder_is_neither_parsed_nor_rendered_again() {
    use crate::fleet::gitsync::Checkout;
    use crate::release::WaveName;
    use crate::rollout::desired::{TenantDesired, TenantTarget};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let ids = |edited: Option<&str>| {
        let mut ids = BTreeMap::new();
        for (i, t) in ["acme", "globex", "initech", "platform", "umbrella"]
            .iter()
            .enumerate()
        {
            let mut raw = [0u8; 20];
            raw[0] = u8::try_from(i).unwrap() + 1;
            if edited == Some(*t) {
                raw[1] = 1;
            }
            ids.insert(
                format!("manifests/{t}"),
                git2::Oid::from_bytes(&raw).unwrap(),
            );
        }
        ids.insert(
            "releases/2026.11.0.yaml".to_owned(),
            git2::Oid::from_bytes(&[9; 20]).unwrap(),
        );
        ids.into_iter().collect::<crate::fleet::gitsync::Ids>()
    };
    let first = Checkout {
        commit: "c1".into(),
        path: root.to_owned(),
        ids: ids(None),
    };
    let fleet = incremental::load(&first, None).unwrap();
    let release = fleet.release("2026.11.0").unwrap().clone();
    let targets: BTreeMap<String, Arc<TenantTarget>> = fleet
        .tenants
        .iter()
        .map(|(n, t)| {
            let target = TenantTarget {
                wave: WaveName::Fleet,
                release: release.value.clone(),
                desired: TenantDesired::new(t, &release.value),
            };
            (n.clone(), Arc::new(target))
        })
        .collect();
    let prev = Loaded {
        commit: "c1".into(),
        fleet,
        policy: policy(),
        tenants: targets,
        ids: ids(None),
    };
    let second = Checkout {
        commit: "c2".into(),
        path: root.to_owned(),
        ids: ids(Some("acme")),
    };
    assert!(incremental::unchanged(
        Some(&prev),
        &second.ids,
        "manifests/globex"
    ));
    assert!(!incremental::unchanged(
        Some(&prev),
        &second.ids,
        "manifests/acme"
    ));
    assert!(!incremental::unchanged(
        None,
        &second.ids,
        "manifests/globex"
    ));
    assert!(!incremental::unchanged(
        Some(&prev),
        &second.ids,
        "manifests/nope"
    ));
    let again = incremental::load(&second, Some(&prev)).unwrap();
    let scratch = crate::fleet::load(root).unwrap();
    for (name, t) in &scratch.tenants {
        let a = &again.tenants[name];
        assert_eq!(a.agents.len(), t.agents.len(), "{name}");
        for (x, y) in a.agents.iter().zip(&t.agents) {
            assert_eq!(x.path, y.path, "{name}");
            assert_eq!(x.value, y.value, "{name}");
        }
        assert_eq!(a.settings, t.settings, "{name}");
    }
    // Targets: the same Arc where nothing changed, none for the edited
    // tenant, another wave or another release.
    let r = again.release("2026.11.0").unwrap();
    let kept = incremental::target(Some(&prev), &second, "globex", WaveName::Fleet, r).unwrap();
    assert!(Arc::ptr_eq(&kept, &prev.tenants["globex"]));
    assert!(incremental::target(Some(&prev), &second, "acme", WaveName::Fleet, r).is_none());
    assert!(incremental::target(Some(&prev), &second, "globex", WaveName::Canary, r).is_none());
    let other = again.release("2026.11.1").unwrap();
    assert!(incremental::target(Some(&prev), &second, "globex", WaveName::Fleet, other).is_none());
}

#[test]
fn a_fleet_asks_for_a_sync_when_new_or_its_spec_or_annotations_change_not_its_status() {
    let mut f = FleetCr::new("bench", Default::default());
    f.metadata.namespace = Some("fleets".into());
    f.metadata.generation = Some(1);
    let mut asked = Asked::default();
    assert!(asked.asks(&f), "a Fleet not seen before");
    assert!(!asked.asks(&f), "the same Fleet again");
    f.status = Some(FleetStatus {
        applied_commit: Some("abc".into()),
        ..Default::default()
    });
    assert!(!asked.asks(&f), "the engine's own status write");
    f.metadata.annotations = Some(
        [(
            "autonomic.sh/sync-requested-at".to_owned(),
            "2026-12-06T03:00:00Z".to_owned(),
        )]
        .into(),
    );
    assert!(asked.asks(&f), "a sync request");
    assert!(!asked.asks(&f));
    f.metadata.generation = Some(2);
    assert!(asked.asks(&f), "a new spec");
    let mut other = f.clone();
    other.metadata.namespace = Some("elsewhere".into());
    assert!(
        asked.asks(&other),
        "another namespace's Fleet of the same name"
    );
    asked.forget(&f);
    assert!(asked.asks(&f), "a Fleet deleted and made again");
}
