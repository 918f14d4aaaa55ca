use super::*;
use crate::crd::{Agent, AgentSpec, BaselineRef, Tool};

const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

fn owner() -> Owner {
    let mut a = Agent::new("writer", AgentSpec::default());
    a.metadata.namespace = Some("team".into());
    a.metadata.uid = Some("uid-1".into());
    Owner::of(&a).unwrap()
}

fn spec() -> AgentSpec {
    AgentSpec {
        runtime: Container {
            image: format!("reg/runtime@{DIGEST}"),
            ..Container::default()
        },
        agentlet: Container {
            image: format!("reg/agentlet@{DIGEST}"),
            ..Container::default()
        },
        baseline: Some(BaselineRef {
            config_map: "persona-abc123".into(),
            mount_path: None,
        }),
        ..AgentSpec::default()
    }
}

fn mounts(pod: &Pod, container: &str) -> Vec<(String, Option<bool>)> {
    pod.spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.name == container)
        .unwrap()
        .volume_mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.mount_path, m.read_only))
        .collect()
}

#[test]
fn agent_pod_has_both_containers_baseline_read_only_and_owner() {
    let pod = agent_pod(&owner(), &spec(), &[]).unwrap();
    let ps = pod.spec.as_ref().unwrap();
    let names: Vec<_> = ps.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["agentlet", "runtime"]);
    for c in ["agentlet", "runtime"] {
        assert!(
            mounts(&pod, c).contains(&("/etc/exo/baseline".into(), Some(true))),
            "{c}"
        );
    }
    assert_eq!(
        pod.metadata.owner_references.as_ref().unwrap()[0].uid,
        "uid-1"
    );
    assert_eq!(
        pod.metadata.labels.as_ref().unwrap()[LABEL_MANAGED_BY],
        "exo"
    );
    assert_eq!(pod.metadata.labels.as_ref().unwrap()[LABEL_AGENT], "writer");
    assert!(hash_of(&pod.metadata).is_some());
    // The token reaches the agentlet only, by reference.
    let env_names = |c: &str| -> Vec<String> {
        ps.containers
            .iter()
            .find(|x| x.name == c)
            .unwrap()
            .env
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.name)
            .collect()
    };
    assert!(env_names("agentlet").contains(&"EXO_AGENT_TOKEN".to_owned()));
    assert!(!env_names("runtime").contains(&"EXO_AGENT_TOKEN".to_owned()));
}

#[test]
fn every_pod_is_restricted() {
    let tool = Tool::new(
        "t",
        ToolSpec {
            container: spec().runtime,
            enabled: true,
            port: Some(9000),
            node_tier: Some("gpu".into()),
            run_as_user: Some(200_000),
        },
    );
    let mut tool = tool;
    tool.metadata.namespace = Some("team".into());
    tool.metadata.uid = Some("uid-2".into());
    let pods = [
        agent_pod(&owner(), &spec(), &[]).unwrap(),
        tool_pod(&Owner::of(&tool).unwrap(), &tool.spec).unwrap(),
    ];
    for pod in pods {
        let ps = pod.spec.unwrap();
        let psc = ps.security_context.unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        // The tool asks for its tenant's first uid; the agent has none.
        assert!(psc.run_as_user == Some(200_000) || psc.run_as_user == Some(RUN_AS));
        assert_eq!(psc.seccomp_profile.unwrap().type_, "RuntimeDefault");
        for c in ps.containers {
            let sc = c.security_context.unwrap();
            assert_eq!(sc.allow_privilege_escalation, Some(false));
            assert_eq!(sc.capabilities.unwrap().drop, Some(vec!["ALL".to_owned()]));
        }
    }
}

#[test]
fn pods_name_their_default_container_for_exec_and_attach() {
    let annotated = |pod: &Pod| {
        let name = pod.metadata.annotations.as_ref().unwrap()[ANNOTATION_DEFAULT_CONTAINER].clone();
        let containers = &pod.spec.as_ref().unwrap().containers;
        assert!(containers.iter().any(|c| c.name == name), "{name}");
        name
    };
    assert_eq!(
        annotated(&agent_pod(&owner(), &spec(), &[]).unwrap()),
        "runtime"
    );
    // A restart request adds its annotation beside it.
    let restarted =
        agent_pod_restarted(&owner(), &spec(), &[], Some("2026-11-29T10:00:00Z")).unwrap();
    assert_eq!(annotated(&restarted), "runtime");
    let mut tool = Tool::new(
        "t",
        ToolSpec {
            container: spec().runtime,
            enabled: true,
            port: None,
            node_tier: None,
            run_as_user: None,
        },
    );
    tool.metadata.namespace = Some("team".into());
    tool.metadata.uid = Some("uid-2".into());
    let pod = tool_pod(&Owner::of(&tool).unwrap(), &tool.spec).unwrap();
    assert_eq!(annotated(&pod), "tool");
}

#[test]
fn pod_names_carry_the_template_hash_and_stay_dns_labels() {
    let pod = agent_pod(&owner(), &spec(), &[]).unwrap();
    let hash = hash_of(&pod.metadata).unwrap().to_owned();
    let name = pod.metadata.name.unwrap();
    assert_eq!(name, format!("agent-writer-{}", &hash[..8]));
    // A restart request is a new template: a new hash, so a new name.
    let restarted =
        agent_pod_restarted(&owner(), &spec(), &[], Some("2026-11-29T10:00:00Z")).unwrap();
    let name2 = restarted.metadata.name.clone().unwrap();
    assert_ne!(name, name2);
    assert_eq!(
        restarted.metadata.annotations.unwrap()[ANNOTATION_RESTART_REQUESTED],
        "2026-11-29T10:00:00Z"
    );
    for owner_name in ["a.b", &"x".repeat(80), &"y".repeat(50), &"z-".repeat(30)] {
        let got = pod_name("agent", owner_name, "0123456789abcdef");
        assert!(is_dns1035_label(&got), "{owner_name} -> {got}");
        assert!(got.ends_with("-01234567"), "{got}");
    }
    // Long names that share a prefix still differ.
    assert_ne!(
        pod_name("agent", &format!("{}a", "x".repeat(70)), "01234567"),
        pod_name("agent", &format!("{}b", "x".repeat(70)), "01234567")
    );
}

#[test]
fn template_hash_changes_with_digest_baseline_and_mounts_only() {
    let base = hash_of(&agent_pod(&owner(), &spec(), &[]).unwrap().metadata)
        .unwrap()
        .to_owned();
    let same = hash_of(&agent_pod(&owner(), &spec(), &[]).unwrap().metadata)
        .unwrap()
        .to_owned();
    assert_eq!(base, same);
    let mut s = spec();
    s.runtime.image = format!("reg/runtime@sha256:{}", "1".repeat(64));
    let mut b = spec();
    b.baseline = Some(BaselineRef {
        config_map: "persona-def456".into(),
        mount_path: None,
    });
    let m = [FilesystemMount {
        name: "ws".into(),
        mount_path: Some("/mnt/fs/ws".into()),
        read_only: false,
    }];
    let changed = [
        agent_pod(&owner(), &s, &[]).unwrap(),
        agent_pod(&owner(), &b, &[]).unwrap(),
        agent_pod(&owner(), &spec(), &m).unwrap(),
    ];
    for pod in changed {
        assert_ne!(hash_of(&pod.metadata).unwrap(), base);
    }
}

#[test]
fn filesystem_mounts_use_the_pvc_and_honour_read_only() {
    let m = [
        FilesystemMount {
            name: "shared-workspace".into(),
            mount_path: Some("/workspace/shared".into()),
            read_only: false,
        },
        FilesystemMount {
            name: "reference-data".into(),
            mount_path: Some("/mnt/fs/reference-data".into()),
            read_only: true,
        },
    ];
    let pod = agent_pod(&owner(), &spec(), &m).unwrap();
    let got = mounts(&pod, "runtime");
    assert!(got.contains(&("/workspace/shared".into(), None)));
    assert!(got.contains(&("/mnt/fs/reference-data".into(), Some(true))));
    let claims: Vec<_> = pod
        .spec
        .unwrap()
        .volumes
        .unwrap()
        .into_iter()
        .filter_map(|v| v.persistent_volume_claim)
        .map(|c| c.claim_name)
        .collect();
    assert_eq!(
        claims,
        ["agentfs-shared-workspace", "agentfs-reference-data"]
    );
}

#[test]
fn child_names_are_dns_labels() {
    let cases = [
        ("writer", "agent-writer"),
        ("a.b", "agent-a-b-"),
        (&"x".repeat(80) as &str, "agent-xxx"),
    ];
    for (name, prefix) in cases {
        let got = child_name("agent", name);
        assert!(got.starts_with(prefix), "{name} -> {got}");
        assert!(is_dns1035_label(&got), "{got}");
    }
    assert_ne!(child_name("agent", "a.b"), child_name("agent", "a-b"));
    assert!(label_value(&"y".repeat(100)).len() <= 63);
}

#[test]
fn secret_holds_the_token_under_its_key() {
    let s = agent_secret(&owner(), "t0k3n");
    assert_eq!(s.data.unwrap()[TOKEN_KEY].0, b"t0k3n");
    assert_eq!(s.metadata.name.as_deref(), Some("agent-token-writer"));
}

#[test]
fn agent_service_is_headless() {
    let svc = agent_service(&owner()).unwrap();
    assert_eq!(svc.spec.unwrap().cluster_ip.as_deref(), Some("None"));
}

#[test]
fn a_tenant_with_access_gets_its_keys_as_env_and_new_scopes_roll_the_pod() {
    let plain = agent_pod(&owner(), &spec(), &[]).unwrap();
    let with = |scopes: &str| {
        let s = AgentSpec {
            access_scopes: Some(scopes.to_owned()),
            ..spec()
        };
        agent_pod(&owner(), &s, &[]).unwrap()
    };
    let a = with("aaaa");
    let runtime = a
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.name == "runtime")
        .unwrap();
    let from = runtime.env_from.as_ref().unwrap();
    assert_eq!(
        from[0].secret_ref.as_ref().unwrap().name,
        crate::meta::TENANT_ACCESS_SECRET
    );
    // The agentlet does not get the keys.
    assert!(
        a.spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .filter(|c| c.name != "runtime")
            .all(|c| c.env_from.is_none())
    );
    assert!(
        plain
            .spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .all(|c| c.env_from.is_none())
    );
    // Other scopes, another pod.
    assert_ne!(a.metadata.name, with("bbbb").metadata.name);
    assert_ne!(a.metadata.name, plain.metadata.name);
}
