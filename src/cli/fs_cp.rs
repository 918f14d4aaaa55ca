//! `exo fs cp`: the local side of a copy. The tar stream is made (or
//! taken apart) on a blocking thread and crosses to the route through a
//! bounded channel, so memory stays at a few chunks whatever the size.
//! A download lands in a staging folder and takes its final name only
//! after its sha256 matched the pod's; Ctrl-C or any failure removes it.

use std::io::{Read, Write};
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::{mpsc, oneshot};

use crate::agentfs::local;
use crate::agentfs::path::Copy;
use crate::agentfs::tarstream::Limits;
use crate::cli::fs_route::Route;
use crate::wire::Command;
use crate::wire::fs::CHUNK_BYTES;

/// Pieces in flight between the tar thread and the route.
const PIPE_DEPTH: usize = 8;

/// `Write` into a channel, in pieces of at most `CHUNK_BYTES`.
struct ChanWriter {
    tx: mpsc::Sender<Vec<u8>>,
    buf: Vec<u8>,
}

impl ChanWriter {
    fn push(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let piece = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_BYTES));
        self.tx
            .blocking_send(piece)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the copy stopped"))
    }
}

impl Write for ChanWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(CHUNK_BYTES - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= CHUNK_BYTES {
            self.push()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.push()
    }
}

/// `Read` from a channel; its end (sender dropped) is end of file.
struct ChanReader {
    rx: mpsc::Receiver<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
}

impl Read for ChanReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos >= self.cur.len() {
            match self.rx.blocking_recv() {
                Some(p) => {
                    self.cur = p;
                    self.pos = 0;
                }
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.cur.len() - self.pos);
        out[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A spinner on stderr with bytes, rate and elapsed time (drawn only when
/// stderr is a terminal).
pub(crate) fn bar(what: &str) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {bytes} ({binary_bytes_per_sec}) {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(what.to_owned());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb
}

pub async fn cp(
    route: &Route,
    namespace: &str,
    source: &str,
    destination: &str,
    max_bytes: u64,
) -> Result<serde_json::Value, String> {
    let limits = Limits {
        max_bytes,
        ..Limits::default()
    };
    match Copy::parse(source, destination).map_err(|e| e.to_string())? {
        Copy::Upload { local, to } => upload(route, namespace, &local, to, limits).await,
        Copy::Download { from, local } => download(route, namespace, from, &local, limits).await,
    }
}

async fn upload(
    route: &Route,
    namespace: &str,
    src: &Path,
    to: crate::agentfs::path::FsPath,
    limits: Limits,
) -> Result<serde_json::Value, String> {
    let top = src
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .ok_or_else(|| format!("{}: no such file or folder", src.display()))?;
    let cmd = Command::AgentfsWrite {
        namespace: namespace.to_owned(),
        fs_name: to.fs.clone(),
        path: to.path.to_string(),
        top,
        max_bytes: limits.max_bytes,
    };
    let (tx, rx) = mpsc::channel(PIPE_DEPTH);
    let (dtx, drx) = oneshot::channel();
    let pb = bar("sending");
    let pbc = pb.clone();
    let src = src.to_owned();
    let packer = tokio::task::spawn_blocking(move || {
        let mut w = ChanWriter {
            tx,
            buf: Vec::with_capacity(CHUNK_BYTES),
        };
        let r = local::pack(&src, &mut w, &limits, &mut |n| pbc.inc(n))
            .map_err(|e| e.to_string())
            .and_then(|m| w.flush().map(|()| m).map_err(|e| e.to_string()));
        drop(w);
        let _ = dtx.send(r.map(|m| m.digest()));
    });
    let out = tokio::select! {
        r = route.upload(cmd, rx, drx) => r.map_err(String::from),
        _ = crate::shutdown::install() => Err("interrupted; nothing was written under the final name".to_owned()),
    };
    let _ = packer.await;
    pb.finish_and_clear();
    let t = out?;
    serde_json::to_value(t).map_err(|e| e.to_string())
}

async fn download(
    route: &Route,
    namespace: &str,
    from: crate::agentfs::path::FsPath,
    dest: &Path,
    limits: Limits,
) -> Result<serde_json::Value, String> {
    let cmd = Command::AgentfsRead {
        namespace: namespace.to_owned(),
        fs_name: from.fs.clone(),
        path: from.path.to_string(),
        max_bytes: limits.max_bytes,
    };
    let (tx, rx) = mpsc::channel(PIPE_DEPTH);
    let pb = bar("receiving");
    let pbc = pb.clone();
    let dest_owned = dest.to_owned();
    let unpacker = tokio::task::spawn_blocking(move || {
        let r = ChanReader {
            rx,
            cur: Vec::new(),
            pos: 0,
        };
        local::unpack(r, &dest_owned, &limits, &mut |n| pbc.inc(n))
    });
    let remote = tokio::select! {
        r = route.download(cmd, tx) => r.map_err(String::from),
        _ = crate::shutdown::install() => Err("interrupted".to_owned()),
    };
    // The sender is gone either way: the unpacker sees the end of the
    // stream (a truncated one fails and removes its staging folder).
    let staged = unpacker
        .await
        .map_err(|e| format!("unpacking: {e}"))?
        .map_err(|e| e.to_string());
    pb.finish_and_clear();
    let remote = remote?;
    let staged = staged?;
    let local_digest = staged.manifest().digest();
    if local_digest != remote.sha256 {
        return Err(format!(
            "sha256 mismatch: the pod's files hash to {} but what arrived hashes to {local_digest}; \
             nothing was written under {}",
            remote.sha256,
            dest.display()
        ));
    }
    let final_path = staged.commit().map_err(|e| e.to_string())?;
    let mut v = serde_json::to_value(&remote).map_err(|e| e.to_string())?;
    v["local"] = serde_json::Value::String(final_path.display().to_string());
    Ok(v)
}
