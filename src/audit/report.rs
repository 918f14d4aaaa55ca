//! Printing findings: a table for people, JSON for scripts.

use std::fmt::Write as _;

use serde::Serialize;

use super::{Finding, Rule};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report<'a> {
    pub clean: bool,
    /// Tenant namespaces audited.
    pub tenants: usize,
    /// Findings per rule, every rule listed.
    pub counts: std::collections::BTreeMap<&'static str, usize>,
    pub findings: &'a [Finding],
}

impl<'a> Report<'a> {
    pub fn new(tenants: usize, findings: &'a [Finding]) -> Self {
        let counts = Rule::ALL
            .iter()
            .map(|r| (r.as_str(), findings.iter().filter(|f| f.rule == *r).count()))
            .collect();
        Report {
            clean: findings.is_empty(),
            tenants,
            counts,
            findings,
        }
    }
}

/// `RULE  NAMESPACE  OBJECT  FINDING`, then a summary line.
pub fn table(tenants: usize, findings: &[Finding]) -> String {
    let mut out = String::new();
    if findings.is_empty() {
        let _ = writeln!(out, "audit: {tenants} tenant(s), every rule clean");
        return out;
    }
    let w =
        |f: fn(&Finding) -> usize, h: &str| findings.iter().map(f).max().unwrap_or(0).max(h.len());
    let (wr, wn, wo) = (
        w(|f| f.rule.as_str().len(), "RULE"),
        w(|f| f.namespace.len(), "NAMESPACE"),
        w(|f| f.object.len(), "OBJECT"),
    );
    let _ = writeln!(
        out,
        "{:wr$}  {:wn$}  {:wo$}  FINDING",
        "RULE", "NAMESPACE", "OBJECT"
    );
    for f in findings {
        let _ = writeln!(
            out,
            "{:wr$}  {:wn$}  {:wo$}  {}",
            f.rule.as_str(),
            f.namespace,
            f.object,
            f.message
        );
    }
    let per: Vec<String> = Rule::ALL
        .iter()
        .filter_map(|r| {
            let n = findings.iter().filter(|f| f.rule == *r).count();
            (n > 0).then(|| format!("{r} {n}"))
        })
        .collect();
    let _ = writeln!(
        out,
        "audit: {tenants} tenant(s), {} finding(s): {}",
        findings.len(),
        per.join(", ")
    );
    out
}
