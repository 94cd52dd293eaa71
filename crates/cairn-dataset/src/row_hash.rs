//! Ray Data's `row_hash`: a stable 64-bit ID for the row at position `p` of
//! the file at path string `s` (SplitMix64 finalizer over an MD5 seed), so a
//! resume knows the IDs of a file's rows from its path and row count alone.

use std::sync::Arc;

use arrow_array::{ArrayRef, UInt64Array};

/// The name of the column [`crate::Source`] adds with `include_row_hash`.
pub const ROW_HASH_COLUMN: &str = "row_hash";

/// The per-file seed: the first 8 bytes of MD5 of the path string, little-endian.
///
/// ```
/// let seed = cairn_dataset::row_hash_seed("/data/in/part-0001.parquet");
/// assert_eq!(cairn_dataset::row_hash(seed, 0), 13557062875977446881);
/// ```
pub fn row_hash_seed(path: &str) -> u64 {
    let digest = md5::compute(path.as_bytes());
    u64::from_le_bytes(digest.0[..8].try_into().expect("MD5 has 16 bytes"))
}

/// The hash of the row at `position` of the file whose seed is `seed`,
/// bit-identical to Ray Data 2.60's `include_row_hash=True`.
///
/// ```
/// let seed = cairn_dataset::row_hash_seed("my-bucket/input/part-0001.parquet");
/// assert_eq!(cairn_dataset::row_hash(seed, 1_000_000), 12895775054419180647);
/// ```
pub fn row_hash(seed: u64, position: u64) -> u64 {
    splitmix64(seed.wrapping_add(position))
}

/// SplitMix64's finalizer: a fast, well-mixing bijection of 64-bit values.
pub(crate) fn splitmix64(mut k: u64) -> u64 {
    k ^= k >> 30;
    k = k.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    k ^= k >> 27;
    k = k.wrapping_mul(0x94D0_49BB_1331_11EB);
    k ^ (k >> 31)
}

/// The `row_hash` column for rows `start..start + len` of a file.
///
/// ```
/// let seed = cairn_dataset::row_hash_seed("/data/in/part-0001.parquet");
/// let column = cairn_dataset::row_hash_column(seed, 1, 1);
/// assert_eq!(column.len(), 1);
/// ```
pub fn row_hash_column(seed: u64, start: u64, len: usize) -> ArrayRef {
    Arc::new(UInt64Array::from_iter_values(
        (start..start + len as u64).map(|p| row_hash(seed, p)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors of shared/reference/ray-checkpoint.md, checked there against Ray 2.60.
    #[test]
    fn matches_the_reference_vectors() {
        let local = row_hash_seed("/data/in/part-0001.parquet");
        assert_eq!(
            [0, 1, 1_000_000].map(|p| row_hash(local, p)),
            [
                13557062875977446881,
                12385235595624141131,
                7511492743751916236
            ]
        );
        let object = row_hash_seed("my-bucket/input/part-0001.parquet");
        assert_eq!(
            [0, 1, 1_000_000].map(|p| row_hash(object, p)),
            [
                2261133098256618890,
                14056423439569579267,
                12895775054419180647
            ]
        );
    }
}
