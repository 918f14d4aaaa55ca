//! A tenant's model and capability access: the keys the onboarding saga's
//! `access-minted` step mints and the offboarding saga revokes.
//!
//! - The tenant's Secret `exo-tenant-access` (in its namespace, labelled
//!   as a tenant credential so the audit checks no other tenant holds its
//!   values) holds the virtual key (`EXO_MODEL_KEY`), the broker token
//!   (`EXO_BROKER_TOKEN`) and the tracing keys (`LANGFUSE_PUBLIC_KEY`,
//!   `LANGFUSE_SECRET_KEY`); the tenant's pods take them as env.
//! - Its annotations say which scopes the keys are for (a hash of models
//!   and capabilities), which actuator minted them, and whether the
//!   actuator has acknowledged them (`pending`, then `minted`).
//! - Keys a change replaced wait in `exo-tenant-access-retiring` until the
//!   pods using the new ones are verified; then they are revoked.
//!
//! The actuator is configured by the Secret `exo-key-actuator` in the
//! operator's namespace, read at each step (so configuring one resumes a
//! waiting saga without a restart):
//! - `type: kubernetes`: the tenant Secret is the key store;
//! - `type: http`, `url`, `token`: a LiteLLM-compatible key server
//!   (`/key/generate`, `/key/info`, `/key/delete`) holds the virtual key,
//!   with its scopes (`models`, optional `maxBudget`); the token is sent as
//!   a bearer token and never logged.
//!
//! Exactly once: a fresh key is written to the tenant Secret as `pending`
//! before the key server hears of it, and the server is asked whether it
//! knows the key before it is asked to generate it, so an operator killed
//! at any point neither mints a key twice nor loses one it minted.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use crate::crd::tenant::TenantSpec;
use crate::meta::{LABEL_CREDENTIAL, LABEL_MANAGED_BY, LABEL_TENANT, MANAGED_BY};

/// The tenant's access Secret, in its namespace.
pub const ACCESS_SECRET: &str = crate::meta::TENANT_ACCESS_SECRET;
/// Keys a change replaced, until they are revoked.
pub const RETIRING_SECRET: &str = "exo-tenant-access-retiring";
/// The actuator's configuration, in the operator's namespace.
pub const ACTUATOR_SECRET: &str = "exo-key-actuator";

pub const ANNOTATION_SCOPES: &str = crate::meta::ANNOTATION_ACCESS_SCOPES;
pub const ANNOTATION_STATE: &str = "autonomic.sh/access-state";
pub const ANNOTATION_ACTUATOR: &str = "autonomic.sh/access-actuator";
pub const STATE_PENDING: &str = "pending";
pub const STATE_MINTED: &str = "minted";

pub const KEY_MODEL: &str = "EXO_MODEL_KEY";
pub const KEY_BROKER: &str = "EXO_BROKER_TOKEN";
pub const KEY_LANGFUSE_PUBLIC: &str = "LANGFUSE_PUBLIC_KEY";
pub const KEY_LANGFUSE_SECRET: &str = "LANGFUSE_SECRET_KEY";
/// Every key the access Secret holds, and nothing else.
pub const KEYS: [&str; 4] = [
    KEY_MODEL,
    KEY_BROKER,
    KEY_LANGFUSE_PUBLIC,
    KEY_LANGFUSE_SECRET,
];

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(
        "no key actuator is configured: create the Secret {namespace}/{ACTUATOR_SECRET} with `type: kubernetes`, or `type: http` with `url` and `token`"
    )]
    NoActuator { namespace: String },
    #[error("Secret {namespace}/{ACTUATOR_SECRET}: field `{field}`: {reason}")]
    BadActuator {
        namespace: String,
        field: &'static str,
        reason: String,
    },
    #[error(
        "the keys of Secret {secret} were minted by the {minted_by} actuator, but the configured one is {configured}: revoke them there first"
    )]
    OtherActuator {
        secret: String,
        minted_by: String,
        configured: String,
    },
    #[error("key server {url}{path}: {reason}")]
    Server {
        url: String,
        path: &'static str,
        reason: String,
    },
    #[error("no randomness for a new key: {0}")]
    Random(#[from] getrandom::Error),
}

/// What the keys are scoped to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Scopes {
    pub models: Vec<String>,
    pub capabilities: Vec<String>,
}

impl Scopes {
    pub fn of(spec: &TenantSpec) -> Self {
        let sorted = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v.dedup();
            v
        };
        Scopes {
            models: sorted(&spec.models),
            capabilities: sorted(&spec.capabilities),
        }
    }

    /// A tenant with neither models nor capabilities holds no keys.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty() && self.capabilities.is_empty()
    }

    /// The first 16 hex digits of sha256 over the sorted scopes: what the
    /// access Secret and the tenant's workloads are stamped with.
    pub fn hash(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        hex::encode(Sha256::digest(json))[..16].to_owned()
    }
}

/// The configured actuator.
#[derive(Debug, Clone, PartialEq)]
pub enum Actuator {
    Kubernetes,
    Http {
        url: String,
        token: String,
        max_budget: Option<f64>,
    },
}

impl Actuator {
    pub fn name(&self) -> &'static str {
        match self {
            Actuator::Kubernetes => "kubernetes",
            Actuator::Http { .. } => "http",
        }
    }

    /// Reads the actuator Secret's data (`None`: there is no such Secret).
    pub fn from_secret(
        namespace: &str,
        data: Option<&BTreeMap<String, ByteString>>,
    ) -> Result<Actuator, AccessError> {
        let Some(data) = data else {
            return Err(AccessError::NoActuator {
                namespace: namespace.to_owned(),
            });
        };
        let field = |k: &str| {
            data.get(k)
                .map(|v| String::from_utf8_lossy(&v.0).trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let bad = |field: &'static str, reason: String| AccessError::BadActuator {
            namespace: namespace.to_owned(),
            field,
            reason,
        };
        match field("type").as_deref() {
            Some("kubernetes") => Ok(Actuator::Kubernetes),
            Some("http") => {
                let url = field("url").ok_or_else(|| bad("url", "missing".into()))?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(bad("url", format!("{url:?} is not an http(s) URL")));
                }
                let token = field("token").ok_or_else(|| bad("token", "missing".into()))?;
                let max_budget = match field("maxBudget") {
                    None => None,
                    Some(b) => Some(
                        b.parse::<f64>()
                            .ok()
                            .filter(|v| v.is_finite() && *v >= 0.0)
                            .ok_or_else(|| bad("maxBudget", format!("{b:?} is not a number")))?,
                    ),
                };
                Ok(Actuator::Http {
                    url: url.trim_end_matches('/').to_owned(),
                    token,
                    max_budget,
                })
            }
            Some(other) => Err(bad(
                "type",
                format!("{other:?} is not one of kubernetes, http"),
            )),
            None => Err(bad("type", "missing (kubernetes or http)".into())),
        }
    }
}

fn random_chars(n: usize) -> Result<String, AccessError> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes)?;
    // 62 symbols: 256 % 62 leaves a bias under 2% per symbol, on 22+
    // symbols of at least 5.9 bits each.
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect())
}

/// A fresh set of keys. The virtual key has the LiteLLM shape (`sk-` and
/// 22 characters); the Langfuse pair has Langfuse's prefixes.
pub fn fresh_keys() -> Result<BTreeMap<String, String>, AccessError> {
    Ok(BTreeMap::from([
        (KEY_MODEL.to_owned(), format!("sk-{}", random_chars(22)?)),
        (
            KEY_BROKER.to_owned(),
            format!("exo-bt-{}", random_chars(40)?),
        ),
        (
            KEY_LANGFUSE_PUBLIC.to_owned(),
            format!("pk-lf-{}", random_chars(32)?),
        ),
        (
            KEY_LANGFUSE_SECRET.to_owned(),
            format!("sk-lf-{}", random_chars(32)?),
        ),
    ]))
}

fn secret_meta(tenant: &str, name: &str, annotations: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(tenant.to_owned()),
        labels: Some(BTreeMap::from([
            (LABEL_TENANT.to_owned(), tenant.to_owned()),
            (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
            (LABEL_CREDENTIAL.to_owned(), "tenant-access".to_owned()),
        ])),
        annotations: Some(annotations),
        ..ObjectMeta::default()
    }
}

/// The tenant's access Secret holding `keys` for `scopes`, in `state`.
pub fn access_secret(
    tenant: &str,
    keys: &BTreeMap<String, String>,
    scopes: &Scopes,
    actuator: &str,
    state: &str,
) -> Secret {
    Secret {
        metadata: secret_meta(
            tenant,
            ACCESS_SECRET,
            BTreeMap::from([
                (ANNOTATION_SCOPES.to_owned(), scopes.hash()),
                (ANNOTATION_ACTUATOR.to_owned(), actuator.to_owned()),
                (ANNOTATION_STATE.to_owned(), state.to_owned()),
            ]),
        ),
        string_data: Some(keys.clone()),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}

/// The retiring Secret with the keys of `live` added (as
/// `<scopes>.<KEY>`), next to what `retiring` holds already.
pub fn retiring_secret(tenant: &str, live: &Secret, retiring: Option<&Secret>) -> Secret {
    let mut data: BTreeMap<String, ByteString> =
        retiring.and_then(|r| r.data.clone()).unwrap_or_default();
    let scopes = annotation(live, ANNOTATION_SCOPES).unwrap_or("unknown");
    for (k, v) in live.data.iter().flatten() {
        data.insert(format!("{scopes}.{k}"), v.clone());
    }
    let actuator = annotation(live, ANNOTATION_ACTUATOR)
        .or_else(|| retiring.and_then(|r| annotation(r, ANNOTATION_ACTUATOR)))
        .unwrap_or("kubernetes");
    Secret {
        metadata: secret_meta(
            tenant,
            RETIRING_SECRET,
            BTreeMap::from([(ANNOTATION_ACTUATOR.to_owned(), actuator.to_owned())]),
        ),
        data: Some(data),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}

pub fn annotation<'a>(s: &'a Secret, key: &str) -> Option<&'a str> {
    s.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The virtual keys a Secret holds (the access Secret's `EXO_MODEL_KEY`, or
/// every `*.EXO_MODEL_KEY` of the retiring one): what the key server
/// knows of.
pub fn model_keys(s: &Secret) -> Vec<String> {
    s.data
        .iter()
        .flatten()
        .filter(|(k, _)| k.as_str() == KEY_MODEL || k.ends_with(&format!(".{KEY_MODEL}")))
        .map(|(_, v)| String::from_utf8_lossy(&v.0).into_owned())
        .collect()
}

/// What is wrong with a live access Secret ([`check_access`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessMismatch {
    #[error("Secret {ACCESS_SECRET} holds keys {has:?}, not exactly {want:?}")]
    Keys { has: Vec<String>, want: Vec<String> },
    #[error("Secret {ACCESS_SECRET}: key {0} is empty")]
    Empty(String),
    #[error(
        "Secret {ACCESS_SECRET} is for other scopes than models {models:?}, capabilities {capabilities:?}"
    )]
    Scopes {
        models: Vec<String>,
        capabilities: Vec<String>,
    },
    #[error("Secret {ACCESS_SECRET}: not yet acknowledged by the actuator")]
    NotMinted,
}

/// What is wrong with the live access Secret, for the step's
/// postcondition: it holds exactly [`KEYS`], none empty, for `scopes`, and
/// minted.
pub fn check_access(live: &Secret, scopes: &Scopes) -> Result<(), AccessMismatch> {
    let data = live.data.clone().unwrap_or_default();
    let has: Vec<String> = data.keys().cloned().collect();
    let mut want: Vec<String> = KEYS.iter().map(|k| (*k).to_owned()).collect();
    want.sort_unstable();
    if has != want {
        return Err(AccessMismatch::Keys { has, want });
    }
    if let Some((k, _)) = data.iter().find(|(_, v)| v.0.is_empty()) {
        return Err(AccessMismatch::Empty(k.clone()));
    }
    if annotation(live, ANNOTATION_SCOPES) != Some(scopes.hash().as_str()) {
        return Err(AccessMismatch::Scopes {
            models: scopes.models.clone(),
            capabilities: scopes.capabilities.clone(),
        });
    }
    if annotation(live, ANNOTATION_STATE) != Some(STATE_MINTED) {
        return Err(AccessMismatch::NotMinted);
    }
    Ok(())
}

mod keyserver;
pub use keyserver::KeyServer;

#[cfg(test)]
mod tests;
