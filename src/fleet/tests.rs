//! Loading with reuse from an earlier load.

use super::*;

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// The example fleet repository, copied to `dir`.
fn example(dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in ["releases", "manifests", "configmaps"] {
        copy(&root.join(f), &dir.join(f));
    }
}

/// In a changed tenant folder, a file whose id did not change is taken
/// over from the earlier load and not read again (here its bytes on disk
/// are not even YAML); the changed file is read; the result is what a
/// load from scratch of the same content gives.
#[test]
fn a_changed_folder_reads_only_its_changed_files() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    example(one.path());
    example(two.path());
    let first = load(one.path()).unwrap();
    let acme = two.path().join("manifests/acme");
    let router = std::fs::read_to_string(acme.join("router.yaml")).unwrap();
    let edited = router.replacen("name: router", "name: router-b", 1);
    assert_ne!(router, edited);
    std::fs::write(acme.join("router.yaml"), &edited).unwrap();
    let scratch = load(two.path()).unwrap();
    std::fs::write(acme.join("assistant.yaml"), "{ not: [yaml").unwrap();
    // Every folder and file unchanged but acme and its router.yaml.
    let unchanged = |rel: &str| rel != "manifests/acme" && rel != "manifests/acme/router.yaml";
    let again = load_reusing(two.path(), &Reuse::from(&first, &unchanged)).unwrap();
    let (a, s) = (&again.tenants["acme"], &scratch.tenants["acme"]);
    let names = |t: &Tenant| -> Vec<(PathBuf, String)> {
        t.agents
            .iter()
            .map(|x| (x.path.clone(), x.value.metadata.name.clone().unwrap()))
            .chain(
                t.tools
                    .iter()
                    .map(|x| (x.path.clone(), x.value.metadata.name.clone().unwrap())),
            )
            .collect()
    };
    assert_eq!(names(a), names(s));
    assert!(
        names(a).iter().any(|(_, n)| n == "router-b"),
        "{:?}",
        names(a)
    );
    for (x, y) in a.agents.iter().zip(&s.agents) {
        assert_eq!(x.value, y.value);
    }
    // Paths are relative to the root, so an unchanged tenant is shared
    // with the earlier load as it is: no copy, whatever its size.
    assert!(
        a.agents
            .iter()
            .all(|x| x.path.starts_with("manifests/acme")),
        "{:?}",
        names(a)
    );
    assert!(Arc::ptr_eq(
        &again.tenants["globex"],
        &first.tenants["globex"]
    ));
    assert!(!Arc::ptr_eq(&again.tenants["acme"], &first.tenants["acme"]));
    // Nothing taken over: the unreadable file is read, and refused.
    let e = load(two.path()).unwrap_err().to_string();
    assert!(e.contains("assistant.yaml"), "{e}");
}

/// `clusters/*.yaml` are read, a tenant's placement is taken out of its
/// settings (a cluster's Tenant and Rollout never carry it), and a bad
/// cluster file or placement is refused naming the file and field.
#[test]
fn clusters_and_placement_are_read_and_refused_by_file() {
    let dir = tempfile::tempdir().unwrap();
    example(dir.path());
    std::fs::create_dir_all(dir.path().join("clusters")).unwrap();
    std::fs::write(
        dir.path().join("clusters/eu-west.yaml"),
        "apiVersion: autonomic.sh/v1alpha1\nkind: Cluster\nmetadata:\n  name: eu-west\n  labels: {env: prod}\n",
    )
    .unwrap();
    let acme = dir.path().join("manifests/acme/tenant.yaml");
    let text = std::fs::read_to_string(&acme).unwrap();
    let placed = text.replacen(
        "spec:\n",
        "spec:\n  placement:\n    clusters: [eu-west]\n    move: verify-first\n",
        1,
    );
    assert_ne!(text, placed);
    std::fs::write(&acme, &placed).unwrap();
    let fleet = load(dir.path()).unwrap();
    assert_eq!(fleet.clusters.as_ref().unwrap().len(), 1);
    let t = &fleet.tenants["acme"];
    assert_eq!(t.settings.placement, None);
    assert_eq!(t.placement.as_ref().unwrap().clusters, ["eu-west"]);
    assert_eq!(fleet.tenants_on("eu-west"), ["acme".to_owned()].into());
    assert!(fleet.tenants_on("us-east").is_empty());

    std::fs::write(
        dir.path().join("clusters/us.yaml"),
        "apiVersion: autonomic.sh/v1alpha1\nkind: Cluster\nmetadata:\n  name: us-east\n",
    )
    .unwrap();
    std::fs::write(
        &acme,
        placed.replace("clusters: [eu-west]", "clusters: [Eu]"),
    )
    .unwrap();
    let err = load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(
            "clusters/us.yaml: metadata.name \"us-east\" must match the file's name (\"us\")"
        ),
        "{err}"
    );
    assert!(
        err.contains("manifests/acme/tenant.yaml: spec.placement.clusters[0] \"Eu\""),
        "{err}"
    );
}
