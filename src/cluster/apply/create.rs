//! Creating whole objects: a create that may find one there, a write
//! guarded by the resourceVersion read, and a pod created once even before
//! the cache shows it.

use super::*;

/// A create's or replace's parameters: the one field manager.
fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

impl Ctx {
    /// The fence checked (see [`Ctx::fenced`]), then `obj`'s Api, namespace
    /// and name: where a create or replace of it goes.
    fn write_target<K: Namespaced>(&self, obj: &K) -> Result<(Api<K>, String, String)> {
        self.fenced()?;
        let (ns, name) = ns_name(obj)?;
        Ok((self.api(&ns), ns, name))
    }

    /// Creates `obj`; `Ok(false)` when it already exists.
    pub async fn create<K>(&self, c: Controller, obj: &K) -> Result<bool>
    where
        K: Namespaced + Serialize,
    {
        let (api, ns, name) = self.write_target(obj)?;
        let pp = post_params();
        match api.create(&pp, obj).await {
            Ok(_) => {
                self.metrics.wrote(c, kind_label::<K>(), Verb::Create);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(Error::kube(
                format!("create {} {ns}/{name}", K::kind(&())),
                e,
            )),
        }
    }

    /// Writes the whole of `obj` under optimistic concurrency: created when
    /// it carries no `resourceVersion`, replaced when it carries the one it
    /// was read at. A concurrent write makes it fail with a conflict (409,
    /// [`super::ErrorCategory::Conflict`]) instead of being overwritten.
    /// Returns what the apiserver stored (its new `resourceVersion`).
    pub async fn put_guarded<K>(&self, c: Controller, obj: &K) -> Result<K>
    where
        K: Namespaced + Serialize,
    {
        let (api, ns, name) = self.write_target(obj)?;
        let pp = post_params();
        let (verb, r) = if obj.meta().resource_version.is_some() {
            (Verb::Replace, api.replace(&name, &pp, obj).await)
        } else {
            (Verb::Create, api.create(&pp, obj).await)
        };
        let out = r.map_err(|e| Error::kube(format!("write {} {ns}/{name}", K::kind(&())), e))?;
        self.metrics.wrote(c, kind_label::<K>(), verb);
        Ok(out)
    }

    /// Creates a pod unless this replica created it a moment ago and the
    /// cache has not shown it yet.
    pub async fn create_pod(&self, c: Controller, pod: &Pod) -> Result<Created> {
        let (ns, name) = ns_name(pod)?;
        let key = format!("{ns}/{name}");
        if self.expected.pending(&key, Instant::now()) {
            return Ok(Created::Expected);
        }
        let created = self.create(c, pod).await?;
        self.expected.created(key, Instant::now());
        Ok(if created {
            Created::Now
        } else {
            Created::Existed
        })
    }
}
