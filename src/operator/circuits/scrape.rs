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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-connection server on 127.0.0.1 answering `answer` (raw HTTP);
    /// `None` never answers. Returns the target pointing at it.
    async fn serve(answer: Option<String>) -> Target {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await;
            match answer {
                Some(a) => {
                    let _ = sock.write_all(a.as_bytes()).await;
                }
                None => tokio::time::sleep(Duration::from_secs(30)).await,
            }
        });
        Target {
            tenant: "t1".into(),
            service: "litellm".into(),
            url: format!("http://127.0.0.1:{port}/metrics"),
        }
    }

    fn http(status: &str, body: &str) -> Option<String> {
        Some(format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ))
    }

    #[tokio::test]
    async fn a_scrape_reads_the_page_or_says_why_not_in_a_category() {
        let client = net::plain_client().unwrap();
        let s = Settings::default();
        let t = Duration::from_secs(2);
        let ok = serve(http(
            "200 OK",
            "litellm_deployment_state{model_id=\"d1\",litellm_model_name=\"gpt-4o\"} 2\n",
        ))
        .await;
        let r = scrape(&client, &ok, t, &s).await.unwrap();
        assert_eq!(r.deployments["d1"].state, 2.0);
        let big = "x 1\n".repeat(MAX_BODY / 4 + 1);
        let cases = [
            (
                http("503 Service Unavailable", "down"),
                "status",
                "answered HTTP 503",
            ),
            (
                http("200 OK", "x{y=1} 1\n"),
                "parse",
                "line 1: a label value must be quoted",
            ),
            (
                http("200 OK", &big),
                "too_large",
                "larger than 8388608 bytes",
            ),
            (None, "timeout", "no answer in 0s"),
        ];
        for (answer, category, says) in cases {
            let deadline = if answer.is_none() {
                Duration::from_millis(300)
            } else {
                t
            };
            let target = serve(answer).await;
            let e = scrape(&client, &target, deadline, &s).await.unwrap_err();
            assert_eq!(e.category(), category, "{e}");
            let text = e.to_string();
            assert!(
                text.starts_with(&target.url) && text.contains(says),
                "{text}"
            );
        }
        let nobody = Target {
            url: format!("http://127.0.0.1:{}/metrics", free_port()),
            ..ok
        };
        let e = scrape(&client, &nobody, t, &s).await.unwrap_err();
        assert_eq!(e.category(), "unreachable", "{e}");
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap()
    }
}
