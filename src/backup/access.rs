//! The repository a volume's backup policy names, opened with the
//! credentials of the policy's Secret: what the operator's backups and
//! drills and `exo fs restore|backups` all open, each with its own
//! Kubernetes credentials (thin I/O).
//!
//! Guarantees: the Secret is read by name for this call only; its values
//! are in no message (an error names the Secret and what is wrong with
//! it, never a value).

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;

use super::Category;
use super::store::{Credentials, Options, Repository, StoreError};
use crate::crd::{AppVolumeKind, BackupPolicy, split_repository};

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("spec.backup.repository: {repository:?} is not host[:port]/path")]
    Repository { repository: String },
    #[error("Secret {namespace}/{name}: {why}")]
    Secret {
        namespace: String,
        name: String,
        why: &'static str,
    },
    #[error("the repository: {0}")]
    Store(#[from] StoreError),
}

impl AccessError {
    /// A bounded reason (the backup status's `reason`, Event notes).
    pub fn reason(&self) -> &'static str {
        match self {
            AccessError::Repository { .. } => Category::Invalid.as_str(),
            AccessError::Secret { .. } => "credentials",
            AccessError::Store(e) => e.category().as_str(),
        }
    }
}

/// The policy of one of an App's volumes: the App's, to
/// `<repository>/<volume>`, so the two volumes' tags, `keep` and restores
/// never mix. A repository that is not `host/path` stays as it is, to be
/// refused by name (rather than `host/workspace` passing).
pub fn app_volume_policy(policy: &BackupPolicy, volume: AppVolumeKind) -> BackupPolicy {
    let repository = match split_repository(&policy.repository) {
        Some(_) => format!("{}/{}", policy.repository.trim_end_matches('/'), volume),
        None => policy.repository.clone(),
    };
    BackupPolicy {
        repository,
        ..policy.clone()
    }
}

/// The repository of `policy`, for a volume in `namespace`, with the
/// credentials of its Secret (`username`, `password`) when it names one.
pub async fn open(
    client: &Client,
    namespace: &str,
    policy: &BackupPolicy,
) -> Result<Repository, AccessError> {
    let (registry, path) =
        split_repository(&policy.repository).ok_or_else(|| AccessError::Repository {
            repository: policy.repository.clone(),
        })?;
    let credentials = match &policy.secret_ref {
        Some(name) => Some(credentials(client, namespace, name).await?),
        None => None,
    };
    let options = Options {
        plain_http: policy.insecure.then_some(true),
        ..Options::default()
    };
    Ok(Repository::new(registry, path, credentials, options)?)
}

async fn credentials(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Credentials, AccessError> {
    let refused = |why| AccessError::Secret {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        why,
    };
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|_| refused("cannot be read"))?
        .ok_or_else(|| refused("not found"))?;
    let field = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|v| !v.is_empty())
    };
    let user = field("username").ok_or_else(|| refused("has no username"))?;
    let password = field("password").ok_or_else(|| refused("has no password"))?;
    Ok(Credentials::new(user, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_is_host_and_path() {
        assert_eq!(
            split_repository("reg.example.com:5000/backups/acme/work"),
            Some(("reg.example.com:5000", "backups/acme/work"))
        );
        for bad in ["reg.example.com", "/path", "reg/", ""] {
            assert_eq!(split_repository(bad), None, "{bad:?}");
        }
    }
}
