//! Sorting keys for a set: a radix sort, several times faster than a
//! comparison sort on the 100M random keys of a big resume.
//!
//! One in-place pass (an American flag sort) splits the keys into 256 parts
//! by the highest byte in which they differ, then each part is sorted on
//! the bits below it by a least-significant-digit radix sort, the parts
//! spread over the cores. Memory: the keys, plus one part's worth of
//! scratch per core (a part of random keys is 1/256 of them). Keys made of
//! sorted stretches (a set's key range, one stretch a sealed run) are split
//! into the parts by copying whole pieces, with a scratch as large as the
//! keys ([`sort_stretches`]). A payload can
//! travel with each key (the low bits of a string's fingerprint); integer
//! keys carry none (`()`, which costs nothing).

use std::sync::Mutex;

/// Below this many keys a comparison sort is as fast.
const RADIX_MIN: usize = 1 << 12;
/// From this many keys the first partition pass runs on two threads.
const PARALLEL_PARTITION_MIN: usize = 1 << 20;
/// A part larger than this (skewed keys) is split again rather than
/// holding its size again as scratch.
const PART_MAX: usize = 1 << 23;
/// Widest digit of the per-part passes.
const MAX_DIGIT_BITS: u32 = 12;

/// Threads a sort of a big set uses: the machine's cores, at most 8.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// Sorts `keys` in place on up to `threads` threads.
pub(crate) fn sort_keys(keys: &mut [u64], threads: usize) {
    let mut none = vec![(); keys.len()];
    sort_with(keys, &mut none, threads);
}

/// Sorts `keys` in place on up to `threads` threads, moving `payload[i]`
/// with `keys[i]` (the order of equal keys' payloads is unspecified).
pub(crate) fn sort_with<P: Copy + Default + Send>(
    keys: &mut [u64],
    payload: &mut [P],
    threads: usize,
) {
    sort_with_limit(keys, payload, threads, PART_MAX);
}

/// [`sort_with`], splitting again the parts larger than `part_max`.
fn sort_with_limit<P: Copy + Default + Send>(
    keys: &mut [u64],
    payload: &mut [P],
    threads: usize,
    part_max: usize,
) {
    assert_eq!(keys.len(), payload.len(), "a payload per key");
    if keys.len() < RADIX_MIN {
        sort_small(keys, payload);
        return;
    }
    let two_threads = threads >= 2 && keys.len() >= PARALLEL_PARTITION_MIN;
    let (min, max) = if two_threads {
        let (first, second) = keys.split_at(keys.len() / 2);
        std::thread::scope(|scope| {
            let second = scope.spawn(|| min_max(second));
            let (lo, hi) = min_max(first);
            let (lo2, hi2) = second.join().expect("min_max does not panic");
            (lo.min(lo2), hi.max(hi2))
        })
    } else {
        min_max(keys)
    };
    if min == max {
        return;
    }
    // Bits above the highest differing one are the same in every key.
    let top = 64 - (min ^ max).leading_zeros();
    let shift = top.saturating_sub(8);
    let starts = if two_threads {
        partition_in_halves(keys, payload, shift)
    } else {
        partition_by_digit(keys, payload, shift)
    };
    let mut parts = Vec::with_capacity(256);
    let (mut rest, mut rest_payload) = (keys, payload);
    for b in 0..256 {
        let len = starts[b + 1] - starts[b];
        let (part, tail) = rest.split_at_mut(len);
        let (part_payload, tail_payload) = rest_payload.split_at_mut(len);
        parts.push((part, part_payload));
        (rest, rest_payload) = (tail, tail_payload);
    }
    let queue = Mutex::new(parts);
    let work = || {
        let mut scratch = (Vec::new(), Vec::new());
        loop {
            let Some((part, part_payload)) = queue.lock().expect("no panics while held").pop()
            else {
                return;
            };
            if part.len() > part_max {
                sort_with_limit(part, part_payload, 1, part_max);
            } else {
                sort_low_bits(part, part_payload, shift, &mut scratch);
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.max(1) {
            scope.spawn(work);
        }
        work();
    });
}

/// Sorts `keys`, made of sorted stretches ending at `ends` (increasing, the
/// last `keys.len()`), on this thread, with `scratch` as large as `keys`
/// (kept for the next call). The stretches are split by the top digit of
/// the bits the keys do not share with a binary search in each, and the
/// pieces copied to their parts in `scratch` whole, which then becomes
/// `keys`: the first pass of [`sort_keys`] streams instead of carrying one
/// key at a time to its part. Each part, one sorted piece per stretch, is
/// then sorted on the low bits in the caches.
pub(crate) fn sort_stretches(
    keys: &mut Vec<u64>,
    ends: &[usize],
    scratch: &mut Vec<u64>,
    low: &mut (Vec<u64>, Vec<()>),
) {
    debug_assert_eq!(ends.last().copied().unwrap_or(0), keys.len());
    let stretches: Vec<(usize, usize)> = ends
        .iter()
        .scan(0, |start, &end| {
            let stretch = (*start, end);
            *start = end;
            Some(stretch)
        })
        .filter(|(start, end)| start < end)
        .collect();
    debug_assert!(
        stretches
            .iter()
            .all(|&(start, end)| keys[start..end].is_sorted()),
        "each stretch is sorted"
    );
    if stretches.len() <= 1 {
        return;
    }
    if keys.len() < RADIX_MIN {
        keys.sort_unstable();
        return;
    }
    let min = stretches.iter().map(|&(start, _)| keys[start]).min();
    let max = stretches.iter().map(|&(_, end)| keys[end - 1]).max();
    let (min, max) = min.zip(max).expect("two stretches or more");
    // Keys share every bit above `bits`; the digit is the 8 bits below.
    let bits = 64 - (min ^ max).leading_zeros();
    let shift = bits.saturating_sub(8);
    let digit = |k: u64| ((k >> shift) & 0xFF) as usize;
    // pieces[s][d]: where digit d's keys of stretch s end.
    let mut counts = [0usize; 256];
    let pieces: Vec<[usize; 256]> = stretches
        .iter()
        .map(|&(start, end)| {
            let stretch = &keys[start..end];
            let mut piece_ends = [0usize; 256];
            let mut at = 0;
            for (d, piece_end) in piece_ends.iter_mut().enumerate() {
                at += stretch[at..].partition_point(|&k| digit(k) <= d);
                *piece_end = start + at;
            }
            let mut piece_start = start;
            for (count, &piece_end) in counts.iter_mut().zip(&piece_ends) {
                *count += piece_end - piece_start;
                piece_start = piece_end;
            }
            piece_ends
        })
        .collect();
    let mut next = [0usize; 256];
    let mut part_starts = [0usize; 257];
    for d in 0..256 {
        part_starts[d + 1] = part_starts[d] + counts[d];
        next[d] = part_starts[d];
    }
    // Every slot of the scratch is written below before it is read.
    scratch.resize(keys.len(), 0);
    for (&(start, _), piece_ends) in stretches.iter().zip(&pieces) {
        let mut piece_start = start;
        for (d, &piece_end) in piece_ends.iter().enumerate() {
            let len = piece_end - piece_start;
            scratch[next[d]..next[d] + len].copy_from_slice(&keys[piece_start..piece_end]);
            next[d] += len;
            piece_start = piece_end;
        }
    }
    std::mem::swap(keys, scratch);
    let mut none = vec![(); keys.len()];
    for d in 0..256 {
        let (start, end) = (part_starts[d], part_starts[d + 1]);
        sort_low_bits(&mut keys[start..end], &mut none[start..end], shift, low);
    }
}

/// The smallest and largest key.
fn min_max(keys: &[u64]) -> (u64, u64) {
    keys.iter()
        .fold((u64::MAX, 0), |(lo, hi), &k| (lo.min(k), hi.max(k)))
}

/// A comparison sort of a few keys with their payloads.
fn sort_small<P: Copy>(keys: &mut [u64], payload: &mut [P]) {
    if std::mem::size_of::<P>() == 0 {
        keys.sort_unstable();
        return;
    }
    let mut pairs: Vec<(u64, P)> = keys.iter().copied().zip(payload.iter().copied()).collect();
    pairs.sort_unstable_by_key(|p| p.0);
    for (i, (key, p)) in pairs.into_iter().enumerate() {
        keys[i] = key;
        payload[i] = p;
    }
}

/// [`partition_by_digit`] on two threads: one sequential pass splits the
/// keys by the digit's top bit (a quicksort partition, streaming from both
/// ends), then each half is partitioned by the digit on its own thread. The
/// first half holds digits 0–127 and the second 128–255, so their parts
/// follow each other in order.
fn partition_in_halves<P: Copy + Send>(
    keys: &mut [u64],
    payload: &mut [P],
    shift: u32,
) -> [usize; 257] {
    let bit = 1u64 << (shift + 7);
    let (mut low, mut high) = (0, keys.len());
    loop {
        while low < high && keys[low] & bit == 0 {
            low += 1;
        }
        while low < high && keys[high - 1] & bit != 0 {
            high -= 1;
        }
        if low >= high {
            break;
        }
        keys.swap(low, high - 1);
        payload.swap(low, high - 1);
        low += 1;
        high -= 1;
    }
    let middle = low;
    let (first, second) = keys.split_at_mut(middle);
    let (first_payload, second_payload) = payload.split_at_mut(middle);
    let (starts_first, starts_second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| partition_by_digit(second, second_payload, shift));
        let first = partition_by_digit(first, first_payload, shift);
        (
            first,
            second.join().expect("partition threads do not panic"),
        )
    });
    let mut starts = [0usize; 257];
    starts[..=128].copy_from_slice(&starts_first[..=128]);
    for b in 128..257 {
        starts[b] = middle + starts_second[b];
    }
    starts
}

/// Reorders `keys` (and `payload`) in place so that the byte at `shift`
/// increases (an American flag sort pass); returns where each of the 256
/// parts starts, and the end.
fn partition_by_digit<P: Copy>(keys: &mut [u64], payload: &mut [P], shift: u32) -> [usize; 257] {
    let digit = |k: u64| ((k >> shift) & 0xFF) as usize;
    let mut counts = [0usize; 256];
    for &k in keys.iter() {
        counts[digit(k)] += 1;
    }
    let mut starts = [0usize; 257];
    for b in 0..256 {
        starts[b + 1] = starts[b] + counts[b];
    }
    let mut next: [usize; 256] = starts[..256].try_into().expect("256 starts");
    for b in 0..256 {
        while next[b] < starts[b + 1] {
            // Carry the key out of slot next[b] to its part, taking the
            // key found there, until one belongs in part b.
            let mut carried = (keys[next[b]], payload[next[b]]);
            loop {
                let d = digit(carried.0);
                if d == b {
                    break;
                }
                let slot = next[d];
                carried = (
                    std::mem::replace(&mut keys[slot], carried.0),
                    std::mem::replace(&mut payload[slot], carried.1),
                );
                next[d] += 1;
            }
            keys[next[b]] = carried.0;
            payload[next[b]] = carried.1;
            next[b] += 1;
        }
    }
    starts
}

/// Sorts `keys` (and `payload`), which agree on every bit from `bits` up,
/// by their low `bits` bits: one counting pass per byte, skipping bytes all
/// keys share.
fn sort_low_bits<P: Copy + Default>(
    keys: &mut [u64],
    payload: &mut [P],
    bits: u32,
    scratch: &mut (Vec<u64>, Vec<P>),
) {
    if keys.len() < 64 {
        sort_small(keys, payload);
        return;
    }
    if bits == 0 {
        return;
    }
    // Each pass writes every slot of the scratch before it is read, so it
    // is only grown, never cleared: zeroing it for each part cost as much
    // as a radix pass.
    let n = keys.len();
    if scratch.0.len() < n {
        scratch.0.resize(n, 0);
        scratch.1.resize(n, P::default());
    }
    let (scratch_keys, scratch_payload) = (&mut scratch.0[..n], &mut scratch.1[..n]);
    // Random keys are told apart by their high bits long before the last
    // byte: the passes stop once the bits sorted outnumber the keys 32 to
    // one, and the rare keys that tie on them are sorted among themselves
    // after (each tie is a contiguous run by then).
    let needed = usize::BITS - keys.len().leading_zeros() + 5;
    let skip = bits.saturating_sub(needed);
    // Digits of up to 12 bits (the counts stay in the first-level cache),
    // and an even number of passes when there are several, so the keys end
    // where they started, with no copy back from the scratch: a part of
    // random keys takes two passes where bytes took four.
    let span = bits - skip;
    let mut passes = span.div_ceil(MAX_DIGIT_BITS).max(1);
    if passes > 1 && passes % 2 == 1 {
        passes += 1;
    }
    let width = span.div_ceil(passes);
    let mask = (1u64 << width) - 1;
    let mut counts = vec![0usize; 1 << width];
    let mut next = vec![0usize; 1 << width];
    let mut in_scratch = false;
    for shift in (skip..bits).step_by(width as usize) {
        let (src, src_payload, dst, dst_payload): (&[u64], &[P], &mut [u64], &mut [P]) =
            if in_scratch {
                (&*scratch_keys, &*scratch_payload, &mut *keys, &mut *payload)
            } else {
                (&*keys, &*payload, &mut *scratch_keys, &mut *scratch_payload)
            };
        counts.fill(0);
        for &k in src {
            counts[((k >> shift) & mask) as usize] += 1;
        }
        if counts.contains(&src.len()) {
            continue;
        }
        next[0] = 0;
        for b in 1..counts.len() {
            next[b] = next[b - 1] + counts[b - 1];
        }
        for (&k, &p) in src.iter().zip(src_payload) {
            let d = ((k >> shift) & mask) as usize;
            dst[next[d]] = k;
            dst_payload[next[d]] = p;
            next[d] += 1;
        }
        in_scratch = !in_scratch;
    }
    if in_scratch {
        keys.copy_from_slice(scratch_keys);
        payload.copy_from_slice(scratch_payload);
    }
    if skip > 0 {
        sort_ties(keys, payload, skip);
    }
}

/// Sorts each run of keys that agree above bit `skip` (keys sorted by
/// those bits), whole keys compared.
fn sort_ties<P: Copy>(keys: &mut [u64], payload: &mut [P], skip: u32) {
    let mut start = 0;
    while start < keys.len() {
        let high = keys[start] >> skip;
        let end = start
            + 1
            + keys[start + 1..]
                .iter()
                .take_while(|&&k| k >> skip == high)
                .count();
        if end - start > 1 {
            sort_small(&mut keys[start..end], &mut payload[start..end]);
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(mut keys: Vec<u64>, threads: usize) {
        let mut expected = keys.clone();
        expected.sort_unstable();
        // The payload is the key's own low half, so it can be checked.
        let mut payload: Vec<u32> = keys.iter().map(|&k| k as u32).collect();
        let mut plain = keys.clone();
        sort_with(&mut keys, &mut payload, threads);
        assert_eq!(keys, expected);
        assert!(keys.iter().zip(&payload).all(|(&k, &p)| k as u32 == p));
        sort_keys(&mut plain, threads);
        assert_eq!(plain, expected);
    }

    /// A reproducible stream of pseudo-random keys.
    fn lcg(seed: u64) -> impl FnMut() -> u64 {
        let mut state = seed;
        move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state
        }
    }

    #[test]
    fn sorts_like_the_standard_sort() {
        let mut next = lcg(42);
        // Random over the whole range, narrow ranges, shifted bits,
        // repeats, one part much larger than the others, tiny inputs.
        let random: Vec<u64> = (0..300_000).map(|_| next()).collect();
        let narrow: Vec<u64> = (0..200_000).map(|_| 1_000_000 + next() % 5_000).collect();
        let shifted: Vec<u64> = (0..100_000).map(|_| next() >> (next() % 64)).collect();
        let repeats: Vec<u64> = (0..50_000).map(|_| next() % 3).collect();
        let skewed: Vec<u64> = (0..100_000)
            .map(|i| {
                if i % 10 == 0 {
                    next()
                } else {
                    next() >> 62 << 60 | (next() % 100)
                }
            })
            .collect();
        for keys in [random, narrow, shifted, repeats, skewed] {
            check(keys.clone(), 1);
            check(keys, 3);
        }
        check(vec![], 2);
        check(vec![5, 5, 1], 2);
        check((0..10_000u64).rev().collect(), 2);
    }

    #[test]
    fn the_two_thread_partition_sorts_like_the_standard_sort() {
        let mut next = lcg(7);
        let n = PARALLEL_PARTITION_MIN + 12_345;
        // Random (both halves full), all in the upper half of the top
        // digit, and a narrow range (the digit's top bit the same in all).
        let random: Vec<u64> = (0..n).map(|_| next()).collect();
        let upper: Vec<u64> = (0..n).map(|_| next() | 1 << 63).collect();
        let narrow: Vec<u64> = (0..n).map(|_| 5_000_000 + next() % 100_000).collect();
        for keys in [random, upper, narrow] {
            check(keys, 2);
        }
    }

    /// `stretches`, each sorted, concatenated and sorted by
    /// [`sort_stretches`], against the standard sort.
    fn check_stretches(
        stretches: Vec<Vec<u64>>,
        scratch: &mut Vec<u64>,
        low: &mut (Vec<u64>, Vec<()>),
    ) {
        let mut keys = Vec::new();
        let mut ends = Vec::new();
        for mut stretch in stretches {
            stretch.sort_unstable();
            keys.extend(stretch);
            ends.push(keys.len());
        }
        let mut expected = keys.clone();
        expected.sort_unstable();
        sort_stretches(&mut keys, &ends, scratch, low);
        assert_eq!(keys, expected, "{} stretches", ends.len());
    }

    #[test]
    fn sorted_stretches_sort_like_the_standard_sort() {
        let mut next = lcg(11);
        // Stretches of drawn lengths (some empty, one long) from random
        // keys, a narrow range with repeats across stretches, keys sharing
        // their top bits, and a single stretch.
        let shapes: [(usize, &dyn Fn(u64) -> u64); 3] = [
            (40, &|k| k),
            (16, &|k| 77_000 + k % 9_000),
            (9, &|k| (5 << 60) | (k >> 20)),
        ];
        let (mut scratch, mut low) = (Vec::new(), (Vec::new(), Vec::new()));
        for (stretch_count, shape) in shapes {
            let stretches: Vec<Vec<u64>> = (0..stretch_count)
                .map(|s| {
                    let len = match s % 4 {
                        0 => 0,
                        1 => (next() % 3_000) as usize,
                        2 => 70_000,
                        _ => 1,
                    };
                    (0..len).map(|_| shape(next())).collect()
                })
                .collect();
            check_stretches(stretches, &mut scratch, &mut low);
        }
        // Keys differing in fewer than 8 bits (the digit's shift is 0), and
        // keys all equal, over several stretches.
        for shape in [|i: u64| 1_000 + i % 200, |_| 42] {
            let stretches = (0..3)
                .map(|s| (0..3_000u64).map(|k| shape(shape(k) + s)).collect())
                .collect();
            check_stretches(stretches, &mut scratch, &mut low);
        }
        let mut one: Vec<u64> = (0..10_000).collect();
        sort_stretches(&mut one, &[10_000], &mut scratch, &mut low);
        assert_eq!(one, (0..10_000).collect::<Vec<u64>>());
        let mut none: Vec<u64> = Vec::new();
        sort_stretches(&mut none, &[0, 0], &mut scratch, &mut low);
        assert!(none.is_empty());
    }

    #[test]
    fn oversized_parts_are_split_again() {
        // Most keys share their top byte and one more: with parts capped at
        // 5,000 keys the big part is split twice more.
        let mut keys: Vec<u64> = (0..60_000u64)
            .map(|i| (i.wrapping_mul(0x9E3779B97F4A7C15) >> 48) | (7 << 56))
            .chain([1, u64::MAX])
            .collect();
        let mut expected = keys.clone();
        expected.sort_unstable();
        let mut payload = vec![(); keys.len()];
        sort_with_limit(&mut keys, &mut payload, 2, 5_000);
        assert_eq!(keys, expected);
    }
}
