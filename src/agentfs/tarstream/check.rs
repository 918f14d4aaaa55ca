//! Which entries a copy admits, independent of how they are encoded: names
//! (normalised, never leaving the target), the one top name, file/folder
//! clashes, duplicates and the limits. The walker asks it about every
//! header; `local::pack` asks it about every file before writing a byte,
//! so both sides refuse exactly the same things.

use super::{Limits, Refusal, StreamError};
use std::collections::BTreeSet;

/// What an entry is, as far as admission cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File { size: u64 },
}

/// An admitted entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The normalised name (`T/x/y`: no `./`, no empty or `.` parts, no
    /// trailing `/`).
    pub path: String,
    /// Parent folders this entry implies that no earlier entry named,
    /// outermost first, so a consumer can create them before the entry.
    pub implied: Vec<String>,
    /// False for a folder already known (named again, or implied earlier).
    pub fresh: bool,
}

/// Admission state over one archive.
#[derive(Debug, Clone)]
pub struct Checker {
    top: Option<String>,
    limits: Limits,
    files: BTreeSet<String>,
    dirs: BTreeSet<String>,
    bytes: u64,
    entries: u64,
}

impl Checker {
    /// `top`: when known, every entry must be `top` or lie under `top/`;
    /// when None, the first entry fixes it.
    pub fn new(top: Option<&str>, limits: Limits) -> Self {
        Self {
            top: top.map(str::to_owned),
            limits,
            files: BTreeSet::new(),
            dirs: BTreeSet::new(),
            bytes: 0,
            entries: 0,
        }
    }

    /// The top name, once known.
    pub fn top(&self) -> Option<&str> {
        self.top.as_deref()
    }

    /// The folders seen, named or implied.
    pub fn into_dirs(self) -> BTreeSet<String> {
        self.dirs
    }

    /// Admits the entry named `raw` (bytes as found in the archive) or
    /// says why not. A refusal is final: the caller stops the copy.
    pub fn admit(&mut self, raw: &[u8], kind: Kind) -> Result<Admitted, StreamError> {
        let refuse = |why: Refusal| StreamError::Refused {
            entry: String::from_utf8_lossy(raw).into_owned(),
            why,
        };
        let path = normalise(raw, kind).map_err(refuse)?;
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(refuse(Refusal::TooManyEntries {
                limit: self.limits.max_entries,
            }));
        }
        let first = path.split('/').next().unwrap_or_default();
        match &self.top {
            Some(top) if top != first => {
                return Err(refuse(Refusal::OutsideTop { top: top.clone() }));
            }
            Some(_) => {}
            None => self.top = Some(first.to_owned()),
        }
        // Every ancestor must be a folder: a file of that name earlier
        // would make this entry write through it.
        let mut implied = Vec::new();
        for (i, _) in path.match_indices('/') {
            let parent = &path[..i];
            if self.files.contains(parent) {
                return Err(refuse(Refusal::ParentIsFile {
                    parent: parent.to_owned(),
                }));
            }
            if !self.dirs.contains(parent) {
                implied.push(parent.to_owned());
            }
        }
        let fresh = match kind {
            Kind::Dir => {
                if self.files.contains(&path) {
                    return Err(refuse(Refusal::FileAndFolder));
                }
                !self.dirs.contains(&path)
            }
            Kind::File { size } => {
                if self.files.contains(&path) {
                    return Err(refuse(Refusal::Duplicate));
                }
                if self.dirs.contains(&path) {
                    return Err(refuse(Refusal::FileAndFolder));
                }
                let total = self.bytes.saturating_add(size);
                if total > self.limits.max_bytes {
                    return Err(refuse(Refusal::OverBytes {
                        total,
                        limit: self.limits.max_bytes,
                    }));
                }
                self.bytes = total;
                true
            }
        };
        self.dirs.extend(implied.iter().cloned());
        match kind {
            Kind::Dir => self.dirs.insert(path.clone()),
            Kind::File { .. } => self.files.insert(path.clone()),
        };
        Ok(Admitted {
            path,
            implied,
            fresh,
        })
    }
}

/// The normalised name, or why it is refused. `./`, empty and `.` parts
/// are dropped; `..` and absolute names are refused outright rather than
/// resolved, since resolving them is how the kubectl cp escapes worked.
fn normalise(raw: &[u8], kind: Kind) -> Result<String, Refusal> {
    let name = std::str::from_utf8(raw).map_err(|_| Refusal::NotUtf8)?;
    if name.chars().any(char::is_control) {
        return Err(Refusal::ControlCharacter);
    }
    if name.starts_with('/') {
        return Err(Refusal::Absolute);
    }
    if matches!(kind, Kind::File { .. }) && name.ends_with('/') {
        // Old tars mean "folder" by this; GNU tar would extract it as
        // one, so refusing keeps the two readings from differing.
        return Err(Refusal::FileEndsInSlash);
    }
    let mut parts = Vec::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(Refusal::ParentReference),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(Refusal::EmptyName);
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_and_refuses_names() {
        let file = Kind::File { size: 1 };
        let ok: &[(&str, &str)] = &[
            ("T", "T"),
            ("./T", "T"),
            ("T//a/./b", "T/a/b"),
            ("./T/a/", "T/a"),
        ];
        for (raw, want) in ok {
            assert_eq!(normalise(raw.as_bytes(), Kind::Dir).as_deref(), Ok(*want));
        }
        let bad: &[(&[u8], Kind, Refusal)] = &[
            (b"/etc/x", file, Refusal::Absolute),
            (b"../x", file, Refusal::ParentReference),
            (b"T/a/../../x", file, Refusal::ParentReference),
            (b"T/..", Kind::Dir, Refusal::ParentReference),
            (b"./", Kind::Dir, Refusal::EmptyName),
            (b"", file, Refusal::EmptyName),
            (b"T/a\nb", file, Refusal::ControlCharacter),
            (b"T/a\x7f", file, Refusal::ControlCharacter),
            (b"T/a\0b", file, Refusal::ControlCharacter),
            (b"T/\xff", file, Refusal::NotUtf8),
            (b"T/a/", file, Refusal::FileEndsInSlash),
        ];
        for (raw, kind, want) in bad {
            assert_eq!(normalise(raw, *kind).as_ref(), Err(want), "{raw:?}");
        }
    }

    #[test]
    fn admits_one_tree_under_one_top() {
        let mut c = Checker::new(None, Limits::default());
        let a = c.admit(b"T/a/f", Kind::File { size: 3 }).unwrap();
        assert_eq!(a.implied, ["T", "T/a"]);
        assert!(!c.admit(b"T/a/", Kind::Dir).unwrap().fresh);
        assert_eq!(c.top(), Some("T"));
        let refusals: &[(&[u8], Kind, Refusal)] = &[
            (b"U/x", Kind::Dir, Refusal::OutsideTop { top: "T".into() }),
            (b"T/a/f", Kind::File { size: 0 }, Refusal::Duplicate),
            (b"T/a/f", Kind::Dir, Refusal::FileAndFolder),
            (b"T/a", Kind::File { size: 0 }, Refusal::FileAndFolder),
            (
                b"T/a/f/g",
                Kind::File { size: 0 },
                Refusal::ParentIsFile {
                    parent: "T/a/f".into(),
                },
            ),
        ];
        for (raw, kind, want) in refusals {
            match c.clone().admit(raw, *kind) {
                Err(StreamError::Refused { why, .. }) => assert_eq!(&why, want, "{raw:?}"),
                other => panic!("{raw:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn limits_are_checked_when_announced() {
        let limits = Limits {
            max_bytes: 10,
            max_entries: 3,
        };
        let mut c = Checker::new(Some("T"), limits);
        c.admit(b"T/a", Kind::File { size: 6 }).unwrap();
        let over = c.clone().admit(b"T/b", Kind::File { size: 5 }).unwrap_err();
        assert!(matches!(
            over,
            StreamError::Refused {
                why: Refusal::OverBytes {
                    total: 11,
                    limit: 10
                },
                ..
            }
        ));
        c.admit(b"T/b", Kind::File { size: 4 }).unwrap();
        c.admit(b"T/c", Kind::Dir).unwrap();
        let many = c.admit(b"T/d", Kind::Dir).unwrap_err();
        assert!(matches!(
            many,
            StreamError::Refused {
                why: Refusal::TooManyEntries { limit: 3 },
                ..
            }
        ));
    }
}
