//! Decoding one 512-byte header block and the PAX records that may precede
//! it. Pure; field offsets are those of POSIX ustar, which GNU tar and
//! busybox share for everything read here.

use super::Refusal;

pub const BLOCK: usize = 512;

const NAME: std::ops::Range<usize> = 0..100;
const MODE: std::ops::Range<usize> = 100..108;
const SIZE: std::ops::Range<usize> = 124..136;
const CHKSUM: std::ops::Range<usize> = 148..156;
const TYPEFLAG: usize = 156;
const MAGIC: std::ops::Range<usize> = 257..263;
const PREFIX: std::ops::Range<usize> = 345..500;

/// The fields of a header the walker uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub typeflag: u8,
    /// See `name`.
    pub name: Vec<u8>,
    pub size: u64,
    pub mode: u32,
}

/// Why a header block could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadHeader {
    Checksum { stored: Option<u64>, computed: u64 },
    Field(&'static str),
}

/// True for an end-of-archive block.
pub fn is_zero(block: &[u8]) -> bool {
    block.iter().all(|&b| b == 0)
}

/// Decodes a header block, checksum first.
pub fn decode(block: &[u8; BLOCK]) -> Result<Header, BadHeader> {
    let stored = number(&block[CHKSUM]);
    // The sum counts the checksum field as spaces. Some historic tars
    // summed signed bytes; accept either, as GNU tar does.
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, &b) in block.iter().enumerate() {
        let b = if CHKSUM.contains(&i) { b' ' } else { b };
        unsigned += u64::from(b);
        signed += i64::from(b as i8);
    }
    let ok = stored.is_some_and(|s| s == unsigned || i64::try_from(s).is_ok_and(|s| s == signed));
    if !ok {
        return Err(BadHeader::Checksum {
            stored,
            computed: unsigned,
        });
    }
    let size = number(&block[SIZE]).ok_or(BadHeader::Field("size"))?;
    let mode = number(&block[MODE]).ok_or(BadHeader::Field("mode"))?;
    Ok(Header {
        typeflag: block[TYPEFLAG],
        name: name(block),
        size,
        // Only permission bits pass: setuid, setgid and sticky never do.
        mode: u32::try_from(mode & 0o777).unwrap_or(0o644),
    })
}

/// The entry name a header holds: `prefix/name` for POSIX ustar, else
/// `name` (GNU's own format keeps other data where ustar has the prefix).
pub fn name(block: &[u8; BLOCK]) -> Vec<u8> {
    let name = field_str(&block[NAME]);
    let prefix = field_str(&block[PREFIX]);
    if &block[MAGIC] == b"ustar\0" && !prefix.is_empty() {
        [prefix, b"/", name].concat()
    } else {
        name.to_vec()
    }
}

/// A string field: up to its first NUL.
fn field_str(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    &field[..end]
}

/// A numeric field: octal (leading spaces, ended by space or NUL), or
/// GNU's base-256 for values that do not fit (first byte 0x80; a negative
/// 0xff value is refused). An all-NUL field is 0.
pub fn number(field: &[u8]) -> Option<u64> {
    match field.first() {
        Some(0x80) => {
            let mut v: u64 = 0;
            for &b in &field[1..] {
                v = v.checked_mul(256)?.checked_add(u64::from(b))?;
            }
            Some(v)
        }
        Some(b) if b & 0x80 != 0 => None,
        _ => {
            let s = field_str(field);
            let s = s.trim_ascii();
            let mut v: u64 = 0;
            for &b in s {
                if !(b'0'..=b'7').contains(&b) {
                    return None;
                }
                v = v.checked_mul(8)?.checked_add(u64::from(b - b'0'))?;
            }
            Some(v)
        }
    }
}

/// What a PAX extended header ('x') says about the next entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pax {
    pub path: Option<Vec<u8>>,
    pub size: Option<u64>,
}

/// Parses PAX records `"<len> <key>=<value>\n"`. Only `path` and `size`
/// change what is extracted; GNU sparse keys are refused because the data
/// would then not be the file's bytes.
pub fn pax(data: &[u8]) -> Result<Pax, Refusal> {
    let bad = |why: &str| Refusal::BadPax(why.to_owned());
    let mut out = Pax::default();
    let mut rest = data;
    // Trailing NULs pad some writers' records to the block.
    while !rest.is_empty() && rest.iter().any(|&b| b != 0) {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad("a record has no length"))?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("a record length is not a number"))?;
        if len <= space + 1 || len > rest.len() {
            return Err(bad("a record length does not fit the header"));
        }
        let record = &rest[space + 1..len];
        rest = &rest[len..];
        let record = record
            .strip_suffix(b"\n")
            .ok_or_else(|| bad("a record does not end in a newline"))?;
        let eq = record
            .iter()
            .position(|&b| b == b'=')
            .ok_or_else(|| bad("a record has no '='"))?;
        let (key, value) = (&record[..eq], &record[eq + 1..]);
        match key {
            b"path" => out.path = (!value.is_empty()).then(|| value.to_vec()),
            b"size" => {
                out.size = Some(
                    std::str::from_utf8(value)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| bad("size is not a number"))?,
                );
            }
            k if k.starts_with(b"GNU.sparse.") => return Err(Refusal::Sparse),
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        let cases: &[(&[u8], Option<u64>)] = &[
            (b"0000644\0", Some(0o644)),
            (b"  755 \0", Some(0o755)),
            (b"\0\0\0\0", Some(0)),
            (b"00000000017\0", Some(15)),
            (b"12x\0", None),
            (b"\x80\0\0\0\0\0\0\x02\x80\0\0\0", Some(0x02_8000_0000)),
            (b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", None),
            (b"\x80\x01\0\0\0\0\0\0\0\0\0\0", None),
        ];
        for (field, want) in cases {
            assert_eq!(number(field), *want, "{field:?}");
        }
    }

    #[test]
    fn pax_records() {
        let p = pax(b"20 path=T/long/name\n13 size=1234\n13 mtime=1.5\n").unwrap();
        assert_eq!(p.path.as_deref(), Some(&b"T/long/name"[..]));
        assert_eq!(p.size, Some(1234));
        let bad: &[&[u8]] = &[
            b"99 path=x\n",
            b"9 path=x\0",
            b"x path=y\n",
            b"8 pathx\n",
            b"13 size=12x4\n",
        ];
        for b in bad {
            assert!(matches!(pax(b), Err(Refusal::BadPax(_))), "{b:?}");
        }
        assert_eq!(
            pax(b"22 GNU.sparse.major=1\n"),
            Err(Refusal::Sparse),
            "sparse"
        );
    }
}
