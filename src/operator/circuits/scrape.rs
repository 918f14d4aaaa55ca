//! One scrape: a GET of the target's URL over the shared plain-http client
//! (`net`), within a deadline, of at most [`MAX_BODY`] bytes, read by the
//! pure core. A failure is one of a few categories (the metric label) with
//! a message for the Event; neither carries the body.

use std::time::Duration;

use http_body_util::Full;
use hyper::Request;
use hyper::body::Bytes;

use crate::circuits::reading::Reading;
use crate::circuits::{Settings, Target};
use crate::net::{self, NetError};

/// The largest metrics page read (LiteLLM's with many keys and models is
/// a few hundred KiB).
pub const MAX_BODY: usize = 8 << 20;

/// Why a scrape failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScrapeError {
    #[error("{url}: {source}")]
    Net {
        url: String,
        #[source]
        source: NetError,
    },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url}: the page is not UTF-8")]
    NotText { url: String },
    #[error("{url}: not the Prometheus text format: {source}")]
    Parse {
        url: String,
        #[source]
        source: crate::circuits::text::TextError,
    },
    #[error("{url}: not a valid request URL")]
    Url { url: String },
}

impl ScrapeError {
    /// The bounded category (the `result` label of `exo_circuits_scrapes`).
    pub fn category(&self) -> &'static str {
        match self {
            ScrapeError::Net { source, .. } => match source {
                NetError::Deadline(_) => "timeout",
                NetError::TooLarge(_) => "too_large",
                NetError::Roots(_) | NetError::Unreachable(_) | NetError::Broken(_) => {
                    "unreachable"
                }
            },
            ScrapeError::Status { .. } => "status",
            ScrapeError::NotText { .. } | ScrapeError::Parse { .. } => "parse",
            ScrapeError::Url { .. } => "unreachable",
        }
    }
}

/// Scrapes `target` and reads what `s` names.
pub async fn scrape(
    client: &net::Client,
    target: &Target,
    timeout: Duration,
    s: &Settings,
) -> Result<Reading, ScrapeError> {
    let url = target.url.clone();
    let req = Request::get(url.as_str())
        .header(
            hyper::header::ACCEPT,
            "text/plain;version=0.0.4;q=1,*/*;q=0.1",
        )
        .header(
            hyper::header::USER_AGENT,
            concat!("exo-operator/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(Bytes::new()))
        .map_err(|_| ScrapeError::Url { url: url.clone() })?;
    let answer = net::send_limited(client, req, timeout, MAX_BODY)
        .await
        .map_err(|source| ScrapeError::Net {
            url: url.clone(),
            source,
        })?;
    if !answer.status.is_success() {
        return Err(ScrapeError::Status {
            url,
            status: answer.status.as_u16(),
        });
    }
    let text =
        std::str::from_utf8(&answer.body).map_err(|_| ScrapeError::NotText { url: url.clone() })?;
    Reading::parse(text, s).map_err(|source| ScrapeError::Parse { url, source })
}
