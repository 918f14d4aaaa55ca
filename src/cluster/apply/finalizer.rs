//! Finalizers: the pure list edit and the write that applies it.

use super::*;

impl Ctx {
    /// Adds (`add`) or removes `finalizer` on `obj` with one metadata
    /// patch, guarded by its resourceVersion; nothing is sent when the
    /// list already is as wanted.
    pub async fn set_finalizer<K>(
        &self,
        c: Controller,
        obj: &K,
        finalizer: &str,
        add: bool,
    ) -> Result<()>
    where
        K: Namespaced,
    {
        self.fenced()?;
        let meta = obj.meta();
        let current = meta.finalizers.as_deref().unwrap_or_default();
        let Some(list) = with_finalizer(current, finalizer, add) else {
            return Ok(());
        };
        let (ns, name) = ns_name(obj)?;
        self.patch_metadata::<K>(
            c,
            &ns,
            &name,
            meta.resource_version.clone(),
            serde_json::json!({ "finalizers": list }),
        )
        .await
    }
}

/// The finalizer list with `finalizer` added or removed; `None` when it
/// is already as wanted.
pub fn with_finalizer(current: &[String], finalizer: &str, add: bool) -> Option<Vec<String>> {
    let has = current.iter().any(|f| f == finalizer);
    match (add, has) {
        (true, false) => {
            let mut v = current.to_vec();
            v.push(finalizer.to_owned());
            Some(v)
        }
        (false, true) => Some(
            current
                .iter()
                .filter(|f| *f != finalizer)
                .cloned()
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizer_lists() {
        assert_eq!(with_finalizer(&[], "a", false), None);
        assert_eq!(with_finalizer(&["a".into()], "a", true), None);
        assert_eq!(
            with_finalizer(&["x".into()], "a", true),
            Some(vec!["x".into(), "a".into()])
        );
        assert_eq!(
            with_finalizer(&["x".into(), "a".into()], "a", false),
            Some(vec!["x".into()])
        );
    }
}
