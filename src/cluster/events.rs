//! Stable Kubernetes Event reasons. Users and alerts match on these, so a
//! reason is never renamed; new ones are added.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A pod was created for an Agent or Tool.
    PodCreated,
    /// The pod template changed (image digest, baseline version, mounts):
    /// the old pod was deleted to be recreated.
    PodRolled,
    /// `spec.paused` (Agent) or `enabled: false` (Tool) removed the pod.
    PodRemoved,
    /// A failed, restartable pod was deleted to be recreated.
    PodRestarted,
    /// The spec cannot be turned into a pod; the condition says why.
    InvalidSpec,
    /// A mounted AgentFS does not exist in the namespace.
    FilesystemNotFound,
    /// An Agent asks to mount an AgentFS that is being deleted: the mount
    /// is refused (a volume being deleted gains no new users).
    FilesystemTerminating,
    /// A PVC was created for an AgentFS.
    VolumeCreated,
    /// The PVC request grew.
    VolumeResized,
    /// Shrinking was asked for; the PVC is untouched.
    ShrinkRefused,
    /// A size above `maxSize` was asked for; the PVC is untouched.
    AboveMaxSize,
    /// Deleting an AgentFS while Agents mount it; the note names them.
    DeleteRefused,
    /// `retain: true`: the PVC was released and outlives the AgentFS.
    VolumeRetained,
    /// A reconcile failed; the note has the error category.
    ReconcileError,
    /// A managed object differed from git (a hand edit) or was deleted,
    /// and was put back; the note names the fields.
    DriftReverted,
    /// A live re-check found pod content or an image digest that is not
    /// the release's; the note names the pod and the file.
    ContentDrift,
    /// An object git no longer has was deleted from the tenant's inventory.
    Pruned,
    /// Deleting an object git no longer has did not finish (a finalizer,
    /// a refusal); it stays in the inventory.
    PruneBlocked,
    /// The audit found an isolation invariant broken; the note names the
    /// rule and what (never a Secret's value).
    AuditFinding,
    /// An audit finding no longer holds.
    AuditCleared,
    /// The upstream connection to the control plane was lost (on the
    /// operator's own Pod, or its Lease when it runs outside a Pod).
    UpstreamDisconnected,
    /// The upstream socket is wedged: connected, nothing received.
    UpstreamWedged,
    /// The `crashloop` monitor: an Agent's or Tool's containers restart
    /// again and again.
    CrashLoop,
    /// The `crashloop` monitor cleared: no restart for a whole window.
    CrashLoopCleared,
    /// The `silent` monitor: an Active Agent has not checked in.
    AgentSilent,
    /// The `silent` monitor cleared: it checked in, or is no longer Active.
    AgentSilentCleared,
    /// A tenant saga's step is done; the note names the step and its owner.
    TenantStepDone,
    /// A tenant saga waits: a step's actuator is missing or cannot act.
    TenantWaiting,
    /// Every onboarding (or change) step is done: the tenant is Active.
    TenantActive,
    /// The offboarding saga finished.
    TenantOffboarded,
    /// A restore drill of an AgentFS's backup failed; the note names the
    /// first file that differs, the layer, or the error.
    BackupDrillFailed,
    /// `backup/stale`: an AgentFS has had no good backup for longer than
    /// its `staleAfter`; the note says since when and what to look at.
    BackupStale,
    /// `backup/stale` no longer holds (a backup succeeded, or the policy
    /// went).
    BackupStaleCleared,
    /// `backup/drill-stale`: no restore drill of the AgentFS passed within
    /// twice its `drillEvery`.
    BackupDrillStale,
    /// `backup/drill-stale` no longer holds.
    BackupDrillStaleCleared,
    /// `backup/drill-failed` no longer holds: a later drill passed (the
    /// failed drill's own Event is the drill's).
    BackupDrillFailedCleared,
    /// Circuit telemetry: a model deployment behind the Service is in
    /// outage (`circuit/open`); the note names it.
    CircuitOpen,
    /// The deployment is out of outage, or no longer listed.
    CircuitClosed,
    /// A model's failed requests within the window reached
    /// `spec.circuits.modelFailures` (`model/failures`).
    ModelFailures,
    /// The model is below the threshold again.
    ModelFailuresCleared,
    /// A Service labelled `autonomic.sh/metrics` is not a scrape target:
    /// the note says what is wrong with its annotation.
    MetricsTargetInvalid,
    /// Scraping the Service's metrics failed; the note says why.
    MetricsScrapeFailed,
    /// A scrape succeeded again.
    MetricsScrapeRecovered,
    /// A Fleet's `spec.circuits` was refused; the note names each field.
    CircuitSettingsInvalid,
    /// A notification was not delivered after its retries (on the
    /// `NotificationRule`); the note names the provider and the last error,
    /// never a secret.
    NotificationFailed,
    /// A wave's analysis passed (on the `AnalysisRun`).
    AnalysisPassed,
    /// A wave's analysis failed: the note says which check and why; the
    /// wave is rolled back.
    AnalysisFailed,
    /// A wave's analysis was inconclusive past its limit: the wave is held.
    AnalysisPaused,
    /// An analysis outcome committed to the fleet repository (a promotion
    /// or a rollback); the note names the commit.
    AnalysisCommitted,
    /// An analysis outcome's commit could not be made; it is tried again.
    AnalysisCommitFailed,
    /// A Fleet's fetched commit was not applied: unsigned, signed by a key
    /// its `spec.verify` Secret does not trust, a signature that does not
    /// verify, or keys that cannot be read; the note names the commit and
    /// why (a key by fingerprint only).
    CommitVerificationFailed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::PodCreated => "PodCreated",
            Reason::PodRolled => "PodRolled",
            Reason::PodRemoved => "PodRemoved",
            Reason::PodRestarted => "PodRestarted",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::FilesystemNotFound => "FilesystemNotFound",
            Reason::FilesystemTerminating => "FilesystemTerminating",
            Reason::VolumeCreated => "VolumeCreated",
            Reason::VolumeResized => "VolumeResized",
            Reason::ShrinkRefused => "ShrinkRefused",
            Reason::AboveMaxSize => "AboveMaxSize",
            Reason::DeleteRefused => "DeleteRefused",
            Reason::VolumeRetained => "VolumeRetained",
            Reason::ReconcileError => "ReconcileError",
            Reason::DriftReverted => "DriftReverted",
            Reason::ContentDrift => "ContentDrift",
            Reason::Pruned => "Pruned",
            Reason::PruneBlocked => "PruneBlocked",
            Reason::AuditFinding => "AuditFinding",
            Reason::AuditCleared => "AuditCleared",
            Reason::UpstreamDisconnected => "UpstreamDisconnected",
            Reason::UpstreamWedged => "UpstreamWedged",
            Reason::CrashLoop => "CrashLoop",
            Reason::CrashLoopCleared => "CrashLoopCleared",
            Reason::AgentSilent => "AgentSilent",
            Reason::AgentSilentCleared => "AgentSilentCleared",
            Reason::TenantStepDone => "TenantStepDone",
            Reason::TenantWaiting => "TenantWaiting",
            Reason::TenantActive => "TenantActive",
            Reason::TenantOffboarded => "TenantOffboarded",
            Reason::BackupDrillFailed => "BackupDrillFailed",
            Reason::BackupStale => "BackupStale",
            Reason::BackupStaleCleared => "BackupStaleCleared",
            Reason::BackupDrillStale => "BackupDrillStale",
            Reason::BackupDrillStaleCleared => "BackupDrillStaleCleared",
            Reason::BackupDrillFailedCleared => "BackupDrillFailedCleared",
            Reason::CircuitOpen => "CircuitOpen",
            Reason::CircuitClosed => "CircuitClosed",
            Reason::ModelFailures => "ModelFailures",
            Reason::ModelFailuresCleared => "ModelFailuresCleared",
            Reason::MetricsTargetInvalid => "MetricsTargetInvalid",
            Reason::MetricsScrapeFailed => "MetricsScrapeFailed",
            Reason::MetricsScrapeRecovered => "MetricsScrapeRecovered",
            Reason::CircuitSettingsInvalid => "CircuitSettingsInvalid",
            Reason::NotificationFailed => "NotificationFailed",
            Reason::AnalysisPassed => "AnalysisPassed",
            Reason::AnalysisFailed => "AnalysisFailed",
            Reason::AnalysisPaused => "AnalysisPaused",
            Reason::AnalysisCommitted => "AnalysisCommitted",
            Reason::AnalysisCommitFailed => "AnalysisCommitFailed",
            Reason::CommitVerificationFailed => "CommitVerificationFailed",
        }
    }

    /// The `action` field of the Event.
    pub fn action(self) -> &'static str {
        match self {
            Reason::PodCreated | Reason::VolumeCreated => "Create",
            Reason::PodRolled | Reason::PodRestarted => "Recreate",
            Reason::PodRemoved => "Delete",
            Reason::VolumeResized | Reason::ShrinkRefused | Reason::AboveMaxSize => "Resize",
            Reason::DeleteRefused | Reason::VolumeRetained => "Delete",
            Reason::DriftReverted => "Apply",
            Reason::ContentDrift | Reason::BackupDrillFailed | Reason::CommitVerificationFailed => {
                "Verify"
            }
            Reason::Pruned | Reason::PruneBlocked => "Prune",
            Reason::AuditFinding | Reason::AuditCleared => "Audit",
            Reason::UpstreamDisconnected | Reason::UpstreamWedged => "Connect",
            Reason::TenantStepDone
            | Reason::TenantWaiting
            | Reason::TenantActive
            | Reason::TenantOffboarded => "Lifecycle",
            Reason::CrashLoop
            | Reason::CrashLoopCleared
            | Reason::AgentSilent
            | Reason::AgentSilentCleared => "Monitor",
            Reason::BackupStale
            | Reason::BackupStaleCleared
            | Reason::BackupDrillStale
            | Reason::BackupDrillStaleCleared
            | Reason::BackupDrillFailedCleared => "Backup",
            Reason::CircuitOpen
            | Reason::CircuitClosed
            | Reason::ModelFailures
            | Reason::ModelFailuresCleared
            | Reason::MetricsTargetInvalid
            | Reason::MetricsScrapeFailed
            | Reason::MetricsScrapeRecovered
            | Reason::CircuitSettingsInvalid => "Circuits",
            Reason::NotificationFailed => "Notify",
            Reason::AnalysisPassed | Reason::AnalysisFailed | Reason::AnalysisPaused => "Analyze",
            Reason::AnalysisCommitted | Reason::AnalysisCommitFailed => "Commit",
            Reason::InvalidSpec
            | Reason::FilesystemNotFound
            | Reason::FilesystemTerminating
            | Reason::ReconcileError => "Reconcile",
        }
    }
}
