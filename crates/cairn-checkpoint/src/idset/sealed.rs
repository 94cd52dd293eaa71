//! Sealed runs: what keeps a billion random integer IDs from sitting in
//! memory as 8-byte keys while a checkpoint loads.
//!
//! Loose keys (random IDs, which hold no runs) are gathered up to
//! [`SEAL_KEYS`]; each full buffer is sorted and sealed into a run of
//! Elias–Fano segments, about `2 + log2(span / SEAL_KEYS)` bits a key (5.0
//! bytes for random 64-bit keys, against 8 loose and 4.5 in the final set of
//! 1B). Building the set takes the runs' keys one key range at a time, on
//! every core ([`build_by_key_range`]), dropping each segment once the
//! ranges reading it are done: the peak is the runs plus what is built,
//! never the keys.
//!
//! Segments are large allocations of their own (tens of MiB), so the
//! allocator hands each back to the system when it is dropped, rather than
//! keeping it for later use as it may with small blocks.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use super::elias_fano::{CHUNK_KEYS, EliasFano};
use super::sort::{sort_keys, sort_stretches};

/// Loose keys gathered before they are sealed into a run (512 MiB).
pub(crate) const SEAL_KEYS: usize = 1 << 26;
/// Keys per segment of a run (about 40 MiB of random keys).
const SEGMENT_KEYS: usize = 1 << 23;

/// Sorted, distinct keys, compressed, in segments read once in order.
#[derive(Debug, Default)]
pub(crate) struct SealedRun {
    segments: VecDeque<EliasFano>,
    /// The largest key, if any.
    last: Option<u64>,
}

impl SealedRun {
    /// Sorts `keys`, drops their duplicates and compresses them, then
    /// empties `keys`, keeping its memory for the next run's keys.
    pub(crate) fn seal(keys: &mut Vec<u64>, threads: usize) -> Self {
        Self::seal_in_segments(keys, threads, SEGMENT_KEYS)
    }

    /// [`SealedRun::seal`] into segments of `segment_keys`.
    fn seal_in_segments(keys: &mut Vec<u64>, threads: usize, segment_keys: usize) -> Self {
        sort_keys(keys, threads);
        keys.dedup();
        let segments = encode_segments(keys, threads, segment_keys);
        let last = keys.last().copied();
        keys.clear();
        SealedRun { segments, last }
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

/// Sorted, distinct `keys` as segments of `segment_keys`, encoded on up to
/// `threads` threads (segments are independent of each other).
fn encode_segments(keys: &[u64], threads: usize, segment_keys: usize) -> VecDeque<EliasFano> {
    let segments: Vec<&[u64]> = keys.chunks(segment_keys).collect();
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

/// Keys a key range of [`build_by_key_range`] holds, about, for a set's
/// build: 16 MiB of them sorted at once by each thread (and as much of
/// scratch). With more than 16 runs a set's build asks for two chunks of
/// each run a range (see `IntIdSet::from_sealed`), as the chunk a range
/// shares with the next is decoded by both.
pub(crate) const RANGE_KEYS: usize = 1 << 21;

/// Where one run's chunks lie: each chunk's first key, and where each
/// segment's chunks start in that list.
struct RunIndex {
    firsts: Vec<u64>,
    segment_starts: Vec<usize>,
    /// The run's largest key, if any: a range above it reads nothing of
    /// the run, and the run's segments are dropped.
    last: Option<u64>,
}

impl RunIndex {
    /// The segment holding chunk `g` of the run, and the chunk's index in it.
    fn locate(&self, g: usize) -> (usize, usize) {
        let segment = self.segment_starts.partition_point(|&start| start <= g) - 1;
        (segment, g - self.segment_starts[segment])
    }
}

/// A range a thread of [`build_by_key_range`] took.
struct Taken {
    /// Its index, in key order.
    index: usize,
    /// The segments it reads: for each run, from the one holding its first
    /// chunk to the one holding its last.
    segments: Vec<Vec<Arc<EliasFano>>>,
    /// A vector for its keys.
    keys: Vec<u64>,
}

/// What the threads of [`build_by_key_range`] share.
struct Shared {
    /// The next range to take.
    next: usize,
    /// Ranges handed to `take` so far, in order.
    emitted: usize,
    /// Set when a thread stops early: the others stop too.
    stopped: bool,
    /// Each run's segments; a segment no range still to be taken reads is
    /// dropped here (and freed once the ranges reading it are done).
    segments: Vec<Vec<Option<Arc<EliasFano>>>>,
    /// Vectors given back by `take`, for the next ranges' keys.
    spares: Vec<Vec<u64>>,
}

/// Builds from the keys of `runs`, merged, sorted and distinct, one part
/// per key range: `build` gets each range's keys (on up to `threads`
/// threads of their own, each taking the next range) and makes its part;
/// `take` gets the parts in increasing key order on the calling thread and
/// may give a vector back for reuse. Ranges start on multiples of `align`
/// (a power of two), so an aligned block's keys are all in one range.
///
/// The ranges are cut where the runs' chunks start (their first keys are a
/// sample of every run's keys), so each holds about `range_keys` keys (at
/// least a chunk's worth) of whatever spread. Each range's keys are
/// decoded from the chunks of every run that overlap it, one sorted
/// stretch a run, and sorted there ([`sort_stretches`]: a streamed split
/// by the top digit, then radix passes in the caches), where a merge of
/// every run compared the keys one by one. A run's segment is dropped once the
/// ranges reading it are done, so the peak stays the runs plus the parts
/// built, as with a merge; at most `threads + 1` parts wait to be taken.
pub(crate) fn build_by_key_range<P: Send>(
    runs: Vec<SealedRun>,
    threads: usize,
    align: u64,
    range_keys: usize,
    build: impl Fn(Vec<u64>) -> P + Sync,
    mut take: impl FnMut(P) -> Option<Vec<u64>>,
) {
    debug_assert!(align.is_power_of_two());
    let mut indexes = Vec::with_capacity(runs.len());
    let mut segments = Vec::with_capacity(runs.len());
    for run in runs {
        let mut index = RunIndex {
            firsts: Vec::new(),
            segment_starts: Vec::new(),
            last: run.last,
        };
        let mut held = Vec::with_capacity(run.segments.len());
        for segment in run.segments {
            index.segment_starts.push(index.firsts.len());
            index.firsts.extend_from_slice(segment.chunk_firsts());
            held.push(Some(Arc::new(segment)));
        }
        indexes.push(index);
        segments.push(held);
    }
    let starts = range_starts(&indexes, align, range_keys);
    // spans[i][r]: the chunks of run r that range i reads.
    let spans: Vec<Vec<(usize, usize)>> = (0..starts.len())
        .map(|i| {
            let (lo, hi) = (starts[i], starts.get(i + 1).copied());
            indexes
                .iter()
                .map(|index| {
                    if index.last.is_none_or(|last| last < lo) {
                        // Done with (or empty): past its last chunk.
                        return (index.firsts.len(), index.firsts.len());
                    }
                    let from = index.firsts.partition_point(|&f| f <= lo).saturating_sub(1);
                    let to = hi.map_or(index.firsts.len(), |hi| {
                        index.firsts.partition_point(|&f| f < hi)
                    });
                    (from, to.max(from))
                })
                .collect()
        })
        .collect();
    let window = threads.max(1) + 1;
    let shared = Mutex::new(Shared {
        next: 0,
        emitted: 0,
        stopped: false,
        segments,
        spares: Vec::new(),
    });
    let turn = Condvar::new();
    let (to_caller, parts) = std::sync::mpsc::channel::<(usize, P)>();
    std::thread::scope(|scope| {
        // A panic of this thread (a thread that could not be started, or
        // `take`) stops the threads too.
        let stop = StopOnPanic {
            shared: &shared,
            turn: &turn,
        };
        for _ in 0..threads.max(1) {
            let to_caller = to_caller.clone();
            let (indexes, spans, starts, build) = (&indexes, &spans, &starts, &build);
            let stop = StopOnPanic {
                shared: &shared,
                turn: &turn,
            };
            scope.spawn(move || {
                let (mut chunk, mut ends, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
                let mut low = (Vec::new(), Vec::new());
                while let Some(taken) = stop.next_range(indexes, spans, window) {
                    let Taken {
                        index: i,
                        segments: held,
                        mut keys,
                    } = taken;
                    let (lo, hi) = (starts[i], starts.get(i + 1).copied());
                    keys.clear();
                    ends.clear();
                    let readers = spans[i].iter().zip(indexes).zip(&held);
                    for ((&(from, to), index), segments) in readers {
                        if from >= to {
                            continue;
                        }
                        let (first_segment, _) = index.locate(from);
                        let mark = keys.len();
                        for g in from..to {
                            let (segment, c) = index.locate(g);
                            let segment = &segments[segment - first_segment];
                            if g == from {
                                // The first chunk may begin before the range.
                                chunk.clear();
                                segment.append_chunk(c, &mut chunk);
                                let skip = chunk.partition_point(|&k| k < lo);
                                keys.extend_from_slice(&chunk[skip..]);
                            } else {
                                segment.append_chunk(c, &mut keys);
                            }
                        }
                        if let Some(hi) = hi {
                            // The last chunk may reach past the range.
                            let keep = keys[mark..].partition_point(|&k| k < hi);
                            keys.truncate(mark + keep);
                        }
                        // One sorted stretch a run.
                        ends.push(keys.len());
                    }
                    drop(held);
                    sort_stretches(&mut keys, &ends, &mut scratch, &mut low);
                    keys.dedup();
                    if to_caller.send((i, build(keys))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(to_caller);
        let mut waiting = std::collections::BTreeMap::new();
        let mut next = 0;
        for (i, part) in parts {
            waiting.insert(i, part);
            while let Some(part) = waiting.remove(&next) {
                let spare = take(part);
                next += 1;
                stop.emitted(next, spare);
            }
        }
    });
}

/// Where the ranges of [`build_by_key_range`] start: the first at 0, then
/// every `range_keys`' worth of chunk starts of all runs together, rounded
/// down to `align`.
fn range_starts(indexes: &[RunIndex], align: u64, range_keys: usize) -> Vec<u64> {
    let mut firsts: Vec<u64> = indexes
        .iter()
        .flat_map(|index| index.firsts.iter().copied())
        .collect();
    firsts.sort_unstable();
    let every = (range_keys / CHUNK_KEYS).max(1);
    let mut starts = vec![0u64];
    for &first in firsts.iter().skip(every).step_by(every) {
        let start = first & !(align - 1);
        if start > starts[starts.len() - 1] {
            starts.push(start);
        }
    }
    starts
}

/// One thread's hold on what the threads of [`build_by_key_range`] share;
/// a panic of the thread stops the others, which would otherwise wait for
/// its range for ever.
struct StopOnPanic<'a> {
    shared: &'a Mutex<Shared>,
    turn: &'a Condvar,
}

impl StopOnPanic<'_> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        // A panic never leaves the state half changed.
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next range to build, once fewer than `window` parts wait to be
    /// taken; None when every range is taken or a thread stopped. Segments
    /// no later range reads are dropped.
    fn next_range(
        &self,
        indexes: &[RunIndex],
        spans: &[Vec<(usize, usize)>],
        window: usize,
    ) -> Option<Taken> {
        let mut state = self.lock();
        while !state.stopped && state.next < spans.len() && state.next >= state.emitted + window {
            state = self
                .turn
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        if state.stopped || state.next >= spans.len() {
            return None;
        }
        let i = state.next;
        state.next += 1;
        let mut held = Vec::with_capacity(indexes.len());
        for (r, (index, &(from, to))) in indexes.iter().zip(&spans[i]).enumerate() {
            let mut reads = Vec::new();
            if from >= index.firsts.len() {
                // No range from this one on reads the run.
                state.segments[r]
                    .iter_mut()
                    .for_each(|segment| drop(segment.take()));
            } else {
                // Later ranges start at or after this one's first chunk:
                // the segments before it are done with.
                let (first_segment, _) = index.locate(from);
                state.segments[r][..first_segment]
                    .iter_mut()
                    .for_each(|segment| drop(segment.take()));
                if from < to {
                    let (last_segment, _) = index.locate(to - 1);
                    reads = state.segments[r][first_segment..=last_segment]
                        .iter()
                        .map(|s| Arc::clone(s.as_ref().expect("a segment to be read is held")))
                        .collect();
                }
            }
            held.push(reads);
        }
        let keys = state.spares.pop().unwrap_or_default();
        Some(Taken {
            index: i,
            segments: held,
            keys,
        })
    }

    /// Records that `emitted` parts are taken, keeping `spare` for a
    /// later range's keys.
    fn emitted(&self, emitted: usize, spare: Option<Vec<u64>>) {
        let mut state = self.lock();
        state.emitted = emitted;
        state.spares.extend(spare);
        drop(state);
        self.turn.notify_all();
    }
}

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.lock().stopped = true;
            self.turn.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::idset::tests::mix;

    /// `parts` sealed as runs of segments of two chunks (so ranges read
    /// across segments, and drop them).
    fn sealed(parts: &[Vec<u64>]) -> Vec<SealedRun> {
        parts
            .iter()
            .map(|p| SealedRun::seal_in_segments(&mut p.clone(), 2, 2 * CHUNK_KEYS))
            .collect()
    }

    /// Every key of `parts`, sealed as runs, as `build_by_key_range` hands
    /// them to `build` with `threads` and `align`: one vector a range.
    fn ranges_of(parts: &[Vec<u64>], threads: usize, align: u64) -> Vec<Vec<u64>> {
        let mut ranges = Vec::new();
        // A chunk's worth a range: many ranges, chunks shared by two.
        build_by_key_range(
            sealed(parts),
            threads,
            align,
            CHUNK_KEYS,
            |keys| keys,
            |keys| {
                ranges.push(keys);
                None
            },
        );
        ranges
    }

    #[test]
    fn ranges_give_every_key_once_in_order() {
        // Overlapping runs with keys in common, one empty, dense ones (one
        // below every other key, done with early), one of a single key at
        // the top.
        let parts: Vec<Vec<u64>> = vec![
            (0..300_000).map(mix).collect(),
            (200_000..450_000).map(mix).collect(),
            vec![],
            (0..100_000).map(|i| i * 7).collect(),
            (0..200_000).map(|i| (1 << 40) + i * 3).collect(),
            vec![u64::MAX],
        ];
        let mut model: Vec<u64> = parts.iter().flatten().copied().collect();
        model.sort_unstable();
        model.dedup();
        for (threads, align) in [(1, 1), (2, 1 << 16), (3, 1 << 20)] {
            let ranges = ranges_of(&parts, threads, align);
            assert!(ranges.len() > 10, "{} ranges", ranges.len());
            assert_eq!(ranges.concat(), model, "{threads} threads");
            // No aligned block is split between two ranges.
            let mut ends = ranges.iter().filter(|keys| !keys.is_empty());
            let mut before = ends.next().expect("a range with keys");
            for range in ends {
                let (last, first) = (before[before.len() - 1], range[0]);
                assert!(
                    last / align < first / align,
                    "{last} and {first} share a block"
                );
                before = range;
            }
        }
        // Runs one after the other in the key space (time-ordered IDs).
        let disjoint: Vec<Vec<u64>> = (0..4u64)
            .map(|r| (0..150_000).map(|i| (r << 50) + i * 5).collect())
            .collect();
        assert_eq!(ranges_of(&disjoint, 2, 1 << 16).concat(), disjoint.concat());
        assert!(ranges_of(&[vec![], vec![]], 2, 1).concat().is_empty());
        assert_eq!(ranges_of(&[vec![5]], 2, 1 << 16).concat(), vec![5]);
    }

    /// `build_by_key_range` over 1M random keys in ranges of a chunk's
    /// worth, with `build` or `take` panicking at their `at`-th call.
    fn panicking(build_at: usize, take_at: usize) -> std::thread::Result<()> {
        let keys: Vec<u64> = (0..1_000_000).map(mix).collect();
        let runs = sealed(&[keys]);
        let (built, taken) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            build_by_key_range(
                runs,
                2,
                1,
                CHUNK_KEYS,
                |keys| {
                    assert_ne!(
                        built.fetch_add(1, Ordering::SeqCst),
                        build_at,
                        "a failed build"
                    );
                    keys
                },
                |_| {
                    assert_ne!(
                        taken.fetch_add(1, Ordering::SeqCst),
                        take_at,
                        "a failed take"
                    );
                    None
                },
            )
        }))
    }

    #[test]
    fn a_panic_reaches_the_caller_and_nothing_waits() {
        // One range of about 15 fails: the other thread, waiting for the
        // failed range's turn, must stop rather than wait for ever.
        assert!(panicking(3, usize::MAX).is_err());
        assert!(panicking(usize::MAX, 2).is_err());
        assert!(panicking(usize::MAX, usize::MAX).is_ok());
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
