//! Packing a local file or folder. Two passes: a walk that decides
//! everything (refusals, limits, order) before a byte is written, then the
//! write, each file read once while the receiver's own walker hashes what
//! goes out.

use super::{LocalError, io_err};
use crate::agentfs::tarstream::{
    Checker, Event, Kind, Limits, Manifest, StreamError, WalkError, Walker,
};
use std::convert::Infallible;
use std::fs::{self, File, Metadata};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One entry to write, in archive order.
struct Item {
    local: PathBuf,
    name: String,
    meta: Metadata,
}

/// Packs `src` as a tar stream into `out`: a file as the single entry
/// `T`, a folder as `T/` and everything under it (sorted by name), where
/// `T` is `src`'s file name. `progress` gets each increment of file bytes
/// written. Returns the manifest of what was written.
pub fn pack(
    src: &Path,
    out: impl Write,
    limits: &Limits,
    progress: &mut dyn FnMut(u64),
) -> Result<Manifest, LocalError> {
    let items = plan(src, limits)?;
    let top = items.first().map(|i| i.name.clone()).unwrap_or_default();
    let mut builder = tar::Builder::new(Tee {
        out,
        walker: Walker::new(Some(&top), *limits),
        progress,
        failed: None,
    });
    let written = items.iter().try_for_each(|item| {
        append(&mut builder, item).map_err(|e| match builder.get_mut().failed.take() {
            Some(Failed::Refused(source)) => LocalError::Refused {
                path: item.local.clone(),
                source,
            },
            Some(Failed::Out | Failed::Stopped) => io_err(src, "writing the archive")(e),
            None if e.kind() == io::ErrorKind::UnexpectedEof => LocalError::Changed {
                path: item.local.clone(),
                what: "it shrank",
            },
            None => io_err(&item.local, "reading")(e),
        })
    });
    if let Err(e) = written {
        // Dropping the Builder writes the end-of-archive blocks; after a
        // half-written entry they would read as its data, so nothing more
        // may reach `out`.
        builder.get_mut().failed = Some(Failed::Stopped);
        return Err(e);
    }
    let tee = builder
        .into_inner()
        .map_err(io_err(src, "writing the archive"))?;
    tee.walker.finish().map_err(|source| LocalError::Refused {
        path: src.to_path_buf(),
        source,
    })
}

/// Walks `src` depth first, sorted by name, refusing what the copy may
/// not carry. Iterative, so a deep tree cannot overflow the stack.
fn plan(src: &Path, limits: &Limits) -> Result<Vec<Item>, LocalError> {
    let meta = fs::symlink_metadata(src).map_err(io_err(src, "reading"))?;
    let top = match src.file_name() {
        Some(n) => n.as_bytes().to_vec(),
        // `.` or `dir/..`: the folder's real name.
        None => fs::canonicalize(src)
            .map_err(io_err(src, "reading"))?
            .file_name()
            .ok_or_else(|| LocalError::NoName {
                path: src.to_path_buf(),
            })?
            .as_bytes()
            .to_vec(),
    };
    let mut checker = Checker::new(None, *limits);
    let mut items = Vec::new();
    let mut stack = vec![(src.to_path_buf(), top, meta)];
    while let Some((local, name, meta)) = stack.pop() {
        let ft = meta.file_type();
        let kind = if ft.is_symlink() {
            return Err(LocalError::Symlink { path: local });
        } else if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() {
            Kind::File { size: meta.len() }
        } else {
            let kind = if ft.is_fifo() {
                "fifo"
            } else if ft.is_socket() {
                "socket"
            } else if ft.is_char_device() {
                "character device"
            } else {
                "block device"
            };
            return Err(LocalError::Special { path: local, kind });
        };
        let admitted = checker
            .admit(&name, kind)
            .map_err(|source| LocalError::Refused {
                path: local.clone(),
                source,
            })?;
        if kind == Kind::Dir {
            let mut children = Vec::new();
            for entry in fs::read_dir(&local).map_err(io_err(&local, "listing"))? {
                let entry = entry.map_err(io_err(&local, "listing"))?;
                let path = entry.path();
                let meta = fs::symlink_metadata(&path).map_err(io_err(&path, "reading"))?;
                children.push((entry.file_name(), path, meta));
            }
            children.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            for (file_name, path, meta) in children.into_iter().rev() {
                let child = [name.as_slice(), b"/", file_name.as_bytes()].concat();
                stack.push((path, child, meta));
            }
        }
        items.push(Item {
            local,
            name: admitted.path,
            meta,
        });
    }
    Ok(items)
}

fn append<W: Write>(builder: &mut tar::Builder<W>, item: &Item) -> io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_mode(item.meta.mode() & 0o777);
    h.set_mtime(u64::try_from(item.meta.mtime()).unwrap_or(0));
    h.set_uid(0);
    h.set_gid(0);
    if item.meta.is_dir() {
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        return builder.append_data(&mut h, &item.name, io::empty());
    }
    let file = File::open(&item.local)?;
    // The walk vetted this inode; a path swapped since (for a symlink,
    // say) would open another one.
    let now = file.metadata()?;
    if !now.is_file() || now.dev() != item.meta.dev() || now.ino() != item.meta.ino() {
        return Err(io::Error::other("it was replaced since the walk"));
    }
    let size = item.meta.len();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(size);
    builder.append_data(&mut h, &item.name, Exact { file, left: size })
}

/// Reads exactly the size the header announced: a file that grew is cut
/// at it, one that shrank is an error (the archive would be malformed).
struct Exact {
    file: File,
    left: u64,
}

impl Read for Exact {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let max = usize::try_from(self.left).map_or(buf.len(), |l| l.min(buf.len()));
        let n = self.file.read(&mut buf[..max])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= n as u64;
        Ok(n)
    }
}

enum Failed {
    Refused(StreamError),
    Out,
    Stopped,
}

/// Passes everything written through the walker, then to `out`.
struct Tee<'p, W> {
    out: W,
    walker: Walker,
    progress: &'p mut dyn FnMut(u64),
    failed: Option<Failed>,
}

impl<W: Write> Write for Tee<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.failed.is_some() {
            return Err(io::Error::other("the archive was stopped"));
        }
        let progress = &mut *self.progress;
        let mut sink = |e: Event<'_>| {
            if let Event::Data(d) = e {
                progress(d.len() as u64);
            }
            Ok::<(), Infallible>(())
        };
        match self.walker.feed(buf, &mut sink) {
            Ok(()) => {}
            Err(WalkError::Stream(e)) => {
                self.failed = Some(Failed::Refused(e));
                return Err(io::Error::other("refused by the walker"));
            }
            Err(WalkError::Sink(never)) => match never {},
        }
        if let Err(e) = self.out.write_all(buf) {
            self.failed = Some(Failed::Out);
            return Err(e);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
