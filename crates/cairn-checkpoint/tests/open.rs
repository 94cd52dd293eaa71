//! Opening a checkpoint for a run: lease, recovery, loading, in that order,
//! and the configuration errors.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array};
use cairn_checkpoint::internals::{CheckpointConfig, CheckpointDir, RunId, encode_ids};
use cairn_checkpoint::{Error, UnitName};
use cairn_fs::{FileSystem, StorageOptions, WriteMode};

fn ids(v: &[i64]) -> ArrayRef {
    Arc::new(Int64Array::from(v.to_vec()))
}

/// Steps 1 and 2 of a unit holding `values`: its pending record and one
/// data file in `out`.
async fn write_unit(
    dir: &CheckpointDir,
    fs: &FileSystem,
    out: &str,
    unit: &UnitName,
    values: &[i64],
) {
    dir.write_pending(unit, ids(values)).await.unwrap();
    fs.pipe(
        &format!("{out}/{}0.parquet", unit.data_prefix()),
        encode_ids("id", ids(values)).unwrap(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn open_takes_the_lease_recovers_and_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let config = CheckpointConfig::new("id", &format!("{root}/ckpt"));
    let fs = FileSystem::new("file", &StorageOptions::new()).unwrap();
    let out = format!("{root}/out");
    // A previous run committed one unit and died inside another.
    let dir = config.dir().unwrap();
    let run = RunId::new();
    let (done, dead) = (UnitName::new(&run, 0), UnitName::new(&run, 1));
    write_unit(&dir, &fs, &out, &done, &[1, 2]).await;
    dir.commit(&done, ids(&[1, 2])).await.unwrap();
    write_unit(&dir, &fs, &out, &dead, &[3]).await;

    let open = config.open(&fs, &out).await.unwrap();
    assert_eq!(open.recovery().rolled_back, [dead]);
    assert_eq!(open.recovery().released, std::slice::from_ref(&done));
    assert_eq!(open.recovery().data_files_deleted, 1);
    assert_eq!(open.state().ids.len(), 2);
    assert!(open.state().pending.is_empty());
    assert_eq!(
        fs.find(&out).await.unwrap().len(),
        1,
        "only the committed unit's data"
    );

    let second = config.open(&fs, &out).await.unwrap_err();
    assert!(matches!(second, Error::LeaseHeld { .. }), "{second}");
    open.release().await.unwrap();
}

#[tokio::test]
async fn bad_configuration_and_a_file_as_checkpoint_path() {
    let fs = FileSystem::new("file", &StorageOptions::new()).unwrap();
    for (config, needle) in [
        (CheckpointConfig::new(" ", "/tmp/x"), "id_column"),
        (CheckpointConfig::new("id", "ckpt"), "relative"),
        (
            CheckpointConfig {
                commit_rows: 0,
                ..CheckpointConfig::new("id", "/tmp/x")
            },
            "commit interval",
        ),
    ] {
        let err = config.open(&fs, "/tmp/out").await.unwrap_err();
        assert!(
            matches!(err, Error::InvalidConfig { .. }) && err.to_string().contains(needle),
            "{err}"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = format!("{}/not-a-dir", tmp.path().display());
    std::fs::write(&file, "x").unwrap();
    let err = CheckpointConfig::new("id", &file)
        .open(&fs, "/tmp/out")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not-a-dir"), "{err}");
    assert!(std::path::Path::new(&file).exists(), "nothing deleted");
    let err = CheckpointConfig::new("id", "nope://x/y")
        .open(&fs, "/tmp/out")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("known schemes"), "{err}");
}

/// Clean-up killed halfway: the completion marker is there, unit `a`'s
/// committed record is already gone but its pending record is not. The next
/// open must not roll `a` back (its data is part of the finished output),
/// and clean-up must finish.
#[tokio::test]
async fn an_interrupted_clean_up_is_finished_not_rolled_back() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let config = CheckpointConfig::new("id", &format!("{root}/ckpt"));
    let fs = FileSystem::new("file", &StorageOptions::new()).unwrap();
    let out = format!("{root}/out");
    // The first open binds the checkpoint to its output, as every run does.
    let first = config.open(&fs, &out).await.unwrap();
    first.release().await.unwrap();
    let dir = config.dir().unwrap();
    let run = RunId::new();
    let (a, b) = (UnitName::new(&run, 0), UnitName::new(&run, 1));
    for (unit, values) in [(&a, [1, 2]), (&b, [3, 4])] {
        write_unit(&dir, &fs, &out, unit, &values).await;
        dir.commit(unit, ids(&values)).await.unwrap();
    }
    // What a clean-up of older cairn (an empty marker) killed after its
    // first deletion leaves.
    fs.pipe(
        &format!("{root}/ckpt/{}", cairn_checkpoint::internals::COMPLETE_FILE),
        bytes::Bytes::new(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    fs.rm(&format!("{root}/ckpt/{}", a.committed_file()))
        .await
        .unwrap();

    let open = config.open(&fs, &out).await.unwrap();
    assert!(open.state().complete);
    assert!(open.recovery().rolled_back.is_empty());
    assert_eq!(
        fs.find(&out).await.unwrap().len(),
        2,
        "the finished output is intact"
    );
    open.dir().clean_up(None).await.unwrap();
    assert!(!fs.exists(&format!("{root}/ckpt")).await.unwrap());
    assert_eq!(fs.find(&out).await.unwrap().len(), 2);
}

/// The front door's refusals and reports: IDs of another kind than the
/// checkpoint's, a path of another filesystem, a lease lost without a new
/// holder said in words, and a memory:// checkpoint reported removed.
#[tokio::test]
async fn the_run_api_refuses_what_would_corrupt_the_checkpoint() {
    use cairn_checkpoint::Checkpoint;
    let memory = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    let err = Checkpoint::on(&memory, "s3://bucket/ckpt", "id").unwrap_err();
    assert!(
        err.to_string().contains("s3://bucket/ckpt") && err.to_string().contains("memory"),
        "{err}"
    );
    // The same backend under an alias is the same filesystem.
    let local = FileSystem::new("file", &StorageOptions::new()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    Checkpoint::on(&local, &format!("local://{root}/ckpt"), "id").unwrap();

    // A first run commits integer IDs; the next run's string IDs are
    // refused before anything is written, naming both kinds.
    let checkpoint = Checkpoint::on(&memory, "memory:///run-api/ckpt", "id").unwrap();
    let run = checkpoint
        .open(&memory, "memory:///run-api/out")
        .await
        .unwrap();
    let unit = run.next_unit();
    run.begin(&unit, ids(&[1, 2])).await.unwrap();
    run.commit(&unit, 0).await.unwrap();
    run.abandon().await.unwrap();
    let run = checkpoint
        .open(&memory, "memory:///run-api/out")
        .await
        .unwrap();
    assert_eq!(run.committed().len(), 2);
    let strings: ArrayRef = Arc::new(arrow_array::StringArray::from(vec!["1"]));
    let unit = run.next_unit();
    let err = run.begin(&unit, strings).await.unwrap_err();
    assert!(matches!(err, Error::IdTypeMismatch { .. }), "{err}");
    assert!(
        err.to_string().contains("integer") && err.to_string().contains("string"),
        "{err}"
    );
    assert!(
        !memory
            .exists(&format!("memory:///run-api/ckpt/{}", unit.pending_file()))
            .await
            .unwrap()
    );
    let report = run.finish().await.unwrap();
    assert!(report.removed_directory, "{report:?}");
    assert!(!memory.exists("memory:///run-api/ckpt").await.unwrap());

    let lost = Error::LeaseLost {
        path: "memory:///c".into(),
        holder: None,
    };
    assert!(!lost.to_string().contains("None"), "{lost}");
}

#[test]
fn a_report_shows_unit_names_without_rust_syntax() {
    let report = cairn_checkpoint::RecoveryReport {
        rolled_back: vec![UnitName::from_stem("run_0000000004")],
        ..Default::default()
    };
    let shown = format!("{report:?}");
    assert!(
        shown.contains("[\"run_0000000004\"]") && !shown.contains("UnitName"),
        "{shown}"
    );
}

/// A unit [`TableHolding`] was asked to delete the files of: its name, its
/// entry, and whether its pending record was still there.
type DeleteAsked = (String, Option<String>, bool);

/// A table output's log, as a test draws it: the units whose transaction
/// the table's history records, the ledger entries its current files hold
/// (an entry is `live` or `gone`), and whether maintenance cut its history;
/// the units it was asked to delete the files of are kept in `deleted`
/// (with whether their pending record was still there, on local disk under
/// `checkpoint`); with `fail_deletes`, that call fails.
#[derive(Debug, Default)]
struct TableHolding {
    recorded: std::collections::HashSet<String>,
    cut: Option<String>,
    deleted: Arc<std::sync::Mutex<Vec<DeleteAsked>>>,
    checkpoint: String,
    fail_deletes: bool,
}

impl cairn_checkpoint::internals::UnitLog for TableHolding {
    fn recorded<'a>(
        &'a self,
        units: &'a [UnitName],
    ) -> futures::future::BoxFuture<'a, cairn_checkpoint::Result<std::collections::HashSet<UnitName>>>
    {
        Box::pin(async move {
            Ok(units
                .iter()
                .filter(|u| self.recorded.contains(u.as_str()))
                .cloned()
                .collect())
        })
    }

    fn table(&self) -> String {
        "memory:///table".into()
    }

    fn lineage<'a>(
        &'a self,
        units: &'a [UnitName],
    ) -> futures::future::BoxFuture<
        'a,
        cairn_checkpoint::Result<cairn_checkpoint::internals::Lineage>,
    > {
        Box::pin(async move {
            Ok(cairn_checkpoint::internals::Lineage {
                recorded: self.recorded(units).await?,
                cut: self.cut.clone(),
            })
        })
    }

    fn held_by_ledger<'a>(
        &'a self,
        entries: &'a [(UnitName, String)],
    ) -> futures::future::BoxFuture<'a, cairn_checkpoint::Result<std::collections::HashSet<UnitName>>>
    {
        Box::pin(async move { Ok(with_entry(entries, "live")) })
    }

    fn absent_by_ledger<'a>(
        &'a self,
        entries: &'a [(UnitName, String)],
    ) -> futures::future::BoxFuture<'a, cairn_checkpoint::Result<std::collections::HashSet<UnitName>>>
    {
        Box::pin(async move { Ok(with_entry(entries, "absent")) })
    }

    /// Deletes one file for each unit with an entry (as a log that proved
    /// the entry's files unreferenced would), or fails.
    fn delete_unreferenced<'a>(
        &'a self,
        rolled_back: &'a [cairn_checkpoint::internals::RolledBack],
    ) -> futures::future::BoxFuture<'a, cairn_checkpoint::Result<usize>> {
        Box::pin(async move {
            let mut deleted = self.deleted.lock().unwrap();
            for told in rolled_back {
                // Its record was written just now: an age, and a small one.
                assert_eq!(told.age.is_some(), told.entry.is_some(), "{told:?}");
                assert!(told.age.unwrap_or_default() < std::time::Duration::from_secs(60));
                let pending = std::path::Path::new(&self.checkpoint).join(told.unit.pending_file());
                deleted.push((
                    told.unit.as_str().to_string(),
                    told.entry.clone(),
                    pending.exists(),
                ));
            }
            if self.fail_deletes {
                return Err(cairn_checkpoint::Error::TableLog {
                    table: self.table(),
                    reason: "the store failed".into(),
                });
            }
            Ok(rolled_back
                .iter()
                .filter(|told| told.entry.is_some())
                .count())
        })
    }
}

/// The units of `entries` whose entry is `wanted`.
fn with_entry(entries: &[(UnitName, String)], wanted: &str) -> std::collections::HashSet<UnitName> {
    entries
        .iter()
        .filter(|(_, entry)| entry == wanted)
        .map(|(unit, _)| unit.clone())
        .collect()
}

/// A unit's record as a table sink writes it, made with the parquet crate
/// itself: `values`, and the ledger entry `entry` under
/// `cairn.table_ledger`.
fn record_with_ledger(values: &[i64], entry: &str) -> bytes::Bytes {
    let batch = arrow_array::RecordBatch::try_from_iter([("id", ids(values))]).unwrap();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
            "cairn.table_ledger".to_string(),
            entry.to_string(),
        )]))
        .build();
    let mut out = Vec::new();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    bytes::Bytes::from(out)
}

/// What a drawn unit was when the run died.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Died {
    /// Committed in the checkpoint, recorded by the table's history.
    Committed,
    /// Committed, its pending record still there (a commit cut short
    /// before the pending record's delete).
    CommittedTwin,
    /// Committed, its history gone, its ledger entry's files live.
    CommittedByLedger,
    /// Committed, not in the history, its entry's files not live (the
    /// table was restored to before it): the open refuses.
    CommittedLost,
    /// Pending, its table commit recorded by the history.
    PendingInTable,
    /// Pending, no ledger entry: its commit never began.
    PendingNotInTable,
    /// Pending, its history gone, its entry's files live.
    PendingByLedger,
    /// Pending, its commit began (an entry) and did not land: rolled back
    /// where the history is whole, undecided where it is cut.
    PendingBegun,
    /// Pending, its commit began and did not land, and the history left
    /// shows it (it reaches the commit's base): rolled back.
    PendingBegunAbsent,
}

fn died() -> impl proptest::strategy::Strategy<Value = Died> {
    proptest::prop_oneof![
        4 => proptest::strategy::Just(Died::Committed),
        1 => proptest::strategy::Just(Died::CommittedTwin),
        2 => proptest::strategy::Just(Died::CommittedByLedger),
        1 => proptest::strategy::Just(Died::CommittedLost),
        2 => proptest::strategy::Just(Died::PendingInTable),
        2 => proptest::strategy::Just(Died::PendingNotInTable),
        2 => proptest::strategy::Just(Died::PendingByLedger),
        1 => proptest::strategy::Just(Died::PendingBegun),
        1 => proptest::strategy::Just(Died::PendingBegunAbsent),
    ]
}

/// The checkpoint's records and their bytes, for "nothing was changed".
async fn records(fs: &FileSystem, dir: &str) -> std::collections::BTreeMap<String, bytes::Bytes> {
    let mut found = std::collections::BTreeMap::new();
    for entry in fs.ls(dir).await.unwrap_or_default() {
        if entry.name.ends_with(".parquet") {
            let bytes = fs.cat(&entry.name).await.unwrap();
            found.insert(entry.name, bytes);
        }
    }
    found
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Settling by a table's log and ledger: the IDs committed afterwards
    /// are exactly those of the units the table holds (every row the table
    /// shows is skipped on resume, no row it lacks is), no unit stays
    /// pending, and nothing in the output is deleted; a committed unit the
    /// table lost, or a begun unit under a cut history, refuses the open
    /// with the checkpoint unchanged. The oracle is the drawn table and a
    /// listing of the output, not cairn's report.
    #[test]
    fn a_table_output_is_settled_by_its_log(
        units in proptest::collection::vec(died(), 0..12),
        cut in proptest::bool::ANY,
        fail_deletes in proptest::bool::weighted(0.2),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().display().to_string();
            let fs = FileSystem::new("file", &StorageOptions::new()).unwrap();
            let out = format!("{root}/table");
            // A table's own files, which no unit name owns, and one that a
            // unit's name starts (a table names its files; cairn deletes none).
            let run = RunId::new();
            let mut table_files = vec![format!("{out}/_delta_log/00000000000000000000.json")];
            table_files.push(format!("{out}/{}-0.parquet", UnitName::new(&run, 0).as_str()));
            for f in &table_files {
                fs.pipe(f, "x".into(), WriteMode::Overwrite).await.unwrap();
            }
            let ckpt = format!("{root}/ckpt");
            let mut config = CheckpointConfig::new("id", &ckpt);
            let dir = config.dir().unwrap();
            let mut log = TableHolding {
                cut: cut.then(|| "versions 1 to 9 cleaned up".to_string()),
                checkpoint: ckpt.clone(),
                fail_deletes,
                ..Default::default()
            };
            let mut expected = std::collections::BTreeSet::new();
            // The units rolled back, with the entry their record holds: the
            // ones whose files the log is asked to delete.
            let mut rolled_back = std::collections::BTreeMap::new();
            for (i, kind) in units.iter().enumerate() {
                let unit = UnitName::new(&run, i as u64);
                let values = [i as i64 * 10, i as i64 * 10 + 1];
                let pending = format!("{ckpt}/{}", unit.pending_file());
                let committed = format!("{ckpt}/{}", unit.committed_file());
                match kind {
                    Died::Committed | Died::CommittedTwin => {
                        dir.write_pending(&unit, ids(&values)).await.unwrap();
                        dir.commit(&unit, ids(&values)).await.unwrap();
                        if *kind == Died::CommittedTwin {
                            dir.write_pending(&unit, ids(&values)).await.unwrap();
                        }
                        log.recorded.insert(unit.as_str().to_string());
                        expected.extend(values);
                    }
                    Died::CommittedByLedger | Died::CommittedLost => {
                        let entry = if *kind == Died::CommittedByLedger { "live" } else { "gone" };
                        fs.pipe(&committed, record_with_ledger(&values, entry), WriteMode::Create)
                            .await
                            .unwrap();
                        expected.extend(values);
                    }
                    Died::PendingInTable => {
                        dir.write_pending(&unit, ids(&values)).await.unwrap();
                        log.recorded.insert(unit.as_str().to_string());
                        expected.extend(values);
                    }
                    Died::PendingNotInTable => {
                        dir.write_pending(&unit, ids(&values)).await.unwrap();
                        rolled_back.insert(unit.as_str().to_string(), None);
                    }
                    Died::PendingByLedger | Died::PendingBegun | Died::PendingBegunAbsent => {
                        let entry = match kind {
                            Died::PendingByLedger => "live",
                            Died::PendingBegun => "gone",
                            _ => "absent",
                        };
                        fs.pipe(&pending, record_with_ledger(&values, entry), WriteMode::Overwrite)
                            .await
                            .unwrap();
                        if *kind == Died::PendingByLedger {
                            expected.extend(values);
                        } else {
                            rolled_back.insert(unit.as_str().to_string(), Some(entry.to_string()));
                        }
                    }
                }
            }
            let deleted = log.deleted.clone();
            config.unit_log = Some(Arc::new(log));
            let before = records(&fs, &ckpt).await;
            let lost = units.contains(&Died::CommittedLost);
            let undecided = cut && units.contains(&Died::PendingBegun);
            let opened = config.open(&fs, &out).await;
            if lost || undecided {
                let Err(err) = opened else { panic!("the open must refuse") };
                if lost {
                    assert!(matches!(err, Error::UnitsNotInTable { .. }), "{err}");
                } else {
                    assert!(matches!(err, Error::UnitUndecided { .. }), "{err}");
                    assert!(err.to_string().contains("versions 1 to 9 cleaned up"), "{err}");
                }
                // No record changed (the lease and the job record the open
                // writes before settling are not records), no file deleted.
                assert_eq!(records(&fs, &ckpt).await, before);
                assert!(deleted.lock().unwrap().is_empty());
                return;
            }
            let open = opened.unwrap();
            let drawn_pending_in_table = units
                .iter()
                .filter(|k| matches!(k, Died::PendingInTable | Died::PendingByLedger))
                .count();
            assert_eq!(open.recovery().committed_from_table.len(), drawn_pending_in_table);
            // Asked once, about exactly the units rolled back (never one
            // the table holds), each with its entry, while its pending
            // record (which holds the entry) is still there; what it
            // deleted counted; a failure to delete settles nothing
            // differently.
            let calls = deleted.lock().unwrap().clone();
            assert!(calls.iter().all(|(_, _, pending_there)| *pending_there), "{calls:?}");
            let asked: std::collections::BTreeMap<String, Option<String>> =
                calls.iter().map(|(u, e, _)| (u.clone(), e.clone())).collect();
            assert_eq!(asked.len(), calls.len(), "asked twice about a unit");
            assert_eq!(asked, rolled_back);
            let counted = if fail_deletes { 0 } else { rolled_back.values().filter(|e| e.is_some()).count() };
            assert_eq!(open.recovery().data_files_deleted, counted);
            drop(open);
            // An independent read: the committed ID files, decoded.
            let state = dir.load(cairn_checkpoint::StringMode::default()).await.unwrap();
            assert!(state.pending.is_empty(), "nothing left pending: {:?}", state.pending);
            let mut got = std::collections::BTreeSet::new();
            for unit in &state.committed {
                let bytes = fs.cat(&format!("{root}/ckpt/{}", unit.committed_file())).await.unwrap();
                for array in cairn_checkpoint::internals::decode_ids(&unit.committed_file(), bytes, "id").unwrap() {
                    let array = array.as_any().downcast_ref::<Int64Array>().unwrap();
                    got.extend(array.values().iter().copied());
                }
            }
            assert_eq!(got, expected);
            for f in &table_files {
                assert!(fs.exists(f).await.unwrap(), "{f} was deleted");
            }
        });
    }
}

#[tokio::test]
async fn a_committed_unit_missing_from_the_table_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let fs = FileSystem::new("file", &StorageOptions::new()).unwrap();
    let mut config = CheckpointConfig::new("id", &format!("{root}/ckpt"));
    let dir = config.dir().unwrap();
    let unit = UnitName::new(&RunId::new(), 0);
    dir.write_pending(&unit, ids(&[1])).await.unwrap();
    dir.commit(&unit, ids(&[1])).await.unwrap();
    config.unit_log = Some(Arc::new(TableHolding::default()));
    // Refused by the open itself, before anything is settled.
    let err = config
        .open(&fs, &format!("{root}/table"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::UnitsNotInTable { units: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("memory:///table"), "{err}");
}
