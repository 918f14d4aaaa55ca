//! The laptop's side of `exo fs cp`: `pack` a local file or folder into a
//! tar stream, `unpack` a stream like `cp` would. Blocking std::fs; async
//! callers use `spawn_blocking`.
//!
//! Guarantees:
//! - `pack` refuses before writing a single byte: symlinks anywhere (the
//!   source itself included), special files, names the walker would
//!   refuse, totals over the limits. What it writes passes through the
//!   same `Walker` the receiver uses, which yields the manifest.
//! - `unpack` reads only through the `Walker`, writes only inside a fresh
//!   staging folder `.exo-part-<random>` next to the final name (every
//!   folder and file created new, so no path resolves through anything we
//!   did not just create), and the final name appears only on
//!   `Staged::commit`. Any error, or dropping an uncommitted `Staged`,
//!   removes the staging folder: a failed or interrupted copy leaves
//!   nothing under the final name.

mod pack;
#[cfg(test)]
mod tests;

pub use pack::pack;

use super::tarstream::{Event, Limits, Manifest, StreamError, WalkError, Walker};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a local pack or unpack failed; each names the local path.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("{}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{}: {source}", path.display())]
    Refused {
        path: PathBuf,
        #[source]
        source: StreamError,
    },
    #[error("{}: is a symbolic link; links are not copied", path.display())]
    Symlink { path: PathBuf },
    #[error("{}: is a {kind}; only files and folders are copied", path.display())]
    Special { path: PathBuf, kind: &'static str },
    #[error("{}: has no file name to copy it under", path.display())]
    NoName { path: PathBuf },
    #[error("{}: changed while being copied ({what})", path.display())]
    Changed { path: PathBuf, what: &'static str },
    #[error("{}: its folder does not exist", path.display())]
    NoParent { path: PathBuf },
    #[error("{}: already exists as a folder; remove it or copy to another name", path.display())]
    TargetIsDir { path: PathBuf },
    #[error("{}: already exists as a file; a folder does not replace it", path.display())]
    TargetIsFile { path: PathBuf },
    #[error("{}: no random name for the staging folder: {source}", path.display())]
    Random {
        path: PathBuf,
        #[source]
        source: getrandom::Error,
    },
}

fn io_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(io::Error) -> LocalError + 'a {
    move |source| LocalError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// A copy unpacked into its staging folder, verified by the walker, not
/// yet under its final name.
#[derive(Debug)]
pub struct Staged {
    staging: Staging,
    manifest: Manifest,
    target: PathBuf,
}

impl Staged {
    /// What was unpacked, with every file's sha256.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The name `commit` will give the copy.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Renames the copy into place (an existing file is replaced; an
    /// existing folder never is) and removes the staging folder.
    pub fn commit(self) -> Result<PathBuf, LocalError> {
        let Staged {
            staging,
            manifest,
            target,
        } = self;
        check_target(&target, manifest.dirs.contains(&manifest.top))?;
        fs::rename(staging.path.join(&manifest.top), &target)
            .map_err(io_err(&target, "moving the copy into place"))?;
        drop(staging);
        Ok(target)
    }
}

/// The staging folder; removed with everything in it when dropped.
#[derive(Debug)]
struct Staging {
    path: PathBuf,
}

impl Staging {
    fn create(parent: &Path) -> Result<Self, LocalError> {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).map_err(|source| LocalError::Random {
            path: parent.to_path_buf(),
            source,
        })?;
        let path = parent.join(format!(".exo-part-{}", hex::encode(b)));
        // create_dir, not create_dir_all: it must be new, and ours.
        DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(io_err(&path, "creating the staging folder"))?;
        Ok(Self { path })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // Best effort: a failure here must not hide the copy's own error.
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Refuses a final name that exists as a folder, or as a file when the
/// copy is a folder. A symlink there is replaced, never followed.
fn check_target(target: &Path, top_is_dir: bool) -> Result<(), LocalError> {
    match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => Err(LocalError::TargetIsDir {
            path: target.to_path_buf(),
        }),
        Ok(_) if top_is_dir => Err(LocalError::TargetIsFile {
            path: target.to_path_buf(),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(target, "checking the target")(e)),
    }
}

/// Unpacks a stream like `cp`: the copy's final name is `dest/T` when
/// `dest` is an existing folder, else `dest` (whose folder must exist).
/// `progress` gets each increment of file bytes written.
pub fn unpack(
    mut input: impl Read,
    dest: &Path,
    limits: &Limits,
    progress: &mut dyn FnMut(u64),
) -> Result<Staged, LocalError> {
    let into = fs::metadata(dest).is_ok_and(|m| m.is_dir());
    let parent = match dest.parent() {
        _ if into => dest.to_path_buf(),
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !fs::metadata(&parent).is_ok_and(|m| m.is_dir()) {
        return Err(LocalError::NoParent {
            path: dest.to_path_buf(),
        });
    }
    let staging = Staging::create(&parent)?;
    let mut writer = Writer {
        root: &staging.path,
        dest,
        into,
        target: None,
        file: None,
        progress,
    };
    let mut walker = Walker::new(None, *limits);
    let refused = |source| LocalError::Refused {
        path: dest.to_path_buf(),
        source,
    };
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(dest, "reading the archive")(e)),
        };
        walker
            .feed(&buf[..n], &mut |e| writer.event(e))
            .map_err(|e| match e {
                WalkError::Stream(s) => refused(s),
                WalkError::Sink(l) => l,
            })?;
    }
    let manifest = walker.finish().map_err(refused)?;
    let target = writer.target.take().unwrap_or_else(|| dest.to_path_buf());
    drop(writer);
    Ok(Staged {
        staging,
        manifest,
        target,
    })
}

/// Mirrors walker events into the staging folder.
struct Writer<'a> {
    root: &'a Path,
    dest: &'a Path,
    into: bool,
    target: Option<PathBuf>,
    file: Option<(File, PathBuf)>,
    progress: &'a mut dyn FnMut(u64),
}

impl Writer<'_> {
    fn event(&mut self, event: Event<'_>) -> Result<(), LocalError> {
        match event {
            Event::Dir { path, mode } => {
                self.first(path, true)?;
                let p = self.root.join(path);
                // The owner keeps write access so the rest of the copy
                // (and cleanup) can get in.
                DirBuilder::new()
                    .mode(mode | 0o700)
                    .create(&p)
                    .map_err(io_err(&p, "creating a folder"))?;
            }
            Event::FileStart { path, mode, .. } => {
                self.first(path, false)?;
                let p = self.root.join(path);
                let f = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&p)
                    .map_err(io_err(&p, "creating a file"))?;
                self.file = Some((f, p));
            }
            Event::Data(d) => {
                if let Some((f, p)) = &mut self.file {
                    f.write_all(d).map_err(io_err(p, "writing"))?;
                }
                (self.progress)(d.len() as u64);
            }
            Event::FileEnd { .. } => self.file = None,
        }
        Ok(())
    }

    /// The first event names the top: the final name is known now, so a
    /// target that cannot be replaced is refused before any data lands.
    fn first(&mut self, path: &str, is_dir: bool) -> Result<(), LocalError> {
        if self.target.is_none() {
            let target = if self.into {
                self.dest.join(path)
            } else {
                self.dest.to_path_buf()
            };
            check_target(&target, is_dir)?;
            self.target = Some(target);
        }
        Ok(())
    }
}
