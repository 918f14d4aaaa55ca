//! The operator side of the upstream connection (`docs/protocol.md`): one
//! outbound WebSocket to the control plane carrying discovery (snapshot and
//! deltas of Agent, Tool, AgentFS and exo-managed Pods), heartbeats,
//! tunnelled commands, pod control and audit.
//!
//! Entry point: [`run`], called by the operator runtime on the leader only,
//! with a [`HealthHandle`] its `/health` endpoint reads
//! ([`HealthHandle::report`]). [`UpstreamConfig::from_env`] returns `None`
//! when the installation is unmanaged. [`run_with_alerts`] also sends the
//! alerts raised through an [`crate::alerts::AlertSink`] ([`crate::alerts::channel`]).
//!
//! Modules: `config` (env), `packed` (an object's wire form, encoded once
//! and shared by the tracker and the frames; pure), `tracker` (watch
//! events -> deltas, pure), `outbox` (frame ordering and chunking, pure), `backoff` (pure), `health`,
//! `actions` (commands and pod control through the CRDs), `monitor` (the
//! `wedged-upstream` monitor, pure), `registrations` (records the control
//! plane must acknowledge, held and resent per connection: tenant records
//! and incidents), `inbox` (incident updates on their way down to the
//! dispatcher), `conn` (the loop), `fleet_view` (the control plane's
//! fleet view across clusters, read over HTTP). The bounded alert
//! buffer it drains is [`crate::alerts`], below it.

pub mod actions;
pub mod attach;
pub mod backoff;
pub mod config;
pub mod conn;
pub mod fleet_view;
pub mod health;
pub mod inbox;
pub mod monitor;
pub mod outbox;
pub mod packed;
pub mod registrations;
pub mod tracker;

pub use crate::wire::{Alert, Severity};
pub use config::{ConfigError, UpstreamConfig};
pub use conn::{Feed, WIRE_KINDS, health_handle, run, run_fed, run_with_alerts};
pub use health::{ConnState, HealthHandle, HealthReport};

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("every watch stream ended")]
    WatchesEnded,
}
