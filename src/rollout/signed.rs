//! The saga's `signatures-verified` step: every image of a release that
//! names signing keys must carry a cosign signature by one of them before
//! anything of the release is published or applied (`crate::signatures`
//! does the checking).
//!
//! Guarantees:
//! - one check per (release's keys, image) serves every tenant: a verified
//!   image is remembered for the term (a digest's content never changes,
//!   and a signature that verified once stays valid for it), a refused one
//!   for [`REFUSED_FOR`], so a thousand tenants on one release cost the
//!   registry one look per image, and an image signed after a refusal is
//!   seen within that time;
//! - checks run one at a time, so tenants that start together wait for
//!   the first one's answer instead of asking the registry each;
//! - a registry that cannot be asked holds the step (`Waiting`); an image
//!   that is unsigned, signed by no trusted key, or carries a copied
//!   signature fails it, naming the image and why; the engine looks again
//!   every [`RETRY`], so signing the image lets the same release go on.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::crd::ImageSignature;
use crate::fleet::pin::{Credentials, ResolverOptions};
use crate::release::Release;
use crate::saga::Outcome;
use crate::signatures::{self, SignatureError, TrustedKey, Verified};

/// How long a refused image is remembered.
pub const REFUSED_FOR: Duration = Duration::from_secs(15);
/// How often a saga failed on signatures looks again.
pub const RETRY: Duration = Duration::from_secs(30);
/// Remembered results at most (a term's releases' images, many times over).
const REMEMBERED: usize = 4096;

/// (the key set's ids, the image).
type Key = (String, String);
/// An image's result and when it was found.
type Seen = (Result<Verified, SignatureError>, Instant);

/// This term's signature checks and what they found.
pub struct SignatureChecks {
    creds: Credentials,
    opts: ResolverOptions,
    seen: tokio::sync::Mutex<HashMap<Key, Seen>>,
}

impl SignatureChecks {
    /// Checks that read registries with `creds`.
    pub fn new(creds: Credentials) -> Self {
        SignatureChecks {
            creds,
            opts: ResolverOptions::default(),
            seen: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The step's outcome for `release`, and the signature of each image
    /// when all verified.
    pub async fn check(&self, release: &Release) -> (Outcome, Vec<ImageSignature>) {
        let keys = match signatures::required_keys(release, None) {
            Ok(k) if !k.is_empty() => k,
            Ok(_) => {
                return (
                    Outcome::Failed(format!(
                        "release {} names no signing keys in spec.signatures.keys",
                        release.metadata.name
                    )),
                    Vec::new(),
                );
            }
            Err(e) => {
                return (
                    Outcome::Failed(format!("release {}: {e}", release.metadata.name)),
                    Vec::new(),
                );
            }
        };
        let images = signatures::images_of(release);
        let results = self.results(&keys, &images).await;
        judge(&release.metadata.name, &images, &results)
    }

    /// Each image's result, from memory where it is still good, else from
    /// the registry (one check at a time: the lock is held across it).
    async fn results(&self, keys: &[TrustedKey], images: &[String]) -> signatures::Results {
        let set = key_set(keys);
        let mut seen = self.seen.lock().await;
        let now = Instant::now();
        let stale = |r: &Seen| r.0.is_err() && now.duration_since(r.1) >= REFUSED_FOR;
        let ask: Vec<String> = images
            .iter()
            .filter(|i| seen.get(&(set.clone(), (*i).clone())).is_none_or(&stale))
            .cloned()
            .collect();
        if !ask.is_empty() {
            let fresh = signatures::verify_all(&ask, keys, &self.creds, &self.opts).await;
            if seen.len() + fresh.len() > REMEMBERED {
                seen.clear();
            }
            for (image, r) in fresh {
                seen.insert((set.clone(), image), (r, now));
            }
        }
        images
            .iter()
            .filter_map(|i| {
                let r = seen.get(&(set.clone(), i.clone()))?;
                Some((i.clone(), r.0.clone()))
            })
            .collect()
    }
}

/// The ids of `keys`, as one string: results are remembered per key set.
fn key_set(keys: &[TrustedKey]) -> String {
    let mut ids: Vec<&str> = keys.iter().map(|k| k.id.as_str()).collect();
    ids.sort_unstable();
    ids.join(",")
}

/// The step's outcome from each image's result. Pure.
pub fn judge(
    release: &str,
    images: &[String],
    results: &signatures::Results,
) -> (Outcome, Vec<ImageSignature>) {
    let mut refused = Vec::new();
    let mut transient = Vec::new();
    let mut verified = Vec::new();
    for image in images {
        match results.get(image) {
            Some(Ok(v)) => verified.push(ImageSignature {
                image: v.image.clone(),
                key: v.key.clone(),
                key_id: v.key_id.clone(),
                signature: v.signature.clone(),
            }),
            Some(Err(e)) if e.transient() => transient.push(e.to_string()),
            Some(Err(e)) => refused.push(e.to_string()),
            None => transient.push(format!("{image}: not checked")),
        }
    }
    let list = |v: &[String]| {
        let mut s = v.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
        if v.len() > 3 {
            s.push_str(&format!("; and {} more", v.len() - 3));
        }
        s
    };
    if !refused.is_empty() {
        return (
            Outcome::Failed(format!(
                "release {release}: {} of {} image(s) not verified: {}",
                refused.len(),
                images.len(),
                list(&refused)
            )),
            Vec::new(),
        );
    }
    if !transient.is_empty() {
        return (
            Outcome::Waiting(format!(
                "cannot check the signatures of release {release} yet: {}",
                list(&transient)
            )),
            Vec::new(),
        );
    }
    (Outcome::Done, verified)
}

/// For a release that names signing keys: the first container of `w`'s
/// `pod` whose running imageID is not a digest a signature verified
/// (`verified`, the Rollout's `status.signatures`), as a problem message;
/// `None` when every one is. The live re-check asks it beside the pin
/// check, so a pod runs only digests whose signatures were verified. Pure.
pub fn unverified_running(
    w: &super::saga::Workload,
    pod: &k8s_openapi::api::core::v1::Pod,
    verified: &[ImageSignature],
) -> Option<String> {
    let digests: std::collections::BTreeSet<&str> = verified
        .iter()
        .filter_map(|s| s.image.split_once('@').map(|(_, d)| d))
        .collect();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    w.images().into_iter().find_map(|(container, _)| {
        let st = statuses.iter().find(|s| s.name == container)?;
        let running = super::saga::digest_of_image_id(&st.image_id)?;
        (!digests.contains(running)).then(|| {
            format!(
                "pod {name} container {container} runs {running}, which no verified signature covers"
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::pin::PinError;

    fn ok(image: &str) -> Result<Verified, SignatureError> {
        Ok(Verified {
            image: image.into(),
            key: "ci".into(),
            key_id: "sha256:ab".into(),
            signature: "sha256:cd".into(),
        })
    }

    #[test]
    fn every_image_must_verify_and_a_refusal_beats_a_registry_outage() {
        let images = vec!["r/a@sha256:1".to_owned(), "r/b@sha256:2".to_owned()];
        let mut results = signatures::Results::new();
        results.insert(images[0].clone(), ok(&images[0]));
        results.insert(images[1].clone(), ok(&images[1]));
        let (o, sigs) = judge("r1", &images, &results);
        assert_eq!(o, Outcome::Done);
        assert_eq!(sigs.len(), 2);
        assert_eq!(sigs[1].image, "r/b@sha256:2");

        let down = SignatureError::Registry(PinError::Unreachable {
            image: images[1].clone(),
            registry: "r".into(),
            reason: "connection refused".into(),
        });
        results.insert(images[1].clone(), Err(down));
        let (o, sigs) = judge("r1", &images, &results);
        assert!(matches!(o, Outcome::Waiting(m) if m.contains("connection refused")));
        assert!(sigs.is_empty());

        results.insert(
            images[0].clone(),
            Err(SignatureError::Unsigned {
                image: images[0].clone(),
                tag: "sha256-1.sig".into(),
            }),
        );
        let (o, _) = judge("r1", &images, &results);
        assert!(
            matches!(&o, Outcome::Failed(m) if m.contains("r/a@sha256:1: not signed") && m.contains("1 of 2")),
            "{o:?}"
        );
    }

    #[test]
    fn a_running_digest_must_be_one_whose_signature_verified() {
        let tool: crate::crd::Tool = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "Tool",
            "metadata": {"name": "broker"},
            "spec": {"container": {"image": "r/broker@sha256:1"}}
        }))
        .unwrap();
        let w = super::super::saga::Workload::Tool(tool);
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "tool-broker-1"},
            "status": {"containerStatuses": [{"name": "tool", "image": "r/broker",
                "imageID": "r/broker@sha256:1", "ready": true, "restartCount": 0}]}
        }))
        .unwrap();
        let sig = |image: &str| ImageSignature {
            image: image.into(),
            key: "ci".into(),
            key_id: "sha256:ab".into(),
            signature: "sha256:cd".into(),
        };
        assert_eq!(
            unverified_running(&w, &pod, &[sig("r/broker@sha256:1")]),
            None
        );
        assert_eq!(
            unverified_running(&w, &pod, &[sig("r/broker@sha256:2")]).as_deref(),
            Some(
                "pod tool-broker-1 container tool runs sha256:1, which no verified signature covers"
            )
        );
        assert!(unverified_running(&w, &pod, &[]).is_some());
    }

    #[test]
    fn the_key_set_does_not_depend_on_order() {
        let (_, a) = crate::signatures::cosign::tests::keypair(1, "a");
        let (_, b) = crate::signatures::cosign::tests::keypair(2, "b");
        assert_eq!(key_set(&[a.clone(), b.clone()]), key_set(&[b, a]));
    }
}
