//! The test environment's Prometheus (`scripts/testenv`, Debian's
//! server): its URL, scrape targets a test adds as file_sd files (re-read
//! every second, scraped every second), and a small exporter whose
//! `/metrics` page a test sets.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const HOW_TO_START: &str = "Run the tests with scripts/test, or start it with `scripts/testenv up` \
     (`scripts/testenv start prometheus` adds it to an environment that is up without it).";

/// The testenv's Prometheus.
#[derive(Debug, Clone)]
pub struct TestPrometheus {
    pub url: String,
    targets: PathBuf,
}

impl TestPrometheus {
    /// The running server, answering `/-/ready`; panics with instructions
    /// otherwise.
    pub fn get() -> Self {
        let var = |key: &str| {
            super::testenv_var(key).unwrap_or_else(|| {
                panic!("no Prometheus for the tests: {key} is not set. {HOW_TO_START}")
            })
        };
        let url = var("EXO_TESTENV_PROMETHEUS_URL")
            .trim_end_matches('/')
            .to_owned();
        let targets = PathBuf::from(var("EXO_TESTENV_PROMETHEUS_TARGETS"));
        let addr = url.trim_start_matches("http://");
        match super::operator::http_get(addr, "/-/ready") {
            Some((200, _)) => {}
            other => panic!("Prometheus at {url} is not ready ({other:?}). {HOW_TO_START}"),
        }
        assert!(
            targets.is_dir(),
            "{} is not a folder. {HOW_TO_START}",
            targets.display()
        );
        TestPrometheus { url, targets }
    }

    /// Has Prometheus scrape `addr` (`host:port`, path `/metrics`) until the
    /// returned target is dropped. Its series carry `instance="<addr>"`.
    pub fn scrape(&self, addr: &str) -> Target {
        let path = self
            .targets
            .join(format!("exo-test-{}.json", addr.replace([':', '.'], "-")));
        let body = serde_json::json!([{ "targets": [addr] }]);
        // Written aside and renamed, so Prometheus never reads half a file.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, body.to_string()).expect("write a file_sd target");
        std::fs::rename(&tmp, &path).expect("publish a file_sd target");
        Target { path }
    }

    /// Polls `promql` through `client` until its value satisfies `ok`
    /// (Prometheus scrapes every second); fails the test after a minute.
    pub async fn wait_value(
        &self,
        client: &exo::analysis::Prometheus,
        promql: &str,
        ok: impl Fn(f64) -> bool,
    ) -> f64 {
        super::eventually(
            &format!("{promql} to give the value wanted"),
            Duration::from_secs(60),
            || async { client.query(promql).await.ok().filter(|v| ok(*v)) },
        )
        .await
    }
}

/// A file_sd target; removed when dropped.
pub struct Target {
    path: PathBuf,
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A `/metrics` page in the Prometheus text format that a test sets.
#[derive(Clone)]
pub struct Exporter {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    page: Arc<Mutex<String>>,
    _task: Arc<tokio::task::JoinHandle<()>>,
}

impl Exporter {
    pub async fn start(page: &str) -> Self {
        let shared = Arc::new(Mutex::new(page.to_owned()));
        let state = shared.clone();
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let page = state.lock().unwrap().clone();
                async move { ([("content-type", "text/plain; version=0.0.4")], page) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Exporter {
            addr,
            page: shared,
            _task: Arc::new(task),
        }
    }

    pub fn set(&self, page: &str) {
        *self.page.lock().unwrap() = page.to_owned();
    }
}
