//! [`IdSet::to_bytes`] and [`IdSet::from_bytes`]: one committed-ID set
//! shipped whole to another process (Ray's filter actors receive it through
//! the object store), without rebuilding it from the ID files there.
//!
//! Layout, all integers little-endian: the magic `CAIRNIDS`, a format
//! version byte, a kind byte, then the kind's parts, each a `u64` count
//! followed by its items; the big arrays (integer singles, string
//! fingerprints) start at a multiple of 16 bytes from the start, so
//! [`IdSet::from_shared`] can use them in place. Radix indexes are not
//! stored; they are rebuilt in one pass. Decoding checks every count against
//! the bytes left and that keys are sorted and distinct (membership relies
//! on it), so damaged bytes are an error, never a wrong answer.

use bytes::Bytes;

use super::IdSet;
use super::ints::IntIdSet;
use super::strings::StringIdSet;
use super::wire::{Reader, Writer, corrupt};
use crate::error::Result;

const MAGIC: &[u8; 8] = b"CAIRNIDS";
/// Version 2: integer singles in Elias–Fano form (version 1 had them as a
/// sorted array); string fingerprints are XXH3-128 of the ID's bytes.
const VERSION: u8 = 2;

const KIND_EMPTY: u8 = 0;
const KIND_INT: u8 = 1;
const KIND_FINGERPRINT: u8 = 2;
const KIND_EXACT: u8 = 3;

impl IdSet {
    /// The set as bytes for [`IdSet::from_bytes`] in another process.
    ///
    /// ```
    /// use arrow_array::StringArray;
    /// use cairn_checkpoint::{IdSet, IdSetBuilder, StringMode};
    /// let mut builder = IdSetBuilder::new(StringMode::default());
    /// builder.push_array(&StringArray::from(vec!["a", "b"])).unwrap();
    /// let set = builder.build();
    /// assert_eq!(IdSet::from_bytes(&set.to_bytes()).unwrap(), set);
    /// assert!(IdSet::from_bytes(b"not a set").is_err());
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::grow();
        self.encode(&mut w);
        w.into_bytes()
    }

    /// The length of [`IdSet::to_bytes`], without writing them.
    ///
    /// ```
    /// use arrow_array::Int64Array;
    /// use cairn_checkpoint::{IdSet, IdSetBuilder, StringMode};
    /// let mut builder = IdSetBuilder::new(StringMode::default());
    /// builder.push_array(&Int64Array::from(vec![5, 1 << 40])).unwrap();
    /// let set = builder.build();
    /// assert_eq!(set.encoded_len(), set.to_bytes().len());
    /// ```
    pub fn encoded_len(&self) -> usize {
        let mut w = Writer::count_only();
        self.encode(&mut w);
        w.len()
    }

    /// Writes [`IdSet::to_bytes`] into `out`, which must be
    /// [`IdSet::encoded_len`] long: into memory someone else allocated (a
    /// Python `bytes` object), with no vector of the bytes in between.
    ///
    /// ```
    /// use arrow_array::Int64Array;
    /// use cairn_checkpoint::{IdSet, IdSetBuilder, StringMode};
    /// let mut builder = IdSetBuilder::new(StringMode::default());
    /// builder.push_array(&Int64Array::from(vec![5, 1 << 40])).unwrap();
    /// let set = builder.build();
    /// let mut out = vec![0; set.encoded_len()];
    /// set.write_bytes(&mut out);
    /// assert_eq!(IdSet::from_bytes(&out).unwrap(), set);
    /// ```
    ///
    /// # Panics
    /// If `out` is not exactly [`IdSet::encoded_len`] bytes long.
    pub fn write_bytes(&self, out: &mut [u8]) {
        let expected = out.len();
        let mut w = Writer::fill(out);
        self.encode(&mut w);
        assert_eq!(w.len(), expected, "write_bytes needs encoded_len() bytes");
    }

    fn encode(&self, w: &mut Writer<'_>) {
        w.put(MAGIC);
        w.u8(VERSION);
        match self {
            IdSet::Empty => w.u8(KIND_EMPTY),
            IdSet::Int(set) => {
                w.u8(KIND_INT);
                set.encode(w);
            }
            IdSet::Str(set) => {
                w.u8(if set.is_exact() {
                    KIND_EXACT
                } else {
                    KIND_FINGERPRINT
                });
                set.encode(w);
            }
        }
    }

    /// The set [`IdSet::to_bytes`] wrote; bytes that are not one (damaged,
    /// truncated, another format version) are [`crate::Error::CorruptIdSet`].
    pub fn from_bytes(bytes: &[u8]) -> Result<IdSet> {
        decode(Reader::new(bytes))
    }

    /// [`IdSet::from_bytes`] without copying the big arrays: they are used
    /// where they lie in `bytes` (kept alive by the set) when aligned, so
    /// processes that map the same shared memory hold one copy between
    /// them. Checked as [`IdSet::from_bytes`] checks.
    ///
    /// ```
    /// use arrow_array::UInt64Array;
    /// use cairn_checkpoint::{IdSet, IdSetBuilder, StringMode};
    /// let mut builder = IdSetBuilder::new(StringMode::default());
    /// builder.push_array(&UInt64Array::from_iter_values((0..10_000u64).map(|i| i * 7919))).unwrap();
    /// let set = builder.build();
    /// let shared = IdSet::from_shared(cairn_checkpoint::bytes::Bytes::from(set.to_bytes())).unwrap();
    /// assert_eq!(shared, set);
    /// assert!(shared.memory_bytes() < set.memory_bytes() / 4, "the keys are not copied");
    /// ```
    pub fn from_shared(bytes: Bytes) -> Result<IdSet> {
        decode(Reader::shared(&bytes))
    }
}

fn decode(mut r: Reader<'_>) -> Result<IdSet> {
    if r.raw(MAGIC.len()).ok() != Some(MAGIC.as_slice()) {
        return Err(corrupt("it does not start with the ID-set magic bytes"));
    }
    let version = r.raw(1)?[0];
    if version != VERSION {
        return Err(corrupt(&format!(
            "format version {version}, this cairn reads version {VERSION}; use the same cairn version on the driver and the workers"
        )));
    }
    let set = match r.raw(1)?[0] {
        KIND_EMPTY => IdSet::Empty,
        KIND_INT => IdSet::Int(IntIdSet::decode(&mut r)?),
        KIND_FINGERPRINT => IdSet::Str(StringIdSet::decode(&mut r, false)?),
        KIND_EXACT => IdSet::Str(StringIdSet::decode(&mut r, true)?),
        other => return Err(corrupt(&format!("unknown kind {other}"))),
    };
    if !r.at_end() {
        return Err(corrupt("bytes follow the end of the set"));
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idset::{IdSetBuilder, StringMode};
    use arrow_array::{Int64Array, StringArray};

    fn ints(keys: Vec<i64>) -> IdSet {
        let mut b = IdSetBuilder::new(StringMode::default());
        b.push_array(&Int64Array::from(keys)).unwrap();
        b.build()
    }

    #[test]
    fn every_kind_round_trips() {
        let mut random = 7u64;
        let mut keys: Vec<i64> = (0..150_000)
            .map(|_| {
                random = random.wrapping_mul(6364136223846793005).wrapping_add(1);
                (random >> 1) as i64
            })
            .collect();
        keys.extend(0..200_000); // a run
        keys.extend((1_000_000..1_065_536).step_by(3)); // a bitmap block
        keys.extend([-1, i64::MIN]);
        let exact = {
            let mut b = IdSetBuilder::new(StringMode::Exact);
            b.push_array(&StringArray::from(vec!["x", "", "yz"]))
                .unwrap();
            b.build()
        };
        let fingerprints = {
            let mut b = IdSetBuilder::new(StringMode::Fingerprint);
            let ids: Vec<String> = (0..1000).map(|i| format!("doc-{i}")).collect();
            b.push_array(&StringArray::from(ids)).unwrap();
            b.build()
        };
        for set in [IdSet::Empty, ints(keys), ints(vec![]), exact, fingerprints] {
            let bytes = set.to_bytes();
            assert_eq!(IdSet::from_bytes(&bytes).unwrap(), set);
            assert_eq!(IdSet::from_shared(Bytes::from(bytes.clone())).unwrap(), set);
            // Misaligned shared bytes are copied, not misread.
            let mut shifted = vec![0u8];
            shifted.extend_from_slice(&bytes);
            let misaligned = Bytes::from(shifted).slice(1..);
            assert_eq!(IdSet::from_shared(misaligned).unwrap(), set);
        }
    }

    #[test]
    fn damaged_bytes_are_refused_not_misread() {
        let bytes = ints((0..1000).map(|i| i * 7).collect()).to_bytes();
        for cut in [0, 5, 9, 10, 17, bytes.len() - 1] {
            assert!(IdSet::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(IdSet::from_bytes(&extra).is_err());
        // A huge count is refused before any allocation.
        let mut huge = bytes[..10].to_vec();
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(IdSet::from_bytes(&huge).is_err());
        // Repeated singles would break lookups: refused. One chunk starting
        // at 9 whose two keys are both at distance 0 (9 twice).
        let mut w = Writer::grow();
        w.put(MAGIC);
        w.put(&[VERSION, KIND_INT]);
        w.u64(2); // len
        w.count(0); // ranges
        w.count(0); // bitmaps
        w.count(1); // chunks of singles
        for field in [9, 2, 0, 1] {
            w.u64(field); // first, count, low bits, buckets
        }
        w.count(1); // words
        w.pad();
        w.u64(0b011);
        let e = IdSet::from_bytes(&w.into_bytes()).unwrap_err().to_string();
        assert!(e.contains("sorted"), "{e}");
    }
}
