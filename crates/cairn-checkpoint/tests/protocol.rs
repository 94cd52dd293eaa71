//! The commit protocol under crashes: a run stops at every step boundary of a
//! unit (as a kill would leave it), the next run recovers and finishes, and
//! the output holds every input row's outputs exactly once (invariants 1-4);
//! clean-up deletes only the protocol's files (invariant 9). On memory, local
//! disk and Garage (no create-if-absent) and moto (with it). Each input row
//! maps to two output rows (a flat_map keyed by its source ID, invariant 7).
//!
//! The kill -9 test with a real child process is still to come; these crashes
//! are simulated by stopping the run between steps.

use std::collections::BTreeMap;

use futures::StreamExt;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array};
use cairn_checkpoint::internals::{CheckpointDir, RunId, decode_ids, encode_ids};
use cairn_checkpoint::{StringMode, UnitName};
use cairn_fs::{FileSystem, StorageOptions, WriteMode, build_checkpoint_filesystem};

const ROWS: i64 = 600;
const UNIT_ROWS: usize = 100;

/// Where a run stops, inside the unit it crashes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crash {
    BeforePending,
    AfterPending,
    AfterFirstDataFile,
    AfterData,
    AfterCommit,
    AfterRelease,
}

const CRASHES: [Crash; 6] = [
    Crash::BeforePending,
    Crash::AfterPending,
    Crash::AfterFirstDataFile,
    Crash::AfterData,
    Crash::AfterCommit,
    Crash::AfterRelease,
];

struct Store {
    ckpt_fs: FileSystem,
    out_fs: FileSystem,
    ckpt: String,
    out: String,
}

fn ids(v: &[i64]) -> ArrayRef {
    Arc::new(Int64Array::from(v.to_vec()))
}

/// Runs one unit's steps; returns false if the run crashed in it.
async fn run_unit(
    store: &Store,
    dir: &CheckpointDir,
    unit: &UnitName,
    rows: &[i64],
    crash: Option<Crash>,
) -> bool {
    if crash == Some(Crash::BeforePending) {
        return false;
    }
    dir.write_pending(unit, ids(rows)).await.unwrap();
    if crash == Some(Crash::AfterPending) {
        return false;
    }
    // flat_map: every input row gives two output rows, split over two files.
    let outputs: Vec<i64> = rows.iter().flat_map(|&r| [r, r]).collect();
    let (first, second) = outputs.split_at(outputs.len() / 2);
    for (n, part) in [first, second].iter().enumerate() {
        let name = format!("{}/{}{n}.parquet", store.out, unit.data_prefix());
        store
            .out_fs
            .pipe(
                &name,
                encode_ids("id", ids(part)).unwrap(),
                WriteMode::Overwrite,
            )
            .await
            .unwrap();
        if n == 0 && crash == Some(Crash::AfterFirstDataFile) {
            return false;
        }
    }
    if crash == Some(Crash::AfterData) {
        return false;
    }
    dir.commit(unit, ids(rows)).await.unwrap();
    if crash == Some(Crash::AfterCommit) {
        return false;
    }
    dir.release_pending(unit).await.unwrap();
    crash != Some(Crash::AfterRelease)
}

/// One run: load, recover, process every row not yet committed in units.
/// `crash_at` = (unit index in this run, where).
async fn run(store: &Store, crash_at: Option<(usize, Crash)>) -> bool {
    let dir = CheckpointDir::new(store.ckpt_fs.clone(), &store.ckpt, "id");
    let state = dir.load(StringMode::default()).await.unwrap();
    let report = dir
        .recover(&store.out_fs, &store.out, &state)
        .await
        .unwrap();
    for unit in &report.rolled_back {
        let left = store
            .out_fs
            .find_prefix(&format!("{}/{}", store.out, unit.data_prefix()))
            .await
            .unwrap();
        assert!(left.is_empty(), "recovery left data of {unit}: {left:?}");
    }
    let after = dir.load(StringMode::default()).await.unwrap();
    assert!(
        after.pending.is_empty(),
        "recovery left pending units {:?}",
        after.pending
    );

    let all: Vec<i64> = (0..ROWS).collect();
    let seen = state
        .ids
        .contains_array(&Int64Array::from(all.clone()))
        .unwrap();
    let todo: Vec<i64> = all
        .iter()
        .zip(seen.iter())
        .filter(|(_, s)| !s.unwrap())
        .map(|(r, _)| *r)
        .collect();
    let run_id = RunId::new();
    for (i, rows) in todo.chunks(UNIT_ROWS).enumerate() {
        let crash = crash_at.filter(|(at, _)| *at == i).map(|(_, c)| c);
        if !run_unit(store, &dir, &UnitName::new(&run_id, i as u64), rows, crash).await {
            return false;
        }
        if crash == Some(Crash::AfterRelease) {
            return false;
        }
    }
    true
}

async fn output_counts(store: &Store) -> BTreeMap<i64, usize> {
    let mut counts = BTreeMap::new();
    for file in store.out_fs.find(&store.out).await.unwrap() {
        let bytes = store.out_fs.cat(&file.name).await.unwrap();
        for array in decode_ids(&file.name, bytes, "id").unwrap() {
            let a = array.as_any().downcast_ref::<Int64Array>().unwrap();
            for v in a.values() {
                *counts.entry(*v).or_insert(0) += 1;
            }
        }
    }
    counts
}

async fn crash_resume_exactly_once(store: Store) {
    store
        .ckpt_fs
        .pipe(
            &format!("{}/README.txt", store.ckpt),
            "not the protocol's".into(),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    for crash in CRASHES {
        for fs in [&store.ckpt_fs, &store.out_fs] {
            let _ = fs
                .rm_with(&store.out, cairn_fs::TreeOptions::new().recursive(true))
                .await;
        }
        let dir = CheckpointDir::new(store.ckpt_fs.clone(), &store.ckpt, "id");
        for f in store.ckpt_fs.find(&store.ckpt).await.unwrap() {
            if !f.name.ends_with("README.txt") {
                store.ckpt_fs.rm(&f.name).await.unwrap();
            }
        }
        // Run 1 crashes in its third unit; run 2 crashes in its first; run 3 finishes.
        assert!(!run(&store, Some((2, crash))).await, "{crash:?}");
        assert!(!run(&store, Some((0, crash))).await, "{crash:?}");
        assert!(run(&store, None).await, "{crash:?}");
        let counts = output_counts(&store).await;
        assert_eq!(counts.len() as i64, ROWS, "{crash:?}: rows lost");
        assert!(
            counts.values().all(|&c| c == 2),
            "{crash:?}: duplicated or half-committed rows"
        );

        // A re-run finds everything committed and writes nothing.
        let before = store.out_fs.find(&store.out).await.unwrap().len();
        assert!(run(&store, None).await);
        assert_eq!(store.out_fs.find(&store.out).await.unwrap().len(), before);

        let report = dir.clean_up(None).await.unwrap();
        assert!(report.deleted > 0);
        assert_eq!(report.kept_foreign, ["README.txt"], "{crash:?}");
        assert!(
            store
                .ckpt_fs
                .exists(&format!("{}/README.txt", store.ckpt))
                .await
                .unwrap()
        );
        let left = dir.load(StringMode::default()).await.unwrap();
        assert!(left.ids.is_empty() && left.pending.is_empty());
        assert_eq!(
            output_counts(&store).await.len() as i64,
            ROWS,
            "clean-up never touches output"
        );
    }
}

#[tokio::test]
async fn interrupted_recovery_converges() {
    let root = format!("memory:///proto-rec-{}", RunId::new().as_str());
    let (fs, _) = build_checkpoint_filesystem(&root, &StorageOptions::new()).unwrap();
    let store = Store {
        ckpt_fs: fs.clone(),
        out_fs: fs.clone(),
        ckpt: format!("{root}/ckpt"),
        out: format!("{root}/out"),
    };
    assert!(!run(&store, Some((1, Crash::AfterData))).await);
    // Recovery dies after deleting one data file, before the pending record.
    let dir = CheckpointDir::new(fs.clone(), &store.ckpt, "id");
    let state = dir.load(StringMode::default()).await.unwrap();
    let unit = state.pending[0].clone();
    let files = fs
        .find_prefix(&format!("{}/{}", store.out, unit.data_prefix()))
        .await
        .unwrap();
    assert_eq!(files.len(), 2);
    fs.rm(&files[0].name).await.unwrap();
    // The next run's recovery finishes the job and the run completes.
    assert!(run(&store, None).await);
    let counts = output_counts(&store).await;
    assert_eq!(counts.len() as i64, ROWS);
    assert!(counts.values().all(|&c| c == 2));
}

fn local_store(dir: &tempfile::TempDir) -> Store {
    let root = dir.path().display().to_string();
    let (fs, _) = build_checkpoint_filesystem(&root, &StorageOptions::new()).unwrap();
    Store {
        ckpt_fs: fs.clone(),
        out_fs: fs,
        ckpt: format!("{root}/ckpt"),
        out: format!("{root}/out"),
    }
}

#[tokio::test]
async fn on_memory() {
    let root = format!("memory:///proto-{}", RunId::new().as_str());
    let (fs, _) = build_checkpoint_filesystem(&root, &StorageOptions::new()).unwrap();
    crash_resume_exactly_once(Store {
        ckpt_fs: fs.clone(),
        out_fs: fs,
        ckpt: format!("{root}/ckpt"),
        out: format!("{root}/out"),
    })
    .await;
}

#[tokio::test]
async fn on_local_disk() {
    let dir = tempfile::tempdir().unwrap();
    crash_resume_exactly_once(local_store(&dir)).await;
}

fn s3_store(name: &str) -> Option<Store> {
    let (options, s3) = cairn_conformance::s3_server(name, "checkpoint protocol")?;
    let bucket = s3.bucket;
    let root = format!("s3://{bucket}/proto-{}", RunId::new().as_str());
    let (fs, _) = build_checkpoint_filesystem(&root, &options).unwrap();
    Some(Store {
        ckpt_fs: fs.clone(),
        out_fs: fs,
        ckpt: format!("{root}/ckpt"),
        out: format!("{root}/out"),
    })
}

#[tokio::test]
async fn on_garage_without_create_if_absent() {
    if let Some(store) = s3_store("GARAGE") {
        crash_resume_exactly_once(store).await;
    }
}

#[tokio::test]
async fn on_moto_with_create_if_absent() {
    if let Some(store) = s3_store("MOTO") {
        crash_resume_exactly_once(store).await;
    }
}

/// Clean-up of more protocol files than one delete batch (and, on Garage,
/// than one listing page of 1,000 keys): the listing streams while the
/// batches are deleted, every protocol file goes, the foreign file and the
/// output stay.
async fn clean_up_past_one_batch(store: Store) {
    const UNITS: u64 = 2_100;
    let dir = CheckpointDir::new(store.ckpt_fs.clone(), &store.ckpt, "id");
    let run_id = RunId::new();
    let units: Vec<UnitName> = (0..UNITS).map(|i| UnitName::new(&run_id, i)).collect();
    let writes = (units.iter().enumerate()).map(|(i, unit)| dir.commit(unit, ids(&[i as i64])));
    futures::stream::iter(writes)
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let foreign = format!("{}/notes.txt", store.ckpt);
    let output = format!("{}/kept.parquet", store.out);
    for path in [&foreign, &output] {
        store
            .ckpt_fs
            .pipe(path, "user's".into(), WriteMode::Overwrite)
            .await
            .unwrap();
    }
    let loaded = dir.load(StringMode::default()).await.unwrap();
    assert_eq!(loaded.committed.len() as u64, UNITS);
    assert_eq!(loaded.ids.len(), UNITS);

    let report = dir.clean_up(None).await.unwrap();
    assert_eq!(report.deleted as u64, UNITS);
    assert_eq!(report.kept_foreign, ["notes.txt"]);
    let left: Vec<String> = store
        .ckpt_fs
        .find(&store.ckpt)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(left, [store.ckpt_fs.strip(&foreign).unwrap()]);
    assert!(store.ckpt_fs.exists(&output).await.unwrap());
}

#[tokio::test]
async fn clean_up_past_one_batch_on_local_disk() {
    let dir = tempfile::tempdir().unwrap();
    clean_up_past_one_batch(local_store(&dir)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_up_past_one_batch_on_garage() {
    if let Some(store) = s3_store("GARAGE") {
        clean_up_past_one_batch(store).await;
    }
}
