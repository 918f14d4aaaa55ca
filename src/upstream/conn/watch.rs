//! The connection's own watches, for `operator connect` (which has no
//! caches) and for the kinds a [`super::Feed`] does not carry: each turns
//! watch events into the wire form the tracker folds.

use super::*;

pub(super) fn spawn_watch<K>(
    set: &mut JoinSet<()>,
    api: Api<K>,
    kind: ResourceKind,
    wc: watcher::Config,
    tx: mpsc::Sender<(ResourceKind, WatchEvent)>,
) where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    set.spawn(async move {
        let mut stream = watcher(api, wc).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => {
                    warn!(kind = kind.as_str(), error = %e, "watch failed; retrying with backoff");
                    continue;
                }
            };
            let conv = |o: &K| encode(kind, o);
            let mapped = match ev {
                watcher::Event::Init => Some(WatchEvent::Init),
                watcher::Event::InitApply(o) => conv(&o).map(WatchEvent::InitApply),
                watcher::Event::InitDone => Some(WatchEvent::InitDone),
                watcher::Event::Apply(o) => conv(&o).map(WatchEvent::Apply),
                watcher::Event::Delete(o) => conv(&o).map(WatchEvent::Delete),
            };
            if let Some(m) = mapped
                && tx.send((kind, m)).await.is_err()
            {
                break;
            }
        }
    });
}

pub(super) fn api<K>(client: &kube::Client, ns: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}
