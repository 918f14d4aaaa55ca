//! The operator's small HTTP server:
//! - `/healthz`: 200 while the process runs; the body lists the
//!   capabilities (`capabilities: mount-filesystems`);
//! - `/readyz`: 503 until every watch has synced once, then 200;
//! - `/metrics`: Prometheus text format;
//! - `POST /hooks/fleet/<namespace>/<name>`: the push receiver. A request
//!   signed with the Fleet's `webhookSecretRef` key stamps the Fleet's
//!   sync-requested annotation, which the leader's GitOps engine acts on; so
//!   any replica can take the push. Checks and answers are in [`hooks`];
//! - `POST /checkin/<namespace>/<agent>`: an agentlet's check-in, with the
//!   Agent's token as `Authorization: Bearer`; see [`crate::operator::monitor::checkin`];
//! - `POST /v1/incidents`, `GET /v1/incidents/<id>`: the tenant outbox, an
//!   agent's incident reports ([`incidents`]).

mod checkin_receiver;
pub mod incidents;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::hooks::{self, Doing, FleetRef, Outcome, SecretProblem};
use crate::cluster::CAPABILITIES;
use crate::cluster::error::is_not_found;
use crate::cluster::metrics::Metrics;
use crate::crd::Fleet;
use crate::meta::{ANNOTATION_SYNC_REQUESTED, FIELD_MANAGER};
use crate::operator::monitor::checkin::{self, Checkins};

const PLAIN: &str = "text/plain; charset=utf-8";

#[derive(Clone)]
pub struct HttpState {
    pub metrics: Arc<Metrics>,
    pub ready: watch::Receiver<bool>,
    pub leader: watch::Receiver<bool>,
    /// Reads Fleets and their webhook Secrets and stamps the annotation.
    /// `None` (the pure [`route`] tests) leaves the push receiver at 503.
    pub client: Option<Client>,
    /// Agent check-ins (`POST /checkin/<namespace>/<agent>`).
    pub checkins: Arc<Checkins>,
    /// Agents' incident reports (`/v1/incidents`).
    pub incidents: Arc<incidents::Intake>,
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

/// What can be decided about a hook before its body is read: the Fleet
/// it names, or the refusal.
pub fn precheck(method: &Method, path: &str, headers: &HeaderMap) -> Result<FleetRef, Outcome> {
    let fleet = hooks::parse_path(path).ok_or(Outcome::NoRoute)?;
    if method != Method::POST {
        return Err(Outcome::MethodNotAllowed);
    }
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > hooks::MAX_BODY_BYTES as u64) {
        return Err(Outcome::TooLarge);
    }
    Ok(fleet)
}

/// One push: checks, reads the bounded body, then [`receive`]. Returns the
/// Fleet the path named (for the log line) and the outcome.
async fn hook(req: Request<Incoming>, client: Option<&Client>) -> (Option<FleetRef>, Outcome) {
    let fleet = match precheck(req.method(), req.uri().path(), req.headers()) {
        Ok(f) => f,
        Err(outcome) => return (hooks::parse_path(req.uri().path()), outcome),
    };
    let (parts, body) = req.into_parts();
    // Content-Length may be absent (chunked) or wrong: the limit holds anyway.
    let body = match Limited::new(body, hooks::MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<LengthLimitError>() => return (Some(fleet), Outcome::TooLarge),
        Err(e) => {
            debug!(%fleet, error = %e, "push hook: body unreadable");
            return (Some(fleet), Outcome::BadBody);
        }
    };
    let outcome = match client {
        Some(client) => receive(client, &fleet, &parts.headers, &body).await,
        None => Outcome::Unavailable {
            fleet: fleet.clone(),
            doing: Doing::NoClient,
        },
    };
    (Some(fleet), outcome)
}

/// The Fleet, its Secret, the signature, and the one write. Nothing is
/// written unless the signature holds.
async fn receive(client: &Client, fleet: &FleetRef, headers: &HeaderMap, body: &[u8]) -> Outcome {
    let unavailable = |doing: Doing, e: &kube::Error| {
        // The detail stays in the log: the caller is not yet trusted.
        warn!(%fleet, ?doing, error = %e, "push hook: apiserver call failed");
        Outcome::Unavailable {
            fleet: fleet.clone(),
            doing,
        }
    };
    let fleets: Api<Fleet> = Api::namespaced(client.clone(), &fleet.namespace);
    let cr = match fleets.get_opt(&fleet.name).await {
        Ok(Some(cr)) => cr,
        Ok(None) => return Outcome::UnknownFleet(fleet.clone()),
        Err(e) => return unavailable(Doing::ReadFleet, &e),
    };
    let Some(secret) = cr.spec.webhook_secret_ref else {
        return Outcome::NoSecretRef(fleet.clone());
    };
    let problem = |problem: SecretProblem| Outcome::Secret {
        fleet: fleet.clone(),
        secret: secret.clone(),
        problem,
    };
    if !crate::names::is_dns1123_subdomain(&secret) {
        return problem(SecretProblem::InvalidName);
    }
    let data = match Api::<Secret>::namespaced(client.clone(), &fleet.namespace)
        .get_opt(&secret)
        .await
    {
        Ok(Some(s)) => s.data.unwrap_or_default(),
        Ok(None) => return problem(SecretProblem::NotFound),
        Err(e) => return unavailable(Doing::ReadSecret, &e),
    };
    let Some(raw) = data.get(hooks::SECRET_KEY) else {
        return problem(SecretProblem::NoKey);
    };
    let Some(key) = hooks::key_from_secret(&raw.0) else {
        return problem(SecretProblem::EmptyKey);
    };
    if let Err(e) = hooks::verify(key, body, headers) {
        return Outcome::Unauthorized(e);
    }
    let stamp = hooks::sync_stamp(k8s_openapi::jiff::Timestamp::now());
    let patch =
        serde_json::json!({"metadata": {"annotations": {ANNOTATION_SYNC_REQUESTED: stamp}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match fleets
        .patch(&fleet.name, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Outcome::Accepted,
        // Deleted since it was read.
        Err(e) if is_not_found(&e) => Outcome::UnknownFleet(fleet.clone()),
        Err(e) => unavailable(Doing::PatchFleet, &e),
    }
}

/// Answers one request of any kind, logging one line per hook.
async fn respond(
    req: Request<Incoming>,
    state: &HttpState,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    if req.uri().path().starts_with(checkin::PATH_PREFIX) {
        return checkin_receiver::respond(req, state, peer).await;
    }
    let path = req.uri().path();
    if path == incidents::PATH
        || path
            .strip_prefix(incidents::PATH)
            .is_some_and(|rest| rest.starts_with('/'))
    {
        let intake = state.incidents.clone();
        return incidents::respond(req, state, &intake, peer).await;
    }
    if !req.uri().path().starts_with(hooks::PATH_PREFIX) {
        return route(req.uri().path(), state);
    }
    let (fleet, outcome) = hook(req, state.client.as_ref()).await;
    let fleet = fleet.map(|f| f.to_string()).unwrap_or_default();
    let status = outcome.status().as_u16();
    let label = outcome.label();
    match outcome {
        // Not a hook at all (scanners): kept out of the info log.
        Outcome::NoRoute => debug!(outcome = label, status, %peer, "push hook"),
        Outcome::Secret { .. } | Outcome::Unavailable { .. } => {
            warn!(%fleet, outcome = label, status, %peer, "push hook")
        }
        _ => info!(%fleet, outcome = label, status, %peer, "push hook"),
    }
    let mut resp = text(outcome.status(), outcome.message(), PLAIN);
    if outcome == Outcome::MethodNotAllowed {
        resp.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("POST"),
        );
    }
    resp
}

/// Binds `addr` and returns the bound address and the serving future.
pub async fn bind(
    addr: SocketAddr,
    state: HttpState,
) -> std::io::Result<(SocketAddr, impl std::future::Future<Output = ()> + Send)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    info!(addr = %local, "serving /healthz, /readyz, /metrics, /hooks/fleet/, /checkin/ and /v1/incidents");
    let serve = async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
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
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(respond(req, &state, peer).await) }
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
            client: None,
            checkins: Arc::new(Checkins::with_key(
                [0; 32],
                std::time::Duration::from_secs(60),
            )),
            incidents: Arc::new(incidents::Intake::new("exo-system".into(), 60)),
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

    #[test]
    fn hook_prechecks() {
        let len = |n: usize| {
            let mut h = HeaderMap::new();
            h.insert(hyper::header::CONTENT_LENGTH, n.into());
            h
        };
        let fleet = || {
            Ok(FleetRef {
                namespace: "ns".into(),
                name: "main".into(),
            })
        };
        let max = hooks::MAX_BODY_BYTES;
        let cases = [
            (
                Method::POST,
                "/hooks/fleet/ns/main",
                HeaderMap::new(),
                fleet(),
            ),
            (Method::POST, "/hooks/fleet/ns/main", len(max), fleet()),
            (
                Method::POST,
                "/hooks/fleet/ns/main",
                len(max + 1),
                Err(Outcome::TooLarge),
            ),
            (
                Method::GET,
                "/hooks/fleet/ns/main",
                HeaderMap::new(),
                Err(Outcome::MethodNotAllowed),
            ),
            (
                Method::PUT,
                "/hooks/fleet/ns/main",
                HeaderMap::new(),
                Err(Outcome::MethodNotAllowed),
            ),
            // An unknown path is 404 whatever the method.
            (
                Method::GET,
                "/hooks/fleet/ns",
                HeaderMap::new(),
                Err(Outcome::NoRoute),
            ),
            (
                Method::POST,
                "/hooks/fleet/ns/a/b",
                HeaderMap::new(),
                Err(Outcome::NoRoute),
            ),
            (
                Method::POST,
                "/hooks/other",
                len(max + 1),
                Err(Outcome::NoRoute),
            ),
        ];
        for (method, path, headers, want) in cases {
            assert_eq!(precheck(&method, path, &headers), want, "{method} {path}");
        }
    }
}
