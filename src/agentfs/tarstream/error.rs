//! Why a stream is refused, worded for the person copying: each message
//! names the entry and says what was refused and why.

use std::fmt;

/// Why an entry is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Link { typeflag: u8 },
    Special { typeflag: u8 },
    Unsupported { typeflag: u8 },
    NotUtf8,
    ControlCharacter,
    Absolute,
    ParentReference,
    EmptyName,
    FileEndsInSlash,
    OutsideTop { top: String },
    ParentIsFile { parent: String },
    FileAndFolder,
    Duplicate,
    OverBytes { total: u64, limit: u64 },
    TooManyEntries { limit: u64 },
    ExtensionTooLarge { size: u64, limit: u64 },
    TooManyExtensions,
    ExtensionWithoutEntry,
    LongNameAndPax,
    BadPax(String),
    Sparse,
    DirWithData { size: u64 },
    Checksum { offset: u64 },
    BadNumber { field: &'static str },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Link { typeflag: b'1' } => write!(
                f,
                "hard links are not copied (entry type {})",
                TypeFlag(b'1')
            ),
            Self::Link { typeflag } => write!(
                f,
                "symbolic links are not copied (entry type {})",
                TypeFlag(*typeflag)
            ),
            Self::Special { typeflag } => {
                let what = match typeflag {
                    b'3' => "character devices",
                    b'4' => "block devices",
                    _ => "fifos",
                };
                write!(
                    f,
                    "{what} are not copied (entry type {})",
                    TypeFlag(*typeflag)
                )
            }
            Self::Unsupported { typeflag } => write!(
                f,
                "entry type {} is not copied (only files and folders are)",
                TypeFlag(*typeflag)
            ),
            Self::NotUtf8 => f.write_str("the name is not UTF-8"),
            Self::ControlCharacter => f.write_str("the name holds a control character"),
            Self::Absolute => f.write_str("the name is absolute and would leave the target folder"),
            Self::ParentReference => f.write_str("the name leaves the target folder"),
            Self::EmptyName => f.write_str("the name is empty"),
            Self::FileEndsInSlash => f.write_str("a file's name ends in '/'"),
            Self::OutsideTop { top } => {
                write!(
                    f,
                    "the entry lies outside {top:?}, the one name this copy writes"
                )
            }
            Self::ParentIsFile { parent } => {
                write!(f, "it would be written inside {parent:?}, which is a file")
            }
            Self::FileAndFolder => f.write_str("a file and a folder would share this name"),
            Self::Duplicate => f.write_str("the archive holds this file twice"),
            Self::OverBytes { total, limit } => write!(
                f,
                "{} would pass the {} transfer limit",
                human(*total),
                human(*limit)
            ),
            Self::TooManyEntries { limit } => {
                write!(f, "the archive passes the limit of {limit} entries")
            }
            Self::ExtensionTooLarge { size, limit } => write!(
                f,
                "an extended header of {size} bytes passes the {} bound",
                human(*limit)
            ),
            Self::TooManyExtensions => {
                f.write_str("more extended headers than one entry needs come before it")
            }
            Self::ExtensionWithoutEntry => {
                f.write_str("an extended header is not followed by an entry")
            }
            Self::LongNameAndPax => {
                f.write_str("the entry has both a GNU long name and a PAX path")
            }
            Self::BadPax(why) => write!(f, "its PAX header is malformed: {why}"),
            Self::Sparse => f.write_str("sparse files are not copied"),
            Self::DirWithData { size } => write!(f, "a folder entry carries {size} bytes of data"),
            Self::Checksum { offset } => write!(
                f,
                "the header at byte {offset} fails its checksum (a damaged stream or not a tar archive)"
            ),
            Self::BadNumber { field } => write!(f, "its {field} field is not a number"),
        }
    }
}

/// An entry type as a character when printable (`2`, `K`), else in hex.
struct TypeFlag(u8);

impl fmt::Display for TypeFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() {
            write!(f, "{}", char::from(self.0))
        } else {
            write!(f, "0x{:02x}", self.0)
        }
    }
}

/// `11.0 GiB`, `512 bytes`.
fn human(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (size, unit) in UNITS {
        if n >= size {
            return format!("{:.1} {unit}", n as f64 / size as f64);
        }
    }
    format!("{n} bytes")
}

/// Why a stream is refused. Entry names are shown escaped, so a hostile
/// name cannot write control sequences to a terminal or log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("refused {entry:?}: {why}")]
    Refused { entry: String, why: Refusal },
    #[error("the stream ended inside {entry:?} at byte {offset}: the archive is truncated")]
    Truncated { entry: String, offset: u64 },
    #[error("the stream ended inside a header at byte {offset}: the archive is truncated")]
    TruncatedHeader { offset: u64 },
    #[error("the stream carries data after its end-of-archive blocks (byte {offset})")]
    AfterEnd { offset: u64 },
    #[error("the archive holds no entry")]
    Empty,
    #[error("the stream was already refused; nothing more is read")]
    Stopped,
}

/// A walk stopped: by the stream, or by the sink's own error.
#[derive(Debug, thiserror::Error)]
pub enum WalkError<E> {
    #[error(transparent)]
    Stream(#[from] StreamError),
    #[error(transparent)]
    Sink(E),
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 bytes");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(10 << 30), "10.0 GiB");
    }
}
