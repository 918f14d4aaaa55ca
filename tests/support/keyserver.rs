//! A small LiteLLM-compatible key server for the tenant sagas' HTTP key
//! actuator: `/key/generate`, `/key/info`, `/key/delete`, bearer-token
//! authenticated. It records every call (what, which key, when) so a test
//! can say how often a key was minted and when it was revoked.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `generate`, `info` or `delete`.
    pub what: &'static str,
    pub key: String,
    pub models: Vec<String>,
    pub tenant: Option<String>,
    pub at: SystemTime,
}

#[derive(Default)]
struct Inner {
    keys: BTreeSet<String>,
    calls: Vec<Call>,
    refused: usize,
}

#[derive(Clone)]
pub struct KeyServer {
    pub url: String,
    pub token: String,
    inner: Arc<Mutex<Inner>>,
    _task: Arc<tokio::task::JoinHandle<()>>,
}

impl KeyServer {
    pub async fn start(token: &str) -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let state = (inner.clone(), format!("Bearer {token}"));
        let app = axum::Router::new()
            .route("/key/generate", post(generate))
            .route("/key/info", get(info))
            .route("/key/delete", post(delete))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        KeyServer {
            url: format!("http://{addr}"),
            token: token.to_owned(),
            inner,
            _task: Arc::new(task),
        }
    }

    pub fn calls(&self) -> Vec<Call> {
        self.inner.lock().unwrap().calls.clone()
    }

    /// Calls refused for a wrong or missing token.
    pub fn refused(&self) -> usize {
        self.inner.lock().unwrap().refused
    }

    pub fn live_keys(&self) -> BTreeSet<String> {
        self.inner.lock().unwrap().keys.clone()
    }
}

type St = (Arc<Mutex<Inner>>, String);

fn authorised(st: &St, headers: &HeaderMap) -> bool {
    let ok = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == st.1);
    if !ok {
        st.0.lock().unwrap().refused += 1;
    }
    ok
}

async fn generate(
    State(st): State<St>,
    headers: HeaderMap,
    Json(body): Json<serde_json::Value>,
) -> (StatusCode, Json<serde_json::Value>) {
    if !authorised(&st, &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(serde_json::json!({"error": "no"})),
        );
    }
    let key = body["key"].as_str().unwrap_or_default().to_owned();
    let mut inner = st.0.lock().unwrap();
    inner.calls.push(Call {
        what: "generate",
        key: key.clone(),
        models: body["models"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| m.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        tenant: body["metadata"]["tenant"].as_str().map(str::to_owned),
        at: SystemTime::now(),
    });
    if !inner.keys.insert(key.clone()) {
        return (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"error": "key exists"})),
        );
    }
    (StatusCode::OK, Json(serde_json::json!({"key": key})))
}

async fn info(
    State(st): State<St>,
    headers: HeaderMap,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> StatusCode {
    if !authorised(&st, &headers) {
        return StatusCode::UNAUTHORIZED;
    }
    let key = q.get("key").cloned().unwrap_or_default();
    let mut inner = st.0.lock().unwrap();
    inner.calls.push(Call {
        what: "info",
        key: key.clone(),
        models: vec![],
        tenant: None,
        at: SystemTime::now(),
    });
    if inner.keys.contains(&key) {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    }
}

async fn delete(
    State(st): State<St>,
    headers: HeaderMap,
    Json(body): Json<serde_json::Value>,
) -> StatusCode {
    if !authorised(&st, &headers) {
        return StatusCode::UNAUTHORIZED;
    }
    let mut inner = st.0.lock().unwrap();
    for k in body["keys"].as_array().into_iter().flatten() {
        let key = k.as_str().unwrap_or_default().to_owned();
        inner.keys.remove(&key);
        inner.calls.push(Call {
            what: "delete",
            key,
            models: vec![],
            tenant: None,
            at: SystemTime::now(),
        });
    }
    StatusCode::OK
}
