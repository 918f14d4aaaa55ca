//! Paths on both sides of `exo fs` (pure): `<fs>:<path>` arguments, the
//! normalised path inside a volume, and which side of a `cp` is which.
//!
//! A volume path is always taken from the volume's root: `build:/a/b`,
//! `build:a/b` and `build:/a//b/` are the same place. `..` is refused
//! outright rather than resolved, so no spelling can leave the volume.

use std::path::PathBuf;

use crate::names::is_dns1123_label;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("{arg:?}: expected <fs>:<path>, e.g. build-cache:/data")]
    NotVolume { arg: String },
    #[error(
        "{arg:?}: {name:?} is not a valid AgentFS name (lowercase letters, digits and '-', at most 63)"
    )]
    BadName { arg: String, name: String },
    #[error("{path:?}: '..' is not allowed in a volume path (it would leave the volume)")]
    Escapes { path: String },
    #[error("{path:?}: control characters are not allowed in a volume path")]
    Control { path: String },
    #[error("{path:?}: name the file or folder inside the volume, not its root")]
    Root { path: String },
    #[error("copy between a local path and a volume path (<fs>:<path>); got {from:?} -> {to:?}")]
    BothSides { from: String, to: String },
}

/// A normalised path inside a volume: `/` or `/a/b` (no `.`, `..`, `//`,
/// trailing `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumePath(String);

impl VolumePath {
    pub fn parse(raw: &str) -> Result<Self, PathError> {
        if raw.chars().any(char::is_control) {
            return Err(PathError::Control { path: raw.into() });
        }
        let mut parts = Vec::new();
        for c in raw.split('/') {
            match c {
                "" | "." => {}
                ".." => return Err(PathError::Escapes { path: raw.into() }),
                c => parts.push(c),
            }
        }
        Ok(VolumePath(format!("/{}", parts.join("/"))))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0 == "/"
    }

    /// The parent folder and the last name; `Root` for `/`.
    pub fn split(&self) -> Result<(VolumePath, &str), PathError> {
        let i = self.0.rfind('/').unwrap_or(0);
        let base = &self.0[i + 1..];
        if base.is_empty() {
            return Err(PathError::Root {
                path: self.0.clone(),
            });
        }
        let parent = if i == 0 { "/" } else { &self.0[..i] };
        Ok((VolumePath(parent.to_owned()), base))
    }
}

impl std::fmt::Display for VolumePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `<fs>:<path>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsPath {
    pub fs: String,
    pub path: VolumePath,
}

impl FsPath {
    /// Whether `arg` is meant as a volume path: a valid name before the
    /// first `:` and no `/` before it (so `./a:b` stays local).
    pub fn looks_like(arg: &str) -> bool {
        arg.split_once(':')
            .is_some_and(|(name, _)| !name.is_empty() && !name.contains('/'))
    }

    pub fn parse(arg: &str) -> Result<Self, PathError> {
        let Some((name, path)) = arg.split_once(':').filter(|_| Self::looks_like(arg)) else {
            return Err(PathError::NotVolume { arg: arg.into() });
        };
        if !is_dns1123_label(name) {
            return Err(PathError::BadName {
                arg: arg.into(),
                name: name.into(),
            });
        }
        Ok(FsPath {
            fs: name.to_owned(),
            path: VolumePath::parse(path)?,
        })
    }
}

/// Which way a `cp` goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Copy {
    Upload { local: PathBuf, to: FsPath },
    Download { from: FsPath, local: PathBuf },
}

impl Copy {
    pub fn parse(src: &str, dst: &str) -> Result<Self, PathError> {
        match (FsPath::looks_like(src), FsPath::looks_like(dst)) {
            (false, true) => Ok(Copy::Upload {
                local: PathBuf::from(src),
                to: FsPath::parse(dst)?,
            }),
            (true, false) => {
                let from = FsPath::parse(src)?;
                from.path.split()?;
                Ok(Copy::Download {
                    from,
                    local: PathBuf::from(dst),
                })
            }
            _ => Err(PathError::BothSides {
                from: src.into(),
                to: dst.into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_paths_normalise_and_refuse_escapes() {
        for (raw, want) in [
            ("/", "/"),
            ("", "/"),
            ("a/b", "/a/b"),
            ("/a//b/", "/a/b"),
            ("/./a/.", "/a"),
        ] {
            assert_eq!(VolumePath::parse(raw).unwrap().as_str(), want, "{raw}");
        }
        for bad in ["/..", "/a/../b", "..", "a/..", "/a/\n"] {
            assert!(VolumePath::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn split_names_parent_and_base() {
        let p = VolumePath::parse("/a/b").unwrap();
        let (parent, base) = p.split().unwrap();
        assert_eq!((parent.as_str(), base), ("/a", "b"));
        let p = VolumePath::parse("/a").unwrap();
        assert_eq!(p.split().unwrap().0.as_str(), "/");
        assert!(VolumePath::parse("/").unwrap().split().is_err());
    }

    #[test]
    fn cp_sides() {
        assert!(matches!(
            Copy::parse("./x", "build:/data/x").unwrap(),
            Copy::Upload { .. }
        ));
        assert!(matches!(
            Copy::parse("build:/r.html", "./r.html").unwrap(),
            Copy::Download { .. }
        ));
        assert!(Copy::parse("./a", "./b").is_err());
        assert!(Copy::parse("a:/x", "b:/y").is_err());
        assert!(Copy::parse("build:/", "./x").is_err());
        assert!(Copy::parse("./x", "build:/../etc").is_err());
        assert!(Copy::parse("./x", "Build:/a").is_err());
        // A local name with a colon after a slash stays local.
        assert!(matches!(
            Copy::parse("./a:b", "build:/x").unwrap(),
            Copy::Upload { .. }
        ));
    }
}
