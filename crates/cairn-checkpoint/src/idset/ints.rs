//! Exact sets of integer IDs: sorted singles for sparse IDs (8 bytes each),
//! ranges for runs of consecutive IDs (16 bytes a run), 8 KiB bitmaps for
//! blocks of 65,536 IDs that are dense but gappy. Each block of the key space
//! takes whichever of the three is smallest.
//!
//! Keys are the 64-bit two's-complement patterns of the IDs, so `-1_i64` and
//! `u64::MAX` are the same ID; a job's ID column has one type, so they never meet.

use super::keys::Keys;
use super::radix::RadixIndex;
use super::wire::{Reader, Writer, corrupt};
use crate::error::Result;

/// Bits of a key that pick its block.
const BLOCK_SHIFT: u32 = 16;
/// Words of a block's bitmap.
const BITMAP_WORDS: usize = 1 << (BLOCK_SHIFT - 6);
/// Bytes of a block's bitmap.
const BITMAP_BYTES: usize = BITMAP_WORDS * 8;

/// An immutable, exact set of integer IDs.
///
/// ```
/// use cairn_checkpoint::IntIdSet;
/// let set = IntIdSet::from_keys((0..1_000_000u64).chain([u64::MAX]).collect());
/// assert!(set.contains(999_999) && set.contains(u64::MAX) && !set.contains(1_000_000));
/// assert_eq!(set.len(), 1_000_001);
/// assert!(set.memory_bytes() < 64, "one run and one single");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntIdSet {
    /// Inclusive runs, sorted, disjoint, not adjacent.
    ranges: Vec<(u64, u64)>,
    /// (block, bitmap), sorted by block.
    bitmaps: Vec<(u64, Box<[u64; BITMAP_WORDS]>)>,
    /// Sorted, distinct.
    singles: Keys<u64>,
    /// Buckets of `singles` by their top bits.
    index: RadixIndex,
    len: u64,
}

/// Below this many keys a sort stays on one thread.
const PARALLEL_SORT_MIN: usize = 1 << 18;

/// Sorts `keys` in place on up to `threads` threads: split at the median
/// (a linear selection), sort the halves at once, recursively.
fn sort_in_parallel(keys: &mut [u64], threads: usize) {
    if threads < 2 || keys.len() < PARALLEL_SORT_MIN {
        keys.sort_unstable();
        return;
    }
    let mid = keys.len() / 2;
    keys.select_nth_unstable(mid);
    let (low, high) = keys.split_at_mut(mid);
    std::thread::scope(|scope| {
        scope.spawn(|| sort_in_parallel(low, threads / 2));
        sort_in_parallel(high, threads - threads / 2);
    });
}

impl IntIdSet {
    /// Builds the set from keys in any order, with duplicates. The vector's
    /// memory is reused for the singles, so building needs little more than
    /// the keys themselves.
    pub fn from_keys(mut keys: Vec<u64>) -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        sort_in_parallel(&mut keys, threads.min(8));
        keys.dedup();
        let len = keys.len() as u64;
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        let mut bitmaps = Vec::new();
        let mut kept = 0;
        let mut start = 0;
        while start < keys.len() {
            let block = keys[start] >> BLOCK_SHIFT;
            let end = start + keys[start..].partition_point(|k| k >> BLOCK_SHIFT == block);
            let group = &keys[start..end];
            let runs = 1 + group.windows(2).filter(|w| w[1] != w[0] + 1).count();
            let (as_singles, as_runs) = (group.len() * 8, runs * 16);
            if as_runs <= as_singles.min(BITMAP_BYTES) {
                push_runs(&mut ranges, group);
            } else if BITMAP_BYTES < as_singles {
                let mut bits = Box::new([0u64; BITMAP_WORDS]);
                for key in group {
                    let offset = (key & ((1 << BLOCK_SHIFT) - 1)) as usize;
                    bits[offset / 64] |= 1 << (offset % 64);
                }
                bitmaps.push((block, bits));
            } else {
                keys.copy_within(start..end, kept);
                kept += end - start;
            }
            start = end;
        }
        keys.truncate(kept);
        keys.shrink_to_fit();
        ranges.shrink_to_fit();
        bitmaps.shrink_to_fit();
        Self {
            ranges,
            bitmaps,
            index: RadixIndex::build(&keys),
            singles: keys.into(),
            len,
        }
    }

    /// Whether `key` is in the set.
    pub fn contains(&self, key: u64) -> bool {
        let idx = self.ranges.partition_point(|r| r.0 <= key);
        if idx > 0 && key <= self.ranges[idx - 1].1 {
            return true;
        }
        if let Ok(b) = self
            .bitmaps
            .binary_search_by_key(&(key >> BLOCK_SHIFT), |(block, _)| *block)
        {
            let offset = (key & ((1 << BLOCK_SHIFT) - 1)) as usize;
            return self.bitmaps[b].1[offset / 64] & (1 << (offset % 64)) != 0;
        }
        let singles = self.singles.as_slice();
        let bucket = self.index.range(key, singles.len());
        singles[bucket].binary_search(&key).is_ok()
    }

    /// Number of IDs.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes the set holds.
    pub fn memory_bytes(&self) -> usize {
        self.ranges.capacity() * 16
            + self.bitmaps.capacity() * 16
            + self.bitmaps.len() * BITMAP_BYTES
            + self.singles.owned_bytes()
            + self.index.memory_bytes()
    }
}

/// Whether `items` strictly increase by `key`.
fn strictly_increasing<T>(items: &[T], key: impl Fn(&T) -> u64) -> bool {
    items.windows(2).all(|w| key(&w[0]) < key(&w[1]))
}

impl IntIdSet {
    /// Writes the set's parts (see `codec`).
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.u64(self.len);
        w.count(self.ranges.len());
        for &(start, end) in &self.ranges {
            w.u64(start);
            w.u64(end);
        }
        w.count(self.bitmaps.len());
        for (block, bits) in &self.bitmaps {
            w.u64(*block);
            for word in bits.iter() {
                w.u64(*word);
            }
        }
        let singles = self.singles.as_slice();
        w.count(singles.len());
        w.pad();
        for &key in singles {
            w.u64(key);
        }
    }

    /// Reads what [`IntIdSet::encode`] wrote, checking the order membership
    /// relies on and the count of IDs.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let len = r.u64()?;
        let mut ranges = Vec::with_capacity(r.count(16)?);
        for _ in 0..ranges.capacity() {
            ranges.push((r.u64()?, r.u64()?));
        }
        let mut bitmaps = Vec::with_capacity(r.count(8 + BITMAP_BYTES)?);
        for _ in 0..bitmaps.capacity() {
            let block = r.u64()?;
            let mut bits = Box::new([0u64; BITMAP_WORDS]);
            for word in bits.iter_mut() {
                *word = r.u64()?;
            }
            bitmaps.push((block, bits));
        }
        let count = r.count(8)?;
        let singles = r.keys(count, |b| {
            u64::from_le_bytes(b.try_into().expect("8 bytes"))
        })?;
        let ranges_ordered =
            ranges.iter().all(|r| r.0 <= r.1) && ranges.windows(2).all(|w| w[0].1 < w[1].0);
        if !ranges_ordered
            || !strictly_increasing(&bitmaps, |b| b.0)
            || !strictly_increasing(singles.as_slice(), |k| *k)
        {
            return Err(corrupt("its keys are not sorted and distinct"));
        }
        let counted = ranges
            .iter()
            .map(|r| (r.1 - r.0).saturating_add(1))
            .chain(
                bitmaps
                    .iter()
                    .map(|b| b.1.iter().map(|w| u64::from(w.count_ones())).sum()),
            )
            .fold(singles.as_slice().len() as u64, u64::saturating_add);
        if counted != len {
            return Err(corrupt("its count of IDs does not match its parts"));
        }
        Ok(Self {
            index: RadixIndex::build(singles.as_slice()),
            ranges,
            bitmaps,
            singles,
            len,
        })
    }
}

/// Appends the runs of consecutive keys in `group`, merging with the last
/// range when they touch.
fn push_runs(ranges: &mut Vec<(u64, u64)>, group: &[u64]) {
    for &key in group {
        match ranges.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(key) => last.1 = key,
            _ => ranges.push((key, key)),
        }
    }
}

#[cfg(test)]
mod parallel_sort_tests {
    #[test]
    fn sorts_like_the_standard_sort() {
        let mut state = 42u64;
        let mut keys: Vec<u64> = (0..(super::PARALLEL_SORT_MIN * 3))
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                state >> (state % 40)
            })
            .collect();
        let mut expected = keys.clone();
        expected.sort_unstable();
        super::sort_in_parallel(&mut keys, 4);
        assert_eq!(keys, expected);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_block_takes_the_smallest_form() {
        // Sparse: singles.
        let sparse = IntIdSet::from_keys(vec![1, 1 << 20, 1 << 40, 7]);
        assert_eq!(
            (
                sparse.singles.as_slice().len(),
                sparse.ranges.len(),
                sparse.bitmaps.len()
            ),
            (4, 0, 0)
        );
        // Every other ID of a block: a bitmap.
        let gappy = IntIdSet::from_keys((0..65_536u64).step_by(2).collect());
        assert_eq!(
            (
                gappy.singles.as_slice().len(),
                gappy.ranges.len(),
                gappy.bitmaps.len()
            ),
            (0, 0, 1)
        );
        assert!(gappy.contains(65_534) && !gappy.contains(65_535));
        // Consecutive across blocks: one range.
        let dense = IntIdSet::from_keys((10..300_000u64).collect());
        assert_eq!(dense.ranges, vec![(10, 299_999)]);
        assert!(!dense.contains(9) && dense.contains(10) && dense.contains(299_999));
    }

    #[test]
    fn extremes_and_duplicates() {
        let set = IntIdSet::from_keys(vec![u64::MAX, 0, u64::MAX, u64::MAX - 1, 0]);
        assert_eq!(set.len(), 3);
        assert!(set.contains(0) && set.contains(u64::MAX) && set.contains(u64::MAX - 1));
        assert!(!set.contains(1));
        assert!(IntIdSet::from_keys(vec![]).is_empty());
    }
}
