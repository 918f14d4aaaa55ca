//! The waves page's analysis runs: AnalysisRuns made through the apiserver
//! in the namespace a real managed operator streams (it follows the Fleets
//! of its namespace, where the engine makes runs; without a Fleet it makes
//! and touches none) show under their wave's tenants: phase, measurements
//! by check with their verdicts, the outcome's commit; a run of another
//! release is not the one shown; a status for an older spec, or none, is
//! shown as stale, never as its phase.

use super::*;
use exo::crd::{AnalysisRun, Rollout, RolloutSpec};
use kube::api::{Patch, PatchParams};

const OLDER: &str = "2026.10.0";

/// A hand-made Rollout of `tenant` in `wave` on `release` (no Fleet: the
/// engine leaves it alone).
fn rollout(tenant: &str, wave: &str, release: &str) -> Rollout {
    Rollout::new(
        tenant,
        RolloutSpec {
            tenant: tenant.into(),
            wave: wave.into(),
            release: release.into(),
            commit: "c0ffee1".into(),
            desired_hash: "h1".into(),
            settings: Default::default(),
        },
    )
}

/// A run of `wave` on `release` judging `tenant` in `ns`, with two
/// built-in checks.
fn run(name: &str, ns: &str, wave: &str, release: &str, tenant: &str) -> AnalysisRun {
    serde_json::from_value(json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AnalysisRun",
        "metadata": {"name": name},
        "spec": {
            "fleet": "prod", "wave": wave, "release": release, "commit": "abc1234",
            "tenants": [{"name": tenant, "namespace": ns}],
            "checks": [
                {"name": "crashloops", "interval": "1m", "builtin": "crashloops", "max": 0},
                {"name": "alerts", "interval": "1m", "builtin": "alerts", "max": 0},
            ],
            "soak": "10m", "autoPromote": true,
        }
    }))
    .unwrap()
}

fn measurement(check: &str, slot: u32, verdict: &str, value: f64, detail: &str) -> Value {
    json!({"check": check, "slot": slot, "at": "2026-11-02T10:00:00Z",
           "value": value, "verdict": verdict, "detail": detail})
}

async fn set_status(api: &Api<AnalysisRun>, name: &str, status: Value) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap();
}

/// The analysis box of `wave`'s section.
fn box_of(wave: &str) -> String {
    format!(r#"section.wave[data-wave="{wave}"] .analysis"#)
}

#[tokio::test]
async fn the_waves_page_shows_each_waves_analysis_run() {
    let _cluster = CLUSTER.read().await;
    let ns = TestNamespace::new("b-dash-ar").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[]);
    let dep = "analysis";
    let token = cp.create_deployment(dep);
    let op =
        support::operator::OperatorProcess::start_managed(&ns.name, "a", &[], &cp.base, &token);

    let rollouts = ns.api::<Rollout>();
    for (tenant, wave, release) in [
        ("t-canary", "canary", NEW),
        ("t-low", "low-risk", OLD),
        ("t-fleet", "fleet", OLD),
    ] {
        rollouts
            .create(&PostParams::default(), &rollout(tenant, wave, release))
            .await
            .unwrap();
    }
    let runs = ns.api::<AnalysisRun>();
    let pp = PostParams::default();
    // canary: measuring NEW (and a run of an older release, not shown).
    runs.create(&pp, &run("canary-new", &ns.name, "canary", NEW, "t-canary"))
        .await
        .unwrap();
    set_status(
        &runs,
        "canary-new",
        json!({"observedGeneration": 1, "phase": "Running", "message": "measuring slot 2 of 10",
        "measurements": [
            measurement("crashloops", 0, "Pass", 0.0, "no pod crash-looping"),
            measurement("crashloops", 1, "Pass", 0.0, "no pod crash-looping"),
            measurement("alerts", 0, "Inconclusive", 0.0, "alert sink unreachable"),
        ]}),
    )
    .await;
    runs.create(
        &pp,
        &run("canary-older", &ns.name, "canary", OLDER, "t-canary"),
    )
    .await
    .unwrap();
    set_status(
        &runs,
        "canary-older",
        json!({"observedGeneration": 1, "phase": "Passed", "message": "older release passed"}),
    )
    .await;
    // low-risk: passed OLD and promoted the fleet wave.
    runs.create(&pp, &run("low-old", &ns.name, "low-risk", OLD, "t-low"))
        .await
        .unwrap();
    set_status(
        &runs,
        "low-old",
        json!({"observedGeneration": 1, "phase": "Passed", "message": "every check passed",
               "measurements": [measurement("crashloops", 0, "Pass", 0.0, "")],
               "action": {"kind": "Promoted", "wave": "fleet", "release": OLD,
                          "commit": "f00dfeed99", "at": "2026-11-02T10:05:00Z"}}),
    )
    .await;
    // fleet: a run with no status yet.
    runs.create(&pp, &run("fleet-old", &ns.name, "fleet", OLD, "t-fleet"))
        .await
        .unwrap();

    let (admin, s) = logged_in(&cp).await;
    s.goto(&format!("/deployments/{dep}/waves")).await;
    s.wait_for(r#"body[data-page="waves"]"#).await;
    let wait = Duration::from_secs(60);
    let canary = box_of("canary");
    s.wait_for_in(&format!(r#"{canary}[data-phase="Running"]"#), wait)
        .await;
    assert_eq!(
        s.attr(&canary, "data-run").await.as_deref(),
        Some("canary-new"),
        "the run of the release the wave runs, not the older one"
    );
    assert_eq!(
        s.js(
            "return document.querySelectorAll(arguments[0]).length;",
            vec![json!(canary)]
        )
        .await,
        json!(1)
    );
    assert_eq!(s.text(&format!("{canary} .analysis-release")).await, NEW);
    assert_eq!(
        s.text(&format!("{canary} .analysis-message")).await,
        "measuring slot 2 of 10"
    );
    let verdicts = |check: &str| {
        format!(
            "return Array.from(document.querySelectorAll(arguments[0] + ' tr.check[data-check=\"{check}\"] td.measurement')).map(td => [td.dataset.verdict, td.title]);"
        )
    };
    let crash = s.js(&verdicts("crashloops"), vec![json!(canary)]).await;
    assert_eq!(crash.as_array().unwrap().len(), 2, "{crash}");
    assert!(
        crash.as_array().unwrap().iter().all(|m| m[0] == "Pass"),
        "{crash}"
    );
    assert!(
        crash[0][1]
            .as_str()
            .unwrap()
            .contains("no pod crash-looping"),
        "the detail is in the title: {crash}"
    );
    let alerts = s.js(&verdicts("alerts"), vec![json!(canary)]).await;
    assert_eq!(alerts[0][0], "Inconclusive", "{alerts}");
    assert!(
        alerts[0][1]
            .as_str()
            .unwrap()
            .contains("alert sink unreachable"),
        "{alerts}"
    );
    assert!(
        s.js(
            "return document.querySelector(arguments[0] + ' .analysis-action') === null;",
            vec![json!(canary)]
        )
        .await
        .as_bool()
        .unwrap(),
        "no action while running"
    );

    let low = box_of("low-risk");
    s.wait_for_in(&format!(r#"{low}[data-phase="Passed"]"#), wait)
        .await;
    assert_eq!(
        s.text(&format!(
            r#"{low} .analysis-action[data-action="promoted"]"#
        ))
        .await
        .split(" · ")
        .next()
        .unwrap(),
        format!("promoted {OLD} to fleet (commit f00dfee)")
    );

    let fleet = box_of("fleet");
    s.wait_for_in(&format!(r#"{fleet}[data-stale="true"]"#), wait)
        .await;
    assert_eq!(s.attr(&fleet, "data-phase").await, None);
    assert!(
        s.text(&fleet).await.contains("no status for this run yet"),
        "{}",
        s.text(&fleet).await
    );
    s.screenshot("waves-analysis-running").await;

    // The canary run fails on its alerts and rolls the wave back.
    set_status(
        &runs,
        "canary-new",
        json!({"observedGeneration": 1, "phase": "Failed",
               "message": "alerts failed 2 times (limit 1): rolled back",
               "check": "alerts", "finishedAt": "2026-11-02T10:09:00Z",
               "measurements": [
                   measurement("crashloops", 0, "Pass", 0.0, "no pod crash-looping"),
                   measurement("crashloops", 1, "Pass", 0.0, "no pod crash-looping"),
                   measurement("alerts", 0, "Inconclusive", 0.0, "alert sink unreachable"),
                   measurement("alerts", 1, "Fail", 3.0, "3 alerts firing"),
               ],
               "action": {"kind": "RolledBack", "wave": "canary", "release": OLD,
                          "commit": "abc1234def", "at": "2026-11-02T10:09:00Z"}}),
    )
    .await;
    s.wait_for_in(&format!(r#"{canary}[data-phase="Failed"]"#), wait)
        .await;
    assert_eq!(
        s.text(&format!(
            r#"{canary} .analysis-action[data-action="rolled-back"]"#
        ))
        .await
        .split(" · ")
        .next()
        .unwrap(),
        format!("rolled canary back to {OLD} (commit abc1234)")
    );
    let fail = format!(
        r#"{canary} tr.check[data-check="alerts"][data-failing="true"] td.measurement[data-verdict="Fail"][data-slot="1"]"#
    );
    assert!(
        s.attr(&fail, "title")
            .await
            .unwrap()
            .contains("3 alerts firing")
    );
    assert_eq!(s.text(&format!("{fail} .verdict-label")).await, "3");
    assert_eq!(
        s.computed_style(&format!(r#"{canary} .analysis-phase"#), "background-color")
            .await,
        rgb("#cf222e"),
        "a failed run in the failed colour"
    );

    // A spec change (the soak) bumps the low-risk run's generation: its
    // Passed status is for the older spec and is no longer shown.
    runs.patch(
        "low-old",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"soak": "20m"}})),
    )
    .await
    .unwrap();
    s.wait_for_in(&format!(r#"{low}[data-stale="true"]"#), wait)
        .await;
    assert_eq!(s.attr(&low, "data-phase").await, None);
    let text = s.text(&low).await;
    assert!(
        text.contains("status is for generation 1, spec is generation 2"),
        "{text}"
    );
    assert!(
        !text.contains("Passed") && !text.contains("promoted"),
        "{text}"
    );
    assert!(
        s.js(
            "return document.querySelectorAll(arguments[0] + ' td.measurement').length;",
            vec![json!(low)]
        )
        .await
            == json!(0),
        "no measurement of an older spec shown"
    );
    s.screenshot("waves-analysis-failed").await;

    // The control plane serves the runs with their creation time.
    let v = api_get(&cp, &admin, &format!("/api/v1/deployments/{dep}/resources"));
    let served: Vec<&Value> = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "AnalysisRun")
        .collect();
    assert_eq!(served.len(), 4, "{served:?}");
    assert!(
        served.iter().all(|r| r["creationTimestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))),
        "{served:?}"
    );
    assert!(
        !op.log().contains("AnalysisRuns cannot be listed"),
        "{}",
        op.log()
    );

    // Which run a wave shows, over runs no apiserver would make at once:
    // the newest by creation, and after a rollback the run that rolled the
    // wave back to the release it runs now.
    let picked = s
        .client
        .execute_async(
            "const done = arguments[0];
             import('/assets/app/analysis-run.js').then(m => {
               const run = (name, release, created, status) => ({kind: 'AnalysisRun', namespace: 'n',
                 name, generation: 1, creationTimestamp: created,
                 spec: {wave: 'canary', release, tenants: [{name: 't', namespace: 'n'}]}, status});
               const back = {observedGeneration: 1, phase: 'Failed',
                 action: {kind: 'RolledBack', wave: 'canary', release: 'r1'}};
               const runs = [run('a', 'r2', '2026-11-02T10:00:00Z'), run('b', 'r2', '2026-11-02T11:00:00Z'),
                 run('c', 'r3', '2026-11-02T12:00:00Z', back), run('d', 'r4', '2026-11-02T13:00:00Z'),
                 {...run('e', 'r2', '2026-11-02T14:00:00Z'), spec: {wave: 'canary', release: 'r2',
                   tenants: [{name: 'x', namespace: 'other'}]}}];
               const pick = (releases) => { const r = m.runForWave(runs, 'canary', releases, ['n']); return r ? r.name : null; };
               const staleBack = {...runs[2], generation: 2};
               done([pick(['r2']), pick(['r1']), pick(['r9']),
                     m.runForWave([staleBack], 'canary', ['r1'], ['n']) === null,
                     m.measurementsByCheck({generation: 1, spec: {checks: [{name: 'x'}, {name: 'y'}]},
                       status: {observedGeneration: 1, measurements: [{check: 'y', slot: 1}, {check: 'z', slot: 0},
                         {check: 'y', slot: 0}]}}).map(g => [g.check, g.measurements.map(x => x.slot)])]);
             }).catch(e => done(String(e)));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        picked,
        json!(["b", "c", null, true, [["x", []], ["y", [0, 1]], ["z", [0]]]]),
        "runForWave / measurementsByCheck"
    );
    s.close().await;
}
