//! Content-defined chunks of a tar stream (fastcdc, its 2020 algorithm):
//! a cut depends on the bytes around it only, so a change in one place of
//! the volume moves the cuts near it and leaves the others, and their
//! chunks, as they were. Each chunk's sha256 is its blob's digest.
//!
//! Memory: the chunker's buffer of `max` bytes plus the chunk handed out.

use fastcdc::v2020::{self, AsyncStreamCDC};
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tokio::io::AsyncRead;

use super::Category;

const KIB: u32 = 1024;
const MIB: u32 = 1024 * KIB;

/// Chunk sizes in bytes: a cut never comes before `min` nor after `max`
/// bytes, and comes after about `avg` on average.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkSizes {
    pub min: u32,
    pub avg: u32,
    pub max: u32,
}

impl Default for ChunkSizes {
    /// 1 MiB, 4 MiB, 16 MiB: a 1 GiB volume is about 256 blobs.
    fn default() -> Self {
        Self {
            min: MIB,
            avg: 4 * MIB,
            max: 16 * MIB,
        }
    }
}

impl ChunkSizes {
    /// The bounds fastcdc v2020 takes (it asserts them; these are checked
    /// first, so a bad setting is an error, not a panic).
    pub fn check(&self) -> Result<(), ChunkError> {
        let bad = |why: String| Err(ChunkError::Sizes { sizes: *self, why });
        let within = |v: u32, lo: usize, hi: usize| (lo..=hi).contains(&(v as usize));
        if !within(self.min, v2020::MINIMUM_MIN, v2020::MINIMUM_MAX) {
            return bad(format!(
                "min must be {}..={} bytes",
                v2020::MINIMUM_MIN,
                v2020::MINIMUM_MAX
            ));
        }
        if !within(self.avg, v2020::AVERAGE_MIN, v2020::AVERAGE_MAX) {
            return bad(format!(
                "avg must be {}..={} bytes",
                v2020::AVERAGE_MIN,
                v2020::AVERAGE_MAX
            ));
        }
        if !within(self.max, v2020::MAXIMUM_MIN, v2020::MAXIMUM_MAX) {
            return bad(format!(
                "max must be {}..={} bytes",
                v2020::MAXIMUM_MIN,
                v2020::MAXIMUM_MAX
            ));
        }
        if ![self.min, self.avg, self.max]
            .iter()
            .all(|s| s.is_multiple_of(2))
        {
            return bad("every size must be even".into());
        }
        if !(self.min <= self.avg && self.avg <= self.max) {
            return bad("min <= avg <= max must hold".into());
        }
        Ok(())
    }
}

/// One chunk of the stream.
#[derive(Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Where it starts in the stream.
    pub offset: u64,
    pub data: Vec<u8>,
    /// `sha256:` and the lowercase hex of `data`'s sha256.
    pub digest: String,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk")
            .field("offset", &self.offset)
            .field("len", &self.data.len())
            .field("digest", &self.digest)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ChunkError {
    #[error("chunk sizes {}/{}/{} (min/avg/max): {why}", sizes.min, sizes.avg, sizes.max)]
    Sizes { sizes: ChunkSizes, why: String },
    #[error("reading the stream at byte {offset}: {source}")]
    Read {
        offset: u64,
        #[source]
        source: std::io::Error,
    },
}

impl ChunkError {
    pub fn category(&self) -> Category {
        match self {
            ChunkError::Sizes { .. } => Category::Invalid,
            ChunkError::Read { .. } => Category::Io,
        }
    }
}

/// `sha256:<hex>` of `data`.
pub fn digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// Cuts a stream into chunks; `chunks()` hands them out in order.
pub struct Chunker<R> {
    cdc: AsyncStreamCDC<R>,
}

impl<R: AsyncRead + Unpin> Chunker<R> {
    pub fn new(source: R, sizes: ChunkSizes) -> Result<Self, ChunkError> {
        sizes.check()?;
        Ok(Self {
            cdc: AsyncStreamCDC::new(
                source,
                sizes.min as usize,
                sizes.avg as usize,
                sizes.max as usize,
            ),
        })
    }

    /// The chunks, in stream order, each with its digest; their lengths add
    /// up to the stream's. A read error ends the stream with that error.
    pub fn chunks(&mut self) -> impl Stream<Item = Result<Chunk, ChunkError>> + '_ {
        let mut at = 0u64;
        self.cdc.as_stream().map(move |c| match c {
            Ok(c) => {
                at = c.offset + c.length as u64;
                Ok(Chunk {
                    offset: c.offset,
                    digest: digest(&c.data),
                    data: c.data,
                })
            }
            Err(e) => Err(ChunkError::Read {
                offset: at,
                source: e.into(),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::testdata::{SMALL, noise};

    async fn cut(data: &[u8], sizes: ChunkSizes) -> Vec<Chunk> {
        let mut chunker = Chunker::new(data, sizes).unwrap();
        let out: Vec<Result<Chunk, ChunkError>> = chunker.chunks().collect().await;
        out.into_iter().map(|c| c.unwrap()).collect()
    }

    fn digests(chunks: &[Chunk]) -> std::collections::BTreeSet<String> {
        chunks.iter().map(|c| c.digest.clone()).collect()
    }

    /// Chunks of `after` not among `before`'s.
    fn new_chunks(before: &[Chunk], after: &[Chunk]) -> usize {
        let old = digests(before);
        after.iter().filter(|c| !old.contains(&c.digest)).count()
    }

    #[tokio::test]
    async fn chunks_cover_the_stream_in_order_within_bounds() {
        let data = noise(1, 2 << 20);
        let chunks = cut(&data, SMALL).await;
        let mut at = 0u64;
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.offset, at, "chunk {i}");
            assert!(c.data.len() <= SMALL.max as usize, "chunk {i}");
            if i + 1 < chunks.len() {
                assert!(c.data.len() >= SMALL.min as usize, "chunk {i}");
            }
            assert_eq!(c.digest, digest(&c.data));
            at += c.data.len() as u64;
        }
        assert_eq!(at, data.len() as u64);
        let joined: Vec<u8> = chunks.iter().flat_map(|c| c.data.clone()).collect();
        assert_eq!(joined, data);
        // About avg on average (normalised chunking keeps it near).
        let avg = data.len() / chunks.len();
        assert!(
            (SMALL.avg as usize / 2..SMALL.avg as usize * 2).contains(&avg),
            "average {avg}"
        );
    }

    #[tokio::test]
    async fn the_same_bytes_cut_the_same_way() {
        let data = noise(2, 1 << 20);
        assert_eq!(cut(&data, SMALL).await, cut(&data, SMALL).await);
    }

    #[tokio::test]
    async fn a_prepended_region_changes_few_chunks() {
        let data = noise(3, 4 << 20);
        let before = cut(&data, SMALL).await;
        let mut shifted = noise(4, 10_000);
        shifted.extend_from_slice(&data);
        let after = cut(&shifted, SMALL).await;
        let changed = new_chunks(&before, &after);
        assert!(
            changed <= 3,
            "{changed} of {} chunks are new after a 10,000-byte prefix",
            after.len()
        );
    }

    #[tokio::test]
    async fn changing_one_percent_of_the_bytes_changes_few_chunks() {
        let data = noise(5, 4 << 20);
        let before = cut(&data, SMALL).await;
        // 1 % of the bytes, in one region in the middle.
        let mut changed_data = data.clone();
        let at = data.len() / 2;
        let n = data.len() / 100;
        for b in &mut changed_data[at..at + n] {
            *b ^= 0x5a;
        }
        let after = cut(&changed_data, SMALL).await;
        let new = new_chunks(&before, &after);
        let new_bytes: usize = {
            let old = digests(&before);
            after
                .iter()
                .filter(|c| !old.contains(&c.digest))
                .map(|c| c.data.len())
                .sum()
        };
        // The region spans about n / avg chunks, plus one at each end.
        let bound = n / SMALL.avg as usize + 4;
        assert!(
            new <= bound,
            "{new} of {} chunks changed (bound {bound})",
            after.len()
        );
        assert!(
            new_bytes <= data.len() * 3 / 100,
            "{new_bytes} bytes in new chunks for {n} changed"
        );
    }

    #[tokio::test]
    async fn one_changed_byte_changes_one_or_two_chunks() {
        let data = noise(6, 2 << 20);
        let before = cut(&data, SMALL).await;
        let mut one = data.clone();
        one[777_777] ^= 1;
        let after = cut(&one, SMALL).await;
        assert!((1..=2).contains(&new_chunks(&before, &after)));
    }

    #[test]
    fn sizes_outside_fastcdc_bounds_are_errors_not_panics() {
        assert!(ChunkSizes::default().check().is_ok());
        assert!(SMALL.check().is_ok());
        let cases = [
            (ChunkSizes { min: 32, ..SMALL }, "min must be"),
            (
                ChunkSizes {
                    avg: 8 << 20,
                    ..SMALL
                },
                "avg must be",
            ),
            (
                ChunkSizes {
                    max: 32 << 20,
                    ..SMALL
                },
                "max must be",
            ),
            (ChunkSizes { min: 4097, ..SMALL }, "even"),
            (
                ChunkSizes {
                    min: 64 * KIB,
                    avg: 16 * KIB,
                    max: 64 * KIB,
                },
                "min <= avg <= max",
            ),
        ];
        for (sizes, why) in cases {
            match Chunker::new(&b""[..], sizes) {
                Err(e @ ChunkError::Sizes { .. }) => {
                    assert!(e.to_string().contains(why), "{e}");
                    assert_eq!(e.category(), Category::Invalid);
                }
                Err(e) => panic!("{sizes:?}: {e}"),
                Ok(_) => panic!("{sizes:?} accepted"),
            }
        }
    }

    #[tokio::test]
    async fn an_empty_stream_has_no_chunk() {
        assert!(cut(b"", SMALL).await.is_empty());
    }
}
