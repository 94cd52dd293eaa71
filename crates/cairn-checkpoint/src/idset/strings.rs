//! Sets of string (or binary) IDs: 128-bit fingerprints by default, the exact
//! bytes on request.
//!
//! **Collision bound of the fingerprint mode.** A fingerprint is the
//! XXH3-128 hash of the ID's bytes (several times faster than MD5, which
//! bounded string lookups). Treating it as a random 128-bit function of
//! IDs nobody chose to collide (XXH3 passes the SMHasher quality tests; it
//! is not cryptographic): with `n` committed IDs, the chance that some
//! uncommitted ID shares a fingerprint with a committed one (and so is
//! wrongly skipped) is about `n * m / 2^128` for `m` IDs tested: for a
//! billion of each, below 10^-20. Someone who can choose IDs can make
//! collisions on purpose; use [`StringMode::Exact`] if that could happen.
//! Fingerprints live only in memory (ID files hold the IDs themselves), so
//! the function can change between versions; the set's byte form
//! (`codec`) names its format version.

use super::keys::Keys;
use super::radix::RadixIndex;
use super::wire::{Reader, Writer, corrupt};
use crate::error::Result;

/// How string IDs are kept.
///
/// ```
/// assert_eq!(cairn_checkpoint::StringMode::default(), cairn_checkpoint::StringMode::Fingerprint128);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StringMode {
    /// 16 bytes per ID, whatever its length; see the module's collision bound.
    #[default]
    Fingerprint128,
    /// The IDs' bytes themselves (their length plus 16 bytes each).
    Exact,
}

/// The fingerprint of an ID.
pub(crate) fn fingerprint(bytes: &[u8]) -> u128 {
    twox_hash::XxHash3_128::oneshot(bytes)
}

/// An immutable set of string or binary IDs.
///
/// ```
/// use cairn_checkpoint::{StringIdSet, StringMode};
/// let ids: Vec<&[u8]> = vec![b"doc-1", b"doc-2"];
/// let fp = StringIdSet::from_ids(StringMode::Fingerprint128, ids.iter().copied());
/// let exact = StringIdSet::from_ids(StringMode::Exact, ids.iter().copied());
/// for set in [&fp, &exact] {
///     assert!(set.contains(b"doc-2") && !set.contains(b"doc-3"));
///     assert_eq!(set.len(), 2);
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StringIdSet {
    repr: Repr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Repr {
    /// Sorted, distinct fingerprints, and an index over them.
    Fingerprint(Keys<u128>, RadixIndex),
    /// Sorted, distinct IDs as (start, length) into one byte buffer.
    Exact {
        bytes: Vec<u8>,
        spans: Vec<(u64, u32)>,
    },
}

impl StringIdSet {
    /// Builds the set from IDs in any order, with duplicates.
    pub fn from_ids<'a>(mode: StringMode, ids: impl IntoIterator<Item = &'a [u8]>) -> Self {
        match mode {
            StringMode::Fingerprint128 => {
                Self::from_fingerprints(ids.into_iter().map(fingerprint).collect())
            }
            StringMode::Exact => {
                let mut bytes = Vec::new();
                let mut spans = Vec::new();
                for id in ids {
                    spans.push((bytes.len() as u64, id.len() as u32));
                    bytes.extend_from_slice(id);
                }
                Self::from_exact(bytes, spans)
            }
        }
    }

    pub(crate) fn from_fingerprints(mut fps: Vec<u128>) -> Self {
        fps.sort_unstable();
        fps.dedup();
        fps.shrink_to_fit();
        let index = RadixIndex::build(&fps);
        Self {
            repr: Repr::Fingerprint(fps.into(), index),
        }
    }

    pub(crate) fn from_exact(bytes: Vec<u8>, mut spans: Vec<(u64, u32)>) -> Self {
        let at = |s: &(u64, u32)| &bytes[s.0 as usize..s.0 as usize + s.1 as usize];
        spans.sort_unstable_by(|a, b| at(a).cmp(at(b)));
        spans.dedup_by(|a, b| at(a) == at(b));
        spans.shrink_to_fit();
        Self {
            repr: Repr::Exact { bytes, spans },
        }
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: &[u8]) -> bool {
        match &self.repr {
            Repr::Fingerprint(fps, index) => {
                let fp = fingerprint(id);
                let fps = fps.as_slice();
                fps[index.range(fp, fps.len())].binary_search(&fp).is_ok()
            }
            Repr::Exact { bytes, spans } => spans
                .binary_search_by(|s| bytes[s.0 as usize..s.0 as usize + s.1 as usize].cmp(id))
                .is_ok(),
        }
    }

    /// Number of IDs.
    pub fn len(&self) -> u64 {
        match &self.repr {
            Repr::Fingerprint(fps, _) => fps.as_slice().len() as u64,
            Repr::Exact { spans, .. } => spans.len() as u64,
        }
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes the set holds.
    pub fn memory_bytes(&self) -> usize {
        match &self.repr {
            Repr::Fingerprint(fps, index) => fps.owned_bytes() + index.memory_bytes(),
            Repr::Exact { bytes, spans } => bytes.capacity() + spans.capacity() * 16,
        }
    }
}

impl StringIdSet {
    /// Whether the set keeps the IDs' bytes ([`StringMode::Exact`]).
    pub(crate) fn is_exact(&self) -> bool {
        matches!(self.repr, Repr::Exact { .. })
    }

    /// Writes the set's parts (see `codec`).
    pub(crate) fn encode(&self, w: &mut Writer) {
        match &self.repr {
            Repr::Fingerprint(fps, _) => {
                let fps = fps.as_slice();
                w.count(fps.len());
                w.pad();
                for &fp in fps {
                    w.u128(fp);
                }
            }
            Repr::Exact { bytes, spans } => {
                w.count(bytes.len());
                w.bytes.extend_from_slice(bytes);
                w.count(spans.len());
                for &(start, len) in spans {
                    w.u64(start);
                    w.u32(len);
                }
            }
        }
    }

    /// Reads what [`StringIdSet::encode`] wrote, checking the order
    /// membership relies on and that every span lies in the bytes.
    pub(crate) fn decode(r: &mut Reader<'_>, exact: bool) -> Result<Self> {
        if !exact {
            let count = r.count(16)?;
            let fps = r.keys(count, |b| {
                u128::from_le_bytes(b.try_into().expect("16 bytes"))
            })?;
            if !fps.as_slice().windows(2).all(|w| w[0] < w[1]) {
                return Err(corrupt("its fingerprints are not sorted and distinct"));
            }
            let index = RadixIndex::build(fps.as_slice());
            return Ok(Self {
                repr: Repr::Fingerprint(fps, index),
            });
        }
        let n = r.count(1)?;
        let bytes = r.raw(n)?.to_vec();
        let mut spans = Vec::with_capacity(r.count(12)?);
        for _ in 0..spans.capacity() {
            spans.push((r.u64()?, r.u32()?));
        }
        let at = |s: &(u64, u32)| {
            let start = usize::try_from(s.0).ok()?;
            bytes.get(start..start.checked_add(s.1 as usize)?)
        };
        if spans.iter().any(|s| at(s).is_none()) {
            return Err(corrupt("an ID lies outside the set's bytes"));
        }
        if !spans.windows(2).all(|w| at(&w[0]) < at(&w[1])) {
            return Err(corrupt("its IDs are not sorted and distinct"));
        }
        Ok(Self {
            repr: Repr::Exact { bytes, spans },
        })
    }
}
