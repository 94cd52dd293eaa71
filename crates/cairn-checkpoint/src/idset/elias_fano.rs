//! Sorted, distinct 64-bit keys in Elias–Fano form, in chunks of 65,536
//! keys.
//!
//! A chunk keeps its first key; every key's distance `d` from it is split
//! into its `low_bits` low bits, stored packed, and the rest (`d >>
//! low_bits`, its *bucket*), stored in unary: one set bit per key, one clear
//! bit closing each bucket. With `low_bits` = ⌊log2(span / keys)⌋ a key costs
//! `low_bits` plus 2–3 bits: 4.9 bytes for 100M random 64-bit keys, against 8
//! in a sorted array, and less where keys are closer together (each chunk
//! picks its own `low_bits`, so dense and sparse stretches of the key space
//! each pay their own density).
//!
//! A lookup binary-searches the chunks' first keys (a few KiB, in cache),
//! jumps to the start of every 256th bucket (kept as samples, 0.02 bytes a
//! key), scans a few words of the unary part for its bucket, and compares
//! the bucket's low bits: 3–4 cache misses, as many as a radix-indexed
//! sorted array.

use super::keys::Keys;
use super::wire::{Reader, Writer, corrupt};
use crate::error::Result;

/// Keys per chunk (the last chunk may hold fewer).
pub(crate) const CHUNK_KEYS: usize = 1 << 16;
/// Buckets between two samples of a bucket's start.
const SAMPLE_EVERY: u64 = 256;

/// Where one chunk's parts lie.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Chunk {
    first: u64,
    count: u32,
    low_bits: u32,
    /// Buckets of the unary part: `(last - first) >> low_bits` plus one.
    buckets: u32,
    /// Word offset of the unary part in `words`.
    upper: usize,
    /// Word offset of the packed low bits in `words`.
    lower: usize,
    /// Index of the chunk's first sample in `samples`.
    samples: usize,
}

impl Chunk {
    /// Bits of the unary part: one per key and one per bucket; the last is
    /// always clear.
    fn upper_bits(&self) -> usize {
        self.count as usize + self.buckets as usize
    }

    fn low_mask(&self) -> u64 {
        if self.low_bits == 0 {
            0
        } else {
            u64::MAX >> (64 - self.low_bits)
        }
    }

    /// The low bits of key `j` of the chunk.
    fn low(&self, words: &[u64], j: usize) -> u64 {
        if self.low_bits == 0 {
            return 0;
        }
        let bit = j * self.low_bits as usize;
        let (word, shift) = (self.lower + bit / 64, bit % 64);
        let mut value = words[word] >> shift;
        if shift + self.low_bits as usize > 64 {
            value |= words[word + 1] << (64 - shift);
        }
        value & self.low_mask()
    }
}

/// Sorted, distinct keys in Elias–Fano form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EliasFano {
    /// Each chunk's first key, for the binary search.
    firsts: Vec<u64>,
    chunks: Vec<Chunk>,
    /// Every chunk's unary part, then its low bits.
    words: Keys<u64>,
    /// Bit positions, in a chunk's unary part, where buckets 0, 256, 512...
    /// start; rebuilt (not stored) when the set is read from bytes.
    samples: Vec<u32>,
    len: usize,
}

impl EliasFano {
    /// Encodes `keys`, which must be sorted and distinct, reusing their
    /// memory: each chunk's encoding is written over keys already encoded, so
    /// building needs the keys plus one chunk, not the keys plus the result.
    pub(crate) fn from_sorted(mut keys: Vec<u64>) -> Self {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let len = keys.len();
        let mut set = EliasFano {
            len,
            ..Self::default()
        };
        let mut scratch = Vec::new();
        let mut written = 0;
        for start in (0..len).step_by(CHUNK_KEYS) {
            let end = (start + CHUNK_KEYS).min(len);
            scratch.clear();
            let chunk = append_chunk(&keys[start..end], written, &mut scratch, &mut set.samples);
            let after = written + scratch.len();
            // A full chunk encodes in fewer words than it has keys (at most
            // 47 low bits and 3 unary bits a key), so only the last chunk can
            // reach past its own keys, and nothing follows it.
            assert!(
                after <= end || end == len,
                "chunk encoding larger than its keys"
            );
            if after > keys.len() {
                keys.resize(after, 0);
            }
            keys[written..after].copy_from_slice(&scratch);
            written = after;
            set.firsts.push(chunk.first);
            set.chunks.push(chunk);
        }
        keys.truncate(written);
        keys.shrink_to_fit();
        set.words = keys.into();
        set.samples.shrink_to_fit();
        set.firsts.shrink_to_fit();
        set.chunks.shrink_to_fit();
        set
    }

    /// Encodes `keys`, which must be sorted and distinct, into memory of
    /// exactly the encoded size, taken once: fresh zeroed pages, so the
    /// chunks are written straight into them, with no copy and no
    /// clearing pass.
    pub(crate) fn from_sorted_slice(keys: &[u64]) -> Self {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let sizes: Vec<usize> = keys
            .chunks(CHUNK_KEYS)
            .map(|chunk| {
                let (upper, lower) = chunk_words(chunk);
                upper + lower
            })
            .collect();
        // vec! of zeros asks the allocator for zeroed memory: large
        // blocks come from the system already zero.
        let mut words = vec![0u64; sizes.iter().sum()];
        let mut set = EliasFano {
            len: keys.len(),
            ..Self::default()
        };
        set.chunks.reserve_exact(sizes.len());
        set.firsts.reserve_exact(sizes.len());
        let mut base = 0;
        for (chunk_keys, size) in keys.chunks(CHUNK_KEYS).zip(sizes) {
            let out = &mut words[base..base + size];
            let chunk = encode_chunk(chunk_keys, base, out, &mut set.samples);
            set.firsts.push(chunk.first);
            set.chunks.push(chunk);
            base += size;
        }
        set.samples.shrink_to_fit();
        set.words = words.into();
        set
    }

    /// Whether `key` is in the set.
    pub(crate) fn contains(&self, key: u64) -> bool {
        let mut answer = [false];
        self.contains_each(&[key], &mut answer);
        answer[0]
    }

    /// Sets `answers[i]` to whether `keys[i]` is in the set.
    pub(crate) fn contains_each(&self, keys: &[u64], answers: &mut [bool]) {
        answers.fill(false);
        self.find_each(keys, |i, _| answers[i] = true);
    }

    /// Calls `found(i, rank)` for each `keys[i]` in the set, `rank` being
    /// how many keys of the set are smaller (where a value kept beside each
    /// key lies).
    ///
    /// Keys are looked up in groups, one step of every key of a group at a
    /// time (find the chunk and sample, read the sample, find the bucket,
    /// compare): the steps' memory reads, each a likely cache miss on a big
    /// set, are then independent of each other and overlap, where one
    /// lookup after another would wait for each miss in turn.
    pub(crate) fn find_each(&self, keys: &[u64], mut found: impl FnMut(usize, usize)) {
        const GROUP: usize = 16;
        let words = self.words.as_slice();
        for (group, keys) in keys.chunks(GROUP).enumerate() {
            let mut steps = [Lookup::default(); GROUP];
            let steps = &mut steps[..keys.len()];
            for (step, &key) in steps.iter_mut().zip(keys) {
                *step = self.locate(key);
                if step.live {
                    prefetch(&self.samples[step.sample]);
                }
            }
            for step in steps.iter_mut().filter(|s| s.live) {
                step.pos = self.samples[step.sample] as usize;
                prefetch(&words[self.chunks[step.chunk].upper + step.pos / 64]);
            }
            for step in steps.iter_mut().filter(|s| s.live) {
                let chunk = &self.chunks[step.chunk];
                let upper = &words[chunk.upper..chunk.lower];
                step.pos = skip_zeros(upper, step.pos, (step.bucket % SAMPLE_EVERY) as u32);
                let j = step.pos - step.bucket as usize;
                let low_word = chunk.lower + j * chunk.low_bits as usize / 64;
                prefetch(&words[low_word.min(words.len() - 1)]);
            }
            for (i, step) in steps.iter().enumerate() {
                if let Some(j) = step.live.then(|| self.finish(step, words)).flatten() {
                    // Every chunk but the last is full.
                    found(group * GROUP + i, step.chunk * CHUNK_KEYS + j);
                }
            }
        }
    }

    /// The first step of a lookup: the chunk, the bucket and its sample.
    fn locate(&self, key: u64) -> Lookup {
        let after = self.firsts.partition_point(|&first| first <= key);
        let Some(c) = after.checked_sub(1) else {
            return Lookup::default();
        };
        let chunk = &self.chunks[c];
        let distance = key - chunk.first;
        let bucket = distance >> chunk.low_bits;
        if bucket >= u64::from(chunk.buckets) {
            return Lookup::default();
        }
        Lookup {
            live: true,
            chunk: c,
            low: distance & chunk.low_mask(),
            bucket,
            sample: chunk.samples + (bucket / SAMPLE_EVERY) as usize,
            pos: 0,
        }
    }

    /// The last step: compare the low bits of the bucket's keys, which
    /// start at bit `step.pos` of the unary part; the key's index in its
    /// chunk if found.
    fn finish(&self, step: &Lookup, words: &[u64]) -> Option<usize> {
        let chunk = &self.chunks[step.chunk];
        let upper = &words[chunk.upper..chunk.lower];
        // Keys before the bucket: the bits before it, less its clear bits.
        let mut j = step.pos - step.bucket as usize;
        let mut pos = step.pos;
        while upper[pos / 64] >> (pos % 64) & 1 == 1 {
            let candidate = chunk.low(words, j);
            if candidate >= step.low {
                return (candidate == step.low).then_some(j);
            }
            pos += 1;
            j += 1;
        }
        None
    }

    /// Number of keys.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes this process holds for the set (shared words: none).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.words.owned_bytes()
            + self.firsts.capacity() * 8
            + self.chunks.capacity() * std::mem::size_of::<Chunk>()
            + self.samples.capacity() * 4
    }

    /// Calls `f(j, bucket, distance)` for every key of `chunk`, in order:
    /// its index in the chunk, its bucket and its distance from the chunk's
    /// first key (what decoding checks with).
    fn for_each_in_chunk(chunk: &Chunk, words: &[u64], mut f: impl FnMut(usize, u64, u64)) {
        let upper = &words[chunk.upper..chunk.lower];
        let mut j = 0;
        for (w, &word) in upper.iter().enumerate() {
            let mut ones = word;
            while ones != 0 {
                let pos = w * 64 + ones.trailing_zeros() as usize;
                ones &= ones - 1;
                let bucket = (pos - j) as u64;
                f(j, bucket, (bucket << chunk.low_bits) | chunk.low(words, j));
                j += 1;
            }
        }
    }

    /// The keys, in order.
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len);
        for c in 0..self.chunk_count() {
            self.append_chunk(c, &mut out);
        }
        out
    }

    /// Number of chunks (of [`CHUNK_KEYS`] keys, the last maybe fewer).
    #[cfg(test)]
    pub(crate) fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Each chunk's first key, in order.
    pub(crate) fn chunk_firsts(&self) -> &[u64] {
        &self.firsts
    }

    /// Appends the keys of chunk `c` to `out`, in order.
    pub(crate) fn append_chunk(&self, c: usize, out: &mut Vec<u64>) {
        let chunk = &self.chunks[c];
        out.reserve(chunk.count as usize);
        Self::for_each_in_chunk(chunk, self.words.as_slice(), |_, _, d| {
            out.push(chunk.first + d)
        });
    }
}

/// Builds an [`EliasFano`] from sorted, distinct keys that arrive in order,
/// a chunk at a time: it holds the encoded set and one chunk of keys,
/// never the keys themselves.
#[derive(Debug, Default)]
pub(crate) struct EliasFanoWriter {
    set: EliasFano,
    words: Vec<u64>,
    pending: Vec<u64>,
    /// One chunk's encoding, made in this small zeroed vector (which stays
    /// in the caches) and copied to `words`: the set's words are then
    /// written once, where zeroing them first wrote them twice.
    encoded: Vec<u64>,
}

impl EliasFanoWriter {
    /// Adds `keys`, sorted, distinct and larger than every key added before.
    pub(crate) fn push_sorted(&mut self, mut keys: &[u64]) {
        while !keys.is_empty() {
            let room = CHUNK_KEYS - self.pending.len();
            let (now, rest) = keys.split_at(room.min(keys.len()));
            debug_assert!(
                self.pending.last().is_none_or(|&last| last < now[0]),
                "keys arrive in order"
            );
            self.pending.extend_from_slice(now);
            if self.pending.len() == CHUNK_KEYS {
                self.flush();
            }
            keys = rest;
        }
    }

    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let base = self.words.len();
        self.encoded.clear();
        let chunk = append_chunk(
            &self.pending,
            base,
            &mut self.encoded,
            &mut self.set.samples,
        );
        self.words.extend_from_slice(&self.encoded);
        self.set.len += self.pending.len();
        self.set.firsts.push(chunk.first);
        self.set.chunks.push(chunk);
        self.pending.clear();
    }

    /// The set of every key pushed.
    pub(crate) fn finish(mut self) -> EliasFano {
        self.flush();
        let mut set = self.set;
        self.words.shrink_to_fit();
        set.words = self.words.into();
        set.samples.shrink_to_fit();
        set.firsts.shrink_to_fit();
        set.chunks.shrink_to_fit();
        set
    }
}

/// One key's lookup between its steps ([`EliasFano::contains_each`]).
#[derive(Debug, Clone, Copy, Default)]
struct Lookup {
    /// Whether the key may be in the set (false: answered no already).
    live: bool,
    chunk: usize,
    /// The key's low bits and bucket in its chunk.
    low: u64,
    bucket: u64,
    /// Index of the bucket's sample in `samples`.
    sample: usize,
    /// Bit position in the unary part: the sample's, then the bucket's.
    pos: usize,
}

/// Asks the CPU to bring `value`'s cache line in, without waiting for it.
#[inline(always)]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (value as *const T).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Position just after the `n`-th clear bit at or after `pos` (`pos` itself
/// when `n` is 0). The clear bit must exist.
fn skip_zeros(upper: &[u64], pos: usize, n: u32) -> usize {
    if n == 0 {
        return pos;
    }
    let mut remaining = n;
    let mut w = pos / 64;
    let mut zeros = !upper[w] & (u64::MAX << (pos % 64));
    loop {
        let here = zeros.count_ones();
        if here >= remaining {
            return w * 64 + select_in_word(zeros, remaining - 1) as usize + 1;
        }
        remaining -= here;
        w += 1;
        zeros = !upper[w];
    }
}

/// Position of the set bit of `word` with `rank` set bits below it.
fn select_in_word(word: u64, rank: u32) -> u32 {
    let mut rank = rank;
    let mut shift = 0;
    loop {
        let byte = (word >> shift) & 0xFF;
        let ones = byte.count_ones();
        if rank < ones {
            let mut byte = byte;
            for _ in 0..rank {
                byte &= byte - 1;
            }
            return shift + byte.trailing_zeros();
        }
        rank -= ones;
        shift += 8;
    }
}

/// Writes a chunk's samples (where buckets 0, 256, 512... start in its
/// unary part) as its keys go by in order: the encoder and the decoder's
/// check both use it, so the two cannot disagree.
struct SampleWriter<'a> {
    samples: &'a mut Vec<u32>,
    next: u64,
}

impl<'a> SampleWriter<'a> {
    fn new(samples: &'a mut Vec<u32>) -> Self {
        Self { samples, next: 0 }
    }

    /// Key `j` of the chunk lies in `bucket`. Bucket b starts after its b
    /// clear bits and the keys of earlier buckets: the first `j` keys, for
    /// every b up to this key's bucket.
    fn key(&mut self, j: usize, bucket: u64) {
        while self.next <= bucket {
            self.samples.push((self.next as usize + j) as u32);
            self.next += SAMPLE_EVERY;
        }
    }

    /// The chunk's `count` keys are done; the buckets after the last key's
    /// start after all of them.
    fn finish(mut self, count: usize, buckets: u64) {
        while self.next < buckets {
            self.samples.push((self.next as usize + count) as u32);
            self.next += SAMPLE_EVERY;
        }
    }
}

/// Words of the unary part and of the low bits of the chunk of sorted,
/// distinct `keys` (one or more).
fn chunk_words(keys: &[u64]) -> (usize, usize) {
    let count = keys.len();
    let span = keys[count - 1] - keys[0];
    let low_bits = (span / count as u64).checked_ilog2().unwrap_or(0);
    let buckets = (span >> low_bits) + 1;
    (
        (count + buckets as usize).div_ceil(64),
        (count * low_bits as usize).div_ceil(64),
    )
}

/// Encodes one chunk of sorted, distinct `keys` at the end of `words`,
/// grown by the chunk's size (`base` is where the chunk lies in the set's
/// words), appending its samples to `samples`.
fn append_chunk(keys: &[u64], base: usize, words: &mut Vec<u64>, samples: &mut Vec<u32>) -> Chunk {
    let (upper, lower) = chunk_words(keys);
    let start = words.len();
    words.resize(start + upper + lower, 0);
    encode_chunk(keys, base, &mut words[start..], samples)
}

/// Encodes one chunk of sorted, distinct `keys` into `out`, zeroed words of
/// exactly [`chunk_words`]' size (its unary part then its low bits; `base`
/// is where `out` lies in the set's words), appending its samples to
/// `samples`.
fn encode_chunk(keys: &[u64], base: usize, out: &mut [u64], samples: &mut Vec<u32>) -> Chunk {
    let first = keys[0];
    let count = keys.len();
    let span = keys[count - 1] - first;
    let low_bits = (span / count as u64).checked_ilog2().unwrap_or(0);
    // span >> low_bits < 2 * count, so buckets fit in a u32.
    let buckets = (span >> low_bits) + 1;
    let (upper_words, lower_words) = chunk_words(keys);
    assert_eq!(out.len(), upper_words + lower_words, "a chunk's words");
    debug_assert!(out.iter().all(|&w| w == 0), "a chunk is encoded into zeros");
    let chunk = Chunk {
        first,
        count: count as u32,
        low_bits,
        buckets: buckets as u32,
        upper: base,
        lower: base + upper_words,
        samples: samples.len(),
    };
    let mask = chunk.low_mask();
    let mut sampler = SampleWriter::new(samples);
    for (j, &key) in keys.iter().enumerate() {
        let distance = key - first;
        let bucket = distance >> low_bits;
        sampler.key(j, bucket);
        let pos = bucket as usize + j;
        out[pos / 64] |= 1 << (pos % 64);
        if low_bits > 0 {
            let bit = j * low_bits as usize;
            let (word, shift) = (upper_words + bit / 64, bit % 64);
            let low = distance & mask;
            out[word] |= low << shift;
            if shift + low_bits as usize > 64 {
                out[word + 1] |= low >> (64 - shift);
            }
        }
    }
    sampler.finish(count, buckets);
    chunk
}

impl EliasFano {
    /// Writes the chunks' shapes and the words (samples are rebuilt on
    /// reading).
    pub(crate) fn encode(&self, w: &mut Writer<'_>) {
        w.count(self.chunks.len());
        for chunk in &self.chunks {
            w.u64(chunk.first);
            w.u64(u64::from(chunk.count));
            w.u64(u64::from(chunk.low_bits));
            w.u64(u64::from(chunk.buckets));
        }
        let words = self.words.as_slice();
        w.count(words.len());
        w.pad();
        w.words(words, u64::to_le);
    }

    /// Reads what [`EliasFano::encode`] wrote, decoding every key to check
    /// that they are sorted and distinct and that each chunk's parts are
    /// where its shape says: damaged bytes are an error, never a wrong answer.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let mut set = EliasFano::default();
        let chunks = r.count(32)?;
        let mut offset = 0usize;
        for _ in 0..chunks {
            let (first, count, low_bits, buckets) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
            let shape_ok = (1..=CHUNK_KEYS as u64).contains(&count)
                && low_bits < 64
                && (1..=2 * count).contains(&buckets)
                && ((buckets - 1) << low_bits) >> low_bits == buckets - 1;
            if !shape_ok {
                return Err(corrupt("a chunk of its keys has an impossible shape"));
            }
            let (count, buckets) = (count as usize, buckets as usize);
            let upper_words = (count + buckets).div_ceil(64);
            let lower_words = (count * low_bits as usize).div_ceil(64);
            set.firsts.push(first);
            set.chunks.push(Chunk {
                first,
                count: count as u32,
                low_bits: low_bits as u32,
                buckets: buckets as u32,
                upper: offset,
                lower: offset + upper_words,
                samples: 0,
            });
            offset += upper_words + lower_words;
            set.len += count;
        }
        if set
            .chunks
            .iter()
            .rev()
            .skip(1)
            .any(|c| c.count as usize != CHUNK_KEYS)
        {
            return Err(corrupt(
                "a chunk of its keys other than the last is not full",
            ));
        }
        let n = r.count(8)?;
        if n != offset {
            return Err(corrupt("its key chunks do not fill its words"));
        }
        set.words = r.keys(n, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))?;
        set.check_and_sample()?;
        Ok(set)
    }

    /// Decodes every chunk: keys strictly increasing (across chunks too),
    /// each chunk's first distance 0, its unary part holding exactly its
    /// keys with its last bit clear; rebuilds the samples on the way.
    fn check_and_sample(&mut self) -> Result<()> {
        let words = self.words.as_slice();
        let mut previous: Option<u64> = None;
        for chunk in &mut self.chunks {
            chunk.samples = self.samples.len();
            let upper = &words[chunk.upper..chunk.lower];
            let ones: usize = upper.iter().map(|w| w.count_ones() as usize).sum();
            let last = chunk.upper_bits() - 1;
            if ones != chunk.count as usize || upper[last / 64] >> (last % 64) != 0 {
                return Err(corrupt("a chunk's unary part does not match its count"));
            }
            let mut ok = true;
            let mut sampler = SampleWriter::new(&mut self.samples);
            Self::for_each_in_chunk(chunk, words, |j, bucket, distance| {
                sampler.key(j, bucket);
                let key = chunk.first.checked_add(distance);
                ok &=
                    (j > 0 || distance == 0) && key.is_some_and(|k| previous.is_none_or(|p| p < k));
                previous = key;
            });
            sampler.finish(chunk.count as usize, u64::from(chunk.buckets));
            if !ok {
                return Err(corrupt("its keys are not sorted and distinct"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idset::tests::mix;

    fn sorted(mut keys: Vec<u64>) -> Vec<u64> {
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    #[test]
    fn finds_every_key_and_nothing_else() {
        let shapes = [
            sorted((0..200_000).map(mix).collect()),
            (0..150_000u64).map(|i| i * 3).collect(),
            vec![0, u64::MAX],
            vec![7],
            sorted((0..70_000).map(|i| mix(i) >> 40).collect()),
            (u64::MAX - 70_000..=u64::MAX).collect(),
        ];
        for keys in shapes {
            let set = EliasFano::from_sorted(keys.clone());
            assert_eq!(set.len(), keys.len());
            assert_eq!(set.to_vec(), keys);
            for &k in &keys {
                assert!(set.contains(k), "{k}");
                for near in [k.wrapping_add(1), k.wrapping_sub(1)] {
                    assert_eq!(set.contains(near), keys.binary_search(&near).is_ok());
                }
            }
        }
        assert!(!EliasFano::from_sorted(vec![]).contains(0));
    }

    #[test]
    fn the_writer_builds_what_from_sorted_builds() {
        for n in [0, 1, CHUNK_KEYS - 1, CHUNK_KEYS, 3 * CHUNK_KEYS + 17] {
            let keys = sorted((0..n as u64).map(mix).collect());
            // Pushed in slices of drawn lengths, across chunk boundaries.
            let mut writer = EliasFanoWriter::default();
            let mut rest = &keys[..];
            let mut step = 1;
            while !rest.is_empty() {
                let (now, later) = rest.split_at(step.min(rest.len()));
                writer.push_sorted(now);
                rest = later;
                step = step * 7 % 100_003 + 1;
            }
            let written = writer.finish();
            assert_eq!(written, EliasFano::from_sorted(keys.clone()), "{n} keys");
            let mut decoded = Vec::new();
            (0..written.chunk_count()).for_each(|c| written.append_chunk(c, &mut decoded));
            assert_eq!(decoded, keys);
        }
    }

    #[test]
    fn random_keys_cost_about_two_bits_above_log_of_the_gap() {
        // 2M random keys: about 2 + log2(2^64 / n) bits a key, 5.6 bytes
        // here (100M keys measure 4.9 bytes in idset_bench).
        let n = 2_000_000;
        let keys = sorted((0..n).map(mix).collect());
        let set = EliasFano::from_sorted(keys.clone());
        let bits_per_key = set.memory_bytes() as f64 * 8.0 / keys.len() as f64;
        let bound = 2.5 + (u64::MAX as f64 / n as f64).log2();
        assert!(
            bits_per_key < bound,
            "{bits_per_key} bits a key, bound {bound}"
        );
        assert!(set.contains(keys[1_234_567]) && !set.contains(keys[1_234_567] + 1));
    }

    #[test]
    fn ranks_count_the_smaller_keys() {
        let keys = sorted((0..150_000).map(mix).collect());
        let set = EliasFano::from_sorted(keys.clone());
        let probes: Vec<u64> = keys.iter().step_by(7).flat_map(|&k| [k, k + 1]).collect();
        let mut ranks = vec![None; probes.len()];
        set.find_each(&probes, |i, rank| ranks[i] = Some(rank));
        for (probe, rank) in probes.iter().zip(ranks) {
            assert_eq!(rank, keys.binary_search(probe).ok(), "{probe}");
        }
    }

    #[test]
    fn select_in_word_finds_each_set_bit() {
        let word = 0b1011_0000_0000_0001_1000_0000_0000_0000_0000_0000_0000_0000_0000_0001_0101u64;
        let positions: Vec<u32> = (0..64).filter(|b| word >> b & 1 == 1).collect();
        for (rank, &pos) in positions.iter().enumerate() {
            assert_eq!(select_in_word(word, rank as u32), pos);
        }
    }
}
