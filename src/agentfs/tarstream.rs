//! The one tar walker every copy passes through, on the operator (checking
//! what goes to or comes from `tar` in a pod) and on the laptop (unpacking).
//! Pure: bytes in, events out, no I/O.
//!
//! Guarantees, whatever the chunking of the input (one byte at a time
//! included):
//! - only regular files and folders pass; links, devices, fifos and
//!   unknown entry types are refused, naming the entry;
//! - every name is UTF-8 without control characters, relative, free of
//!   `..`, and lies under the archive's one top name `T`; `./`, `a//b`
//!   and trailing `/` are normalised away; a file never shares its name
//!   with another file or a folder;
//! - the byte and entry limits are enforced when a header announces an
//!   entry, before any of its data is passed on;
//! - each file's sha256 is computed as its data passes, and the
//!   `Manifest` holds them, so the other side's `sha256sum` can be
//!   compared through `Manifest::digest` / `digest_of`.
//!
//! The archive layout contract: a file source is the single entry `T`, a
//! folder source is `T/` plus `T/...` (GNU tar, busybox tar and the `tar`
//! crate's Builder all write that for `-C parent T`).

mod check;
mod error;
mod header;
#[cfg(test)]
pub(crate) mod tests;

pub use check::{Admitted, Checker, Kind};
pub use error::{Refusal, StreamError, WalkError};

use crate::fleet::configmap::content_hash;
use header::{BLOCK, BadHeader};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// Bound on a GNU long name ('L'): longer than any path a file system takes.
pub const MAX_LONG_NAME: u64 = 4 * 1024;
/// Bound on one PAX header ('x' or 'g').
pub const MAX_PAX: u64 = 64 * 1024;
/// Extension headers allowed before one entry; writers use one or two.
const MAX_EXTENSIONS: u8 = 8;

/// How much one copy may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Total bytes of file data.
    pub max_bytes: u64,
    /// Files and folders named by the archive.
    pub max_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 10 << 30,
            max_entries: 100_000,
        }
    }
}

/// What the walker reports, in archive order. A folder is always reported
/// before anything inside it: parents an archive only implies come as
/// `Dir` events (mode 0o755) right before the entry that implies them.
/// A file is `FileStart`, then `Data` for its bytes (any number of slices,
/// none for an empty file), then `FileEnd`. Modes carry permission bits
/// only (no setuid, setgid or sticky).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    Dir { path: &'a str, mode: u32 },
    FileStart { path: &'a str, size: u64, mode: u32 },
    Data(&'a [u8]),
    FileEnd { path: &'a str, sha256: &'a str },
}

/// One file of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSum {
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
}

/// Everything an archive held, by normalised path (`T/x/y`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub top: String,
    pub files: BTreeMap<String, FileSum>,
    /// Folders, named or implied (`T` itself for a folder source).
    pub dirs: BTreeSet<String>,
}

impl Manifest {
    /// Total bytes of file data.
    pub fn bytes(&self) -> u64 {
        self.files.values().map(|f| f.size).sum()
    }

    /// sha256 of the `sha256sum` listing of the files (see `digest_of`).
    pub fn digest(&self) -> String {
        content_hash(
            self.files
                .iter()
                .map(|(p, f)| (p.as_str(), f.sha256.clone())),
        )
    }
}

/// sha256 (hex) of the listing `"{sha256}  {path}\n"` sorted by path in
/// byte order, which is what `LC_ALL=C sort` gives `sha256sum` in a pod;
/// feed it `crate::fleet::configmap::parse_listing` of that output.
pub fn digest_of(files: &BTreeMap<String, String>) -> String {
    content_hash(files.iter().map(|(p, h)| (p.as_str(), h.clone())))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ext {
    LongName,
    Pax,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Collecting a header block.
    Header,
    /// Passing a file's data on.
    Data {
        left: u64,
    },
    /// Collecting an extended header's data.
    Ext {
        ext: Ext,
        left: u64,
    },
    /// Padding to the next block, or an ignored global PAX header.
    Skip {
        left: u64,
    },
    /// After an end-of-archive block: only zeros may follow.
    Trailer,
    Failed,
}

/// The incremental walker. See the module comment for its guarantees.
#[derive(Debug)]
pub struct Walker {
    checker: Checker,
    state: State,
    block: [u8; BLOCK],
    filled: usize,
    /// Bytes consumed so far, for messages.
    offset: u64,
    /// The entry being read, for messages and `FileEnd`.
    current: String,
    long_name: Option<Vec<u8>>,
    pax: Option<header::Pax>,
    extensions: u8,
    ext_data: Vec<u8>,
    hasher: Sha256,
    size: u64,
    files: BTreeMap<String, FileSum>,
}

impl Walker {
    /// `top`: when known, every entry must be `top` or lie under `top/`;
    /// when None, the first entry fixes it.
    pub fn new(top: Option<&str>, limits: Limits) -> Self {
        Self {
            checker: Checker::new(top, limits),
            state: State::Header,
            block: [0; BLOCK],
            filled: 0,
            offset: 0,
            current: String::new(),
            long_name: None,
            pax: None,
            extensions: 0,
            ext_data: Vec::new(),
            hasher: Sha256::new(),
            size: 0,
            files: BTreeMap::new(),
        }
    }

    /// Whether the end-of-archive block has been seen: every entry is in,
    /// and only the zeros that pad the last record may follow.
    pub fn at_end(&self) -> bool {
        self.state == State::Trailer
    }

    /// The top name, once the first entry has fixed it.
    pub fn top(&self) -> Option<&str> {
        self.checker.top()
    }

    /// Walks the next bytes of the stream. After an error every later
    /// call fails with `Stopped`.
    pub fn feed<E>(
        &mut self,
        data: &[u8],
        sink: &mut impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), WalkError<E>> {
        if self.state == State::Failed {
            return Err(StreamError::Stopped.into());
        }
        let out = self.run(data, sink);
        if out.is_err() {
            self.state = State::Failed;
        }
        out
    }

    /// Ends the walk: the stream must have stopped at an entry boundary
    /// (end-of-archive blocks or not) and named at least one entry.
    pub fn finish(self) -> Result<Manifest, StreamError> {
        match self.state {
            State::Failed => return Err(StreamError::Stopped),
            State::Header if self.filled > 0 => {
                return Err(StreamError::TruncatedHeader {
                    offset: self.offset,
                });
            }
            State::Header if self.long_name.is_some() || self.pax.is_some() => {
                return Err(StreamError::Truncated {
                    entry: self.current,
                    offset: self.offset,
                });
            }
            State::Header | State::Trailer => {}
            State::Data { .. } | State::Ext { .. } | State::Skip { .. } => {
                return Err(StreamError::Truncated {
                    entry: self.current,
                    offset: self.offset,
                });
            }
        }
        let top = self.checker.top().ok_or(StreamError::Empty)?.to_owned();
        Ok(Manifest {
            top,
            files: self.files,
            dirs: self.checker.into_dirs(),
        })
    }

    fn run<E>(
        &mut self,
        mut rest: &[u8],
        sink: &mut impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), WalkError<E>> {
        while !rest.is_empty() {
            match self.state {
                State::Header => {
                    let n = (BLOCK - self.filled).min(rest.len());
                    self.block[self.filled..self.filled + n].copy_from_slice(&rest[..n]);
                    self.filled += n;
                    rest = self.consume(rest, n);
                    if self.filled == BLOCK {
                        self.filled = 0;
                        self.header(sink)?;
                    }
                }
                State::Data { left } => {
                    let n = take(left, rest);
                    let chunk = &rest[..n];
                    self.hasher.update(chunk);
                    rest = self.consume(rest, n);
                    let left = left - n as u64;
                    self.state = State::Data { left };
                    sink(Event::Data(chunk)).map_err(WalkError::Sink)?;
                    if left == 0 {
                        self.end_file(sink)?;
                    }
                }
                State::Ext { ext, left } => {
                    let n = take(left, rest);
                    self.ext_data.extend_from_slice(&rest[..n]);
                    rest = self.consume(rest, n);
                    self.state = State::Ext {
                        ext,
                        left: left - n as u64,
                    };
                    if left == n as u64 {
                        self.end_extension(ext)?;
                    }
                }
                State::Skip { left } => {
                    let n = take(left, rest);
                    rest = self.consume(rest, n);
                    self.state = skip(left - n as u64);
                }
                State::Trailer => {
                    if let Some(at) = rest.iter().position(|&b| b != 0) {
                        return Err(StreamError::AfterEnd {
                            offset: self.offset + at as u64,
                        }
                        .into());
                    }
                    rest = self.consume(rest, rest.len());
                }
                State::Failed => return Err(StreamError::Stopped.into()),
            }
        }
        Ok(())
    }

    fn consume<'d>(&mut self, rest: &'d [u8], n: usize) -> &'d [u8] {
        self.offset += n as u64;
        &rest[n..]
    }

    fn refuse(&self, why: Refusal) -> StreamError {
        StreamError::Refused {
            entry: self.current.clone(),
            why,
        }
    }

    /// A full header block is in `self.block`.
    fn header<E>(
        &mut self,
        sink: &mut impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), WalkError<E>> {
        let at = self.offset - BLOCK as u64;
        let pending = match (&self.pax, &self.long_name) {
            (Some(header::Pax { path: Some(_), .. }), Some(_)) => {
                return Err(self.refuse(Refusal::LongNameAndPax).into());
            }
            (Some(header::Pax { path: Some(p), .. }), None) => Some(p.clone()),
            (_, long) => long.clone(),
        };
        if header::is_zero(&self.block) {
            if let Some(p) = &pending {
                self.current = String::from_utf8_lossy(p).into_owned();
            }
            if self.long_name.is_some() || self.pax.is_some() {
                return Err(self.refuse(Refusal::ExtensionWithoutEntry).into());
            }
            self.state = State::Trailer;
            return Ok(());
        }
        let decoded = header::decode(&self.block);
        let raw_name = match (&pending, &decoded) {
            (Some(p), _) => p.clone(),
            (None, Ok(h)) => h.name.clone(),
            (None, Err(_)) => header::name(&self.block),
        };
        self.current = String::from_utf8_lossy(&raw_name).into_owned();
        let h = decoded.map_err(|e| {
            self.refuse(match e {
                BadHeader::Checksum { .. } => Refusal::Checksum { offset: at },
                BadHeader::Field(field) => Refusal::BadNumber { field },
            })
        })?;
        let size = self.pax.as_ref().and_then(|p| p.size).unwrap_or(h.size);
        match h.typeflag {
            b'L' | b'x' | b'g' => {
                self.extensions += 1;
                let limit = if h.typeflag == b'L' {
                    MAX_LONG_NAME
                } else {
                    MAX_PAX
                };
                if self.extensions > MAX_EXTENSIONS
                    || (h.typeflag == b'L' && self.long_name.is_some())
                    || (h.typeflag == b'x' && self.pax.is_some())
                {
                    return Err(self.refuse(Refusal::TooManyExtensions).into());
                }
                // An extended header's own size is never a PAX override.
                if h.size > limit {
                    return Err(self
                        .refuse(Refusal::ExtensionTooLarge {
                            size: h.size,
                            limit,
                        })
                        .into());
                }
                let ext = match h.typeflag {
                    b'L' => Ext::LongName,
                    b'x' => Ext::Pax,
                    _ => {
                        self.state = skip(h.size + pad(h.size));
                        return Ok(());
                    }
                };
                self.ext_data.clear();
                self.state = State::Ext { ext, left: h.size };
                if h.size == 0 {
                    self.end_extension(ext)?;
                }
                Ok(())
            }
            b'0' | 0 | b'7' => self.entry(&raw_name, Kind::File { size }, h.mode, sink),
            b'5' if size > 0 => Err(self.refuse(Refusal::DirWithData { size }).into()),
            b'5' => self.entry(&raw_name, Kind::Dir, h.mode, sink),
            typeflag @ (b'1' | b'2') => Err(self.refuse(Refusal::Link { typeflag }).into()),
            typeflag @ (b'3' | b'4' | b'6') => {
                Err(self.refuse(Refusal::Special { typeflag }).into())
            }
            typeflag => Err(self.refuse(Refusal::Unsupported { typeflag }).into()),
        }
    }

    fn end_extension(&mut self, ext: Ext) -> Result<(), StreamError> {
        let data = std::mem::take(&mut self.ext_data);
        match ext {
            Ext::LongName => {
                let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
                self.long_name = Some(data[..end].to_vec());
            }
            Ext::Pax => self.pax = Some(header::pax(&data).map_err(|why| self.refuse(why))?),
        }
        let size = data.len() as u64;
        self.state = skip(pad(size));
        Ok(())
    }

    fn entry<E>(
        &mut self,
        raw_name: &[u8],
        kind: Kind,
        mode: u32,
        sink: &mut impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), WalkError<E>> {
        self.long_name = None;
        self.pax = None;
        self.extensions = 0;
        let admitted = self.checker.admit(raw_name, kind)?;
        for dir in &admitted.implied {
            sink(Event::Dir {
                path: dir,
                mode: 0o755,
            })
            .map_err(WalkError::Sink)?;
        }
        self.current = admitted.path;
        match kind {
            Kind::Dir => {
                self.state = State::Header;
                if admitted.fresh {
                    sink(Event::Dir {
                        path: &self.current,
                        mode,
                    })
                    .map_err(WalkError::Sink)?;
                }
            }
            Kind::File { size } => {
                self.size = size;
                self.hasher = Sha256::new();
                self.state = State::Data { left: size };
                sink(Event::FileStart {
                    path: &self.current,
                    size,
                    mode,
                })
                .map_err(WalkError::Sink)?;
                if size == 0 {
                    self.end_file(sink)?;
                }
            }
        }
        Ok(())
    }

    fn end_file<E>(
        &mut self,
        sink: &mut impl FnMut(Event<'_>) -> Result<(), E>,
    ) -> Result<(), WalkError<E>> {
        let sha256 = hex::encode(std::mem::take(&mut self.hasher).finalize());
        self.state = skip(pad(self.size));
        sink(Event::FileEnd {
            path: &self.current,
            sha256: &sha256,
        })
        .map_err(WalkError::Sink)?;
        self.files.insert(
            self.current.clone(),
            FileSum {
                size: self.size,
                sha256,
            },
        );
        Ok(())
    }
}

/// Bytes of `rest` that belong to the `left` still expected.
fn take(left: u64, rest: &[u8]) -> usize {
    usize::try_from(left).map_or(rest.len(), |l| l.min(rest.len()))
}

/// Zero padding after `size` bytes of data, up to the next block.
fn pad(size: u64) -> u64 {
    (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64
}

fn skip(left: u64) -> State {
    if left == 0 {
        State::Header
    } else {
        State::Skip { left }
    }
}
