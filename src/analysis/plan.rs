//! A wave's checks, checked and resolved into what a run measures, pure.
//! Lint reports every [`Problem`] (with the field under the wave); the
//! operator plans a wave lint has passed, so [`plan`] never fails there.

use std::collections::BTreeSet;
use std::time::Duration;

use super::condition::Condition;
use super::spec::{Builtin, Check, Int};
use super::template::{self, Vars};
use crate::severity::Severity;

/// The most measurements one check makes in a run (they are stored in the
/// Rollout's status).
pub const MAX_COUNT: u32 = 200;
/// The shortest interval.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// A wave's analysis, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub checks: Vec<Planned>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }
}

/// One check, its numbers resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub name: String,
    pub interval: Duration,
    /// Measurements that make the run, 1 to [`MAX_COUNT`].
    pub count: u32,
    pub failure_limit: u32,
    pub inconclusive_limit: u32,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Builtin(BuiltinCheck),
    Prometheus(Query),
}

/// A built-in signal and its threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BuiltinCheck {
    pub signal: Builtin,
    /// A measurement above it fails; for `restarts` a rate per hour.
    pub max: f64,
    /// For `alerts`: the least severity counted.
    pub severity: Option<Severity>,
}

/// A PromQL template and its conditions (at least one).
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub template: String,
    pub success: Option<Condition>,
    pub failure: Option<Condition>,
}

/// One thing wrong with a wave's analysis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Under the wave, e.g. `analysis[1].failureLimit`.
    pub field: String,
    pub kind: ProblemKind,
    pub message: String,
}

/// What lint's rule for a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// `builtin` names no built-in.
    UnknownBuiltin,
    /// A query template that does not render, or is not PromQL.
    BadQuery,
    /// A success or failure condition that does not parse.
    BadCondition,
    /// Anything else: names, intervals, counts, limits, thresholds, kinds.
    BadCheck,
}

/// The checks of a wave that soaks for `soak` (`None`: no soak, so a
/// check without `count` measures once), or every problem found.
pub fn plan(checks: &[Check], soak: Option<Duration>) -> Result<Plan, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    let mut planned = Vec::new();
    for (i, c) in checks.iter().enumerate() {
        let mut p = Problems {
            at: format!("analysis[{i}]"),
            out: &mut problems,
        };
        if !names.insert(c.name.as_str()) {
            p.add(
                "name",
                ProblemKind::BadCheck,
                format!("check {:?} appears twice in this wave", c.name),
            );
        } else if c.name.is_empty() || !crate::names::is_label_value(&c.name) {
            p.add(
                "name",
                ProblemKind::BadCheck,
                format!(
                    "{:?} is not a check name: 1 to 63 letters, digits, '-', '_' or '.'",
                    c.name
                ),
            );
        }
        if let Some(check) = one(c, soak, &mut p) {
            planned.push(check);
        }
    }
    if problems.is_empty() {
        Ok(Plan { checks: planned })
    } else {
        Err(problems)
    }
}

struct Problems<'a> {
    at: String,
    out: &'a mut Vec<Problem>,
}

impl Problems<'_> {
    fn add(&mut self, field: &str, kind: ProblemKind, message: String) {
        self.out.push(Problem {
            field: format!("{}.{field}", self.at),
            kind,
            message,
        });
    }

    /// `value` as a `u32` of at least `min`, else a problem.
    fn number(&mut self, field: &str, value: Int, min: u32, max: u32) -> Option<u32> {
        match value.to_u32().filter(|v| (min..=max).contains(v)) {
            Some(v) => Some(v),
            None => {
                let why = if value.0 < i64::from(min) {
                    format!("{field} is {value}; it must be {min} or more")
                } else {
                    format!("{field} is {value}; it must be at most {max}")
                };
                self.add(field, ProblemKind::BadCheck, why);
                None
            }
        }
    }
}

fn one(c: &Check, soak: Option<Duration>, p: &mut Problems<'_>) -> Option<Planned> {
    let interval = match crate::duration::parse(&c.interval) {
        Ok(d) if d >= MIN_INTERVAL => Some(d),
        Ok(_) => {
            p.add(
                "interval",
                ProblemKind::BadCheck,
                format!("{:?} is shorter than 1s", c.interval),
            );
            None
        }
        Err(e) => {
            p.add("interval", ProblemKind::BadCheck, e.to_string());
            None
        }
    };
    let count = match (c.count, interval) {
        (Some(n), _) => p.number("count", n, 1, MAX_COUNT),
        (None, Some(interval)) => {
            let n = soak
                .map_or(1, |s| s.as_millis() / interval.as_millis())
                .max(1);
            match u32::try_from(n).ok().filter(|n| *n <= MAX_COUNT) {
                Some(n) => Some(n),
                None => {
                    p.add(
                        "interval",
                        ProblemKind::BadCheck,
                        format!(
                            "the soak time over {:?} makes {n} measurements; at most {MAX_COUNT} are kept: make the interval longer or set count",
                            c.interval
                        ),
                    );
                    None
                }
            }
        }
        (None, None) => None,
    };
    let failure_limit = p.number("failureLimit", c.failure_limit, 0, u32::MAX);
    let inconclusive_limit = p.number("inconclusiveLimit", c.inconclusive_limit, 0, u32::MAX);
    let kind = kind(c, p);
    Some(Planned {
        name: c.name.clone(),
        interval: interval?,
        count: count?,
        failure_limit: failure_limit?,
        inconclusive_limit: inconclusive_limit?,
        kind: kind?,
    })
}

fn kind(c: &Check, p: &mut Problems<'_>) -> Option<Kind> {
    match (&c.builtin, &c.prometheus) {
        (Some(_), Some(_)) | (None, None) => {
            p.add(
                "builtin",
                ProblemKind::BadCheck,
                "a check has exactly one kind: `builtin` or `prometheus`".into(),
            );
            None
        }
        (Some(name), None) => builtin(name, c, p).map(Kind::Builtin),
        (None, Some(q)) => {
            if c.max.is_some() || c.severity.is_some() {
                p.add(
                    if c.max.is_some() { "max" } else { "severity" },
                    ProblemKind::BadCheck,
                    "only a `builtin` check has a threshold; a prometheus check has conditions"
                        .into(),
                );
            }
            query(q, p).map(Kind::Prometheus)
        }
    }
}

fn builtin(name: &str, c: &Check, p: &mut Problems<'_>) -> Option<BuiltinCheck> {
    let Some(signal) = Builtin::parse(name) else {
        p.add(
            "builtin",
            ProblemKind::UnknownBuiltin,
            format!(
                "{:?} is not a built-in check; use one of {}",
                super::clip(name, 60),
                Builtin::ALL.map(Builtin::as_str).join(", ")
            ),
        );
        return None;
    };
    let max = match c.max {
        Some(m) if m.is_finite() && m >= 0.0 => Some(m),
        Some(m) => {
            p.add(
                "max",
                ProblemKind::BadCheck,
                format!("max is {m}; it must be a number of 0 or more"),
            );
            None
        }
        None => {
            p.add(
                "max",
                ProblemKind::BadCheck,
                format!("{signal} needs `max`, the threshold a measurement may not exceed"),
            );
            None
        }
    };
    let severity = match (signal, c.severity.as_deref()) {
        (Builtin::Alerts, Some(s)) => match Severity::parse(s) {
            Some(s) => Some(Some(s)),
            None => {
                p.add(
                    "severity",
                    ProblemKind::BadCheck,
                    format!(
                        "{:?} is not a severity; use warning or critical",
                        super::clip(s, 40)
                    ),
                );
                None
            }
        },
        (Builtin::Alerts, None) => {
            p.add(
                "severity",
                ProblemKind::BadCheck,
                "alerts needs `severity`: warning (counts critical too) or critical".into(),
            );
            None
        }
        (_, Some(_)) => {
            p.add(
                "severity",
                ProblemKind::BadCheck,
                format!("only the alerts check has a severity, not {signal}"),
            );
            None
        }
        (_, None) => Some(None),
    };
    Some(BuiltinCheck {
        signal,
        max: max?,
        severity: severity?,
    })
}

fn query(q: &super::spec::PrometheusCheck, p: &mut Problems<'_>) -> Option<Query> {
    let rendered = template::render(&q.query, &Vars::sample())
        .and_then(|r| template::parse_promql(&r).map(|()| r));
    if let Err(e) = &rendered {
        p.add("prometheus.query", ProblemKind::BadQuery, e.to_string());
    }
    let mut condition = |field: &str, text: &Option<String>| match text {
        None => Some(None),
        Some(t) => match Condition::parse(t) {
            Ok(c) => Some(Some(c)),
            Err(e) => {
                p.add(field, ProblemKind::BadCondition, e.to_string());
                None
            }
        },
    };
    let success = condition("prometheus.successCondition", &q.success_condition);
    let failure = condition("prometheus.failureCondition", &q.failure_condition);
    if q.success_condition.is_none() && q.failure_condition.is_none() {
        p.add(
            "prometheus",
            ProblemKind::BadCondition,
            "a prometheus check needs successCondition, failureCondition or both".into(),
        );
        return None;
    }
    rendered.ok()?;
    Some(Query {
        template: q.query.clone(),
        success: success?,
        failure: failure?,
    })
}

#[cfg(test)]
mod tests;
