//! A test exporter serving LiteLLM-named metrics on `GET /metrics`, as
//! LiteLLM's proxy does with its `prometheus` callback (`prometheus_client`
//! 0.0.4 text: counters with `_total` and `_created`, HELP and TYPE
//! lines): deployment states, cool-downs, fallbacks, requests and failed
//! requests per model, each settable by the test. It counts the scrapes
//! it answered, and can be told to answer with an error status.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

#[derive(Debug, Clone)]
pub struct Exported {
    /// model_id -> (litellm_model_name, state: 0 healthy, 1 partial, 2 complete outage).
    pub states: BTreeMap<String, (String, u32)>,
    pub cooled_down: BTreeMap<String, u64>,
    pub requests: u64,
    pub fallbacks_succeeded: u64,
    pub fallbacks_failed: u64,
    /// requested_model -> failed requests.
    pub failed: BTreeMap<String, u64>,
    /// The answer's status; 200 serves the text.
    pub status: u16,
    pub scrapes: u64,
}

impl Default for Exported {
    fn default() -> Self {
        Exported {
            states: BTreeMap::new(),
            cooled_down: BTreeMap::new(),
            requests: 0,
            fallbacks_succeeded: 0,
            fallbacks_failed: 0,
            failed: BTreeMap::new(),
            status: 200,
            scrapes: 0,
        }
    }
}

#[derive(Clone)]
pub struct Exporter {
    pub port: u16,
    inner: Arc<Mutex<Exported>>,
    _task: Arc<tokio::task::JoinHandle<()>>,
}

impl Exporter {
    /// Serves on 127.0.0.1, on a free port.
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Exported::default()));
        let app = axum::Router::new()
            .route("/metrics", get(metrics))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Exporter {
            port,
            inner,
            _task: Arc::new(task),
        }
    }

    /// Changes what is served.
    pub fn set(&self, f: impl FnOnce(&mut Exported)) {
        f(&mut self.inner.lock().unwrap());
    }

    pub fn scrapes(&self) -> u64 {
        self.inner.lock().unwrap().scrapes
    }
}

async fn metrics(State(inner): State<Arc<Mutex<Exported>>>) -> (StatusCode, String) {
    let mut e = inner.lock().unwrap();
    e.scrapes += 1;
    let status = StatusCode::from_u16(e.status).unwrap();
    if !status.is_success() {
        return (status, "upstream exploded\n".into());
    }
    (status, render(&e))
}

const BASE: &str = "https://eu.example.openai.azure.com/openai?api-version=2024-06-01";
const KEY: &str =
    r#"api_key_alias="exo/t/ab12",hashed_api_key="88dc",team="None",team_alias="None""#;

fn render(e: &Exported) -> String {
    let mut t = String::new();
    t.push_str("# HELP litellm_deployment_state LLM Deployment Analytics - The state of the deployment: 0 = healthy, 1 = partial outage, 2 = complete outage\n# TYPE litellm_deployment_state gauge\n");
    for (id, (name, state)) in &e.states {
        writeln!(t, r#"litellm_deployment_state{{api_base="{BASE}",api_provider="azure",litellm_model_name="{name}",model_id="{id}"}} {state}.0"#).unwrap();
    }
    t.push_str("# HELP litellm_deployment_cooled_down_total LLM Deployment Analytics - Number of times a deployment has been cooled down by LiteLLM load balancing logic. exception_status is the status of the exception that caused the deployment to be cooled down\n# TYPE litellm_deployment_cooled_down_total counter\n");
    for (id, n) in &e.cooled_down {
        let name = e.states.get(id).map(|s| s.0.as_str()).unwrap_or(id);
        writeln!(t, r#"litellm_deployment_cooled_down_total{{api_base="{BASE}",api_provider="azure",exception_status="429",litellm_model_name="{name}",model_id="{id}"}} {n}.0"#).unwrap();
        writeln!(t, r#"litellm_deployment_cooled_down_created{{api_base="{BASE}",api_provider="azure",exception_status="429",litellm_model_name="{name}",model_id="{id}"}} 1.7351e+09"#).unwrap();
    }
    for (metric, n, help) in [
        (
            "litellm_deployment_successful_fallbacks",
            e.fallbacks_succeeded,
            "LLM Deployment Analytics - Number of successful fallback requests from primary model -> fallback model",
        ),
        (
            "litellm_deployment_failed_fallbacks",
            e.fallbacks_failed,
            "LLM Deployment Analytics - Number of failed fallback requests from primary model -> fallback model",
        ),
    ] {
        writeln!(
            t,
            "# HELP {metric}_total {help}\n# TYPE {metric}_total counter"
        )
        .unwrap();
        if n > 0 {
            writeln!(t, r#"{metric}_total{{{KEY},exception_class="RateLimitError",exception_status="429",fallback_model="claude",requested_model="gpt-4o"}} {n}.0"#).unwrap();
        }
    }
    t.push_str("# HELP litellm_proxy_total_requests_metric_total Total number of requests made to the proxy server - track number of client side requests\n# TYPE litellm_proxy_total_requests_metric_total counter\n");
    if e.requests > 0 {
        writeln!(t, r#"litellm_proxy_total_requests_metric_total{{{KEY},end_user="None",requested_model="gpt-4o",status_code="200",user="None"}} {}.0"#, e.requests).unwrap();
    }
    t.push_str("# HELP litellm_proxy_failed_requests_metric_total Total number of failed responses from proxy - the client did not get a success response from litellm proxy\n# TYPE litellm_proxy_failed_requests_metric_total counter\n");
    for (model, n) in &e.failed {
        writeln!(t, r#"litellm_proxy_failed_requests_metric_total{{{KEY},end_user="None",exception_class="Openai.APIError, \"upstream\"",exception_status="500",requested_model="{model}",user="None"}} {n}.0"#).unwrap();
    }
    t
}
