//! The promises of the library's front door, `Checkpoint` and `Run`, on
//! every store (memory, local disk, Garage, moto): each trap a user fell
//! into before (rows lost or doubled with no error) is refused or
//! reported, and a property test over drawn runs (commits, units left in
//! flight, dropped runs, early finishes) ends with every ID exactly once,
//! judged by reading the output files directly.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, ArrayRef, Int64Array, StringArray};
use cairn_checkpoint::internals::CheckpointDir;
use cairn_checkpoint::{Checkpoint, Error, Run};
use cairn_fs::{FileSystem, StorageOptions, WriteMode};

fn ints(v: &[i64]) -> ArrayRef {
    Arc::new(Int64Array::from(v.to_vec()))
}

/// A store and a fresh root on it.
struct Place {
    fs: FileSystem,
    options: StorageOptions,
    root: String,
    _tmp: Option<tempfile::TempDir>,
}

impl Place {
    fn memory() -> Self {
        let root = format!(
            "memory:///promises-{}",
            cairn_checkpoint::internals::RunId::new().as_str()
        );
        Self {
            fs: FileSystem::new("memory", &StorageOptions::new()).unwrap(),
            options: StorageOptions::new(),
            root,
            _tmp: None,
        }
    }

    fn local() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        Self {
            fs: FileSystem::new("file", &StorageOptions::new()).unwrap(),
            options: StorageOptions::new(),
            root: tmp.path().display().to_string(),
            _tmp: Some(tmp),
        }
    }

    fn s3(name: &str) -> Option<Self> {
        let (options, s3) = cairn_conformance::s3_server(name, "run promises")?;
        let root = format!(
            "s3://{}/promises-{}",
            s3.bucket,
            cairn_checkpoint::internals::RunId::new().as_str()
        );
        let (fs, _) = FileSystem::from_url(&root, &options).unwrap();
        Some(Self {
            fs,
            options,
            root,
            _tmp: None,
        })
    }

    fn ckpt(&self, name: &str) -> String {
        format!("{}/{name}/ckpt", self.root)
    }

    fn out(&self, name: &str) -> String {
        format!("{}/{name}/out", self.root)
    }

    /// The checkpoint `name`, with a short lease: a dropped run's writes
    /// get a quarter of it (0.75 s) before a run of this process goes on.
    fn checkpoint(&self, name: &str) -> Checkpoint {
        Checkpoint::at(&self.ckpt(name), &self.options, "id")
            .unwrap()
            .lease_ttl(Duration::from_secs(3))
            .unwrap()
    }

    async fn open(&self, name: &str) -> cairn_checkpoint::Result<Run> {
        self.checkpoint(name).open(&self.fs, &self.out(name)).await
    }

    async fn ckpt_has(&self, name: &str, file: &str) -> bool {
        self.fs
            .exists(&format!("{}/{file}", self.ckpt(name)))
            .await
            .unwrap()
    }
}

/// One unit of `ids` through `run`: begun, its data file written (one ID a
/// line), committed when `commit`.
async fn unit(run: &Run, out: &str, ids: &[i64], commit: bool) -> cairn_checkpoint::UnitName {
    let unit = run.next_unit();
    run.begin(&unit, ints(ids)).await.unwrap();
    let body: String = ids.iter().map(|id| format!("{id}\n")).collect();
    let file = format!("{out}/{}", unit.data_file(0, "txt"));
    run.fenced(run.output_fs().pipe(&file, body.into(), WriteMode::Create))
        .await
        .unwrap();
    if commit {
        run.commit(&unit, 1).await.unwrap();
    }
    unit
}

/// Every trap, in order, on one store.
async fn every_promise(place: Place) {
    finish_refuses_a_unit_in_flight(&place).await;
    open_refuses_missing_data(&place).await;
    open_refuses_a_full_output_for_a_new_checkpoint(&place).await;
    commit_takes_the_begun_ids_and_drops_the_pending_record(&place).await;
    a_dropped_run_frees_its_lease(&place).await;
    the_id_kind_is_checked_alike_before_and_after_a_reopen(&place).await;
    a_finished_job_writes_nothing(&place).await;
    a_path_of_another_store_is_a_config_error(&place).await;
}

/// An output (or checkpoint) path of another store than its filesystem is
/// the same kind of error from `on` and from `open` (before, `open` gave a
/// storage error), naming the path.
async fn a_path_of_another_store_is_a_config_error(place: &Place) {
    let err = place
        .checkpoint("elsewhere")
        .open(&place.fs, "gcs://bucket/out")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
    assert!(err.to_string().contains("gcs://bucket/out"), "{err}");
    let err = Checkpoint::on(&place.fs, "gcs://bucket/ckpt", "id").unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
    assert!(!place.fs.exists(&place.ckpt("elsewhere")).await.unwrap());
}

/// Trap 1: `finish` with a unit begun and not committed returned `Ok`
/// after deleting the unit's data and the checkpoint.
async fn finish_refuses_a_unit_in_flight(place: &Place) {
    let name = "in-flight";
    let out = place.out(name);
    let run = place.open(name).await.unwrap();
    unit(&run, &out, &[1, 2], true).await;
    let left = unit(&run, &out, &[3, 4], false).await;
    let err = run.finish().await.unwrap_err();
    assert!(
        matches!(err, Error::UnitsNotCommitted { units: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains(left.as_str()), "{err}");
    // Nothing deleted: the unit's data and pending record are still there,
    // and the checkpoint's lease was released (the next run opens at once).
    assert!(place.ckpt_has(name, &left.pending_file()).await);
    assert_eq!(place.fs.find(&out).await.unwrap().len(), 2);
    let run = place.open(name).await.unwrap();
    assert_eq!(run.recovery().rolled_back, vec![left]);
    assert_eq!(run.committed().len(), 2);
    unit(&run, &out, &[3, 4], true).await;
    assert!(run.finish().await.unwrap().removed_directory);
    assert_eq!(ids_in(&place.fs, &out).await, once_each(1..=4));
}

/// Trap 2: a committed unit's data file deleted, or the whole output: the
/// reopen returned `Ok` and its IDs were skipped for ever.
async fn open_refuses_missing_data(place: &Place) {
    let name = "missing";
    let out = place.out(name);
    let run = place.open(name).await.unwrap();
    let first = unit(&run, &out, &[1, 2], true).await;
    unit(&run, &out, &[3], true).await;
    run.abandon().await.unwrap();
    place
        .fs
        .rm_file(&format!("{out}/{}", first.data_file(0, "txt")))
        .await
        .unwrap();
    let err = place.open(name).await.unwrap_err();
    assert!(matches!(err, Error::DataMissing { units: 1, .. }), "{err}");
    assert!(err.to_string().contains(first.as_str()), "{err}");
    // Refused without a change: both commits still there, lease released.
    assert!(place.ckpt_has(name, &first.committed_file()).await);
    place
        .fs
        .rm_with(&out, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
    let err = place.open(name).await.unwrap_err();
    assert!(matches!(err, Error::DataMissing { units: 2, .. }), "{err}");
}

/// Trap 3: a fresh checkpoint over an output holding another run's files
/// (the documented "start over by deleting the checkpoint") wrote
/// duplicates.
async fn open_refuses_a_full_output_for_a_new_checkpoint(place: &Place) {
    let name = "full";
    let out = place.out(name);
    let theirs = format!("{out}/part-0.txt");
    place
        .fs
        .pipe(&theirs, "1\n2\n".into(), WriteMode::Create)
        .await
        .unwrap();
    let err = place.open(name).await.unwrap_err();
    assert!(matches!(err, Error::OutputNotEmpty { .. }), "{err}");
    let said = err.to_string();
    assert!(
        said.contains("part-0.txt") && said.contains("append_to_existing_output"),
        "{said}"
    );
    // The checkpoint this open made is gone; their file stays.
    assert!(!place.fs.exists(&place.ckpt(name)).await.unwrap());
    assert!(place.fs.exists(&theirs).await.unwrap());
    // The escape hatch the error names.
    let run = place
        .checkpoint(name)
        .append_to_existing_output()
        .open(&place.fs, &out)
        .await
        .unwrap();
    unit(&run, &out, &[3], true).await;
    run.finish().await.unwrap();
    assert_eq!(ids_in(&place.fs, &out).await, once_each(1..=3));
}

/// Traps 4 and 6: `commit` took the IDs again (committing `[10]` for a
/// unit begun with `[8, 9]`), a unit never begun was "lease lost", and the
/// pending record stayed until the next open.
async fn commit_takes_the_begun_ids_and_drops_the_pending_record(place: &Place) {
    let name = "commit";
    let out = place.out(name);
    let run = place
        .checkpoint(name)
        .keep_on_success()
        .open(&place.fs, &out)
        .await
        .unwrap();
    let done = unit(&run, &out, &[8, 9], true).await;
    assert!(!place.ckpt_has(name, &done.pending_file()).await);
    let committed = place
        .fs
        .cat(&format!("{}/{}", place.ckpt(name), done.committed_file()))
        .await
        .unwrap();
    assert_eq!(parquet_ints(committed), vec![8, 9]);
    let never = run.next_unit();
    let err = run.commit(&never, 1).await.unwrap_err();
    assert!(matches!(err, Error::UnitNotBegun { .. }), "{err}");
    assert!(err.to_string().contains(never.as_str()), "{err}");
    let err = run.commit(&done, 1).await.unwrap_err();
    assert!(matches!(err, Error::UnitNotBegun { .. }), "{err}");
    assert!(!place.ckpt_has(name, &never.committed_file()).await);
    run.finish().await.unwrap();
}

/// Trap 5: a run dropped on an error path kept its lease, and a retry in
/// the same process was refused for the lease's whole lifetime (120 s by
/// default) naming its own pid. Now the retry waits out a quarter of it
/// (the margin for writes the dropped run had sent) and goes on.
async fn a_dropped_run_frees_its_lease(place: &Place) {
    let name = "dropped";
    let out = place.out(name);
    let run = place.open(name).await.unwrap();
    let left = unit(&run, &out, &[1], false).await;
    drop(run);
    let started = std::time::Instant::now();
    let run = place.open(name).await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(700),
        "took the lease after {waited:?}"
    );
    assert_eq!(run.recovery().rolled_back, vec![left]);
    unit(&run, &out, &[1], true).await;
    // Dropped again: the lease is released in the background, for other
    // processes too.
    drop(run);
    let dir = CheckpointDir::new(place.fs.clone(), &place.ckpt(name), "id");
    let mut released = false;
    for _ in 0..100 {
        let lease = dir.read_lease().await.unwrap().expect("a lease record");
        if lease.released {
            released = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        released,
        "the dropped run's lease was never marked released"
    );
    let run = place.open(name).await.unwrap();
    run.finish().await.unwrap();
    assert_eq!(ids_in(&place.fs, &out).await, once_each(1..=1));
}

/// The kind of ID is refused alike on a fresh checkpoint and a resumed
/// one (before, `committed()` of a fresh checkpoint took any kind).
async fn the_id_kind_is_checked_alike_before_and_after_a_reopen(place: &Place) {
    let name = "kind";
    let out = place.out(name);
    let strings = StringArray::from(vec!["a"]);
    let run = place.open(name).await.unwrap();
    assert_eq!(
        run.is_committed(&Int64Array::from(vec![1]))
            .unwrap()
            .true_count(),
        0
    );
    let before = run.is_committed(&strings).unwrap_err();
    unit(&run, &out, &[1], true).await;
    run.abandon().await.unwrap();
    let run = place.open(name).await.unwrap();
    let after = run.is_committed(&strings).unwrap_err();
    assert_eq!(before.to_string(), after.to_string());
    assert!(matches!(after, Error::IdTypeMismatch { .. }), "{after}");
    let debug = format!("{run:?}");
    assert!(
        debug.len() < 400 && !debug.contains("holder") && !debug.contains("keeper"),
        "{debug}"
    );
    run.finish().await.unwrap();
}

/// A job whose clean-up was cut short (the completion marker left): the
/// next run writes nothing and ends the clean-up.
async fn a_finished_job_writes_nothing(place: &Place) {
    let name = "finished";
    let out = place.out(name);
    let run = place.open(name).await.unwrap();
    unit(&run, &out, &[1, 2], true).await;
    run.finish_keeping_marker().await.unwrap();
    let run = place.open(name).await.unwrap();
    assert!(run.finished_before());
    let unit_name = run.next_unit();
    let err = run.begin(&unit_name, ints(&[1])).await.unwrap_err();
    assert!(matches!(err, Error::JobFinished { .. }), "{err}");
    assert!(run.finish().await.unwrap().removed_directory);
    assert_eq!(ids_in(&place.fs, &out).await, once_each(1..=2));
}

/// The IDs of a one-column Parquet file, read with the parquet crate.
fn parquet_ints(bytes: bytes::Bytes) -> Vec<i64> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let column = arrow_cast_i64(batch.column(0));
        out.extend(column);
    }
    out
}

fn arrow_cast_i64(array: &ArrayRef) -> Vec<i64> {
    array
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("an Int64 ID column")
        .values()
        .to_vec()
}

/// How often each ID is in the output's files (one ID a line), read
/// file by file.
async fn ids_in(fs: &FileSystem, out: &str) -> BTreeMap<i64, usize> {
    let mut seen = BTreeMap::new();
    for file in fs.find(out).await.unwrap() {
        let text = String::from_utf8(fs.cat(&file.name).await.unwrap().to_vec()).unwrap();
        for line in text.lines() {
            *seen.entry(line.parse::<i64>().unwrap()).or_default() += 1;
        }
    }
    seen
}

fn once_each(ids: impl Iterator<Item = i64>) -> BTreeMap<i64, usize> {
    ids.map(|id| (id, 1)).collect()
}

#[tokio::test]
async fn on_memory() {
    every_promise(Place::memory()).await;
}

#[tokio::test]
async fn on_local_disk() {
    every_promise(Place::local()).await;
}

#[tokio::test]
async fn on_garage() {
    if let Some(place) = Place::s3("GARAGE") {
        every_promise(place).await;
    }
}

#[tokio::test]
async fn on_moto() {
    if let Some(place) = Place::s3("MOTO") {
        every_promise(place).await;
    }
}

mod drawn_runs {
    //! Drawn sequences of runs over one input, each stopping its own way,
    //! then a run that finishes: the output holds every ID once.

    use super::*;
    use proptest::prelude::*;

    /// How a run that does not finish its input stops.
    #[derive(Debug, Clone, Copy)]
    enum Stop {
        /// Dropped mid-unit (a `?` on an error path, or a crash on memory).
        Drop,
        /// `finish` called with the unit in flight (refused).
        FinishEarly,
        /// `abandon` with the unit in flight.
        Abandon,
    }

    fn stop() -> impl Strategy<Value = Stop> {
        prop_oneof![
            Just(Stop::Drop),
            Just(Stop::FinishEarly),
            Just(Stop::Abandon)
        ]
    }

    /// One run over the input in batches of `batch`: skips the committed
    /// IDs, commits each unit, and, when `cut` is `(k, stop)`, leaves its
    /// k-th unit begun (data written) and stops as `stop` says. Whether it
    /// finished.
    async fn one_run(
        checkpoint: &Checkpoint,
        fs: &FileSystem,
        out: &str,
        input: &[i64],
        batch: usize,
        cut: Option<(usize, Stop)>,
    ) -> bool {
        let run = checkpoint.open(fs, out).await.unwrap();
        let mut units = 0;
        for chunk in input.chunks(batch) {
            let array = Int64Array::from(chunk.to_vec());
            let done = run.is_committed(&array).unwrap();
            let todo: Vec<i64> = chunk
                .iter()
                .zip(done.iter())
                .filter(|(_, done)| *done != Some(true))
                .map(|(id, _)| *id)
                .collect();
            if todo.is_empty() {
                continue;
            }
            let stop_here = cut.filter(|(k, _)| *k == units);
            let name = unit(&run, out, &todo, stop_here.is_none()).await;
            units += 1;
            if let Some((_, stop)) = stop_here {
                match stop {
                    Stop::Drop => drop(run),
                    Stop::FinishEarly => {
                        let err = run.finish().await.unwrap_err();
                        assert!(err.to_string().contains(name.as_str()), "{err}");
                    }
                    Stop::Abandon => run.abandon().await.unwrap(),
                }
                return false;
            }
        }
        run.finish().await.unwrap();
        true
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn every_id_once_after_any_stops(
            ids in 1usize..60,
            batch in 1usize..12,
            cuts in proptest::collection::vec((0usize..6, stop()), 0..5),
        ) {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async {
                let tmp = tempfile::tempdir().unwrap();
                let root = tmp.path().display().to_string();
                let fs = FileSystem::new("file", &StorageOptions::new()).unwrap();
                let out = format!("{root}/out");
                let checkpoint = Checkpoint::at(&format!("{root}/ckpt"), &StorageOptions::new(), "id")
                    .unwrap()
                    .lease_ttl(Duration::from_secs(3))
                    .unwrap();
                let input: Vec<i64> = (0..ids as i64).collect();
                for cut in &cuts {
                    if one_run(&checkpoint, &fs, &out, &input, batch, Some(*cut)).await {
                        break;
                    }
                }
                // A last run without a cut finishes (a run before it may
                // have finished already: then the output is full and the
                // fresh checkpoint refuses it).
                let finished_before = !std::path::Path::new(&format!("{root}/ckpt")).exists()
                    && std::path::Path::new(&out).exists();
                if !finished_before {
                    assert!(one_run(&checkpoint, &fs, &out, &input, batch, None).await);
                }
                // The oracle: the output's files read with std::fs.
                let mut seen = BTreeMap::<i64, usize>::new();
                for entry in std::fs::read_dir(&out).unwrap() {
                    let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
                    for line in text.lines() {
                        *seen.entry(line.parse().unwrap()).or_default() += 1;
                    }
                }
                assert_eq!(seen, once_each(0..ids as i64));
                assert!(!std::path::Path::new(&format!("{root}/ckpt")).exists());
            });
        }
    }
}

mod table_output {
    //! A table output whose log lost committed units is refused before any
    //! pending unit is settled.

    use std::collections::{HashMap, HashSet};

    use cairn_checkpoint::UnitName;
    use cairn_checkpoint::internals::{CheckpointConfig, RunId, UnitLog};
    use futures::future::BoxFuture;

    use super::*;

    /// A table that records the units in its list (none: moved away).
    #[derive(Debug)]
    struct Table(Vec<UnitName>);

    impl UnitLog for Table {
        fn recorded<'a>(
            &'a self,
            units: &'a [UnitName],
        ) -> BoxFuture<'a, cairn_checkpoint::Result<HashSet<UnitName>>> {
            Box::pin(async move {
                Ok(units
                    .iter()
                    .filter(|u| self.0.contains(u))
                    .cloned()
                    .collect())
            })
        }
        fn table(&self) -> String {
            "memory:///a-table".into()
        }
    }

    /// Settings for the checkpoint `name` of `place`, for the internals
    /// these tests set (a unit log, an input digest).
    fn config(place: &Place, name: &str) -> CheckpointConfig {
        let mut config = CheckpointConfig::new("id", &place.ckpt(name));
        config.filesystem = Some(place.fs.clone());
        config
    }

    /// `ids` committed as `unit` in `dir`, as a run leaves a committed unit.
    async fn committed(dir: &CheckpointDir, unit: &UnitName, ids: &[i64]) {
        dir.write_pending(unit, ints(ids)).await.unwrap();
        dir.commit(unit, ints(ids)).await.unwrap();
        dir.release_pending(unit).await.unwrap();
    }

    /// Finding 4 of tables round 2: a unit held between its table commit
    /// and its checkpoint commit, the table not found at the resume: the
    /// refusal dropped the held unit's pending record first, and once the
    /// table was back its rows were written twice.
    #[tokio::test]
    async fn a_table_that_lost_units_is_refused_before_anything_is_settled() {
        let place = Place::memory();
        let ckpt = place.ckpt("table");
        let dir = CheckpointDir::new(place.fs.clone(), &ckpt, "id");
        let run = RunId::new();
        let (done, held) = (UnitName::new(&run, 0), UnitName::new(&run, 1));
        committed(&dir, &done, &[1]).await;
        dir.write_pending(&held, ints(&[2])).await.unwrap();
        let open = |table: Table| {
            let mut config = config(&place, "table");
            config.unit_log = Some(Arc::new(table));
            let out = place.out("table");
            let fs = place.fs.clone();
            async move { Checkpoint::with_config(config, None).open(&fs, &out).await }
        };
        let err = open(Table(Vec::new())).await.unwrap_err();
        assert!(
            matches!(err, Error::UnitsNotInTable { units: 1, .. }),
            "{err}"
        );
        assert!(
            place.ckpt_has("table", &held.pending_file()).await,
            "the held unit was settled"
        );
        // The table back: the held unit is committed from its log, not redone.
        let run = open(Table(vec![done.clone(), held.clone()])).await.unwrap();
        assert_eq!(run.recovery().committed_from_table, vec![held]);
        run.abandon().await.unwrap();
    }

    /// A table whose units' rows hold other IDs than their pending
    /// records: `record` is what it gives as each unit's committed record.
    #[derive(Debug)]
    struct TableWithRows {
        table: Table,
        record: Vec<u8>,
    }

    impl UnitLog for TableWithRows {
        fn recorded<'a>(
            &'a self,
            units: &'a [UnitName],
        ) -> BoxFuture<'a, cairn_checkpoint::Result<HashSet<UnitName>>> {
            self.table.recorded(units)
        }
        fn table(&self) -> String {
            "memory:///a-table".into()
        }
        fn committed_records<'a>(
            &'a self,
            units: &'a [UnitName],
            id_column: &'a str,
        ) -> BoxFuture<'a, cairn_checkpoint::Result<HashMap<UnitName, Vec<u8>>>> {
            assert_eq!(id_column, "id");
            Box::pin(async move {
                Ok(units
                    .iter()
                    .map(|u| (u.clone(), self.record.clone()))
                    .collect())
            })
        }
    }

    /// A Parquet file of one `id` column, written by the parquet crate as
    /// Ray's checkpoint writer lays a record out.
    fn id_file(ids: &[i64]) -> Vec<u8> {
        let batch = arrow_array::RecordBatch::try_from_iter([("id", ints(ids))]).unwrap();
        let mut out = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        out
    }

    /// Finding 6 of tables round 2: a task retried with a transform that
    /// is not deterministic rewrote its pending record from its own rows,
    /// other than those its earlier attempt committed to the table, and
    /// recovery committed the pending record's IDs: the table's other rows
    /// were written again, and the record's others skipped though never
    /// written. A unit found in the table is committed with the table's.
    #[tokio::test]
    async fn a_unit_found_in_the_table_is_committed_with_the_tables_ids() {
        let place = Place::memory();
        let ckpt = place.ckpt("table-ids");
        let dir = CheckpointDir::new(place.fs.clone(), &ckpt, "id");
        let held = UnitName::new(&RunId::new(), 0);
        dir.write_pending(&held, ints(&[3, 4])).await.unwrap();
        let mut config = config(&place, "table-ids");
        config.unit_log = Some(Arc::new(TableWithRows {
            table: Table(vec![held.clone()]),
            record: id_file(&[2, 3]),
        }));
        let run = Checkpoint::with_config(config, None)
            .open(&place.fs, &place.out("table-ids"))
            .await
            .unwrap();
        assert_eq!(run.recovery().committed_from_table, vec![held.clone()]);
        let committed = run.is_committed(ints(&[2, 3, 4]).as_ref()).unwrap();
        assert_eq!(
            (0..3).map(|i| committed.value(i)).collect::<Vec<_>>(),
            [true, true, false],
            "the table's IDs, not the pending record's"
        );
        assert!(!place.ckpt_has("table-ids", &held.pending_file()).await);
        run.abandon().await.unwrap();
    }

    /// Finding 5 of tables round 2: the door that ends a job (Ray's, which
    /// opens without the file-output check) never asked the table, so a
    /// unit lost while the job ran was deleted with the checkpoint.
    #[tokio::test]
    async fn the_end_of_a_job_checks_its_units_in_the_table() {
        let place = Place::memory();
        let ckpt = place.ckpt("table-end");
        let dir = CheckpointDir::new(place.fs.clone(), &ckpt, "id");
        let run = RunId::new();
        let (kept, lost) = (UnitName::new(&run, 0), UnitName::new(&run, 1));
        committed(&dir, &kept, &[1]).await;
        committed(&dir, &lost, &[2]).await;
        let mut config = config(&place, "table-end");
        config.unit_log = Some(Arc::new(Table(vec![kept.clone()])));
        let err = Checkpoint::with_config(config, None)
            .without_output_check()
            .open(&place.fs, &place.out("table-end"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::UnitsNotInTable { units: 1, ref examples, .. } if examples.contains(lost.as_str())),
            "{err}"
        );
        assert!(place.ckpt_has("table-end", &lost.committed_file()).await);
        assert!(place.ckpt_has("table-end", &kept.committed_file()).await);
    }

    /// Finding 3 of tables round 2: a finished job's marker (a driver that
    /// died after its job) made a run over new input write nothing. With
    /// the input's digest recorded, the marker binds the job to it.
    #[tokio::test]
    async fn a_finished_job_is_this_one_only_over_its_input() {
        let place = Place::memory();
        let out = place.out("digest");
        let open = |digest: Option<&str>| {
            let mut config = config(&place, "digest");
            config.input_digest = digest.map(str::to_string);
            let (fs, out) = (place.fs.clone(), out.clone());
            async move { Checkpoint::with_config(config, None).open(&fs, &out).await }
        };
        let run = open(Some("2 files, sha256 aa")).await.unwrap();
        unit(&run, &out, &[1, 2], true).await;
        run.finish_keeping_marker().await.unwrap();
        let err = open(Some("3 files, sha256 bb")).await.unwrap_err();
        assert!(
            matches!(err, Error::FinishedOverOtherInput { ref read, ref now, .. }
                if read == "2 files, sha256 aa" && now == "3 files, sha256 bb"),
            "{err}"
        );
        assert!(
            err.to_string().contains(".cairn-complete"),
            "the way out names the marker: {err}"
        );
        assert!(place.ckpt_has("digest", ".cairn-complete").await);
        // A door that does not know its input, or the same input: the
        // finished job's run, which writes nothing and ends the clean-up.
        for digest in [None, Some("2 files, sha256 aa")] {
            let run = open(digest).await.unwrap();
            assert!(run.finished_before(), "{digest:?}");
            run.abandon().await.unwrap();
        }
        let run = open(Some("2 files, sha256 aa")).await.unwrap();
        assert!(run.finish().await.unwrap().removed_directory);
        assert_eq!(ids_in(&place.fs, &out).await, once_each(1..=2));
    }
}
