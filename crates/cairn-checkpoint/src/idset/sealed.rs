//! Sealed runs: what keeps a billion random integer IDs from sitting in
//! memory as 8-byte keys while a checkpoint loads.
//!
//! Loose keys (random IDs, which hold no runs) are gathered up to
//! [`SEAL_KEYS`]; each full buffer is sorted and sealed into a run of
//! Elias–Fano segments, about `2 + log2(span / SEAL_KEYS)` bits a key (5.0
//! bytes for random 64-bit keys, against 8 loose and 4.5 in the final set of
//! 1B). Building the set merges the runs in order and streams the keys into
//! the set's writer, dropping each segment once it is read: the peak is the
//! runs plus one buffer, never the keys.
//!
//! Segments are large allocations of their own (tens of MiB), so the
//! allocator hands each back to the system when it is dropped, rather than
//! keeping it for later use as it may with small blocks.

use std::collections::VecDeque;

use super::elias_fano::{EliasFano, EliasFanoWriter};
use super::sort::sort_keys;

/// Loose keys gathered before they are sealed into a run (512 MiB).
pub(crate) const SEAL_KEYS: usize = 1 << 26;
/// Keys per segment of a run (about 40 MiB of random keys).
const SEGMENT_KEYS: usize = 1 << 23;

/// Sorted, distinct keys, compressed, in segments read once in order.
#[derive(Debug, Default)]
pub(crate) struct SealedRun {
    segments: VecDeque<EliasFano>,
}

impl SealedRun {
    /// Sorts `keys`, drops their duplicates and compresses them, then
    /// empties `keys`, keeping its memory for the next run's keys.
    pub(crate) fn seal(keys: &mut Vec<u64>, threads: usize) -> Self {
        sort_keys(keys, threads);
        keys.dedup();
        let segments = keys.chunks(SEGMENT_KEYS).map(encode_segment).collect();
        keys.clear();
        SealedRun { segments }
    }

    /// Number of keys.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.segments.iter().map(EliasFano::len).sum()
    }

    /// Heap bytes held.
    #[cfg(test)]
    fn memory_bytes(&self) -> usize {
        self.segments.iter().map(EliasFano::memory_bytes).sum()
    }
}

/// One segment of sorted, distinct keys, written straight into memory of
/// its encoded size.
fn encode_segment(keys: &[u64]) -> EliasFano {
    let mut writer = EliasFanoWriter::with_capacity_for(keys);
    keys.iter().for_each(|&key| writer.push(key));
    writer.finish()
}

/// Reads a run one chunk at a time, dropping each segment once read.
struct Cursor {
    run: SealedRun,
    /// The next chunk of the front segment.
    chunk: usize,
    /// Decoded keys of the current chunk, from `at` on not yet taken.
    keys: Vec<u64>,
    at: usize,
}

impl Cursor {
    /// Decodes the next chunk once the current one is taken; false when
    /// the run is done.
    fn fill(&mut self) -> bool {
        if self.at < self.keys.len() {
            return true;
        }
        self.keys.clear();
        self.at = 0;
        while let Some(segment) = self.run.segments.front() {
            if self.chunk < segment.chunk_count() {
                segment.append_chunk(self.chunk, &mut self.keys);
                self.chunk += 1;
                return true;
            }
            self.run.segments.pop_front();
            self.chunk = 0;
        }
        false
    }
}

/// Merges `runs`: hands `emit` batches of their keys, sorted and distinct
/// across all batches, in increasing order; `emit` gives back a vector
/// for the next batch (the one it was handed, or any other).
pub(crate) fn merge(runs: Vec<SealedRun>, mut emit: impl FnMut(Vec<u64>) -> Vec<u64>) {
    let mut cursors: Vec<Cursor> = runs
        .into_iter()
        .map(|run| Cursor {
            run,
            chunk: 0,
            keys: Vec::new(),
            at: 0,
        })
        .collect();
    let mut batch = Vec::new();
    loop {
        cursors.retain_mut(Cursor::fill);
        // Every key up to the smallest of the chunks' last keys is decoded
        // now, in some cursor; no key after them can be smaller.
        let Some(bound) = cursors.iter().map(|c| c.keys[c.keys.len() - 1]).min() else {
            break;
        };
        batch.clear();
        for cursor in &mut cursors {
            let rest = &cursor.keys[cursor.at..];
            let take = rest.partition_point(|&k| k <= bound);
            batch.extend_from_slice(&rest[..take]);
            cursor.at += take;
        }
        // The batch is one sorted stretch per run: the stable sort finds
        // and merges them (n log runs), rather than sorting from scratch.
        batch.sort();
        batch.dedup();
        batch = emit(batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idset::tests::mix;

    #[test]
    fn merged_runs_give_every_key_once_in_order() {
        // Overlapping runs with keys in common, one empty, one of a
        // single key at the top.
        let parts: Vec<Vec<u64>> = vec![
            (0..300_000).map(mix).collect(),
            (200_000..450_000).map(mix).collect(),
            vec![],
            (0..100_000).map(|i| i * 7).collect(),
            vec![u64::MAX],
        ];
        let mut model: Vec<u64> = parts.iter().flatten().copied().collect();
        model.sort_unstable();
        model.dedup();
        let runs: Vec<SealedRun> = parts
            .into_iter()
            .map(|mut p| SealedRun::seal(&mut p, 2))
            .collect();
        let mut merged = Vec::new();
        merge(runs, |batch| {
            merged.extend_from_slice(&batch);
            batch
        });
        assert_eq!(merged, model);
    }

    #[test]
    fn a_run_of_random_keys_is_compressed() {
        let mut keys: Vec<u64> = (0..1_000_000).map(mix).collect();
        let run = SealedRun::seal(&mut keys, 2);
        assert!(
            keys.is_empty() && keys.capacity() >= 1_000_000,
            "the buffer is kept"
        );
        assert_eq!(run.len(), 1_000_000);
        // 2 + log2(2^64 / 1M) = 46 bits: 5.75 bytes, against 8 loose.
        assert!(run.memory_bytes() < 6 * 1_000_000, "{}", run.memory_bytes());
    }
}
