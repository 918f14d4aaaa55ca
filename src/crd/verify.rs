//! `spec.verify` of a Fleet: the commits the operator applies must be
//! signed by a key that a Secret trusts (`src/fleet/verify/`,
//! docs/supply-chain.md, "Signed fleet commits"). Without it nothing is
//! verified, as before.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Which commits must be signed, and by whom.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetVerify {
    /// `head`: the commit to apply must be signed. `all-since`: every
    /// commit since the Fleet's `status.appliedCommit` up to the head
    /// (merges included) must be signed; with no applied commit yet, or
    /// one the fetched history does not contain (a force push), only the
    /// head is checked.
    #[serde(default)]
    pub mode: VerifyMode,
    /// A Secret in the Fleet's namespace holding the trusted keys: key
    /// `allowed_signers` (SSH signers in git's
    /// `gpg.ssh.allowedSignersFile` format) and any keys ending `.asc`
    /// (armored OpenPGP public keys or keyrings). No other key is allowed.
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$') && size(self) <= 253").message("secretRef must be a Secret name (a DNS-1123 subdomain)"))]
    pub secret_ref: String,
}

/// Which commits [`FleetVerify`] checks.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum VerifyMode {
    /// The commit to apply.
    #[default]
    Head,
    /// Every commit since the last applied one, up to the head.
    AllSince,
}

impl VerifyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyMode::Head => "head",
            VerifyMode::AllSince => "all-since",
        }
    }
}
