//! The one outbound HTTP client: hyper over rustls with the system's
//! roots, HTTP/1.1 with a pool of kept-alive connections, `http` or `https`
//! as the URL says, and a deadline on every call (the answer's body
//! included). The forge, the key actuator and the registry resolver use
//! it; what a message may show of an answer is theirs to decide.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{HeaderMap, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// A pooled client; cheap to clone (the pool is shared).
pub type Client =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    #[error("no TLS roots: {0}")]
    Roots(String),
    #[error("no answer in {}s", .0.as_secs())]
    Deadline(Duration),
    #[error("unreachable: {0}")]
    Unreachable(String),
    #[error("the answer broke off: {0}")]
    Broken(String),
    #[error("the answer's body is larger than {0} bytes")]
    TooLarge(usize),
}

/// A new client with its own connection pool, trusting the system's roots.
pub fn client() -> Result<Client, NetError> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| NetError::Roots(e.to_string()))?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https))
}

/// A client for plain `http` only: it reads no roots (reading the system's
/// costs a short command tens of milliseconds), so any `https` server is
/// refused as untrusted.
pub fn plain_client() -> Result<Client, NetError> {
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| NetError::Roots(e.to_string()))?
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https))
}

/// One answer: its status, headers and whole body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Sends `req` and reads the whole answer, all within `deadline`.
pub async fn send(
    client: &Client,
    req: Request<Full<Bytes>>,
    deadline: Duration,
) -> Result<Answer, NetError> {
    send_limited(client, req, deadline, usize::MAX).await
}

/// [`send`], refusing a body of more than `max` bytes (read no further).
pub async fn send_limited(
    client: &Client,
    req: Request<Full<Bytes>>,
    deadline: Duration,
    max: usize,
) -> Result<Answer, NetError> {
    let call = async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| NetError::Unreachable(chain(&e)))?;
        let (parts, body) = resp.into_parts();
        let body = http_body_util::Limited::new(body, max)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    NetError::TooLarge(max)
                } else {
                    NetError::Broken(chain(e.as_ref()))
                }
            })?
            .to_bytes();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    };
    tokio::time::timeout(deadline, call)
        .await
        .map_err(|_| NetError::Deadline(deadline))?
}

/// `s` percent-encoded for a URL's query (everything but RFC 3986's
/// unreserved characters).
pub fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An error with its sources, `: `-joined (hyper's own message alone says
/// little: "client error (Connect)").
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("client error (Connect)")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn chain_names_every_source() {
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        assert_eq!(chain(&e), "client error (Connect): connection refused");
    }

    #[test]
    fn query_values_keep_only_unreserved_characters() {
        assert_eq!(
            query_value("repository:team/app:pull"),
            "repository%3Ateam%2Fapp%3Apull"
        );
        assert_eq!(query_value("a-b_c.d~e"), "a-b_c.d~e");
    }

    #[tokio::test]
    async fn an_unreachable_server_is_named_with_its_cause() {
        // A port nothing listens on: bind, learn it, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let c = client().unwrap();
        let req = Request::get(format!("http://127.0.0.1:{port}/"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let err = send(&c, req, Duration::from_secs(5)).await.err();
        match err {
            Some(NetError::Unreachable(why)) => assert!(why.contains("refused"), "{why}"),
            other => panic!("expected Unreachable, got {other:?}"),
        }
    }
}
