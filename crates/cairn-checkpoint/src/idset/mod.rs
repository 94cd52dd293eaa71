//! The set of committed IDs a resumed run filters against.
//!
//! - Integer IDs are kept exactly ([`IntIdSet`]): under 5 bytes per sparse
//!   ID at 100M random 64-bit IDs (Elias–Fano; at most 8), next to nothing
//!   for runs of consecutive IDs, 8 KiB per dense but gappy block of 65,536.
//!   The builder keeps runs as ranges while IDs arrive, so sequential IDs
//!   never sit in memory one by one.
//! - String and binary IDs are kept as 96-bit fingerprints by default (about
//!   9 bytes an ID), or exactly ([`StringIdSet`], [`StringMode`]).
//! - Membership is asked for a whole Arrow array at once and answered as a
//!   `BooleanArray` (true = committed); a null ID is never committed.
//! - Builders fill from Arrow arrays and merge, so committed files can be
//!   read in parallel and combined. Random integer IDs are sealed into
//!   compressed sorted runs every 64M keys and merged into the set at the
//!   end, so building 1B of them peaks near 1.3x the final set, not at 8
//!   bytes an ID.
//! - A set travels to another process as bytes ([`IdSet::to_bytes`],
//!   [`IdSet::from_bytes`]).

mod codec;
mod elias_fano;
mod int_keys;
mod ints;
mod keys;
mod sealed;
mod sort;
mod strings;
mod wire;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, BooleanArray, PrimitiveArray};
use arrow_schema::DataType;

use int_keys::IntKeys;
pub use ints::IntIdSet;
pub use strings::{StringIdSet, StringMode};

use crate::error::{Error, Result};
use strings::{fingerprint, split_fingerprint};

/// The committed IDs of a checkpoint.
///
/// ```
/// use arrow_array::{Int64Array, StringArray};
/// use cairn_checkpoint::{IdSet, IdSetBuilder, StringMode};
///
/// let mut builder = IdSetBuilder::new(StringMode::default());
/// builder.push_array(&Int64Array::from(vec![1, 2, 3, 10])).unwrap();
/// let set = builder.build();
/// let committed = set.contains_array(&Int64Array::from(vec![Some(3), Some(4), None])).unwrap();
/// assert_eq!(committed.iter().collect::<Vec<_>>(), [Some(true), Some(false), Some(false)]);
/// assert!(set.contains_array(&StringArray::from(vec!["3"])).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdSet {
    /// No committed IDs (a fresh checkpoint).
    Empty,
    /// Integer IDs.
    Int(IntIdSet),
    /// String or binary IDs.
    Str(StringIdSet),
}

/// Collects IDs from Arrow arrays, then builds an [`IdSet`].
#[derive(Debug, Default)]
pub struct IdSetBuilder {
    mode: StringMode,
    ints: IntKeys,
    fingerprint_high: Vec<u64>,
    fingerprint_low: Vec<u32>,
    exact_bytes: Vec<u8>,
    exact_spans: Vec<(u64, u32)>,
    kind: Option<Kind>,
}

/// The two kinds of ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    Str,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Int => "integer",
            Kind::Str => "string",
        }
    }

    pub(crate) fn of(data_type: &DataType) -> Result<Kind> {
        match data_type {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64 => Ok(Kind::Int),
            DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView => Ok(Kind::Str),
            other => Err(Error::UnsupportedIdType {
                data_type: other.clone(),
            }),
        }
    }
}

/// Calls `f` with the 64-bit key of every non-null integer in `array`, or
/// `None` for a null.
fn for_each_int_key(array: &dyn Array, mut f: impl FnMut(Option<u64>)) {
    fn each<T: ArrowPrimitiveType>(
        array: &PrimitiveArray<T>,
        to_key: impl Fn(T::Native) -> u64,
        f: &mut impl FnMut(Option<u64>),
    ) {
        for value in array.iter() {
            f(value.map(&to_key));
        }
    }
    match array.data_type() {
        DataType::Int8 => each(
            array.as_primitive::<Int8Type>(),
            |v| v as i64 as u64,
            &mut f,
        ),
        DataType::Int16 => each(
            array.as_primitive::<Int16Type>(),
            |v| v as i64 as u64,
            &mut f,
        ),
        DataType::Int32 => each(
            array.as_primitive::<Int32Type>(),
            |v| v as i64 as u64,
            &mut f,
        ),
        DataType::Int64 => each(array.as_primitive::<Int64Type>(), |v| v as u64, &mut f),
        DataType::UInt8 => each(array.as_primitive::<UInt8Type>(), u64::from, &mut f),
        DataType::UInt16 => each(array.as_primitive::<UInt16Type>(), u64::from, &mut f),
        DataType::UInt32 => each(array.as_primitive::<UInt32Type>(), u64::from, &mut f),
        DataType::UInt64 => each(array.as_primitive::<UInt64Type>(), |v| v, &mut f),
        _ => unreachable!("checked by Kind::of"),
    }
}

/// Most runs [`id_runs`] reports: past this, IDs are not in runs worth
/// reporting.
pub(crate) const MAX_RUNS: usize = 256;

/// The keys of `array` as at most [`MAX_RUNS`] runs `(first, last)` of
/// consecutive increasing 64-bit integers, in the order they come, when
/// its values are that and have no nulls: the ID file of a unit of
/// sequential IDs (one run per row group it read). Read in place, without
/// copying the values out.
pub(crate) fn id_runs(array: &dyn Array) -> Option<Vec<(u64, u64)>> {
    fn runs(values: impl Iterator<Item = u64>) -> Option<Vec<(u64, u64)>> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for value in values {
            match runs.last_mut() {
                Some(run) if run.1.checked_add(1) == Some(value) => run.1 = value,
                _ => {
                    if runs.len() == MAX_RUNS {
                        return None;
                    }
                    runs.push((value, value));
                }
            }
        }
        (!runs.is_empty()).then_some(runs)
    }
    if array.null_count() > 0 {
        return None;
    }
    match array.data_type() {
        DataType::Int64 => runs(
            array
                .as_primitive::<Int64Type>()
                .values()
                .iter()
                .map(|&v| v as u64),
        ),
        DataType::UInt64 => runs(array.as_primitive::<UInt64Type>().values().iter().copied()),
        _ => None,
    }
}

/// Calls `f` with the bytes of every non-null string or binary in `array`.
fn for_each_bytes<'a>(array: &'a dyn Array, mut f: impl FnMut(Option<&'a [u8]>)) {
    match array.data_type() {
        DataType::Utf8 => array
            .as_string::<i32>()
            .iter()
            .for_each(|v| f(v.map(str::as_bytes))),
        DataType::LargeUtf8 => array
            .as_string::<i64>()
            .iter()
            .for_each(|v| f(v.map(str::as_bytes))),
        DataType::Binary => array.as_binary::<i32>().iter().for_each(&mut f),
        DataType::LargeBinary => array.as_binary::<i64>().iter().for_each(&mut f),
        // pyarrow and Ray hand these over too (views into shared buffers).
        DataType::Utf8View => array
            .as_string_view()
            .iter()
            .for_each(|v| f(v.map(str::as_bytes))),
        DataType::BinaryView => array.as_binary_view().iter().for_each(&mut f),
        _ => unreachable!("checked by Kind::of"),
    }
}

/// Whether values of `data_type` can identify rows (integers, strings,
/// binary); the error names the type and what to use instead.
///
/// ```
/// use arrow_schema::DataType;
/// assert!(cairn_checkpoint::internals::check_id_type(&DataType::Utf8).is_ok());
/// assert!(cairn_checkpoint::internals::check_id_type(&DataType::Float64).is_err());
/// ```
pub fn check_id_type(data_type: &DataType) -> Result<()> {
    Kind::of(data_type).map(|_| ())
}

/// A 128-bit key per row of an ID array, equal exactly when the IDs are equal
/// (integers exactly, strings by their 128-bit fingerprint; see [`StringMode`]),
/// `None` for a null: what duplicate detection compares.
///
/// ```
/// use arrow_array::Int64Array;
/// let keys = cairn_checkpoint::internals::id_keys(&Int64Array::from(vec![Some(7), None, Some(7)])).unwrap();
/// assert_eq!((keys[0], keys[1]), (keys[2], None));
/// ```
pub fn id_keys(array: &dyn Array) -> Result<Vec<Option<u128>>> {
    let mut out = Vec::with_capacity(array.len());
    match Kind::of(array.data_type())? {
        Kind::Int => for_each_int_key(array, |key| out.push(key.map(u128::from))),
        Kind::Str => for_each_bytes(array, |bytes| out.push(bytes.map(fingerprint))),
    }
    Ok(out)
}

impl IdSetBuilder {
    /// An empty builder; `mode` says how string IDs will be kept.
    pub fn new(mode: StringMode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    fn check_kind(&mut self, kind: Kind) -> Result<()> {
        match self.kind {
            Some(expected) if expected != kind => Err(Error::IdTypeMismatch {
                expected: expected.name(),
                found: kind.name(),
            }),
            _ => {
                self.kind = Some(kind);
                Ok(())
            }
        }
    }

    /// Seals loose integer keys (random IDs) into compressed runs once
    /// `keys` or more of them are held (checked after each array), rather
    /// than at 64M: the builder then holds at most `keys` plus one array's
    /// 8-byte keys besides the runs, for a builder with a memory budget (a
    /// shard of a set spread over a cluster).
    ///
    /// ```
    /// use arrow_array::UInt64Array;
    /// use cairn_checkpoint::{IdSetBuilder, StringMode};
    /// let mut builder = IdSetBuilder::new(StringMode::default()).sealing_every(1_000);
    /// let keys: Vec<u64> = (0..10_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
    /// builder.push_array(&UInt64Array::from(keys.clone())).unwrap();
    /// let set = builder.build();
    /// assert_eq!(set.len(), 10_000);
    /// let mut answers = vec![false; keys.len()];
    /// set.contains_keys(&keys, &mut answers);
    /// assert!(answers.iter().all(|&a| a));
    /// ```
    pub fn sealing_every(mut self, keys: usize) -> Self {
        self.ints.seal_every(keys);
        self
    }

    /// Adds the non-null IDs of `array`.
    pub fn push_array(&mut self, array: &dyn Array) -> Result<()> {
        let kind = Kind::of(array.data_type())?;
        self.check_kind(kind)?;
        match kind {
            Kind::Int => match id_runs(array) {
                Some(runs) => self.push_runs(&runs)?,
                None => self
                    .ints
                    .push_with(|keys| for_each_int_key(array, |key| keys.extend(key))),
            },
            Kind::Str => for_each_bytes(array, |bytes| {
                let Some(bytes) = bytes else { return };
                match self.mode {
                    StringMode::Fingerprint => {
                        let (high, low) = split_fingerprint(bytes);
                        self.fingerprint_high.push(high);
                        self.fingerprint_low.push(low);
                    }
                    StringMode::Exact => {
                        self.exact_spans
                            .push((self.exact_bytes.len() as u64, bytes.len() as u32));
                        self.exact_bytes.extend_from_slice(bytes);
                    }
                }
            }),
        }
        Ok(())
    }

    /// Adds everything `other` collected (builders filled in parallel).
    pub fn merge(&mut self, mut other: IdSetBuilder) -> Result<()> {
        if let Some(kind) = other.kind {
            self.check_kind(kind)?;
        }
        self.ints.merge(other.ints);
        self.fingerprint_high.append(&mut other.fingerprint_high);
        self.fingerprint_low.append(&mut other.fingerprint_low);
        let base = self.exact_bytes.len() as u64;
        self.exact_bytes.append(&mut other.exact_bytes);
        self.exact_spans.extend(
            other
                .exact_spans
                .into_iter()
                .map(|(start, len)| (start + base, len)),
        );
        Ok(())
    }

    /// Adds the integer IDs whose keys run from `run.0` to `run.1`, for
    /// each run of `runs`.
    pub(crate) fn push_runs(&mut self, runs: &[(u64, u64)]) -> Result<()> {
        self.check_kind(Kind::Int)?;
        for &run in runs {
            self.ints.push_run(run);
        }
        Ok(())
    }

    /// The set of everything added.
    pub fn build(self) -> IdSet {
        match self.kind {
            None => IdSet::Empty,
            Some(Kind::Int) => IdSet::Int(self.ints.build()),
            Some(Kind::Str) => IdSet::Str(match self.mode {
                StringMode::Fingerprint => {
                    StringIdSet::from_fingerprints(self.fingerprint_high, self.fingerprint_low)
                }
                StringMode::Exact => StringIdSet::from_exact(self.exact_bytes, self.exact_spans),
            }),
        }
    }
}

impl IdSet {
    /// The kind of ID the set holds (`None` when empty).
    pub(crate) fn kind(&self) -> Option<Kind> {
        match self {
            IdSet::Empty => None,
            IdSet::Int(_) => Some(Kind::Int),
            IdSet::Str(_) => Some(Kind::Str),
        }
    }

    /// For each row of `array`, whether its ID is committed (a null never is).
    /// The array must hold the kind of ID the set holds.
    pub fn contains_array(&self, array: &dyn Array) -> Result<BooleanArray> {
        let kind = Kind::of(array.data_type())?;
        let expected = match self {
            IdSet::Empty => return Ok(BooleanArray::from(vec![false; array.len()])),
            IdSet::Int(_) => Kind::Int,
            IdSet::Str(_) => Kind::Str,
        };
        if kind != expected {
            return Err(Error::IdTypeMismatch {
                expected: expected.name(),
                found: kind.name(),
            });
        }
        let mut out = vec![false; array.len()];
        // In slices, so the keys (or string references) being looked up
        // stay small whatever the array's length.
        const SLICE: usize = 1 << 16;
        let mut keys = Vec::with_capacity(SLICE.min(array.len()));
        for start in (0..array.len()).step_by(SLICE) {
            let part = array.slice(start, SLICE.min(array.len() - start));
            let answers = &mut out[start..start + part.len()];
            match self {
                // Nulls are looked up as 0 (or the empty ID), then answered false.
                IdSet::Int(set) => {
                    keys.clear();
                    for_each_int_key(&part, |key| keys.push(key.unwrap_or(0)));
                    set.contains_each(&keys, answers);
                }
                IdSet::Str(set) => {
                    let mut ids = Vec::with_capacity(part.len());
                    for_each_bytes(&part, |id| ids.push(id.unwrap_or_default()));
                    set.contains_each(&ids, answers);
                }
                IdSet::Empty => unreachable!("answered above"),
            }
            if let Some(nulls) = part.logical_nulls() {
                for (answer, valid) in answers.iter_mut().zip(nulls.iter()) {
                    *answer &= valid;
                }
            }
        }
        Ok(BooleanArray::from(out))
    }

    /// Whether every integer ID from `min` to `max` (inclusive) is
    /// committed: what a row group's statistics can prove without reading
    /// it. False for an empty or a string set, or `min > max`.
    ///
    /// ```
    /// use arrow_array::Int64Array;
    /// use cairn_checkpoint::{IdSetBuilder, StringMode};
    /// let mut builder = IdSetBuilder::new(StringMode::default());
    /// builder.push_array(&Int64Array::from_iter_values(-5..1_000)).unwrap();
    /// let set = builder.build();
    /// assert!(set.contains_int_range(-5, 999) && set.contains_int_range(-1, 0));
    /// assert!(!set.contains_int_range(-6, 0) && !set.contains_int_range(0, 1_000));
    /// ```
    pub fn contains_int_range(&self, min: i64, max: i64) -> bool {
        let IdSet::Int(set) = self else {
            return false;
        };
        if min > max {
            return false;
        }
        // Keys are the IDs' bit patterns: negative IDs sit above positive
        // ones, so a range across zero is two ranges of keys.
        if min < 0 && max >= 0 {
            set.contains_all(min as u64, u64::MAX) && set.contains_all(0, max as u64)
        } else {
            set.contains_all(min as u64, max as u64)
        }
    }

    /// Sets `answers[i]` to whether the integer ID whose key is `keys[i]`
    /// is committed (an ID's key is its bit pattern as `u64`: a `uint64` ID
    /// is its own key, an `int64` ID `id as u64`). All false for an empty
    /// or a string set. Looking many keys up at once overlaps their memory
    /// reads.
    ///
    /// ```
    /// use arrow_array::UInt64Array;
    /// use cairn_checkpoint::{IdSetBuilder, StringMode};
    /// let mut builder = IdSetBuilder::new(StringMode::default());
    /// builder.push_array(&UInt64Array::from(vec![3, u64::MAX])).unwrap();
    /// let set = builder.build();
    /// let mut answers = [false; 3];
    /// set.contains_keys(&[3, 4, u64::MAX], &mut answers);
    /// assert_eq!(answers, [true, false, true]);
    /// ```
    pub fn contains_keys(&self, keys: &[u64], answers: &mut [bool]) {
        assert_eq!(keys.len(), answers.len(), "one answer per key");
        match self {
            IdSet::Int(set) => set.contains_each(keys, answers),
            IdSet::Empty | IdSet::Str(_) => answers.fill(false),
        }
    }

    /// Number of committed IDs.
    pub fn len(&self) -> u64 {
        match self {
            IdSet::Empty => 0,
            IdSet::Int(s) => s.len(),
            IdSet::Str(s) => s.len(),
        }
    }

    /// Whether nothing is committed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes the set holds.
    pub fn memory_bytes(&self) -> usize {
        match self {
            IdSet::Empty => 0,
            IdSet::Int(s) => s.memory_bytes(),
            IdSet::Str(s) => s.memory_bytes(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow_array::{Int32Array, Int64Array, UInt64Array};

    /// splitmix64's output function: random-looking, distinct 64-bit keys
    /// for distinct inputs.
    pub(crate) fn mix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E3779B97F4A7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }

    #[test]
    fn runs_are_read_in_place() {
        let runs = |a: &dyn Array| id_runs(a);
        assert_eq!(runs(&Int64Array::from(vec![5, 6, 7])), Some(vec![(5, 7)]));
        assert_eq!(
            runs(&UInt64Array::from(vec![u64::MAX])),
            Some(vec![(u64::MAX, u64::MAX)])
        );
        assert_eq!(
            runs(&Int64Array::from(vec![20, 21, 0, 1, 2, 9])),
            Some(vec![(20, 21), (0, 2), (9, 9)])
        );
        // -1 then 0 wraps in key space: two runs of keys.
        assert_eq!(
            runs(&Int64Array::from(vec![-1, 0])),
            Some(vec![(u64::MAX, u64::MAX), (0, 0)])
        );
        let too_many: Vec<i64> = (0..=MAX_RUNS as i64).map(|i| i * 2).collect();
        assert_eq!(runs(&Int64Array::from(too_many)), None);
        assert_eq!(runs(&Int64Array::from(vec![Some(1), None])), None);
        assert_eq!(
            runs(&Int32Array::from(vec![1, 2])),
            None,
            "other widths take the general path"
        );
        assert_eq!(runs(&Int64Array::from(Vec::<i64>::new())), None);
        let mut builder = IdSetBuilder::new(StringMode::default());
        builder.push_array(&Int64Array::from(vec![-1, 0])).unwrap();
        builder
            .push_array(&Int64Array::from_iter_values(1..100))
            .unwrap();
        assert!(builder.build().contains_int_range(-1, 99));
    }
}
