use super::*;
use crate::analysis::spec::PrometheusCheck;

fn builtin(name: &str, which: &str, max: f64) -> Check {
    Check {
        name: name.into(),
        interval: "1m".into(),
        count: None,
        failure_limit: Int(0),
        inconclusive_limit: Int(0),
        builtin: Some(which.into()),
        max: Some(max),
        severity: None,
        prometheus: None,
    }
}

fn prometheus(name: &str, query: &str, success: Option<&str>, failure: Option<&str>) -> Check {
    Check {
        builtin: None,
        max: None,
        prometheus: Some(PrometheusCheck {
            query: query.into(),
            success_condition: success.map(Into::into),
            failure_condition: failure.map(Into::into),
        }),
        ..builtin(name, "", 0.0)
    }
}

const TEN_MINUTES: Option<Duration> = Some(Duration::from_secs(600));

#[test]
fn a_valid_analysis_plans_with_its_defaults() {
    let mut alerts = builtin("alerts", "alerts", 0.0);
    alerts.severity = Some("critical".into());
    alerts.count = Some(Int(3));
    alerts.failure_limit = Int(1);
    alerts.inconclusive_limit = Int(2);
    let checks = vec![
        builtin("crashloops", "crashloops", 0.0),
        alerts,
        prometheus(
            "errors",
            r#"sum(rate(http_requests_total{namespace=~"{{tenants}}",code=~"5.."}[5m]))"#,
            Some("result < 0.05"),
            None,
        ),
    ];
    let p = plan(&checks, TEN_MINUTES).unwrap();
    assert_eq!(p.checks.len(), 3);
    let c = &p.checks[0];
    // Ten minutes of soak at one a minute.
    assert_eq!(
        (c.interval, c.count, c.failure_limit, c.inconclusive_limit),
        (Duration::from_secs(60), 10, 0, 0)
    );
    assert_eq!(
        c.kind,
        Kind::Builtin(BuiltinCheck {
            signal: Builtin::Crashloops,
            max: 0.0,
            severity: None
        })
    );
    let a = &p.checks[1];
    assert_eq!((a.count, a.failure_limit, a.inconclusive_limit), (3, 1, 2));
    assert!(matches!(
        a.kind,
        Kind::Builtin(BuiltinCheck {
            severity: Some(Severity::Critical),
            ..
        })
    ));
    match &p.checks[2].kind {
        Kind::Prometheus(q) => {
            assert!(q.success.is_some() && q.failure.is_none());
            assert!(q.template.contains("{{tenants}}"));
        }
        other => panic!("{other:?}"),
    }
    // No soak, or a soak shorter than the interval: one measurement.
    assert_eq!(plan(&checks[..1], None).unwrap().checks[0].count, 1);
    assert_eq!(
        plan(&checks[..1], Some(Duration::from_secs(30)))
            .unwrap()
            .checks[0]
            .count,
        1
    );
}

/// Every problem of one check, as (field, kind, part of the message).
fn problems(check: Check) -> Vec<(String, ProblemKind, String)> {
    match plan(&[check], TEN_MINUTES) {
        Ok(p) => panic!("planned: {p:?}"),
        Err(ps) => ps
            .into_iter()
            .map(|p| (p.field, p.kind, p.message))
            .collect(),
    }
}

#[test]
fn every_bad_field_is_named() {
    use ProblemKind::*;
    let with = |f: &dyn Fn(&mut Check)| {
        let mut c = builtin("c", "restarts", 5.0);
        f(&mut c);
        c
    };
    let cases: Vec<(Check, &str, ProblemKind, &str)> = vec![
        (
            with(&|c| c.failure_limit = Int(-1)),
            "analysis[0].failureLimit",
            BadCheck,
            "failureLimit is -1; it must be 0 or more",
        ),
        (
            with(&|c| c.inconclusive_limit = Int(-3)),
            "analysis[0].inconclusiveLimit",
            BadCheck,
            "0 or more",
        ),
        (
            with(&|c| c.failure_limit = Int(1 << 40)),
            "analysis[0].failureLimit",
            BadCheck,
            "at most",
        ),
        (
            with(&|c| c.count = Some(Int(0))),
            "analysis[0].count",
            BadCheck,
            "1 or more",
        ),
        (
            with(&|c| c.count = Some(Int(5000))),
            "analysis[0].count",
            BadCheck,
            "at most 200",
        ),
        (
            with(&|c| c.interval = "soon".into()),
            "analysis[0].interval",
            BadCheck,
            "\"soon\": expected a number",
        ),
        (
            with(&|c| c.interval = "500ms".into()),
            "analysis[0].interval",
            BadCheck,
            "shorter than 1s",
        ),
        (
            with(&|c| c.interval = "1s".into()),
            "analysis[0].interval",
            BadCheck,
            "makes 600 measurements",
        ),
        (
            with(&|c| c.builtin = Some("crashLoops".into())),
            "analysis[0].builtin",
            UnknownBuiltin,
            "\"crashLoops\" is not a built-in check; use one of crashloops, restarts",
        ),
        (
            with(&|c| c.max = None),
            "analysis[0].max",
            BadCheck,
            "restarts needs `max`",
        ),
        (
            with(&|c| c.max = Some(-1.0)),
            "analysis[0].max",
            BadCheck,
            "0 or more",
        ),
        (
            with(&|c| c.severity = Some("critical".into())),
            "analysis[0].severity",
            BadCheck,
            "only the alerts check",
        ),
        (
            with(&|c| c.builtin = Some("alerts".into())),
            "analysis[0].severity",
            BadCheck,
            "alerts needs `severity`",
        ),
        (
            with(&|c| {
                c.builtin = Some("alerts".into());
                c.severity = Some("page".into());
            }),
            "analysis[0].severity",
            BadCheck,
            "\"page\" is not a severity",
        ),
        (
            with(&|c| c.name = "no spaces".into()),
            "analysis[0].name",
            BadCheck,
            "is not a check name",
        ),
        (
            with(&|c| c.builtin = None),
            "analysis[0].builtin",
            BadCheck,
            "exactly one kind",
        ),
        (
            prometheus("p", "sum(rate(x[5m])", Some("result < 1"), None),
            "analysis[0].prometheus.query",
            BadQuery,
            "not PromQL",
        ),
        (
            prometheus("p", "up{a=\"{{tenant}}\"}", Some("result < 1"), None),
            "analysis[0].prometheus.query",
            BadQuery,
            "unknown variable \"tenant\"",
        ),
        (
            prometheus("p", "up", Some("result <"), None),
            "analysis[0].prometheus.successCondition",
            BadCondition,
            "ends where a number",
        ),
        (
            prometheus("p", "up", None, Some("value > 1")),
            "analysis[0].prometheus.failureCondition",
            BadCondition,
            "unknown name \"value\"",
        ),
        (
            prometheus("p", "up", None, None),
            "analysis[0].prometheus",
            BadCondition,
            "needs successCondition, failureCondition or both",
        ),
        (
            Check {
                max: Some(1.0),
                ..prometheus("p", "up", Some("result < 1"), None)
            },
            "analysis[0].max",
            BadCheck,
            "only a `builtin` check has a threshold",
        ),
    ];
    for (check, field, kind, want) in cases {
        let got = problems(check.clone());
        assert!(
            got.iter()
                .any(|(f, k, m)| f == field && *k == kind && m.contains(want)),
            "{check:?}: want {field} {kind:?} {want:?}, got {got:?}"
        );
    }
}

#[test]
fn names_are_unique_in_a_wave_and_problems_accumulate() {
    let mut bad = builtin("b", "nope", 0.0);
    bad.failure_limit = Int(-1);
    let checks = vec![
        builtin("a", "crashloops", 0.0),
        builtin("a", "restarts", 1.0),
        bad,
    ];
    let ps = plan(&checks, TEN_MINUTES).unwrap_err();
    let fields: Vec<&str> = ps.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "analysis[1].name",
            "analysis[2].failureLimit",
            "analysis[2].builtin"
        ]
    );
    assert!(ps[0].message.contains("appears twice"), "{}", ps[0].message);
}
