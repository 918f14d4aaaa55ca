//! Notification receivers for the tests: a real HTTP server that keeps
//! every request and answers from a script, the HMAC-SHA256 check of the
//! webhook signature (with the RustCrypto HMAC, not the operator's code),
//! and the objects that route notifications (Secret, provider, rule).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use exo::crd::{NotificationProvider, NotificationRule};
use hmac::{Hmac, Mac};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use sha2::Sha256;

use super::TestNamespace;

/// One request a [`Receiver`] got.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Delivery {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Inner {
    /// Answers given first, in order; then 200.
    script: VecDeque<(u16, String)>,
    got: Vec<Delivery>,
}

/// A real HTTP server taking `POST`s on any path: it answers from its
/// script, then 200, and keeps every request.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    _task: Arc<tokio::task::JoinHandle<()>>,
}

impl Receiver {
    pub async fn start(script: &[(u16, &str)]) -> Self {
        let inner = Arc::new(Mutex::new(Inner {
            script: script.iter().map(|(s, b)| (*s, (*b).to_owned())).collect(),
            got: Vec::new(),
        }));
        let app = axum::Router::new().fallback(take).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            url: format!("http://{addr}/hook"),
            inner,
            _task: Arc::new(task),
        }
    }

    pub fn got(&self) -> Vec<Delivery> {
        self.inner.lock().unwrap().got.clone()
    }

    /// The events of `kind` it got (every attempt, accepted or not).
    pub fn events(&self, kind: &str) -> Vec<Delivery> {
        self.got()
            .into_iter()
            .filter(|d| d.json()["kind"] == kind)
            .collect()
    }
}

async fn take(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let mut inner = inner.lock().unwrap();
    inner.got.push(Delivery {
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        body: body.to_vec(),
    });
    let (status, text) = inner.script.pop_front().unwrap_or((200, "ok".to_owned()));
    (StatusCode::from_u16(status).unwrap(), text)
}

/// Checks `X-Exo-Signature: sha256=<hex>` over the exact body with `key`,
/// with the RustCrypto HMAC the test depends on (not the operator's code).
pub fn signed_with(d: &Delivery, key: &[u8]) -> bool {
    let Some(hex) = d.header("x-exo-signature").strip_prefix("sha256=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex) else {
        return false;
    };
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap();
    mac.update(&d.body);
    mac.verify_slice(&sig).is_ok()
}

pub async fn create<K>(api: &Api<K>, json: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(json).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

pub async fn secret(ns: &TestNamespace, name: &str, key: &str, value: &str) {
    create(
        &ns.api::<Secret>(),
        serde_json::json!({"metadata": {"name": name}, "stringData": {key: value}}),
    )
    .await;
}

pub async fn provider(ns: &TestNamespace, name: &str, spec: serde_json::Value) {
    create(
        &ns.api::<NotificationProvider>(),
        serde_json::json!({"apiVersion": "autonomic.sh/v1alpha1", "kind": "NotificationProvider",
            "metadata": {"name": name}, "spec": spec}),
    )
    .await;
}

pub async fn rule(ns: &TestNamespace, name: &str, spec: serde_json::Value) {
    create(
        &ns.api::<NotificationRule>(),
        serde_json::json!({"apiVersion": "autonomic.sh/v1alpha1", "kind": "NotificationRule",
            "metadata": {"name": name}, "spec": spec}),
    )
    .await;
}
