//! `GET /api/v1/fleet/rollouts[?tenant=NS][&wave=W]`: the fleet view across
//! clusters (`wire::fleet`), answered by whichever replica is asked, from
//! the shared database (it never hops).
//!
//! Who may ask: a full admin token (or session), and an operator's own
//! deployment token for one tenant (`?tenant=` required), which is how an
//! operator holds a tenant's removal until its new cluster has verified
//! it. A lane-scoped token is refused here as by the middleware.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::api::error;
use super::authn::Scope;
use crate::controlplane::App;
use crate::controlplane::fleet;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetQuery {
    /// Only this tenant's Rollouts (its namespace).
    pub tenant: Option<String>,
    /// Only the Rollouts of this wave (`spec.wave`).
    pub wave: Option<String>,
}

/// Why `scope` may not read this query; `None` when it may.
pub fn refusal(scope: &Scope, tenant: Option<&str>) -> Option<&'static str> {
    match (scope, tenant) {
        (Scope::All, _) | (Scope::Deployment(_), Some(_)) => None,
        (Scope::Deployment(_), None) => Some(
            "a deployment token reads one tenant's Rollouts: add ?tenant=NAME \
             (an admin token reads the whole fleet)",
        ),
        (Scope::Lane(_), _) => Some("a lane-scoped admin token may not read the fleet view"),
    }
}

pub async fn rollouts(
    State(app): State<Arc<App>>,
    Extension(scope): Extension<Scope>,
    Query(q): Query<FleetQuery>,
) -> Response {
    if let Some(why) = refusal(&scope, q.tenant.as_deref()) {
        return error(StatusCode::FORBIDDEN, why);
    }
    if let Some(t) = q.tenant.as_deref()
        && !crate::names::is_dns1123_label(t)
    {
        return error(
            StatusCode::BAD_REQUEST,
            format!("tenant {t:?} is not a namespace name"),
        );
    }
    match fleet::view(&app, q.tenant.as_deref(), q.wave.as_deref()).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "fleet view unreadable");
            error(StatusCode::SERVICE_UNAVAILABLE, e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_may_read_what() {
        let dep = Scope::Deployment("eu".into());
        let lane = Scope::Lane("desk".into());
        assert_eq!(refusal(&Scope::All, None), None);
        assert_eq!(refusal(&Scope::All, Some("acme")), None);
        assert_eq!(refusal(&dep, Some("acme")), None);
        assert!(refusal(&dep, None).unwrap().contains("?tenant="));
        assert!(refusal(&lane, None).is_some());
        assert!(refusal(&lane, Some("acme")).is_some());
    }
}
