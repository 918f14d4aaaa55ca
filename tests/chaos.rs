#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Crash anywhere: `kill -9` of the real `exo operator run` at random,
//! seeded moments of three-wave rollouts of more than 50 agents (the
//! example fleet with ten more agents per tenant, on the real apiserver,
//! kwok and git daemon), with a new operator started after each. The
//! rollouts must converge every time, and while they run:
//! - no saga step is recorded done twice (its finish time never changes);
//! - no pod is rolled twice for the same spec (one pod uid per agent and
//!   spec hash);
//! - no ConfigMap version is deleted while a pod that is not terminating
//!   mounts it.
//!
//! And a leader frozen (SIGSTOP) past its lease mid-rollout: the standby
//! takes over and finishes, and the old leader, resumed, lets no write out
//! after the moment it was frozen (its write fence, `cluster::leader`).
//!
//! And the git server down during a sync: a relay in front of the real git
//! daemon drops every connection while a new commit waits; the Fleet says
//! why, nothing changes, and the commit is applied once it is back.
//!
//! The tests run one at a time: each runs operators that watch the whole
//! cluster.
//!
//! `EXO_CHAOS_POINTS` sets the number of kills (5 here; `scripts/chaos`
//! runs 20) and `EXO_CHAOS_SEED` replays a run: the seed is printed first.
//! When a rollout ends before the kills are spent, the next one starts
//! (back to the other release), so every kill lands in a rollout.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use exo::crd::{Agent, Fleet as FleetCr, Rollout, RolloutPhase, StepState};

use exo::meta::{ANNOTATION_SPEC_HASH, LABEL_AGENT};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use support::balancer::Balancer;
use support::fleet::{Fixture, Operator, example_files, tail};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const OLD: &str = "2026.11.0";
const NEW: &str = "2026.11.1";
/// Agents added to each of the example's five tenants.
const EXTRA_AGENTS: usize = 10;

/// A small seeded generator (splitmix64), so a run can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.next() % (to - from))
    }
}

/// What the watches saw; every entry is a broken promise.
#[derive(Default)]
struct Record {
    /// (tenant, release, commit, step) -> every finish time seen for it
    /// done. Each rollout makes new commits, so a later rollout back to a
    /// release is another key.
    finished: BTreeMap<(String, String, String, String), BTreeSet<String>>,
    /// (namespace, agent, spec hash, rollout) -> pod uids.
    pods: BTreeMap<(String, String, String, usize), BTreeSet<String>>,
    /// Which rollout runs (0: the first deployment).
    round: usize,
    violations: Vec<String>,
    configmaps_deleted: usize,
}

fn ours(ns: Option<&str>, prefix: &str) -> bool {
    ns.is_some_and(|n| n.starts_with(&format!("{prefix}-")))
}

/// Watches Rollouts, Pods and ConfigMaps of the tenants into `record`.
fn record(client: kube::Client, prefix: String, record: Arc<Mutex<Record>>) {
    let (c, p, r) = (client.clone(), prefix.clone(), record.clone());
    tokio::spawn(async move {
        let mut s = watcher::watcher(Api::<Rollout>::all(c), Default::default()).boxed();
        while let Some(Ok(ev)) = s.next().await {
            let (Event::Apply(ro) | Event::InitApply(ro)) = ev else {
                continue;
            };
            let ns = ro.metadata.namespace.clone();
            if !ours(ns.as_deref(), &p) {
                continue;
            }
            let Some(st) = ro.current_status() else {
                continue;
            };
            let release = st.release.clone().unwrap_or_default();
            let commit = st.applied_commit.clone().unwrap_or_default();
            let mut rec = r.lock().unwrap();
            for s in st.steps.iter().filter(|s| s.state == StepState::Done) {
                let at = s.finished_at.as_ref().map(|t| t.0.to_string());
                let key = (
                    ns.clone().unwrap(),
                    release.clone(),
                    commit.clone(),
                    s.name.clone(),
                );
                rec.finished
                    .entry(key)
                    .or_default()
                    .insert(at.unwrap_or_default());
            }
        }
    });
    let (c, p, r) = (client.clone(), prefix.clone(), record.clone());
    tokio::spawn(async move {
        let mut s = watcher::watcher(Api::<Pod>::all(c), Default::default()).boxed();
        while let Some(Ok(ev)) = s.next().await {
            let (Event::Apply(pod) | Event::InitApply(pod)) = ev else {
                continue;
            };
            let m = &pod.metadata;
            let (Some(agent), Some(hash)) = (
                m.labels.as_ref().and_then(|l| l.get(LABEL_AGENT)),
                m.annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION_SPEC_HASH)),
            ) else {
                continue;
            };
            if !ours(m.namespace.as_deref(), &p) {
                continue;
            }
            let mut rec = r.lock().unwrap();
            let key = (
                m.namespace.clone().unwrap(),
                agent.clone(),
                hash.clone(),
                rec.round,
            );
            rec.pods
                .entry(key)
                .or_default()
                .insert(m.uid.clone().unwrap_or_default());
        }
    });
    tokio::spawn(async move {
        let cms = Api::<ConfigMap>::all(client.clone());
        let mut s = watcher::watcher(cms, Default::default()).boxed();
        while let Some(Ok(ev)) = s.next().await {
            let Event::Delete(cm) = ev else { continue };
            let (Some(ns), Some(name)) = (cm.metadata.namespace, cm.metadata.name) else {
                continue;
            };
            if !ours(Some(&ns), &prefix) {
                continue;
            }
            // Read after the delete: a pod that still mounts it was there
            // when it went (no new pod can name a version being collected).
            let pods = Api::<Pod>::namespaced(client.clone(), &ns)
                .list(&Default::default())
                .await
                .unwrap();
            let mounting: Vec<String> = pods
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    p.spec
                        .iter()
                        .flat_map(|s| s.volumes.iter().flatten())
                        .any(|v| v.config_map.as_ref().is_some_and(|c| c.name == name))
                })
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            let mut rec = record.lock().unwrap();
            rec.configmaps_deleted += 1;
            if !mounting.is_empty() {
                rec.violations.push(format!(
                    "ConfigMap {ns}/{name} deleted while {mounting:?} mount it"
                ));
            }
        }
    });
}

fn finished(cli: &mut Child, release: &str, op: &Operator) -> bool {
    let Some(status) = cli.try_wait().unwrap() else {
        return false;
    };
    let mut out = String::new();
    for s in [
        cli.stdout
            .take()
            .map(|mut s| std::io::read_to_string(&mut s)),
        cli.stderr
            .take()
            .map(|mut s| std::io::read_to_string(&mut s)),
    ]
    .into_iter()
    .flatten()
    {
        out.push_str(&s.unwrap_or_default());
    }
    assert!(
        status.success() && out.contains(&format!("== wave fleet: verified on {release}")),
        "exo release rollout {release}: {status}\n{out}\noperator log tail:\n{}",
        tail(&op.log())
    );
    true
}

#[tokio::test]
async fn the_operator_killed_at_random_moments_converges_every_time() {
    let _serial = SERIAL.lock().await;
    let seed: u64 = std::env::var("EXO_CHAOS_SEED")
        .ok()
        .map(|s| s.parse().expect("EXO_CHAOS_SEED: a number"))
        .unwrap_or_else(|| exo::upstream::backoff::random_u64() >> 16);
    let points: usize = std::env::var("EXO_CHAOS_POINTS")
        .ok()
        .map(|s| s.parse().expect("EXO_CHAOS_POINTS: a number"))
        .unwrap_or(5);
    println!("chaos seed {seed} ({points} kills); replay with EXO_CHAOS_SEED={seed}");
    let mut rng = Rng(seed);

    // Unique tenants per run: namespaces of a finished run may still be
    // terminating.
    let prefix = format!("ch{}", &support::unique_suffix()[..5]);
    let mut files = example_files(&prefix);
    let template =
        String::from_utf8(files[&format!("manifests/{prefix}-acme/assistant.yaml")].clone())
            .unwrap();
    for t in ["platform", "acme", "globex", "initech", "umbrella"] {
        for i in 0..EXTRA_AGENTS {
            files.insert(
                format!("manifests/{prefix}-{t}/chaos-{i:02}.yaml"),
                template
                    .replace("name: assistant", &format!("name: chaos-{i:02}"))
                    .into_bytes(),
            );
        }
    }
    let agents = files
        .iter()
        .filter(|(p, c)| {
            p.starts_with("manifests/")
                && c.starts_with(b"apiVersion: autonomic.sh/v1alpha1\nkind: Agent")
        })
        .count();
    assert!(agents >= 50, "{agents} agents");
    let fx = Fixture::new(&prefix, files).await;
    let kubeconfig = &support::env().kubeconfig;
    let mut op = Operator::start(&fx.ns.name, kubeconfig, "op-0");
    fx.wait_all(OLD, &op).await;

    let rec = Arc::new(Mutex::new(Record::default()));
    record(fx.ns.client.clone(), prefix.clone(), rec.clone());
    let started = Instant::now();
    let mut target = NEW;
    rec.lock().unwrap().round = 1;
    let mut cli = fx.rollout_cli(target);
    let mut rounds = 1;
    for kill in 1..=points {
        tokio::time::sleep(rng.millis(500, 6000)).await;
        if finished(&mut cli, target, &op) {
            target = if target == NEW { OLD } else { NEW };
            rounds += 1;
            rec.lock().unwrap().round = rounds;
            cli = fx.rollout_cli(target);
            tokio::time::sleep(rng.millis(500, 3000)).await;
        }
        op.kill9();
        let down = rng.millis(0, 2000);
        println!(
            "kill {kill} at {:.1} s (rollout to {target}); down {down:?}",
            started.elapsed().as_secs_f64()
        );
        tokio::time::sleep(down).await;
        op = Operator::start(&fx.ns.name, kubeconfig, &format!("op-{kill}"));
    }
    // Converges: the last rollout ends verified, and so does every tenant.
    let deadline = Instant::now() + Duration::from_secs(600);
    while !finished(&mut cli, target, &op) {
        assert!(
            Instant::now() < deadline,
            "no convergence in 10 minutes\n{}",
            tail(&op.log())
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    fx.wait_all(target, &op).await;
    for t in fx.tenants() {
        let ro = fx.wait_phase(&t, target, RolloutPhase::Verified, &op).await;
        let st = ro.status.unwrap();
        assert!(
            st.steps.iter().all(|s| s.state == StepState::Done),
            "{t}: {st:#?}"
        );
    }
    println!(
        "{points} kills over {rounds} rollouts of {agents} agents: converged {:.1} s after the first",
        started.elapsed().as_secs_f64()
    );

    let rec = rec.lock().unwrap();
    let mut broken = rec.violations.clone();
    for ((ns, release, commit, step), times) in &rec.finished {
        if times.len() > 1 {
            broken.push(format!(
                "{ns}: step {step} of {release} at {commit} done {} times: {times:?}",
                times.len()
            ));
        }
    }
    for ((ns, agent, hash, round), uids) in &rec.pods {
        if uids.len() > 1 {
            broken.push(format!(
                "{ns}/{agent}: {} pods for spec {hash} in rollout {round}",
                uids.len()
            ));
        }
    }
    assert!(broken.is_empty(), "seed {seed}:\n{}", broken.join("\n"));
    // The watches saw the work: steps, new pods, collected versions.
    assert!(
        rec.finished.len() >= 5 * 3,
        "{} steps seen",
        rec.finished.len()
    );
    assert!(rec.pods.len() >= agents, "{} pods seen", rec.pods.len());
    assert!(rec.configmaps_deleted > 0, "no old version was collected");
}

/// The holder of the operators' Lease in `ns`.
async fn holder(fx: &Fixture) -> Option<String> {
    let leases: Api<Lease> = fx.ns.api();
    leases
        .get_opt("exo-rollout-test")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
}

#[tokio::test]
async fn a_leader_frozen_past_its_lease_writes_nothing_once_resumed() {
    let _serial = SERIAL.lock().await;
    let seed = exo::upstream::backoff::random_u64() >> 16;
    println!("freeze seed {seed}");
    let mut rng = Rng(seed);
    let prefix = format!("fz{}", &support::unique_suffix()[..5]);
    let fx = Fixture::new(&prefix, example_files(&prefix)).await;
    let kubeconfig = &support::env().kubeconfig;
    let a = Operator::start(&fx.ns.name, kubeconfig, "a");
    fx.wait_all(OLD, &a).await;
    let b = Operator::start(&fx.ns.name, kubeconfig, "b");
    assert_eq!(holder(&fx).await.as_deref(), Some("a"));
    // b's caches fill while a leads.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut cli = fx.rollout_cli(NEW);
    tokio::time::sleep(rng.millis(500, 4000)).await;
    a.signal("-STOP");
    // Taken after the signal: a can have let nothing out since.
    let frozen_at = exo::wire::now_ms();
    support::eventually("b to take the lease", Duration::from_secs(30), || async {
        (holder(&fx).await.as_deref() == Some("b")).then_some(())
    })
    .await;
    // Well past a's lease (3 s): b is writing by now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resumed = k8s_openapi::jiff::Timestamp::now();
    a.signal("-CONT");
    let deadline = Instant::now() + Duration::from_secs(300);
    while !finished(&mut cli, NEW, &b) {
        assert!(
            Instant::now() < deadline,
            "no convergence\n{}",
            tail(&b.log())
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    fx.wait_all(NEW, &b).await;
    let last = a
        .metric("exo_operator_last_write_sent_ms")
        .expect("a's metrics");
    let fenced = a.metric("exo_operator_writes_fenced_total").unwrap_or(0);
    println!(
        "a froze at {frozen_at}, its last write went out at {last} ({} ms before); {fenced} writes refused after it resumed",
        frozen_at.saturating_sub(last)
    );
    assert!(last > 0, "a wrote while it led");
    assert!(
        last <= frozen_at,
        "a let a write out {} ms after it was frozen\n{}",
        last - frozen_at,
        tail(&a.log())
    );
    assert!(
        a.log().contains("lost the lease") || a.log().contains("stepping down"),
        "a noticed: {}",
        tail(&a.log())
    );
    // And as the apiserver saw it: its audit log names each replica (the
    // User-Agent). a wrote while it led, b after it took over, and nothing
    // of a's but its Lease rounds arrived once a was resumed.
    let agent = |id: &str| format!("exo-operator/{} ({id})", env!("CARGO_PKG_VERSION"));
    // b can finish the rollout within a Lease round of a's resumption, so
    // wait until the audit log holds a write of b (its Lease rounds, every
    // 600 ms) received 2 s after a resumed: a had that long to misbehave,
    // and the log is read past it.
    let watched_until = resumed + Duration::from_secs(2);
    support::eventually(
        "a write of b 2 s after a resumed in the audit log",
        Duration::from_secs(30),
        || async {
            support::audit_writes(&agent("b"))
                .iter()
                .any(|w| w.received >= watched_until)
                .then_some(())
        },
    )
    .await;
    let of_a = support::audit_writes(&agent("a"));
    let of_b = support::audit_writes(&agent("b"));
    // Its Lease rounds go on (that is how it learns it lost): not a write
    // of the operator's work.
    let late: Vec<_> = of_a
        .iter()
        .filter(|w| w.received >= resumed && !w.uri.contains("/leases/"))
        .collect();
    println!(
        "audit log: {} writes of a, the last received {:?}; {} of b; resumed at {resumed}",
        of_a.len(),
        of_a.last().map(|w| w.received),
        of_b.len()
    );
    assert!(!of_a.is_empty(), "no write of a in the audit log");
    assert!(
        of_b.iter().any(|w| w.received >= resumed),
        "no write of b after a resumed"
    );
    assert!(
        late.is_empty(),
        "the apiserver took {} writes from a after it resumed: {late:#?}",
        late.len()
    );
}

#[tokio::test]
async fn the_git_server_down_during_a_sync_keeps_the_last_good_state_and_recovers() {
    let _serial = SERIAL.lock().await;
    let prefix = format!("gd{}", &support::unique_suffix()[..5]);
    let fx = Fixture::new(&prefix, example_files(&prefix)).await;
    // The Fleet reads the real git daemon through a relay that can go down.
    let rest = fx.repo.url.strip_prefix("git://").expect("a git:// URL");
    let (daemon, path) = rest.split_at(rest.find('/').unwrap());
    let relay = Balancer::start(vec![daemon.to_owned()]);
    let relayed = format!("git://{}{path}", relay.base.trim_start_matches("http://"));
    fx.patch_fleet(serde_json::json!({ "url": relayed })).await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "g");
    fx.wait_all(OLD, &op).await;
    let fleets: Api<FleetCr> = fx.ns.api();
    let applied = fleets
        .get("fleet")
        .await
        .unwrap()
        .status
        .unwrap()
        .applied_commit;
    assert!(applied.is_some());

    relay.set_down(true);
    let tenant = format!("{prefix}-acme");
    let manifest = String::from_utf8(fx.served_file(&format!("manifests/{tenant}/assistant.yaml")))
        .unwrap()
        .replace("name: assistant", "name: after-outage");
    let path = format!("manifests/{tenant}/after-outage.yaml");
    let commit = fx.push(&[(&path, Some(manifest.as_bytes()))], "one more agent");
    fx.request_sync().await;
    // The fetch fails, the Fleet says so, and nothing moves.
    let failed = support::eventually(
        "the failed fetch on the Fleet",
        Duration::from_secs(30),
        || {
            let fleets = fleets.clone();
            async move {
                let st = fleets.get("fleet").await.ok()?.status?;
                let c = st.conditions.into_iter().find(|c| c.type_ == "Ready")?;
                (c.status == "False" && c.reason == "FetchFailed")
                    .then_some((c.message, st.applied_commit))
            }
        },
    )
    .await;
    println!("while down: {}", failed.0);
    assert!(!failed.0.is_empty());
    assert_eq!(failed.1, applied, "the last good commit stays applied");
    let agents: Api<Agent> = Api::namespaced(fx.ns.client.clone(), &tenant);
    assert!(agents.get_opt("after-outage").await.unwrap().is_none());
    let ro = fx.rollout(&tenant).await.unwrap();
    let st = ro.current_status().expect("a current status");
    assert_eq!(st.phase, Some(RolloutPhase::Verified), "{st:#?}");

    // Back: the waiting commit is applied and verified.
    relay.set_down(false);
    fx.request_sync().await;
    fx.wait_until(&tenant, "the new commit verified", &op, |r| {
        r.current_status().is_some_and(|s| {
            s.phase == Some(RolloutPhase::Verified) && s.applied_commit.as_deref() == Some(&commit)
        })
    })
    .await;
    assert!(agents.get_opt("after-outage").await.unwrap().is_some());
}
