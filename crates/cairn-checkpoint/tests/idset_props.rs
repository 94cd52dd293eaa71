//! Property tests of the ID sets against a `HashSet` model.

use std::collections::HashSet;

use arrow_array::{BinaryArray, Int32Array, Int64Array, StringArray, UInt64Array};
use cairn_checkpoint::{Error, IdSet, IdSetBuilder, IntIdSet, StringMode};
use proptest::prelude::*;

/// Integer IDs mixing the shapes the set stores differently: sparse values,
/// runs of consecutive values, and gappy dense blocks, near 0 and near the top.
fn int_ids() -> impl Strategy<Value = Vec<u64>> {
    let sparse = prop::collection::vec(any::<u64>(), 0..200);
    let runs = prop::collection::vec((any::<u64>(), 1u64..3000), 0..5).prop_map(|rs| {
        rs.into_iter()
            .flat_map(|(start, len)| (0..len).map(move |i| start.wrapping_add(i)))
            .collect::<Vec<_>>()
    });
    let gappy = prop::collection::vec((0u64..4, 2u64..5), 0..3).prop_map(|blocks| {
        blocks
            .into_iter()
            .flat_map(|(block, step)| ((block << 16)..((block + 1) << 16)).step_by(step as usize))
            .collect::<Vec<_>>()
    });
    let edges = prop::collection::vec(
        prop_oneof![0u64..70_000, (u64::MAX - 70_000)..=u64::MAX],
        0..300,
    );
    (sparse, runs, gappy, edges).prop_map(|(a, b, c, d)| [a, b, c, d].concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn int_set_matches_a_hash_set(ids in int_ids(), probes in prop::collection::vec(any::<u64>(), 0..200)) {
        let model: HashSet<u64> = ids.iter().copied().collect();
        let set = IntIdSet::from_keys(ids.clone());
        prop_assert_eq!(set.len(), model.len() as u64);
        for id in ids.iter().chain(&probes) {
            prop_assert_eq!(set.contains(*id), model.contains(id), "id {}", id);
            for near in [id.wrapping_add(1), id.wrapping_sub(1)] {
                prop_assert_eq!(set.contains(near), model.contains(&near), "neighbour {}", near);
            }
        }
        // Never worse than a plain sorted vector of the IDs (plus a block's bitmap).
        prop_assert!(set.memory_bytes() <= model.len() * 8 + 8192 + 64);
    }

    /// `contains_int_range` is "every ID of the range is in the set".
    #[test]
    fn int_ranges_match_a_hash_set(
        runs in prop::collection::vec((-300i64..300, 0i64..200), 1..6),
        singles in prop::collection::vec(-400i64..400, 0..50),
        queries in prop::collection::vec((-450i64..450, 0i64..120), 1..40),
    ) {
        let ids: Vec<i64> = runs
            .iter()
            .flat_map(|&(start, len)| start..start + len)
            .chain(singles)
            .collect();
        let model: HashSet<i64> = ids.iter().copied().collect();
        let mut builder = IdSetBuilder::new(StringMode::default());
        builder.push_array(&Int64Array::from(ids)).unwrap();
        let set = builder.build();
        for (min, len) in queries {
            let max = min + len;
            let expected = (min..=max).all(|id| model.contains(&id));
            prop_assert_eq!(set.contains_int_range(min, max), expected, "{}..={}", min, max);
        }
    }

    /// IDs arriving as files do (arrays, some in order, some shuffled, in
    /// builders merged in any order) give the set a `HashSet` gives, before
    /// and after a trip through bytes.
    #[test]
    fn ids_added_file_by_file_match_a_hash_set(
        ids in int_ids(),
        file_rows in 1usize..5000,
        shuffle_seed in any::<u64>(),
        probes in prop::collection::vec(any::<u64>(), 0..200),
    ) {
        let model: HashSet<u64> = ids.iter().copied().collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        let mut builders = Vec::new();
        for (i, file) in sorted.chunks(file_rows).enumerate() {
            let mut file = file.to_vec();
            if (shuffle_seed >> (i % 64)) & 1 == 1 {
                // A cheap deterministic shuffle: reverse and rotate.
                file.reverse();
                let by = (shuffle_seed as usize) % file.len();
                file.rotate_left(by);
            }
            let mut builder = IdSetBuilder::new(StringMode::default());
            builder.push_array(&UInt64Array::from(file)).unwrap();
            builders.push(builder);
        }
        if shuffle_seed & 1 == 1 {
            builders.reverse();
        }
        let mut all = IdSetBuilder::new(StringMode::default());
        for builder in builders {
            all.merge(builder).unwrap();
        }
        let set = all.build();
        prop_assert_eq!(set.len(), model.len() as u64);
        let from_bytes = IdSet::from_bytes(&set.to_bytes()).unwrap();
        prop_assert_eq!(&from_bytes, &set);
        let candidates: Vec<u64> = ids
            .iter()
            .chain(&probes)
            .flat_map(|&id| [id, id.wrapping_add(1), id.wrapping_sub(1)])
            .collect();
        let answer = from_bytes.contains_array(&UInt64Array::from(candidates.clone())).unwrap();
        for (i, id) in candidates.iter().enumerate() {
            prop_assert_eq!(answer.value(i), model.contains(id), "id {}", id);
        }
    }

    /// Loose keys sealed into many small runs (built range by range, many
    /// runs to a range) build the same set as keys never sealed.
    #[test]
    fn sealed_runs_build_the_set_of_unsealed_keys(
        ids in int_ids(),
        randoms in prop::collection::vec(any::<u64>(), 0..3000),
        file_rows in 1usize..700,
        seal_every in 1usize..400,
    ) {
        let ids = [ids, randoms.clone(), randoms].concat();
        let model: HashSet<u64> = ids.iter().copied().collect();
        let mut sealed = IdSetBuilder::new(StringMode::default()).sealing_every(seal_every);
        let mut unsealed = IdSetBuilder::new(StringMode::default());
        for file in ids.chunks(file_rows) {
            sealed.push_array(&UInt64Array::from(file.to_vec())).unwrap();
            unsealed.push_array(&UInt64Array::from(file.to_vec())).unwrap();
        }
        let (sealed, unsealed) = (sealed.build(), unsealed.build());
        prop_assert_eq!(sealed.len(), model.len() as u64);
        prop_assert_eq!(&sealed, &unsealed);
    }

    #[test]
    fn arrow_membership_with_nulls_and_parallel_merge(
        ids in prop::collection::vec(any::<i64>(), 1..300),
        probes in prop::collection::vec(prop::option::of(any::<i64>()), 0..200),
        split in 0usize..300,
    ) {
        let model: HashSet<i64> = ids.iter().copied().collect();
        let split = split.min(ids.len());
        let mut left = IdSetBuilder::new(StringMode::default());
        left.push_array(&Int64Array::from(ids[..split].to_vec())).unwrap();
        let mut right = IdSetBuilder::new(StringMode::default());
        right.push_array(&Int64Array::from(ids[split..].to_vec())).unwrap();
        left.merge(right).unwrap();
        let set = left.build();
        prop_assert_eq!(set.len(), model.len() as u64);
        let probe_array = Int64Array::from(probes.clone());
        let answer = set.contains_array(&probe_array).unwrap();
        for (i, probe) in probes.iter().enumerate() {
            let expected = probe.is_some_and(|p| model.contains(&p));
            prop_assert_eq!(answer.value(i), expected);
        }
        prop_assert_eq!(answer.len(), probes.len());
    }

    #[test]
    fn string_sets_match_a_hash_set(
        ids in prop::collection::vec("[a-z0-9]{0,12}", 0..200),
        probes in prop::collection::vec("[a-z0-9]{0,12}", 0..100),
    ) {
        let model: HashSet<&str> = ids.iter().map(String::as_str).collect();
        for mode in [StringMode::Fingerprint, StringMode::Exact] {
            let mut builder = IdSetBuilder::new(mode);
            builder.push_array(&StringArray::from(ids.clone())).unwrap();
            let set = builder.build();
            prop_assert_eq!(set.len(), model.len() as u64);
            let answer = set.contains_array(&StringArray::from(probes.clone())).unwrap();
            for (i, probe) in probes.iter().enumerate() {
                prop_assert_eq!(answer.value(i), model.contains(probe.as_str()), "{:?} {}", mode, probe);
            }
        }
    }
}

#[test]
fn narrow_integer_types_and_binary_ids() {
    let mut builder = IdSetBuilder::new(StringMode::Exact);
    builder.push_array(&Int32Array::from(vec![-5, 7])).unwrap();
    builder
        .push_array(&Int64Array::from(vec![9_000_000_000]))
        .unwrap();
    let set = builder.build();
    let probe = Int32Array::from(vec![-5, 6, 7]);
    assert_eq!(
        set.contains_array(&probe)
            .unwrap()
            .iter()
            .flatten()
            .collect::<Vec<_>>(),
        [true, false, true]
    );
    let unsigned = UInt64Array::from(vec![9_000_000_000, 1]);
    assert_eq!(
        set.contains_array(&unsigned)
            .unwrap()
            .iter()
            .flatten()
            .collect::<Vec<_>>(),
        [true, false]
    );

    let mut builder = IdSetBuilder::new(StringMode::Fingerprint);
    builder
        .push_array(&BinaryArray::from(vec![&b"\x00\xff"[..], b"abc"]))
        .unwrap();
    let set = builder.build();
    let probe = BinaryArray::from(vec![&b"abc"[..], b"abd"]);
    assert_eq!(
        set.contains_array(&probe)
            .unwrap()
            .iter()
            .flatten()
            .collect::<Vec<_>>(),
        [true, false]
    );
}

#[test]
fn wrong_types_are_clear_errors() {
    let mut builder = IdSetBuilder::new(StringMode::default());
    builder.push_array(&Int64Array::from(vec![1])).unwrap();
    let err = builder
        .push_array(&StringArray::from(vec!["1"]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::IdTypeMismatch {
                expected: "integer",
                found: "string"
            }
        ),
        "{err}"
    );
    let err = builder
        .push_array(&arrow_array::Float64Array::from(vec![1.0]))
        .unwrap_err();
    assert!(err.to_string().contains("Float64"), "{err}");
    let set = builder.build();
    assert!(set.contains_array(&StringArray::from(vec!["1"])).is_err());
    assert!(IdSetBuilder::new(StringMode::default()).build() == IdSet::Empty);
    let empty = IdSet::Empty
        .contains_array(&StringArray::from(vec!["x"]))
        .unwrap();
    assert!(!empty.value(0));
}
