//! A loopback proxy in front of the real apiserver that hides one
//! `autonomic.sh` resource, for the tests of what a missing CRD does.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A loopback HTTP proxy in front of the real apiserver that hides one
/// `autonomic.sh` resource: its requests go to a resource name no CRD
/// serves, so the 404 the operator sees is the apiserver's own answer for
/// a CRD that is not installed. Everything else is passed through with the
/// test's admin client. The shared CRDs stay installed.
pub struct HidingProxy {
    pub url: String,
    /// Requests for the hidden resource.
    pub hidden_hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HidingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct ProxyState {
    client: kube::Client,
    plural: &'static str,
    hidden_hits: Arc<AtomicUsize>,
}

async fn forward(
    axum::extract::State(st): axum::extract::State<ProxyState>,
    req: axum::extract::Request,
) -> axum::response::Response {
    use http_body_util::BodyExt;
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let path =
        if path.starts_with("/apis/autonomic.sh/") && path.ends_with(&format!("/{}", st.plural)) {
            st.hidden_hits.fetch_add(1, Ordering::SeqCst);
            format!("{path}-not-installed")
        } else {
            path.to_owned()
        };
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let mut out = axum::http::Request::builder()
        .method(parts.method)
        .uri(format!("{path}{query}"));
    for (k, v) in &parts.headers {
        if k != axum::http::header::HOST {
            out = out.header(k, v);
        }
    }
    let resp = st
        .client
        .send(out.body(kube::client::Body::from(body.to_vec())).unwrap())
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

impl HidingProxy {
    pub async fn start(client: kube::Client, plural: &'static str) -> Self {
        let hidden_hits = Arc::default();
        let state = ProxyState {
            client,
            plural,
            hidden_hits: Arc::clone(&hidden_hits),
        };
        let app = axum::Router::new().fallback(forward).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        HidingProxy {
            url,
            hidden_hits,
            task,
        }
    }

    /// A kubeconfig that reaches the apiserver only through this proxy.
    pub fn kubeconfig(&self, dir: &tempfile::TempDir) -> std::path::PathBuf {
        let path = dir.path().join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: proxy, cluster: {{server: \"{}\"}}}}]\n\
             users: [{{name: proxy, user: {{}}}}]\n\
             contexts: [{{name: proxy, context: {{cluster: proxy, user: proxy}}}}]\n\
             current-context: proxy\n",
            self.url
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}
