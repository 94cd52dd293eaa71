//! [`IntKeys`]: integer keys collected for an [`IntIdSet`] as ID files are
//! read. Runs of consecutive keys are kept as ranges as each array arrives,
//! so sequential IDs never sit in memory one by one: a builder fed 100M
//! sequential IDs holds a few ranges plus the array being added. Loose keys
//! (random IDs) are sealed into compressed runs every [`SEAL_KEYS`], so a
//! billion of them never sit in memory as 8-byte keys either.

use super::ints::{IntIdSet, push_range};
use super::sealed::{SEAL_KEYS, SealedRun};
use super::sort::threads;

/// A run this long or longer is kept as a range while collecting (16 bytes,
/// against 8 a key as a loose key).
const MIN_RUN: u64 = 4;

/// Integer keys being collected: runs and loose keys.
#[derive(Debug, Default)]
pub(crate) struct IntKeys {
    /// Inclusive runs, in the order found (sorted and merged when built).
    runs: Vec<(u64, u64)>,
    /// Keys outside any run found so far, any order, maybe repeated.
    loose: Vec<u64>,
    /// Loose keys sealed so far (duplicates of the loose keys and of each
    /// other possible).
    sealed: Vec<SealedRun>,
    /// The array being added (reused between arrays).
    scratch: Vec<u64>,
    /// Loose keys held before they are sealed (0: [`SEAL_KEYS`]).
    seal_every: usize,
}

impl IntKeys {
    /// Seals loose keys every `keys` of them instead of every
    /// [`SEAL_KEYS`]: less memory while collecting, more runs for each key
    /// range of the build to read.
    pub(crate) fn seal_every(&mut self, keys: usize) {
        self.seal_every = keys.max(1);
    }

    fn seal_limit(&self) -> usize {
        if self.seal_every == 0 {
            SEAL_KEYS
        } else {
            self.seal_every
        }
    }

    /// Adds the keys `fill` puts into the vector it is given (one array's).
    ///
    /// Sorted arrays (sequential IDs) give up their runs at once. An
    /// unsorted array is sorted first when its keys are dense enough to hold
    /// runs (its span under 4 keys a key: shuffled sequential IDs); sparse
    /// unsorted keys (random IDs) are kept loose without sorting, as sorting
    /// them here would be repeated when the set is built.
    pub(crate) fn push_with(&mut self, fill: impl FnOnce(&mut Vec<u64>)) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        fill(&mut scratch);
        // One pass for a sorted array; its span is only computed otherwise.
        let sorted = scratch.is_sorted();
        let dense = || {
            let (min, max) = scratch
                .iter()
                .fold((u64::MAX, 0), |(lo, hi), &k| (lo.min(k), hi.max(k)));
            max - min < 4 * scratch.len() as u64
        };
        if sorted || dense() {
            if !sorted {
                scratch.sort_unstable();
            }
            self.take_runs(&scratch);
        } else {
            self.add_loose(&scratch);
        }
        self.scratch = scratch;
    }

    /// Adds the keys of the inclusive run `run`.
    pub(crate) fn push_run(&mut self, run: (u64, u64)) {
        match self.runs.last() {
            Some(last) if last.0 <= run.0 => push_range(&mut self.runs, run),
            _ => self.runs.push(run),
        }
    }

    /// Splits sorted `keys` into runs and loose keys.
    fn take_runs(&mut self, keys: &[u64]) {
        let mut start = 0;
        while start < keys.len() {
            let mut end = start;
            while end + 1 < keys.len() && keys[end + 1] <= keys[end].saturating_add(1) {
                end += 1;
            }
            let run = (keys[start], keys[end]);
            if run.1 - run.0 + 1 >= MIN_RUN {
                self.push_run(run);
            } else {
                self.add_loose(&keys[start..=end]);
            }
            start = end + 1;
        }
    }

    fn add_loose(&mut self, keys: &[u64]) {
        self.loose.extend_from_slice(keys);
        self.seal_when_full(self.seal_limit());
    }

    /// Seals the loose keys once there are `limit` or more.
    fn seal_when_full(&mut self, limit: usize) {
        if self.loose.len() >= limit {
            // The buffer's memory is kept for the next run's keys.
            self.sealed
                .push(SealedRun::seal(&mut self.loose, threads()));
        }
    }

    /// Adds everything `other` collected.
    pub(crate) fn merge(&mut self, mut other: IntKeys) {
        self.runs.append(&mut other.runs);
        self.sealed.append(&mut other.sealed);
        self.loose.append(&mut other.loose);
        self.seal_when_full(self.seal_limit());
    }

    /// The set of every key added. Below the sealing limit the set is
    /// built in the loose keys' memory; past it, from the sealed runs.
    pub(crate) fn build(mut self) -> IntIdSet {
        if self.sealed.is_empty() {
            return IntIdSet::from_parts(self.runs, self.loose);
        }
        self.seal_when_full(1);
        drop(self.loose);
        IntIdSet::from_sealed(self.runs, self.sealed)
    }

    /// Loose keys sealed into runs.
    #[cfg(test)]
    fn sealed_len(&self) -> usize {
        self.sealed.iter().map(SealedRun::len).sum()
    }

    /// Loose keys held.
    #[cfg(test)]
    fn loose_len(&self) -> usize {
        self.loose.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(arrays: &[Vec<u64>]) -> IntKeys {
        let mut keys = IntKeys::default();
        for array in arrays {
            keys.push_with(|v| v.extend_from_slice(array));
        }
        keys
    }

    #[test]
    fn sequential_ids_are_held_as_runs() {
        let arrays: Vec<Vec<u64>> = (0..20u64)
            .map(|f| (f * 100_000..(f + 1) * 100_000).collect())
            .collect();
        let keys = collect(&arrays);
        assert_eq!(keys.runs, vec![(0, 1_999_999)]);
        assert_eq!(keys.loose_len(), 0);
        let set = keys.build();
        assert_eq!(set.len(), 2_000_000);
        assert!(set.contains(1_999_999) && !set.contains(2_000_000));
    }

    #[test]
    fn sealed_runs_build_the_same_set() {
        // Random keys sealed in three runs (with repeats across runs and
        // in the loose rest), beside runs of sequential IDs and a dense
        // block that becomes a bitmap.
        let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
        let mut keys = IntKeys::default();
        let mut model = std::collections::BTreeSet::new();
        for part in 0..4u64 {
            let random: Vec<u64> = (part * 50_000..(part + 2) * 50_000).map(mix).collect();
            let sequential: Vec<u64> = (part * 1000..part * 1000 + 700).collect();
            let gappy: Vec<u64> = (1 << 32..(1 << 32) + 65_536).step_by(3).collect();
            for array in [random, sequential, gappy] {
                model.extend(array.iter().copied());
                keys.push_with(|v| v.extend_from_slice(&array));
            }
            if part < 3 {
                keys.seal_when_full(1);
            }
        }
        assert!(keys.sealed_len() > 0 && keys.loose_len() > 0);
        let set = keys.build();
        let unsealed = IntIdSet::from_keys(model.iter().copied().collect());
        assert_eq!(set, unsealed);
        assert_eq!(set.len(), model.len() as u64);
    }

    #[test]
    fn shuffled_and_gappy_arrays() {
        // Shuffled sequential IDs: sorted, then runs.
        let mut shuffled: Vec<u64> = (1000..2000).collect();
        shuffled.reverse();
        // Every third ID: loose (runs of one), a bitmap once built.
        let gappy: Vec<u64> = (0..65_536).step_by(3).collect();
        // Random: loose, unsorted, not sorted here.
        let random = vec![u64::MAX, 5, 1 << 40, 5];
        let arrays = [shuffled, gappy, random];
        let model: std::collections::HashSet<u64> = arrays.iter().flatten().copied().collect();
        let keys = collect(&arrays);
        assert_eq!(keys.runs, vec![(1000, 1999)]);
        assert_eq!(keys.loose_len(), 21_846 + 4);
        let set = keys.build();
        assert_eq!(set.len(), model.len() as u64);
        for key in (0..70_000).chain([u64::MAX, u64::MAX - 1, 1 << 40, (1 << 40) + 1]) {
            assert_eq!(set.contains(key), model.contains(&key), "{key}");
        }
    }
}
