//! Sorting integer keys for a set: a radix sort, several times faster than
//! a comparison sort on the 100M random keys of a big resume.
//!
//! One in-place pass (an American flag sort) splits the keys into 256 parts
//! by the highest byte in which they differ, then each part is sorted on
//! the bits below it by a least-significant-digit radix sort, the parts
//! spread over the cores. Memory: the keys, plus one part's worth of
//! scratch per core (a part of random keys is 1/256 of them).

use std::sync::Mutex;

/// Below this many keys a comparison sort is as fast.
const RADIX_MIN: usize = 1 << 12;
/// A part larger than this (skewed keys) is sorted by comparison rather
/// than holding its size again as scratch.
const PART_MAX: usize = 1 << 23;

/// Sorts `keys` in place on up to `threads` threads.
pub(crate) fn sort_keys(keys: &mut [u64], threads: usize) {
    if keys.len() < RADIX_MIN {
        keys.sort_unstable();
        return;
    }
    let (min, max) = keys
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), &k| (lo.min(k), hi.max(k)));
    if min == max {
        return;
    }
    // Bits above the highest differing one are the same in every key.
    let top = 64 - (min ^ max).leading_zeros();
    let shift = top.saturating_sub(8);
    let starts = partition_by_digit(keys, shift);
    let mut parts = Vec::with_capacity(256);
    let mut rest = keys;
    for b in 0..256 {
        let (part, tail) = rest.split_at_mut(starts[b + 1] - starts[b]);
        parts.push(part);
        rest = tail;
    }
    let queue = Mutex::new(parts);
    let work = || {
        let mut scratch = Vec::new();
        loop {
            let Some(part) = queue.lock().expect("no panics while held").pop() else {
                return;
            };
            sort_low_bits(part, shift, &mut scratch);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.max(1) {
            scope.spawn(work);
        }
        work();
    });
}

/// Reorders `keys` in place so that the byte at `shift` increases (an
/// American flag sort pass); returns where each of the 256 parts starts,
/// and the end.
fn partition_by_digit(keys: &mut [u64], shift: u32) -> [usize; 257] {
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
            let mut carried = keys[next[b]];
            loop {
                let d = digit(carried);
                if d == b {
                    break;
                }
                std::mem::swap(&mut carried, &mut keys[next[d]]);
                next[d] += 1;
            }
            keys[next[b]] = carried;
            next[b] += 1;
        }
    }
    starts
}

/// Sorts `keys`, which agree on every bit from `bits` up, by their low
/// `bits` bits: one counting pass per byte, skipping bytes all keys share.
fn sort_low_bits(keys: &mut [u64], bits: u32, scratch: &mut Vec<u64>) {
    if keys.len() < 64 || keys.len() > PART_MAX {
        keys.sort_unstable();
        return;
    }
    scratch.clear();
    scratch.resize(keys.len(), 0);
    let mut in_scratch = false;
    for shift in (0..bits).step_by(8) {
        let (src, dst): (&[u64], &mut [u64]) = if in_scratch {
            (scratch, keys)
        } else {
            (keys, scratch)
        };
        let mut counts = [0usize; 256];
        for &k in src {
            counts[((k >> shift) & 0xFF) as usize] += 1;
        }
        if counts.contains(&src.len()) {
            continue;
        }
        let mut next = [0usize; 256];
        for b in 1..256 {
            next[b] = next[b - 1] + counts[b - 1];
        }
        for &k in src {
            let d = ((k >> shift) & 0xFF) as usize;
            dst[next[d]] = k;
            next[d] += 1;
        }
        in_scratch = !in_scratch;
    }
    if in_scratch {
        keys.copy_from_slice(scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(mut keys: Vec<u64>, threads: usize) {
        let mut expected = keys.clone();
        expected.sort_unstable();
        sort_keys(&mut keys, threads);
        assert_eq!(keys, expected);
    }

    #[test]
    fn sorts_like_the_standard_sort() {
        let mut state = 42u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state
        };
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
}
