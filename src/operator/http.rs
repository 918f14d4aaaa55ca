//! The operator's small HTTP server:
//! - `/healthz`: 200 while the process runs; the body lists the
//!   capabilities (`capabilities: mount-filesystems`);
//! - `/readyz`: 503 until every watch has synced once, then 200;
//! - `/metrics`: Prometheus text format.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info};

use super::CAPABILITIES;
use super::metrics::Metrics;

#[derive(Clone)]
pub struct HttpState {
    pub metrics: Arc<Metrics>,
    pub ready: watch::Receiver<bool>,
    pub leader: watch::Receiver<bool>,
}

fn text(status: StatusCode, body: String, content_type: &'static str) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    resp
}

/// Answers one request; pure over the state, so it is testable.
pub fn route(path: &str, state: &HttpState) -> Response<Full<Bytes>> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    match path {
        "/healthz" | "/livez" => text(
            StatusCode::OK,
            format!(
                "ok\ncapabilities: {}\nleader: {}\n",
                CAPABILITIES.join(","),
                *state.leader.borrow()
            ),
            PLAIN,
        ),
        "/readyz" => {
            if *state.ready.borrow() {
                text(StatusCode::OK, "ready\n".into(), PLAIN)
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "watches have not synced yet\n".into(),
                    PLAIN,
                )
            }
        }
        "/metrics" => text(
            StatusCode::OK,
            state.metrics.encode(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        _ => text(StatusCode::NOT_FOUND, "not found\n".into(), PLAIN),
    }
}

/// Binds `addr` and returns the bound address and the serving future.
pub async fn bind(
    addr: SocketAddr,
    state: HttpState,
) -> std::io::Result<(SocketAddr, impl std::future::Future<Output = ()> + Send)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    info!(addr = %local, "serving /healthz, /readyz and /metrics");
    let serve = async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: back off, don't spin.
                    debug!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let state = state.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let resp = route(req.uri().path(), &state);
                    async move { Ok::<_, Infallible>(resp) }
                });
                if let Err(e) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await
                {
                    debug!(error = %e, "http connection ended");
                }
            });
        }
    };
    Ok((local, serve))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_follows_the_sync_flag() {
        let (ready_tx, ready) = watch::channel(false);
        let (_l, leader) = watch::channel(false);
        let state = HttpState {
            metrics: Arc::new(Metrics::new()),
            ready,
            leader,
        };
        assert_eq!(
            route("/readyz", &state).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        ready_tx.send_replace(true);
        assert_eq!(route("/readyz", &state).status(), StatusCode::OK);
        assert_eq!(route("/healthz", &state).status(), StatusCode::OK);
        assert_eq!(route("/metrics", &state).status(), StatusCode::OK);
        assert_eq!(route("/nope", &state).status(), StatusCode::NOT_FOUND);
    }
}
