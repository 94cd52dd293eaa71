//! The IDs one run has taken, to refuse an ID seen twice (a resume could
//! otherwise skip the second copy as already written).

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::row_hash::splitmix64;

const SHARDS: usize = 16;

/// Keys are integers or XXH3-128 fingerprints: one multiply-fold mixes them well
/// enough, far faster than SipHash.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u128(&mut self, key: u128) {
        let folded = (key as u64) ^ ((key >> 64) as u64).rotate_left(29);
        self.0 = splitmix64(folded);
    }
}

type KeySet = HashSet<u128, BuildHasherDefault<KeyHasher>>;

/// Every ID taken so far in this run: a bitmap over the ID range when the
/// input's statistics give a dense integer range, otherwise a hash set
/// sharded to keep workers apart.
pub(crate) struct SeenIds {
    dense: Option<DenseIds>,
    shards: Vec<Mutex<KeySet>>,
    /// IDs held in the hash sets, and the most they may hold.
    hashed: AtomicU64,
    max_hashed: u64,
    /// Set once the cap is reached: later IDs are checked against the
    /// ones held, but no longer added.
    capped: AtomicBool,
}

/// Bytes a hash-set entry costs at worst (16-byte key, control byte, and a
/// table that has just doubled), for messages.
pub(crate) const HASHED_BYTES_PER_ID: u64 = 40;

/// One bit per integer of `[min, min + 64 × bits.len())`, set lock-free.
struct DenseIds {
    min: i64,
    bits: Vec<AtomicU64>,
}

/// The largest bitmap used: 1 GiB, i.e. 2^33 IDs in range.
const MAX_DENSE_BITS: u128 = 1 << 33;

impl SeenIds {
    /// `range`: the exact range of a signed integer ID column (from Parquet
    /// statistics); a bitmap is used when it costs at most 8 bytes per row.
    /// `max_hashed`: the most IDs the hash set holds (its memory cap).
    pub(crate) fn new(range: Option<(i64, i64)>, rows: Option<u64>, max_hashed: u64) -> Self {
        let dense = range.zip(rows).and_then(|((min, max), rows)| {
            let span = (max as i128 - min as i128 + 1) as u128;
            (span <= MAX_DENSE_BITS && span <= 64 * u128::from(rows.max(1))).then(|| DenseIds {
                min,
                bits: (0..span.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            })
        });
        Self {
            dense,
            shards: (0..SHARDS).map(|_| Mutex::new(KeySet::default())).collect(),
            hashed: AtomicU64::new(0),
            max_hashed,
            capped: AtomicBool::new(false),
        }
    }

    /// Adds the IDs of one batch; an ID already seen is an error naming it.
    pub(crate) fn insert(&self, ids: &ArrayRef, column: &str, label: &str) -> Result<()> {
        let keys = cairn_checkpoint::internals::id_keys(ids.as_ref())?;
        let duplicate = |row: usize| Error::DuplicateId {
            id: id_text(ids.as_ref(), row),
            column: column.to_string(),
            file: label.to_string(),
        };
        let mut per_shard: Vec<Vec<(u128, usize)>> = vec![Vec::new(); SHARDS];
        for (row, key) in keys.into_iter().enumerate() {
            if let (Some(dense), Some(key), true) =
                (&self.dense, key, ids.data_type().is_signed_integer())
            {
                let offset = (key as u64 as i64 as i128) - dense.min as i128;
                // Below the minimum (statistics that lied) the offset is
                // negative: `/` and `%` round toward zero there, which would
                // land on the bits of IDs above the minimum.
                if let Some(word) = (offset >= 0)
                    .then(|| usize::try_from(offset / 64).ok())
                    .flatten()
                    .and_then(|w| dense.bits.get(w))
                {
                    let mask = 1u64 << (offset % 64);
                    if word.fetch_or(mask, Ordering::Relaxed) & mask != 0 {
                        return Err(duplicate(row));
                    }
                    continue;
                }
            }
            if let Some(key) = key {
                let shard = (splitmix64(key as u64 ^ (key >> 64) as u64) >> 60) as usize % SHARDS;
                per_shard[shard].push((key, row));
            }
        }
        let capped = self.capped.load(Ordering::Relaxed);
        let mut added = 0;
        for (shard, keys) in per_shard.into_iter().enumerate() {
            if keys.is_empty() {
                continue;
            }
            let mut set = self.shards[shard].lock().expect("seen-ID lock");
            for (key, row) in keys {
                let seen_before = if capped {
                    set.contains(&key)
                } else {
                    added += 1;
                    !set.insert(key)
                };
                if seen_before {
                    return Err(duplicate(row));
                }
            }
        }
        if !capped && self.hashed.fetch_add(added, Ordering::Relaxed) + added >= self.max_hashed {
            self.stop_adding(column);
        }
        Ok(())
    }

    /// The cap is reached: say so once, then only probe.
    fn stop_adding(&self, column: &str) {
        if !self.capped.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the duplicate-ID check of column {column:?} holds {} IDs (about {} MiB), its cap: \
                 later IDs are checked against those but not against each other. IDs must be \
                 unique for a resume to be exact; raise the cap with --duplicate-check-max-ids \
                 (JobContext::duplicate_check_max_ids) if memory allows",
                self.hashed.load(Ordering::Relaxed),
                (self.hashed.load(Ordering::Relaxed) * HASHED_BYTES_PER_ID) >> 20
            );
        }
    }

    /// Whether the hash set reached its cap.
    #[cfg(test)]
    pub(crate) fn capped(&self) -> bool {
        self.capped.load(Ordering::Relaxed)
    }
}

/// One ID as text, for messages.
fn id_text(ids: &dyn Array, row: usize) -> String {
    match ids.data_type() {
        DataType::Int64 => ids.as_primitive::<Int64Type>().value(row).to_string(),
        DataType::Int32 => ids.as_primitive::<Int32Type>().value(row).to_string(),
        DataType::UInt64 => ids.as_primitive::<UInt64Type>().value(row).to_string(),
        DataType::UInt32 => ids.as_primitive::<UInt32Type>().value(row).to_string(),
        DataType::Utf8 => format!("{:?}", ids.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => format!("{:?}", ids.as_string::<i64>().value(row)),
        other => format!("(a {other} value at row {row})"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray};

    use super::*;

    #[test]
    fn dense_ranges_use_the_bitmap_and_still_catch_copies() {
        let seen = SeenIds::new(Some((-5, 100)), Some(106), u64::MAX);
        assert!(seen.dense.is_some());
        let first: ArrayRef = Arc::new(Int64Array::from(vec![-5, 0, 100]));
        seen.insert(&first, "uid", "a.parquet").unwrap();
        // Outside the range (statistics that lied): the hash set takes it.
        let outside: ArrayRef = Arc::new(Int64Array::from(vec![1000, 1]));
        seen.insert(&outside, "uid", "a.parquet").unwrap();
        let again: ArrayRef = Arc::new(Int64Array::from(vec![7, 100]));
        let err = seen.insert(&again, "uid", "b.parquet").unwrap_err();
        assert!(err.to_string().contains("duplicate ID 100"), "{err}");
        let again: ArrayRef = Arc::new(Int64Array::from(vec![1000]));
        assert!(seen.insert(&again, "uid", "c.parquet").is_err());
        assert!(
            SeenIds::new(Some((0, 1 << 40)), Some(10), u64::MAX)
                .dense
                .is_none()
        );
    }

    #[test]
    fn ids_just_below_the_statistics_minimum_are_neither_lost_nor_confused() {
        let seen = SeenIds::new(Some((100, 227)), Some(128), u64::MAX);
        assert!(seen.dense.is_some());
        // 99 must not take the bit of 100 + 63 (or any other).
        let below: ArrayRef = Arc::new(Int64Array::from(vec![99, 98, 36]));
        seen.insert(&below, "uid", "a.parquet").unwrap();
        let inside: ArrayRef = Arc::new(Int64Array::from(vec![100, 163, 164, 227]));
        seen.insert(&inside, "uid", "b.parquet").unwrap();
        let again: ArrayRef = Arc::new(Int64Array::from(vec![99]));
        let err = seen.insert(&again, "uid", "c.parquet").unwrap_err();
        assert!(err.to_string().contains("duplicate ID 99"), "{err}");
    }

    #[test]
    fn at_its_cap_the_hash_set_stops_growing_but_still_catches_copies_of_what_it_holds() {
        let seen = SeenIds::new(None, None, 4);
        let first: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3, 4]));
        seen.insert(&first, "uid", "a.parquet").unwrap();
        assert!(seen.capped());
        let later: ArrayRef = Arc::new(Int64Array::from(vec![5, 6]));
        seen.insert(&later, "uid", "b.parquet").unwrap();
        // Not held: a copy of 5 passes (the stated limit of the cap) ...
        seen.insert(&later.slice(0, 1), "uid", "c.parquet").unwrap();
        // ... a copy of a held ID does not.
        let copy: ArrayRef = Arc::new(Int64Array::from(vec![3]));
        assert!(seen.insert(&copy, "uid", "d.parquet").is_err());
        assert_eq!(
            seen.shards
                .iter()
                .map(|s| s.lock().unwrap().len())
                .sum::<usize>(),
            4
        );
    }

    #[test]
    fn a_second_copy_is_named() {
        let seen = SeenIds::new(None, None, u64::MAX);
        let first: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        seen.insert(&first, "uid", "a.parquet").unwrap();
        let again: ArrayRef = Arc::new(Int64Array::from(vec![4, 2]));
        let err = seen.insert(&again, "uid", "b.parquet").unwrap_err();
        assert!(
            matches!(err, Error::DuplicateId { ref id, ref file, .. } if id == "2" && file == "b.parquet")
        );
        let names: ArrayRef = Arc::new(StringArray::from(vec!["x", "x"]));
        assert!(
            seen.insert(&names, "name", "c.parquet")
                .unwrap_err()
                .to_string()
                .contains("\"x\"")
        );
    }
}
