//! cosign's signature format, key-based and without a transparency log: a
//! signature of the image `repo@sha256:<hex>` is an OCI image manifest
//! tagged `sha256-<hex>.sig` in the same repository; each of its layers is
//! a "simple signing" payload (media type
//! `application/vnd.dev.cosign.simplesigning.v1+json`) with the base64
//! signature of its bytes in the annotation
//! `dev.cosignproject.cosign/signature`. The payload names the digest it
//! signs (`critical.image.docker-manifest-digest`), which must be the
//! image's: a signature copied from another image verifies with the key but
//! names another digest. Pure; the registry reads are `fetch`'s.

use serde::Deserialize;

use super::key::TrustedKey;

pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
const PAYLOAD_TYPE: &str = "cosign container image signature";
/// Payloads are a few hundred bytes; anything much larger is not one.
pub const MAX_PAYLOAD_BYTES: u64 = 64 * 1024;
/// Signatures read per image at most (cosign appends one per `sign`).
pub const MAX_SIGNATURES: usize = 32;

/// The tag cosign stores `digest`'s signatures under, or `None` when
/// `digest` is not `sha256:` and 64 hex digits.
pub fn signature_tag(digest: &str) -> Option<String> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("sha256-{hex}.sig"))
}

/// One signature of the manifest: its payload's descriptor and the
/// signature bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureLayer {
    pub digest: String,
    pub size: u64,
    pub signature: Vec<u8>,
}

/// Why a manifest at the signature tag is not a cosign signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("its manifest is not JSON an OCI image manifest has: {0}")]
    NotManifest(String),
    #[error("it has no layer of type {SIMPLE_SIGNING} (layers: {0})")]
    NoSignatureLayer(String),
    #[error("layer {digest} has no {SIGNATURE_ANNOTATION} annotation in base64")]
    NoSignature { digest: String },
    #[error("layer {digest} is {size} bytes; a signed payload is at most {MAX_PAYLOAD_BYTES}")]
    TooLarge { digest: String, size: u64 },
    #[error("it has {0} signature layers; at most {MAX_SIGNATURES} are read")]
    TooMany(usize),
    #[error("payload {digest} does not hash to its digest")]
    DigestMismatch { digest: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    #[serde(default)]
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

/// The signature layers of the manifest found at the signature tag.
pub fn signature_layers(manifest: &[u8]) -> Result<Vec<SignatureLayer>, FormatError> {
    use base64::Engine as _;
    let m: Manifest =
        serde_json::from_slice(manifest).map_err(|e| FormatError::NotManifest(e.to_string()))?;
    let signing: Vec<&Descriptor> = m
        .layers
        .iter()
        .filter(|l| l.media_type == SIMPLE_SIGNING)
        .collect();
    if signing.is_empty() {
        let types: Vec<&str> = m.layers.iter().map(|l| l.media_type.as_str()).collect();
        return Err(FormatError::NoSignatureLayer(if types.is_empty() {
            "none".into()
        } else {
            types.join(", ")
        }));
    }
    if signing.len() > MAX_SIGNATURES {
        return Err(FormatError::TooMany(signing.len()));
    }
    signing
        .into_iter()
        .map(|l| {
            if l.size > MAX_PAYLOAD_BYTES {
                return Err(FormatError::TooLarge {
                    digest: l.digest.clone(),
                    size: l.size,
                });
            }
            let signature = l
                .annotations
                .get(SIGNATURE_ANNOTATION)
                .and_then(|s| {
                    base64::engine::general_purpose::STANDARD
                        .decode(s.trim())
                        .ok()
                })
                .filter(|s| !s.is_empty())
                .ok_or_else(|| FormatError::NoSignature {
                    digest: l.digest.clone(),
                })?;
            Ok(SignatureLayer {
                digest: l.digest.clone(),
                size: l.size,
                signature,
            })
        })
        .collect()
}

/// What one image's signatures come to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// `key` (an index into the keys) verified the payload `layer`, which
    /// names the image's digest.
    Verified { key: usize, layer: String },
    /// A key verified a payload, but the payload signs `signed`, another
    /// image: the signature was copied.
    OtherDigest { signed: String },
    /// No signature verifies with any of the keys.
    Untrusted { signatures: usize },
}

/// Judges `digest`'s signatures: each layer with its payload bytes (as
/// fetched; their hash is checked here), against `keys`. The first
/// verified signature naming `digest` wins.
pub fn judge(
    digest: &str,
    layers: &[(SignatureLayer, Vec<u8>)],
    keys: &[TrustedKey],
) -> Result<Judgement, FormatError> {
    use sha2::Digest as _;
    let mut other = None;
    for (layer, payload) in layers {
        if format!("sha256:{:x}", sha2::Sha256::digest(payload)) != layer.digest {
            return Err(FormatError::DigestMismatch {
                digest: layer.digest.clone(),
            });
        }
        let Some(key) = keys
            .iter()
            .position(|k| k.verifies(payload, &layer.signature))
        else {
            continue;
        };
        match signed_digest(payload) {
            Some(d) if d == digest => {
                return Ok(Judgement::Verified {
                    key,
                    layer: layer.digest.clone(),
                });
            }
            Some(d) => other = Some(d),
            // Signed by a trusted key, but not an image signature payload.
            None => other = Some("no image digest (not an image signature payload)".into()),
        }
    }
    Ok(match other {
        Some(signed) => Judgement::OtherDigest { signed },
        None => Judgement::Untrusted {
            signatures: layers.len(),
        },
    })
}

/// The digest a simple signing payload signs, when it is an image
/// signature payload.
fn signed_digest(payload: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Payload {
        critical: Critical,
    }
    #[derive(Deserialize)]
    struct Critical {
        #[serde(rename = "type")]
        type_: String,
        image: Image,
    }
    #[derive(Deserialize)]
    struct Image {
        #[serde(rename = "docker-manifest-digest")]
        digest: String,
    }
    let p: Payload = serde_json::from_slice(payload).ok()?;
    (p.critical.type_ == PAYLOAD_TYPE).then_some(p.critical.image.digest)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use base64::Engine as _;
    use p256::ecdsa::SigningKey;
    use p256::ecdsa::signature::Signer as _;
    use p256::pkcs8::EncodePublicKey as _;

    pub(crate) fn keypair(seed: u8, name: &str) -> (SigningKey, TrustedKey) {
        let sk = SigningKey::from_slice(&[seed; 32]).unwrap();
        let pem = sk
            .verifying_key()
            .to_public_key_pem(p256::pkcs8::LineEnding::LF)
            .unwrap();
        let k = TrustedKey::parse(name, &pem).unwrap();
        (sk, k)
    }

    pub(crate) fn payload(digest: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "critical": {
                "identity": {"docker-reference": "127.0.0.1:25000/exo/app"},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature"
            },
            "optional": null
        }))
        .unwrap()
    }

    pub(crate) fn signed(sk: &SigningKey, payload: Vec<u8>) -> (SignatureLayer, Vec<u8>) {
        use sha2::Digest as _;
        let sig: p256::ecdsa::Signature = sk.sign(&payload);
        (
            SignatureLayer {
                digest: format!("sha256:{:x}", sha2::Sha256::digest(&payload)),
                size: payload.len() as u64,
                signature: sig.to_der().as_bytes().to_vec(),
            },
            payload,
        )
    }

    const D: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const E: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn the_tag_is_cosigns() {
        assert_eq!(
            signature_tag(D).as_deref(),
            Some("sha256-1111111111111111111111111111111111111111111111111111111111111111.sig")
        );
        assert_eq!(signature_tag("sha256:abc"), None);
        assert_eq!(signature_tag("1.0"), None);
    }

    #[test]
    fn a_manifest_gives_its_signature_layers() {
        let sig = base64::engine::general_purpose::STANDARD.encode(b"sig");
        let m = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": E, "size": 2},
            "layers": [{"mediaType": SIMPLE_SIGNING, "digest": D, "size": 250,
                        "annotations": {SIGNATURE_ANNOTATION: sig}}]
        });
        let layers = signature_layers(&serde_json::to_vec(&m).unwrap()).unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0].signature, b"sig");
        // An image pushed at the tag, not a signature.
        let image = serde_json::json!({"schemaVersion": 2, "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": D, "size": 9}]});
        assert_eq!(
            signature_layers(&serde_json::to_vec(&image).unwrap()),
            Err(FormatError::NoSignatureLayer(
                "application/vnd.oci.image.layer.v1.tar+gzip".into()
            ))
        );
        let unsigned =
            serde_json::json!({"layers": [{"mediaType": SIMPLE_SIGNING, "digest": D, "size": 9}]});
        assert!(matches!(
            signature_layers(&serde_json::to_vec(&unsigned).unwrap()),
            Err(FormatError::NoSignature { .. })
        ));
        let big = serde_json::json!({"layers": [{"mediaType": SIMPLE_SIGNING, "digest": D,
            "size": MAX_PAYLOAD_BYTES + 1, "annotations": {SIGNATURE_ANNOTATION: "c2ln"}}]});
        assert!(matches!(
            signature_layers(&serde_json::to_vec(&big).unwrap()),
            Err(FormatError::TooLarge { .. })
        ));
        assert!(matches!(
            signature_layers(b"<html>"),
            Err(FormatError::NotManifest(_))
        ));
    }

    #[test]
    fn only_a_trusted_signature_of_this_digest_verifies() {
        let (ci, ci_key) = keypair(1, "ci");
        let (other, other_key) = keypair(2, "other");
        let keys = [other_key.clone(), ci_key];
        // Signed by the second key: it is the one named.
        let good = signed(&ci, payload(D));
        assert_eq!(
            judge(D, std::slice::from_ref(&good), &keys),
            Ok(Judgement::Verified {
                key: 1,
                layer: good.0.digest.clone()
            })
        );
        // A signature of E copied under D's tag.
        let copied = signed(&ci, payload(E));
        assert_eq!(
            judge(D, std::slice::from_ref(&copied), &keys),
            Ok(Judgement::OtherDigest { signed: E.into() })
        );
        // One copied, one good: the good one wins.
        assert!(matches!(
            judge(D, &[copied, good.clone()], &keys),
            Ok(Judgement::Verified { key: 1, .. })
        ));
        // Signed by a key not trusted.
        assert_eq!(
            judge(D, std::slice::from_ref(&good), &[other_key]),
            Ok(Judgement::Untrusted { signatures: 1 })
        );
        // A payload that is not the bytes its digest names.
        let (mut layer, bytes) = signed(&other, payload(D));
        layer.digest = E.into();
        assert!(matches!(
            judge(D, &[(layer, bytes)], &keys),
            Err(FormatError::DigestMismatch { .. })
        ));
        // Signed, but not an image signature payload.
        let odd = signed(&ci, b"{\"critical\":{}}".to_vec());
        assert!(matches!(
            judge(D, &[odd], &keys),
            Ok(Judgement::OtherDigest { .. })
        ));
    }
}
