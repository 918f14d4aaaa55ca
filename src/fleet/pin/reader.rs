//! Reading manifests and blobs of many repositories over one pooled
//! client (what the signature checks ask of registries): the resolver's
//! registries, challenges and tokens, with GET in place of HEAD.

use std::collections::BTreeMap;

use super::registry::{Object, Registry, Target};
use super::{Credentials, PinError, ResolverOptions, TagRef, client_for, learn_all, location_of};
use crate::net;

/// Reads manifests and blobs of many repositories (the signature checks,
/// `crate::signatures`) over one pooled client: each registry's challenge
/// is learned once, from the first object asked of it, and a Bearer
/// registry's token covers all its repositories at once. A registry that
/// was unreachable then fails every later read at once.
pub struct Reader {
    client: Result<net::Client, PinError>,
    registries: BTreeMap<String, Result<Registry, PinError>>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("registries", &self.registries.keys())
            .finish_non_exhaustive()
    }
}

impl Reader {
    /// A reader for `first`: `(repository, reference)` pairs of which the
    /// first per registry is asked (HEAD) to learn its challenge.
    pub async fn open(
        first: &[(String, String)],
        creds: &Credentials,
        opts: &ResolverOptions,
    ) -> Self {
        let mut groups: BTreeMap<String, (String, Vec<Target>)> = BTreeMap::new();
        for (repository, reference) in first {
            let at = location_of(repository);
            groups
                .entry(at.registry)
                .or_insert_with(|| (at.host, Vec::new()))
                .1
                .push(Target {
                    tag_ref: TagRef {
                        repository: repository.clone(),
                        tag: reference.clone(),
                    },
                    path: at.path,
                    tag: reference.clone(),
                });
        }
        let client = match client_for(groups.keys(), opts) {
            Ok(c) => c,
            Err(e) => {
                return Reader {
                    client: Err(PinError::Unreachable {
                        image: String::new(),
                        registry: groups.keys().cloned().collect::<Vec<_>>().join(", "),
                        reason: e.to_string(),
                    }),
                    registries: BTreeMap::new(),
                };
            }
        };
        let learned = learn_all(&client, groups, creds, opts).await;
        let registries = learned
            .into_iter()
            .map(|(reg, _, first)| {
                let name = reg.name.clone();
                match first {
                    Some(Err(e @ PinError::Unreachable { .. })) => (name, Err(e)),
                    _ => (name, Ok(reg)),
                }
            })
            .collect();
        Reader {
            client: Ok(client),
            registries,
        }
    }

    /// `repository`'s manifest at `reference`, or the blob `reference`
    /// names, at most `limit` bytes; `None` when there is none.
    pub async fn get(
        &self,
        repository: &str,
        reference: &str,
        object: Object,
        limit: usize,
    ) -> Result<Option<hyper::body::Bytes>, PinError> {
        let image = format!("{repository}:{reference}");
        let client = self.client.as_ref().map_err(Clone::clone)?;
        let at = location_of(repository);
        let reg = match self.registries.get(&at.registry) {
            Some(Ok(reg)) => reg,
            Some(Err(PinError::Unreachable {
                registry, reason, ..
            })) => {
                return Err(PinError::Unreachable {
                    image,
                    registry: registry.clone(),
                    reason: reason.clone(),
                });
            }
            Some(Err(e)) => return Err(e.clone()),
            None => {
                return Err(PinError::Invalid {
                    image,
                    reason: "its registry was not opened for reading".into(),
                });
            }
        };
        let t = Target {
            tag_ref: TagRef {
                repository: repository.to_owned(),
                tag: reference.to_owned(),
            },
            path: at.path,
            tag: reference.to_owned(),
        };
        reg.get(client, &t, object, limit).await
    }
}
