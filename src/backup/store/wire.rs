//! The HTTP pieces every call shares: a request, a header's value, the
//! next page's link, and a body read while hashed and cut off at a limit.

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use sha2::{Digest as _, Sha256};

use crate::net;

pub(super) fn request(
    method: Method,
    url: &str,
    headers: &[(&str, String)],
    authorization: Option<&str>,
    body: Bytes,
) -> Result<Request<Full<Bytes>>, hyper::http::Error> {
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    req.body(Full::new(body))
}

pub(super) fn header(resp: &Response<Incoming>, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The `rel="next"` target of a `Link` header's value. Pure.
pub(super) fn next_link(link: Option<&str>) -> Option<String> {
    let (target, params) = link?.split_once(';')?;
    params.contains("rel=\"next\"").then(|| {
        target
            .trim()
            .trim_start_matches('<')
            .trim_end_matches('>')
            .to_owned()
    })
}

pub(super) enum ReadError {
    TooLong,
    Broken(String),
}

/// A body, read to its end while hashed, refused once past `limit`.
pub(super) async fn read_hashed(
    mut body: Incoming,
    limit: u64,
) -> Result<(Bytes, String), ReadError> {
    let mut hasher = Sha256::new();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ReadError::Broken(net::chain(&e)))?;
        if let Ok(data) = frame.into_data() {
            if out.len() as u64 + data.len() as u64 > limit {
                return Err(ReadError::TooLong);
            }
            hasher.update(&data);
            out.extend_from_slice(&data);
        }
    }
    Ok((
        Bytes::from(out),
        format!("sha256:{}", hex::encode(hasher.finalize())),
    ))
}
