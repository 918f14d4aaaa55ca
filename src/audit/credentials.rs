//! `credentials`: upstream provider credentials must appear nowhere in a
//! tenant pod (env, `envFrom`, mounted Secrets), and a tenant holds only
//! its own tokens.
//!
//! A credential is found by its name (`OPENAI_API_KEY`, a Secret key
//! `anthropic-api-key`) or by the shape of its value (`sk-ant-…`,
//! `AKIA…`). Findings name the container, the variable, the Secret and the
//! key, and the provider the value looks like: never the value.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use kube::ResourceExt;
use sha2::{Digest, Sha256};

use super::{Finding, Index, Rule, pod_object};
use crate::meta::{LABEL_COMPONENT, LABEL_CREDENTIAL, LABEL_MANAGED_BY, MANAGED_BY, TOKEN_KEY};

/// Variable and key names that hold a provider credential, upper case
/// with `_` (a Secret key `openai-api-key` is compared as `OPENAI_API_KEY`).
const NAMES: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "OpenAI"),
    ("OPENAI_KEY", "OpenAI"),
    ("ANTHROPIC_API_KEY", "Anthropic"),
    ("CLAUDE_API_KEY", "Anthropic"),
    ("AWS_ACCESS_KEY_ID", "AWS"),
    ("AWS_SECRET_ACCESS_KEY", "AWS"),
    ("AWS_SESSION_TOKEN", "AWS"),
    ("GOOGLE_API_KEY", "Google"),
    ("GEMINI_API_KEY", "Google"),
    ("GOOGLE_APPLICATION_CREDENTIALS", "Google"),
    ("AZURE_OPENAI_API_KEY", "Azure"),
    ("AZURE_API_KEY", "Azure"),
    ("AZURE_CLIENT_SECRET", "Azure"),
    ("AZURE_STORAGE_KEY", "Azure"),
    ("MISTRAL_API_KEY", "Mistral"),
    ("COHERE_API_KEY", "Cohere"),
    ("GROQ_API_KEY", "Groq"),
    ("HF_TOKEN", "Hugging Face"),
    ("HUGGINGFACE_API_KEY", "Hugging Face"),
    ("XAI_API_KEY", "xAI"),
    ("DEEPSEEK_API_KEY", "DeepSeek"),
    ("TOGETHER_API_KEY", "Together"),
];

/// The provider a variable or key name belongs to.
pub fn provider_of_name(name: &str) -> Option<&'static str> {
    let norm: String = name
        .chars()
        .map(|c| {
            if c == '-' || c == '.' {
                '_'
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect();
    NAMES.iter().find(|(n, _)| *n == norm).map(|(_, p)| *p)
}

/// The provider whose key a value contains, by shape (the shapes are
/// `crate::redact`'s, shared with the incident path's redaction).
pub use crate::redact::provider_of_value;

fn digest(v: &[u8]) -> [u8; 32] {
    Sha256::digest(v).into()
}

/// Whether a Secret holds a tenant's own token: an agent token Exo made,
/// or one labelled [`LABEL_CREDENTIAL`].
fn is_tenant_token(s: &Secret) -> bool {
    let l = s.labels();
    l.contains_key(LABEL_CREDENTIAL)
        || (l.get(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY)
            && l.get(LABEL_COMPONENT).map(String::as_str) == Some("agent")
            && s.data.as_ref().is_some_and(|d| d.contains_key(TOKEN_KEY)))
}

fn secret_values(s: &Secret) -> impl Iterator<Item = (&str, &[u8])> {
    let data = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.0.as_slice()));
    let strings = s
        .string_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_bytes()));
    data.chain(strings)
}

struct Scan<'a, 'b> {
    ix: &'b Index<'a>,
    ns: &'a str,
    pod: &'a Pod,
    out: &'b mut Vec<Finding>,
}

impl Scan<'_, '_> {
    fn found(&mut self, message: String) {
        self.out.push(Finding::new(
            Rule::Credentials,
            self.ns,
            pod_object(self.pod),
            message,
        ));
    }

    /// Every key of Secret `name` that is a credential, by name or shape.
    fn secret(&mut self, name: &str, only_key: Option<&str>, via: &str) {
        let Some(s) = self.ix.secrets.get(&(self.ns.to_owned(), name.to_owned())) else {
            return;
        };
        for (k, v) in secret_values(s) {
            if only_key.is_some_and(|o| o != k) {
                continue;
            }
            if let Some(p) = provider_of_name(k) {
                self.found(format!(
                    "{via}: Secret {name} key {k} is a {p} credential name"
                ));
            } else if let Some(p) = provider_of_value(v) {
                self.found(format!(
                    "{via}: Secret {name} key {k} holds what looks like a {p} key"
                ));
            }
        }
    }

    fn container(&mut self, c: &Container) {
        let cname = &c.name;
        for e in c.env.iter().flatten() {
            let via = format!("container {cname} env {}", e.name);
            if let Some(p) = provider_of_name(&e.name) {
                self.found(format!("{via} is a {p} credential name"));
                continue;
            }
            if let Some(v) = &e.value
                && let Some(p) = provider_of_value(v.as_bytes())
            {
                self.found(format!("{via} holds what looks like a {p} key"));
            }
            if let Some(r) = e
                .value_from
                .as_ref()
                .and_then(|f| f.secret_key_ref.as_ref())
            {
                self.secret(&r.name, Some(&r.key), &via);
            }
        }
        for f in c.env_from.iter().flatten() {
            if let Some(r) = &f.secret_ref {
                self.secret(&r.name, None, &format!("container {cname} envFrom"));
            }
            if let Some(r) = &f.config_map_ref
                && let Some(cm) = self
                    .ix
                    .configmaps
                    .get(&(self.ns.to_owned(), r.name.clone()))
            {
                for (k, v) in cm.data.iter().flatten() {
                    if let Some(p) = provider_of_name(k).or_else(|| provider_of_value(v.as_bytes()))
                    {
                        self.found(format!(
                            "container {cname} envFrom: ConfigMap {} key {k} is a {p} credential",
                            r.name
                        ));
                    }
                }
            }
        }
    }
}

pub(super) fn check(ix: &Index<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (ns, pod) in ix.tenant_pods() {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        let mut scan = Scan {
            ix,
            ns,
            pod,
            out: &mut out,
        };
        for c in spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
        {
            scan.container(c);
        }
        for v in spec.volumes.iter().flatten() {
            if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) {
                scan.secret(name, None, &format!("volume {}", v.name));
            }
            for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
                if let Some(s) = &src.secret {
                    scan.secret(&s.name, None, &format!("volume {}", v.name));
                }
            }
        }
    }
    // A tenant holding another tenant's token: any Secret in a tenant
    // namespace with the value of a token another tenant owns.
    let mut owners: BTreeMap<[u8; 32], (&str, String)> = BTreeMap::new();
    for s in &ix.snap.secrets {
        let Some(ns) = s.metadata.namespace.as_deref() else {
            continue;
        };
        if ix.tenants.contains_key(ns) && is_tenant_token(s) {
            for (_, v) in secret_values(s) {
                if !v.is_empty() {
                    owners.insert(digest(v), (ns, s.name_any()));
                }
            }
        }
    }
    for s in &ix.snap.secrets {
        let Some(ns) = s.metadata.namespace.as_deref() else {
            continue;
        };
        if !ix.tenants.contains_key(ns) {
            continue;
        }
        for (k, v) in secret_values(s) {
            if let Some((owner, name)) = owners.get(&digest(v))
                && *owner != ns
            {
                out.push(Finding::new(
                    Rule::Credentials,
                    ns,
                    format!("Secret/{}", s.name_any()),
                    format!("key {k} holds tenant {owner}'s token (Secret {owner}/{name})"),
                ));
            }
        }
    }
    out
}
