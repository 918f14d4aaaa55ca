//! Fixtures the backup module's tests share: seeded noise, small chunk
//! sizes, tar streams written by the `tar` crate and walked by ours.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;

use super::chunk::ChunkSizes;
use crate::agentfs::tarstream::{Limits, Manifest, WalkError, Walker};

/// Small sizes, so a few MiB of test data make many chunks.
pub(crate) const SMALL: ChunkSizes = ChunkSizes {
    min: 4 * 1024,
    avg: 16 * 1024,
    max: 64 * 1024,
};

/// Deterministic pseudo-random bytes (splitmix64).
pub(crate) fn noise(seed: u64, len: usize) -> Vec<u8> {
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

/// A folder source `top/` with `files` (paths relative to it), as
/// `tar -C parent top` writes it: `top/`, then each entry, parents first.
pub(crate) fn tar_of(top: &str, files: &[(&str, Vec<u8>)]) -> Vec<u8> {
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
    b.append(&dir(&format!("{top}/")), &[][..]).unwrap();
    let mut dirs = std::collections::BTreeSet::new();
    for (path, data) in files {
        let mut parent = String::new();
        for part in path.split('/').collect::<Vec<_>>().split_last().unwrap().1 {
            parent = if parent.is_empty() {
                (*part).to_owned()
            } else {
                format!("{parent}/{part}")
            };
            if dirs.insert(parent.clone()) {
                b.append(&dir(&format!("{top}/{parent}/")), &[][..])
                    .unwrap();
            }
        }
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_path(format!("{top}/{path}")).unwrap();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_cksum();
        b.append(&h, &data[..]).unwrap();
    }
    b.into_inner().unwrap()
}

/// Our walker's manifest of a whole stream.
pub(crate) fn walk(bytes: &[u8]) -> Manifest {
    let mut w = Walker::new(None, Limits::default());
    w.feed(bytes, &mut |_| Ok::<(), Infallible>(()))
        .map_err(|e| match e {
            WalkError::Stream(e) => e,
        })
        .unwrap();
    w.finish().unwrap()
}
