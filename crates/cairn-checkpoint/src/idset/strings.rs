//! Sets of string (or binary) IDs: 128-bit fingerprints by default, the exact
//! bytes on request.
//!
//! **Collision bound of the fingerprint mode.** A fingerprint is the MD5 of
//! the ID's bytes. With `n` committed IDs, the chance that some uncommitted
//! ID shares a fingerprint with a committed one (and so is wrongly skipped)
//! is at most `n * m / 2^128` for `m` IDs tested, and the chance of any
//! collision among `n + m` IDs at most `(n + m)^2 / 2^129`: for a billion IDs,
//! below 10^-20. MD5's weakness against chosen collisions does not matter
//! unless an adversary picks the IDs; use [`StringMode::Exact`] if one might.

use super::radix::RadixIndex;

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
    u128::from_be_bytes(md5::compute(bytes).0)
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
    Fingerprint(Vec<u128>, RadixIndex),
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
            repr: Repr::Fingerprint(fps, index),
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
            Repr::Fingerprint(fps, _) => fps.len() as u64,
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
            Repr::Fingerprint(fps, index) => fps.capacity() * 16 + index.memory_bytes(),
            Repr::Exact { bytes, spans } => bytes.capacity() + spans.capacity() * 16,
        }
    }
}
