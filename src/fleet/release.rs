//! The release manifest and the wave-pointer file, as strict serde types.
//!
//! A release pins the exact image set (every image by digest, the human tag
//! kept beside it for display), the immutable baseline ConfigMap versions, the
//! component dependency order, and the rollout waves with their gates.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// `apiVersion` of every Exo fleet document.
pub const API_VERSION: &str = "autonomic.sh/v1alpha1";
pub const KIND_RELEASE: &str = "Release";
pub const KIND_WAVES: &str = "WavePointers";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Release {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    pub spec: ReleaseSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseSpec {
    /// The previous release this one must stay backward compatible with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatible_with: Option<String>,
    /// Components in apply order: capabilities before the consumers that
    /// depend on them.
    pub components: Vec<Component>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_maps: Vec<ConfigMapVersion>,
    pub waves: Vec<Wave>,
    /// The cosign public keys the release's images must be signed with;
    /// absent, the images are not checked (unless the Fleet names keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signatures: Option<Signatures>,
}

/// Which keys may have signed a release's images (`spec.signatures`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Signatures {
    /// Any one of them verifying an image's signature is enough: during a
    /// rotation the release names both the old key and the new.
    pub keys: Vec<SigningKey>,
}

/// A cosign public key, inline in the release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SigningKey {
    /// What the status and messages call it (`release-ci`).
    pub name: String,
    /// The PEM `PUBLIC KEY` block `cosign generate-key-pair` writes to
    /// `cosign.pub` (ECDSA P-256).
    pub public_key: String,
}

impl ReleaseSpec {
    /// The wave named `name`.
    pub fn wave(&self, name: WaveName) -> Option<&Wave> {
        self.waves.iter().find(|w| w.name == name)
    }

    /// How long wave `name` soaks: the `gates.soakTime` of the wave after
    /// it, which may be promoted only once `name` has been verified that
    /// long. `None` for the last wave, or when the next wave sets none. A
    /// wave's analysis runs over this time.
    pub fn soak_of(&self, name: WaveName) -> Option<&str> {
        let i = self.waves.iter().position(|w| w.name == name)?;
        self.waves.get(i + 1)?.gates.soak_time.as_deref()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Component {
    pub name: String,
    pub layer: Layer,
    /// `repository@sha256:<64 hex>` once pinned; `repository:tag` before.
    pub image: String,
    /// The human tag the digest was resolved from, kept for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// Platform services others depend on (broker, router, agentlet).
    Capability,
    /// Workloads that use capabilities (the agent runtime).
    Consumer,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Capability => "capability",
            Layer::Consumer => "consumer",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigMapVersion {
    /// The baseline's name: its folder `configmaps/<name>/` (or
    /// `configmaps/<name>@<label>/`).
    pub name: String,
    /// `<name>-<short hash>`: the immutable ConfigMap's name.
    pub version: String,
    /// Full sha256 of the content (see `crate::fleet::configmap`).
    pub sha256: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WaveName {
    #[serde(rename = "canary")]
    Canary,
    #[serde(rename = "low-risk")]
    LowRisk,
    #[serde(rename = "fleet")]
    Fleet,
}

impl WaveName {
    /// The only valid order.
    pub const ORDER: [WaveName; 3] = [WaveName::Canary, WaveName::LowRisk, WaveName::Fleet];

    pub fn as_str(self) -> &'static str {
        match self {
            WaveName::Canary => "canary",
            WaveName::LowRisk => "low-risk",
            WaveName::Fleet => "fleet",
        }
    }

    /// The wave before this one, whose verification gates it.
    pub fn next(self) -> Option<WaveName> {
        match self {
            WaveName::Canary => Some(WaveName::LowRisk),
            WaveName::LowRisk => Some(WaveName::Fleet),
            WaveName::Fleet => None,
        }
    }

    pub fn previous(self) -> Option<WaveName> {
        match self {
            WaveName::Canary => None,
            WaveName::LowRisk => Some(WaveName::Canary),
            WaveName::Fleet => Some(WaveName::LowRisk),
        }
    }
}

impl fmt::Display for WaveName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for WaveName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WaveName::ORDER
            .into_iter()
            .find(|w| w.as_str() == s)
            .ok_or_else(|| format!("unknown wave {s:?}; waves are canary, low-risk and fleet"))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Wave {
    pub name: WaveName,
    /// Tenants named explicitly (folders under `manifests/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// Every tenant that no earlier wave selected.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remaining: bool,
    #[serde(default)]
    pub gates: Gates,
    /// Checks that judge this wave on live signals while it soaks
    /// (`crate::analysis`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub analysis: Vec<crate::analysis::Check>,
    /// When this wave's analysis passes, promote the next wave by a git
    /// commit, as `exo release promote` would.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_promote: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gates {
    /// The previous wave must be verified on this release first.
    #[serde(default = "yes")]
    pub require_verification: bool,
    /// How long the previous wave must have been verified, e.g. `10m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak_time: Option<String>,
    /// Most failed tenants tolerated in the previous wave.
    #[serde(default)]
    pub max_failures: u32,
}

fn yes() -> bool {
    true
}

impl Default for Gates {
    fn default() -> Self {
        Gates {
            require_verification: true,
            soak_time: None,
            max_failures: 0,
        }
    }
}

/// The one duration syntax ([`crate::duration::parse`]), here for soak times.
pub use crate::duration::parse as parse_duration;

/// `releases/waves.yaml`: which release each wave runs. Promotion and
/// rollback edit this file in a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WavePointers {
    pub api_version: String,
    pub kind: String,
    pub spec: WavePointersSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WavePointersSpec {
    pub canary: WavePointer,
    #[serde(rename = "low-risk")]
    pub low_risk: WavePointer,
    pub fleet: WavePointer,
}

impl WavePointersSpec {
    pub fn get(&self, wave: WaveName) -> &WavePointer {
        match wave {
            WaveName::Canary => &self.canary,
            WaveName::LowRisk => &self.low_risk,
            WaveName::Fleet => &self.fleet,
        }
    }

    pub fn get_mut(&mut self, wave: WaveName) -> &mut WavePointer {
        match wave {
            WaveName::Canary => &mut self.canary,
            WaveName::LowRisk => &mut self.low_risk,
            WaveName::Fleet => &mut self.fleet,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WavePointer {
    /// The release this wave runs.
    pub release: String,
    /// Releases this wave ran before, newest first; rollback returns to the
    /// newest of them that was verified.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<String>,
}

/// A parsed image reference: `repository[:tag][@sha256:digest]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl ImageRef {
    pub fn parse(image: &str) -> ImageRef {
        let (rest, digest) = match image.split_once('@') {
            Some((r, d)) => (r, Some(d.to_owned())),
            None => (image, None),
        };
        // A ':' after the last '/' is a tag; one before it is a registry port.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (
                rest[..last_slash + i].to_owned(),
                Some(rest[last_slash + i + 1..].to_owned()),
            ),
            None => (rest.to_owned(), None),
        };
        ImageRef {
            repository,
            tag,
            digest,
        }
    }

    /// `sha256:<64 lowercase hex>`.
    pub fn digest_is_valid(digest: &str) -> bool {
        digest.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    }

    pub fn pinned(&self) -> Option<String> {
        self.digest
            .as_ref()
            .map(|d| format!("{}@{d}", self.repository))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_refs_split_registry_port_from_tag() {
        let r = ImageRef::parse("127.0.0.1:25000/exo/broker:1.4.0");
        assert_eq!(r.repository, "127.0.0.1:25000/exo/broker");
        assert_eq!(r.tag.as_deref(), Some("1.4.0"));
        let r = ImageRef::parse("127.0.0.1:25000/exo/broker@sha256:abc");
        assert_eq!(r.repository, "127.0.0.1:25000/exo/broker");
        assert_eq!(r.tag, None);
        assert_eq!(r.digest.as_deref(), Some("sha256:abc"));
        let r = ImageRef::parse("busybox");
        assert_eq!((r.repository.as_str(), r.tag), ("busybox", None));
    }

    #[test]
    fn a_wave_soaks_for_the_next_waves_soak_time() {
        let wave = |name, soak: Option<&str>| Wave {
            name,
            tenants: vec![],
            remaining: false,
            gates: Gates {
                soak_time: soak.map(Into::into),
                ..Gates::default()
            },
            analysis: vec![],
            auto_promote: false,
        };
        let spec = ReleaseSpec {
            compatible_with: None,
            components: vec![],
            config_maps: vec![],
            waves: vec![
                wave(WaveName::Canary, Some("1h")),
                wave(WaveName::LowRisk, Some("30m")),
                wave(WaveName::Fleet, None),
            ],
            signatures: None,
        };
        assert_eq!(spec.soak_of(WaveName::Canary), Some("30m"));
        assert_eq!(spec.soak_of(WaveName::LowRisk), None);
        assert_eq!(spec.soak_of(WaveName::Fleet), None);
        assert_eq!(
            spec.wave(WaveName::LowRisk).map(|w| w.name),
            Some(WaveName::LowRisk)
        );
    }

    #[test]
    fn digest_validation() {
        assert!(ImageRef::digest_is_valid(&format!(
            "sha256:{}",
            "a".repeat(64)
        )));
        for bad in [
            "sha256:abc",
            "sha512:00",
            &format!("sha256:{}", "A".repeat(64)),
        ] {
            assert!(!ImageRef::digest_is_valid(bad), "{bad}");
        }
    }
}
