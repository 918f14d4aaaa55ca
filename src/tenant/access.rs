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

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
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

/// What is wrong with the live access Secret, for the step's
/// postcondition: it holds exactly [`KEYS`], none empty, for `scopes`, and
/// minted.
pub fn check_access(live: &Secret, scopes: &Scopes) -> Result<(), String> {
    let data = live.data.clone().unwrap_or_default();
    let names: Vec<&str> = data.keys().map(String::as_str).collect();
    let mut want = KEYS.to_vec();
    want.sort_unstable();
    if names != want {
        return Err(format!(
            "Secret {ACCESS_SECRET} holds keys {names:?}, not exactly {want:?}"
        ));
    }
    if let Some((k, _)) = data.iter().find(|(_, v)| v.0.is_empty()) {
        return Err(format!("Secret {ACCESS_SECRET}: key {k} is empty"));
    }
    if annotation(live, ANNOTATION_SCOPES) != Some(scopes.hash().as_str()) {
        return Err(format!(
            "Secret {ACCESS_SECRET} is for other scopes than models {:?}, capabilities {:?}",
            scopes.models, scopes.capabilities
        ));
    }
    if annotation(live, ANNOTATION_STATE) != Some(STATE_MINTED) {
        return Err(format!(
            "Secret {ACCESS_SECRET}: not yet acknowledged by the actuator"
        ));
    }
    Ok(())
}

/// A LiteLLM-compatible key server.
pub struct KeyServer {
    url: String,
    token: String,
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl KeyServer {
    pub fn new(url: &str, token: &str) -> Result<Self, AccessError> {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|e| AccessError::Server {
                url: url.to_owned(),
                path: "",
                reason: format!("no TLS roots: {e}"),
            })?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(KeyServer {
            url: url.to_owned(),
            token: token.to_owned(),
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &'static str,
        query: Option<String>,
        body: Option<serde_json::Value>,
    ) -> Result<(StatusCode, String), AccessError> {
        let fail = |reason: String| AccessError::Server {
            url: self.url.clone(),
            path,
            reason,
        };
        let uri = match query {
            Some(q) => format!("{}{path}?{q}", self.url),
            None => format!("{}{path}", self.url),
        };
        let bytes = body
            .map(|b| serde_json::to_vec(&b).unwrap_or_default())
            .unwrap_or_default();
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| fail(format!("bad request: {e}")))?;
        let resp =
            tokio::time::timeout(std::time::Duration::from_secs(10), self.client.request(req))
                .await
                .map_err(|_| fail("no answer in 10s".into()))?
                .map_err(|e| fail(format!("unreachable: {e}")))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        // Only the start of an answer, for the message; never a key.
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        Ok((status, text))
    }

    fn refused(&self, path: &'static str, status: StatusCode, text: &str) -> AccessError {
        let reason = if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            format!("{status}: the actuator's token was refused")
        } else {
            format!("{status}: {}", redact_keys(text))
        };
        AccessError::Server {
            url: self.url.clone(),
            path,
            reason,
        }
    }

    /// Whether the server knows `key`.
    pub async fn exists(&self, key: &str) -> Result<bool, AccessError> {
        let (status, text) = self
            .call(
                Method::GET,
                "/key/info",
                Some(format!("key={}", urlencode(key))),
                None,
            )
            .await?;
        match status {
            s if s.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            s => Err(self.refused("/key/info", s, &text)),
        }
    }

    /// Registers `key` for `tenant` with its scopes.
    pub async fn generate(
        &self,
        tenant: &str,
        key: &str,
        scopes: &Scopes,
        max_budget: Option<f64>,
    ) -> Result<(), AccessError> {
        let mut body = serde_json::json!({
            "key": key,
            "key_alias": format!("exo/{tenant}/{}", scopes.hash()),
            "models": scopes.models,
            "metadata": {"tenant": tenant, "capabilities": scopes.capabilities, "managed_by": "exo"},
        });
        if let (Some(b), Some(o)) = (max_budget, body.as_object_mut()) {
            o.insert("max_budget".into(), serde_json::json!(b));
        }
        let (status, text) = self
            .call(Method::POST, "/key/generate", None, Some(body))
            .await?;
        if status.is_success() {
            Ok(())
        } else {
            Err(self.refused("/key/generate", status, &text))
        }
    }

    /// Revokes `keys`; a key the server does not know is revoked already.
    pub async fn delete(&self, keys: &[String]) -> Result<(), AccessError> {
        if keys.is_empty() {
            return Ok(());
        }
        let (status, text) = self
            .call(
                Method::POST,
                "/key/delete",
                None,
                Some(serde_json::json!({ "keys": keys })),
            )
            .await?;
        if status.is_success() || status == StatusCode::NOT_FOUND {
            Ok(())
        } else {
            Err(self.refused("/key/delete", status, &text))
        }
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A server's answer with anything shaped like a key masked.
fn redact_keys(text: &str) -> String {
    text.split_inclusive(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .map(|w| {
            if w.starts_with("sk-") || w.starts_with("exo-bt-") || w.starts_with("pk-lf-") {
                "[redacted]".to_owned()
                    + &w[w
                        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                        .len()..]
            } else {
                w.to_owned()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn the_actuator_secret_is_read_field_by_field() {
        assert!(matches!(
            Actuator::from_secret("ops", None),
            Err(AccessError::NoActuator { .. })
        ));
        assert_eq!(
            Actuator::from_secret("ops", Some(&data(&[("type", "kubernetes")]))).unwrap(),
            Actuator::Kubernetes
        );
        let http = Actuator::from_secret(
            "ops",
            Some(&data(&[
                ("type", "http"),
                ("url", "http://keys.local:4000/"),
                ("token", "t0k"),
                ("maxBudget", "25"),
            ])),
        )
        .unwrap();
        assert_eq!(
            http,
            Actuator::Http {
                url: "http://keys.local:4000".into(),
                token: "t0k".into(),
                max_budget: Some(25.0)
            }
        );
        let cases = [
            (vec![("type", "vault")], "`type`: \"vault\" is not one of"),
            (vec![], "`type`: missing"),
            (vec![("type", "http"), ("token", "x")], "`url`: missing"),
            (
                vec![("type", "http"), ("url", "ftp://x"), ("token", "x")],
                "`url`: \"ftp://x\" is not an http(s) URL",
            ),
            (
                vec![("type", "http"), ("url", "http://x")],
                "`token`: missing",
            ),
            (
                vec![
                    ("type", "http"),
                    ("url", "http://x"),
                    ("token", "t"),
                    ("maxBudget", "lots"),
                ],
                "`maxBudget`: \"lots\" is not a number",
            ),
        ];
        for (fields, want) in cases {
            let e = Actuator::from_secret("ops", Some(&data(&fields)))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
            assert!(e.contains("ops/exo-key-actuator"), "{e}");
            assert!(!e.contains("t0k"));
        }
    }

    #[test]
    fn fresh_keys_are_distinct_shaped_and_not_provider_keys() {
        let a = fresh_keys().unwrap();
        let b = fresh_keys().unwrap();
        assert_eq!(a.keys().map(String::as_str).collect::<Vec<_>>(), {
            let mut k = KEYS.to_vec();
            k.sort_unstable();
            k
        });
        for k in KEYS {
            assert_ne!(a[k], b[k]);
            // The audit must not take a tenant's own keys for an upstream
            // provider's.
            assert_eq!(
                crate::audit::credentials::provider_of_value(a[k].as_bytes()),
                None,
                "{k}"
            );
        }
        assert!(a[KEY_MODEL].starts_with("sk-") && a[KEY_MODEL].len() == 25);
        assert!(a[KEY_LANGFUSE_SECRET].starts_with("sk-lf-"));
    }

    #[test]
    fn scopes_hash_ignores_order_and_repeats() {
        let s = |m: &[&str], c: &[&str]| {
            Scopes::of(&TenantSpec {
                models: m.iter().map(|x| (*x).to_owned()).collect(),
                capabilities: c.iter().map(|x| (*x).to_owned()).collect(),
                ..TenantSpec::default()
            })
        };
        assert_eq!(s(&["a", "b"], &[]).hash(), s(&["b", "a", "a"], &[]).hash());
        assert_ne!(s(&["a"], &[]).hash(), s(&[], &["a"]).hash());
        assert!(s(&[], &[]).is_empty());
    }

    #[test]
    fn the_access_secret_holds_exactly_its_keys_for_its_scopes() {
        let scopes = Scopes {
            models: vec!["m".into()],
            capabilities: vec![],
        };
        let keys = fresh_keys().unwrap();
        let as_live = |s: Secret| Secret {
            data: s.string_data.clone().map(|d| {
                d.into_iter()
                    .map(|(k, v)| (k, ByteString(v.into_bytes())))
                    .collect()
            }),
            string_data: None,
            ..s
        };
        let minted = as_live(access_secret(
            "t",
            &keys,
            &scopes,
            "kubernetes",
            STATE_MINTED,
        ));
        assert_eq!(check_access(&minted, &scopes), Ok(()));
        let pending = as_live(access_secret(
            "t",
            &keys,
            &scopes,
            "kubernetes",
            STATE_PENDING,
        ));
        assert!(
            check_access(&pending, &scopes)
                .unwrap_err()
                .contains("acknowledged")
        );
        let other = Scopes {
            models: vec!["n".into()],
            capabilities: vec![],
        };
        assert!(
            check_access(&minted, &other)
                .unwrap_err()
                .contains("other scopes")
        );
        let mut extra = minted.clone();
        extra
            .data
            .as_mut()
            .unwrap()
            .insert("OTHER_TENANT_KEY".into(), ByteString(b"x".to_vec()));
        assert!(
            check_access(&extra, &scopes)
                .unwrap_err()
                .contains("not exactly")
        );
        // Retiring keeps every generation until revoked.
        let r1 = retiring_secret("t", &minted, None);
        let r2 = retiring_secret(
            "t",
            &as_live(access_secret(
                "t",
                &fresh_keys().unwrap(),
                &other,
                "kubernetes",
                STATE_MINTED,
            )),
            Some(&r1),
        );
        assert_eq!(model_keys(&r2).len(), 2);
        assert!(model_keys(&r2).contains(&keys[KEY_MODEL]));
        assert_eq!(model_keys(&minted), vec![keys[KEY_MODEL].clone()]);
    }

    #[test]
    fn a_server_answer_is_shown_without_keys() {
        let t = redact_keys("{\"error\": \"key sk-abcdef123 exists\"}");
        assert!(!t.contains("abcdef"), "{t}");
        assert!(t.contains("[redacted]"), "{t}");
        assert_eq!(urlencode("sk-a+b/c"), "sk-a%2Bb%2Fc");
    }
}
