//! The volume's side of a copy. An upload's tar stream goes through the
//! walker (which refuses links, escaping names and over-limit sizes
//! before their bytes reach the pod) into `tar -x` in a staging folder at
//! the volume's root; the staged files' `sha256sum` listing must hash to
//! what the walker saw and to the sender's digest, and only then is the
//! staged top moved to its final name. A download is `tar -c` in the pod,
//! passed through the walker, and checked against the pod's own
//! `sha256sum` listing of the source.

use kube::Client;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

use super::FsError;
use super::exec::{self, Running, Target};
use super::helper::{HelperOpts, get_fs, keep_busy, target};
use super::path::VolumePath;
use super::script::Op;
use super::tarstream::{Limits, Walker, digest_of};
use crate::fleet::configmap::parse_listing;
use crate::wire::fs::{CHUNK_BYTES, IDLE_TIMEOUT_MS, Transferred};

/// GNU tar reads in records of 20 blocks and stops, without waiting for
/// the end of its input, once a whole record with the end-of-archive
/// blocks is in. The stream is padded to that, so `tar -x` ends even where
/// closing an exec's stdin does not reach the process.
const TAR_RECORD: u64 = 20 * 512;

/// Largest `sha256sum` listing read back from a pod.
const LISTING_MAX: u64 = 64 * 1024 * 1024;

type Stdin = Box<dyn AsyncWrite + Unpin + Send>;

/// How often a long copy marks its helper pod used.
fn busy_every(h: &HelperOpts) -> std::time::Duration {
    (h.idle / 3).min(std::time::Duration::from_secs(10))
}

/// The digest of a `sha256sum` listing (empty output: no files).
fn listing_digest(out: &str, pod: &str) -> Result<String, FsError> {
    if out.trim().is_empty() {
        return Ok(digest_of(&Default::default()));
    }
    let files = parse_listing(out).ok_or_else(|| FsError::InPod {
        pod: pod.to_owned(),
        message: format!(
            "unreadable sha256sum listing: {}",
            out.lines().next().unwrap_or_default()
        ),
    })?;
    Ok(digest_of(&files))
}

fn read_all(mut r: impl AsyncRead + Unpin + Send + 'static) -> JoinHandle<String> {
    tokio::spawn(async move {
        let mut out = Vec::new();
        let _ = (&mut r).take(LISTING_MAX).read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    })
}

fn walk_err(e: impl std::fmt::Display) -> FsError {
    FsError::Stream(e.to_string())
}

/// An archive's top entry must be one name, no path.
fn single_name(top: &str) -> Result<(), FsError> {
    if VolumePath::parse(top)?.as_str() != format!("/{top}") {
        return Err(FsError::Invalid(format!(
            "{top:?} is not a single file or folder name"
        )));
    }
    Ok(())
}

/// Where an upload's staged top goes once it is checked.
enum Landing {
    /// To this path (`cp`'s rule: into it when it is a folder).
    At(VolumePath),
    /// Its content to the volume's root, which must be empty then (a
    /// restore, `backup::volume`).
    Root,
}

/// A copy into a volume, in progress.
pub struct Upload {
    client: Client,
    target: Target,
    helper: HelperOpts,
    staging: String,
    top: String,
    landing: Landing,
    walker: Walker,
    run: Option<Running>,
    stdin: Option<Stdin>,
    listing: Option<JoinHandle<String>>,
    last_busy: std::time::Instant,
    written: u64,
}

impl Upload {
    /// Finds the pod and starts `tar -x` into a staging folder.
    pub async fn begin(
        client: &Client,
        namespace: &str,
        fs_name: &str,
        dest: &str,
        top: &str,
        limits: Limits,
        helper: &HelperOpts,
    ) -> Result<Self, FsError> {
        let dest = VolumePath::parse(dest)?;
        single_name(top)?;
        let fs = get_fs(client, namespace, fs_name).await?;
        let t = target(client, &fs, true, helper).await?;
        Self::start(client, t, Landing::At(dest), top, limits, helper).await
    }

    /// Starts `tar -x` of a whole volume's archive (its one top entry,
    /// `top`) in the pod `t`, whose content lands at the volume's root
    /// once checked, and only if the root is still empty then (the
    /// script's own check). The caller chose `t` (a pod no agent shares).
    pub async fn begin_root(
        client: &Client,
        t: Target,
        top: &str,
        limits: Limits,
        helper: &HelperOpts,
    ) -> Result<Self, FsError> {
        single_name(top)?;
        Self::start(client, t, Landing::Root, top, limits, helper).await
    }

    async fn start(
        client: &Client,
        t: Target,
        landing: Landing,
        top: &str,
        limits: Limits,
        helper: &HelperOpts,
    ) -> Result<Self, FsError> {
        let staging = crate::wire::random_id();
        let stall = (IDLE_TIMEOUT_MS / 1000).to_string();
        let mut run = exec::start(client, &t, Op::Stage, &[&staging, top, &stall], true).await?;
        let stdin = run
            .stdin()
            .map(|s| Box::new(s) as Stdin)
            .ok_or_else(|| FsError::Invalid("the exec has no stdin".into()))?;
        let listing = run.stdout().map(read_all);
        Ok(Upload {
            client: client.clone(),
            target: t,
            helper: helper.clone(),
            staging,
            top: top.to_owned(),
            landing,
            walker: Walker::new(Some(top), limits),
            run: Some(run),
            stdin: Some(stdin),
            listing,
            last_busy: std::time::Instant::now(),
            written: 0,
        })
    }

    pub fn pod(&self) -> &str {
        &self.target.pod
    }

    /// Passes the next bytes of the tar stream on, after the walker
    /// accepted them.
    pub async fn write(&mut self, data: &[u8]) -> Result<(), FsError> {
        self.walker
            .feed(data, &mut |_| Ok::<(), std::convert::Infallible>(()))
            .map_err(walk_err)?;
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| FsError::Invalid("the upload has ended".into()))?;
        stdin
            .write_all(data)
            .await
            .map_err(|e| FsError::io(format!("write to pod {}", self.target.pod), e))?;
        self.written += data.len() as u64;
        if self.last_busy.elapsed() > busy_every(&self.helper) {
            self.last_busy = std::time::Instant::now();
            keep_busy(&self.client, &self.target).await?;
        }
        Ok(())
    }

    /// Ends the stream, checks the staged files and moves them into place.
    /// `sent`: the sender's digest of its files, when it has one.
    pub async fn finish(mut self, sent: Option<&str>) -> Result<Transferred, FsError> {
        let out = self.finish_inner(sent).await;
        if out.is_err() {
            self.cleanup().await;
        }
        out
    }

    async fn finish_inner(&mut self, sent: Option<&str>) -> Result<Transferred, FsError> {
        let walker = std::mem::replace(&mut self.walker, Walker::new(None, Limits::default()));
        let manifest = walker.finish().map_err(walk_err)?;
        if let Some(mut s) = self.stdin.take() {
            // Two end-of-archive blocks (extra ones are ignored), then
            // zeros up to the next whole record.
            let end = self.written + 1024;
            let pad = (end.div_ceil(TAR_RECORD) * TAR_RECORD - self.written) as usize;
            s.write_all(&vec![0u8; pad])
                .await
                .map_err(|e| FsError::io(format!("write to pod {}", self.target.pod), e))?;
            let _ = s.shutdown().await;
        }
        if let Some(run) = self.run.take() {
            run.finish().await?;
        }
        let listing = match self.listing.take() {
            Some(h) => h.await.unwrap_or_default(),
            None => String::new(),
        };
        let pod = format!("{}/{}", self.target.namespace, self.target.pod);
        let landed = listing_digest(&listing, &pod)?;
        let seen = manifest.digest();
        if landed != seen {
            return Err(FsError::Mismatch {
                what: format!("the files unpacked in {pod} differ from the stream"),
                sent: seen,
                landed,
            });
        }
        if let Some(sent) = sent
            && sent != seen
        {
            return Err(FsError::Mismatch {
                what: "the stream differs from what the sender packed".into(),
                sent: sent.to_owned(),
                landed: seen,
            });
        }
        let dest = match &self.landing {
            Landing::At(dest) => dest.clone(),
            Landing::Root => {
                let args = [self.staging.as_str(), self.top.as_str()];
                exec::output(&self.client, &self.target, Op::CommitRoot, &args, 64).await?;
                return Ok(Transferred {
                    path: "/".to_owned(),
                    files: manifest.files.len() as u64,
                    bytes: manifest.bytes(),
                    sha256: seen,
                    pod: self.target.pod.clone(),
                });
            }
        };
        let (parent, base) = match dest.split() {
            Ok((p, b)) => (p, b.to_owned()),
            // Into the root: the top keeps its name.
            Err(_) => (VolumePath::parse("/")?, self.top.clone()),
        };
        let how = exec::output(
            &self.client,
            &self.target,
            Op::Commit,
            &[&self.staging, &self.top, parent.as_str(), &base],
            64,
        )
        .await?;
        let path = if String::from_utf8_lossy(&how).trim() == "into" {
            format!(
                "{}/{}/{}",
                parent.as_str().trim_end_matches('/'),
                base,
                self.top
            )
        } else {
            format!("{}/{}", parent.as_str().trim_end_matches('/'), base)
        };
        Ok(Transferred {
            path,
            files: manifest.files.len() as u64,
            bytes: manifest.bytes(),
            sha256: seen,
            pod: self.target.pod.clone(),
        })
    }

    /// Gives up: stops `tar -x` and removes the staging folder.
    pub async fn abort(mut self) {
        self.cleanup().await;
    }

    async fn cleanup(&mut self) {
        // Ends stdin where the exec passes that on, then stops `tar` by
        // its pid and removes the staging folder; the stage exec then ends.
        self.stdin.take();
        let r = exec::output(&self.client, &self.target, Op::Abort, &[&self.staging], 64).await;
        if let Err(e) = r {
            tracing::warn!(pod = %self.target.pod, error = %e, "could not remove a staging folder");
        }
        if let Some(run) = self.run.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), run.finish()).await;
        }
    }
}

impl Drop for Download {
    fn drop(&mut self) {
        if let Some(h) = self.sums.take() {
            h.abort();
        }
    }
}

/// A copy out of a volume, in progress.
pub struct Download {
    client: Client,
    target: Target,
    helper: HelperOpts,
    parent: VolumePath,
    base: String,
    walker: Option<Walker>,
    run: Option<Running>,
    /// Held until the walker has seen the archive's end (see `Op::Pack`).
    stdin: Option<Stdin>,
    /// The pod's `sha256sum` listing of the source, computed while the
    /// stream flows (it reads the same files, on the pod's other cores).
    sums: Option<JoinHandle<Result<Vec<u8>, FsError>>>,
    stdout: Box<dyn AsyncRead + Unpin + Send>,
    last_busy: std::time::Instant,
}

impl Download {
    pub async fn begin(
        client: &Client,
        namespace: &str,
        fs_name: &str,
        src: &str,
        limits: Limits,
        helper: &HelperOpts,
    ) -> Result<Self, FsError> {
        let src = VolumePath::parse(src)?;
        let (parent, base) = src.split()?;
        let base = base.to_owned();
        let fs = get_fs(client, namespace, fs_name).await?;
        let t = target(client, &fs, false, helper).await?;
        let run = exec::start(client, &t, Op::Pack, &[parent.as_str(), &base], true).await?;
        let sums = {
            let (client, t, parent, base) =
                (client.clone(), t.clone(), parent.clone(), base.clone());
            tokio::spawn(async move {
                let args = [parent.as_str(), base.as_str()];
                exec::output(&client, &t, Op::Sums, &args, LISTING_MAX as usize).await
            })
        };
        let walker = Walker::new(Some(&base), limits);
        Self::started(client, t, helper, run, walker, (parent, base), Some(sums))
    }

    /// A download of the pack `run` started in `t`.
    fn started(
        client: &Client,
        t: Target,
        helper: &HelperOpts,
        mut run: Running,
        walker: Walker,
        (parent, base): (VolumePath, String),
        sums: Option<JoinHandle<Result<Vec<u8>, FsError>>>,
    ) -> Result<Self, FsError> {
        let stdin = run.stdin().map(|s| Box::new(s) as Stdin);
        let stdout = run
            .stdout()
            .map(|s| Box::new(s) as Box<dyn AsyncRead + Unpin + Send>)
            .ok_or_else(|| FsError::Invalid("the exec has no stdout".into()))?;
        Ok(Download {
            client: client.clone(),
            target: t,
            helper: helper.clone(),
            walker: Some(walker),
            parent,
            base,
            run: Some(run),
            stdin,
            sums,
            stdout,
            last_busy: std::time::Instant::now(),
        })
    }

    /// The whole volume mounted in `t` (a pod and its container that
    /// mount the claim: an agent's, the helper, or an App's), as one
    /// archive whose top entry is the volume's folder (a backup). Not
    /// compared with a `sha256sum` listing: the volume's users keep
    /// writing while it is read, and each file's sha256 is taken from the
    /// stream itself.
    pub async fn begin_volume(
        client: &Client,
        t: Target,
        limits: Limits,
        helper: &HelperOpts,
    ) -> Result<Self, FsError> {
        let run = exec::start(client, &t, Op::PackVolume, &[], true).await?;
        // The top is the volume folder's own name, learnt from the stream.
        let walker = Walker::new(None, limits);
        let at = (VolumePath::parse("/")?, String::new());
        Self::started(client, t, helper, run, walker, at, None)
    }

    pub fn pod(&self) -> &str {
        &self.target.pod
    }

    /// The next piece of the tar stream (at most [`CHUNK_BYTES`]), checked
    /// by the walker; `None` at its end.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>, FsError> {
        // The exec hands stdout over in pieces of its buffer's size: fill
        // a whole chunk, so the wire carries few large frames. Each piece
        // is walked as it comes, so the archive's end is seen (and the
        // script let go, after which stdout ends) however small it is.
        let mut buf = vec![0u8; CHUNK_BYTES];
        let mut n = 0;
        while n < buf.len() {
            let got = self
                .stdout
                .read(&mut buf[n..])
                .await
                .map_err(|e| FsError::io(format!("read from pod {}", self.target.pod), e))?;
            if got == 0 {
                break;
            }
            if let Some(w) = self.walker.as_mut() {
                w.feed(&buf[n..n + got], &mut |_| {
                    Ok::<(), std::convert::Infallible>(())
                })
                .map_err(walk_err)?;
                if w.at_end() {
                    self.release().await;
                }
            }
            n += got;
        }
        if n == 0 {
            return Ok(None);
        }
        buf.truncate(n);
        if self.last_busy.elapsed() > busy_every(&self.helper) {
            self.last_busy = std::time::Instant::now();
            keep_busy(&self.client, &self.target).await?;
        }
        Ok(Some(buf))
    }

    /// Lets the pod's script end: the whole archive is in (or the stream
    /// stopped anyway).
    async fn release(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.write_all(b"\n").await;
            let _ = s.shutdown().await;
        }
    }

    /// After the last chunk: the stream's manifest must hash to the pod's
    /// own `sha256sum` listing of the source.
    pub async fn finish(mut self) -> Result<Transferred, FsError> {
        self.release().await;
        if let Some(run) = self.run.take() {
            run.finish().await?;
        }
        let manifest = self
            .walker
            .take()
            .ok_or_else(|| FsError::Invalid("the download has ended".into()))?
            .finish()
            .map_err(walk_err)?;
        let seen = manifest.digest();
        // A volume's backup has no listing to compare (`begin_volume`).
        if let Some(h) = self.sums.take() {
            let out = h
                .await
                .map_err(|e| FsError::Invalid(format!("the checksum task stopped: {e}")))??;
            let pod = format!("{}/{}", self.target.namespace, self.target.pod);
            let listed = listing_digest(&String::from_utf8_lossy(&out), &pod)?;
            if listed != seen {
                return Err(FsError::Mismatch {
                    what: format!(
                        "the stream from {pod} differs from its files (changed while copied?)"
                    ),
                    sent: listed,
                    landed: seen,
                });
            }
        }
        Ok(Transferred {
            path: format!(
                "{}/{}",
                self.parent.as_str().trim_end_matches('/'),
                self.base
            ),
            files: manifest.files.len() as u64,
            bytes: manifest.bytes(),
            sha256: seen,
            pod: self.target.pod.clone(),
        })
    }
}
