//! The tenant outbox's I/O: `POST /v1/incidents` stores an agent's report
//! as an `Incident` in the operator's namespace before it answers, and
//! `GET /v1/incidents/<id>` tells the agent where it is. Both take the
//! Agent's token as `Authorization: Bearer` and its name as `X-Exo-Agent:
//! <namespace>/<name>`, checked like a check-in (the same cached token
//! tag). Any replica answers; the apiserver is the store.
//!
//! Answers (JSON, or plain text for a refusal that names the field or
//! limit):
//! - `202 {"id","state"}`: stored now; `200` with the same body when the
//!   agent's `idempotencyKey` was stored before (nothing stored twice);
//! - `400` a bad body (the field named), `413` too large, `429` past the
//!   agent's rate (`Retry-After`), `401` any identity problem (one
//!   answer for all), `404` an id that is not this tenant's (the same as
//!   one that does not exist), `503` the apiserver could not be asked.
//!
//! Nothing of the token, the summary or the detail is logged: a log line
//! names the agent, the incident id, the severity and the outcome.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use kube::api::{Api, PostParams};
use tracing::{info, warn};

use super::HttpState;
use super::checkin_receiver::check;
use crate::crd::Incident;
use crate::incident::{self, RateLimit, Refusal};
use crate::meta::FIELD_MANAGER;
use crate::names::{is_dns1123_label, is_dns1123_subdomain};
use crate::operator::monitor::checkin::{AgentRef, bearer};

/// Where the routes start.
pub const PATH: &str = "/v1/incidents";
/// The header naming the agent.
pub const AGENT_HEADER: &str = "x-exo-agent";

/// What the incident routes share.
#[derive(Debug)]
pub struct Intake {
    /// The operator's namespace, where incidents are kept.
    pub home: String,
    pub limit: RateLimit,
}

impl Intake {
    /// Incidents kept in `home`, at most `per_minute` per agent (a burst
    /// of a quarter of that, at least 5).
    pub fn new(home: String, per_minute: u32) -> Self {
        Self {
            home,
            limit: RateLimit::new(per_minute, (per_minute / 4).max(5)),
        }
    }
}

/// How a request ended.
#[derive(Debug)]
enum Answer {
    Stored { id: String, fresh: bool },
    Read(Box<Incident>),
    Refused(Refusal),
    Unauthorized,
    NotFound,
    MethodNotAllowed(&'static str),
    Unavailable,
}

impl Answer {
    fn label(&self) -> &'static str {
        match self {
            Answer::Stored { fresh: true, .. } => "stored",
            Answer::Stored { fresh: false, .. } => "duplicate",
            Answer::Read(_) => "read",
            Answer::Refused(Refusal::RateLimited { .. }) => "rate_limited",
            Answer::Refused(_) => "refused",
            Answer::Unauthorized => "unauthorized",
            Answer::NotFound => "not_found",
            Answer::MethodNotAllowed(_) => "method_not_allowed",
            Answer::Unavailable => "unavailable",
        }
    }
}

/// The agent a request names (`X-Exo-Agent: <namespace>/<name>`).
fn agent_of(headers: &HeaderMap) -> Option<AgentRef> {
    let v = headers.get(AGENT_HEADER)?.to_str().ok()?;
    let (namespace, name) = v.trim().split_once('/')?;
    (is_dns1123_label(namespace) && is_dns1123_subdomain(name)).then(|| AgentRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// The agent, once its token is proved; the token with it.
async fn authenticate(
    headers: &HeaderMap,
    state: &HttpState,
) -> Result<(AgentRef, String), Answer> {
    let (Some(agent), Some(token)) = (agent_of(headers), bearer(headers)) else {
        return Err(Answer::Unauthorized);
    };
    match check(state.client.as_ref(), &state.checkins, &agent, token).await {
        Ok(true) => Ok((agent, String::from_utf8_lossy(token).into_owned())),
        Ok(false) => Err(Answer::Unauthorized),
        Err(e) => {
            warn!(%agent, error = %e, "incident: apiserver call failed");
            Err(Answer::Unavailable)
        }
    }
}

async fn post(
    req: Request<Incoming>,
    state: &HttpState,
    intake: &Intake,
) -> (Option<AgentRef>, Answer) {
    let (agent, token) = match authenticate(req.headers(), state).await {
        Ok(a) => a,
        Err(answer) => return (None, answer),
    };
    let body = match Limited::new(req.into_body(), incident::MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return (Some(agent), Answer::Refused(Refusal::TooLarge));
        }
        Err(_) => {
            return (
                Some(agent),
                Answer::Refused(Refusal::Malformed("the body was cut off".into())),
            );
        }
    };
    let report = match incident::parse(&body) {
        Ok(r) => r,
        Err(refusal) => return (Some(agent), Answer::Refused(refusal)),
    };
    if let Err(refusal) = intake.limit.take(&agent.to_string(), Instant::now()) {
        return (Some(agent), Answer::Refused(refusal));
    }
    let Some(client) = state.client.as_ref() else {
        return (Some(agent), Answer::Unavailable);
    };
    let inc = incident::build(
        &report,
        &agent.namespace,
        &agent.name,
        &token,
        &intake.home,
        crate::rollout::now(),
    );
    let id = inc.metadata.name.clone().unwrap_or_default();
    let api: Api<Incident> = Api::namespaced(client.clone(), &intake.home);
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let answer = match api.create(&pp, &inc).await {
        Ok(_) => Answer::Stored {
            id: id.clone(),
            fresh: true,
        },
        // The same agent's same key: stored before (the name says so).
        Err(kube::Error::Api(s)) if s.code == 409 => Answer::Stored {
            id: id.clone(),
            fresh: false,
        },
        Err(e) => {
            warn!(%agent, incident = %id, error = %e, "incident: cannot store it");
            Answer::Unavailable
        }
    };
    if matches!(answer, Answer::Stored { .. }) {
        info!(%agent, incident = %id, severity = report.severity.as_str(), "incident received");
    }
    (Some(agent), answer)
}

async fn get(
    req: &Request<Incoming>,
    state: &HttpState,
    intake: &Intake,
    id: &str,
) -> (Option<AgentRef>, Answer) {
    let (agent, _) = match authenticate(req.headers(), state).await {
        Ok(a) => a,
        Err(answer) => return (None, answer),
    };
    if !incident::valid_id(id) {
        return (Some(agent), Answer::NotFound);
    }
    let Some(client) = state.client.as_ref() else {
        return (Some(agent), Answer::Unavailable);
    };
    let answer = match Api::<Incident>::namespaced(client.clone(), &intake.home)
        .get_opt(id)
        .await
    {
        // Another tenant's incident is answered like a missing one.
        Ok(Some(inc)) if inc.spec.tenant == agent.namespace => Answer::Read(Box::new(inc)),
        Ok(_) => Answer::NotFound,
        Err(e) => {
            warn!(%agent, incident = %id, error = %e, "incident: cannot read it");
            Answer::Unavailable
        }
    };
    (Some(agent), answer)
}

fn json(status: StatusCode, body: &impl serde::Serialize) -> Response<Full<Bytes>> {
    let text = serde_json::to_string(body).unwrap_or_else(|_| "{}".to_owned());
    let mut resp = super::text(status, text, "application/json");
    resp.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    resp
}

fn render(answer: &Answer) -> Response<Full<Bytes>> {
    match answer {
        Answer::Stored { id, fresh } => json(
            if *fresh {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            },
            &serde_json::json!({"id": id, "state": "received"}),
        ),
        Answer::Read(inc) => json(StatusCode::OK, &incident::tenant_view(inc)),
        Answer::Refused(r) => {
            let status = match r {
                Refusal::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
                Refusal::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
                Refusal::Malformed(_) | Refusal::Field { .. } => StatusCode::BAD_REQUEST,
            };
            let mut resp = super::text(status, format!("{r}\n"), super::PLAIN);
            if let Refusal::RateLimited { retry_after, .. } = r
                && let Ok(v) = hyper::header::HeaderValue::from_str(&retry_after.to_string())
            {
                resp.headers_mut().insert(hyper::header::RETRY_AFTER, v);
            }
            resp
        }
        Answer::Unauthorized => {
            let mut resp = super::text(
                StatusCode::UNAUTHORIZED,
                "unauthorized: send the Agent's token as Authorization: Bearer and its name as X-Exo-Agent: <namespace>/<name>\n".into(),
                super::PLAIN,
            );
            resp.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
            resp
        }
        Answer::NotFound => super::text(
            StatusCode::NOT_FOUND,
            "no such incident\n".into(),
            super::PLAIN,
        ),
        Answer::MethodNotAllowed(allow) => {
            let mut resp = super::text(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed\n".into(),
                super::PLAIN,
            );
            resp.headers_mut().insert(
                hyper::header::ALLOW,
                hyper::header::HeaderValue::from_static(allow),
            );
            resp
        }
        Answer::Unavailable => super::text(
            StatusCode::SERVICE_UNAVAILABLE,
            "the incident could not be stored or read now; post it again\n".into(),
            super::PLAIN,
        ),
    }
}

/// Answers one `/v1/incidents` request, with a count and, for anything
/// but a success, one log line.
pub async fn respond(
    req: Request<Incoming>,
    state: &HttpState,
    intake: &Arc<Intake>,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let rest = path.strip_prefix(PATH).unwrap_or_default();
    let (agent, answer) = match (req.method(), rest) {
        (&Method::POST, "" | "/") => post(req, state, intake).await,
        (_, "" | "/") => (None, Answer::MethodNotAllowed("POST")),
        (&Method::GET, id) => {
            let id = id.trim_start_matches('/').to_owned();
            get(&req, state, intake, &id).await
        }
        _ => (None, Answer::MethodNotAllowed("GET")),
    };
    state.metrics.incidents_seen(answer.label());
    if !matches!(answer, Answer::Stored { .. } | Answer::Read(_)) {
        let agent = agent.map(|a| a.to_string()).unwrap_or_default();
        info!(%agent, outcome = answer.label(), %peer, "incident request");
    }
    render(&answer)
}
