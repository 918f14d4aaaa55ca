#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Waves that judge themselves, end to end: a real `exo operator run`
//! follows a fleet on the git daemon (or on Gitea), kwok runs the pods,
//! and release 2026.11.1 gives its canary wave an `analysis`. Once the
//! canary is verified on it, the operator creates an `AnalysisRun` and
//! measures it:
//! - the canary's pods crash-loop (kwok restarts them): the `crashloops`
//!   check fails, the operator rolls the canary back by a commit whose
//!   message carries the result, and a signed webhook tells
//!   `analysisFailed`;
//! - a healthy canary passes, `autoPromote` commits low-risk's promotion
//!   (on Gitea, with the Fleet's credentials) and the canary's commit
//!   status goes from pending to success; the operator is killed (-9)
//!   mid-analysis and the next one resumes the run, counting no slot twice;
//! - a model deployment behind the canary's metrics Service goes into
//!   outage: `circuitsOpen` fails the wave; the circuit closes again when
//!   it recovers;
//! - Prometheus is down: the measurement is inconclusive, the run is held
//!   `Paused`, never passed, and the gate refuses to promote low-risk.
//!
//! Tests here run one at a time (each runs an operator that watches the
//! whole cluster), with tenant namespaces prefixed per test and run.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use exo::analysis::Verdict;
use exo::crd::{ActionKind, AnalysisPhase, AnalysisRun, RolloutPhase};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use support::eventually;
use support::exporter::Exporter;
use support::fleet::{Fixture, Operator, example_files, out, tail};
use support::notify::{Receiver, provider, rule, secret, signed_with};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const OLD: &str = "2026.11.0";
const NEW: &str = "2026.11.1";
const WAIT: Duration = Duration::from_secs(120);
/// The kwok stage that restarts an annotated pod's containers every second.
const CRASHLOOP: &str = "exo.test/crashloop";

/// The example fleet, with release NEW's canary wave given `analysis` (a
/// YAML flow sequence) and, with `auto`, `autoPromote`.
fn with_analysis(prefix: &str, analysis: &str, auto: bool) -> BTreeMap<String, Vec<u8>> {
    let mut files = example_files(prefix);
    let path = format!("releases/{NEW}.yaml");
    let text = String::from_utf8(files[&path].clone()).unwrap();
    let anchor = format!(
        "      tenants: [{prefix}-platform]\n      gates: {{requireVerification: true, maxFailures: 0}}\n"
    );
    assert!(text.contains(&anchor), "{text}");
    let mut extra = format!("{anchor}      analysis: {analysis}\n");
    if auto {
        extra.push_str("      autoPromote: true\n");
    }
    files.insert(path, text.replace(&anchor, &extra).into_bytes());
    files
}

/// The Fleet namespace's run of `wave` on `release`, if there is one.
async fn run_of(fx: &Fixture, wave: &str, release: &str) -> Option<AnalysisRun> {
    fx.ns
        .api::<AnalysisRun>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|r| r.spec.wave == wave && r.spec.release == release)
}

/// Waits until the run of `wave` on `release` is in `phase` by a status
/// for its current spec, and returns it.
async fn until_phase(
    fx: &Fixture,
    op: &Operator,
    wave: &str,
    release: &str,
    phase: AnalysisPhase,
) -> AnalysisRun {
    let found = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(r) = run_of(fx, wave, release).await
                && r.current_status().is_some_and(|s| s.phase == phase)
            {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    match found {
        Ok(r) => r,
        Err(_) => panic!(
            "the {wave} run on {release} is not {phase} in time: {:#?}\n{}",
            run_of(fx, wave, release).await.and_then(|r| r.status),
            tail(&op.log())
        ),
    }
}

/// The newest commit message on the served `main`.
fn head_message(fx: &Fixture) -> String {
    if let Some(g) = &fx.gitea {
        g.fetch_main(&fx.repo.path);
    }
    let repo = git2::Repository::open_bare(&fx.repo.path).unwrap();
    let head = repo
        .find_reference("refs/heads/main")
        .unwrap()
        .peel_to_commit()
        .unwrap();
    head.message().unwrap_or("").to_owned()
}

/// Every measurement of `run` is of a different (check, slot).
fn slots_once(run: &AnalysisRun) {
    let ms = &run.status.as_ref().unwrap().measurements;
    let mut seen = std::collections::BTreeSet::new();
    for m in ms {
        assert!(
            seen.insert((m.check.clone(), m.slot)),
            "slot {} of {} measured twice: {ms:#?}",
            m.slot,
            m.check
        );
    }
}

fn promote_canary(fx: &Fixture, op: &Operator) {
    let o = fx.exo(&["release", "promote", NEW, "--wave", "canary"]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", out(&o), tail(&op.log()));
}

#[tokio::test]
async fn a_crash_looping_canary_fails_its_analysis_rolls_back_by_a_commit_and_notifies() {
    let _serial = SERIAL.lock().await;
    // Unique per run: a run before this one in the same environment may
    // still be deleting its tenants' namespaces.
    let prefix = &format!("aw-crash-{}", support::unique_suffix());
    let fx = Fixture::new(
        prefix,
        with_analysis(
            prefix,
            "[{name: crashloops, interval: 2s, count: 20, builtin: crashloops, max: 0}]",
            true,
        ),
    )
    .await;
    let ns = &fx.ns;
    let key = format!("exo-canary-{}", support::unique_suffix());
    let hook = Receiver::start(&[]).await;
    secret(ns, "hook-key", "hmacKey", &key).await;
    provider(
        ns,
        "hook",
        serde_json::json!({"type": "webhook", "address": hook.url, "secretRef": "hook-key"}),
    )
    .await;
    rule(
        ns,
        "analysis",
        serde_json::json!({"providerRef": "hook", "events": ["analysisFailed", "rolledBack"]}),
    )
    .await;
    let op = Operator::start_with(
        &ns.name,
        &support::env().kubeconfig,
        "a",
        &[
            "--monitor-interval",
            "1s",
            "--monitor-crashloop-restarts",
            "2",
            "--monitor-crashloop-window",
            "30s",
        ],
    );
    fx.wait_all(OLD, &op).await;
    // OLD gives the canary no analysis: no run.
    assert!(run_of(&fx, "canary", OLD).await.is_none());
    let platform = format!("{prefix}-platform");
    promote_canary(&fx, &op);
    fx.wait_phase(&platform, NEW, RolloutPhase::Verified, &op)
        .await;
    let run = eventually("the canary's analysis run", WAIT, || async {
        run_of(&fx, "canary", NEW).await
    })
    .await;
    assert_eq!(
        run.spec
            .tenants
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        [platform.as_str()]
    );
    assert!(run.spec.auto_promote);

    // The canary's pods crash-loop.
    let pods: Api<Pod> = Api::namespaced(ns.client.clone(), &platform);
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let name = p.metadata.name.unwrap();
        pods.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {CRASHLOOP: "true"}}})),
        )
        .await
        .unwrap();
    }
    let failed = until_phase(&fx, &op, "canary", NEW, AnalysisPhase::Failed).await;
    let status = failed.status.clone().unwrap();
    assert_eq!(status.check.as_deref(), Some("crashloops"));
    assert!(
        status
            .measurements
            .iter()
            .any(|m| m.verdict == Verdict::Fail && m.detail.contains("crash loop")),
        "{status:#?}"
    );
    slots_once(&failed);
    // Rolled back by a commit: the canary points at OLD again, NEW heads
    // its history, and low-risk was never promoted.
    let rolled = eventually("the rollback recorded on the run", WAIT, || async {
        let r = run_of(&fx, "canary", NEW).await?;
        r.current_status()?.action.clone()
    })
    .await;
    assert_eq!(
        (rolled.kind, rolled.wave.as_str(), rolled.release.as_str()),
        (ActionKind::RolledBack, "canary", OLD)
    );
    let commit = rolled.commit.clone().expect("a commit was pushed");
    let waves = fx.served_waves();
    assert_eq!(waves.spec.canary.release, OLD);
    assert_eq!(
        waves.spec.canary.history.first().map(String::as_str),
        Some(NEW)
    );
    assert_eq!(waves.spec.low_risk.release, OLD);
    let message = head_message(&fx);
    assert!(
        message.starts_with(&format!("roll back the canary wave to {OLD}")),
        "{message}"
    );
    assert!(
        message.contains("analysis failed: check crashloops"),
        "{message}"
    );
    let repo = git2::Repository::open_bare(&fx.repo.path).unwrap();
    let head = repo.refname_to_id("refs/heads/main").unwrap().to_string();
    assert_eq!(head, commit);

    // Told, signed: analysisFailed for the canary, then rolledBack.
    let told = eventually("an analysisFailed webhook", WAIT, || async {
        hook.events("analysisFailed").pop()
    })
    .await;
    assert!(signed_with(&told, key.as_bytes()), "{:?}", told.headers);
    let body = told.json();
    assert_eq!(body["tenants"], serde_json::json!([platform]));
    assert_eq!(
        (body["wave"].as_str(), body["release"].as_str()),
        (Some("canary"), Some(NEW))
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("check crashloops"),
        "{body}"
    );
    let back = eventually("a rolledBack webhook", WAIT, || async {
        hook.events("rolledBack").pop()
    })
    .await;
    assert!(signed_with(&back, key.as_bytes()));
    // The canary runs OLD again, its new pods without the annotation.
    fx.wait_phase(&platform, OLD, RolloutPhase::Verified, &op)
        .await;
    // The run stays Failed with its action; the CLI says so.
    let o = fx.exo(&["release", "status"]);
    let text = out(&o);
    assert!(
        text.contains(&format!("of wave canary on {NEW}: Failed")),
        "{text}"
    );
    assert!(
        text.contains(&format!("rolled canary back to {OLD}")),
        "{text}"
    );
    assert!(
        !op.log().contains(&key),
        "the HMAC key is in the operator's log"
    );
}

#[tokio::test]
async fn a_healthy_canary_passes_auto_promotes_and_resumes_after_kill_9() {
    let _serial = SERIAL.lock().await;
    // Unique per run: a run before this one in the same environment may
    // still be deleting its tenants' namespaces.
    let prefix = &format!("aw-pass-{}", support::unique_suffix());
    let fx = Fixture::on_gitea(
        prefix,
        with_analysis(
            prefix,
            "[{name: crashloops, interval: 2s, count: 8, builtin: crashloops, max: 0}, {name: drift, interval: 3s, count: 5, builtin: contentDrift, max: 0}]",
            true,
        ),
    )
    .await;
    let ns = &fx.ns;
    let repo = fx.gitea.as_ref().unwrap();
    let gitea = &repo.gitea;
    let token = std::fs::read_to_string(&gitea.token_file)
        .unwrap()
        .trim()
        .to_owned();
    // The operator pushes its promotion with the Fleet's credentials; the
    // commit statuses go to Gitea with the same token.
    secret(ns, "forge", "token", &token).await;
    ns.api::<k8s_openapi::api::core::v1::Secret>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "git"},
                "stringData": {"username": gitea.user, "password": token}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    fx.patch_fleet(serde_json::json!({"secretRef": "git"}))
        .await;
    provider(
        ns,
        "gitea",
        serde_json::json!({"type": "gitea", "address": gitea.url, "secretRef": "forge",
            "repository": format!("{}/{}", repo.owner, repo.name)}),
    )
    .await;
    let platform = format!("{prefix}-platform");
    rule(
        ns,
        "statuses",
        serde_json::json!({"providerRef": "gitea", "tenants": [platform]}),
    )
    .await;
    let flags = ["--monitor-interval", "1s"];
    let mut op = Operator::start_with(&ns.name, &support::env().kubeconfig, "a", &flags);
    fx.wait_all(OLD, &op).await;
    promote_canary(&fx, &op);
    let ro = fx
        .wait_phase(&platform, NEW, RolloutPhase::Verified, &op)
        .await;
    let commit = ro.spec.commit.clone();

    // Kill -9 once the run has measured twice; another operator resumes it.
    let measured = eventually("two measurements", WAIT, || async {
        let r = run_of(&fx, "canary", NEW).await?;
        (r.current_status()?.measurements.len() >= 2).then_some(r)
    })
    .await;
    let uid = measured.metadata.uid.clone();
    op.kill9();
    let op = Operator::start_with(&ns.name, &support::env().kubeconfig, "b", &flags);
    let passed = until_phase(&fx, &op, "canary", NEW, AnalysisPhase::Passed).await;
    // The same run, resumed: every count made, no slot twice.
    assert_eq!(
        passed.metadata.uid, uid,
        "the run was replaced, not resumed"
    );
    slots_once(&passed);
    let ms = &passed.status.as_ref().unwrap().measurements;
    let of = |c: &str| ms.iter().filter(|m| m.check == c).count();
    assert_eq!((of("crashloops"), of("drift")), (8, 5), "{ms:#?}");
    assert!(ms.iter().all(|m| m.verdict == Verdict::Pass), "{ms:#?}");
    // The measurements before the kill are kept as they were.
    for m in &measured.status.as_ref().unwrap().measurements {
        assert!(ms.contains(m), "{m:?} was lost");
    }

    // autoPromote: low-risk promoted by the operator's commit.
    let action = eventually("the promotion recorded on the run", WAIT, || async {
        run_of(&fx, "canary", NEW)
            .await?
            .current_status()?
            .action
            .clone()
    })
    .await;
    assert_eq!(
        (action.kind, action.wave.as_str(), action.release.as_str()),
        (ActionKind::Promoted, "low-risk", NEW)
    );
    assert!(action.commit.is_some());
    let waves = fx.served_waves();
    assert_eq!(waves.spec.low_risk.release, NEW);
    assert_eq!(waves.spec.canary.release, NEW);
    let message = head_message(&fx);
    assert!(
        message.starts_with(&format!("promote {NEW} to the low-risk wave")),
        "{message}"
    );
    fx.wait_phase(&format!("{prefix}-acme"), NEW, RolloutPhase::Verified, &op)
        .await;

    // The canary's commit: pending (applying, then verified with the
    // analysis running), then success once the analysis passed.
    let context = format!("exo/{platform}");
    let path = format!(
        "/repos/{}/{}/commits/{commit}/statuses?limit=50",
        repo.owner, repo.name
    );
    let states = eventually(
        "success after pending on the canary's commit",
        WAIT,
        || async {
            let (code, body) = gitea.api("GET", &path, None);
            assert_eq!(code, 200, "{body}");
            let mut got: Vec<(u64, String, String)> = body
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|s| s["context"] == context.as_str())
                .map(|s| {
                    (
                        s["id"].as_u64().unwrap(),
                        s["status"].as_str().unwrap_or("").to_owned(),
                        s["description"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect();
            got.sort();
            (got.last().map(|l| l.1.as_str()) == Some("success")).then_some(got)
        },
    )
    .await;
    let analysed = states
        .iter()
        .position(|(_, s, d)| s == "pending" && d.contains("analysis"))
        .unwrap_or_else(|| panic!("no pending status while the analysis ran: {states:?}"));
    let success = states.len() - 1;
    assert!(analysed < success, "{states:?}");
    assert!(states[success].2.contains("analysis passed"), "{states:?}");
    assert!(!states.iter().any(|(_, s, _)| s == "failure"), "{states:?}");
}

#[tokio::test]
async fn a_model_deployment_in_outage_fails_the_canary_through_circuits_open() {
    let _serial = SERIAL.lock().await;
    // Unique per run: a run before this one in the same environment may
    // still be deleting its tenants' namespaces.
    let prefix = &format!("aw-circ-{}", support::unique_suffix());
    let fx = Fixture::new(
        prefix,
        with_analysis(
            prefix,
            "[{name: circuits, interval: 2s, count: 20, inconclusiveLimit: 5, builtin: circuitsOpen, max: 0}]",
            false,
        ),
    )
    .await;
    let op = Operator::start_with(
        &fx.ns.name,
        &support::env().kubeconfig,
        "a",
        &[
            "--circuit-scrape-interval",
            "1s",
            "--circuit-scrape-timeout",
            "1s",
        ],
    );
    fx.wait_all(OLD, &op).await;
    let platform = format!("{prefix}-platform");
    // The canary's model gateway: a test exporter behind an ExternalName
    // Service labelled for scraping, in the canary tenant's namespace.
    let exporter = Exporter::start().await;
    exporter.set(|e| {
        e.states.insert("d1".into(), ("azure/gpt-4o".into(), 0));
    });
    let services: Api<Service> = Api::namespaced(fx.ns.client.clone(), &platform);
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "litellm",
            "labels": {"autonomic.sh/metrics": "litellm"},
            "annotations": {"autonomic.sh/metrics": "http/metrics"},
        },
        "spec": {
            "type": "ExternalName",
            "externalName": "localhost",
            "ports": [{"name": "http", "port": exporter.port}],
        }
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    promote_canary(&fx, &op);
    fx.wait_phase(&platform, NEW, RolloutPhase::Verified, &op)
        .await;
    // Healthy while it is measured...
    let running = eventually("a passing circuits measurement", WAIT, || async {
        let r = run_of(&fx, "canary", NEW).await?;
        let s = r.current_status()?;
        s.measurements
            .iter()
            .any(|m| m.verdict == Verdict::Pass)
            .then_some(r)
    })
    .await;
    assert_eq!(running.phase(), AnalysisPhase::Running);
    // ... then d1 is in outage: the check fails the wave.
    exporter.set(|e| {
        e.states.insert("d1".into(), ("azure/gpt-4o".into(), 2));
    });
    let failed = until_phase(&fx, &op, "canary", NEW, AnalysisPhase::Failed).await;
    let status = failed.status.clone().unwrap();
    assert_eq!(status.check.as_deref(), Some("circuits"));
    let fail = status
        .measurements
        .iter()
        .find(|m| m.verdict == Verdict::Fail)
        .unwrap();
    assert_eq!(fail.value, Some(1.0), "{fail:?}");
    assert!(fail.detail.contains("in outage"), "{fail:?}");
    // No autoPromote, but a failure still rolls the canary back.
    eventually("the canary rolled back in git", WAIT, || async {
        (fx.served_waves().spec.canary.release == OLD).then_some(())
    })
    .await;
    // Recovery closes the circuit (an Event on the Service).
    exporter.set(|e| {
        e.states.insert("d1".into(), ("azure/gpt-4o".into(), 0));
    });
    eventually("the circuit closed again", WAIT, || async {
        support::events(&platform, "CircuitClosed")
            .await
            .into_iter()
            .next()
    })
    .await;
}

#[tokio::test]
async fn prometheus_down_holds_the_wave_paused_and_the_gate_refuses() {
    let _serial = SERIAL.lock().await;
    // Unique per run: a run before this one in the same environment may
    // still be deleting its tenants' namespaces.
    let prefix = &format!("aw-prom-{}", support::unique_suffix());
    let dead = support::operator::free_port();
    let fx = Fixture::with_spec(
        prefix,
        with_analysis(
            prefix,
            "[{name: errors, interval: 2s, count: 3, prometheus: {query: 'sum(rate(http_requests_total{namespace=~\"{{tenants}}\",code=~\"5..\"}[1m]))', successCondition: 'result < 1'}}]",
            true,
        ),
        serde_json::json!({"analysis": {"prometheusUrl": format!("http://127.0.0.1:{dead}")}}),
    )
    .await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;
    let platform = format!("{prefix}-platform");
    promote_canary(&fx, &op);
    fx.wait_phase(&platform, NEW, RolloutPhase::Verified, &op)
        .await;
    // inconclusiveLimit 0: the first unreachable measurement holds it.
    let paused = until_phase(&fx, &op, "canary", NEW, AnalysisPhase::Paused).await;
    let status = paused.status.clone().unwrap();
    assert_eq!(status.check.as_deref(), Some("errors"));
    assert!(
        status
            .measurements
            .iter()
            .all(|m| m.verdict == Verdict::Inconclusive && m.value.is_none()),
        "{status:#?}"
    );
    let message = status.message.unwrap_or_default();
    assert!(message.contains("inconclusive"), "{message}");
    assert!(message.contains("held"), "{message}");
    // Held: nothing in git moves, and a person's promotion is refused by
    // the analysis gate, naming the run's state.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let waves = fx.served_waves();
    assert_eq!(
        (
            waves.spec.canary.release.as_str(),
            waves.spec.low_risk.release.as_str()
        ),
        (NEW, OLD)
    );
    let o = fx.exo(&["release", "promote", NEW, "--wave", "low-risk"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let text = out(&o);
    assert!(
        text.contains("gate analysis: wave canary's analysis of 2026.11.1 is Paused"),
        "{text}"
    );
    assert_eq!(
        run_of(&fx, "canary", NEW).await.unwrap().phase(),
        AnalysisPhase::Paused
    );
}

#[tokio::test]
async fn exo_release_rollout_follows_the_operators_promotion_and_goes_on() {
    let _serial = SERIAL.lock().await;
    // Unique per run: a run before this one in the same environment may
    // still be deleting its tenants' namespaces.
    let prefix = &format!("aw-cli-{}", support::unique_suffix());
    let fx = Fixture::new(
        prefix,
        with_analysis(
            prefix,
            "[{name: drift, interval: 2s, count: 3, builtin: contentDrift, max: 0}]",
            true,
        ),
    )
    .await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;
    // The CLI promotes the canary, waits for its analysis, follows the
    // operator's promotion of low-risk (pulling its commit), then promotes
    // the fleet wave itself on top of it.
    let o = fx.exo(&["release", "rollout", NEW, "--timeout", "5m"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", tail(&op.log()));
    for want in [
        "== wave canary: promoting 2026.11.1",
        "canary: analysis Passed",
        "== wave low-risk: promoted to 2026.11.1 by the operator",
        "low-risk: pulled the operator's promotion into the checkout",
        "== wave fleet: promoting 2026.11.1",
        "release 2026.11.1 is verified in every wave",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let waves = fx.served_waves();
    assert_eq!(
        (
            waves.spec.canary.release.as_str(),
            waves.spec.low_risk.release.as_str(),
            waves.spec.fleet.release.as_str()
        ),
        (NEW, NEW, NEW)
    );
    // The operator made low-risk's commit, the CLI the fleet's after it.
    let repo = git2::Repository::open_bare(&fx.repo.path).unwrap();
    let head = repo
        .find_reference("refs/heads/main")
        .unwrap()
        .peel_to_commit()
        .unwrap();
    assert!(
        head.message()
            .unwrap_or("")
            .starts_with("promote 2026.11.1 to the fleet wave"),
        "{:?}",
        head.message()
    );
    let parent = head.parent(0).unwrap();
    assert_eq!(parent.author().name().ok(), Some("Exo operator"));
    assert!(
        parent
            .message()
            .unwrap_or("")
            .starts_with("promote 2026.11.1 to the low-risk wave"),
        "{:?}",
        parent.message()
    );
    for t in fx.tenants() {
        fx.wait_phase(&t, NEW, RolloutPhase::Verified, &op).await;
    }
}
