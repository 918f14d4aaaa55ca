//! What the operator has seen of the watched kinds, and the deltas each
//! watch event implies. Pure: it takes watch events and returns changes.
//!
//! Guarantees: an event that does not change an object's resourceVersion
//! produces no delta; a re-list (`Init` .. `InitDone`) produces `remove`s for
//! objects that vanished meanwhile and `upsert`s for new or changed ones, so
//! the control plane's view converges without a full snapshot. A kind is
//! "ready" after its first complete list; the first snapshot waits for all.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::wire::{DeltaOp, Resource, ResourceKey, ResourceKind};

/// A watch event reduced to what the tracker needs.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    Init,
    InitApply(Resource),
    InitDone,
    Apply(Resource),
    Delete(Resource),
}

#[derive(Debug, Default)]
pub struct Tracker {
    objects: BTreeMap<ResourceKey, Resource>,
    relisting: BTreeMap<ResourceKind, BTreeMap<ResourceKey, Resource>>,
    ready: BTreeSet<ResourceKind>,
    kinds: BTreeSet<ResourceKind>,
}

pub type Change = (DeltaOp, Resource);

impl Tracker {
    pub fn new(kinds: impl IntoIterator<Item = ResourceKind>) -> Self {
        Self {
            kinds: kinds.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Every kind has been listed once.
    pub fn ready(&self) -> bool {
        self.kinds.iter().all(|k| self.ready.contains(k))
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The current content, for a snapshot.
    pub fn all(&self) -> Vec<Resource> {
        self.objects.values().cloned().collect()
    }

    pub fn on_event(&mut self, kind: ResourceKind, ev: WatchEvent) -> Vec<Change> {
        match ev {
            WatchEvent::Init => {
                self.relisting.insert(kind, BTreeMap::new());
                Vec::new()
            }
            WatchEvent::InitApply(r) => {
                self.relisting
                    .entry(kind)
                    .or_default()
                    .insert(r.key.clone(), r);
                Vec::new()
            }
            WatchEvent::InitDone => {
                let listed = self.relisting.remove(&kind).unwrap_or_default();
                self.ready.insert(kind);
                let mut changes = Vec::new();
                let gone: Vec<ResourceKey> = self
                    .objects
                    .keys()
                    .filter(|k| k.kind == kind && !listed.contains_key(*k))
                    .cloned()
                    .collect();
                for k in gone {
                    if let Some(r) = self.objects.remove(&k) {
                        changes.push((DeltaOp::Remove, r));
                    }
                }
                for (_, r) in listed {
                    changes.extend(self.upsert(r));
                }
                changes
            }
            WatchEvent::Apply(r) => self.upsert(r).into_iter().collect(),
            WatchEvent::Delete(r) => match self.objects.remove(&r.key) {
                Some(_) => vec![(DeltaOp::Remove, r)],
                None => Vec::new(),
            },
        }
    }

    fn upsert(&mut self, r: Resource) -> Option<Change> {
        match self.objects.get(&r.key) {
            Some(old) if old.resource_version == r.resource_version => None,
            _ => {
                self.objects.insert(r.key.clone(), r.clone());
                Some((DeltaOp::Upsert, r))
            }
        }
    }
}

/// [`to_wire`], logging (and skipping) an object that cannot be encoded.
pub fn encode<K: kube::Resource + Serialize>(kind: ResourceKind, obj: &K) -> Option<Resource> {
    match to_wire(kind, obj) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!(kind = kind.as_str(), error = %e, "cannot encode object; skipped");
            None
        }
    }
}

/// Converts a typed object to its wire form: identity, resourceVersion,
/// generation, labels, `status.phase`, and `spec`/`status`, less what a
/// control plane does not show, to keep frames small: of a Pod's spec only
/// `nodeName`; of a Rollout's spec `settings` (the tenant's `tenant.yaml`)
/// and of its status `inventory` (every object the saga applied); of a
/// Tenant's spec `settings` and of its status `activeSettings` (the same
/// `tenant.yaml`, as last carried out). A cluster-scoped object (a Tenant)
/// has an empty namespace.
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
        ResourceKind::Agent | ResourceKind::Tool | ResourceKind::AgentFS => {}
    }
    Ok(Resource {
        key: ResourceKey {
            kind,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        },
        uid: meta.uid.clone().unwrap_or_default(),
        resource_version: meta.resource_version.clone().unwrap_or_default(),
        generation: meta.generation,
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

    fn r(kind: ResourceKind, name: &str, rv: &str) -> Resource {
        Resource::bare(kind, name, rv)
    }

    fn ops(c: &[Change]) -> Vec<(DeltaOp, String, String)> {
        c.iter()
            .map(|(op, r)| (*op, r.key.name.clone(), r.resource_version.clone()))
            .collect()
    }

    use ResourceKind::{Agent, Tool};

    #[test]
    fn ready_after_every_kind_listed() {
        let mut t = Tracker::new([Agent, Tool]);
        assert!(!t.ready());
        t.on_event(Agent, WatchEvent::Init);
        t.on_event(Agent, WatchEvent::InitApply(r(Agent, "a", "1")));
        let c = t.on_event(Agent, WatchEvent::InitDone);
        assert_eq!(ops(&c), [(DeltaOp::Upsert, "a".into(), "1".into())]);
        assert!(!t.ready());
        t.on_event(Tool, WatchEvent::Init);
        t.on_event(Tool, WatchEvent::InitDone);
        assert!(t.ready());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn unchanged_resource_version_is_not_a_delta() {
        let mut t = Tracker::new([Agent]);
        assert_eq!(
            t.on_event(Agent, WatchEvent::Apply(r(Agent, "a", "1")))
                .len(),
            1
        );
        assert!(
            t.on_event(Agent, WatchEvent::Apply(r(Agent, "a", "1")))
                .is_empty()
        );
        let c = t.on_event(Agent, WatchEvent::Delete(r(Agent, "a", "2")));
        assert_eq!(ops(&c), [(DeltaOp::Remove, "a".into(), "2".into())]);
        assert!(
            t.on_event(Agent, WatchEvent::Delete(r(Agent, "a", "2")))
                .is_empty()
        );
    }

    #[test]
    fn relist_removes_vanished_and_keeps_other_kinds() {
        let mut t = Tracker::new([Agent, Tool]);
        t.on_event(Agent, WatchEvent::Apply(r(Agent, "gone", "1")));
        t.on_event(Agent, WatchEvent::Apply(r(Agent, "kept", "1")));
        t.on_event(Tool, WatchEvent::Apply(r(Tool, "tool", "1")));
        t.on_event(Agent, WatchEvent::Init);
        t.on_event(Agent, WatchEvent::InitApply(r(Agent, "kept", "1")));
        t.on_event(Agent, WatchEvent::InitApply(r(Agent, "new", "3")));
        let c = t.on_event(Agent, WatchEvent::InitDone);
        assert_eq!(
            ops(&c),
            [
                (DeltaOp::Remove, "gone".into(), "1".into()),
                (DeltaOp::Upsert, "new".into(), "3".into())
            ]
        );
        let names: Vec<_> = t.all().into_iter().map(|r| r.key.name).collect();
        assert_eq!(names, ["kept", "new", "tool"]);
    }

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
}
