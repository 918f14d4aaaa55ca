//! A wave judged on live signals while it soaks: its `analysis` checks
//! (`spec`), checked and planned (`plan`), measured (`builtin` from the
//! operator's own signals, `prometheus` by a PromQL query), and stepped
//! (`run`): which measurement is due, and the outcome.
//!
//! Everything here is pure except [`prometheus::Prometheus`], the thin HTTP
//! edge. Guarantees:
//! - A measurement is numbered by its slot (the interval it closes), and a
//!   slot counts once: a run resumed after a crash, or a measurement fed
//!   twice, never counts one twice ([`run::record`], [`run::step`]).
//! - Missing data is never a pass: a signal the operator could not read, an
//!   unreachable Prometheus, an error answer, an empty or multi-element
//!   vector or NaN is `Inconclusive`, with the reason.
//! - What a measurement stores is bounded ([`run::DETAIL_MAX`],
//!   [`plan::MAX_COUNT`] measurements per check).

pub mod board;
pub mod builtin;
pub mod condition;
pub mod plan;
pub mod prometheus;
pub mod run;
pub mod spec;
pub mod template;

pub use board::{MonitorBoard, MonitorReadings, NamespaceHealth};
pub use builtin::{AlertCounts, Signals};
pub use condition::Condition;
pub use plan::{BuiltinCheck, Kind, Plan, Planned, Problem, ProblemKind, Query, plan};
pub use prometheus::Prometheus;
pub use run::{Due, Measurement, Outcome, Reading, Step, Tally, Verdict, record, step, tally};
pub use spec::{Builtin, Check, Int, PrometheusCheck};
pub use template::Vars;

/// Why a template, a condition, a URL or a query did not work out. A query
/// error becomes an `Inconclusive` measurement with this as its detail.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnalysisError {
    #[error("query template: {reason}")]
    Template { reason: String },
    #[error("not PromQL: {message}")]
    Promql { message: String },
    #[error("condition {text:?}: {reason}")]
    Condition { text: String, reason: String },
    #[error("Prometheus URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    #[error("no Prometheus URL: set the Fleet's spec.analysis.prometheusUrl")]
    NoUrl,
    #[error("Prometheus: {0}")]
    Net(#[from] crate::net::NetError),
    #[error("Prometheus answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("Prometheus's answer is not a query result: {0}")]
    Answer(String),
    #[error("the query returned no sample")]
    Empty,
    #[error("the query returned {0} samples; a check needs one (aggregate with sum, max, ...)")]
    Multiple(usize),
    #[error("the query returned a {0}; a check needs a scalar or a one-sample vector")]
    ResultType(String),
    #[error("the query returned NaN")]
    NaN,
}

/// `s` cut to at most `max` bytes on a char boundary.
fn clip(s: &str, max: usize) -> &str {
    crate::text::clip_to(s, max)
}
