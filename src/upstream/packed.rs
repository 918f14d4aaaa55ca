//! A watched object's wire form, encoded once. The tracker keeps each
//! object as the JSON text of its [`Resource`] (an `Arc<str>`), and the
//! snapshots and deltas that go out share that text: a snapshot of 10,000
//! objects costs 10,000 reference counts, not a copy of each, and nothing
//! is encoded twice. Before, the tracker held the typed [`Resource`] and
//! each snapshot cloned all of them, then encoded each again per chunk.
//!
//! Guarantees: the frames written here ([`DataFrame::to_json`]) are byte
//! for byte what [`crate::wire::Frame::to_json`] writes for the same
//! snapshot chunk or delta (tested), so the protocol does not change; a
//! packed text is exactly `serde_json::to_string(&resource)`, so chunk
//! byte budgets count what they counted before.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;

use crate::wire::{DeltaOp, Resource, ResourceKey, ResourceKind};

/// One object's wire form: its key and resourceVersion (what the tracker
/// compares) beside the encoded [`Resource`] (what goes out).
#[derive(Debug, Clone, PartialEq)]
pub struct Packed {
    pub key: ResourceKey,
    pub resource_version: String,
    json: Arc<str>,
}

impl Packed {
    /// Encodes `r` once.
    pub fn new(r: &Resource) -> Result<Self, serde_json::Error> {
        Ok(Packed {
            key: r.key.clone(),
            resource_version: r.resource_version.clone(),
            json: Arc::from(serde_json::to_string(r)?),
        })
    }

    /// A packed object from what the tracker kept of it.
    pub(super) fn from_parts(key: ResourceKey, resource_version: String, json: Arc<str>) -> Self {
        Packed {
            key,
            resource_version,
            json,
        }
    }

    /// The encoded [`Resource`], shared.
    pub fn json(&self) -> &Arc<str> {
        &self.json
    }

    /// The encoded [`Resource`], without the key and version beside it.
    pub fn into_json(self) -> Arc<str> {
        self.json
    }
}

/// [`to_wire`] and [`Packed::new`], logging (and skipping) an object that
/// cannot be encoded.
pub fn encode<K: kube::Resource + Serialize>(kind: ResourceKind, obj: &K) -> Option<Packed> {
    match to_wire(kind, obj).and_then(|r| Packed::new(&r)) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(kind = kind.as_str(), error = %e, "cannot encode object; skipped");
            None
        }
    }
}

/// A data frame (snapshot chunk or delta) around packed resources.
#[derive(Debug, Clone, PartialEq)]
pub enum DataFrame {
    Snapshot {
        snapshot_id: String,
        chunk: u32,
        last: bool,
        resources: Vec<Arc<str>>,
    },
    Delta {
        seq: u64,
        op: DeltaOp,
        resource: Arc<str>,
    },
}

impl DataFrame {
    /// The frame's text: [`crate::wire::Frame`]'s JSON (compact, fields in
    /// its order: `type` first), with each resource's packed text pasted in.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        let mut out = String::new();
        match self {
            DataFrame::Snapshot {
                snapshot_id,
                chunk,
                last,
                resources,
            } => {
                let len: usize = resources.iter().map(|r| r.len() + 1).sum();
                out.reserve(96 + snapshot_id.len() + len);
                out.push_str(r#"{"type":"snapshot","snapshot_id":"#);
                out.push_str(&serde_json::to_string(snapshot_id)?);
                let _ = write!(out, r#","chunk":{chunk},"last":{last},"resources":["#);
                for (i, r) in resources.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(r);
                }
                out.push_str("]}");
            }
            DataFrame::Delta { seq, op, resource } => {
                out.reserve(64 + resource.len());
                let _ = write!(out, r#"{{"type":"delta","seq":{seq},"op":"#);
                out.push_str(&serde_json::to_string(op)?);
                out.push_str(r#","resource":"#);
                out.push_str(resource);
                out.push('}');
            }
        }
        Ok(out)
    }
}

/// Converts a typed object to its wire form: identity, resourceVersion,
/// generation, labels, `status.phase`, and `spec`/`status`, less what a
/// control plane does not show, to keep frames small: of a Pod's spec only
/// `nodeName`; of a Rollout's spec `settings` (the tenant's `tenant.yaml`)
/// and of its status `inventory` (every object the saga applied); of a
/// Tenant's spec `settings` and of its status `activeSettings` (the same
/// `tenant.yaml`, as last carried out). An AnalysisRun also carries its
/// `metadata.creationTimestamp` (which run of a wave is the newest). A
/// cluster-scoped object (a Tenant) has an empty namespace.
pub fn to_wire<K: kube::Resource + Serialize>(
    kind: ResourceKind,
    obj: &K,
) -> Result<Resource, serde_json::Error> {
    let meta = obj.meta();
    let mut v = serde_json::to_value(obj)?;
    let mut status = v
        .get_mut("status")
        .map(serde_json::Value::take)
        .unwrap_or_default();
    let mut spec = v
        .get_mut("spec")
        .map(serde_json::Value::take)
        .unwrap_or_default();
    match kind {
        ResourceKind::Pod => {
            spec = serde_json::json!({ "nodeName": spec.get("nodeName") });
        }
        ResourceKind::Rollout => {
            leave_out(&mut spec, "settings");
            leave_out(&mut status, "inventory");
        }
        ResourceKind::Tenant => {
            leave_out(&mut spec, "settings");
            leave_out(&mut status, "activeSettings");
        }
        ResourceKind::Agent
        | ResourceKind::Tool
        | ResourceKind::AgentFS
        | ResourceKind::App
        | ResourceKind::AnalysisRun => {}
    }
    let created = match kind {
        ResourceKind::AnalysisRun => meta.creation_timestamp.as_ref().map(|t| t.0.to_string()),
        _ => None,
    };
    Ok(Resource {
        key: ResourceKey {
            kind,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        },
        uid: meta.uid.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone().unwrap_or_default(),
        generation: meta.generation,
        created,
        phase: status
            .get("phase")
            .and_then(|p| p.as_str())
            .map(str::to_owned),
        labels: meta.labels.clone().unwrap_or_default(),
        spec,
        status,
    })
}

/// Removes `field` from `v` when `v` is an object.
fn leave_out(v: &mut serde_json::Value, field: &str) {
    if let Some(o) = v.as_object_mut() {
        o.remove(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Frame;
    use ResourceKind::Agent;

    #[test]
    fn wire_form_of_an_agent_carries_phase_and_identity() {
        let mut a = crate::crd::Agent::new("a1", crate::crd::AgentSpec::default());
        a.metadata.namespace = Some("ns".into());
        a.metadata.resource_version = Some("42".into());
        a.status = Some(crate::crd::AgentStatus {
            phase: Some(crate::crd::AgentPhase::Active),
            ..Default::default()
        });
        let w = to_wire(Agent, &a).unwrap();
        assert_eq!(w.key.name, "a1");
        assert_eq!(w.resource_version, "42");
        assert_eq!(w.phase.as_deref(), Some("Active"));
        assert!(w.spec.get("runtime").is_some());
    }

    #[test]
    fn wire_form_of_an_analysis_run_has_its_measurements_and_creation() {
        use crate::analysis::{Measurement, Verdict};
        use crate::crd::{AnalysisPhase, AnalysisRun, AnalysisRunSpec, AnalysisRunStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let at: k8s_openapi::jiff::Timestamp = "2026-11-02T10:00:00Z".parse().unwrap();
        let mut run = AnalysisRun::new(
            "prod-canary-2026.11.1",
            AnalysisRunSpec {
                fleet: "prod".into(),
                wave: "canary".into(),
                release: "2026.11.1".into(),
                commit: "abc1234".into(),
                tenants: vec![],
                checks: vec![],
                soak: Some("10m".into()),
                auto_promote: true,
            },
        );
        run.metadata.namespace = Some("fleet".into());
        run.metadata.generation = Some(2);
        run.metadata.creation_timestamp = Some(Time(at));
        run.status = Some(AnalysisRunStatus {
            observed_generation: Some(2),
            phase: AnalysisPhase::Failed,
            measurements: vec![Measurement {
                check: "crashloops".into(),
                slot: 0,
                at: Time(at),
                value: Some(3.0),
                verdict: Verdict::Fail,
                detail: "3 pods".into(),
            }],
            ..Default::default()
        });
        let w = to_wire(ResourceKind::AnalysisRun, &run).unwrap();
        assert_eq!(w.key.kind, ResourceKind::AnalysisRun);
        assert_eq!(w.created.as_deref(), Some("2026-11-02T10:00:00Z"));
        assert_eq!(
            (w.generation, w.phase.as_deref()),
            (Some(2), Some("Failed"))
        );
        assert_eq!(w.spec["release"], "2026.11.1");
        assert_eq!(w.status["measurements"][0]["verdict"], "Fail");
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["kind"], "AnalysisRun");
        assert_eq!(v["creationTimestamp"], "2026-11-02T10:00:00Z");
        // Other kinds do not carry their creation: frames stay as they were.
        let a = to_wire(ResourceKind::Agent, &run).unwrap();
        assert_eq!(a.created, None);
        assert!(
            serde_json::to_value(&a)
                .unwrap()
                .get("creationTimestamp")
                .is_none()
        );
    }

    #[test]
    fn wire_form_of_a_rollout_has_its_saga_without_settings_or_inventory() {
        use crate::crd::{
            InventoryEntry, Rollout, RolloutPhase, RolloutSpec, RolloutStatus, SagaStep, StepState,
        };
        let mut ro = Rollout::new(
            "release",
            RolloutSpec {
                tenant: "t1".into(),
                wave: "canary".into(),
                release: "r2".into(),
                commit: "c0ffee".into(),
                desired_hash: "h2".into(),
                settings: crate::crd::tenant::TenantSpec {
                    node_tier: Some("gpu".into()),
                    ..Default::default()
                },
            },
        );
        ro.metadata.namespace = Some("t1".into());
        ro.metadata.resource_version = Some("77".into());
        ro.metadata.uid = Some("u-1".into());
        ro.metadata.generation = Some(5);
        ro.status = Some(RolloutStatus {
            phase: Some(RolloutPhase::Progressing),
            observed_generation: Some(5),
            desired_hash: Some("h2".into()),
            steps: vec![SagaStep {
                name: "configmaps-published".into(),
                owner: "operator".into(),
                state: StepState::Done,
                ..Default::default()
            }],
            inventory: vec![InventoryEntry {
                name: "a".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let w = to_wire(ResourceKind::Rollout, &ro).unwrap();
        assert_eq!(w.key.kind, ResourceKind::Rollout);
        assert_eq!(
            (w.key.namespace.as_str(), w.key.name.as_str()),
            ("t1", "release")
        );
        assert_eq!((w.uid.as_str(), w.resource_version.as_str()), ("u-1", "77"));
        assert_eq!(w.generation, Some(5));
        assert_eq!(w.phase.as_deref(), Some("Progressing"));
        assert_eq!(w.spec["desiredHash"], "h2");
        assert_eq!(w.spec["commit"], "c0ffee");
        assert!(w.spec.get("settings").is_none(), "{}", w.spec);
        assert_eq!(w.status["observedGeneration"], 5);
        assert_eq!(w.status["steps"][0]["state"], "Done");
        assert!(w.status.get("inventory").is_none(), "{}", w.status);
        // The same object as another kind keeps both: the cut is the Rollout's.
        let a = to_wire(ResourceKind::Agent, &ro).unwrap();
        assert!(a.spec.get("settings").is_some() && a.status.get("inventory").is_some());
    }

    #[test]
    fn wire_form_of_a_tenant_has_its_saga_without_settings_and_no_namespace() {
        use crate::crd::tenant::{
            Tenant, TenantOperation, TenantPhase, TenantResourceSpec, TenantSpec, TenantStatus,
        };
        use crate::crd::{SagaStep, StepState};
        let settings = TenantSpec {
            node_tier: Some("gpu".into()),
            wave: Some("canary".into()),
            ..Default::default()
        };
        let mut t = Tenant::new(
            "acme",
            TenantResourceSpec {
                settings: settings.clone(),
                commit: Some("c0ffee".into()),
                ..Default::default()
            },
        );
        t.metadata.resource_version = Some("81".into());
        t.metadata.uid = Some("u-2".into());
        t.metadata.generation = Some(3);
        t.metadata.labels = Some(
            [(
                crate::meta::LABEL_FLEET_NAMESPACE.to_owned(),
                "fleet".to_owned(),
            )]
            .into(),
        );
        t.status = Some(TenantStatus {
            phase: Some(TenantPhase::Onboarding),
            operation: Some(TenantOperation::Onboard),
            current_step: Some("quota-applied".into()),
            steps: vec![
                SagaStep {
                    name: "namespace-created".into(),
                    owner: "operator".into(),
                    state: StepState::Done,
                    ..Default::default()
                },
                SagaStep {
                    name: "quota-applied".into(),
                    owner: "operator".into(),
                    state: StepState::Running,
                    message: Some("waiting for the quota".into()),
                    ..Default::default()
                },
            ],
            desired_hash: Some("h3".into()),
            observed_generation: Some(3),
            active_settings: Some(settings),
            message: Some("onboarding".into()),
            ..Default::default()
        });
        let w = to_wire(ResourceKind::Tenant, &t).unwrap();
        assert_eq!(w.key.kind, ResourceKind::Tenant);
        assert_eq!(
            (w.key.namespace.as_str(), w.key.name.as_str()),
            ("", "acme")
        );
        assert_eq!((w.uid.as_str(), w.resource_version.as_str()), ("u-2", "81"));
        assert_eq!(w.generation, Some(3));
        assert_eq!(w.phase.as_deref(), Some("Onboarding"));
        assert_eq!(w.labels[crate::meta::LABEL_FLEET_NAMESPACE], "fleet");
        assert_eq!(w.spec["commit"], "c0ffee");
        assert!(w.spec.get("settings").is_none(), "{}", w.spec);
        assert_eq!(w.status["operation"], "onboard");
        assert_eq!(w.status["currentStep"], "quota-applied");
        assert_eq!(w.status["desiredHash"], "h3");
        assert_eq!(w.status["observedGeneration"], 3);
        assert_eq!(w.status["message"], "onboarding");
        assert_eq!(w.status["steps"][0]["state"], "Done");
        assert_eq!(w.status["steps"][1]["owner"], "operator");
        assert_eq!(w.status["steps"][1]["message"], "waiting for the quota");
        assert!(w.status.get("activeSettings").is_none(), "{}", w.status);
        // On the wire the namespace is there, empty: the field is required.
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["namespace"], "");
        // The same object as another kind keeps both: the cut is the Tenant's.
        let a = to_wire(ResourceKind::Agent, &t).unwrap();
        assert!(a.spec.get("settings").is_some() && a.status.get("activeSettings").is_some());
    }

    #[test]
    fn generation_is_carried_for_every_kind_and_absent_when_unset() {
        let mut a = crate::crd::Agent::new("a1", crate::crd::AgentSpec::default());
        assert_eq!(to_wire(Agent, &a).unwrap().generation, None);
        a.metadata.generation = Some(2);
        let w = to_wire(Agent, &a).unwrap();
        assert_eq!(w.generation, Some(2));
        assert_eq!(serde_json::to_value(&w).unwrap()["generation"], 2);
    }

    /// A resource with every optional part filled, and text that needs
    /// escaping.
    fn full(name: &str) -> Resource {
        let mut r = Resource::bare(Agent, name, "12");
        r.uid = "u-\"1\"".into();
        r.generation = Some(3);
        r.created = Some("2026-11-02T10:00:00Z".into());
        r.phase = Some("Active".into());
        r.labels = [("app".to_owned(), "a\u{e9}\n".to_owned())].into();
        r.spec = serde_json::json!({"runtime": {"image": "x@sha256:00"}, "n": [1, 2.5, null]});
        r.status = serde_json::json!({"phase": "Active", "message": "</script> \\ \u{1}"});
        r
    }

    #[test]
    fn packed_text_is_the_resources_json() {
        for r in [full("a"), Resource::bare(Agent, "b", "1")] {
            let p = Packed::new(&r).unwrap();
            assert_eq!(&**p.json(), serde_json::to_string(&r).unwrap());
            assert_eq!((&p.key, &p.resource_version), (&r.key, &r.resource_version));
            let back: Resource = serde_json::from_str(p.json()).unwrap();
            assert_eq!(back, r);
        }
    }

    #[test]
    fn frames_are_byte_identical_to_the_wire_frames() {
        use crate::wire::{Delta, SnapshotChunk};
        let rs = [full("a"), Resource::bare(Agent, "b", "1"), full("c")];
        let packed: Vec<Arc<str>> = rs
            .iter()
            .map(|r| Packed::new(r).unwrap().into_json())
            .collect();
        for (n, last) in [(0, true), (1, false), (3, true)] {
            let ours = DataFrame::Snapshot {
                snapshot_id: "s-\"1\"".into(),
                chunk: 7,
                last,
                resources: packed[..n].to_vec(),
            };
            let theirs = Frame::Snapshot(SnapshotChunk {
                snapshot_id: "s-\"1\"".into(),
                chunk: 7,
                last,
                resources: rs[..n].to_vec(),
            });
            assert_eq!(
                ours.to_json().unwrap(),
                theirs.to_json().unwrap(),
                "{n} resources"
            );
        }
        for op in [DeltaOp::Upsert, DeltaOp::Remove] {
            let ours = DataFrame::Delta {
                seq: u64::MAX,
                op,
                resource: packed[0].clone(),
            };
            let theirs = Frame::Delta(Delta {
                seq: u64::MAX,
                op,
                resource: rs[0].clone(),
            });
            assert_eq!(ours.to_json().unwrap(), theirs.to_json().unwrap(), "{op:?}");
        }
    }

    #[test]
    fn encode_is_to_wire_packed() {
        let mut a = crate::crd::Agent::new("a1", crate::crd::AgentSpec::default());
        a.metadata.namespace = Some("ns".into());
        a.metadata.resource_version = Some("42".into());
        let p = encode(Agent, &a).unwrap();
        assert_eq!(p, Packed::new(&to_wire(Agent, &a).unwrap()).unwrap());
        assert_eq!(
            (p.key.name.as_str(), p.resource_version.as_str()),
            ("a1", "42")
        );
    }
}
