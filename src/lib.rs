//! Exo: a GitOps release system for fleets of AI-agent workloads on Kubernetes.
//!
//! The library holds all logic; the `exo` binary is a thin clap front end.
//! Modules are split by concern: pure cores (parsing, validation, planning,
//! building desired objects) and thin I/O edges around them.

pub mod agentfs;
pub mod audit;
pub mod cli;
pub mod controlplane;
pub mod crd;
pub mod duration;
pub mod fleet;
/// Entry points shared by the cargo-fuzz targets (`fuzz/`) and the corpus replay test.
pub mod fuzzing;
/// Every label, annotation, finalizer and field-manager name, in one place.
pub mod meta;
pub mod operator;
pub mod release;
pub mod rollout;
pub mod shutdown;
pub mod upstream;
pub mod wire;
