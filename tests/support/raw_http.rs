//! One raw HTTP/1.1 request over a fresh connection, for the operator's
//! small server: headers exactly as given, a body the server may refuse
//! before reading it all.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// What came back.
pub struct Answer {
    pub status: u16,
    /// The status line and headers.
    pub head: String,
    pub body: String,
}

/// `method path` to `addr` with `headers` and `body` (a `Content-Length`
/// is added unless `Transfer-Encoding` is given).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut s = TcpStream::connect(addr).expect("connect to the operator");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
    {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    // The server may answer and close before reading all of a refused body.
    let _ = s.write_all(body);
    let mut text = Vec::new();
    let _ = s.read_to_end(&mut text);
    let text = String::from_utf8_lossy(&text).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}
