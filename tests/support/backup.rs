//! What the backup suites share: incompressible test data and the
//! AgentFS's backup status.

use exo::crd::{AgentFS, BackupStatus};

/// Deterministic bytes that neither compress nor repeat (splitmix64).
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
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

/// The volume's `status.backup`, or an empty one.
pub fn backup_of(fs: &AgentFS) -> BackupStatus {
    fs.status
        .as_ref()
        .and_then(|s| s.backup.clone())
        .unwrap_or_default()
}
