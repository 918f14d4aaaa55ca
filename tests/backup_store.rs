#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `exo::backup` against the real registries of the test environment (the
//! open one, the htpasswd one, and Gitea's Bearer-token one): a volume of
//! 1000 small files and one 50 MiB file backed up, restored byte for byte,
//! backed up again after a one-file change with only the changed chunks
//! sent (counted by a proxy in front of the registry, not by the library),
//! tampered artifacts and a corrupted blob refused by name, a wrong
//! password refused without being shown. A missing registry fails.

mod support;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use exo::agentfs::tarstream::{self, Limits};
use exo::backup::manifest::{self, Descriptor};
use exo::backup::restore::Difference;
use exo::backup::store::Blob;
use exo::backup::{
    Category, ChunkSizes, Credentials, ManifestError, Options, Repository, RestoreError, Volume,
    backup, restore,
};
use hyper::body::Bytes;
use sha2::{Digest, Sha256};
use support::registry_proxy::{Counts, RegistryProxy};

// ------------------------------------------------------------------ the volume

/// Smaller chunks than the default, so that one changed small file is a
/// small part of a 51 MiB volume (the default's 4 MiB chunks are for 1 GiB
/// volumes; `default_sizes_...` runs those).
const TEST_SIZES: ChunkSizes = ChunkSizes {
    min: 64 * 1024,
    avg: 256 * 1024,
    max: 1024 * 1024,
};

/// Deterministic pseudo-random bytes (splitmix64).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A volume's files, by path under the top name `vol`.
type Files = BTreeMap<String, Vec<u8>>;

/// 1000 small files in 10 folders and one 50 MiB file.
fn volume() -> &'static Files {
    static V: OnceLock<Files> = OnceLock::new();
    V.get_or_init(|| {
        let mut files = Files::new();
        for i in 0..1000u64 {
            let len = 100 + (i * 7919) % 1900;
            files.insert(
                format!("small/{:02}/f{i:04}.txt", i % 10),
                noise(i, len as usize),
            );
        }
        files.insert("big.bin".into(), noise(424_242, 50 << 20));
        files
    })
}

/// A few files over 2 MiB, for the tests that need chunks but not 50 MiB.
fn small_volume() -> Files {
    let mut files = Files::new();
    for i in 0..20u64 {
        files.insert(format!("docs/n{i:02}.md"), noise(1000 + i, 3000));
    }
    files.insert("data.bin".into(), noise(77, 2 << 20));
    files
}

/// The tar stream `tar -C parent -c vol` would give: `vol/`, then each
/// folder before what it holds.
fn tar_of(files: &Files) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let dir = |path: &str| {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_path(path).unwrap();
        h.set_mode(0o755);
        h.set_size(0);
        h.set_cksum();
        h
    };
    b.append(&dir("vol/"), &[][..]).unwrap();
    let mut dirs = std::collections::BTreeSet::new();
    for (path, data) in files {
        let parts: Vec<&str> = path.split('/').collect();
        for n in 1..parts.len() {
            let d = parts[..n].join("/");
            if dirs.insert(d.clone()) {
                b.append(&dir(&format!("vol/{d}/")), &[][..]).unwrap();
            }
        }
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_path(format!("vol/{path}")).unwrap();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_cksum();
        b.append(&h, &data[..]).unwrap();
    }
    b.into_inner().unwrap()
}

/// The tree hash as a pod computes it, independently of the library: the
/// sha256 of `sha256sum`'s listing sorted in byte order.
fn tree_hash(files: &Files) -> String {
    let mut listing = String::new();
    for (path, data) in files {
        listing.push_str(&format!(
            "{}  vol/{path}\n",
            hex::encode(Sha256::digest(data))
        ));
    }
    hex::encode(Sha256::digest(listing.as_bytes()))
}

fn vol() -> Volume {
    Volume {
        namespace: "team-a".into(),
        name: "work".into(),
    }
}

/// A repository path no other run or test uses.
fn fresh_path(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("exo-test/backup-{test}-{}-{nanos}", std::process::id())
}

fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

// ------------------------------------------------------------------ helpers

/// The open registry, through a counting proxy.
async fn open_registry() -> RegistryProxy {
    RegistryProxy::start(&support::env().registry).await
}

fn repo_via(proxy: &RegistryProxy, path: &str) -> Repository {
    Repository::new(&proxy.addr, path, None, Options::default()).unwrap()
}

async fn restore_to_vec(
    repo: &Repository,
    reference: &str,
) -> (Result<exo::backup::Restored, RestoreError>, Vec<u8>) {
    let mut sink = Vec::new();
    let r = restore(repo, reference, &mut sink, Limits::default()).await;
    (r, sink)
}

/// The files a real tar reader unpacks from `stream`, read back from disk.
fn unpacked(stream: &[u8]) -> Files {
    let dir = support::scratch();
    tar::Archive::new(stream).unpack(dir.path()).unwrap();
    let mut out = Files::new();
    let root = dir.path().join("vol");
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&root).unwrap().to_str().unwrap().to_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Pushes `config` as a blob and a manifest naming it under `tag`.
async fn push_forged(
    repo: &Repository,
    tag: &str,
    mut manifest: serde_json::Value,
    config: &serde_json::Value,
) {
    let config = serde_json::to_vec(config).unwrap();
    let digest = sha256_digest(&config);
    repo.push_blob(&digest, Bytes::from(config.clone()), Blob::Config)
        .await
        .unwrap();
    manifest["config"]["digest"] = serde_json::json!(digest);
    manifest["config"]["size"] = serde_json::json!(config.len());
    repo.push_manifest(tag, Bytes::from(serde_json::to_vec(&manifest).unwrap()))
        .await
        .unwrap();
}

/// The manifest and config of `reference`, as JSON.
async fn artifact(repo: &Repository, reference: &str) -> (serde_json::Value, serde_json::Value) {
    let pulled = repo.pull_manifest(reference).await.unwrap();
    let m = manifest::parse_manifest(&pulled.bytes).unwrap();
    let config = repo
        .pull_blob(&m.config.digest, m.config.size, Blob::Config)
        .await
        .unwrap();
    (
        serde_json::from_slice(&pulled.bytes).unwrap(),
        serde_json::from_slice(&config).unwrap(),
    )
}

// ------------------------------------------------------------------ tests

/// The test: back up 1000 files and a 50 MiB file, restore them
/// (the same stream, the same files unpacked by a real tar reader, the
/// same tree hash as `sha256sum` gives), change one small file and back up
/// again: only the changed chunks go, as the proxy counts them. An
/// unchanged volume sends no chunk. Retention deletes a manifest and the
/// others still restore.
#[tokio::test]
async fn a_volume_restores_and_a_changed_file_uploads_only_its_chunks() {
    let proxy = open_registry().await;
    let repo = repo_via(&proxy, &fresh_path("incremental"));
    let files = volume();
    let stream1 = tar_of(files);

    // The first backup: every chunk is new.
    let t1 = backup(&stream1[..], &repo, &vol(), TEST_SIZES, Limits::default())
        .await
        .unwrap();
    let c = &proxy.counts;
    eprintln!(
        "first backup: {} chunks, {} uploaded, {} of {} bytes; wire: {} HEAD, {} POST, {} PUT ({} bytes), {} manifest PUT",
        t1.chunks,
        t1.chunks_uploaded,
        t1.bytes_uploaded,
        t1.bytes_total,
        Counts::get(&c.blob_heads),
        Counts::get(&c.upload_posts),
        Counts::get(&c.upload_puts),
        Counts::get(&c.upload_bytes),
        Counts::get(&c.manifest_puts),
    );
    assert_eq!(t1.bytes_total, stream1.len() as u64);
    assert_eq!(t1.files, 1001);
    assert_eq!(t1.tree_hash, tree_hash(files));
    assert_eq!(
        t1.chunks_uploaded, t1.chunks,
        "random data has no repeated chunk"
    );
    assert!(t1.chunks > 150, "{} chunks of about 256 KiB", t1.chunks);
    // The chunks and the config, each one POST and one PUT.
    assert_eq!(Counts::get(&c.upload_puts), t1.chunks_uploaded + 1);
    assert_eq!(Counts::get(&c.upload_posts), t1.chunks_uploaded + 1);
    assert_eq!(Counts::get(&c.upload_bytes), t1.bytes_uploaded);
    assert_eq!(Counts::get(&c.manifest_puts), 2, "<unix-ms> and latest");

    // Restore: the same stream, files and tree hash.
    let (r, restored) = restore_to_vec(&repo, "latest").await;
    let r = r.unwrap();
    assert_eq!(r.digest, t1.digest);
    assert_eq!(r.tree_hash, tree_hash(files));
    assert_eq!(r.files, 1001);
    assert_eq!(r.volume, vol());
    assert!(restored == stream1, "the restored stream differs");
    assert!(&unpacked(&restored) == files, "unpacked files differ");

    // One small file changed: only the chunks around it are new.
    let mut changed = files.clone();
    let victim = "small/05/f0505.txt".to_owned();
    let len = changed[&victim].len();
    changed.insert(victim.clone(), noise(9_999_999, len));
    let stream2 = tar_of(&changed);
    c.reset();
    let t2 = backup(&stream2[..], &repo, &vol(), TEST_SIZES, Limits::default())
        .await
        .unwrap();
    let ratio = t2.bytes_uploaded as f64 / t2.bytes_total as f64;
    eprintln!(
        "after one file changed: {} chunks, {} uploaded, {} of {} bytes ({:.2} %); wire: {} HEAD, {} POST, {} PUT ({} bytes)",
        t2.chunks,
        t2.chunks_uploaded,
        t2.bytes_uploaded,
        t2.bytes_total,
        ratio * 100.0,
        Counts::get(&c.blob_heads),
        Counts::get(&c.upload_posts),
        Counts::get(&c.upload_puts),
        Counts::get(&c.upload_bytes),
    );
    assert_ne!(t2.tree_hash, t1.tree_hash);
    assert_eq!(t2.tree_hash, tree_hash(&changed));
    assert!(
        (1..=2).contains(&t2.chunks_uploaded),
        "{} chunks uploaded",
        t2.chunks_uploaded
    );
    assert!(
        ratio <= 0.03,
        "{:.2} % of the volume uploaded",
        ratio * 100.0
    );
    assert_eq!(Counts::get(&c.upload_puts), t2.chunks_uploaded + 1);
    assert_eq!(Counts::get(&c.upload_bytes), t2.bytes_uploaded);
    assert_eq!(
        Counts::get(&c.blob_heads),
        t2.chunks + 1,
        "one HEAD per chunk and the config"
    );

    // Unchanged: no chunk at all, only the config (its time is new).
    c.reset();
    let t3 = backup(&stream2[..], &repo, &vol(), TEST_SIZES, Limits::default())
        .await
        .unwrap();
    assert_eq!(t3.chunks_uploaded, 0);
    assert_eq!(Counts::get(&c.upload_puts), 1, "the config only");
    assert_eq!(t3.tree_hash, t2.tree_hash);

    // Both backups restore, each to its own stream.
    let (r2, restored2) = restore_to_vec(&repo, &t2.digest).await;
    assert_eq!(r2.unwrap().tree_hash, tree_hash(&changed));
    assert!(restored2 == stream2);
    assert_eq!(
        repo.pull_manifest("latest").await.unwrap().digest,
        t3.digest
    );
    let tags = repo.list_tags().await.unwrap();
    for t in [&t1.tag, &t2.tag, &t3.tag] {
        assert!(tags.contains(t), "{t} not in {tags:?}");
    }
    assert!(tags.contains(&"latest".to_owned()));

    // Retention: the first manifest deleted (twice: gone is success); the
    // others, which share its chunks, still restore.
    repo.delete_manifest(&t1.digest).await.unwrap();
    repo.delete_manifest(&t1.digest).await.unwrap();
    let gone = repo.pull_manifest(&t1.digest).await.unwrap_err();
    assert_eq!(gone.category(), Category::NotFound, "{gone}");
    assert!(!repo.list_tags().await.unwrap().contains(&t1.tag));
    let (r2, _) = restore_to_vec(&repo, &t2.digest).await;
    assert_eq!(r2.unwrap().tree_hash, tree_hash(&changed));
}

/// The default sizes (about 4 MiB) on the same volume: an unchanged
/// volume's second backup sends no chunk, and a restore is exact.
#[tokio::test]
async fn default_sizes_send_nothing_again_for_an_unchanged_volume() {
    let proxy = open_registry().await;
    let repo = repo_via(&proxy, &fresh_path("defaults"));
    let stream = tar_of(volume());
    let t1 = backup(
        &stream[..],
        &repo,
        &vol(),
        ChunkSizes::default(),
        Limits::default(),
    )
    .await
    .unwrap();
    assert!(
        (4..=52).contains(&t1.chunks),
        "{} chunks of 1 to 16 MiB",
        t1.chunks
    );
    proxy.counts.reset();
    let t2 = backup(
        &stream[..],
        &repo,
        &vol(),
        ChunkSizes::default(),
        Limits::default(),
    )
    .await
    .unwrap();
    eprintln!(
        "default sizes: {} chunks; again unchanged: {} uploaded, {} bytes (the config)",
        t2.chunks, t2.chunks_uploaded, t2.bytes_uploaded
    );
    assert_eq!(t2.chunks_uploaded, 0);
    assert_eq!(Counts::get(&proxy.counts.upload_puts), 1);
    assert!(
        t2.bytes_uploaded < 200_000,
        "only the config: {}",
        t2.bytes_uploaded
    );
    let (r, restored) = restore_to_vec(&repo, &t2.digest).await;
    assert_eq!(r.unwrap().tree_hash, tree_hash(volume()));
    assert!(restored == stream);
}

/// Forged artifacts: each refused, naming the field or the file, and a
/// refusal of the manifest writes nothing.
#[tokio::test]
async fn tampered_artifacts_are_refused_by_name() {
    let proxy = open_registry().await;
    let repo = repo_via(&proxy, &fresh_path("tampered"));
    let files = small_volume();
    let stream = tar_of(&files);
    let sizes = ChunkSizes {
        min: 16 * 1024,
        avg: 64 * 1024,
        max: 256 * 1024,
    };
    let t = backup(&stream[..], &repo, &vol(), sizes, Limits::default())
        .await
        .unwrap();
    assert!(t.chunks >= 8, "{} chunks", t.chunks);
    let (m, config) = artifact(&repo, &t.digest).await;

    // The config lies about the tree hash.
    let mut lie = config.clone();
    lie["treeHash"] = serde_json::json!(hex::encode(Sha256::digest(b"another tree")));
    push_forged(&repo, "forged-tree", m.clone(), &lie).await;
    let (r, sink) = restore_to_vec(&repo, "forged-tree").await;
    match r {
        Err(RestoreError::Manifest {
            source: ManifestError::TreeHash { field, .. },
            ..
        }) => assert_eq!(field, "treeHash (config)"),
        other => panic!("expected the tree hash refused, got {other:?}"),
    }
    assert!(sink.is_empty(), "{} bytes written", sink.len());

    // Another artifact type.
    let mut other = m.clone();
    other["artifactType"] = serde_json::json!("application/vnd.example.other+json");
    push_forged(&repo, "forged-type", other, &config).await;
    let (r, sink) = restore_to_vec(&repo, "forged-type").await;
    let e = r.unwrap_err();
    assert!(e.to_string().contains("field artifactType"), "{e}");
    assert_eq!(e.category(), Category::Integrity);
    assert!(sink.is_empty());

    // A layer's size no longer adds up to the stream's length.
    let mut sized = m.clone();
    let s0 = sized["layers"][0]["size"].as_u64().unwrap();
    sized["layers"][0]["size"] = serde_json::json!(s0 - 1);
    push_forged(&repo, "forged-size", sized, &config).await;
    let (r, _) = restore_to_vec(&repo, "forged-size").await;
    let e = r.unwrap_err();
    assert!(e.to_string().contains("field streamBytes"), "{e}");

    // A layer's digest altered to a blob of the same size that is in the
    // registry, with one byte of the data file changed: the blob matches
    // its (new) digest, the walk accepts it, and the file's sha256 at its
    // end names it.
    let layers: Vec<Descriptor> = serde_json::from_value(m["layers"].clone()).unwrap();
    let k = layers.len() / 2;
    let mut forged_chunk = repo
        .pull_blob(&layers[k].digest, layers[k].size, Blob::Layer(k))
        .await
        .unwrap()
        .to_vec();
    forged_chunk[100] ^= 1;
    let forged_digest = sha256_digest(&forged_chunk);
    repo.push_blob(&forged_digest, Bytes::from(forged_chunk), Blob::Any)
        .await
        .unwrap();
    let mut swapped = m.clone();
    swapped["layers"][k]["digest"] = serde_json::json!(forged_digest);
    push_forged(&repo, "forged-layer", swapped, &config).await;
    let (r, _) = restore_to_vec(&repo, "forged-layer").await;
    let e = r.unwrap_err();
    assert_eq!(e.differing_file(), Some("vol/data.bin"), "{e}");
    assert!(
        matches!(
            &e,
            RestoreError::Differs {
                difference: Difference::Content { .. },
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("vol/data.bin"), "{e}");

    // A config that lies about one file consistently (its tree hash
    // recomputed): the check passes, the stream does not.
    let mut consistent = config.clone();
    let target = consistent["files"]
        .as_array()
        .unwrap()
        .iter()
        .position(|f| f["path"] == "vol/docs/n07.md")
        .unwrap();
    consistent["files"][target]["sha256"] =
        serde_json::json!(hex::encode(Sha256::digest(b"not what was backed up")));
    let by_path: BTreeMap<String, String> = consistent["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                f["sha256"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let forged_tree = tarstream::digest_of(&by_path);
    consistent["treeHash"] = serde_json::json!(forged_tree);
    let mut m2 = m.clone();
    m2["annotations"][manifest::ANNOTATION_TREE_HASH] = serde_json::json!(forged_tree);
    push_forged(&repo, "forged-file", m2, &consistent).await;
    let (r, _) = restore_to_vec(&repo, "forged-file").await;
    let e = r.unwrap_err();
    assert_eq!(e.differing_file(), Some("vol/docs/n07.md"), "{e}");
    assert_eq!(e.category(), Category::Integrity);

    // The untouched backup still restores.
    let (r, restored) = restore_to_vec(&repo, &t.digest).await;
    assert_eq!(r.unwrap().tree_hash, tree_hash(&files));
    assert!(restored == stream);
}

/// A blob corrupted on its way from the registry: refused naming its layer
/// and digest, and nothing of it or after it reaches the sink.
#[tokio::test]
async fn a_corrupted_blob_is_named_and_never_written() {
    let proxy = open_registry().await;
    let repo = repo_via(&proxy, &fresh_path("corrupt"));
    let stream = tar_of(&small_volume());
    let sizes = ChunkSizes {
        min: 16 * 1024,
        avg: 64 * 1024,
        max: 256 * 1024,
    };
    let t = backup(&stream[..], &repo, &vol(), sizes, Limits::default())
        .await
        .unwrap();
    let (m, _) = artifact(&repo, &t.digest).await;
    let layers: Vec<Descriptor> = serde_json::from_value(m["layers"].clone()).unwrap();
    let k = layers.len() / 2;
    *proxy.corrupt.lock().unwrap() = Some(layers[k].digest.clone());
    let (r, sink) = restore_to_vec(&repo, &t.digest).await;
    let e = r.unwrap_err();
    let shown = e.to_string();
    assert!(shown.contains(&format!("layer {k}")), "{shown}");
    assert!(shown.contains(&layers[k].digest), "{shown}");
    assert_eq!(e.category(), Category::Integrity);
    let before: u64 = layers[..k].iter().map(|l| l.size).sum();
    assert_eq!(sink.len() as u64, before, "only the layers before it");
}

/// A stream the walker refuses (a symbolic link) is refused by name and
/// leaves no manifest: the repository has no tag.
#[tokio::test]
async fn a_refused_stream_pushes_no_manifest() {
    let proxy = open_registry().await;
    let repo = repo_via(&proxy, &fresh_path("refused"));
    let mut b = tar::Builder::new(Vec::new());
    let mut files = small_volume();
    files.retain(|p, _| p == "data.bin");
    let good = tar_of(&files);
    // The good archive without its end blocks, then a link.
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_path("vol/escape").unwrap();
    h.set_link_name("/etc/passwd").unwrap();
    h.set_size(0);
    h.set_cksum();
    b.append(&h, &[][..]).unwrap();
    let link = b.into_inner().unwrap();
    let body_end = good.len() - 1024;
    let mut stream = good[..body_end].to_vec();
    stream.extend_from_slice(&link);
    let e = backup(
        &stream[..],
        &repo,
        &vol(),
        ChunkSizes::default(),
        Limits::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.category(), Category::Refused, "{e}");
    assert!(e.to_string().contains("vol/escape"), "{e}");
    assert!(repo.list_tags().await.unwrap().is_empty());
    assert_eq!(Counts::get(&proxy.counts.manifest_puts), 0);
}

/// The registry fails half-way through a backup: the backup fails, naming
/// the registry, no manifest names anything (no tag at all), and the next
/// backup sends only the chunks that did not arrive.
#[tokio::test]
async fn a_registry_failing_mid_backup_leaves_no_manifest_and_the_next_resumes() {
    let proxy = open_registry().await;
    let repo = repo_via(&proxy, &fresh_path("outage"));
    let files = small_volume();
    let stream = tar_of(&files);
    let sizes = ChunkSizes {
        min: 16 * 1024,
        avg: 64 * 1024,
        max: 256 * 1024,
    };
    proxy.uploads_allowed.store(5, Ordering::SeqCst);
    let e = backup(&stream[..], &repo, &vol(), sizes, Limits::default())
        .await
        .unwrap_err();
    assert_eq!(e.category(), Category::Registry, "{e}");
    assert!(e.to_string().contains("HTTP 503"), "{e}");
    assert!(e.to_string().contains("layer 5"), "{e}");
    assert_eq!(Counts::get(&proxy.counts.manifest_puts), 0);
    assert!(repo.list_tags().await.unwrap().is_empty());

    proxy.uploads_allowed.store(u64::MAX, Ordering::SeqCst);
    proxy.counts.reset();
    let t = backup(&stream[..], &repo, &vol(), sizes, Limits::default())
        .await
        .unwrap();
    assert_eq!(
        t.chunks_uploaded,
        t.chunks - 5,
        "the 5 that arrived are kept"
    );
    assert_eq!(Counts::get(&proxy.counts.upload_puts), t.chunks - 5 + 1);
    let (r, restored) = restore_to_vec(&repo, "latest").await;
    assert_eq!(r.unwrap().tree_hash, tree_hash(&files));
    assert!(restored == stream);
}

/// Blobs already in another repository of the registry are mounted, not
/// uploaded.
#[tokio::test]
async fn blobs_are_mounted_from_another_repository() {
    let proxy = open_registry().await;
    let first = fresh_path("mount-a");
    let stream = tar_of(&small_volume());
    let sizes = ChunkSizes {
        min: 16 * 1024,
        avg: 64 * 1024,
        max: 256 * 1024,
    };
    let t1 = backup(
        &stream[..],
        &repo_via(&proxy, &first),
        &vol(),
        sizes,
        Limits::default(),
    )
    .await
    .unwrap();
    proxy.counts.reset();
    let second = repo_via(&proxy, &fresh_path("mount-b"))
        .mount_from(&first)
        .unwrap();
    let t2 = backup(&stream[..], &second, &vol(), sizes, Limits::default())
        .await
        .unwrap();
    assert_eq!(t2.chunks_mounted, t1.chunks);
    assert_eq!(t2.chunks_uploaded, 0);
    assert_eq!(Counts::get(&proxy.counts.upload_puts), 1, "the config only");
    let (r, restored) = restore_to_vec(&second, &t2.digest).await;
    assert_eq!(r.unwrap().tree_hash, t1.tree_hash);
    assert!(restored == stream);
}

/// The htpasswd registry: a wrong password is refused by name and shown
/// nowhere; the right one backs up and restores.
#[tokio::test]
async fn basic_auth_refuses_a_wrong_password_without_showing_it() {
    let env = support::env();
    let path = fresh_path("auth");
    let stream = tar_of(&small_volume());
    let wrong = format!("wrong-pw-{}", std::process::id());
    let repo = Repository::new(
        &env.registry_auth,
        &path,
        Some(Credentials::new(env.registry_user.clone(), wrong.clone())),
        Options::default(),
    )
    .unwrap();
    let e = backup(
        &stream[..],
        &repo,
        &vol(),
        ChunkSizes::default(),
        Limits::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.category(), Category::Auth, "{e}");
    for shown in [e.to_string(), format!("{e:?}"), format!("{repo:?}")] {
        assert!(!shown.contains(&wrong), "{shown}");
        assert!(!shown.contains(&env.registry_password), "{shown}");
    }
    assert!(e.to_string().contains(&env.registry_auth), "{e}");

    let repo = Repository::new(
        &env.registry_auth,
        &path,
        Some(Credentials::new(
            env.registry_user.clone(),
            env.registry_password.clone(),
        )),
        Options::default(),
    )
    .unwrap();
    let t = backup(
        &stream[..],
        &repo,
        &vol(),
        ChunkSizes::default(),
        Limits::default(),
    )
    .await
    .unwrap();
    let (r, restored) = restore_to_vec(&repo, "latest").await;
    assert_eq!(r.unwrap().digest, t.digest);
    assert!(restored == stream);
    assert!(!format!("{repo:?}").contains(&env.registry_password));

    // No credentials at all: refused as well.
    let anonymous = Repository::new(&env.registry_auth, &path, None, Options::default()).unwrap();
    let e = anonymous.list_tags().await.unwrap_err();
    assert_eq!(e.category(), Category::Auth, "{e}");
}

/// Gitea's registry: docker's Bearer token flow, push and pull scopes.
#[tokio::test]
async fn a_bearer_token_registry_backs_up_and_restores() {
    let gitea = support::gitea::Gitea::get();
    let (user, token) = gitea.registry_login();
    let path = format!(
        "{}/backup-bearer-{}",
        user.to_lowercase(),
        std::process::id()
    );
    let repo = Repository::new(
        gitea.registry(),
        &path,
        Some(Credentials::new(user, token.clone())),
        Options::default(),
    )
    .unwrap();
    let stream = tar_of(&small_volume());
    let t = backup(
        &stream[..],
        &repo,
        &vol(),
        ChunkSizes::default(),
        Limits::default(),
    )
    .await
    .unwrap();
    let (r, restored) = restore_to_vec(&repo, &t.tag).await;
    assert_eq!(r.unwrap().digest, t.digest);
    assert!(restored == stream);
    assert!(!format!("{repo:?}").contains(&token));
}

/// A repository on a server that is not a registry is refused by name
/// before anything is sent: a web server that answers every path with
/// 200 would otherwise make every chunk look present, and a backup would
/// "succeed" holding nothing. One that answers 404 is refused the same way.
#[tokio::test]
async fn a_server_that_is_not_a_registry_is_refused_before_anything_is_sent() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    for status in [200u16, 404] {
        let writes = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&writes);
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let seen = Arc::clone(&seen);
            async move {
                if req.method() != axum::http::Method::GET
                    && req.method() != axum::http::Method::HEAD
                {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
                axum::response::Response::builder()
                    .status(status)
                    .header("content-type", "text/html")
                    .body(axum::body::Body::from("<html>a web site</html>"))
                    .unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let repo = Repository::new(&addr, "backups/acme/work", None, Options::default()).unwrap();
        let e = backup(
            &tar_of(&small_volume())[..],
            &repo,
            &vol(),
            TEST_SIZES,
            Limits::default(),
        )
        .await
        .unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains(&addr) && shown.contains("is not an OCI registry"),
            "HTTP {status}: {shown}"
        );
        assert_eq!(e.category(), exo::backup::Category::Invalid, "{shown}");
        assert_eq!(
            writes.load(Ordering::SeqCst),
            0,
            "HTTP {status}: nothing sent"
        );
        server.abort();
    }
}
