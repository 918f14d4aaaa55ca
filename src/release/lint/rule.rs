//! The lint rules. Each has a stable id, the one findings print (`[id]`)
//! and carry in JSON, so scripts may match on it.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// An image pinned by tag, not by digest.
    MutableTag,
    /// A digest that is not `sha256:<64 lowercase hex>`.
    MalformedDigest,
    /// An image with both a tag and a digest.
    TagInImage,
    /// A document of another `apiVersion`.
    ApiVersion,
    /// A document of another `kind`.
    Kind,
    /// A release whose file is named otherwise.
    NameMismatch,
    /// A component name used twice.
    DuplicateComponent,
    /// A release without components.
    NoComponents,
    /// A dependency on no component of the release.
    UnknownDependency,
    /// A capability depending on a consumer.
    LayerInversion,
    /// A component listed before one it depends on.
    DependencyOrder,
    /// Components depending on each other in a circle.
    DependencyCycle,
    /// A ConfigMap named twice.
    DuplicateConfigmap,
    /// A ConfigMap version that does not match its sha256.
    ConfigmapVersion,
    /// A ConfigMap without a source folder.
    ConfigmapSourceMissing,
    /// A ConfigMap whose sha256 matches no source.
    ConfigmapHashMismatch,
    /// Waves other than canary, low-risk, fleet in that order.
    WaveOrder,
    /// A wave naming a tenant without a folder.
    UnknownTenant,
    /// A wave selecting no tenant.
    EmptyWave,
    /// A tenant in more than one wave.
    TenantInTwoWaves,
    /// A soak time that is not a duration.
    BadSoakTime,
    /// A tenant in no wave.
    UncoveredTenant,
    /// A broken `compatibleWith`: with itself, or dropping a capability.
    Compatibility,
    /// A release named that is not in `releases/`.
    UnknownRelease,
    /// No `releases/waves.yaml`.
    NoWavePointers,
    /// A tenant's `tier` that `tiers.yaml` does not declare.
    UnknownTier,
    /// A tenant's `wave` that does not exist or that a release contradicts.
    TenantWave,
    /// Two tenants' uid ranges that share a uid.
    UidRangeOverlap,
    /// A tenant's `storage.agentFS` named like an AgentFS of its folder.
    TenantAgentFs,
    /// A wave's analysis check naming no built-in.
    UnknownBuiltin,
    /// A Prometheus check's query template that does not render or parse.
    BadQuery,
    /// A Prometheus check's success or failure condition that does not parse.
    BadCondition,
    /// Any other wrong field of a wave's analysis or `autoPromote`.
    BadAnalysis,
    /// A `spec.signatures` key that does not parse, is named twice, or a
    /// `spec.signatures` without keys.
    BadSigningKey,
    /// An image whose signature does not verify (only with
    /// `--verify-signatures`, which asks the registry).
    Signature,
    /// A tenant placed on a cluster `clusters/` does not declare.
    UnknownCluster,
    /// A placement selector that matches no declared cluster.
    SelectorMatchesNothing,
    /// A tenant placed on no cluster of a fleet that spans clusters.
    TenantUnplaced,
    /// More tenants placed on a cluster than its `capacity.maxTenants`.
    ClusterCapacity,
}

impl Rule {
    pub const ALL: [Rule; 39] = [
        Rule::MutableTag,
        Rule::MalformedDigest,
        Rule::TagInImage,
        Rule::ApiVersion,
        Rule::Kind,
        Rule::NameMismatch,
        Rule::DuplicateComponent,
        Rule::NoComponents,
        Rule::UnknownDependency,
        Rule::LayerInversion,
        Rule::DependencyOrder,
        Rule::DependencyCycle,
        Rule::DuplicateConfigmap,
        Rule::ConfigmapVersion,
        Rule::ConfigmapSourceMissing,
        Rule::ConfigmapHashMismatch,
        Rule::WaveOrder,
        Rule::UnknownTenant,
        Rule::EmptyWave,
        Rule::TenantInTwoWaves,
        Rule::BadSoakTime,
        Rule::UncoveredTenant,
        Rule::Compatibility,
        Rule::UnknownRelease,
        Rule::NoWavePointers,
        Rule::UnknownTier,
        Rule::TenantWave,
        Rule::UidRangeOverlap,
        Rule::TenantAgentFs,
        Rule::UnknownBuiltin,
        Rule::BadQuery,
        Rule::BadCondition,
        Rule::BadAnalysis,
        Rule::BadSigningKey,
        Rule::Signature,
        Rule::UnknownCluster,
        Rule::SelectorMatchesNothing,
        Rule::TenantUnplaced,
        Rule::ClusterCapacity,
    ];

    /// The stable id, e.g. `mutable-tag`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::MutableTag => "mutable-tag",
            Rule::MalformedDigest => "malformed-digest",
            Rule::TagInImage => "tag-in-image",
            Rule::ApiVersion => "api-version",
            Rule::Kind => "kind",
            Rule::NameMismatch => "name-mismatch",
            Rule::DuplicateComponent => "duplicate-component",
            Rule::NoComponents => "no-components",
            Rule::UnknownDependency => "unknown-dependency",
            Rule::LayerInversion => "layer-inversion",
            Rule::DependencyOrder => "dependency-order",
            Rule::DependencyCycle => "dependency-cycle",
            Rule::DuplicateConfigmap => "duplicate-configmap",
            Rule::ConfigmapVersion => "configmap-version",
            Rule::ConfigmapSourceMissing => "configmap-source-missing",
            Rule::ConfigmapHashMismatch => "configmap-hash-mismatch",
            Rule::WaveOrder => "wave-order",
            Rule::UnknownTenant => "unknown-tenant",
            Rule::EmptyWave => "empty-wave",
            Rule::TenantInTwoWaves => "tenant-in-two-waves",
            Rule::BadSoakTime => "bad-soak-time",
            Rule::UncoveredTenant => "uncovered-tenant",
            Rule::Compatibility => "compatibility",
            Rule::UnknownRelease => "unknown-release",
            Rule::NoWavePointers => "no-wave-pointers",
            Rule::UnknownTier => "unknown-tier",
            Rule::TenantWave => "tenant-wave",
            Rule::UidRangeOverlap => "uid-range-overlap",
            Rule::TenantAgentFs => "tenant-agentfs",
            Rule::UnknownBuiltin => "unknown-builtin",
            Rule::BadQuery => "bad-query",
            Rule::BadCondition => "bad-condition",
            Rule::BadAnalysis => "bad-analysis",
            Rule::BadSigningKey => "bad-signing-key",
            Rule::Signature => "signature",
            Rule::UnknownCluster => "unknown-cluster",
            Rule::SelectorMatchesNothing => "selector-matches-nothing",
            Rule::TenantUnplaced => "tenant-unplaced",
            Rule::ClusterCapacity => "cluster-capacity",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// As its id: JSON output carries the same string as the text output.
impl serde::Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}
