//! The artifact's round trip, and each refusal of the check, table-driven:
//! a good artifact, one field changed, the field named.

use serde_json::{Value, json};

use super::*;
use crate::backup::testdata::{SMALL, noise, tar_of, walk};

/// A good artifact of a small tree cut into three layers.
fn good() -> (BackupConfig, Vec<Descriptor>) {
    let stream = tar_of(
        "vol",
        &[
            ("a.txt", b"alpha\n".to_vec()),
            ("b/c.bin", noise(1, 3000)),
            ("b/d/e", Vec::new()),
        ],
    );
    let walked = walk(&stream);
    let sizes = [1024u64, 2048, stream.len() as u64 - 3072];
    let layers = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| Descriptor {
            media_type: CHUNK_MEDIA_TYPE.into(),
            digest: format!("sha256:{}", hex::encode(Sha256::digest([i as u8]))),
            size,
        })
        .collect();
    let config = BackupConfig::of_walk(
        Volume {
            namespace: "team-a".into(),
            name: "work".into(),
        },
        "2026-01-02T03:04:05.678Z".into(),
        &walked,
        stream.len() as u64,
        3,
        SMALL,
    );
    (config, layers)
}

fn good_values() -> (Value, Value) {
    let (config, layers) = good();
    let built = build(&config, layers).unwrap();
    (
        serde_json::from_slice(&built.manifest).unwrap(),
        serde_json::from_slice(&built.config).unwrap(),
    )
}

/// The bytes of `manifest` and `config`, the manifest's config descriptor
/// pointing at the config as it now is.
fn bytes_of(mut manifest: Value, config: &Value) -> (Vec<u8>, Vec<u8>) {
    let config = serde_json::to_vec(config).unwrap();
    manifest["config"]["digest"] = json!(sha256_of(&config));
    manifest["config"]["size"] = json!(config.len());
    (serde_json::to_vec(&manifest).unwrap(), config)
}

#[test]
fn an_artifact_round_trips() {
    let (config, layers) = good();
    let built = build(&config, layers.clone()).unwrap();
    assert_eq!(built.digest, sha256_of(&built.manifest));
    let back = verify(&built.manifest, &built.config).unwrap();
    assert_eq!(back.config, config);
    assert_eq!(back.manifest.layers, layers);
    assert_eq!(back.manifest.config, built.config_descriptor);
    // The shape registries and other tools read.
    let m: Value = serde_json::from_slice(&built.manifest).unwrap();
    assert_eq!(m["schemaVersion"], 2);
    assert_eq!(m["mediaType"], MANIFEST_MEDIA_TYPE);
    assert_eq!(m["artifactType"], ARTIFACT_TYPE);
    assert_eq!(m["config"]["mediaType"], CONFIG_MEDIA_TYPE);
    assert_eq!(m["layers"][2]["mediaType"], CHUNK_MEDIA_TYPE);
    assert_eq!(
        m["annotations"][ANNOTATION_CREATED],
        "2026-01-02T03:04:05.678Z"
    );
    assert_eq!(
        m["annotations"][ANNOTATION_TREE_HASH],
        json!(config.tree_hash)
    );
    // A listing reads the counts from the manifest alone.
    assert_eq!(m["annotations"][ANNOTATION_FILES], "3");
    assert_eq!(
        annotated_counts(&back.manifest),
        Some((3, config.file_bytes))
    );
    let c: Value = serde_json::from_slice(&built.config).unwrap();
    for key in [
        "format",
        "volume",
        "created",
        "top",
        "treeHash",
        "fileBytes",
        "streamBytes",
        "chunks",
        "chunking",
        "files",
        "dirs",
    ] {
        assert!(c.get(key).is_some(), "config lacks {key}");
    }
    assert_eq!(
        c["files"][0],
        json!({"path": "vol/a.txt", "size": 6,
        "sha256": hex::encode(Sha256::digest(b"alpha\n"))})
    );
    assert_eq!(c["dirs"], json!(["vol", "vol/b", "vol/b/d"]));
}

#[test]
fn the_tree_hash_is_tarstreams_and_sha256sums() {
    let (config, _) = good();
    let stream = tar_of(
        "vol",
        &[
            ("a.txt", b"alpha\n".to_vec()),
            ("b/c.bin", noise(1, 3000)),
            ("b/d/e", Vec::new()),
        ],
    );
    let walked = walk(&stream);
    assert_eq!(config.tree_hash, walked.digest());
    let by_path = walked
        .files
        .iter()
        .map(|(p, f)| (p.clone(), f.sha256.clone()))
        .collect();
    assert_eq!(config.tree_hash, tarstream::digest_of(&by_path));
    // What `sha256sum` in the pod lists, sorted with LC_ALL=C, hashed.
    let mut listing = String::new();
    for (p, data) in [
        ("vol/a.txt", b"alpha\n".to_vec()),
        ("vol/b/c.bin", noise(1, 3000)),
        ("vol/b/d/e", Vec::new()),
    ] {
        listing.push_str(&format!("{}  {p}\n", hex::encode(Sha256::digest(&data))));
    }
    assert_eq!(
        config.tree_hash,
        hex::encode(Sha256::digest(listing.as_bytes()))
    );
    assert_eq!(config.file_bytes, 6 + 3000);
    assert_eq!(config.file_map(), walked.files);
}

type Edit = fn(&mut Value, &mut Value);

#[test]
fn every_inconsistency_is_refused_naming_the_field() {
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "schema version",
            |m, _| m["schemaVersion"] = json!(1),
            "schemaVersion",
        ),
        (
            "manifest media type",
            |m, _| m["mediaType"] = json!("application/vnd.docker.distribution.manifest.v2+json"),
            "field mediaType",
        ),
        (
            "artifact type",
            |m, _| m["artifactType"] = json!("application/vnd.example+json"),
            "field artifactType",
        ),
        (
            "artifact type missing",
            |m, _| {
                m.as_object_mut().unwrap().remove("artifactType");
            },
            "field artifactType",
        ),
        (
            "config media type",
            |m, _| m["config"]["mediaType"] = json!("application/vnd.oci.image.config.v1+json"),
            "field config.mediaType",
        ),
        (
            "layer media type",
            |m, _| m["layers"][1]["mediaType"] = json!("application/vnd.oci.image.layer.v1.tar"),
            "field layers[1].mediaType",
        ),
        (
            "layer digest in upper case",
            |m, _| {
                let d = m["layers"][0]["digest"].as_str().unwrap().to_uppercase();
                m["layers"][0]["digest"] = json!(d.replace("SHA256", "sha256"));
            },
            "field layers[0].digest",
        ),
        (
            "layer digest of another algorithm",
            |m, _| {
                let d = m["layers"][2]["digest"]
                    .as_str()
                    .unwrap()
                    .replace("sha256", "sha512");
                m["layers"][2]["digest"] = json!(d);
            },
            "field layers[2].digest",
        ),
        (
            "layer digest cut short",
            |m, _| {
                let d = m["layers"][0]["digest"].as_str().unwrap().to_owned();
                m["layers"][0]["digest"] = json!(d[..d.len() - 1]);
            },
            "field layers[0].digest",
        ),
        (
            "layer size grown",
            |m, _| {
                let s = m["layers"][1]["size"].as_u64().unwrap();
                m["layers"][1]["size"] = json!(s + 1);
            },
            "field streamBytes",
        ),
        (
            "layer size zero",
            |m, _| m["layers"][1]["size"] = json!(0),
            "field layers[1].size",
        ),
        (
            "layer size over the chunking's max",
            |m, c| {
                m["layers"][0]["size"] = json!(70_000);
                m["layers"][2]["size"] = json!(1);
                c["streamBytes"] = json!(70_000 + 2048 + 1);
            },
            "field layers[0].size",
        ),
        (
            "a layer dropped",
            |m, _| {
                m["layers"].as_array_mut().unwrap().pop();
            },
            "field chunks",
        ),
        (
            "created missing",
            |m, _| {
                m["annotations"]
                    .as_object_mut()
                    .unwrap()
                    .remove(ANNOTATION_CREATED);
            },
            "annotations.org.opencontainers.image.created",
        ),
        (
            "created not a time",
            |m, _| m["annotations"][ANNOTATION_CREATED] = json!("yesterday"),
            "annotations.org.opencontainers.image.created",
        ),
        (
            "created differs from the config's",
            |m, _| m["annotations"][ANNOTATION_CREATED] = json!("2026-01-02T03:04:06Z"),
            "annotations.org.opencontainers.image.created",
        ),
        (
            "tree hash annotation lies",
            |m, _| {
                m["annotations"][ANNOTATION_TREE_HASH] = json!(hex::encode(Sha256::digest(b"x")))
            },
            "annotations.sh.autonomic.exo.backup.tree-hash",
        ),
        (
            "files annotation lies",
            |m, _| m["annotations"][ANNOTATION_FILES] = json!("4"),
            "annotations.sh.autonomic.exo.backup.files",
        ),
        (
            "file bytes annotation not a number",
            |m, _| m["annotations"][ANNOTATION_FILE_BYTES] = json!("many"),
            "annotations.sh.autonomic.exo.backup.file-bytes",
        ),
        (
            "tree hash annotation malformed",
            |m, _| m["annotations"][ANNOTATION_TREE_HASH] = json!("abc"),
            "annotations.sh.autonomic.exo.backup.tree-hash",
        ),
        ("format", |_, c| c["format"] = json!(2), "field format"),
        (
            "config tree hash lies",
            |_, c| c["treeHash"] = json!(hex::encode(Sha256::digest(b"another tree"))),
            "field treeHash (config)",
        ),
        (
            "a file's sha256 changed",
            |_, c| c["files"][1]["sha256"] = json!(hex::encode(Sha256::digest(b"other"))),
            "field treeHash (config)",
        ),
        (
            "a file's sha256 malformed",
            |_, c| c["files"][1]["sha256"] = json!("zz"),
            "field files[1].sha256",
        ),
        (
            "files unsorted",
            |_, c| c["files"].as_array_mut().unwrap().swap(0, 1),
            "field files[1].path",
        ),
        (
            "a file twice",
            |_, c| {
                let f = c["files"][0].clone();
                c["files"].as_array_mut().unwrap().insert(1, f);
            },
            "field files[1].path",
        ),
        (
            "a file outside the top name",
            |_, c| c["files"][2]["path"] = json!("volume/zzz"),
            "field files[2].path",
        ),
        (
            "a file named as the top's sibling prefix",
            |_, c| c["files"][2]["path"] = json!("volx"),
            "field files[2].path",
        ),
        (
            "dirs unsorted",
            |_, c| c["dirs"].as_array_mut().unwrap().swap(1, 2),
            "field dirs[2]",
        ),
        (
            "file bytes",
            |_, c| c["fileBytes"] = json!(c["fileBytes"].as_u64().unwrap() + 1),
            "field fileBytes",
        ),
        (
            "stream bytes",
            |_, c| c["streamBytes"] = json!(c["streamBytes"].as_u64().unwrap() - 1),
            "field streamBytes",
        ),
        ("chunk count", |_, c| c["chunks"] = json!(4), "field chunks"),
        (
            "chunking",
            |_, c| c["chunking"]["max"] = json!(32 << 20),
            "field chunking",
        ),
        (
            "config created",
            |_, c| c["created"] = json!("soon"),
            "created (config)",
        ),
        (
            "config unknown field",
            |_, c| c["extra"] = json!(1),
            "unknown field `extra`",
        ),
        (
            "config field missing",
            |_, c| {
                c.as_object_mut().unwrap().remove("treeHash");
            },
            "missing field `treeHash`",
        ),
    ];
    for (name, edit, field) in cases {
        let (mut m, mut c) = good_values();
        edit(&mut m, &mut c);
        let (mb, cb) = bytes_of(m, &c);
        match verify(&mb, &cb) {
            Ok(_) => panic!("{name}: accepted"),
            Err(e) => {
                assert!(
                    e.to_string().contains(field),
                    "{name}: {e:?} does not name {field:?}"
                );
                assert_eq!(e.category(), Category::Integrity, "{name}");
            }
        }
    }
}

#[test]
fn a_config_that_is_not_the_one_described_is_refused() {
    let (m, c) = good_values();
    let (mb, cb) = bytes_of(m.clone(), &c);
    // Other bytes under the same descriptor.
    let mut other = cb.clone();
    other.push(b' ');
    assert!(matches!(
        verify(&mb, &other),
        Err(ManifestError::ConfigDigest { .. })
    ));
    // The descriptor's digest edited.
    let mut m2: Value = serde_json::from_slice(&mb).unwrap();
    m2["config"]["digest"] = json!(format!("sha256:{}", hex::encode(Sha256::digest(b"x"))));
    let e = verify(&serde_json::to_vec(&m2).unwrap(), &cb).unwrap_err();
    assert!(e.to_string().contains("field config.digest"), "{e}");
    // The descriptor's size edited.
    let mut m3: Value = serde_json::from_slice(&mb).unwrap();
    m3["config"]["size"] = json!(cb.len() + 1);
    let e = verify(&serde_json::to_vec(&m3).unwrap(), &cb).unwrap_err();
    assert!(e.to_string().contains("field config.size"), "{e}");
    // A malformed digest is named before any config is read.
    let mut m4: Value = serde_json::from_slice(&mb).unwrap();
    m4["config"]["digest"] = json!("sha256:1234");
    let e = parse_manifest(&serde_json::to_vec(&m4).unwrap()).unwrap_err();
    assert!(e.to_string().contains("field config.digest"), "{e}");
}

#[test]
fn what_is_not_json_is_named() {
    let e = parse_manifest(b"{\"schemaVersion\": 2,").unwrap_err();
    assert!(
        matches!(
            e,
            ManifestError::Json {
                what: "manifest",
                ..
            }
        ),
        "{e}"
    );
    let big = vec![b' '; MAX_MANIFEST_BYTES as usize + 1];
    assert!(matches!(
        parse_manifest(&big),
        Err(ManifestError::Size { .. })
    ));
}

#[test]
fn build_refuses_what_verify_would() {
    let (mut config, layers) = good();
    config.tree_hash = "0".repeat(64);
    assert!(matches!(
        build(&config, layers),
        Err(ManifestError::TreeHash { .. })
    ));
}

/// Backups written before the count annotations existed still verify;
/// a listing then reads the counts from their config.
#[test]
fn the_count_annotations_are_optional() {
    let (mut m, c) = good_values();
    let a = m["annotations"].as_object_mut().unwrap();
    a.remove(ANNOTATION_FILES);
    a.remove(ANNOTATION_FILE_BYTES);
    let (mb, cb) = bytes_of(m, &c);
    let back = verify(&mb, &cb).unwrap();
    assert_eq!(annotated_counts(&back.manifest), None);
}
