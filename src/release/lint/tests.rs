//! The lint rules, each against its bad input (split from `lint.rs`).

use super::*;
use crate::release::Release;

fn example() -> Fleet {
    crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn rules_after(mutate: impl FnOnce(&mut Fleet)) -> Vec<&'static str> {
    let mut fleet = example();
    mutate(&mut fleet);
    lint_fleet(&fleet)
        .into_iter()
        .map(|f| f.rule.as_str())
        .collect()
}

fn latest(f: &mut Fleet) -> &mut Release {
    &mut f
        .releases
        .iter_mut()
        .find(|r| r.value.metadata.name == "2026.11.1")
        .unwrap()
        .value
}

fn check(builtin: &str) -> crate::analysis::Check {
    crate::analysis::Check {
        name: "c".into(),
        interval: "1m".into(),
        count: None,
        failure_limit: crate::analysis::Int(0),
        inconclusive_limit: crate::analysis::Int(0),
        builtin: Some(builtin.into()),
        max: Some(0.0),
        severity: None,
        prometheus: None,
    }
}

fn prometheus_check(query: &str, success: Option<&str>) -> crate::analysis::Check {
    crate::analysis::Check {
        builtin: None,
        max: None,
        prometheus: Some(crate::analysis::PrometheusCheck {
            query: query.into(),
            success_condition: success.map(Into::into),
            failure_condition: None,
        }),
        ..check("")
    }
}

#[test]
fn example_fleet_is_clean() {
    let findings = lint_fleet(&example());
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn every_rule_fires_on_its_bad_input() {
    type Case = (&'static str, Box<dyn FnOnce(&mut Fleet)>);
    let cases: Vec<Case> = vec![
        (
            "mutable-tag",
            Box::new(|f| latest(f).spec.components[0].image = "reg/exo/broker:1.5.0".into()),
        ),
        (
            "malformed-digest",
            Box::new(|f| latest(f).spec.components[0].image = "reg/exo/broker@sha256:abc".into()),
        ),
        (
            "tag-in-image",
            Box::new(|f| {
                latest(f).spec.components[0].image = format!("reg/b:1@sha256:{}", "a".repeat(64))
            }),
        ),
        (
            "configmap-hash-mismatch",
            Box::new(|f| {
                let cm = &mut latest(f).spec.config_maps[0];
                cm.sha256 = "b".repeat(64);
                cm.version = format!("{}-{}", cm.name, "b".repeat(10));
            }),
        ),
        (
            "configmap-version",
            Box::new(|f| {
                latest(f).spec.config_maps[0].version = "agent-baseline-0000000000".into()
            }),
        ),
        (
            "configmap-source-missing",
            Box::new(|f| latest(f).spec.config_maps[0].name = "ghost".into()),
        ),
        (
            "unknown-dependency",
            Box::new(|f| latest(f).spec.components[3].depends_on.push("ghost".into())),
        ),
        (
            "dependency-cycle",
            Box::new(|f| {
                latest(f).spec.components[0]
                    .depends_on
                    .push("router".into())
            }),
        ),
        (
            "dependency-order",
            Box::new(|f| latest(f).spec.components.swap(0, 3)),
        ),
        (
            "layer-inversion",
            Box::new(|f| {
                latest(f).spec.components[1]
                    .depends_on
                    .push("agent-runtime".into())
            }),
        ),
        ("wave-order", Box::new(|f| latest(f).spec.waves.swap(0, 1))),
        (
            "empty-wave",
            Box::new(|f| latest(f).spec.waves[1].tenants.clear()),
        ),
        (
            "tenant-in-two-waves",
            Box::new(|f| latest(f).spec.waves[1].tenants.push("platform".into())),
        ),
        (
            "unknown-tenant",
            Box::new(|f| latest(f).spec.waves[0].tenants.push("nobody".into())),
        ),
        (
            "uncovered-tenant",
            Box::new(|f| latest(f).spec.waves[2].remaining = false),
        ),
        (
            "bad-soak-time",
            Box::new(|f| latest(f).spec.waves[1].gates.soak_time = Some("ten minutes".into())),
        ),
        (
            "unknown-release",
            Box::new(|f| latest(f).spec.compatible_with = Some("1999.1.0".into())),
        ),
        (
            "compatibility",
            Box::new(|f| {
                latest(f).spec.components.remove(1);
                latest(f).spec.components[2]
                    .depends_on
                    .retain(|d| d != "router");
            }),
        ),
        (
            "duplicate-component",
            Box::new(|f| {
                let c = latest(f).spec.components[3].clone();
                latest(f).spec.components.push(c);
            }),
        ),
        (
            "name-mismatch",
            Box::new(|f| latest(f).metadata.name = "other".into()),
        ),
        (
            "unknown-release",
            Box::new(|f| f.waves.as_mut().unwrap().value.spec.fleet.release = "nope".into()),
        ),
        (
            "mutable-tag",
            Box::new(|f| {
                let t = std::sync::Arc::make_mut(f.tenants.get_mut("acme").unwrap());
                t.agents[0].value.spec.runtime.image = "reg/exo/agent-runtime:latest".into();
            }),
        ),
        (
            "unknown-tier",
            Box::new(|f| {
                std::sync::Arc::make_mut(f.tenants.get_mut("acme").unwrap())
                    .settings
                    .tier = Some("gold".into())
            }),
        ),
        (
            "tenant-wave",
            Box::new(|f| {
                std::sync::Arc::make_mut(f.tenants.get_mut("acme").unwrap())
                    .settings
                    .wave = Some("beta".into())
            }),
        ),
        (
            "tenant-wave",
            // The example's releases put acme in low-risk.
            Box::new(|f| {
                std::sync::Arc::make_mut(f.tenants.get_mut("acme").unwrap())
                    .settings
                    .wave = Some("canary".into())
            }),
        ),
        (
            "tenant-agentfs",
            Box::new(|f| {
                let t = std::sync::Arc::make_mut(f.tenants.get_mut("globex").unwrap());
                let name = t.filesystems[0].value.metadata.name.clone();
                t.settings.storage = Some(crate::crd::tenant::StorageSpec {
                    agent_fs: Some(crate::crd::tenant::DefaultAgentFs {
                        name,
                        size: "1Gi".into(),
                        max_size: None,
                    }),
                    ..Default::default()
                });
            }),
        ),
        (
            "uid-range-overlap",
            Box::new(|f| {
                let r = crate::crd::tenant::UidRange {
                    start: 200_000,
                    size: 10_000,
                };
                std::sync::Arc::make_mut(f.tenants.get_mut("acme").unwrap())
                    .settings
                    .uid_range = Some(r);
                let r = crate::crd::tenant::UidRange {
                    start: 209_999,
                    size: 1,
                };
                std::sync::Arc::make_mut(f.tenants.get_mut("globex").unwrap())
                    .settings
                    .uid_range = Some(r);
            }),
        ),
        (
            "unknown-builtin",
            Box::new(|f| latest(f).spec.waves[0].analysis = vec![check("nope")]),
        ),
        (
            "bad-query",
            Box::new(|f| {
                latest(f).spec.waves[0].analysis = vec![prometheus_check("up{", Some("result < 1"))]
            }),
        ),
        (
            "bad-condition",
            Box::new(|f| {
                latest(f).spec.waves[0].analysis = vec![prometheus_check("up", Some("result ~ 1"))]
            }),
        ),
        (
            "bad-analysis",
            Box::new(|f| {
                let mut c = check("crashloops");
                c.failure_limit = crate::analysis::Int(-1);
                latest(f).spec.waves[0].analysis = vec![c];
            }),
        ),
        (
            "bad-analysis",
            Box::new(|f| latest(f).spec.waves[2].auto_promote = true),
        ),
    ];
    for (rule, mutate) in cases {
        let fired = rules_after(mutate);
        assert!(fired.contains(&rule), "{rule} did not fire; got {fired:?}");
    }
}

#[test]
fn findings_name_file_field_and_rule() {
    let mut fleet = example();
    latest(&mut fleet).spec.components[0].image = "reg/exo/broker:1.5.0".into();
    let line = lint_fleet(&fleet)[0].to_string();
    assert_eq!(
        line,
        "releases/2026.11.1.yaml: spec.components[0].image: image \"reg/exo/broker:1.5.0\" is not pinned by digest; run `exo release pin` [mutable-tag]"
    );
}

#[test]
fn one_cycle_is_reported_once() {
    let mut fleet = example();
    latest(&mut fleet).spec.components[0]
        .depends_on
        .push("router".into());
    let cycles: Vec<String> = lint_fleet(&fleet)
        .into_iter()
        .filter(|f| f.rule == Rule::DependencyCycle)
        .map(|f| f.message)
        .collect();
    assert_eq!(
        cycles,
        vec!["dependency cycle: broker -> router -> broker".to_owned()]
    );
}

/// The ids are what scripts match on: one per rule, in kebab case, and the
/// JSON output carries the same string.
#[test]
fn rule_ids_are_unique_and_serialize_as_themselves() {
    let ids: BTreeSet<&str> = Rule::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(ids.len(), Rule::ALL.len());
    for r in Rule::ALL {
        let id = r.as_str();
        assert!(
            id.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
            "{id}"
        );
        assert_eq!(r.to_string(), id);
        assert_eq!(serde_json::to_value(r).unwrap(), serde_json::json!(id));
    }
}

#[test]
fn tenant_findings_name_tenant_yaml_and_the_field() {
    let mut fleet = example();
    std::sync::Arc::make_mut(fleet.tenants.get_mut("acme").unwrap())
        .settings
        .wave = Some("low-risk".into());
    assert_eq!(
        lint_fleet(&fleet),
        vec![],
        "the wave the releases agree with"
    );
    std::sync::Arc::make_mut(fleet.tenants.get_mut("acme").unwrap())
        .settings
        .tier = Some("gold".into());
    fleet.tiers = None;
    let lines: Vec<String> = lint_fleet(&fleet).iter().map(|f| f.to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "manifests/acme/tenant.yaml: spec.tier: tier \"gold\": the repository has no manifests/tiers.yaml declaring tiers [unknown-tier]"
        ]
    );
}

/// The refusals the issue names, read from a release file through the
/// strict YAML reader: each finding names the file and the field.
#[test]
fn analysis_findings_name_file_and_field() {
    let mut fleet = example();
    let path = fleet.root.join("releases/2026.11.1.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let canary = "      gates: {requireVerification: true, maxFailures: 0}\n";
    assert!(text.contains(canary));
    let text = text.replacen(
        canary,
        &format!(
            "{canary}      autoPromote: true\n      analysis:\n{}",
            [
                "        - {name: crashes, interval: 1m, builtin: crashLoops, max: 0}",
                r#"        - {name: errors, interval: 30s, prometheus: {query: 'sum(rate(x{namespace=~"{{tenants}}"}[5m])', successCondition: result < 1}}"#,
                "        - {name: restarts, interval: 1m, failureLimit: -1, builtin: restarts, max: 2}",
                "        - {name: ok, interval: 1m, builtin: alerts, severity: critical, max: 0}",
                "",
            ]
            .join("\n")
        ),
        1,
    );
    let release: Release = crate::yaml::from_str(&path, &text).unwrap();
    assert!(release.spec.waves[0].auto_promote);
    latest(&mut fleet).spec = release.spec;
    let lines: Vec<String> = lint_fleet(&fleet).iter().map(|f| f.to_string()).collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(
        lines[0],
        "releases/2026.11.1.yaml: spec.waves[0].analysis[0].builtin: \"crashLoops\" is not a built-in check; use one of crashloops, restarts, silentAgents, contentDrift, alerts, circuitsOpen, fallbackRate [unknown-builtin]"
    );
    assert!(
        lines[1].starts_with(
            "releases/2026.11.1.yaml: spec.waves[0].analysis[1].prometheus.query: not PromQL: "
        ) && lines[1].ends_with(" [bad-query]"),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[2],
        "releases/2026.11.1.yaml: spec.waves[0].analysis[2].failureLimit: failureLimit is -1; it must be 0 or more [bad-analysis]"
    );
}

fn with_clusters(f: &mut Fleet) {
    use crate::fleet::cluster::ClusterDoc;
    let c = |name: &str, env: &str| Sourced {
        path: f.root.join(format!("clusters/{name}.yaml")),
        value: ClusterDoc::new(name, &[("env", env)]),
    };
    f.clusters = Some(vec![c("staging", "staging"), c("prod-eu", "prod")]);
}

fn place(f: &mut Fleet, tenant: &str, clusters: &[&str], selector: Option<(&str, &str)>) {
    use crate::crd::tenant::placement::{ClusterSelector, Placement};
    std::sync::Arc::make_mut(f.tenants.get_mut(tenant).unwrap()).placement = Some(Placement {
        clusters: clusters.iter().map(|c| (*c).to_owned()).collect(),
        selector: selector.map(|(k, v)| ClusterSelector {
            match_labels: BTreeMap::from([(k.into(), v.into())]),
        }),
        ..Placement::default()
    });
}

fn place_all(f: &mut Fleet) {
    let names: Vec<String> = f.tenants.keys().cloned().collect();
    for t in names {
        place(f, &t, &[], Some(("env", "prod")));
    }
}

#[test]
fn a_placed_fleet_is_clean_and_each_placement_rule_names_tenant_yaml() {
    let mut fleet = example();
    with_clusters(&mut fleet);
    place_all(&mut fleet);
    place(&mut fleet, "acme", &["staging"], Some(("env", "prod")));
    assert_eq!(lint_fleet(&fleet), vec![]);
    place(&mut fleet, "acme", &["staging", "us-east"], None);
    place(&mut fleet, "globex", &[], Some(("env", "dev")));
    std::sync::Arc::make_mut(fleet.tenants.get_mut("initech").unwrap()).placement = None;
    let lines: Vec<String> = lint_fleet(&fleet).iter().map(|f| f.to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "manifests/acme/tenant.yaml: spec.placement.clusters[1]: cluster \"us-east\" is not declared in clusters/ (declared: staging, prod-eu) [unknown-cluster]",
            "manifests/globex/tenant.yaml: spec.placement.selector: selector env=dev matches no cluster (declared: staging, prod-eu) [selector-matches-nothing]",
            "manifests/initech/tenant.yaml: spec.placement: tenant \"initech\" runs on no cluster: the fleet spans clusters, so say where with spec.placement.clusters or a selector (declared: staging, prod-eu) [tenant-unplaced]",
        ]
    );
}

#[test]
fn placement_without_clusters_and_capacity_are_refused() {
    let mut fleet = example();
    place(&mut fleet, "acme", &["prod-eu"], None);
    let lines: Vec<String> = lint_fleet(&fleet).iter().map(|f| f.to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "manifests/acme/tenant.yaml: spec.placement.clusters[0]: cluster \"prod-eu\" is not declared in clusters/ (this repository declares none (no clusters/*.yaml)) [unknown-cluster]"
        ]
    );
    let mut fleet = example();
    with_clusters(&mut fleet);
    place_all(&mut fleet);
    fleet.clusters.as_mut().unwrap()[1].value.spec.capacity =
        Some(crate::fleet::cluster::Capacity {
            max_tenants: Some(2),
            notes: None,
        });
    let found = lint_fleet(&fleet);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].rule, Rule::ClusterCapacity);
    assert_eq!(found[0].file, std::path::Path::new("clusters/prod-eu.yaml"));
    assert!(
        found[0]
            .message
            .contains("tenants are placed on cluster \"prod-eu\", more than its maxTenants 2")
    );
}
