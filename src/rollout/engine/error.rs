//! The engine's errors. Each one that stops a Fleet's sync maps to the
//! reason of its `Ready` condition ([`Error::reason`]), a small fixed set,
//! so a reason can be matched on and counted; the message says which field,
//! object or Secret.

use crate::release::WaveName;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A field of the Fleet's spec does not parse.
    #[error("spec.{field}: {reason}")]
    InvalidSpec { field: &'static str, reason: String },
    #[error("releases/waves.yaml is missing")]
    NoWaves,
    #[error("wave {wave} points at {release:?}, which is not in releases/")]
    UnknownRelease { wave: WaveName, release: String },
    /// The Fleet's `secretRef` cannot be read.
    #[error("Secret {namespace}/{name}: {}", short_kube_error(.source))]
    Secret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Secret {namespace}/{name} has no key {key:?}")]
    SecretKey {
        namespace: String,
        name: String,
        key: &'static str,
    },
    /// A write of the sync (Namespace, AgentFS, Rollout) failed; `object`
    /// names it (`AgentFS tenant/name`).
    #[error("{object}: {source}")]
    Apply {
        object: String,
        #[source]
        source: crate::cluster::Error,
    },
    #[error("read Rollout: {0}")]
    Read(#[source] kube::Error),
    /// The Tenants cannot be listed (their CRD or RBAC is missing).
    #[error("list Tenants: {source} (install the tenants.autonomic.sh CRD and its RBAC)")]
    Tenants {
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Write(#[from] crate::cluster::Error),
    /// An object from the watch lacks a field the apiserver always sets.
    #[error("object has no {0}")]
    MissingField(&'static str),
    /// The fleet places tenants on clusters and this operator does not
    /// know which cluster it is.
    #[error(
        "the fleet places its tenants on clusters (clusters/) and this operator does not know its cluster's name: give it --cluster, or connect it to the control plane (its deployment name is the cluster's)"
    )]
    ClusterUnknown,
    /// This operator's cluster is not one `clusters/` declares.
    #[error("this operator's cluster {cluster:?} is not declared in clusters/ ({declared})")]
    UndeclaredCluster { cluster: String, declared: String },
}

impl Error {
    /// The reason a Fleet's `Ready` condition gives when this error stops
    /// its sync.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::InvalidSpec { .. } => "InvalidSpec",
            Error::NoWaves | Error::UnknownRelease { .. } => "InvalidFleet",
            Error::Secret { .. } | Error::SecretKey { .. } => "CredentialsUnavailable",
            Error::Apply { .. } | Error::Read(_) | Error::Write(_) | Error::MissingField(_) => {
                "ApplyFailed"
            }
            Error::Tenants { .. } => "TenantsUnavailable",
            Error::ClusterUnknown => "ClusterUnknown",
            Error::UndeclaredCluster { .. } => "UndeclaredCluster",
        }
    }
}

/// The apiserver's message and code, without kube's wrapping.
pub(super) fn short_kube_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

/// `o`'s namespace; every object the engine handles is namespaced.
pub fn namespace_of(o: &impl kube::ResourceExt) -> Result<String, Error> {
    o.namespace()
        .ok_or(Error::MissingField("metadata.namespace"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_field_and_reasons_stay_few() {
        let e = Error::InvalidSpec {
            field: "interval",
            reason: "bad".into(),
        };
        assert_eq!(e.to_string(), "spec.interval: bad");
        assert_eq!(e.reason(), "InvalidSpec");
        let e = Error::SecretKey {
            namespace: "ns".into(),
            name: "git".into(),
            key: "password",
        };
        assert_eq!(e.to_string(), "Secret ns/git has no key \"password\"");
        assert_eq!(e.reason(), "CredentialsUnavailable");
        assert_eq!(Error::NoWaves.reason(), "InvalidFleet");
        let fleet = crate::crd::Fleet::new("f", Default::default());
        assert!(matches!(
            namespace_of(&fleet),
            Err(Error::MissingField("metadata.namespace"))
        ));
    }
}
