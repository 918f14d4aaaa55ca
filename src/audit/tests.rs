//! Every rule fires on its bad input, and a clean tenant has no finding.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::json;

use super::*;
use crate::crd::tenant::TenantSpec;
use crate::crd::{FleetSpec, FleetStatus, RolloutSpec};

use crate::meta::{LABEL_BASELINE, LABEL_CONTROL_PLANE, LABEL_NODE_TIER};
use crate::rollout::isolation::{Platform, policies};

const OPENAI: &str = "sk-proj-AAAAbbbbCCCCddddEEEEffff0000";
const AWS: &str = "AKIAABCDEFGHIJKLMNOP";
const TOKEN_T2: &str = "exo-agent-token-of-tenant-two";

fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn rollout(ns: &str, tier: &str) -> Rollout {
    let mut r = Rollout::new(
        "release",
        RolloutSpec {
            tenant: ns.into(),
            settings: TenantSpec {
                node_tier: Some(tier.into()),
                ..TenantSpec::default()
            },
            ..RolloutSpec::default()
        },
    );
    r.metadata.namespace = Some(ns.into());
    r
}

fn node(name: &str, labels: serde_json::Value) -> Node {
    from(json!({"metadata": {"name": name, "labels": labels}}))
}

fn pod() -> Pod {
    from(json!({
        "metadata": {"name": "agent-a", "namespace": "t1"},
        "spec": {
            "nodeName": "std",
            "containers": [{"name": "runtime", "image": "x",
                "volumeMounts": [{"name": "baseline", "mountPath": "/etc/exo/baseline", "readOnly": true}]}],
            "volumes": [{"name": "baseline", "configMap": {"name": "agent-baseline-0457a0bebb"}}]
        },
        "status": {"phase": "Running"}
    }))
}

fn baseline(name: &str, immutable: bool) -> ConfigMap {
    from(json!({
        "metadata": {"name": name, "namespace": "t1",
            "labels": {"autonomic.sh/baseline": "agent-baseline", "app.kubernetes.io/managed-by": "exo"}},
        "immutable": immutable,
        "data": {"persona.md": "hi"}
    }))
}

fn secret(ns: &str, name: &str, labels: serde_json::Value, key: &str, value: &str) -> Secret {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(value);
    from(json!({"metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {key: b64}}))
}

fn clean() -> Snapshot {
    let mut fleet = Fleet::new("production", FleetSpec::default());
    fleet.status = Some(FleetStatus {
        pinned_baselines: vec!["agent-baseline-0457a0bebb".into()],
        ..FleetStatus::default()
    });
    Snapshot {
        rollouts: vec![rollout("t1", "standard"), rollout("t2", "standard")],
        fleets: vec![fleet],
        pods: vec![pod()],
        nodes: vec![
            node("std", json!({LABEL_NODE_TIER: "standard"})),
            node("gpu", json!({LABEL_NODE_TIER: "gpu"})),
            node(
                "cp",
                json!({LABEL_CONTROL_PLANE: "", LABEL_NODE_TIER: "standard"}),
            ),
        ],
        policies: ["t1", "t2"]
            .iter()
            .flat_map(|ns| policies(ns, &TenantSpec::default(), &[], &Platform::default()))
            .collect(),
        secrets: vec![secret(
            "t2",
            "agent-token-b",
            json!({"app.kubernetes.io/managed-by": "exo", "app.kubernetes.io/component": "agent"}),
            "token",
            TOKEN_T2,
        )],
        configmaps: vec![baseline("agent-baseline-0457a0bebb", true)],
        claims: vec![],
        tools: vec![],
    }
}

fn spec_of(s: &mut Snapshot) -> &mut k8s_openapi::api::core::v1::PodSpec {
    s.pods[0].spec.as_mut().unwrap()
}

fn runtime(s: &mut Snapshot) -> &mut k8s_openapi::api::core::v1::Container {
    &mut spec_of(s).containers[0]
}

#[test]
fn a_clean_tenant_has_no_finding() {
    let snap = clean();
    assert_eq!(check(&snap, &BTreeSet::new(), &BTreeSet::new()), vec![]);
    assert_eq!(tenants(&snap, &BTreeSet::new()), 2);
}

#[test]
fn the_tenants_own_agentfs_and_app_claims_are_allowed() {
    let mut snap = clean();
    for (claim, component) in [("agentfs-data", "agentfs"), ("app-workspace-shop", "app")] {
        snap.claims.push(from::<PersistentVolumeClaim>(json!({"metadata": {
            "name": claim, "namespace": "t1",
            "labels": {"app.kubernetes.io/managed-by": "exo", "app.kubernetes.io/component": component}}})));
        spec_of(&mut snap).volumes.as_mut().unwrap().push(from(
            json!({"name": component, "persistentVolumeClaim": {"claimName": claim}}),
        ));
    }
    assert_eq!(check(&snap, &BTreeSet::new(), &BTreeSet::new()), vec![]);
}

#[test]
fn every_rule_fires_on_its_bad_input() {
    type Break = fn(&mut Snapshot);
    let cases: Vec<(&str, Break, Rule, &str)> = vec![
        (
            "control-plane node",
            |s| spec_of(s).node_name = Some("cp".into()),
            Rule::Placement,
            "control-plane node",
        ),
        (
            "wrong tier",
            |s| spec_of(s).node_name = Some("gpu".into()),
            Rule::Placement,
            "tier \"gpu\"",
        ),
        (
            "policy deleted",
            |s| {
                s.policies.retain(|p| {
                    p.metadata.name.as_deref() != Some("exo-default-deny")
                        || p.metadata.namespace.as_deref() != Some("t1")
                })
            },
            Rule::Network,
            "missing",
        ),
        (
            "policy widened",
            |s| {
                let p = s
                    .policies
                    .iter_mut()
                    .find(|p| p.metadata.name.as_deref() == Some("exo-egress"))
                    .unwrap();
                p.spec
                    .as_mut()
                    .unwrap()
                    .egress
                    .as_mut()
                    .unwrap()
                    .push(from(json!({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]})));
            },
            Rule::Network,
            "differs",
        ),
        (
            "another allowing policy",
            |s| {
                s.policies.push(from::<NetworkPolicy>(json!({
            "metadata": {"name": "allow-all", "namespace": "t1"},
            "spec": {"podSelector": {}, "egress": [{}]}})))
            },
            Rule::Network,
            "widens",
        ),
        (
            "provider env name",
            |s| runtime(s).env = Some(vec![from(json!({"name": "OPENAI_API_KEY", "value": "x"}))]),
            Rule::Credentials,
            "env OPENAI_API_KEY is a OpenAI credential name",
        ),
        (
            "provider env value",
            |s| runtime(s).env = Some(vec![from(json!({"name": "LLM", "value": OPENAI}))]),
            Rule::Credentials,
            "looks like a OpenAI key",
        ),
        (
            "envFrom secret",
            |s| {
                s.secrets.push(secret(
                    "t1",
                    "keys",
                    json!({}),
                    "AWS_SECRET_ACCESS_KEY",
                    "abc",
                ));
                runtime(s).env_from = Some(vec![from(json!({"secretRef": {"name": "keys"}}))]);
            },
            Rule::Credentials,
            "envFrom: Secret keys key AWS_SECRET_ACCESS_KEY",
        ),
        (
            "mounted secret",
            |s| {
                s.secrets.push(secret(
                    "t1",
                    "creds",
                    json!({}),
                    "config",
                    &format!("id={AWS}\n"),
                ));
                spec_of(s).volumes.as_mut().unwrap().push(from(
                    json!({"name": "c", "secret": {"secretName": "creds"}}),
                ));
            },
            Rule::Credentials,
            "volume c: Secret creds key config holds what looks like a AWS key",
        ),
        (
            "another tenant's token",
            |s| {
                s.secrets
                    .push(secret("t1", "borrowed", json!({}), "t", TOKEN_T2))
            },
            Rule::Credentials,
            "tenant t2's token",
        ),
        (
            "hostPath",
            |s| {
                spec_of(s)
                    .volumes
                    .as_mut()
                    .unwrap()
                    .push(from(json!({"name": "root", "hostPath": {"path": "/"}})))
            },
            Rule::Mounts,
            "hostPath volume (path /)",
        ),
        (
            "writable baseline",
            |s| runtime(s).volume_mounts.as_mut().unwrap()[0].read_only = None,
            Rule::Mounts,
            "baseline volume baseline at /etc/exo/baseline writable",
        ),
        (
            "another tenant's claim",
            |s| {
                s.claims.push(from::<PersistentVolumeClaim>(json!({"metadata": {"name": "data", "namespace": "t1", "labels": {"autonomic.sh/tenant": "t2"}}})));
                spec_of(s).volumes.as_mut().unwrap().push(from(
                    json!({"name": "d", "persistentVolumeClaim": {"claimName": "data"}}),
                ));
            },
            Rule::Mounts,
            "tenant t2's volume",
        ),
        (
            "a claim that is no AgentFS",
            |s| {
                s.claims.push(from::<PersistentVolumeClaim>(
                    json!({"metadata": {"name": "data", "namespace": "t1"}}),
                ));
                spec_of(s).volumes.as_mut().unwrap().push(from(
                    json!({"name": "d", "persistentVolumeClaim": {"claimName": "data"}}),
                ));
            },
            Rule::Mounts,
            "not one of the tenant's AgentFS or App volumes",
        ),
        (
            "mutable baseline",
            |s| s.configmaps[0].immutable = Some(false),
            Rule::Immutability,
            "not immutable",
        ),
        (
            "unpinned version",
            |s| {
                s.configmaps
                    .push(baseline("agent-baseline-ffffffffff", true));
                spec_of(s).volumes.as_mut().unwrap()[0]
                    .config_map
                    .as_mut()
                    .unwrap()
                    .name = "agent-baseline-ffffffffff".into();
            },
            Rule::Immutability,
            "no release pins",
        ),
    ];
    for (what, break_it, rule, want) in cases {
        let mut snap = clean();
        break_it(&mut snap);
        let found = check(&snap, &BTreeSet::new(), &BTreeSet::new());
        assert!(
            found
                .iter()
                .any(|f| f.rule == rule && f.message.contains(want)),
            "{what}: want {rule} {want:?}, got {found:#?}"
        );
        for f in &found {
            for secret in [OPENAI, AWS, TOKEN_T2] {
                assert!(
                    !f.message.contains(secret) && !f.object.contains(secret),
                    "{what}: a value is printed: {f:?}"
                );
            }
        }
        // Only that rule, and only in t1: one bad input, one kind of finding.
        assert!(
            found.iter().all(|f| f.rule == rule && f.namespace == "t1"),
            "{what}: {found:#?}"
        );
        // A rule filter and a namespace filter both hide it.
        let other: BTreeSet<Rule> = Rule::ALL.into_iter().filter(|r| *r != rule).collect();
        assert_eq!(check(&snap, &BTreeSet::new(), &other), vec![], "{what}");
        assert_eq!(
            check(&snap, &BTreeSet::from(["t2".to_owned()]), &BTreeSet::new()),
            vec![],
            "{what}"
        );
    }
}

#[test]
fn provider_keys_are_recognised_by_shape_and_name() {
    use credentials::{provider_of_name, provider_of_value};
    assert_eq!(
        provider_of_value(b"sk-ant-api03-abcdefghijklmnopqrstuvwxyz"),
        Some("Anthropic")
    );
    assert_eq!(provider_of_value(OPENAI.as_bytes()), Some("OpenAI"));
    assert_eq!(provider_of_value(AWS.as_bytes()), Some("AWS"));
    assert_eq!(
        provider_of_value(b"key=AIzaSyA-1234567890abcdefghijklmnopqrstu"),
        Some("Google")
    );
    assert_eq!(
        provider_of_value(b"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=b=="),
        Some("Azure (storage account key)")
    );
    for harmless in [
        &b"sk-short"[..],
        b"task-AKIA",
        b"AKIAlowercase0000000",
        b"hello world",
    ] {
        assert_eq!(
            provider_of_value(harmless),
            None,
            "{}",
            String::from_utf8_lossy(harmless)
        );
    }
    assert_eq!(provider_of_name("anthropic-api-key"), Some("Anthropic"));
    assert_eq!(provider_of_name("AWS_SECRET_ACCESS_KEY"), Some("AWS"));
    assert_eq!(provider_of_name("EXO_AGENT_TOKEN"), None);
}

#[test]
fn a_tenant_pod_outside_its_uid_range_is_a_finding() {
    let mut snap = clean();
    snap.rollouts[0].spec.settings.uid_range = Some(crate::crd::tenant::UidRange {
        start: 200_000,
        size: 10_000,
    });
    // No uid at all: the image's user, outside the range.
    let found = check(&snap, &BTreeSet::new(), &BTreeSet::new());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].rule, Rule::Placement);
    assert!(
        found[0]
            .message
            .contains("container runtime runs as the image's user, outside the tenant's uidRange 200000-209999"),
        "{}",
        found[0].message
    );
    // The pod's uid inside the range: clean.
    spec_of(&mut snap).security_context = Some(from(json!({"runAsUser": 200_000})));
    assert_eq!(check(&snap, &BTreeSet::new(), &BTreeSet::new()), vec![]);
    // A container overriding it with another tenant's uid: a finding.
    runtime(&mut snap).security_context = Some(from(json!({"runAsUser": 65532})));
    let found = check(&snap, &BTreeSet::new(), &BTreeSet::new());
    assert!(found[0].message.contains("runs as uid 65532"), "{found:?}");
}

#[test]
fn the_scope_keeps_what_the_rules_read_and_no_more() {
    // Another namespace (no Rollout): the same shapes, bad ones included.
    let mut snap = clean();
    let mut stray = pod();
    stray.metadata.namespace = Some("elsewhere".into());
    stray.spec.as_mut().unwrap().containers[0].env =
        Some(vec![from(json!({"name": "LLM", "value": OPENAI}))]);
    snap.pods.push(stray);
    let tool = |ns: &str| -> Tool {
        from(
            json!({"apiVersion": "autonomic.sh/v1alpha1", "kind": "Tool",
            "metadata": {"name": "t", "namespace": ns},
            "spec": {"container": {"image": "x"}, "enabled": false}}),
        )
    };
    snap.tools.extend([tool("t1"), tool("elsewhere")]);
    snap.secrets
        .push(secret("elsewhere", "copy", json!({}), "token", TOKEN_T2));
    snap.policies.push(from(json!({
        "metadata": {"name": "allow-all", "namespace": "elsewhere"},
        "spec": {"podSelector": {}, "egress": [{}]}})));
    snap.claims.push(from(
        json!({"metadata": {"name": "c", "namespace": "elsewhere"}}),
    ));
    // A baseline version elsewhere names a source the tenant pod mounts a
    // version of: that ConfigMap is read, so kept; a plain one is not.
    let mut source = baseline("other-source-0123456789", true);
    source.metadata.namespace = Some("elsewhere".into());
    source.metadata.labels = Some([(LABEL_BASELINE.to_owned(), "other-source".to_owned())].into());
    let mut plain = baseline("settings", false);
    plain.metadata.namespace = Some("elsewhere".into());
    plain.metadata.labels = None;
    snap.configmaps.extend([source, plain]);
    spec_of(&mut snap).volumes.as_mut().unwrap().push(from(
        json!({"name": "old", "configMap": {"name": "other-source-abcdef12"}}),
    ));

    let (every_ns, every_rule) = (BTreeSet::new(), BTreeSet::new());
    let full = check(&snap, &every_ns, &every_rule);
    assert!(
        full.iter()
            .any(|f| f.rule == Rule::Immutability && f.message.contains("other-source-abcdef12")),
        "{full:?}"
    );
    let mut narrowed = snap.clone();
    Scope::new(&snap.rollouts).narrow(&mut narrowed);
    assert_eq!(check(&narrowed, &every_ns, &every_rule), full);
    let namespaces = |v: Vec<Option<String>>| -> Vec<String> { v.into_iter().flatten().collect() };
    assert_eq!(
        namespaces(
            narrowed
                .pods
                .iter()
                .map(|p| p.metadata.namespace.clone())
                .collect()
        ),
        ["t1"]
    );
    assert_eq!(
        namespaces(
            narrowed
                .tools
                .iter()
                .map(|t| t.metadata.namespace.clone())
                .collect()
        ),
        ["t1"]
    );
    assert_eq!(narrowed.secrets.len(), 1);
    assert!(narrowed.claims.is_empty());
    assert_eq!(narrowed.policies.len(), snap.policies.len() - 1);
    let cms: Vec<String> = narrowed
        .configmaps
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(
        cms,
        ["agent-baseline-0457a0bebb", "other-source-0123456789"]
    );
    // A cluster with no tenant keeps none of them.
    let mut none = snap.clone();
    Scope::new(&[]).narrow(&mut none);
    assert!(none.pods.is_empty() && none.tools.is_empty() && none.secrets.is_empty());
}
