//! What the operator's watch caches keep of an object: all of it but
//! `metadata.managedFields` and the `kubectl.kubernetes.io/last-applied-configuration`
//! annotation, which are dropped as each watch event arrives, before the
//! cache (or a controller's trigger) sees the object.
//!
//! Why: both are bookkeeping of the apiserver's and kubectl's that no
//! reader of the caches looks at (writes go through server-side apply,
//! which needs neither on our side), and together they are often larger
//! than the spec: a Pod's managed fields name every field each manager
//! set. At 10,000 cached objects they were most of the caches' memory.
//!
//! Guarantees: nothing else of the object changes (spec, status, labels,
//! other annotations, resourceVersion, owners). A reader that needs the
//! managed fields must read the object from the apiserver, not a cache.

use futures::Stream;
use kube::Resource;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;

use crate::meta::ANNOTATION_LAST_APPLIED;

/// Drops the managed fields and the last-applied annotation of `obj`
/// (pure). An annotation map left empty stays an empty map.
pub fn slim<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(ANNOTATION_LAST_APPLIED);
    }
}

/// The watch of what `wc` selects of `api`'s kind that a cache is fed
/// from: retried with the default backoff, every object [`slim`]med.
pub fn watch<K>(
    api: Api<K>,
    wc: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    slimmed(watcher(api, wc).default_backoff())
}

/// `events` with every object [`slim`]med.
fn slimmed<K, S>(events: S) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    K: Resource,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    events.modify(slim::<K>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    fn pod(annotations: &[(&str, &str)], managed: bool) -> Pod {
        let mut p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p", "namespace": "ns", "resourceVersion": "7",
                "labels": {"app.kubernetes.io/managed-by": "exo"},
                "ownerReferences": [{"apiVersion": "autonomic.sh/v1alpha1", "kind": "Tool",
                    "name": "t", "uid": "u", "controller": true}]
            },
            "spec": {"nodeName": "n1", "containers": [{"name": "tool", "image": "x"}]},
            "status": {"phase": "Running"}
        }))
        .unwrap();
        if !annotations.is_empty() {
            p.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
        }
        if managed {
            p.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
                manager: Some("exo-operator".into()),
                operation: Some("Apply".into()),
                ..ManagedFieldsEntry::default()
            }]);
        }
        p
    }

    #[test]
    fn slimming_drops_managed_fields_and_last_applied_only() {
        let big = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}";
        let keep = ("autonomic.sh/spec-hash", "abc");
        let cases: [(&str, Pod, Pod); 4] = [
            (
                "both",
                pod(&[(ANNOTATION_LAST_APPLIED, big), keep], true),
                pod(&[keep], false),
            ),
            (
                "managed fields only",
                pod(&[keep], true),
                pod(&[keep], false),
            ),
            (
                "last-applied, no other annotation",
                pod(&[(ANNOTATION_LAST_APPLIED, big)], false),
                {
                    let mut p = pod(&[], false);
                    p.metadata.annotations = Some(Default::default());
                    p
                },
            ),
            ("neither", pod(&[], false), pod(&[], false)),
        ];
        for (name, mut got, want) in cases {
            slim(&mut got);
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn slimming_twice_is_slimming_once() {
        let mut p = pod(&[(ANNOTATION_LAST_APPLIED, "{}")], true);
        slim(&mut p);
        let once = p.clone();
        slim(&mut p);
        assert_eq!(p, once);
    }

    #[tokio::test]
    async fn a_slimmed_watch_stream_slims_every_object_of_every_event() {
        use futures::StreamExt;
        let fat = || pod(&[(ANNOTATION_LAST_APPLIED, "{}")], true);
        let events: Vec<Result<watcher::Event<Pod>, watcher::Error>> = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(fat())),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(fat())),
            Ok(watcher::Event::Delete(fat())),
        ];
        let out: Vec<_> = slimmed(futures::stream::iter(events)).collect().await;
        let mut objects = 0;
        for e in out {
            match e.unwrap() {
                watcher::Event::InitApply(p)
                | watcher::Event::Apply(p)
                | watcher::Event::Delete(p) => {
                    objects += 1;
                    assert!(p.metadata.managed_fields.is_none());
                    assert!(p.metadata.annotations.unwrap_or_default().is_empty());
                }
                watcher::Event::Init | watcher::Event::InitDone => {}
            }
        }
        assert_eq!(objects, 3);
    }
}
