//! Ray Data 2.60's `row_hash` IDs (`read_parquet(include_row_hash=True)`):
//! the row at position `p` of a file whose path seeds `seed` has the ID
//! `splitmix64_finalizer(seed + p)`. The seed (the first 8 bytes of the
//! path's MD5, little-endian) is computed on the Python side, beside Ray's
//! own code; here the IDs of a run of rows are derived without reading
//! them, so a row group whose every row is committed need not be read.

use cairn_checkpoint::IdSet;

/// Rows whose IDs are looked up at once: enough to overlap the set's memory
/// reads, small enough to stay in cache.
const SLICE: u64 = 1 << 14;

/// The `row_hash` of the row at `position` of a file seeded `seed`: the
/// splitmix64 finalizer of `seed + position` (wrapping), as Ray 2.60's
/// `_compute_row_hashes` computes it with NumPy.
pub(crate) fn row_hash(seed: u64, position: u64) -> u64 {
    let mut k = seed.wrapping_add(position);
    k ^= k >> 30;
    k = k.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    k ^= k >> 27;
    k = k.wrapping_mul(0x94D0_49BB_1331_11EB);
    k ^ (k >> 31)
}

/// The keys a question is about: `low <= key < high` (`high` None: no
/// upper end). A shard of a set answers for its own range only.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KeyWindow {
    pub(crate) low: u64,
    pub(crate) high: Option<u64>,
}

impl KeyWindow {
    fn holds(self, key: u64) -> bool {
        key >= self.low && self.high.is_none_or(|high| key < high)
    }
}

/// Whether the rows `first_row .. first_row + rows` of a file seeded `seed`
/// all have committed `row_hash` IDs, of those whose IDs lie in `window`.
/// Stops at the first row that is not committed; false for a set of string
/// IDs; true for no rows.
pub(crate) fn all_row_hashes_committed(
    set: &IdSet,
    seed: u64,
    first_row: u64,
    rows: u64,
    window: KeyWindow,
) -> bool {
    let end = first_row.saturating_add(rows);
    match set {
        IdSet::Int(_) => {}
        // No ID is committed: covered only when none is asked about.
        IdSet::Empty => return !(first_row..end).any(|p| window.holds(row_hash(seed, p))),
        IdSet::Str(_) => return rows == 0,
    }
    let mut answers = vec![false; SLICE.min(rows) as usize];
    let mut keys = Vec::with_capacity(answers.len());
    let mut start = first_row;
    while start < end {
        let len = SLICE.min(end - start);
        keys.clear();
        keys.extend(
            (start..start + len)
                .map(|p| row_hash(seed, p))
                .filter(|&key| window.holds(key)),
        );
        let answers = &mut answers[..keys.len()];
        set.contains_keys(&keys, answers);
        if answers.iter().any(|committed| !committed) {
            return false;
        }
        start += len;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::UInt64Array;
    use cairn_checkpoint::{IdSetBuilder, StringMode};

    /// The seed of a path: the first 8 bytes of its MD5, little-endian
    /// (these were computed with Python's `hashlib`).
    const DATA_IN_SEED: u64 = u64::from_le_bytes([0xa2, 0xea, 0xbd, 0xb2, 0xd3, 0xbc, 0x29, 0x49]);

    #[test]
    fn row_hashes_match_rays_test_vectors() {
        // shared/reference/ray-checkpoint.md: `/data/in/part-0001.parquet`.
        let seed = DATA_IN_SEED;
        assert_eq!(row_hash(seed, 0), 13557062875977446881);
        assert_eq!(row_hash(seed, 1), 12385235595624141131);
        assert_eq!(row_hash(seed, 1_000_000), 7511492743751916236);
    }

    fn set_of(keys: impl IntoIterator<Item = u64>) -> IdSet {
        let mut builder = IdSetBuilder::new(StringMode::default());
        builder
            .push_array(&UInt64Array::from_iter_values(keys))
            .unwrap();
        builder.build()
    }

    const ALL: KeyWindow = KeyWindow { low: 0, high: None };

    #[test]
    fn a_run_is_covered_only_when_every_row_is_committed() {
        let seed = 42;
        let rows = 3 * SLICE + 5;
        let set = set_of((0..rows).map(|p| row_hash(seed, p)));
        assert!(all_row_hashes_committed(&set, seed, 0, rows, ALL));
        assert!(all_row_hashes_committed(
            &set,
            seed,
            SLICE - 3,
            SLICE + 7,
            ALL
        ));
        assert!(all_row_hashes_committed(&set, seed, 7, 0, ALL));
        assert!(!all_row_hashes_committed(&set, seed, 0, rows + 1, ALL));
        // Another seed whose rows lie past this file's (seeds are positions apart).
        assert!(!all_row_hashes_committed(&set, seed + rows, 0, 1, ALL));
        let holed = set_of(
            (0..rows)
                .filter(|&p| p != 2 * SLICE + 1)
                .map(|p| row_hash(seed, p)),
        );
        assert!(!all_row_hashes_committed(&holed, seed, 0, rows, ALL));
        assert!(all_row_hashes_committed(
            &holed,
            seed,
            0,
            2 * SLICE + 1,
            ALL
        ));
    }

    #[test]
    fn a_window_asks_only_about_the_ids_inside_it() {
        // A shard holding the row hashes below 2^63 of a file's rows.
        let seed = 7;
        let rows = 2 * SLICE + 11;
        let half = 1u64 << 63;
        let lower = set_of((0..rows).map(|p| row_hash(seed, p)).filter(|&k| k < half));
        let mine = KeyWindow {
            low: 0,
            high: Some(half),
        };
        let theirs = KeyWindow {
            low: half,
            high: None,
        };
        assert!(all_row_hashes_committed(&lower, seed, 0, rows, mine));
        assert!(!all_row_hashes_committed(&lower, seed, 0, rows, ALL));
        assert!(!all_row_hashes_committed(&lower, seed, 0, rows, theirs));
        // A missing row inside the window is seen; outside it, not.
        let p = (0..rows).find(|&p| row_hash(seed, p) < half).unwrap();
        let holed = set_of(
            (0..rows)
                .filter(|&q| q != p)
                .map(|q| row_hash(seed, q))
                .filter(|&k| k < half),
        );
        assert!(!all_row_hashes_committed(&holed, seed, 0, rows, mine));
        let upper_only = KeyWindow {
            low: half,
            high: None,
        };
        // A shard with no IDs: covered where none of the rows' IDs is its.
        let empty = IdSet::Empty;
        assert!(!all_row_hashes_committed(&empty, seed, 0, rows, upper_only));
        let nowhere = KeyWindow {
            low: 5,
            high: Some(5),
        };
        assert!(all_row_hashes_committed(&empty, seed, 0, rows, nowhere));
        assert!(all_row_hashes_committed(&lower, seed, p, 1, mine));
    }
}
