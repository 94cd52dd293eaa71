//! Sets of string (or binary) IDs: 96-bit fingerprints by default, the exact
//! bytes on request.
//!
//! **Collision bound of the fingerprint mode.** A fingerprint is the top 96
//! bits of the XXH3-128 hash of the ID's bytes (several times faster than
//! MD5, which bounded string lookups). Treating it as a random 96-bit
//! function of IDs nobody chose to collide (XXH3 passes the SMHasher quality
//! tests; it is not cryptographic): with `n` committed IDs, the chance that
//! some uncommitted ID shares a fingerprint with a committed one (and so is
//! wrongly skipped) is about `n * m / 2^96` for `m` IDs tested: for 100M of
//! each, below 10^-12; for a billion of each, about 10^-11. Someone who can
//! choose IDs can make collisions on purpose; use [`StringMode::Exact`] if
//! that could happen. Fingerprints live only in memory (ID files hold the
//! IDs themselves), so the function can change between versions; the set's
//! byte form (`codec`) names its format version.
//!
//! **Layout.** The fingerprints' top 64 bits are kept in Elias–Fano form
//! (`elias_fano`, under 5 bytes an ID at 100M) and their next 32 bits in an
//! array beside them: about 9 bytes an ID, against 16 for sorted 128-bit
//! fingerprints. Top halves shared by two different fingerprints (about
//! `n^2 / 2^65`: a few at 100M IDs) are kept whole in a short sorted list.

use super::elias_fano::EliasFano;
use super::keys::Keys;
use super::sort::sort_with;
use super::wire::{Reader, Writer, corrupt};
use crate::error::Result;

/// How string IDs are kept.
///
/// ```
/// assert_eq!(cairn_checkpoint::StringMode::default(), cairn_checkpoint::StringMode::Fingerprint);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StringMode {
    /// A 96-bit fingerprint, about 9 bytes per ID whatever its length; see
    /// the module's collision bound.
    #[default]
    Fingerprint,
    /// The IDs' bytes themselves (their length plus 16 bytes each).
    Exact,
}

/// The 128-bit hash of an ID (duplicate detection compares all of it).
pub(crate) fn fingerprint(bytes: &[u8]) -> u128 {
    twox_hash::XxHash3_128::oneshot(bytes)
}

/// The set's fingerprint of an ID: the top 64 and the next 32 bits of its
/// hash.
pub(crate) fn split_fingerprint(bytes: &[u8]) -> (u64, u32) {
    let hash = fingerprint(bytes);
    ((hash >> 64) as u64, (hash >> 32) as u32)
}

/// An immutable set of string or binary IDs.
///
/// ```
/// use cairn_checkpoint::{StringIdSet, StringMode};
/// let ids: Vec<&[u8]> = vec![b"doc-1", b"doc-2"];
/// let fp = StringIdSet::from_ids(StringMode::Fingerprint, ids.iter().copied());
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
    Fingerprint(Fingerprints),
    /// Sorted, distinct IDs as (start, length) into one byte buffer.
    Exact {
        bytes: Vec<u8>,
        spans: Vec<(u64, u32)>,
    },
}

/// Distinct 96-bit fingerprints.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprints {
    /// Top 64 bits of the fingerprints whose top 64 bits no other has.
    high: EliasFano,
    /// Their next 32 bits, in the same order.
    low: Keys<u32>,
    /// The fingerprints whose top 64 bits another shares, as `high << 32 |
    /// low`, sorted.
    shared_high: Vec<u128>,
}

/// A fingerprint's two halves as one 96-bit value, `high << 32 | low` (the
/// form of `shared_high`).
fn whole(high: u64, low: u32) -> u128 {
    u128::from(high) << 32 | u128::from(low)
}

impl Fingerprints {
    /// From the two halves of fingerprints in any order, with repeats.
    fn build(mut high: Vec<u64>, mut low: Vec<u32>) -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        sort_with(&mut high, &mut low, threads.min(8));
        let mut shared_high = Vec::new();
        let mut kept = 0;
        let mut start = 0;
        while start < high.len() {
            let end = start
                + high[start..]
                    .iter()
                    .take_while(|&&h| h == high[start])
                    .count();
            let group = &mut low[start..end];
            group.sort_unstable();
            let distinct = 1 + group.windows(2).filter(|w| w[0] != w[1]).count();
            if distinct == 1 {
                high[kept] = high[start];
                low[kept] = low[start];
                kept += 1;
            } else {
                shared_high.extend(group.iter().map(|&l| whole(high[start], l)));
                shared_high.dedup();
            }
            start = end;
        }
        high.truncate(kept);
        low.truncate(kept);
        low.shrink_to_fit();
        Self {
            high: EliasFano::from_sorted(high),
            low: low.into(),
            shared_high,
        }
    }

    fn len(&self) -> usize {
        self.high.len() + self.shared_high.len()
    }

    /// Sets `answers[i]` to whether the fingerprint `ids[i]` is in the set.
    fn contains_each(&self, ids: &[(u64, u32)], answers: &mut [bool]) {
        answers.fill(false);
        let high: Vec<u64> = ids.iter().map(|id| id.0).collect();
        let low = self.low.as_slice();
        let mut in_high = vec![false; ids.len()];
        self.high.find_each(&high, |i, rank| {
            in_high[i] = true;
            answers[i] = low[rank] == ids[i].1;
        });
        if !self.shared_high.is_empty() {
            for (i, &(h, l)) in ids.iter().enumerate() {
                if !in_high[i] {
                    answers[i] = self.shared_high.binary_search(&whole(h, l)).is_ok();
                }
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        self.high.memory_bytes() + self.low.owned_bytes() + self.shared_high.capacity() * 16
    }
}

impl StringIdSet {
    /// Builds the set from IDs in any order, with duplicates.
    pub fn from_ids<'a>(mode: StringMode, ids: impl IntoIterator<Item = &'a [u8]>) -> Self {
        match mode {
            StringMode::Fingerprint => {
                let (high, low) = ids.into_iter().map(split_fingerprint).unzip();
                Self::from_fingerprints(high, low)
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

    /// From the two halves of [`split_fingerprint`]s, any order, repeats.
    pub(crate) fn from_fingerprints(high: Vec<u64>, low: Vec<u32>) -> Self {
        Self {
            repr: Repr::Fingerprint(Fingerprints::build(high, low)),
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
        let mut answer = [false];
        self.contains_each(&[id], &mut answer);
        answer[0]
    }

    /// Sets `answers[i]` to whether `ids[i]` is in the set (faster than one
    /// at a time on big sets: lookups overlap their memory reads).
    pub(crate) fn contains_each(&self, ids: &[&[u8]], answers: &mut [bool]) {
        match &self.repr {
            Repr::Fingerprint(fps) => {
                let split: Vec<(u64, u32)> = ids.iter().map(|id| split_fingerprint(id)).collect();
                fps.contains_each(&split, answers);
            }
            Repr::Exact { bytes, spans } => {
                for (id, answer) in ids.iter().zip(answers) {
                    *answer = spans
                        .binary_search_by(|s| {
                            bytes[s.0 as usize..s.0 as usize + s.1 as usize].cmp(id)
                        })
                        .is_ok();
                }
            }
        }
    }

    /// Number of IDs.
    pub fn len(&self) -> u64 {
        match &self.repr {
            Repr::Fingerprint(fps) => fps.len() as u64,
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
            Repr::Fingerprint(fps) => fps.memory_bytes(),
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
    pub(crate) fn encode(&self, w: &mut Writer<'_>) {
        match &self.repr {
            Repr::Fingerprint(fps) => {
                fps.high.encode(w);
                let low = fps.low.as_slice();
                w.count(low.len());
                w.pad();
                w.words(low, u32::to_le);
                w.count(fps.shared_high.len());
                for &whole in &fps.shared_high {
                    w.u128(whole);
                }
            }
            Repr::Exact { bytes, spans } => {
                w.count(bytes.len());
                w.put(bytes);
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
            let high = EliasFano::decode(r)?;
            let count = r.count(4)?;
            let low = r.keys(count, |b| {
                u32::from_le_bytes(b.try_into().expect("4 bytes"))
            })?;
            let mut shared_high = Vec::with_capacity(r.count(16)?);
            for _ in 0..shared_high.capacity() {
                shared_high.push(u128::from(r.u64()?) | u128::from(r.u64()?) << 64);
            }
            if count != high.len() {
                return Err(corrupt("its fingerprints' two halves differ in number"));
            }
            // A shared top half must not also be in `high`, where lookups
            // would find it first.
            let shared_tops: Vec<u64> = shared_high.iter().map(|w| (w >> 32) as u64).collect();
            let mut clash = false;
            high.find_each(&shared_tops, |_, _| clash = true);
            if clash
                || !shared_high.windows(2).all(|w| w[0] < w[1])
                || shared_high.iter().any(|w| w >> 96 != 0)
            {
                return Err(corrupt("its fingerprints are not sorted and distinct"));
            }
            return Ok(Self {
                repr: Repr::Fingerprint(Fingerprints {
                    high,
                    low,
                    shared_high,
                }),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Fingerprints whose top halves repeat (as real ones almost never do).
    fn with_shared_tops() -> Fingerprints {
        Fingerprints::build(vec![5, 9, 5, 5, 7, 9], vec![1, 3, 2, 1, 4, 3])
    }

    #[test]
    fn shared_top_halves_are_kept_whole() {
        let fps = with_shared_tops();
        assert_eq!(fps.len(), 4, "(5,1) (5,2) (7,4) (9,3)");
        assert_eq!(fps.shared_high, vec![5 << 32 | 1, 5 << 32 | 2]);
        let probes = [
            (5, 1),
            (5, 2),
            (5, 3),
            (7, 4),
            (7, 5),
            (9, 3),
            (9, 1),
            (6, 1),
        ];
        let mut answers = [false; 8];
        fps.contains_each(&probes, &mut answers);
        assert_eq!(
            answers,
            [true, true, false, true, false, true, false, false]
        );
    }

    #[test]
    fn shared_top_halves_survive_bytes_and_damage_is_refused() {
        let set = StringIdSet {
            repr: Repr::Fingerprint(with_shared_tops()),
        };
        let mut w = Writer::grow();
        set.encode(&mut w);
        assert_eq!(
            StringIdSet::decode(&mut Reader::new(&w.into_bytes()), false).unwrap(),
            set
        );
        // A shared top half (5) also listed among the single ones: refused.
        let damaged = StringIdSet {
            repr: Repr::Fingerprint(Fingerprints {
                high: EliasFano::from_sorted(vec![5, 7]),
                low: vec![9, 4].into(),
                shared_high: vec![5 << 32 | 1, 5 << 32 | 2],
            }),
        };
        let mut w = Writer::grow();
        damaged.encode(&mut w);
        assert!(StringIdSet::decode(&mut Reader::new(&w.into_bytes()), false).is_err());
    }
}
