//! Live changes for the dashboard: the `GET /api/v1/events` server-sent
//! events stream that turns the changes of the `bus` into browser events.
//!
//! Guarantees:
//! - A `deployment` event carries the view as it is when the event is sent
//!   (read then, not when the change happened), so a slow subscriber never
//!   shows an older state than a fast one.
//! - A subscriber that falls behind the bus's ring gets one `resync`
//!   instead of the events it missed, and fetches everything again.
//! - Health changes with time alone; `view::watch_health` publishes the
//!   transitions.
//! - The stream ends when the server shuts down, so graceful shutdown does
//!   not wait on open browsers.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::broadcast;

use crate::controlplane::App;
use crate::controlplane::bus::Change;
use crate::controlplane::view;

#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    #[serde(default)]
    deployment: Option<String>,
}

/// `GET /api/v1/events`: the changes as server-sent events.
pub async fn events(
    State(app): State<Arc<App>>,
    Query(q): Query<EventsQuery>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let rx = app.bus.subscribe();
    let shutdown = app.shutdown.subscribe();
    let state = Subscriber {
        app,
        rx,
        shutdown,
        only: q.deployment,
        greeted: false,
        ending: false,
    };
    let stream = futures::stream::unfold(state, |mut s| async move {
        let ev = s.next().await?;
        Some((Ok(ev), s))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

struct Subscriber {
    app: Arc<App>,
    rx: broadcast::Receiver<Arc<Change>>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    only: Option<String>,
    greeted: bool,
    /// The one deployment followed moved to another replica: after a
    /// `resync`, the stream ends, and the browser's reconnect hops to the
    /// new holder (`hop`).
    ending: bool,
}

impl Subscriber {
    /// The next event to send; `None` ends the stream (shutdown).
    async fn next(&mut self) -> Option<SseEvent> {
        if !self.greeted {
            self.greeted = true;
            return Some(sse("hello", &json!({})));
        }
        if self.ending {
            return None;
        }
        loop {
            let got = tokio::select! {
                r = self.rx.recv() => r,
                _ = self.shutdown.wait_for(|s| *s) => return None,
            };
            let change = match got {
                Ok(c) => c,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "events subscriber fell behind; resync");
                    return Some(sse("resync", &json!({})));
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            // The fleet's stream and a deployment's carry no lane's
            // changes: those go to the lane's own stream (`lanes`).
            match (self.only.as_deref(), change.deployment()) {
                (_, None) => continue,
                (Some(d), Some(c)) if d != c => continue,
                _ => {}
            }
            if matches!(*change, Change::IncidentUpdates(_)) {
                continue;
            }
            if let Some(d) = self.only.as_deref()
                && self.app.live.moved(d)
            {
                self.ending = true;
                return Some(sse("resync", &json!({})));
            }
            return Some(self.render(&change).await);
        }
    }

    async fn render(&self, c: &Change) -> SseEvent {
        match c {
            // A view that cannot be read whole is not sent; the page reads
            // the state again on `resync` (and is shown the error).
            Change::Deployment(d) => match view::deployment(&self.app, d).await {
                Ok(v) => sse("deployment", &v),
                Err(e) => {
                    tracing::warn!(deployment = %d, error = %e, "deployment view unreadable; resync");
                    sse("resync", &json!({}))
                }
            },
            Change::Resource {
                deployment,
                op,
                resource,
            } => sse(
                "resource",
                &json!({ "deployment": deployment, "op": op, "resource": resource }),
            ),
            Change::Resources(d) => sse("resources", &json!({ "deployment": d })),
            Change::Fleet(d) => sse("fleet", &json!({ "deployment": d })),
            Change::Audit(a) => sse("audit", a),
            Change::Alerts(d) => sse("alerts", &json!({ "deployment": d })),
            Change::Heartbeat(d) => sse(
                "heartbeat",
                &json!({ "deployment": d, "last_frame_at_ms": crate::wire::now_ms() }),
            ),
            // Filtered out above.
            Change::Lane(_) | Change::IncidentUpdates(_) => sse("resync", &json!({})),
        }
    }
}

fn sse(name: &str, data: &impl serde::Serialize) -> SseEvent {
    let text = serde_json::to_string(data).unwrap_or_else(|_| "{}".into());
    SseEvent::default().event(name).data(text)
}
