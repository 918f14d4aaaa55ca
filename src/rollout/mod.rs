//! GitOps wave rollout, in four layers; each imports only the ones below
//! it (`tests/layers` checks this):
//! - pure: the saga's core (`saga`, with its changed set in `changed`), what a tenant should run (`desired`,
//!   with the engine's `TenantTarget`), its NetworkPolicies (`isolation`),
//!   field diffs (`diff`), promotion gates and summaries;
//! - `workload`: what every step shares (its context, error outcomes, the
//!   one way a workload is applied, the pod checks);
//! - the steps: the saga's actuators (`actuate`), the live-content check
//!   (`verify`), `drift`, the tenant's `inventory`, `prune` and the live
//!   re-check (`reverify`);
//! - the leader-only `engine` that syncs the fleet repository and drives
//!   each tenant's saga.

pub mod actuate;
pub mod changed;
pub mod desired;
pub mod diff;
pub mod drift;
pub mod engine;
pub mod gates;
pub mod inventory;
pub mod isolation;
pub mod prune;
pub mod reverify;
pub mod saga;
pub mod signed;
pub mod summary;
pub mod verify;
pub mod workload;

/// Now, as the Kubernetes `Time` the statuses carry.
pub fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}
