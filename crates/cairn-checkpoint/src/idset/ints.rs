//! Exact sets of integer IDs: ranges for runs of consecutive IDs (16 bytes
//! a run), 8 KiB bitmaps for blocks of 65,536 IDs that are dense but gappy,
//! and the sparse rest in Elias–Fano form (`elias_fano`: under 5 bytes an ID
//! for 100M random 64-bit IDs, at most 8). Each block of the key space takes
//! whichever of the three is smallest.
//!
//! Keys are the 64-bit two's-complement patterns of the IDs, so `-1_i64` and
//! `u64::MAX` are the same ID; a job's ID column has one type, so they never meet.

use super::elias_fano::{CHUNK_KEYS, EliasFano, EliasFanoWriter};
use super::sealed::{RANGE_KEYS, SealedRun, build_by_key_range};
use super::sort::{sort_keys, threads};
use super::wire::{Reader, Writer, corrupt};
use crate::error::Result;

/// Bits of a key that pick its block.
const BLOCK_SHIFT: u32 = 16;
/// Words of a block's bitmap.
const BITMAP_WORDS: usize = 1 << (BLOCK_SHIFT - 6);
/// Bytes of a block's bitmap.
const BITMAP_BYTES: usize = BITMAP_WORDS * 8;
/// A block of the key space (the key shifted by `BLOCK_SHIFT`) and the
/// bitmap of its keys.
type Bitmap = (u64, Box<[u64; BITMAP_WORDS]>);

/// An immutable, exact set of integer IDs.
///
/// ```
/// use cairn_checkpoint::IntIdSet;
/// let set = IntIdSet::from_keys((0..1_000_000u64).chain([u64::MAX]).collect());
/// assert!(set.contains(999_999) && set.contains(u64::MAX) && !set.contains(1_000_000));
/// assert_eq!(set.len(), 1_000_001);
/// assert!(set.memory_bytes() < 128, "one run and one single");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntIdSet {
    /// Inclusive runs, sorted, disjoint, not adjacent.
    ranges: Vec<(u64, u64)>,
    /// (block, bitmap), sorted by block.
    bitmaps: Vec<Bitmap>,
    /// The keys of sparse blocks (none of them in a range or a bitmap).
    singles: EliasFano,
    len: u64,
}

impl IntIdSet {
    /// Builds the set from keys in any order, with duplicates. The vector's
    /// memory is reused for the singles, so building needs little more than
    /// the keys themselves.
    pub fn from_keys(keys: Vec<u64>) -> Self {
        Self::from_parts(Vec::new(), keys)
    }

    /// Builds the set from inclusive runs (any order, may overlap) and
    /// keys (any order, duplicates, may fall in the runs). The runs stay
    /// runs; each block of the other keys takes whichever form is smallest
    /// there: runs, a bitmap, or singles. `keys`' memory is reused for the
    /// singles.
    pub(crate) fn from_parts(runs: Vec<(u64, u64)>, mut keys: Vec<u64>) -> Self {
        let ranges = sorted_ranges(runs);
        sort_keys(&mut keys, threads());
        keys.dedup();
        drop_covered(&mut keys, &ranges);
        let kept = keys.len() as u64;
        let (from_keys, bitmaps) = split_blocks(&mut keys);
        Self::assembled(
            ranges,
            from_keys,
            bitmaps,
            EliasFano::from_sorted(keys),
            kept,
        )
    }

    /// Builds the set from inclusive runs (any order, may overlap) and
    /// sealed runs of keys, one key range at a time on every core (see
    /// [`build_by_key_range`]): each sealed segment is dropped once the
    /// ranges reading it are done, so the peak is the sealed runs plus what
    /// is built, never the keys one by one. Besides, each thread holds a
    /// range being read and its sorting scratch, and a few ranges wait to
    /// be taken: ranges of 2M keys (16 MiB), or two chunks of every run
    /// when there are more than 16 runs.
    pub(crate) fn from_sealed(runs: Vec<(u64, u64)>, sealed: Vec<SealedRun>) -> Self {
        let given = sorted_ranges(runs);
        let mut from_keys: Vec<(u64, u64)> = Vec::new();
        let mut bitmaps = Vec::new();
        let mut singles = EliasFanoWriter::default();
        let mut kept = 0u64;
        // Each run's chunk at a range's start is decoded by two ranges: with
        // two chunks of every run a range at least, that costs at most half
        // again, however many runs there are, and the ranges (each listing
        // its chunks of every run) number at most the runs' chunks over
        // twice the runs.
        let range_keys = RANGE_KEYS.max(2 * sealed.len() * CHUNK_KEYS);
        build_by_key_range(
            sealed,
            threads(),
            1 << BLOCK_SHIFT,
            range_keys,
            |mut keys| {
                drop_covered(&mut keys, &given);
                let count = keys.len() as u64;
                let (runs, maps) = split_blocks(&mut keys);
                (count, runs, maps, keys)
            },
            |(count, runs, maps, keys)| {
                kept += count;
                runs.into_iter()
                    .for_each(|run| push_range(&mut from_keys, run));
                bitmaps.extend(maps);
                singles.push_sorted(&keys);
                Some(keys)
            },
        );
        Self::assembled(given, from_keys, bitmaps, singles.finish(), kept)
    }

    /// The set of the sorted, disjoint `given` ranges and of `kept` keys
    /// outside them, split by block into `from_keys` (runs, sorted),
    /// `bitmaps` (by block) and `singles`.
    fn assembled(
        given: Vec<(u64, u64)>,
        from_keys: Vec<(u64, u64)>,
        mut bitmaps: Vec<Bitmap>,
        singles: EliasFano,
        kept: u64,
    ) -> Self {
        let len = given
            .iter()
            .map(|r| (r.1 - r.0).saturating_add(1))
            .fold(kept, u64::saturating_add);
        let mut ranges = if from_keys.is_empty() {
            given
        } else {
            merge_ranges(given, from_keys)
        };
        ranges.shrink_to_fit();
        bitmaps.shrink_to_fit();
        Self {
            ranges,
            bitmaps,
            singles,
            len,
        }
    }

    /// Whether `key` is in the set.
    pub fn contains(&self, key: u64) -> bool {
        self.in_ranges_or_bitmaps(key) || self.singles.contains(key)
    }

    /// Sets `answers[i]` to whether `keys[i]` is in the set: faster than
    /// asking for each key alone on big sets (lookups of many keys overlap
    /// their memory reads).
    pub(crate) fn contains_each(&self, keys: &[u64], answers: &mut [bool]) {
        self.singles.contains_each(keys, answers);
        for (&key, answer) in keys.iter().zip(answers.iter_mut()) {
            *answer = *answer || self.in_ranges_or_bitmaps(key);
        }
    }

    /// Whether every key from `start` to `end` (inclusive) is in the set:
    /// at once when one range holds them all (sequential IDs), else key by
    /// key, skipping through ranges.
    ///
    /// ```
    /// use cairn_checkpoint::IntIdSet;
    /// let set = IntIdSet::from_keys((0..100_000u64).chain([200_000, 200_001]).collect());
    /// assert!(set.contains_all(10, 99_999) && set.contains_all(200_000, 200_001));
    /// assert!(!set.contains_all(99_999, 100_000) && !set.contains_all(199_999, 200_000));
    /// ```
    pub fn contains_all(&self, start: u64, end: u64) -> bool {
        let mut key = start;
        loop {
            if let Some(range) = self.range_holding(key) {
                if range.1 >= end {
                    return true;
                }
                key = range.1 + 1;
                continue;
            }
            if !self.in_bitmaps(key) && !self.singles.contains(key) {
                return false;
            }
            if key == end {
                return true;
            }
            key += 1;
        }
    }

    fn in_ranges_or_bitmaps(&self, key: u64) -> bool {
        self.range_holding(key).is_some() || self.in_bitmaps(key)
    }

    /// The range that holds `key`, if any.
    fn range_holding(&self, key: u64) -> Option<(u64, u64)> {
        let idx = self.ranges.partition_point(|r| r.0 <= key);
        idx.checked_sub(1)
            .map(|i| self.ranges[i])
            .filter(|r| key <= r.1)
    }

    fn in_bitmaps(&self, key: u64) -> bool {
        if let Ok(b) = self
            .bitmaps
            .binary_search_by_key(&(key >> BLOCK_SHIFT), |(block, _)| *block)
        {
            let offset = (key & ((1 << BLOCK_SHIFT) - 1)) as usize;
            return self.bitmaps[b].1[offset / 64] & (1 << (offset % 64)) != 0;
        }
        false
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
            + self.singles.memory_bytes()
    }
}

/// How a block of keys is kept: whichever form is smallest there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Runs,
    Bitmap,
    Singles,
}

impl Form {
    /// The form for `group`, the sorted, distinct keys of one block. A
    /// single is costed at 8 bytes (its Elias–Fano cost depends on its
    /// neighbours; 8 is the most it can be), so a block turns into runs or
    /// a bitmap only where they clearly pay.
    fn of(group: &[u64]) -> Form {
        let runs = 1 + group.windows(2).filter(|w| w[1] != w[0] + 1).count();
        let (as_singles, as_runs) = (group.len() * 8, runs * 16);
        if as_runs <= as_singles.min(BITMAP_BYTES) {
            Form::Runs
        } else if BITMAP_BYTES < as_singles {
            Form::Bitmap
        } else {
            Form::Singles
        }
    }
}

/// The bitmap of `group`, the keys of one block.
fn bitmap_of(group: &[u64]) -> Bitmap {
    let mut bits = Box::new([0u64; BITMAP_WORDS]);
    for key in group {
        let offset = (key & ((1 << BLOCK_SHIFT) - 1)) as usize;
        bits[offset / 64] |= 1 << (offset % 64);
    }
    (group[0] >> BLOCK_SHIFT, bits)
}

/// Inclusive runs in any order, possibly overlapping, as sorted, disjoint
/// ranges.
fn sorted_ranges(mut runs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    runs.sort_unstable_by_key(|r| r.0);
    let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for run in runs {
        push_range(&mut ranges, run);
    }
    ranges
}

/// Splits sorted, distinct `keys` by block into the form each block takes
/// (see [`Form`]): returns the runs and bitmaps, and leaves in `keys` the
/// singles, in order, in the same memory.
fn split_blocks(keys: &mut Vec<u64>) -> (Vec<(u64, u64)>, Vec<Bitmap>) {
    let mut from_keys: Vec<(u64, u64)> = Vec::new();
    let mut bitmaps = Vec::new();
    let mut kept = 0;
    let mut start = 0;
    while start < keys.len() {
        let block = keys[start] >> BLOCK_SHIFT;
        // Random keys hold one key a block: such a key is a single with
        // no more asked (one key costs less as a single than as a run).
        if keys
            .get(start + 1)
            .is_none_or(|&next| next >> BLOCK_SHIFT != block)
        {
            keys[kept] = keys[start];
            kept += 1;
            start += 1;
            continue;
        }
        // A scan, not a binary search of the rest: blocks hold few keys,
        // and the group is walked below anyway.
        let end = start
            + keys[start..]
                .iter()
                .take_while(|&&k| k >> BLOCK_SHIFT == block)
                .count();
        let group = &keys[start..end];
        match Form::of(group) {
            Form::Runs => group
                .iter()
                .for_each(|&key| push_range(&mut from_keys, (key, key))),
            Form::Bitmap => bitmaps.push(bitmap_of(group)),
            Form::Singles => {
                keys.copy_within(start..end, kept);
                kept += end - start;
            }
        }
        start = end;
    }
    keys.truncate(kept);
    (from_keys, bitmaps)
}

/// Appends the inclusive run `run` to `ranges` (sorted by start, runs
/// starting at or after the last one's start), merging with the last range
/// when they overlap or touch.
pub(crate) fn push_range(ranges: &mut Vec<(u64, u64)>, run: (u64, u64)) {
    match ranges.last_mut() {
        Some(last) if run.0 <= last.1.saturating_add(1) => last.1 = last.1.max(run.1),
        _ => ranges.push(run),
    }
}

/// Two sorted lists of disjoint ranges as one, touching ranges merged.
fn merge_ranges(a: Vec<(u64, u64)>, b: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
            (Some(_), Some(_)) => b.next(),
            (Some(_), None) => a.next(),
            (None, _) => b.next(),
        };
        match next {
            Some(run) => push_range(&mut out, run),
            None => return out,
        }
    }
}

/// Removes from sorted `keys` those inside the sorted, disjoint `ranges`.
fn drop_covered(keys: &mut Vec<u64>, ranges: &[(u64, u64)]) {
    let Some(&first) = keys.first() else {
        return;
    };
    let mut r = ranges.partition_point(|range| range.1 < first);
    if r == ranges.len() {
        return;
    }
    keys.retain(|&key| {
        while r < ranges.len() && ranges[r].1 < key {
            r += 1;
        }
        !(r < ranges.len() && ranges[r].0 <= key)
    });
}

/// Whether `items` strictly increase by `key`.
fn strictly_increasing<T>(items: &[T], key: impl Fn(&T) -> u64) -> bool {
    items.windows(2).all(|w| key(&w[0]) < key(&w[1]))
}

impl IntIdSet {
    /// Writes the set's parts (see `codec`).
    pub(crate) fn encode(&self, w: &mut Writer<'_>) {
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
        self.singles.encode(w);
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
        let singles = EliasFano::decode(r)?;
        let ranges_ordered =
            ranges.iter().all(|r| r.0 <= r.1) && ranges.windows(2).all(|w| w[0].1 < w[1].0);
        if !ranges_ordered || !strictly_increasing(&bitmaps, |b| b.0) {
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
            .fold(singles.len() as u64, u64::saturating_add);
        if counted != len {
            return Err(corrupt("its count of IDs does not match its parts"));
        }
        Ok(Self {
            ranges,
            bitmaps,
            singles,
            len,
        })
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
                sparse.singles.len(),
                sparse.ranges.len(),
                sparse.bitmaps.len()
            ),
            (4, 0, 0)
        );
        // Every other ID of a block: a bitmap.
        let gappy = IntIdSet::from_keys((0..65_536u64).step_by(2).collect());
        assert_eq!(
            (gappy.singles.len(), gappy.ranges.len(), gappy.bitmaps.len()),
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
