#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Prometheus checks against the test environment's real Prometheus
//! (Debian's server, scraping every second the targets a test writes as
//! file_sd files): a check over a real `exo operator run`'s own metrics
//! passes and a threshold over them fails; a `{{tenants}}` template over a
//! test exporter's series picks only the wave's tenants; a check measured
//! slot by slot through the stepper passes; Prometheus at a dead port is
//! inconclusive, never a pass, and holds the run.

mod support;

use std::time::Duration;

use exo::analysis::{
    self, Check, Int, Kind, Outcome, Plan, Prometheus, PrometheusCheck, Query, Step, Vars, Verdict,
};
use k8s_openapi::jiff::Timestamp;
use support::operator::{OperatorProcess, free_port, restricted_namespace};
use support::prometheus::{Exporter, TestPrometheus};

fn check(name: &str, query: &str, success: Option<&str>, failure: Option<&str>) -> Check {
    Check {
        name: name.into(),
        interval: "1s".into(),
        count: Some(Int(2)),
        failure_limit: Int(0),
        inconclusive_limit: Int(0),
        builtin: None,
        max: None,
        severity: None,
        prometheus: Some(PrometheusCheck {
            query: query.into(),
            success_condition: success.map(Into::into),
            failure_condition: failure.map(Into::into),
        }),
    }
}

/// The checks planned as the operator plans a wave that lint passed.
fn plan(checks: &[Check]) -> Plan {
    analysis::plan(checks, None).unwrap_or_else(|p| panic!("{p:#?}"))
}

fn query_of(plan: &Plan, i: usize) -> &Query {
    match &plan.checks[i].kind {
        Kind::Prometheus(q) => q,
        other => panic!("{other:?}"),
    }
}

fn client(url: &str) -> Prometheus {
    Prometheus::new(url, Duration::from_secs(10)).unwrap()
}

#[tokio::test]
async fn a_check_over_the_operators_metrics_passes_and_a_threshold_fails() {
    let prom = TestPrometheus::get();
    let ns = restricted_namespace("a-analysis").await;
    let op = OperatorProcess::start(&ns.name, "a-analysis-0");
    op.wait_leader().await;
    let _target = prom.scrape(&op.addr);
    let p = client(&prom.url);
    // The operator's own gauge, once Prometheus has scraped it as leader.
    let leader = format!(r#"max(exo_operator_leader{{instance="{}"}})"#, op.addr);
    prom.wait_value(&p, &leader, |v| v == 1.0).await;

    let plan = plan(&[
        check("leads", &leader, Some("result == 1"), None),
        check("never-leads", &leader, None, Some("result >= 1")),
    ]);
    let tenants = vec![ns.name.clone()];
    let vars = Vars {
        tenants: &tenants,
        release: "2026.11.1",
        wave: "canary",
    };
    let pass = p.measure(query_of(&plan, 0), &vars).await;
    assert_eq!(
        (pass.verdict, pass.value),
        (Verdict::Pass, Some(1.0)),
        "{pass:?}"
    );
    let fail = p.measure(query_of(&plan, 1), &vars).await;
    assert_eq!(
        (fail.verdict, fail.value),
        (Verdict::Fail, Some(1.0)),
        "{fail:?}"
    );
    assert!(
        fail.detail.contains("failureCondition holds"),
        "{}",
        fail.detail
    );
}

#[tokio::test]
async fn the_tenants_template_selects_the_waves_tenants_only() {
    let prom = TestPrometheus::get();
    let exporter = Exporter::start(
        "# TYPE exo_test_errors gauge\n\
         exo_test_errors{namespace=\"a-t1\"} 0.02\n\
         exo_test_errors{namespace=\"a-t2\"} 0.01\n\
         exo_test_errors{namespace=\"a-t10\"} 5\n\
         exo_test_errors{namespace=\"other\"} 7\n",
    )
    .await;
    let _target = prom.scrape(&exporter.addr);
    let p = client(&prom.url);
    let all = format!(r#"count(exo_test_errors{{instance="{}"}})"#, exporter.addr);
    prom.wait_value(&p, &all, |v| v == 4.0).await;

    // `{{tenants}}` is an anchored alternation: a-t1 does not match a-t10.
    let query = format!(
        r#"sum(exo_test_errors{{namespace=~"{{{{tenants}}}}",instance="{}"}})"#,
        exporter.addr
    );
    let plan = plan(&[
        check("errors", &query, Some("result < 0.05"), None),
        check("strict", &query, Some("result < 0.01"), None),
    ]);
    let tenants = vec!["a-t1".to_string(), "a-t2".to_string()];
    let vars = Vars {
        tenants: &tenants,
        release: "2026.11.1",
        wave: "low-risk",
    };
    let ok = p.measure(query_of(&plan, 0), &vars).await;
    assert_eq!(ok.verdict, Verdict::Pass, "{ok:?}");
    assert!((ok.value.unwrap() - 0.03).abs() < 1e-9, "{ok:?}");
    let strict = p.measure(query_of(&plan, 1), &vars).await;
    assert_eq!(strict.verdict, Verdict::Fail, "{strict:?}");

    // Slot by slot through the stepper (its clock given, not waited for):
    // two passing measurements pass the run, and feeding one twice
    // changes nothing.
    let started = Timestamp::now();
    let at = |s: i64| started.checked_add(jiff_secs(s)).unwrap();
    let one = Plan {
        checks: plan.checks[..1].to_vec(),
    };
    let mut measurements = Vec::new();
    for s in [1, 2] {
        let due = match analysis::step(&one, started, at(s), &measurements) {
            Step::Running { due, .. } => due,
            Step::Done(o) => panic!("done at {s}s: {o:?}"),
        };
        assert_eq!(due.len(), 1, "at {s}s");
        let Kind::Prometheus(q) = &due[0].check.kind else {
            panic!("{:?}", due[0].check.kind)
        };
        let reading = p.measure(q, &vars).await;
        let m = analysis::Measurement::new(&due[0].check.name, due[0].slot, at(s), reading);
        assert!(analysis::record(&mut measurements, m.clone()));
        assert!(!analysis::record(&mut measurements, m));
    }
    assert_eq!(
        analysis::step(&one, started, at(2), &measurements),
        Step::Done(Outcome::Passed)
    );

    // A tenant whose series goes over the threshold fails the next reading.
    exporter.set(
        "# TYPE exo_test_errors gauge\n\
         exo_test_errors{namespace=\"a-t1\"} 0.5\n\
         exo_test_errors{namespace=\"a-t2\"} 0.01\n",
    );
    let over = format!(
        r#"sum(exo_test_errors{{namespace="a-t1",instance="{}"}})"#,
        exporter.addr
    );
    prom.wait_value(&p, &over, |v| v == 0.5).await;
    let failed = p.measure(query_of(&plan, 0), &vars).await;
    assert_eq!(failed.verdict, Verdict::Fail, "{failed:?}");
}

fn jiff_secs(s: i64) -> k8s_openapi::jiff::SignedDuration {
    k8s_openapi::jiff::SignedDuration::from_secs(s)
}

#[tokio::test]
async fn prometheus_at_a_dead_port_is_inconclusive_and_holds_the_run() {
    let p = client(&format!("http://127.0.0.1:{}", free_port()));
    let plan = plan(&[check("errors", "sum(up)", Some("result < 1"), None)]);
    let vars = Vars {
        tenants: &["a-t1".to_string()],
        release: "2026.11.1",
        wave: "canary",
    };
    let r = p.measure(query_of(&plan, 0), &vars).await;
    assert_eq!((r.verdict, r.value), (Verdict::Inconclusive, None), "{r:?}");
    assert!(r.detail.contains("unreachable"), "{}", r.detail);

    let started = Timestamp::now();
    let at = started.checked_add(jiff_secs(1)).unwrap();
    let m = analysis::Measurement::new("errors", 0, at, r);
    match analysis::step(&plan, started, at, &[m]) {
        Step::Done(Outcome::Inconclusive { check, reason }) => {
            assert_eq!(check, "errors");
            assert!(reason.contains("unreachable"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn answers_that_are_not_one_number_are_inconclusive() {
    let prom = TestPrometheus::get();
    let p = client(&prom.url);
    let vars = Vars {
        tenants: &["a-t1".to_string()],
        release: "r",
        wave: "canary",
    };
    let cases = [
        (
            r#"label_replace(vector(1), "a", "x", "", "") or vector(2)"#,
            "returned 2 samples",
        ),
        ("vector(1) > 2", "no sample"),
        ("vector(0) / 0", "NaN"),
        ("up[1m]", "range vector"),
    ];
    for (promql, want) in cases {
        let q = Query {
            template: promql.into(),
            success: Some(analysis::Condition::parse("result < 100").unwrap()),
            failure: None,
        };
        let r = p.measure(&q, &vars).await;
        assert_eq!(
            (r.verdict, r.value),
            (Verdict::Inconclusive, None),
            "{promql}: {r:?}"
        );
        assert!(r.detail.contains(want), "{promql}: {}", r.detail);
    }
    // Not PromQL to the server: its error answer, with its message.
    match p.query("sum(").await {
        Err(analysis::AnalysisError::Status { status, message }) => {
            assert_eq!(status, 400);
            assert!(message.contains("parse error"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
