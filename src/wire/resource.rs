//! The wire form of a watched object (`docs/protocol.md`, section 5): its
//! kind, key, version and the parts of it a control plane shows.
//!
//! Guarantees: every field a newer peer may add is optional with a default,
//! so an older frame still parses (`generation` is one: absent means the
//! sender did not say); `kind` is one of the listed kinds, nothing else.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The kinds of resources on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ResourceKind {
    Agent,
    Tool,
    AgentFS,
    Pod,
    /// A tenant's saga (`autonomic.sh` Rollout, one per tenant namespace).
    Rollout,
    /// A tenant's lifecycle saga (`autonomic.sh` Tenant, cluster-scoped:
    /// its namespace on the wire is empty).
    Tenant,
    /// An app with its workspace and database volumes (`autonomic.sh`
    /// App), sent only to a control plane that takes them.
    App,
    /// One wave's analysis of one release (`autonomic.sh` AnalysisRun, in
    /// the Fleet's namespace), sent only to a control plane that takes
    /// them.
    AnalysisRun,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Agent => "Agent",
            ResourceKind::Tool => "Tool",
            ResourceKind::AgentFS => "AgentFS",
            ResourceKind::Pod => "Pod",
            ResourceKind::Rollout => "Rollout",
            ResourceKind::Tenant => "Tenant",
            ResourceKind::App => "App",
            ResourceKind::AnalysisRun => "AnalysisRun",
        }
    }
}

/// Identity of a resource on the wire.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceKey {
    pub kind: ResourceKind,
    pub namespace: String,
    pub name: String,
}

/// The wire form of a watched object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    #[serde(flatten)]
    pub key: ResourceKey,
    #[serde(default)]
    pub uid: String,
    #[serde(rename = "resourceVersion")]
    pub resource_version: String,
    /// `metadata.generation` when the object has one: a status stamped
    /// with another `observedGeneration` was computed for an older spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp` (RFC 3339), sent only for kinds whose
    /// age matters to a reader: an AnalysisRun (the newest run of a wave is
    /// the one shown).
    #[serde(
        default,
        rename = "creationTimestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub created: Option<String>,
    /// `status.phase` when the object has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `spec` and `status` as the apiserver has them, less what the
    /// encoder leaves out per kind (`upstream::packed::to_wire`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub spec: serde_json::Value,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub status: serde_json::Value,
}

#[cfg(test)]
impl Resource {
    /// A bare resource `kind ns/name` at `rv`, for unit tests.
    pub fn bare(kind: ResourceKind, name: &str, rv: &str) -> Self {
        Resource {
            key: ResourceKey {
                kind,
                namespace: "ns".into(),
                name: name.into(),
            },
            uid: String::new(),
            resource_version: rv.into(),
            generation: None,
            created: None,
            phase: None,
            labels: BTreeMap::new(),
            spec: serde_json::Value::Null,
            status: serde_json::Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Frame;

    fn delta(resource: &str) -> Result<Frame, crate::wire::FrameError> {
        Frame::parse(&format!(
            r#"{{"type":"delta","seq":1,"op":"upsert","resource":{resource}}}"#
        ))
    }

    #[test]
    fn a_rollout_parses_with_its_generation() {
        let Frame::Delta(d) = delta(
            r#"{"kind":"Rollout","namespace":"t1","name":"release","resourceVersion":"9",
                "generation":3,"phase":"Verified","status":{"observedGeneration":3}}"#,
        )
        .unwrap() else {
            panic!("not a delta")
        };
        assert_eq!(d.resource.key.kind, ResourceKind::Rollout);
        assert_eq!(d.resource.generation, Some(3));
        assert_eq!(d.resource.phase.as_deref(), Some("Verified"));
        assert_eq!(d.resource.status["observedGeneration"], 3);
    }

    #[test]
    fn a_tenant_parses_with_an_empty_namespace_and_its_saga() {
        let Frame::Delta(d) = delta(
            r#"{"kind":"Tenant","namespace":"","name":"acme","resourceVersion":"12",
                "generation":2,"phase":"Onboarding",
                "status":{"operation":"onboard","currentStep":"namespace-created",
                          "steps":[{"name":"namespace-created","owner":"operator","state":"Running"}]}}"#,
        )
        .unwrap() else {
            panic!("not a delta")
        };
        assert_eq!(d.resource.key.kind, ResourceKind::Tenant);
        assert_eq!(d.resource.key.namespace, "");
        assert_eq!(d.resource.key.name, "acme");
        assert_eq!(d.resource.phase.as_deref(), Some("Onboarding"));
        assert_eq!(d.resource.status["steps"][0]["state"], "Running");
        // Sent back with its empty namespace: an older field set still parses.
        let v = serde_json::to_value(&d.resource).unwrap();
        assert_eq!(
            (&v["kind"], &v["namespace"]),
            (&"Tenant".into(), &"".into())
        );
    }

    #[test]
    fn generation_is_optional_and_left_out_when_absent() {
        // An older peer sends no generation: it still parses.
        let Frame::Delta(d) =
            delta(r#"{"kind":"Agent","namespace":"a","name":"b","resourceVersion":"7"}"#).unwrap()
        else {
            panic!("not a delta")
        };
        assert_eq!(d.resource.generation, None);
        let text = serde_json::to_string(&d.resource).unwrap();
        assert!(!text.contains("generation"), "{text}");
        let mut r = Resource::bare(ResourceKind::Rollout, "release", "1");
        r.generation = Some(4);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["generation"], 4);
        assert_eq!(v["kind"], "Rollout");
    }

    #[test]
    fn a_bad_kind_or_generation_is_refused_naming_it() {
        for (resource, says) in [
            (
                r#"{"kind":"Rollouts","namespace":"a","name":"b","resourceVersion":"7"}"#,
                "unknown variant `Rollouts`",
            ),
            (
                r#"{"kind":"rollout","namespace":"a","name":"b","resourceVersion":"7"}"#,
                "unknown variant `rollout`",
            ),
            (
                r#"{"kind":"Rollout","namespace":"a","name":"b","resourceVersion":"7","generation":"3"}"#,
                "invalid type: string \"3\", expected i64",
            ),
        ] {
            let e = delta(resource).unwrap_err().to_string();
            assert!(e.contains(says), "{resource}: {e}");
        }
    }

    #[test]
    fn every_kind_is_spelled_as_its_name() {
        for k in [
            ResourceKind::Agent,
            ResourceKind::Tool,
            ResourceKind::AgentFS,
            ResourceKind::Pod,
            ResourceKind::Rollout,
            ResourceKind::Tenant,
            ResourceKind::App,
            ResourceKind::AnalysisRun,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }
}
