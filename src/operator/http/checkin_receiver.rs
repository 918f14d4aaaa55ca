//! The check-in endpoint's I/O: read the Agent's token Secret by name (the
//! operator cannot list or watch Secrets; a tag of the token is cached for
//! [`crate::operator::monitor::checkin::TOKEN_TTL`]), check the bearer token, record the check-in and
//! stamp the Agent's `autonomic.sh/last-checkin` annotation when due. Any
//! replica answers; only the leader's monitor reads the annotation.

use std::net::SocketAddr;
use std::time::Instant;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use tracing::{debug, info, warn};

use crate::operator::monitor::checkin::{AgentRef, Checkins, Known, Outcome, bearer, parse_path};

use crate::crd::Agent;

use super::HttpState;
use crate::cluster::build::agent_secret_name;
use crate::cluster::error::is_not_found;
use crate::meta::{ANNOTATION_LAST_CHECKIN, FIELD_MANAGER, TOKEN_KEY};

/// Why the apiserver could not be used (kept in the log only).
#[derive(Debug, thiserror::Error)]
pub enum ReceiverError {
    #[error("no Kubernetes client")]
    NoClient,
    #[error("get Secret {namespace}/{name}")]
    ReadSecret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("patch Agent {agent} annotation {ANNOTATION_LAST_CHECKIN}")]
    PatchAgent {
        agent: AgentRef,
        #[source]
        source: kube::Error,
    },
}

/// The tag of the Agent's token, from the cache or a fresh read.
async fn token_tag(
    client: Option<&Client>,
    checkins: &Checkins,
    agent: &AgentRef,
    fresh: bool,
) -> Result<Option<[u8; 32]>, ReceiverError> {
    let now = Instant::now();
    if !fresh && let Known::Fresh(tag) = checkins.tokens.get(agent, now) {
        return Ok(tag);
    }
    let client = client.ok_or(ReceiverError::NoClient)?;
    let name = agent_secret_name(&agent.name);
    let secret = Api::<Secret>::namespaced(client.clone(), &agent.namespace)
        .get_opt(&name)
        .await
        .map_err(|source| ReceiverError::ReadSecret {
            namespace: agent.namespace.clone(),
            name: name.clone(),
            source,
        })?;
    let tag = secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(TOKEN_KEY).map(|t| t.0.clone()))
        .filter(|t| !t.trim_ascii().is_empty())
        .map(|t| checkins.verifier.tag(t.trim_ascii()));
    checkins.tokens.put(agent, tag, now);
    Ok(tag)
}

/// Whether `presented` is `agent`'s token (the cached tag, read again
/// sparingly for a re-created Agent). The incident routes use it too.
pub(super) async fn check(
    client: Option<&Client>,
    checkins: &Checkins,
    agent: &AgentRef,
    presented: &[u8],
) -> Result<bool, ReceiverError> {
    let matches =
        |tag: Option<[u8; 32]>| tag.is_some_and(|t| checkins.verifier.matches(presented, &t));
    if matches(token_tag(client, checkins, agent, false).await?) {
        return Ok(true);
    }
    // A re-created Agent has a new token: read again, but sparingly.
    if checkins.tokens.may_recheck(agent, Instant::now()) {
        return Ok(matches(token_tag(client, checkins, agent, true).await?));
    }
    Ok(false)
}

async fn stamp(
    client: Option<&Client>,
    agent: &AgentRef,
    now: Timestamp,
) -> Result<bool, ReceiverError> {
    let client = client.ok_or(ReceiverError::NoClient)?;
    let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION_LAST_CHECKIN: now.to_string()}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match Api::<Agent>::namespaced(client.clone(), &agent.namespace)
        .patch_metadata(&agent.name, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(true),
        // The Secret outlived its Agent for a moment.
        Err(e) if is_not_found(&e) => Ok(false),
        Err(source) => Err(ReceiverError::PatchAgent {
            agent: agent.clone(),
            source,
        }),
    }
}

async fn receive(req: &Request<Incoming>, state: &HttpState) -> (Option<AgentRef>, Outcome) {
    let Some(agent) = parse_path(req.uri().path()) else {
        return (None, Outcome::NoRoute);
    };
    if req.method() != Method::POST {
        return (Some(agent), Outcome::MethodNotAllowed);
    }
    let Some(presented) = bearer(req.headers()) else {
        return (Some(agent), Outcome::Unauthorized);
    };
    let client = state.client.as_ref();
    let checkins = &state.checkins;
    match check(client, checkins, &agent, presented).await {
        Ok(true) => {}
        Ok(false) => return (Some(agent), Outcome::Unauthorized),
        Err(e) => {
            warn!(%agent, error = %e, "check-in: apiserver call failed");
            return (Some(agent), Outcome::Unavailable);
        }
    }
    let now = Timestamp::now();
    if checkins.book.record(&agent, now.as_millisecond()) {
        match stamp(client, &agent, now).await {
            Ok(true) => checkins.book.written(&agent, now.as_millisecond()),
            Ok(false) => return (Some(agent), Outcome::Unauthorized),
            // Recorded here; the next check-in tries the write again.
            Err(e) => warn!(%agent, error = %e, "check-in: cannot stamp the Agent"),
        }
    }
    (Some(agent), Outcome::Accepted)
}

/// Answers one `/checkin/` request, with one log line and a count.
pub async fn respond(
    req: Request<Incoming>,
    state: &HttpState,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    let (agent, outcome) = receive(&req, state).await;
    let agent = agent.map(|a| a.to_string()).unwrap_or_default();
    let status = outcome.status();
    state.metrics.checked_in(outcome.label());
    match outcome {
        Outcome::Accepted | Outcome::NoRoute => {
            debug!(%agent, outcome = outcome.label(), status = status.as_u16(), %peer, "check-in")
        }
        _ => info!(%agent, outcome = outcome.label(), status = status.as_u16(), %peer, "check-in"),
    }
    let mut resp = Response::new(Full::new(Bytes::from_static(outcome.message().as_bytes())));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    if outcome != Outcome::Accepted {
        headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
    }
    match outcome {
        Outcome::Unauthorized => {
            headers.insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
        }
        Outcome::MethodNotAllowed => {
            headers.insert(
                hyper::header::ALLOW,
                hyper::header::HeaderValue::from_static("POST"),
            );
        }
        _ => {}
    }
    resp
}
