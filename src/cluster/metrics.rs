//! Prometheus metrics with bounded labels: the controller (3 values), the
//! result or error category (a fixed enum), the object kind and the write
//! verb (fixed sets). Object names never become labels, but for the
//! backups' gauges ([`backup`]), one series per volume with a backup
//! policy; the circuits' ([`circuits`]) are per tenant with a scrape
//! target.

pub mod backup;
pub mod circuits;
pub mod fleet;
pub mod notify;

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Controller {
    Agent,
    Tool,
    Agentfs,
    /// The App reconciler (an App's pod and volumes).
    App,
    /// The GitOps engine (sync, sagas, drift, prune, re-checks).
    Rollout,
    /// The tenant lifecycle sagas (enrollment, provisioning, keys,
    /// offboarding).
    Tenant,
    /// The Lease election (acquiring, renewing, releasing).
    Leader,
    /// The incident dispatcher (routed statuses, expired incidents).
    Incident,
    /// The notifications' delivery task (the providers' and rules' status).
    Notify,
}

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Verb {
    Apply,
    Create,
    Delete,
    Patch,
    Status,
    /// A whole object sent with the resourceVersion read (the Lease).
    Replace,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    pub controller: Controller,
    /// `ok` or an [`super::ErrorCategory`] name.
    pub result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: Controller,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub controller: Controller,
    /// The Kubernetes kind written (`Pod`, `Service`, …): a fixed set.
    pub kind: &'static str,
    pub verb: Verb,
}

/// A GitOps-managed kind (`Agent`, `Tool`, `AgentFS`, `ConfigMap`): a fixed set.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
}

/// An audit rule (`placement`, `network`, …): a fixed set.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    pub rule: &'static str,
}

/// How an audit run ended: `ok` or `error`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

/// Why an upstream connection was lost: a fixed set.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower case
pub enum DisconnectCause {
    /// Nothing received for `read_timeout`: a wedged socket given up.
    silent,
    /// Closed by the control plane, or a read/write error.
    other,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DisconnectLabels {
    pub cause: DisconnectCause,
}

/// A health monitor (`crashloop`, `restarts`, `silent`) in one tenant
/// namespace: bounded by the namespaces, never an object name.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MonitorLabels {
    pub monitor: &'static str,
    pub namespace: String,
}

/// A check-in's outcome (`accepted`, `unauthorized`, ...): a fixed set.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

pub struct Metrics {
    pub registry: Registry,
    /// Findings of the last audit, per rule (0 when clean).
    pub audit_findings: Family<RuleLabels, Gauge>,
    pub audit_runs: Family<ResultLabels, Counter>,
    /// 1 while the upstream connection is established (leader only).
    pub upstream_connected: Gauge,
    /// 1 while the `wedged-upstream` monitor fires.
    pub upstream_wedged: Gauge,
    /// Established upstream connections lost, by cause.
    pub upstream_disconnects: Family<DisconnectLabels, Counter>,
    /// Objects a health monitor currently fires for, by monitor and namespace.
    pub monitor_active: Family<MonitorLabels, Gauge>,
    /// Agent check-ins (`POST /checkin/...`) by outcome.
    pub checkins: Family<OutcomeLabels, Counter>,
    /// Incident posts and reads by outcome (`stored`, `duplicate`, `read`,
    /// `refused`, `rate_limited`, `unauthorized`, `unavailable`).
    pub incidents: Family<OutcomeLabels, Counter>,
    /// Managed objects found different from git and put back, by kind.
    pub drift_reverted: Family<KindLabels, Counter>,
    /// Objects git dropped that were deleted, by kind.
    pub pruned: Family<KindLabels, Counter>,
    /// Live re-checks that found content or digests not the release's.
    pub content_drift: Counter,
    /// Execs into pods made by live re-checks.
    pub live_check_execs: Counter,
    /// Execs into pods made by the rollout saga's `verified/*` steps.
    pub verify_execs: Counter,
    pub reconciles: Family<ReconcileLabels, Counter>,
    pub reconcile_seconds: Family<ControllerLabels, Histogram>,
    pub writes: Family<WriteLabels, Counter>,
    /// Unix time (ms) at which the lease's fence last let a write out.
    pub last_write_sent_ms: Gauge,
    /// Writes refused because this replica's lease was not current.
    pub writes_fenced: Counter,
    pub leader: Gauge,
    pub ready: Gauge,
    /// `exo_fs_backup_*`: their own registry, on the same page.
    pub backups: backup::BackupMetrics,
    /// `exo_circuits_*`: their own registry, on the same page.
    pub circuits: circuits::CircuitMetrics,
    /// `exo_notification*`: their own registry, on the same page.
    pub notify: notify::NotifyMetrics,
    /// `exo_fleet_*`: their own registry, on the same page.
    pub fleets: fleet::FleetMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("exo_operator");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        let reconcile_seconds = Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 14))
        });
        let writes = Family::<WriteLabels, Counter>::default();
        let leader = Gauge::default();
        let ready = Gauge::default();
        let drift_reverted = Family::<KindLabels, Counter>::default();
        let pruned = Family::<KindLabels, Counter>::default();
        let content_drift = Counter::default();
        let live_check_execs = Counter::default();
        let verify_execs = Counter::default();
        let upstream_connected = Gauge::default();
        let upstream_wedged = Gauge::default();
        let upstream_disconnects = Family::<DisconnectLabels, Counter>::default();
        registry.register(
            "upstream_connected",
            "1 while this replica's upstream connection to the control plane is established",
            upstream_connected.clone(),
        );
        registry.register(
            "upstream_wedged",
            "1 while the upstream connection is or was just wedged (connected, nothing received)",
            upstream_wedged.clone(),
        );
        registry.register(
            "upstream_disconnects",
            "Established upstream connections lost, by cause (silent: given up for silence)",
            upstream_disconnects.clone(),
        );
        let monitor_active = Family::<MonitorLabels, Gauge>::default();
        let checkins = Family::<OutcomeLabels, Counter>::default();
        let incidents = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "monitor_active",
            "Agents, Tools or namespaces a health monitor currently fires for, by monitor and namespace",
            monitor_active.clone(),
        );
        registry.register("checkins", "Agent check-ins by outcome", checkins.clone());
        registry.register(
            "incidents",
            "Agents' incident posts and reads by outcome",
            incidents.clone(),
        );
        registry.register(
            "drift_reverted",
            "Managed objects found different from git and re-applied, by kind",
            drift_reverted.clone(),
        );
        registry.register(
            "pruned",
            "Objects no longer in git deleted from a tenant's inventory, by kind",
            pruned.clone(),
        );
        registry.register(
            "content_drift",
            "Live re-checks that found pod content or image digests other than the release's",
            content_drift.clone(),
        );
        registry.register(
            "live_check_execs",
            "Execs into pods made by the periodic live re-checks",
            live_check_execs.clone(),
        );
        registry.register(
            "verify_execs",
            "Execs into pods made by the rollout saga's verified steps (one per changed pod)",
            verify_execs.clone(),
        );
        registry.register(
            "reconciles",
            "Reconciles by controller and result",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconcile",
            reconcile_seconds.clone(),
        );
        registry.register(
            "api_writes",
            "Writes to the Kubernetes API by controller, kind and verb",
            writes.clone(),
        );
        let last_write_sent_ms = Gauge::default();
        registry.register(
            "last_write_sent_ms",
            "Unix time in ms at which the last write was let out (lease current)",
            last_write_sent_ms.clone(),
        );
        let writes_fenced = Counter::default();
        registry.register(
            "writes_fenced",
            "Writes refused because this replica's lease was not current",
            writes_fenced.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the Lease",
            leader.clone(),
        );
        registry.register("ready", "1 once every watch has synced", ready.clone());
        let audit_findings = Family::<RuleLabels, Gauge>::default();
        let audit_runs = Family::<ResultLabels, Counter>::default();
        registry.register(
            "audit_findings",
            "Findings of the last isolation audit, by rule",
            audit_findings.clone(),
        );
        registry.register(
            "audit_runs",
            "Isolation audits run, by result",
            audit_runs.clone(),
        );
        Metrics {
            registry,
            audit_findings,
            audit_runs,
            upstream_connected,
            upstream_wedged,
            upstream_disconnects,
            monitor_active,
            checkins,
            incidents,
            drift_reverted,
            pruned,
            content_drift,
            live_check_execs,
            verify_execs,
            reconciles,
            reconcile_seconds,
            writes,
            last_write_sent_ms,
            writes_fenced,
            leader,
            ready,
            backups: backup::BackupMetrics::new(),
            circuits: circuits::CircuitMetrics::new(),
            notify: notify::NotifyMetrics::new(),
            fleets: fleet::FleetMetrics::new(),
        }
    }

    pub fn reconciled(&self, controller: Controller, result: &'static str, took: Duration) {
        self.reconciles
            .get_or_create(&ReconcileLabels { controller, result })
            .inc();
        self.reconcile_seconds
            .get_or_create(&ControllerLabels { controller })
            .observe(took.as_secs_f64());
    }

    pub fn wrote(&self, controller: Controller, kind: &'static str, verb: Verb) {
        self.writes
            .get_or_create(&WriteLabels {
                controller,
                kind,
                verb,
            })
            .inc();
    }

    /// How many objects `monitor` fires for in `namespace` now.
    pub fn monitor_active(&self, monitor: &'static str, namespace: &str, n: i64) {
        self.monitor_active
            .get_or_create(&MonitorLabels {
                monitor,
                namespace: namespace.to_owned(),
            })
            .set(n);
    }

    pub fn incidents_seen(&self, outcome: &'static str) {
        self.incidents
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    pub fn checked_in(&self, outcome: &'static str) {
        self.checkins
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Total writes so far, over every label.
    pub fn total_writes(&self) -> u64 {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            return 0;
        }
        sum_samples(&text, "exo_operator_api_writes_total")
    }

    /// The `/metrics` page: the operator's metrics, then the backups',
    /// the circuits', the notifications' and the Fleets'.
    pub fn encode(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut text = String::new();
        // Encoding into a String cannot fail.
        let _ = encode_registry(&mut text, &self.registry)
            .and_then(|()| encode_registry(&mut text, &self.backups.registry))
            .and_then(|()| encode_registry(&mut text, &self.circuits.registry))
            .and_then(|()| encode_registry(&mut text, &self.notify.registry))
            .and_then(|()| encode_registry(&mut text, &self.fleets.registry))
            .and_then(|()| encode_eof(&mut text));
        text
    }
}

/// Sums every sample of `metric` in Prometheus text format.
pub fn sum_samples(text: &str, metric: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(metric) && !l.starts_with('#'))
        .filter(|l| l[metric.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// The writes a `/metrics` page counts, but for the Lease election's:
/// what the reconcilers and engines wrote (a standby, or a restart over an
/// unchanged fleet, writes none of these while it renews its Lease).
pub fn object_writes(text: &str) -> u64 {
    const WRITES: &str = "exo_operator_api_writes_total{";
    text.lines()
        .filter(|l| l.starts_with(WRITES) && !l.contains("controller=\"Leader\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_writes_are_counted_apart_from_object_writes() {
        let m = Metrics::new();
        m.wrote(Controller::Agent, "Pod", Verb::Create);
        m.wrote(Controller::Leader, "Lease", Verb::Replace);
        m.wrote(Controller::Leader, "Lease", Verb::Replace);
        let text = m.encode();
        assert!(
            text.contains(
                "exo_operator_api_writes_total{controller=\"Leader\",kind=\"Lease\",verb=\"Replace\"} 2"
            ),
            "{text}"
        );
        assert_eq!(sum_samples(&text, "exo_operator_api_writes_total"), 3);
        assert_eq!(object_writes(&text), 1);
    }

    #[test]
    fn writes_are_counted_and_encoded() {
        let m = Metrics::new();
        m.wrote(Controller::Agent, "Pod", Verb::Create);
        m.wrote(Controller::Agent, "Pod", Verb::Create);
        m.wrote(Controller::Tool, "Service", Verb::Apply);
        m.reconciled(Controller::Agent, "ok", Duration::from_millis(3));
        let text = m.encode();
        assert!(
            text.contains(
                "exo_operator_api_writes_total{controller=\"Agent\",kind=\"Pod\",verb=\"Create\"} 2"
            ),
            "{text}"
        );
        assert_eq!(m.total_writes(), 3);
        assert!(text.contains("exo_operator_reconciles_total"));
    }

    #[test]
    fn upstream_metrics_are_named_and_labelled() {
        let m = Metrics::new();
        m.upstream_connected.set(1);
        m.upstream_disconnects
            .get_or_create(&DisconnectLabels {
                cause: DisconnectCause::silent,
            })
            .inc();
        let text = m.encode();
        assert!(text.contains("exo_operator_upstream_connected 1"), "{text}");
        assert!(text.contains("exo_operator_upstream_wedged 0"), "{text}");
        assert!(
            text.contains("exo_operator_upstream_disconnects_total{cause=\"silent\"} 1"),
            "{text}"
        );
    }

    /// The backups' registry is on the same page, which ends once.
    #[test]
    fn the_page_carries_the_backups_metrics_and_one_eof() {
        let m = Metrics::new();
        m.backups.ended(Duration::from_secs(2), None);
        let text = m.encode();
        assert!(text.contains("exo_operator_leader 0"), "{text}");
        assert!(
            text.contains(r#"exo_fs_backups_total{outcome="ok",reason="none"} 1"#),
            "{text}"
        );
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
