//! A counting proxy in front of a test registry: blob HEADs, upload POSTs
//! and PUTs (and their bytes) and manifest PUTs counted on the wire,
//! independently of the client under test; one blob can be corrupted on
//! its way back. Upload Locations point back at the proxy, because the
//! registry writes them for the request's Host, which is passed through.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hyper::body::Bytes;

/// What the registry was asked, counted on the wire.
#[derive(Default)]
pub struct Counts {
    pub blob_heads: AtomicU64,
    pub upload_posts: AtomicU64,
    pub upload_puts: AtomicU64,
    pub upload_bytes: AtomicU64,
    pub manifest_puts: AtomicU64,
}

impl Counts {
    pub fn reset(&self) {
        for c in [
            &self.blob_heads,
            &self.upload_posts,
            &self.upload_puts,
            &self.upload_bytes,
            &self.manifest_puts,
        ] {
            c.store(0, Ordering::SeqCst);
        }
    }

    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::SeqCst)
    }
}

/// A loopback proxy in front of a registry that counts blob uploads and
/// can corrupt one blob's bytes on the way back.
pub struct RegistryProxy {
    /// `127.0.0.1:PORT`, a registry name for clients.
    pub addr: String,
    pub counts: Arc<Counts>,
    /// A blob digest whose bytes are flipped in the middle on every GET.
    pub corrupt: Arc<Mutex<Option<String>>>,
    /// Upload PUTs (counted since the last reset) forwarded before every
    /// further one is answered 503; unlimited by default.
    pub uploads_allowed: Arc<AtomicU64>,
    /// Upload PUTs past this many hang, unanswered, until it is raised;
    /// then they are refused (503) and never reach the registry: a backup
    /// caught in the middle, for a kill.
    pub hold_after: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
    state: ProxyState,
}

impl Drop for RegistryProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct ProxyState {
    upstream: String,
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        http_body_util::Full<Bytes>,
    >,
    counts: Arc<Counts>,
    corrupt: Arc<Mutex<Option<String>>>,
    uploads_allowed: Arc<AtomicU64>,
    hold_after: Arc<AtomicU64>,
}

async fn forward(
    axum::extract::State(st): axum::extract::State<ProxyState>,
    req: axum::extract::Request,
) -> axum::response::Response {
    use http_body_util::BodyExt;
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let method = parts.method.clone();
    if path.contains("/blobs/uploads/") && method == axum::http::Method::PUT {
        // Held before its body is read: a killed client's bytes that are
        // already on the way cannot slip through after a release.
        let mut held = false;
        while st.counts.upload_puts.load(Ordering::SeqCst) >= st.hold_after.load(Ordering::SeqCst) {
            held = true;
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        if held {
            // Its client was killed while it hung: it never arrives.
            return axum::response::Response::builder()
                .status(503)
                .body(axum::body::Body::from("held for the test"))
                .unwrap();
        }
    }
    let Ok(body) = axum::body::to_bytes(body, 64 << 20).await else {
        // The client went away in the middle of its request.
        return axum::response::Response::builder()
            .status(400)
            .body(axum::body::Body::from("request cut off"))
            .unwrap();
    };
    if path.contains("/blobs/uploads/") {
        if method == axum::http::Method::POST {
            st.counts.upload_posts.fetch_add(1, Ordering::SeqCst);
        }
        if method == axum::http::Method::PUT {
            // Past the allowance the registry is "down": a 503 and nothing
            // forwarded, so the blob is not stored.
            if st.counts.upload_puts.load(Ordering::SeqCst)
                >= st.uploads_allowed.load(Ordering::SeqCst)
            {
                return axum::response::Response::builder()
                    .status(503)
                    .body(axum::body::Body::from("down for the test"))
                    .unwrap();
            }
            st.counts.upload_puts.fetch_add(1, Ordering::SeqCst);
            st.counts
                .upload_bytes
                .fetch_add(body.len() as u64, Ordering::SeqCst);
        }
    } else if path.contains("/blobs/") && method == axum::http::Method::HEAD {
        st.counts.blob_heads.fetch_add(1, Ordering::SeqCst);
    } else if path.contains("/manifests/") && method == axum::http::Method::PUT {
        st.counts.manifest_puts.fetch_add(1, Ordering::SeqCst);
    }
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    // The Host header is kept: the registry writes its upload Locations
    // for it, so they point back at this proxy.
    let mut out = hyper::Request::builder()
        .method(method.clone())
        .uri(format!("http://{}{path}{query}", st.upstream));
    for (k, v) in &parts.headers {
        out = out.header(k, v);
    }
    let resp = st
        .client
        .request(out.body(http_body_util::Full::new(body)).unwrap())
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    let mut bytes = body.collect().await.unwrap().to_bytes().to_vec();
    let target = st.corrupt.lock().unwrap().clone();
    if let Some(digest) = target
        && method == axum::http::Method::GET
        && path.ends_with(&format!("/blobs/{digest}"))
        && !bytes.is_empty()
    {
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
    }
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

impl RegistryProxy {
    /// A proxy in front of `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> Self {
        let counts = Arc::new(Counts::default());
        let corrupt = Arc::new(Mutex::new(None));
        let uploads_allowed = Arc::new(AtomicU64::new(u64::MAX));
        let hold_after = Arc::new(AtomicU64::new(u64::MAX));
        let state = ProxyState {
            upstream: upstream.to_owned(),
            client: hyper_util::client::legacy::Client::builder(
                hyper_util::rt::TokioExecutor::new(),
            )
            .build_http(),
            counts: Arc::clone(&counts),
            corrupt: Arc::clone(&corrupt),
            uploads_allowed: Arc::clone(&uploads_allowed),
            hold_after: Arc::clone(&hold_after),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = serve(listener, state.clone());
        RegistryProxy {
            addr,
            counts,
            corrupt,
            uploads_allowed,
            hold_after,
            task,
            state,
        }
    }

    /// Stops listening: the registry is unreachable (connection refused)
    /// at this address until [`RegistryProxy::resume`].
    pub fn stop(&mut self) {
        self.task.abort();
    }

    /// Listens again at the same address.
    pub async fn resume(&mut self) {
        self.task.abort();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let listener = loop {
            match tokio::net::TcpListener::bind(&self.addr).await {
                Ok(l) => break l,
                // The aborted server may take a moment to let go of it.
                Err(e) if std::time::Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => panic!("listen again on {}: {e}", self.addr),
            }
        };
        self.task = serve(listener, self.state.clone());
    }
}

fn serve(listener: tokio::net::TcpListener, state: ProxyState) -> tokio::task::JoinHandle<()> {
    let app = axum::Router::new().fallback(forward).with_state(state);
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    })
}
