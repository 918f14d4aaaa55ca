//! Real-browser tests: headless Chromium driven over WebDriver
//! (`chromedriver`, Debian's `chromium-driver`) with fantoccini.
//!
//! Guarantees: one `chromedriver` per test binary, started on first use on a
//! free port and answering `/status` before any session opens; it runs in a
//! process group of its own that a watchdog kills (Chromium included) as
//! soon as the test process is gone, so nothing outlives the run. Each
//! [`Session`] is a fresh browser with a fresh profile folder, closed when
//! dropped (also on panic). A missing `chromium` or `chromedriver` is a
//! test failure telling to run `scripts/deps`, never a skip.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// How long a `wait_for` waits unless told otherwise.
pub const WAIT: Duration = Duration::from_secs(15);

/// A program on `PATH`, or a failure naming the package that brings it.
fn program(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{name}` is not on PATH: the dashboard's browser tests need Debian's chromium \
                 and chromium-driver. Run scripts/deps (it installs them), then the tests again."
            )
        })
}

/// The one `chromedriver` of this test binary.
struct Driver {
    url: String,
    addr: String,
    chromium: PathBuf,
    log: PathBuf,
    _child: Mutex<Child>,
    _watchdog: Mutex<Child>,
}

fn driver() -> &'static Driver {
    static DRIVER: OnceLock<Driver> = OnceLock::new();
    DRIVER.get_or_init(start_driver)
}

fn start_driver() -> Driver {
    let chromium = program("chromium");
    let chromedriver = program("chromedriver");
    let port = super::operator::free_port();
    let addr = format!("127.0.0.1:{port}");
    let log = std::env::temp_dir().join(format!("exo-chromedriver-{}.log", std::process::id()));
    use std::os::unix::process::CommandExt;
    let child = Command::new(&chromedriver)
        .arg(format!("--port={port}"))
        .arg(format!("--log-path={}", log.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group, so the watchdog can end it and every
        // Chromium it started in one signal.
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", chromedriver.display()));
    // Statics are never dropped: a watchdog ends the group once this test
    // process is gone (or the driver died on its own).
    let watchdog = Command::new("sh")
        .args([
            "-c",
            "while kill -0 \"$1\" 2>/dev/null && kill -0 \"$2\" 2>/dev/null; do sleep 0.5; done; \
             kill -TERM \"-$2\" 2>/dev/null; sleep 1; kill -KILL \"-$2\" 2>/dev/null; true",
            "exo-chromedriver-watchdog",
            &std::process::id().to_string(),
            &child.id().to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the chromedriver watchdog");
    let d = Driver {
        url: format!("http://{addr}"),
        addr,
        chromium,
        log,
        _child: Mutex::new(child),
        _watchdog: Mutex::new(watchdog),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((200, body)) = plain(&d.addr, "GET", "/status")
            && serde_json::from_str::<Value>(&body)
                .is_ok_and(|v| v["value"]["ready"] == Value::Bool(true))
        {
            break;
        }
        if Instant::now() >= deadline {
            panic!(
                "chromedriver on {} did not answer /status within 30 s; its log:\n{}",
                d.addr,
                std::fs::read_to_string(&d.log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    d
}

/// One plain HTTP/1.1 request to chromedriver (it refuses 1.0, and keeps
/// the connection open, so the body is read by its Content-Length).
fn plain(addr: &str, method: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            if len.is_some_and(|len| body.len() >= len) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

/// Where screenshots go: `target/dashboard/`.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("dashboard")
}

/// `#1a7f37` as a computed style gives it: `rgb(26, 127, 55)`.
pub fn rgb(hex: &str) -> String {
    let h = hex.trim_start_matches('#');
    let c = |i: usize| u8::from_str_radix(&h[i..i + 2], 16).expect("a #rrggbb colour");
    format!("rgb({}, {}, {})", c(0), c(2), c(4))
}

/// `(r, g, b)` of a computed `rgb(...)`/`rgba(...)` value.
pub fn channels(css: &str) -> Option<(u8, u8, u8)> {
    let inner = css.split_once('(')?.1.trim_end_matches(')');
    let mut it = inner.split(',').map(|p| p.trim().parse::<f64>().ok());
    let mut next = || {
        it.next()
            .flatten()
            .map(|v| v.round().clamp(0.0, 255.0) as u8)
    };
    Some((next()?, next()?, next()?))
}

/// A headless Chromium with a fresh profile, on the shared chromedriver.
pub struct Session {
    pub client: Client,
    /// The dashboard's base URL (`http://127.0.0.1:PORT`).
    pub base: String,
    id: Option<String>,
    _profile: tempfile::TempDir,
}

impl Session {
    /// Opens a browser for the dashboard at `base`.
    pub async fn open(base: &str) -> Self {
        let d = driver();
        let profile = tempfile::tempdir().expect("a profile folder");
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": d.chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-crash-reporter",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&d.url)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "open a Chromium session on chromedriver {}: {e}\nchromedriver log tail:\n{}",
                    d.url,
                    tail(&std::fs::read_to_string(&d.log).unwrap_or_default(), 30)
                )
            });
        let id = client.session_id().await.ok().flatten();
        Session {
            client,
            base: base.trim_end_matches('/').to_owned(),
            id,
            _profile: profile,
        }
    }

    /// Navigates to `path` under the dashboard's base.
    pub async fn goto(&self, path: &str) {
        let url = format!("{}{path}", self.base);
        self.client
            .goto(&url)
            .await
            .unwrap_or_else(|e| panic!("navigate to {url}: {e}"));
    }

    /// The path of the page's URL (`/login`).
    pub async fn path(&self) -> String {
        let u = self.client.current_url().await.expect("the current URL");
        u.path().to_owned()
    }

    /// The page's URL and the start of its source, for failure messages.
    pub async fn describe(&self) -> String {
        let url = self
            .client
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_else(|e| format!("<no URL: {e}>"));
        let source = self
            .client
            .source()
            .await
            .unwrap_or_else(|e| format!("<no source: {e}>"));
        format!("page {url}\nsource (trimmed):\n{}", trim(&source, 4000))
    }

    /// Fails the test with `what`, the page URL, a trimmed source and a
    /// screenshot `failure-<test thread>.png`.
    pub async fn fail(&self, what: &str) -> ! {
        let name = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .replace("::", "-");
        let shot = self.try_screenshot(&format!("failure-{name}")).await;
        panic!("{what}\n{}\nscreenshot: {shot}", self.describe().await)
    }

    /// Waits (up to `timeout`) for an element matching `css`.
    pub async fn wait_for_in(&self, css: &str, timeout: Duration) -> Element {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(e) = self.client.find(Locator::Css(css)).await {
                return e;
            }
            if Instant::now() >= deadline {
                self.fail(&format!("no element matches `{css}` after {timeout:?}"))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// [`Session::wait_for_in`] with [`WAIT`].
    pub async fn wait_for(&self, css: &str) -> Element {
        self.wait_for_in(css, WAIT).await
    }

    /// Waits until the script (a function body returning a value, given
    /// `args`) returns something other than `null`/`false`, and returns it.
    pub async fn wait_js(
        &self,
        what: &str,
        timeout: Duration,
        script: &str,
        args: Vec<Value>,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            match self.client.execute(script, args.clone()).await {
                Ok(Value::Null | Value::Bool(false)) | Err(_) => {}
                Ok(v) => return v,
            }
            if Instant::now() >= deadline {
                self.fail(&format!("timed out after {timeout:?} waiting for {what}"))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs a script (a function body) and returns its value.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        match self.client.execute(script, args).await {
            Ok(v) => v,
            Err(e) => self.fail(&format!("script failed: {e}\n{script}")).await,
        }
    }

    /// The attribute `name` of the first element matching `css`.
    pub async fn attr(&self, css: &str, name: &str) -> Option<String> {
        let e = self.wait_for(css).await;
        e.attr(name)
            .await
            .unwrap_or_else(|err| panic!("read {name} of `{css}`: {err}"))
    }

    /// The text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        let e = self.wait_for(css).await;
        e.text()
            .await
            .unwrap_or_else(|err| panic!("read the text of `{css}`: {err}"))
    }

    /// The computed style `property` (CSS spelling, `background-color`) of
    /// the first element matching `css`.
    pub async fn computed_style(&self, css: &str, property: &str) -> String {
        self.wait_for(css).await;
        let v = self
            .js(
                "const e = document.querySelector(arguments[0]);
                 return e ? getComputedStyle(e).getPropertyValue(arguments[1]) : null;",
                vec![json!(css), json!(property)],
            )
            .await;
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no computed {property} for `{css}`: {v}"))
    }

    pub async fn click(&self, css: &str) {
        // A live page may render the element again between the find and
        // the click (a lane's page reloads its table on each event): a
        // stale element was not clicked, so it is found again and clicked.
        let mut tries = 0;
        loop {
            let e = self.wait_for(css).await;
            match e.click().await {
                Ok(()) => return,
                Err(err) if tries < 10 && err.to_string().contains("stale element") => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => self.fail(&format!("click `{css}`: {err}")).await,
            }
        }
    }

    /// Clears the input matching `css` and types `text` into it. The text
    /// is never part of a failure message (it may be a token).
    pub async fn type_into(&self, css: &str, text: &str) {
        let e = self.wait_for(css).await;
        let _ = e.clear().await;
        if e.send_keys(text).await.is_err() {
            self.fail(&format!("type into `{css}`")).await;
        }
    }

    /// Saves a PNG of the viewport as `target/dashboard/<name>.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("screenshot {name}: {e}"));
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("create target/dashboard");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    async fn try_screenshot(&self, name: &str) -> String {
        let Ok(png) = self.client.screenshot().await else {
            return "<none>".into();
        };
        let dir = screenshot_dir();
        let path = dir.join(format!("{name}.png"));
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, png)) {
            Ok(()) => path.display().to_string(),
            Err(e) => format!("<not written: {e}>"),
        }
    }

    /// Ends the browser now (dropping does it too).
    pub async fn close(mut self) {
        if let Some(_id) = self.id.take() {
            let _ = self.client.clone().close().await;
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A test that panicked cannot await `close`: end the WebDriver
        // session (and its Chromium) with a plain request instead.
        if let Some(id) = self.id.take() {
            let _ = plain(&driver().addr, "DELETE", &format!("/session/{id}"));
        }
    }
}

fn trim(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes more)", &s[..end], s.len() - end)
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
