//! A property test of the native resume's skipping (`cairn job run`'s
//! executor, through the library): over drawn inputs (files of uneven row
//! groups, empty files, integer IDs with gaps, negative and past 2^62,
//! string IDs, `row_hash` IDs) and a drawn committed subset (whole row
//! groups, parts of groups, none, all, plus IDs not in the input), planted
//! as Ray's layout (an ID file in the checkpoint, the unit's rows in the
//! output), a resume must end with every input row in the output exactly
//! once.
//!
//! The oracle is independent of the code under test: the input and the
//! output are read with the parquet crate directly, and `row_hash` is
//! computed here from its formula (MD5 seed of the path, SplitMix64).
//! `CAIRN_SKIP_PROP_CASES` sets the number of cases (256 by default;
//! `scripts/bench/skip_props.sh` runs thousands); a failure prints the
//! case and proptest's seed.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt64Array};
use cairn_checkpoint::internals::CheckpointConfig;
use cairn_dataset::{Dataset, JobContext, Source};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;

/// Where integer IDs start: around zero, negative, past 2^62, near both ends.
const BASES: [i64; 6] = [0, -40, 1 << 62, i64::MAX - 500, i64::MIN, 10_000];

#[derive(Debug, Clone, Copy, PartialEq)]
enum IdKind {
    Int,
    Text,
    RowHash,
}

#[derive(Debug, Clone)]
struct Case {
    kind: IdKind,
    base: i64,
    /// Row-group sizes of each file (a file may have none).
    files: Vec<Vec<usize>>,
    /// 0: nothing committed, 1: everything, 2: whole groups, 3: mixed.
    how: u8,
    /// Drives the gaps between IDs and the parts of groups committed.
    seed: u64,
    /// IDs that are not in the input, committed too.
    foreign: bool,
    workers: usize,
    commit_rows: usize,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        prop_oneof![Just(IdKind::Int), Just(IdKind::Text), Just(IdKind::RowHash)],
        prop::sample::select(BASES.to_vec()),
        prop::collection::vec(prop::collection::vec(1usize..10, 0..5), 1..4),
        0u8..4,
        any::<u64>(),
        any::<bool>(),
        1usize..3,
        prop::sample::select(vec![1usize, 3, 7, 100]),
    )
        .prop_map(
            |(kind, base, files, how, seed, foreign, workers, commit_rows)| Case {
                kind,
                base,
                files,
                how,
                seed,
                foreign,
                workers,
                commit_rows,
            },
        )
}

/// A small deterministic generator for the case's details.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Ray's `row_hash`, written here from its formula.
fn oracle_row_hash(path: &str, position: u64) -> u64 {
    let digest = md5::compute(path.as_bytes());
    let seed = u64::from_le_bytes(digest.0[..8].try_into().unwrap());
    let mut k = seed.wrapping_add(position);
    k ^= k >> 30;
    k = k.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    k ^= k >> 27;
    k = k.wrapping_mul(0x94D0_49BB_1331_11EB);
    k ^ (k >> 31)
}

/// One input row: (file, row in the file) and its ID.
#[derive(Debug, Clone, PartialEq)]
enum Id {
    Int(i64),
    Text(String),
    Hash(u64),
}

fn id_array(kind: IdKind, ids: &[Id]) -> ArrayRef {
    match kind {
        IdKind::Text => Arc::new(StringArray::from_iter_values(ids.iter().map(|i| match i {
            Id::Text(t) => t.clone(),
            other => unreachable!("{other:?}"),
        }))),
        IdKind::RowHash => Arc::new(UInt64Array::from_iter_values(ids.iter().map(|i| match i {
            Id::Hash(h) => *h,
            other => unreachable!("{other:?}"),
        }))),
        IdKind::Int => Arc::new(Int64Array::from_iter_values(ids.iter().map(|i| match i {
            Id::Int(v) => *v,
            other => unreachable!("{other:?}"),
        }))),
    }
}

fn write_parquet(path: &std::path::Path, batches: &[RecordBatch]) {
    let schema = batches[0].schema();
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None).unwrap();
    for batch in batches {
        writer.write(batch).unwrap();
        // Each batch its own row group.
        writer.flush().unwrap();
    }
    writer.close().unwrap();
}

fn rows_batch(kind: IdKind, f: i64, ns: &[i64], ids: &[Id]) -> RecordBatch {
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("f", Arc::new(Int64Array::from(vec![f; ns.len()]))),
        ("n", Arc::new(Int64Array::from(ns.to_vec()))),
    ];
    if kind != IdKind::RowHash {
        columns.push(("uid", id_array(kind, ids)));
    }
    RecordBatch::try_from_iter(columns).unwrap()
}

/// Every (file, row) of the Parquet files under `dir`, read by the parquet crate.
fn rows_in(dir: &std::path::Path) -> BTreeMap<(i64, i64), usize> {
    let mut counts = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return counts;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "parquet") {
            continue;
        }
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let f = batch
                .column_by_name("f")
                .unwrap()
                .as_primitive::<Int64Type>();
            let n = batch
                .column_by_name("n")
                .unwrap()
                .as_primitive::<Int64Type>();
            for (f, n) in f.values().iter().zip(n.values()) {
                *counts.entry((*f, *n)).or_default() += 1;
            }
        }
    }
    counts
}

fn run_case(case: &Case) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let (input, output, ckpt) = (
        tmp.path().join("in"),
        tmp.path().join("out"),
        tmp.path().join("ckpt"),
    );
    std::fs::create_dir_all(&input).unwrap();
    let mut dice = Dice(case.seed);
    let mut next_id = case.base;
    // Every input row: (file, row) and its ID; the committed ones.
    let mut all: Vec<((i64, i64), Id)> = Vec::new();
    let mut committed: Vec<((i64, i64), Id)> = Vec::new();
    for (f, groups) in case.files.iter().enumerate() {
        let path = input.join(format!("part-{f}.parquet"));
        let shown = path.display().to_string();
        let mut batches = Vec::new();
        let mut n = 0i64;
        for &size in groups {
            let ns: Vec<i64> = (n..n + size as i64).collect();
            let ids: Vec<Id> = ns
                .iter()
                .map(|&row| {
                    let id = match case.kind {
                        IdKind::Int => Id::Int(next_id),
                        IdKind::Text => Id::Text(format!("doc-{next_id}")),
                        IdKind::RowHash => Id::Hash(oracle_row_hash(&shown, row as u64)),
                    };
                    next_id = next_id.wrapping_add([1, 1, 1, 2, 7][(dice.next() % 5) as usize]);
                    id
                })
                .collect();
            let pick = match case.how {
                0 => 0,
                1 => 1,
                2 => dice.next() % 2,
                _ => dice.next() % 3,
            };
            for (row, id) in ns.iter().zip(&ids) {
                let row_committed = match pick {
                    0 => false,
                    1 => true,
                    _ => dice.next().is_multiple_of(2),
                };
                all.push(((f as i64, *row), id.clone()));
                if row_committed {
                    committed.push(((f as i64, *row), id.clone()));
                }
            }
            batches.push(rows_batch(case.kind, f as i64, &ns, &ids));
            n += size as i64;
        }
        if batches.is_empty() {
            batches.push(rows_batch(case.kind, f as i64, &[], &[]));
        }
        write_parquet(&path, &batches);
    }
    let id_column = if case.kind == IdKind::RowHash {
        "row_hash"
    } else {
        "uid"
    };
    if !committed.is_empty() {
        // A committed unit in Ray's layout: its IDs, and its rows in the output.
        std::fs::create_dir_all(&ckpt).unwrap();
        std::fs::create_dir_all(&output).unwrap();
        let mut ids: Vec<Id> = committed.iter().map(|(_, id)| id.clone()).collect();
        if case.foreign {
            ids.push(match case.kind {
                IdKind::Int => Id::Int(case.base.wrapping_sub(1_000_000)),
                IdKind::Text => Id::Text("not-an-input-id".into()),
                IdKind::RowHash => Id::Hash(12345),
            });
        }
        let id_batch =
            RecordBatch::try_from_iter([(id_column, id_array(case.kind, &ids))]).unwrap();
        write_parquet(&ckpt.join("w_000001.parquet"), &[id_batch]);
        let fs: Vec<i64> = committed.iter().map(|((f, _), _)| *f).collect();
        let ns: Vec<i64> = committed.iter().map(|((_, n), _)| *n).collect();
        let data = RecordBatch::try_from_iter([
            ("f", Arc::new(Int64Array::from(fs)) as ArrayRef),
            ("n", Arc::new(Int64Array::from(ns)) as ArrayRef),
        ])
        .unwrap();
        write_parquet(&output.join("w_000001-0.parquet"), &[data]);
    }

    let mut config = CheckpointConfig::new(id_column, ckpt.to_str().unwrap());
    config.commit_rows = case.commit_rows;
    let ctx = JobContext::new()
        .checkpoint(config)
        .workers(case.workers)
        .batch_size(4);
    let mut source = Source::parquet([input.to_str().unwrap()]);
    if case.kind == IdKind::RowHash {
        source = source.with_row_hash();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let summary = runtime
        .block_on(Dataset::from_source(source).write_parquet(&ctx, output.to_str().unwrap()))
        .map_err(|e| TestCaseError::fail(format!("the resume failed: {e}")))?;
    let got = rows_in(&output);
    let expected: BTreeMap<(i64, i64), usize> = all.iter().map(|(key, _)| (*key, 1)).collect();
    prop_assert_eq!(
        &got,
        &expected,
        "every input row once (summary {:?})",
        summary
    );
    Ok(())
}

fn config() -> ProptestConfig {
    let cases = std::env::var("CAIRN_SKIP_PROP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_resume_writes_every_row_not_committed_once(case in cases()) {
        run_case(&case)?;
    }
}
