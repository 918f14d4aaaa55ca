//! GitOps wave rollout: the saga's pure core (`saga`), its actuators against
//! the cluster (`actuate`), and the leader-only engine that syncs the fleet
//! repository and drives each tenant's saga (`engine`).

pub mod actuate;
pub mod engine;
pub mod gates;
pub mod saga;
