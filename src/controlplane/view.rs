//! What a deployment looks like to the API and the dashboard: built from
//! this server's live state (`live`), or, for a deployment held by another
//! replica, from its row in the shared database (`replica`); and the ticker
//! that publishes health transitions, which come with time alone.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::App;
use super::bus::Change;
use super::model::{DeploymentView, Health, Thresholds};
use super::replica::Holding;
use super::store::StoreError;
use crate::wire::now_ms;

impl DeploymentView {
    /// The view of a deployment from its database row, as every replica
    /// reads it. Health is judged from the row's frame time (written by the
    /// holding replica within `replica::FLUSH`); a holder without a lease
    /// is not connected. Resources stay with the holder (`hop`).
    pub fn from_holding(h: &Holding, t: Thresholds) -> Self {
        let now = now_ms();
        let connected = h.connected();
        let age = now.saturating_sub(h.last_frame_ms);
        let hello = h.hello.as_ref();
        Self {
            name: h.deployment.clone(),
            state: Health::after(Some(Duration::from_millis(age)), t),
            connected,
            session: if connected { h.session.clone() } else { None },
            connection_id: hello.map(|x| x.connection_id.clone()),
            boot_id: hello.map(|x| x.boot_id.clone()),
            agent_version: hello.map(|x| x.agent_version.clone()),
            hostname: hello.map(|x| x.host.hostname.clone()),
            connected_since_ms: connected.then_some(h.taken_ms),
            last_frame_age_ms: Some(age),
            last_frame_at_ms: Some(h.last_frame_ms),
            resources: 0,
            snapshots_completed: 0,
            deltas_applied: 0,
            snapshot_in_progress: false,
            connections: h.connections,
            evictions: h.evictions,
            disconnects: h.disconnects,
            last_close: h.last_close.clone(),
            capabilities: hello.map(|x| x.capabilities.clone()).unwrap_or_default(),
            active_alerts: 0,
            replica: Some(h.replica.clone()),
        }
    }
}

/// With replicas: the database rows of deployments (one, or all). Empty
/// on a single server, or when the database cannot be read (then this
/// server's own view is all there is).
async fn held_rows(app: &App, only: Option<&str>) -> HashMap<String, Holding> {
    let Some(r) = &app.replica else {
        return HashMap::new();
    };
    match r.holdings(only).await {
        Ok(rows) => rows
            .into_iter()
            .map(|h| (h.deployment.clone(), h))
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "connection rows unreadable; showing this replica's view");
            HashMap::new()
        }
    }
}

/// One deployment's view: this server's own when it holds (or last held)
/// the connection, with the cluster-wide counters of the row; the row's
/// otherwise.
fn view_of(app: &App, name: &str, row: Option<&Holding>) -> DeploymentView {
    let Some((h, me)) = row.zip(app.replica.as_ref()) else {
        return app.live.view(name);
    };
    if h.replica != me.id && !app.live.is_connected(name) {
        return DeploymentView::from_holding(h, app.live.thresholds);
    }
    let mut v = app.live.view(name);
    v.connections = h.connections;
    v.evictions = h.evictions;
    v.disconnects = h.disconnects;
    if !v.connected {
        v.last_close = h.last_close.clone();
    }
    v.replica = Some(h.replica.clone());
    v
}

/// Every deployment's view with its count of active alerts, by name.
pub async fn all(app: &App) -> Result<Vec<DeploymentView>, StoreError> {
    let rows = app.store.list_deployments().await?;
    let counts = app.store.active_counts().await?;
    let held = held_rows(app, None).await;
    Ok(rows
        .iter()
        .map(|r| {
            let mut v = view_of(app, &r.name, held.get(&r.name));
            v.active_alerts = counts.get(&r.name).copied().unwrap_or(0);
            v
        })
        .collect())
}

/// A deployment's view with its count of active alerts: what the API and
/// the events stream show. An unreadable active set is an error, so no
/// reader is shown a count of 0 it cannot trust.
pub async fn deployment(app: &App, name: &str) -> Result<DeploymentView, StoreError> {
    let mut v = view_of(app, name, held_rows(app, Some(name)).await.get(name));
    v.active_alerts = app.store.list_active(name).await?.len() as u64;
    Ok(v)
}

/// How often health is judged for transitions.
pub const HEALTH_TICK: Duration = Duration::from_millis(250);

/// Publishes health transitions; runs for the server's lifetime.
pub async fn watch_health(app: Arc<App>) {
    let mut last: HashMap<String, Health> = HashMap::new();
    let mut tick = tokio::time::interval(HEALTH_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for (name, state) in app.live.health_changes(&mut last) {
            tracing::debug!(deployment = %name, ?state, "health changed");
            app.bus.publish(Change::Deployment(name));
        }
    }
}
