#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Tenant lifecycle sagas end to end: a real git server holds the fleet (a
//! real Gitea, for the reviews through pull requests), a real
//! `exo operator run` follows it, the real apiserver (with its quota
//! and namespace controllers) and kwok run the tenants, and a small
//! LiteLLM-compatible key server, started here, records every key call.
//!
//! - onboarding through `exo tenant onboard`: a pull request on Gitea,
//!   opened again harmlessly, merged there; every step Done in order; keys
//!   only in the tenant's Secret; offboarding through a pull request too
//!   revokes them before the namespace, a restore before the grace period
//!   brings the tenant back, `--confirm` lets the namespace go;
//! - no key actuator: the saga waits at the access step, and resumes when
//!   one is configured;
//! - the HTTP actuator with the operator killed -9 at every step boundary:
//!   no key minted twice; a scope change revokes the old key only after
//!   the pods on the new one are verified.
//!
//! One at a time: each runs an operator.

mod support;

use std::process::Command;
use std::time::Duration;

use exo::crd::tenant::{Tenant, TenantOperation, TenantPhase};
use exo::crd::{RolloutPhase, StepState};
use k8s_openapi::api::core::v1::{
    LimitRange, Namespace, PersistentVolume, PersistentVolumeClaim, Pod, ResourceQuota, Secret,
    ServiceAccount,
};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use support::fleet::{Fixture, Operator, example_files, key_actuator, out};
use support::keyserver::KeyServer;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn tenant(fx: &Fixture, name: &str) -> Option<Tenant> {
    Api::<Tenant>::all(fx.ns.client.clone())
        .get_opt(name)
        .await
        .unwrap()
}

/// Whether the Tenant's status is about its current spec (what every
/// reader checks before trusting it).
fn current(t: &Tenant) -> bool {
    t.status.as_ref().is_some_and(|s| {
        s.desired_hash.as_deref() == Some(exo::tenant::plan::settings_hash(&t.spec).as_str())
            && s.observed_generation == t.metadata.generation
    })
}

async fn wait_tenant(
    fx: &Fixture,
    name: &str,
    what: &str,
    op: &Operator,
    timeout: Duration,
    check: impl Fn(&Tenant) -> bool,
) -> Tenant {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(t) = tenant(fx, name).await
            && check(&t)
        {
            return t;
        }
        if tokio::time::Instant::now() > deadline {
            let now = tenant(fx, name).await;
            panic!(
                "timed out waiting for {name} {what}; now: {:#?}\noperator log:\n{}",
                now.and_then(|t| t.status),
                support::fleet::tail(&op.log())
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn phase_is(t: &Tenant, phase: TenantPhase) -> bool {
    current(t) && t.status.as_ref().and_then(|s| s.phase) == Some(phase)
}

fn step<'a>(t: &'a Tenant, name: &str) -> &'a exo::crd::SagaStep {
    t.status
        .as_ref()
        .unwrap()
        .steps
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no step {name} in {:#?}", t.status))
}

fn git(root: &std::path::Path, args: &[&str]) {
    let o = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", out(&o));
}

/// The entries of the tenant's `Inventory` (empty without one).
async fn inventory(client: &kube::Client, ns: &str) -> Vec<exo::crd::InventoryEntry> {
    Api::<exo::crd::Inventory>::namespaced(client.clone(), ns)
        .get_opt(exo::meta::ROLLOUT_NAME)
        .await
        .unwrap()
        .map(|i| i.spec.entries)
        .unwrap_or_default()
}

async fn secret(fx: &Fixture, ns: &str, name: &str) -> Option<Secret> {
    Api::<Secret>::namespaced(fx.ns.client.clone(), ns)
        .get_opt(name)
        .await
        .unwrap()
}

#[tokio::test]
async fn onboarded_from_the_cli_through_a_merge_offboarded_restored_and_confirmed() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::on_gitea("tn", example_files("tn")).await;
    let forge = fx.gitea.as_ref().unwrap();
    let forge_env = forge.gitea.cli_env();
    let kubeconfig = support::env().kubeconfig.clone();
    let op = Operator::start(&fx.ns.name, &kubeconfig, "tn-a");
    let client = fx.ns.client.clone();
    let name = format!("{}-hooli", fx.prefix);
    // What an earlier run that failed half-way left behind.
    let _ = Api::<Tenant>::all(client.clone())
        .delete(&name, &DeleteParams::background())
        .await;
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&name, &DeleteParams::background())
        .await;
    support::eventually(
        "leftovers of an earlier run gone",
        Duration::from_secs(60),
        || {
            let client = client.clone();
            let name = name.clone();
            async move {
                let t = Api::<Tenant>::all(client.clone())
                    .get_opt(&name)
                    .await
                    .ok()?;
                let n = Api::<Namespace>::all(client).get_opt(&name).await.ok()?;
                (t.is_none() && n.is_none()).then_some(())
            }
        },
    )
    .await;

    // Onboard: a pull request on the forge; nothing happens until it is
    // merged.
    let onboard = [
        "tenant",
        "onboard",
        &name,
        "--tier",
        "standard",
        "--models",
        "gpt-4o-mini",
        "--capabilities",
        "search",
    ];
    let o = fx.exo_env(&onboard, &forge_env);
    assert!(o.status.success(), "{}", out(&o));
    let branch = format!("exo/onboard-{name}");
    let pull = forge.open_pull_from(&branch);
    let number = pull["number"].as_u64().unwrap();
    assert!(
        out(&o).contains(&branch)
            && out(&o).contains(&format!(
                "pull request #{number} opened: {}",
                pull["html_url"].as_str().unwrap()
            )),
        "{}",
        out(&o)
    );
    assert_eq!(pull["base"]["ref"], "main");
    assert!(
        pull["title"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Onboard tenant {name}: tier standard")),
        "{pull:#}"
    );
    assert!(
        pull["body"]
            .as_str()
            .unwrap()
            .contains("Merging this is the approval"),
        "{pull:#}"
    );
    // Running it again opens nothing new: it finds the pull request.
    let o = fx.exo_env(&onboard, &forge_env);
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        out(&o).contains(&format!("pull request #{number} already open")),
        "{}",
        out(&o)
    );
    assert_eq!(forge.open_pulls().len(), 1);
    fx.request_sync().await;
    // The example's own tenants get theirs: the sync has run.
    wait_tenant(
        &fx,
        &format!("{}-acme", fx.prefix),
        "to exist",
        &op,
        Duration::from_secs(60),
        |_| true,
    )
    .await;
    assert!(
        tenant(&fx, &name).await.is_none(),
        "onboarded before the merge"
    );

    // The merge is the approval.
    forge.merge(number);
    fx.request_sync().await;
    let t = wait_tenant(&fx, &name, "Active", &op, Duration::from_secs(120), |t| {
        phase_is(t, TenantPhase::Active)
    })
    .await;
    let st = t.status.clone().unwrap();
    let names: Vec<&str> = st.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "identity-enrolled",
            "state-provisioned",
            "access-minted",
            "rollout-verified",
            "status-projected"
        ]
    );
    for w in st.steps.windows(2) {
        assert_eq!(w[0].state, StepState::Done);
        // Each step started only once the one before it was done.
        assert!(
            w[0].finished_at.as_ref().unwrap().0 <= w[1].started_at.as_ref().unwrap().0,
            "{w:#?}"
        );
        assert!(!w[0].owner.is_empty());
    }
    // Identity and state, read back.
    let ns = Api::<Namespace>::all(client.clone())
        .get(&name)
        .await
        .unwrap();
    let labels = ns.metadata.labels.clone().unwrap();
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "restricted");
    assert_eq!(
        ns.metadata.annotations.clone().unwrap()["autonomic.sh/uid-range"],
        "100000-109999"
    );
    let sa = Api::<ServiceAccount>::namespaced(client.clone(), &name)
        .get("exo-tenant")
        .await
        .unwrap();
    assert_eq!(sa.automount_service_account_token, Some(false));
    let quota = Api::<ResourceQuota>::namespaced(client.clone(), &name)
        .get("exo-tenant")
        .await
        .unwrap();
    assert_eq!(
        quota.status.unwrap().hard.unwrap()["requests.cpu"].0,
        "8",
        "the quota is in force"
    );
    Api::<LimitRange>::namespaced(client.clone(), &name)
        .get("exo-tenant")
        .await
        .unwrap();
    // The keys: exactly this tenant's, in its own Secret only.
    let access = secret(&fx, &name, "exo-tenant-access").await.unwrap();
    let data = access.data.clone().unwrap();
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "EXO_BROKER_TOKEN",
            "EXO_MODEL_KEY",
            "LANGFUSE_PUBLIC_KEY",
            "LANGFUSE_SECRET_KEY"
        ]
    );
    let model_key = data["EXO_MODEL_KEY"].0.clone();
    for other in fx.tenants() {
        if let Ok(list) = Api::<Secret>::namespaced(client.clone(), &other)
            .list(&ListParams::default())
            .await
        {
            for s in list.items {
                assert!(
                    s.data
                        .unwrap_or_default()
                        .values()
                        .all(|v| v.0 != model_key),
                    "tenant {other} holds {name}'s key"
                );
            }
        }
    }
    // A Pod Security violation is refused in the tenant's namespace.
    let bad: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "privileged"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true}}]}
    }))
    .unwrap();
    let err = Api::<Pod>::namespaced(client.clone(), &name)
        .create(&Default::default(), &bad)
        .await
        .expect_err("a privileged pod was admitted");
    assert!(err.to_string().contains("PodSecurity"), "{err}");

    // Its Agents: one pushed to its folder is verified, takes the keys as
    // env, and the audit's credential rule is clean.
    let assistant = fx.served_file(&format!("manifests/{}-acme/assistant.yaml", fx.prefix));
    let tenant_yaml = fx.served_file(&format!("manifests/{name}/tenant.yaml"));
    let with_agent = fx.push(
        &[(
            &format!("manifests/{name}/assistant.yaml"),
            Some(&assistant),
        )],
        "an agent for the new tenant",
    );
    fx.request_sync().await;
    let r = fx
        .wait_until(&name, "verified with its agent", &op, |r| {
            r.current_status().is_some_and(|s| {
                s.phase == Some(RolloutPhase::Verified)
                    && s.applied_commit.as_deref() == Some(with_agent.as_str())
            })
        })
        .await;
    assert_eq!(r.spec.tenant, name);
    assert!(
        inventory(&client, &name)
            .await
            .iter()
            .any(|e| e.name == "assistant"),
        "the agent is in the tenant's inventory"
    );
    let pods = Api::<Pod>::namespaced(client.clone(), &name)
        .list(&ListParams::default().labels("autonomic.sh/agent=assistant"))
        .await
        .unwrap();
    let pod = pods.items.first().expect("the assistant's pod");
    let runtime = pod
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.name == "runtime")
        .unwrap();
    assert_eq!(
        runtime.env_from.as_ref().unwrap()[0]
            .secret_ref
            .as_ref()
            .unwrap()
            .name,
        "exo-tenant-access"
    );
    // It runs inside the tenant's uid range.
    assert_eq!(
        pod.spec
            .as_ref()
            .unwrap()
            .security_context
            .as_ref()
            .unwrap()
            .run_as_user,
        Some(100_000)
    );
    let audit = fx.exo(&[
        "audit",
        "-n",
        &name,
        "--rule",
        "credentials",
        "--rule",
        "placement",
    ]);
    assert!(audit.status.success(), "{}", out(&audit));

    // Offboard: the folder removed, through a pull request too.
    git(&fx.root(), &["pull", "-q", "--ff-only", "origin", "main"]);
    let o = fx.exo_env(&["tenant", "offboard", &name], &forge_env);
    assert!(o.status.success(), "{}", out(&o));
    let pull = forge.open_pull_from(&format!("exo/offboard-{name}"));
    let number = pull["number"].as_u64().unwrap();
    assert!(
        out(&o).contains(&format!("pull request #{number} opened")),
        "{}",
        out(&o)
    );
    forge.merge(number);
    fx.request_sync().await;
    let t = wait_tenant(
        &fx,
        &name,
        "waiting out its grace period",
        &op,
        Duration::from_secs(90),
        |t| {
            current(t)
                && t.status.as_ref().unwrap().operation == Some(TenantOperation::Offboard)
                && t.status
                    .as_ref()
                    .unwrap()
                    .steps
                    .iter()
                    .any(|s| s.name == "namespace-deleted" && s.state == StepState::Running)
        },
    )
    .await;
    assert_eq!(step(&t, "keys-revoked").state, StepState::Done);
    assert_eq!(step(&t, "rollout-stopped").state, StepState::Done);
    assert!(
        step(&t, "namespace-deleted")
            .message
            .as_deref()
            .unwrap()
            .contains("offboardGracePeriod"),
        "{t:#?}"
    );
    assert!(
        secret(&fx, &name, "exo-tenant-access").await.is_none(),
        "keys not revoked"
    );
    assert!(fx.rollout(&name).await.is_none(), "the Rollout still runs");
    let uid = Api::<Namespace>::all(client.clone())
        .get(&name)
        .await
        .expect("the namespace waits for the grace period")
        .metadata
        .uid;

    // Restored before the grace period ends: back, in the same namespace,
    // with a workspace AgentFS this time (made by the saga from
    // `storage.agentFS`), which the next offboarding keeps.
    let with_workspace = format!(
        "{}  storage: {{agentFS: {{size: 1Gi, maxSize: 2Gi}}}}\n",
        String::from_utf8(tenant_yaml.clone()).unwrap()
    );
    fx.push(
        &[
            (
                &format!("manifests/{name}/tenant.yaml"),
                Some(with_workspace.as_bytes()),
            ),
            (
                &format!("manifests/{name}/assistant.yaml"),
                Some(&assistant),
            ),
        ],
        "restore the tenant",
    );
    fx.request_sync().await;
    wait_tenant(
        &fx,
        &name,
        "Active again",
        &op,
        Duration::from_secs(120),
        |t| {
            phase_is(t, TenantPhase::Active)
                && t.status.as_ref().unwrap().operation == Some(TenantOperation::Onboard)
        },
    )
    .await;
    // Its volume is bound before it is offboarded again.
    support::eventually("the workspace bound", Duration::from_secs(60), || {
        let client = client.clone();
        let name = name.clone();
        async move {
            let pvcs = Api::<PersistentVolumeClaim>::namespaced(client, &name)
                .list(&ListParams::default())
                .await
                .ok()?;
            pvcs.items
                .iter()
                .any(|c| {
                    c.spec
                        .as_ref()
                        .and_then(|s| s.volume_name.as_ref())
                        .is_some()
                })
                .then_some(())
        }
    })
    .await;
    let fs = Api::<exo::crd::AgentFS>::namespaced(client.clone(), &name)
        .get("workspace")
        .await
        .expect("the saga made the workspace");
    assert_eq!(fs.spec.size.0, "1Gi");
    assert_eq!(fs.spec.max_size.0, "2Gi");
    assert_eq!(fs.labels()["autonomic.sh/tenant"], name);
    assert!(
        !inventory(&client, &name)
            .await
            .iter()
            .any(|e| e.name == "workspace"),
        "the rollout claims the saga's AgentFS"
    );
    let again = Api::<Namespace>::all(client.clone())
        .get(&name)
        .await
        .unwrap();
    assert_eq!(again.metadata.uid, uid, "the namespace was recreated");
    assert!(secret(&fx, &name, "exo-tenant-access").await.is_some());

    // Offboarded again, and confirmed: the namespace goes, keys first.
    fx.push(
        &[
            (&format!("manifests/{name}/tenant.yaml"), None),
            (&format!("manifests/{name}/assistant.yaml"), None),
        ],
        "offboard the tenant",
    );
    fx.request_sync().await;
    wait_tenant(
        &fx,
        &name,
        "offboarding",
        &op,
        Duration::from_secs(90),
        |t| current(t) && t.spec.offboarding,
    )
    .await;
    let o = fx.exo(&["tenant", "offboard", &name, "--confirm"]);
    assert!(o.status.success(), "{}", out(&o));
    let t = wait_tenant(
        &fx,
        &name,
        "Offboarded",
        &op,
        Duration::from_secs(120),
        |t| phase_is(t, TenantPhase::Offboarded),
    )
    .await;
    let revoked = step(&t, "keys-revoked").finished_at.clone().unwrap();
    let deleting = step(&t, "namespace-deleted").started_at.clone().unwrap();
    assert!(
        revoked.0 <= deleting.0,
        "keys revoked after the namespace went"
    );
    assert!(
        Api::<Namespace>::all(client.clone())
            .get_opt(&name)
            .await
            .unwrap()
            .is_none()
    );
    // The data was retained (the default): the volume outlives the
    // namespace, and `exo fs list` shows it Retained under the tenant.
    assert_eq!(step(&t, "data-retained").state, StepState::Done);
    let o = fx.exo(&["fs", "list", "-n", &name, "-o", "json"]);
    assert!(o.status.success(), "{}", out(&o));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kept = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "workspace")
        .unwrap_or_else(|| panic!("no retained workspace in {listed}"))
        .clone();
    assert_eq!(kept["phase"], "Retained");
    let pv = kept["pvc"]
        .as_str()
        .unwrap()
        .trim_start_matches("pv/")
        .to_owned();
    let volume = Api::<PersistentVolume>::all(client.clone())
        .get(&pv)
        .await
        .unwrap();
    assert_eq!(
        volume
            .spec
            .unwrap()
            .persistent_volume_reclaim_policy
            .as_deref(),
        Some("Retain")
    );
    let _ = Api::<PersistentVolume>::all(client.clone())
        .delete(&pv, &DeleteParams::background())
        .await;
    // The CLI shows the saga, its owners and states, as JSON too.
    let o = fx.exo(&["tenant", "show", &name, "-o", "json"]);
    assert!(o.status.success(), "{}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["phase"], "Offboarded");
    assert_eq!(v["current"], true);
    assert!(
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["state"] == "Done" && !s["owner"].as_str().unwrap().is_empty())
    );
    let _ = Api::<Tenant>::all(client.clone())
        .delete(&name, &DeleteParams::background())
        .await;
}

#[tokio::test]
async fn without_a_key_actuator_the_saga_waits_and_resumes_once_one_is_configured() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::new("tw", example_files("tw")).await;
    fx.ns
        .api::<Secret>()
        .delete("exo-key-actuator", &DeleteParams::default())
        .await
        .unwrap();
    let kubeconfig = support::env().kubeconfig.clone();
    let op = Operator::start(&fx.ns.name, &kubeconfig, "tw-a");
    let acme = format!("{}-acme", fx.prefix);
    let t = wait_tenant(
        &fx,
        &acme,
        "waiting for an actuator",
        &op,
        Duration::from_secs(90),
        |t| phase_is(t, TenantPhase::Waiting),
    )
    .await;
    let st = t.status.clone().unwrap();
    assert_eq!(st.current_step.as_deref(), Some("access-minted"));
    let why = st.message.clone().unwrap();
    assert!(
        why.contains("exo-key-actuator") && why.contains("no key actuator"),
        "{why}"
    );
    assert_eq!(step(&t, "identity-enrolled").state, StepState::Done);
    assert_eq!(step(&t, "rollout-verified").state, StepState::Pending);
    // Never skipped: the Rollout is held back, no keys exist.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(fx.rollout(&acme).await.is_none(), "rolled out without keys");
    assert!(secret(&fx, &acme, "exo-tenant-access").await.is_none());
    // A tenant without scopes needs no key: it is not held up.
    wait_tenant(
        &fx,
        &format!("{}-initech", fx.prefix),
        "Active",
        &op,
        Duration::from_secs(120),
        |t| phase_is(t, TenantPhase::Active),
    )
    .await;

    key_actuator(&fx.ns, &[("type", "kubernetes")]).await;
    let t = wait_tenant(&fx, &acme, "Active", &op, Duration::from_secs(120), |t| {
        phase_is(t, TenantPhase::Active)
    })
    .await;
    assert!(
        t.status
            .unwrap()
            .steps
            .iter()
            .all(|s| s.state == StepState::Done)
    );
    assert!(secret(&fx, &acme, "exo-tenant-access").await.is_some());
}

#[tokio::test]
async fn the_http_actuator_mints_once_across_kills_and_revokes_an_old_key_only_after_verification()
{
    let _serial = SERIAL.lock().await;
    let fx = Fixture::new("th", example_files("th")).await;
    let server = KeyServer::start("actuator-token-7f3a").await;
    key_actuator(
        &fx.ns,
        &[
            ("type", "http"),
            ("url", &server.url),
            ("token", &server.token),
        ],
    )
    .await;
    let kubeconfig = support::env().kubeconfig.clone();
    let acme = format!("{}-acme", fx.prefix);
    let mut op = Operator::start(&fx.ns.name, &kubeconfig, "th-0");
    // kill -9 at every step boundary of acme's onboarding.
    let mut seen_done = 0;
    let mut kills = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    loop {
        let t = tenant(&fx, &acme).await;
        if t.as_ref().is_some_and(|t| phase_is(t, TenantPhase::Active)) {
            break;
        }
        let done = t
            .as_ref()
            .filter(|t| current(t))
            .and_then(|t| t.status.as_ref())
            .map_or(0, |s| {
                s.steps
                    .iter()
                    .filter(|s| s.state == StepState::Done)
                    .count()
            });
        if done > seen_done {
            seen_done = done;
            op.kill9();
            kills += 1;
            op = Operator::start(&fx.ns.name, &kubeconfig, &format!("th-{kills}"));
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "acme not Active after {kills} kills: {:#?}\n{}",
            t.and_then(|t| t.status),
            support::fleet::tail(&op.log())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(kills >= 3, "only {kills} kills");
    let generated: Vec<_> = server
        .calls()
        .into_iter()
        .filter(|c| c.what == "generate" && c.tenant.as_deref() == Some(acme.as_str()))
        .collect();
    assert_eq!(generated.len(), 1, "minted more than once: {generated:#?}");
    assert_eq!(generated[0].models, ["gpt-4o-mini"]);
    assert_eq!(server.refused(), 0);
    let old_key = generated[0].key.clone();
    let live = secret(&fx, &acme, "exo-tenant-access").await.unwrap();
    assert_eq!(live.data.unwrap()["EXO_MODEL_KEY"].0, old_key.as_bytes());
    // Nothing in the operator's log or the Tenant's status shows a key or
    // the actuator's token.
    let t = tenant(&fx, &acme).await.unwrap();
    let status = serde_json::to_string(&t.status).unwrap();
    for secret_text in [old_key.as_str(), server.token.as_str()] {
        assert!(!status.contains(secret_text));
        assert!(!op.log().contains(secret_text));
    }

    // A scope change: a new key, the pods rolled onto it, and the old key
    // revoked only once they are verified.
    let path = format!("manifests/{acme}/tenant.yaml");
    let text = String::from_utf8(fx.served_file(&path)).unwrap();
    let wider = text.replace(
        "models: [gpt-4o-mini]",
        "models: [gpt-4o-mini, claude-sonnet]",
    );
    assert_ne!(text, wider);
    fx.push(
        &[(&path, Some(wider.as_bytes()))],
        "acme may call claude-sonnet",
    );
    fx.request_sync().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let t = tenant(&fx, &acme).await.unwrap();
        let widened = t.spec.settings.models.len() == 2;
        if widened && phase_is(&t, TenantPhase::Active) {
            break;
        }
        let verified_on_new = fx.rollout(&acme).await.is_some_and(|r| {
            r.spec.settings.models.len() == 2
                && r.current_status()
                    .is_some_and(|s| s.phase == Some(RolloutPhase::Verified))
        });
        if !verified_on_new {
            assert!(
                server.live_keys().contains(&old_key),
                "the old key was revoked before the pods on the new one were verified"
            );
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the change did not finish: {:#?}\n{}",
            t.status,
            support::fleet::tail(&op.log())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let t = tenant(&fx, &acme).await.unwrap();
    let names: Vec<String> = t
        .status
        .clone()
        .unwrap()
        .steps
        .iter()
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "access-minted",
            "rollout-verified",
            "old-keys-revoked",
            "status-projected"
        ]
    );
    assert!(
        !server.live_keys().contains(&old_key),
        "the old key was not revoked"
    );
    let new_key = String::from_utf8(
        secret(&fx, &acme, "exo-tenant-access")
            .await
            .unwrap()
            .data
            .unwrap()["EXO_MODEL_KEY"]
            .0
            .clone(),
    )
    .unwrap();
    assert_ne!(new_key, old_key);
    assert!(server.live_keys().contains(&new_key));
    let minted: Vec<_> = server
        .calls()
        .into_iter()
        .filter(|c| c.what == "generate" && c.key == new_key)
        .collect();
    assert_eq!(minted.len(), 1);
    assert_eq!(minted[0].models, ["claude-sonnet", "gpt-4o-mini"]);
    assert!(
        secret(&fx, &acme, "exo-tenant-access-retiring")
            .await
            .is_none()
    );
    // The agents' pods carry the new scopes.
    let pods = Api::<Pod>::namespaced(fx.ns.client.clone(), &acme)
        .list(&ListParams::default().labels("autonomic.sh/agent"))
        .await
        .unwrap();
    let scopes = exo::tenant::access::Scopes::of(&t.spec.settings).hash();
    assert!(!pods.items.is_empty());
    for p in pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        assert_eq!(
            p.metadata.annotations.as_ref().unwrap()["autonomic.sh/access-scopes"],
            scopes
        );
    }
}
