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

use super::elias_fano::EliasFano;
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
        let segments = encode_segments(keys, threads);
        keys.clear();
        SealedRun { segments }
    }

    /// The run's keys, one decoded chunk at a time, in order; each segment
    /// is dropped once its last chunk is decoded.
    pub(crate) fn into_chunks(self) -> impl Iterator<Item = Vec<u64>> + Send {
        let mut segments = self.segments;
        let mut chunk = 0;
        std::iter::from_fn(move || {
            while let Some(segment) = segments.front() {
                if chunk < segment.chunk_count() {
                    let mut keys = Vec::new();
                    segment.append_chunk(chunk, &mut keys);
                    chunk += 1;
                    return Some(keys);
                }
                segments.pop_front();
                chunk = 0;
            }
            None
        })
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

/// Sorted, distinct `keys` as segments of [`SEGMENT_KEYS`], encoded on up
/// to `threads` threads (segments are independent of each other).
fn encode_segments(keys: &[u64], threads: usize) -> VecDeque<EliasFano> {
    let segments: Vec<&[u64]> = keys.chunks(SEGMENT_KEYS).collect();
    let threads = threads.max(1);
    let mut encoded: Vec<(usize, EliasFano)> = std::thread::scope(|scope| {
        // Thread t encodes segments t, t + threads, ...: a seal's short
        // last segment does not leave one thread a whole segment more.
        let encoders: Vec<_> = (0..threads.min(segments.len()))
            .map(|t| {
                let segments = &segments;
                scope.spawn(move || {
                    (t..segments.len())
                        .step_by(threads)
                        .map(|i| (i, EliasFano::from_sorted_slice(segments[i])))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        encoders
            .into_iter()
            .flat_map(|encoder| encoder.join().expect("encoding does not panic"))
            .collect()
    });
    encoded.sort_unstable_by_key(|(i, _)| *i);
    encoded.into_iter().map(|(_, segment)| segment).collect()
}

/// One source being merged: its current chunk, from `at` on not yet taken.
struct Cursor<S> {
    source: S,
    keys: Vec<u64>,
    at: usize,
}

impl<S: Iterator<Item = Vec<u64>>> Cursor<S> {
    /// Takes the source's next non-empty chunk once the current one is
    /// taken; false when the source is done.
    fn fill(&mut self) -> bool {
        while self.at >= self.keys.len() {
            match self.source.next() {
                Some(keys) => (self.keys, self.at) = (keys, 0),
                None => return false,
            }
        }
        true
    }
}

/// Merges `sources`, each a stream of chunks of keys sorted and distinct
/// across its chunks (a sealed run's, or another merge's batches): hands
/// `emit` batches of their keys, sorted and distinct across all batches,
/// in increasing order; `emit` gives back a vector for the next batch (the
/// one it was handed, or any other).
pub(crate) fn merge<S: Iterator<Item = Vec<u64>>>(
    sources: Vec<S>,
    mut emit: impl FnMut(Vec<u64>) -> Vec<u64>,
) {
    let mut cursors: Vec<Cursor<S>> = sources
        .into_iter()
        .map(|source| Cursor {
            source,
            keys: Vec::new(),
            at: 0,
        })
        .collect();
    let mut batch = Vec::new();
    loop {
        cursors.retain_mut(Cursor::fill);
        // Every key up to the smallest of the chunks' last keys is at hand
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
        // The batch is one sorted stretch per source: the stable sort finds
        // and merges them (n log sources), rather than sorting from scratch.
        batch.sort();
        batch.dedup();
        batch = emit(batch);
    }
}

/// Merges `runs` as [`merge`] does, on up to `threads` threads: with
/// enough runs, they are split into groups merged on threads of their own,
/// and the groups' batches are merged on the calling thread. A merge of k
/// sources costs about log2(k) per key, so each group's thread does less
/// than one merge of all would, and the groups run side by side.
pub(crate) fn merge_runs(
    runs: Vec<SealedRun>,
    threads: usize,
    emit: impl FnMut(Vec<u64>) -> Vec<u64>,
) {
    const MIN_GROUP_RUNS: usize = 2;
    let groups = threads.min(runs.len() / MIN_GROUP_RUNS);
    if groups < 2 {
        let sources = runs.into_iter().map(SealedRun::into_chunks).collect();
        return merge(sources, emit);
    }
    // Runs dealt round-robin: the groups get about as many keys each.
    let mut dealt: Vec<Vec<SealedRun>> = (0..groups).map(|_| Vec::new()).collect();
    for (i, run) in runs.into_iter().enumerate() {
        dealt[i % groups].push(run);
    }
    std::thread::scope(|scope| {
        let mut streams = Vec::with_capacity(groups);
        for group in dealt {
            // A few batches of read-ahead per group keep both sides busy.
            let (to_final, batches) = std::sync::mpsc::sync_channel::<Vec<u64>>(4);
            scope.spawn(move || {
                let sources = group.into_iter().map(SealedRun::into_chunks).collect();
                merge(sources, |batch| {
                    // The final merge stops taking batches only by
                    // panicking, which the scope passes on.
                    let _ = to_final.send(batch);
                    Vec::new()
                });
            });
            streams.push(batches.into_iter());
        }
        merge(streams, emit);
    });
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
        // One merge of all five runs, and two groups merged side by side.
        for threads in [1, 2] {
            let runs: Vec<SealedRun> = parts
                .iter()
                .map(|p| SealedRun::seal(&mut p.clone(), 2))
                .collect();
            let mut merged = Vec::new();
            merge_runs(runs, threads, |batch| {
                merged.extend_from_slice(&batch);
                batch
            });
            assert_eq!(merged, model, "{threads} threads");
        }
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
