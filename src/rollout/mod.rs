//! GitOps wave rollout: the saga's pure core (`saga`), its actuators against
//! the cluster (`actuate`), and the leader-only engine that syncs the fleet
//! repository and drives each tenant's saga (`engine`).

pub mod actuate;
pub mod desired;
pub mod diff;
pub mod drift;
pub mod engine;
pub mod gates;
pub mod isolation;
pub mod prune;
pub mod reverify;
pub mod saga;
pub mod summary;
pub mod verify;
pub mod workload;

/// Now, as the Kubernetes `Time` the statuses carry.
pub fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}
