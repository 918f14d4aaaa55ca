//! The registry side of the signature check: per image, its signature
//! manifest and each signed payload, judged by `cosign::judge`.

use futures::StreamExt as _;

use super::cosign::{self, FormatError, Judgement, MAX_PAYLOAD_BYTES};
use super::key::TrustedKey;
use super::{Results, SignatureError, Verified, key_names};
use crate::fleet::pin::{Credentials, Object, PinError, Reader, ResolverOptions};
use crate::fleet::release::ImageRef;

/// A signature manifest is a few hundred bytes per signature.
const MAX_MANIFEST_BYTES: usize = 1024 * 1024;

/// Verifies every image of `images` (each `repository@sha256:…`) against
/// `keys`, over one reader opened for them.
pub async fn verify_all(
    images: &[String],
    keys: &[TrustedKey],
    creds: &Credentials,
    opts: &ResolverOptions,
) -> Results {
    let reader = open_for(images.iter(), creds, opts).await;
    verify_with(&reader, images, keys, opts.max_in_flight).await
}

/// Verifies several sets of images, each against its own keys (one per
/// release), over one reader: a registry's challenge is learned once for
/// all of them. The results in the order of `sets`.
pub async fn verify_sets(
    sets: &[(Vec<TrustedKey>, Vec<String>)],
    creds: &Credentials,
    opts: &ResolverOptions,
) -> Vec<Results> {
    let reader = open_for(sets.iter().flat_map(|(_, images)| images), creds, opts).await;
    let reader = &reader;
    futures::stream::iter(sets)
        .then(|(keys, images)| verify_with(reader, images, keys, opts.max_in_flight))
        .collect()
        .await
}

/// A reader for `images`' registries.
pub async fn open_for<'a>(
    images: impl Iterator<Item = &'a String>,
    creds: &Credentials,
    opts: &ResolverOptions,
) -> Reader {
    let first: Vec<(String, String)> = images
        .filter_map(|i| {
            let r = ImageRef::parse(i);
            let tag = cosign::signature_tag(r.digest.as_deref()?)?;
            Some((r.repository, tag))
        })
        .collect();
    Reader::open(&first, creds, opts).await
}

/// [`verify_all`] over a reader the caller keeps (the operator's, across
/// releases).
pub async fn verify_with(
    reader: &Reader,
    images: &[String],
    keys: &[TrustedKey],
    max_in_flight: usize,
) -> Results {
    // The futures made first, then run: a stream that maps borrowed items
    // to futures is not `Send` for every lifetime, which the operator's
    // controller needs.
    let checks: Vec<_> = images
        .iter()
        .map(|image| {
            let image = image.clone();
            async move {
                let r = verify_one(reader, &image, keys).await;
                (image, r)
            }
        })
        .collect();
    futures::stream::iter(checks)
        .buffer_unordered(max_in_flight.max(1))
        .collect()
        .await
}

async fn verify_one(
    reader: &Reader,
    image: &str,
    keys: &[TrustedKey],
) -> Result<Verified, SignatureError> {
    let r = ImageRef::parse(image);
    let not_pinned = || SignatureError::NotPinned {
        image: image.to_owned(),
    };
    let digest = r.digest.clone().ok_or_else(not_pinned)?;
    let tag = cosign::signature_tag(&digest).ok_or_else(not_pinned)?;
    let not_cosign = |e: FormatError| SignatureError::NotCosign {
        image: image.to_owned(),
        tag: tag.clone(),
        reason: e.to_string(),
    };
    let manifest = reader
        .get(&r.repository, &tag, Object::Manifest, MAX_MANIFEST_BYTES)
        .await
        .map_err(SignatureError::Registry)?
        .ok_or_else(|| SignatureError::Unsigned {
            image: image.to_owned(),
            tag: tag.clone(),
        })?;
    let layers = cosign::signature_layers(&manifest).map_err(not_cosign)?;
    let limit = usize::try_from(MAX_PAYLOAD_BYTES).unwrap_or(usize::MAX);
    let mut signed = Vec::with_capacity(layers.len());
    for layer in layers {
        let payload = reader
            .get(&r.repository, &layer.digest, Object::Blob, limit)
            .await
            .map_err(|e| match e {
                PinError::Unreachable { .. } | PinError::Auth { .. } => SignatureError::Registry(e),
                other => not_cosign(FormatError::NotManifest(other.to_string())),
            })?
            .ok_or_else(|| SignatureError::NotCosign {
                image: image.to_owned(),
                tag: tag.clone(),
                reason: format!("its payload {} is not in the registry", layer.digest),
            })?;
        signed.push((layer, payload.to_vec()));
    }
    match cosign::judge(&digest, &signed, keys).map_err(not_cosign)? {
        Judgement::Verified { key, layer } => {
            let k = &keys[key];
            Ok(Verified {
                image: image.to_owned(),
                key: k.name.clone(),
                key_id: k.id.clone(),
                signature: layer,
            })
        }
        Judgement::OtherDigest { signed } => Err(SignatureError::OtherDigest {
            image: image.to_owned(),
            signed,
        }),
        Judgement::Untrusted { signatures } => Err(SignatureError::Untrusted {
            image: image.to_owned(),
            signatures,
            keys: key_names(keys),
        }),
    }
}
