//! Exo: a GitOps release system for fleets of AI-agent workloads on Kubernetes.
//!
//! The library holds all logic; the `exo` binary is a thin clap front end.
//! Modules are split by concern: pure cores (parsing, validation, planning,
//! building desired objects) and thin I/O edges around them.

pub mod agentfs;
/// Alerts raised by checks and monitors, buffered for the upstream connection.
pub mod alerts;
/// A wave judged on live signals while it soaks: checks, measurements,
/// the run's outcome, and Prometheus queries.
pub mod analysis;
pub mod audit;
/// AgentFS backups as OCI artifacts: chunked, deduplicated, checked on restore.
pub mod backup;
/// Circuit and model-failure telemetry: the model gateway's metrics read,
/// per-tenant circuits and rates, and their shared read handle.
pub mod circuits;
pub mod cli;
/// The shared write path and builders of everything that writes to the cluster.
pub mod cluster;
pub mod controlplane;
pub mod crd;
pub mod duration;
pub mod fleet;
/// Review on a forge: a branch's pull request on a Gitea-compatible API.
pub mod forge;
/// Entry points shared by the cargo-fuzz targets (`fuzz/`) and the corpus replay test.
pub mod fuzzing;
/// An agent's incident report: parsed, limited, redacted, named, and what
/// its tenant may read of it.
pub mod incident;
/// Every label, annotation, finalizer and field-manager name, in one place.
pub mod meta;
/// Kubernetes' name rules (DNS-1123 and DNS-1035 labels, subdomains, label
/// values, ConfigMap keys), once.
pub mod names;
/// The one outbound HTTP client (pooled, rustls, a deadline per call).
pub mod net;
/// Notifications: events and commit statuses to webhooks, Slack and forges.
pub mod notify;
pub mod operator;
/// Kubernetes quantities (`20Gi`, `500m`), parsed.
pub mod quantity;
/// What must not be shown, found in free text: provider key shapes, and
/// redaction for tenants and for support.
pub mod redact;
pub mod release;
pub mod rollout;
/// The saga engine's pure core: typed steps with owners and postconditions.
pub mod saga;
pub mod severity;
pub mod shutdown;
pub mod signatures;
/// A tenant's lifecycle as sagas: onboard, change, offboard.
pub mod tenant;
pub mod text;
pub mod upstream;
pub mod wire;
/// The one YAML reader and writer, with its budgets and file-naming errors.
pub mod yaml;
