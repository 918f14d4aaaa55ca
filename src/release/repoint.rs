//! Re-pointing a workload to a release, the one rule both the plan and the
//! rollout saga use: a container image moves to the release component with
//! the same repository (the way image automation in Flux or Kargo matches
//! images); a baseline `<name>-<hash>` moves to the release's ConfigMap
//! version of that `<name>`. Anything the release does not name stays.

use crate::fleet::configmap::baseline_name;
use crate::fleet::release::{Component, ImageRef, Release};

/// The release component whose image has `image`'s repository.
pub fn component_for<'r>(release: &'r Release, image: &str) -> Option<&'r Component> {
    let repo = ImageRef::parse(image).repository;
    release
        .spec
        .components
        .iter()
        .find(|c| ImageRef::parse(&c.image).repository == repo)
}

/// `image` as `release` pins it (unchanged when no component matches).
pub fn image(image: &str, release: &Release) -> String {
    component_for(release, image)
        .map(|c| c.image.clone())
        .unwrap_or_else(|| image.to_owned())
}

/// The baseline version `release` pins for `version`'s baseline name
/// (unchanged when the release has no ConfigMap of that name).
pub fn baseline(version: &str, release: &Release) -> String {
    let name = baseline_name(version);
    release
        .spec
        .config_maps
        .iter()
        .find(|cm| cm.name == name)
        .map(|cm| cm.version.clone())
        .unwrap_or_else(|| version.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repoints_by_repository_and_baseline_name() {
        let f = crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let r = &f.release("2026.11.1").unwrap().value;
        let runtime = &r
            .spec
            .components
            .iter()
            .find(|c| c.name == "agent-runtime")
            .unwrap()
            .image;
        let repo = ImageRef::parse(runtime).repository;
        // Any older digest of the same repository moves to the release's.
        let old = format!("{repo}@sha256:{}", "0".repeat(64));
        assert_eq!(image(&old, r), *runtime);
        assert_eq!(image("elsewhere/x:1", r), "elsewhere/x:1");
        let cm = &r.spec.config_maps[0];
        assert_eq!(baseline(&format!("{}-0000000000", cm.name), r), cm.version);
        assert_eq!(baseline("unknown-0000000000", r), "unknown-0000000000");
    }
}
