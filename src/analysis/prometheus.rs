//! Prometheus checks: the thin edge ([`Prometheus::query`], `GET
//! {url}/api/v1/query` over `crate::net`, with a deadline) and the pure
//! rest: the URL's check, reading an answer down to one number
//! ([`parse_answer`]) and judging it by the check's conditions
//! ([`judge`]).
//!
//! A query that does not give exactly one number (unreachable, an error
//! status, an empty or multi-element vector, a matrix, NaN) is
//! `Inconclusive` with the reason, never a pass.

use std::time::Duration;

use http_body_util::Full;
use hyper::Request;
use hyper::body::Bytes;
use serde::Deserialize;

use super::AnalysisError;
use super::plan::Query;
use super::run::{Reading, Verdict};
use super::template::{self, Vars};
use crate::net;

/// How long one query may take, the answer included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// A Prometheus server's HTTP API.
#[derive(Clone)]
pub struct Prometheus {
    client: net::Client,
    base: String,
    timeout: Duration,
}

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prometheus")
            .field("base", &self.base)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// `url` without its trailing `/`, when it is an `http(s)://host[:port][/path]`
/// URL without credentials, query or fragment.
pub fn check_url(url: &str) -> Result<&str, AnalysisError> {
    let bad = |reason: &str| AnalysisError::Url {
        url: super::clip(&without_userinfo(url), 200).to_owned(),
        reason: reason.to_owned(),
    };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| bad("not an http:// or https:// URL"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(bad("no host"));
    }
    if authority.contains('@') {
        return Err(bad("credentials in a URL are not supported"));
    }
    if rest.contains(['?', '#']) || rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("a query, fragment or space has no place in it"));
    }
    Ok(url.trim_end_matches('/'))
}

/// `url` with what stands before an `@` in its authority masked: a
/// password is never shown.
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

impl Prometheus {
    /// A client for the server at `url` (see [`check_url`]).
    pub fn new(url: &str, timeout: Duration) -> Result<Prometheus, AnalysisError> {
        let base = check_url(url)?.to_owned();
        Ok(Prometheus {
            client: net::client()?,
            base,
            timeout,
        })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// Runs an instant query: its one number, or why there is none.
    pub async fn query(&self, promql: &str) -> Result<f64, AnalysisError> {
        let url = format!(
            "{}/api/v1/query?query={}",
            self.base,
            net::query_value(promql)
        );
        let req = Request::get(url)
            .header("accept", "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| AnalysisError::Url {
                url: self.base.clone(),
                reason: e.to_string(),
            })?;
        let answer = net::send(&self.client, req, self.timeout).await?;
        parse_answer(answer.status.as_u16(), &answer.body)
    }

    /// Renders `query`'s template for `vars`, runs it and judges the result.
    pub async fn measure(&self, query: &Query, vars: &Vars<'_>) -> Reading {
        let value = match template::render(&query.template, vars) {
            Ok(promql) => self.query(&promql).await,
            Err(e) => Err(e),
        };
        judge(query, value)
    }
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum Data {
    Scalar(SampleValue),
    Vector(Vec<Sample>),
    Matrix(serde::de::IgnoredAny),
    String(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct Sample {
    value: SampleValue,
}

/// `[<unix seconds>, "<value>"]`.
#[derive(Deserialize)]
struct SampleValue(#[allow(dead_code)] f64, String);

/// An answer of `/api/v1/query` down to its one number.
pub fn parse_answer(status: u16, body: &[u8]) -> Result<f64, AnalysisError> {
    let answer: Result<Answer, _> = serde_json::from_slice(body);
    let message = |a: &Result<Answer, serde_json::Error>| match a {
        Ok(a) => a.error.clone().unwrap_or_else(|| a.status.clone()),
        Err(_) => String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    };
    if !(200..300).contains(&status) {
        return Err(AnalysisError::Status {
            status,
            message: super::clip(message(&answer).trim(), 200).to_owned(),
        });
    }
    let answer = answer.map_err(|e| AnalysisError::Answer(e.to_string()))?;
    if answer.status != "success" {
        return Err(AnalysisError::Status {
            status,
            message: super::clip(&message(&Ok(answer)), 200).to_owned(),
        });
    }
    let value = match answer.data {
        None => return Err(AnalysisError::Answer("no data".into())),
        Some(Data::Scalar(v)) => v,
        Some(Data::Vector(samples)) => match <[Sample; 1]>::try_from(samples) {
            Ok([s]) => s.value,
            Err(v) if v.is_empty() => return Err(AnalysisError::Empty),
            Err(v) => return Err(AnalysisError::Multiple(v.len())),
        },
        Some(Data::Matrix(_)) => return Err(AnalysisError::ResultType("range vector".into())),
        Some(Data::String(_)) => return Err(AnalysisError::ResultType("string".into())),
    };
    let n = number(&value.1)
        .ok_or_else(|| AnalysisError::Answer(format!("{:?} is not a number", value.1)))?;
    if n.is_nan() {
        return Err(AnalysisError::NaN);
    }
    Ok(n)
}

/// A sample's value as Prometheus writes it (`1.5`, `+Inf`, `NaN`).
fn number(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// Judges a query's result as Argo Rollouts does: a failure condition that
/// holds fails; else a success condition that holds passes; with both
/// given and neither holding it is inconclusive; with one given, it alone
/// decides. No number is inconclusive.
pub fn judge(query: &Query, value: Result<f64, AnalysisError>) -> Reading {
    let v = match value {
        Ok(v) if !v.is_nan() => v,
        Ok(_) => return Reading::inconclusive(AnalysisError::NaN.to_string()),
        Err(e) => return Reading::inconclusive(e.to_string()),
    };
    let failed = query.failure.as_ref().map(|c| c.holds(v));
    let passed = query.success.as_ref().map(|c| c.holds(v));
    let (verdict, why) = match (passed, failed) {
        (_, Some(true)) => (Verdict::Fail, "failureCondition holds"),
        (Some(true), _) => (Verdict::Pass, "successCondition holds"),
        (Some(false), Some(false)) => (Verdict::Inconclusive, "neither condition holds"),
        (Some(false), None) => (Verdict::Fail, "successCondition does not hold"),
        (None, Some(false)) => (Verdict::Pass, "failureCondition does not hold"),
        (None, None) => (Verdict::Inconclusive, "no condition"),
    };
    Reading {
        value: Some(v),
        verdict,
        detail: format!("result {v}: {why}"),
    }
}

#[cfg(test)]
mod tests;
