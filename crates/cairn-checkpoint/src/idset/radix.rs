//! A radix index over a sorted slice of keys: the top bits of a key pick a
//! bucket of about 16 keys, so a lookup binary-searches 1-2 cache lines
//! instead of the whole slice. It costs at most 0.25 bytes per key.

use std::ops::Range;

/// Keys whose top bits can be read.
pub(crate) trait Key: Copy + Ord {
    /// The top `bits` bits, as a bucket number (`bits` is 1 or more).
    fn top_bits(self, bits: u32) -> usize;
}

impl Key for u64 {
    fn top_bits(self, bits: u32) -> usize {
        (self >> (64 - bits)) as usize
    }
}

impl Key for u128 {
    fn top_bits(self, bits: u32) -> usize {
        (self >> (128 - bits)) as usize
    }
}

/// Keys per bucket, on average, for uniformly spread keys.
const KEYS_PER_BUCKET: usize = 16;
/// Below this many keys a plain binary search is as fast.
const MIN_KEYS: usize = 256;

/// Where each bucket of a sorted slice starts; empty when not worth it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RadixIndex {
    bits: u32,
    starts: Vec<u32>,
}

impl RadixIndex {
    /// Indexes `sorted`, which must be sorted ascending.
    pub fn build<K: Key>(sorted: &[K]) -> Self {
        if sorted.len() < MIN_KEYS || sorted.len() > u32::MAX as usize {
            return Self::default();
        }
        let bits = (sorted.len() / KEYS_PER_BUCKET).ilog2().min(28);
        let mut starts = vec![0u32; (1 << bits) + 1];
        for key in sorted {
            starts[key.top_bits(bits) + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        Self { bits, starts }
    }

    /// The part of the indexed slice (of length `len`) where `key` can be.
    pub fn range<K: Key>(&self, key: K, len: usize) -> Range<usize> {
        if self.starts.is_empty() {
            return 0..len;
        }
        let bucket = key.top_bits(self.bits);
        self.starts[bucket] as usize..self.starts[bucket + 1] as usize
    }

    /// Heap bytes of the index.
    pub fn memory_bytes(&self) -> usize {
        self.starts.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_the_keys() {
        let keys: Vec<u64> = (0..10_000u64)
            .map(|i| i.wrapping_mul(0x9E3779B97F4A7C15))
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        let index = RadixIndex::build(&sorted);
        assert!(index.memory_bytes() <= sorted.len() / 4 + 8);
        for k in keys {
            let r = index.range(k, sorted.len());
            assert!(sorted[r].binary_search(&k).is_ok());
        }
        assert_eq!(RadixIndex::build(&sorted[..10]).range(5u64, 10), 0..10);
    }
}
