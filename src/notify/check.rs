//! Is a provider or a rule usable, and if not, why (naming the field, the
//! Secret or its key, or the provider). A provider that is usable resolves
//! to a [`Target`]: where and how its notices go, with its secret. Pure:
//! the caller reads the Secret and the provider and hands them in.
//!
//! The secret's value is never in a [`Problem`] or a `Debug` output.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;

use crate::crd::{NotificationProviderSpec, NotificationRuleSpec, ProviderType};
use crate::forge::{Dialect, RepoName, Settings, Token};

/// Why a provider or a rule is not ready. Each message names what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("spec.address: a {type_} provider needs one")]
    NoAddress { type_: ProviderType },
    #[error("spec.address: {address:?} is not an http:// or https:// URL")]
    BadAddress { address: String },
    #[error("spec.secretRef: a {type_} provider needs a Secret with the key {key}")]
    NoSecretRef {
        type_: ProviderType,
        key: &'static str,
    },
    #[error("spec.repository: a {type_} provider needs the repository, owner/name")]
    NoRepository { type_: ProviderType },
    #[error("spec.repository: {value:?} is not owner/name")]
    BadRepository { value: String },
    #[error("Secret {namespace}/{name} (spec.secretRef) not found")]
    SecretNotFound { namespace: String, name: String },
    #[error("Secret {namespace}/{name} (spec.secretRef) has no key {key}, or it is empty")]
    NoSecretKey {
        namespace: String,
        name: String,
        key: &'static str,
    },
    /// The value is a secret: only where it is is said.
    #[error(
        "Secret {namespace}/{name} (spec.secretRef), key address: not an http:// or https:// URL"
    )]
    BadSecretAddress { namespace: String, name: String },
    #[error("spec.providerRef: NotificationProvider {namespace}/{name} not found")]
    NoProvider { namespace: String, name: String },
    #[error("spec.providerRef: NotificationProvider {namespace}/{name} is not ready: {why}")]
    ProviderNotReady {
        namespace: String,
        name: String,
        why: String,
    },
    #[error(
        "spec.events: a {type_} provider posts commit statuses, not events; leave spec.events out"
    )]
    EventsForStatuses { type_: ProviderType },
    #[error("spec.events: a {type_} provider needs at least one event kind")]
    NoEvents { type_: ProviderType },
    #[error("spec.{field}: {value:?} is not a tenant name (or *)")]
    BadTenant { field: &'static str, value: String },
}

impl Problem {
    /// The `Ready` condition's reason: a fixed set.
    pub fn reason(&self) -> &'static str {
        match self {
            Problem::NoAddress { .. } | Problem::BadAddress { .. } => "InvalidAddress",
            Problem::NoSecretRef { .. } => "NoSecretRef",
            Problem::NoRepository { .. } | Problem::BadRepository { .. } => "InvalidRepository",
            Problem::SecretNotFound { .. } => "SecretNotFound",
            Problem::NoSecretKey { .. } => "SecretKeyMissing",
            Problem::BadSecretAddress { .. } => "InvalidAddress",
            Problem::NoProvider { .. } => "ProviderNotFound",
            Problem::ProviderNotReady { .. } => "ProviderNotReady",
            Problem::EventsForStatuses { .. } | Problem::NoEvents { .. } => "InvalidEvents",
            Problem::BadTenant { .. } => "InvalidTenants",
        }
    }
}

/// A secret value. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(Vec<u8>);

impl SecretValue {
    /// The Secret's bytes with surrounding whitespace dropped
    /// (`kubectl create secret --from-file` keeps a file's last newline);
    /// `None` when nothing is left.
    pub fn from_secret(raw: &[u8]) -> Option<Self> {
        Some(raw.trim_ascii())
            .filter(|v| !v.is_empty())
            .map(|v| SecretValue(v.to_vec()))
    }

    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// `text` with this value, should it be there, masked.
    pub fn scrub(&self, text: &str) -> String {
        match std::str::from_utf8(&self.0) {
            Ok(v) if !v.is_empty() => text.replace(v, "[redacted]"),
            _ => text.to_owned(),
        }
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

/// Where a webhook goes: a URL from the spec (shown in messages) or from a
/// Secret (never shown: a Slack URL is its own credential).
#[derive(Clone, PartialEq, Eq)]
pub enum Address {
    Spec(String),
    Secret {
        namespace: String,
        name: String,
        url: SecretValue,
    },
}

impl Address {
    /// The URL to call.
    pub fn url(&self) -> String {
        match self {
            Address::Spec(u) => u.clone(),
            Address::Secret { url, .. } => String::from_utf8_lossy(url.expose()).into_owned(),
        }
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Spec(u) => f.write_str(u),
            Address::Secret {
                namespace, name, ..
            } => {
                write!(f, "the address in Secret {namespace}/{name}")
            }
        }
    }
}

impl std::fmt::Debug for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Address({self})")
    }
}

/// A usable provider: where its notices go, with what it signs or
/// authenticates with.
#[derive(Debug, Clone)]
pub enum Target {
    Webhook {
        address: Address,
        key: SecretValue,
    },
    Slack {
        address: Address,
    },
    Forge {
        dialect: Dialect,
        settings: Settings,
        repo: RepoName,
    },
}

impl Target {
    /// `text` with every secret this target holds masked.
    pub fn scrub(&self, text: &str) -> String {
        match self {
            Target::Webhook { address, key } => scrub_address(address, &key.scrub(text)),
            Target::Slack { address } => scrub_address(address, text),
            Target::Forge { settings, .. } => {
                let token = settings.token.expose();
                if token.is_empty() {
                    text.to_owned()
                } else {
                    text.replace(token, "[redacted]")
                }
            }
        }
    }
}

fn scrub_address(address: &Address, text: &str) -> String {
    match address {
        Address::Spec(_) => text.to_owned(),
        Address::Secret { url, .. } => url.scrub(text),
    }
}

/// Whether `url` is `http(s)://` with a host.
pub fn is_http_url(url: &str) -> bool {
    ["http://", "https://"].iter().any(|s| {
        url.strip_prefix(s)
            .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
    })
}

/// The Secret a provider names, as read: its data, or absent.
pub type SecretData = Option<BTreeMap<String, ByteString>>;

/// Checks `spec` (of the provider in `namespace`) with its Secret as read
/// (`None`: not found), and resolves it to its [`Target`].
pub fn resolve(
    namespace: &str,
    spec: &NotificationProviderSpec,
    secret: &SecretData,
) -> Result<Target, Problem> {
    let type_ = spec.type_;
    let key = type_.secret_key();
    let address = match spec.address.as_deref().map(str::trim) {
        Some(a) if !is_http_url(a) => {
            return Err(Problem::BadAddress {
                address: a.to_owned(),
            });
        }
        Some(a) => Some(a.trim_end_matches('/').to_owned()),
        None => None,
    };
    let repo = match (type_.posts_commit_statuses(), spec.repository.as_deref()) {
        (true, None) => return Err(Problem::NoRepository { type_ }),
        (true, Some(r)) => Some(RepoName::parse(r).map_err(|_| Problem::BadRepository {
            value: r.to_owned(),
        })?),
        (false, _) => None,
    };
    // Slack may take its address from the Secret alone.
    if address.is_none() && type_ != ProviderType::Slack {
        return Err(Problem::NoAddress { type_ });
    }
    let Some(secret_name) = spec.secret_ref.as_deref() else {
        return match (type_, address) {
            (ProviderType::Slack, Some(a)) => Ok(Target::Slack {
                address: Address::Spec(a),
            }),
            _ => Err(Problem::NoSecretRef { type_, key }),
        };
    };
    let Some(data) = secret else {
        return Err(Problem::SecretNotFound {
            namespace: namespace.to_owned(),
            name: secret_name.to_owned(),
        });
    };
    let value = data.get(key).and_then(|v| SecretValue::from_secret(&v.0));
    let missing = || Problem::NoSecretKey {
        namespace: namespace.to_owned(),
        name: secret_name.to_owned(),
        key,
    };
    match type_ {
        ProviderType::Webhook => Ok(Target::Webhook {
            address: Address::Spec(address.ok_or(Problem::NoAddress { type_ })?),
            key: value.ok_or_else(missing)?,
        }),
        ProviderType::Slack => {
            let address = match (value, address) {
                (Some(url), _) => {
                    if !is_http_url(&String::from_utf8_lossy(url.expose())) {
                        return Err(Problem::BadSecretAddress {
                            namespace: namespace.to_owned(),
                            name: secret_name.to_owned(),
                        });
                    }
                    Address::Secret {
                        namespace: namespace.to_owned(),
                        name: secret_name.to_owned(),
                        url,
                    }
                }
                (None, Some(a)) => Address::Spec(a),
                (None, None) => return Err(missing()),
            };
            Ok(Target::Slack { address })
        }
        ProviderType::Gitea | ProviderType::Github => {
            let token = value.ok_or_else(missing)?;
            let token = Token::new(&String::from_utf8_lossy(token.expose()));
            let url = address.ok_or(Problem::NoAddress { type_ })?;
            let repo = repo.ok_or(Problem::NoRepository { type_ })?;
            Ok(Target::Forge {
                dialect: if type_ == ProviderType::Github {
                    Dialect::GitHub
                } else {
                    Dialect::Gitea
                },
                settings: Settings {
                    url,
                    token,
                    repo: Some(repo.clone()),
                },
                repo,
            })
        }
    }
}

/// What a rule knows of its provider: absent, or its type and whether it
/// is ready (the provider's own problem when not).
pub enum ProviderState<'a> {
    Missing,
    Found {
        type_: ProviderType,
        ready: Result<(), &'a str>,
    },
}

/// Checks a rule (in `namespace`) against its provider.
pub fn check_rule(
    namespace: &str,
    spec: &NotificationRuleSpec,
    provider: ProviderState<'_>,
) -> Result<(), Problem> {
    for (field, names) in [
        ("tenants", &spec.tenants),
        ("excludeTenants", &spec.exclude_tenants),
    ] {
        if let Some(bad) = names
            .iter()
            .find(|t| !(t.as_str() == "*" || crate::names::is_dns1123_label(t)))
        {
            return Err(Problem::BadTenant {
                field,
                value: bad.clone(),
            });
        }
    }
    let name = || spec.provider_ref.clone();
    let (type_, ready) = match provider {
        ProviderState::Missing => {
            return Err(Problem::NoProvider {
                namespace: namespace.to_owned(),
                name: name(),
            });
        }
        ProviderState::Found { type_, ready } => (type_, ready),
    };
    if type_.posts_commit_statuses() && !spec.events.is_empty() {
        return Err(Problem::EventsForStatuses { type_ });
    }
    if !type_.posts_commit_statuses() && spec.events.is_empty() {
        return Err(Problem::NoEvents { type_ });
    }
    ready.map_err(|why| Problem::ProviderNotReady {
        namespace: namespace.to_owned(),
        name: name(),
        why: why.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::EventKind;

    fn provider(json: serde_json::Value) -> NotificationProviderSpec {
        serde_json::from_value(json).unwrap()
    }

    fn secret(pairs: &[(&str, &str)]) -> SecretData {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        )
    }

    #[test]
    fn a_webhook_resolves_with_its_key_and_shows_no_secret() {
        let spec = provider(serde_json::json!({
            "type": "webhook", "address": "https://hooks.example.com/exo/", "secretRef": "hook"
        }));
        let t = resolve("ops", &spec, &secret(&[("hmacKey", "k3y-value\n")])).unwrap();
        match &t {
            Target::Webhook { address, key } => {
                assert_eq!(address.url(), "https://hooks.example.com/exo");
                assert_eq!(key.expose(), b"k3y-value");
            }
            other => panic!("{other:?}"),
        }
        assert!(!format!("{t:?}").contains("k3y-value"));
        assert_eq!(t.scrub("echo k3y-value"), "echo [redacted]");
    }

    #[test]
    fn each_refusal_names_the_field_or_the_secret() {
        let cases: Vec<(serde_json::Value, SecretData, &str, &str)> = vec![
            (
                serde_json::json!({"type": "webhook", "address": "ftp://x", "secretRef": "s"}),
                secret(&[("hmacKey", "k")]),
                "spec.address",
                "InvalidAddress",
            ),
            (
                serde_json::json!({"type": "webhook", "secretRef": "s"}),
                secret(&[("hmacKey", "k")]),
                "spec.address",
                "InvalidAddress",
            ),
            (
                serde_json::json!({"type": "webhook", "address": "http://h"}),
                None,
                "spec.secretRef",
                "NoSecretRef",
            ),
            (
                serde_json::json!({"type": "webhook", "address": "http://h", "secretRef": "gone"}),
                None,
                "Secret ops/gone (spec.secretRef) not found",
                "SecretNotFound",
            ),
            (
                serde_json::json!({"type": "webhook", "address": "http://h", "secretRef": "s"}),
                secret(&[("token", "k")]),
                "has no key hmacKey",
                "SecretKeyMissing",
            ),
            (
                serde_json::json!({"type": "gitea", "address": "http://forge", "secretRef": "s"}),
                secret(&[("token", "t")]),
                "spec.repository",
                "InvalidRepository",
            ),
            (
                serde_json::json!({"type": "github", "address": "https://api.github.com",
                    "secretRef": "s", "repository": "a/b/c"}),
                secret(&[("token", "t")]),
                "spec.repository: \"a/b/c\"",
                "InvalidRepository",
            ),
            (
                serde_json::json!({"type": "slack", "secretRef": "s"}),
                secret(&[("address", "not-a-url-s3cr3t")]),
                "key address: not an http",
                "InvalidAddress",
            ),
        ];
        for (spec, data, words, reason) in cases {
            let e = resolve("ops", &provider(spec.clone()), &data).unwrap_err();
            assert!(e.to_string().contains(words), "{spec}: {e}");
            assert_eq!(e.reason(), reason, "{spec}");
            assert!(!e.to_string().contains("s3cr3t"), "{e}");
        }
    }

    #[test]
    fn slack_takes_its_address_from_the_secret_and_never_shows_it() {
        let spec = provider(serde_json::json!({"type": "slack", "secretRef": "s"}));
        let url = "https://hooks.slack.com/services/T0/B0/s3cr3t";
        let t = resolve("ops", &spec, &secret(&[("address", url)])).unwrap();
        let Target::Slack { address } = &t else {
            panic!("{t:?}")
        };
        assert_eq!(address.url(), url);
        assert_eq!(address.to_string(), "the address in Secret ops/s");
        assert!(!format!("{t:?}").contains("s3cr3t"));
        assert_eq!(t.scrub(&format!("GET {url}")), "GET [redacted]");
        // Or from the spec, with no Secret at all.
        let spec = provider(serde_json::json!({"type": "slack", "address": "http://chat/hook"}));
        assert!(matches!(
            resolve("ops", &spec, &None),
            Ok(Target::Slack {
                address: Address::Spec(_)
            })
        ));
    }

    #[test]
    fn a_forge_resolves_to_its_dialect_and_repository() {
        let spec = provider(serde_json::json!({"type": "github",
            "address": "https://api.github.com", "secretRef": "s", "repository": "ops/fleet"}));
        let t = resolve("ops", &spec, &secret(&[("token", "ghp_s3cr3t")])).unwrap();
        let Target::Forge { dialect, repo, .. } = &t else {
            panic!("{t:?}")
        };
        assert_eq!(*dialect, Dialect::GitHub);
        assert_eq!(repo.to_string(), "ops/fleet");
        assert!(!format!("{t:?}").contains("s3cr3t"));
        assert_eq!(t.scrub("bad ghp_s3cr3t"), "bad [redacted]");
    }

    #[test]
    fn a_rule_is_checked_against_its_provider() {
        let rule = |json: serde_json::Value| -> NotificationRuleSpec {
            serde_json::from_value(json).unwrap()
        };
        let hook = ProviderState::Found {
            type_: ProviderType::Webhook,
            ready: Ok(()),
        };
        let ok = rule(serde_json::json!({"providerRef": "p", "events": ["verified"]}));
        assert_eq!(check_rule("ops", &ok, hook), Ok(()));
        let cases = [
            (
                ok.clone(),
                ProviderState::Missing,
                "spec.providerRef: NotificationProvider ops/p not found",
            ),
            (
                rule(serde_json::json!({"providerRef": "p"})),
                ProviderState::Found {
                    type_: ProviderType::Slack,
                    ready: Ok(()),
                },
                "spec.events: a slack provider needs at least one",
            ),
            (
                ok.clone(),
                ProviderState::Found {
                    type_: ProviderType::Gitea,
                    ready: Ok(()),
                },
                "spec.events: a gitea provider posts commit statuses",
            ),
            (
                ok.clone(),
                ProviderState::Found {
                    type_: ProviderType::Webhook,
                    ready: Err("Secret ops/s (spec.secretRef) not found"),
                },
                "is not ready: Secret ops/s",
            ),
            (
                rule(
                    serde_json::json!({"providerRef": "p", "events": ["verified"],
                    "tenants": ["Not_A_Name"]}),
                ),
                ProviderState::Found {
                    type_: ProviderType::Webhook,
                    ready: Ok(()),
                },
                "spec.tenants: \"Not_A_Name\"",
            ),
        ];
        for (spec, provider, words) in cases {
            let e = check_rule("ops", &spec, provider).unwrap_err();
            assert!(e.to_string().contains(words), "{e}");
        }
        assert_eq!(ok.events, [EventKind::Verified]);
    }
}
