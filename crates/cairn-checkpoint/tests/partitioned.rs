//! Recovery and the data check for partitioned outputs, on local disk and
//! in memory: a unit's pending record naming its partition directories is
//! rolled back in those directories only, whatever the layout; a record
//! naming none (Ray's) is rolled back by one recursive listing under the
//! partitioned layout; a record naming a path outside the output is never
//! followed; committed units' files are found in their partitions.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use cairn_checkpoint::internals::{CheckpointDir, OutputLayout, RunId};
use cairn_checkpoint::{StringMode, UnitName};
use cairn_fs::{FileSystem, StorageOptions, WriteMode, build_checkpoint_filesystem};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

fn ids(v: &[i64]) -> ArrayRef {
    Arc::new(Int64Array::from(v.to_vec()))
}

struct Place {
    ckpt: CheckpointDir,
    out_fs: FileSystem,
    out: String,
    _tmp: Option<tempfile::TempDir>,
}

fn places() -> Vec<Place> {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().display().to_string();
    let local = {
        let (fs, _) =
            build_checkpoint_filesystem(&format!("{root}/ckpt"), &StorageOptions::new()).unwrap();
        Place {
            ckpt: CheckpointDir::new(fs.clone(), &format!("{root}/ckpt"), "id"),
            out_fs: fs,
            out: format!("{root}/out"),
            _tmp: Some(tmp),
        }
    };
    let tag = RunId::new();
    let memory = {
        let ckpt = format!("memory:///{}/ckpt", tag.as_str());
        let (fs, _) = build_checkpoint_filesystem(&ckpt, &StorageOptions::new()).unwrap();
        Place {
            ckpt: CheckpointDir::new(fs.clone(), &ckpt, "id"),
            out_fs: fs,
            out: format!("memory:///{}/out", tag.as_str()),
            _tmp: None,
        }
    };
    vec![local, memory]
}

impl Place {
    async fn put(&self, relative: &str) {
        let path = format!("{}/{relative}", self.out);
        self.out_fs
            .pipe(&path, "data".into(), WriteMode::Overwrite)
            .await
            .unwrap();
    }

    async fn exists(&self, relative: &str) -> bool {
        self.out_fs
            .exists(&format!("{}/{relative}", self.out))
            .await
            .unwrap()
    }

    async fn recover(&self, layout: OutputLayout) -> cairn_checkpoint::RecoveryReport {
        let dir = self.ckpt.clone().with_layout(layout);
        let state = dir.load(StringMode::default()).await.unwrap();
        dir.recover(&self.out_fs, &self.out, &state).await.unwrap()
    }
}

#[tokio::test]
async fn a_record_naming_its_partitions_is_rolled_back_there_whatever_the_layout() {
    for place in places() {
        for layout in [OutputLayout::Flat, OutputLayout::Partitioned] {
            let run = RunId::new();
            let (unit, other, done) = (
                UnitName::new(&run, 1),
                UnitName::new(&run, 10),
                UnitName::new(&run, 2),
            );
            let dirs = vec!["k=1".to_string(), "k=2/j=a%2Fb".to_string()];
            place
                .ckpt
                .write_pending_in(&unit, ids(&[1, 2]), &dirs)
                .await
                .unwrap();
            place.ckpt.commit(&done, ids(&[3])).await.unwrap();
            let mine = [
                format!("k=1/{unit}_0.parquet"),
                format!("k=2/j=a%2Fb/{unit}_0.parquet"),
                format!("k=2/j=a%2Fb/.{unit}_0.parquet.cairn-tmp-1-2"),
            ];
            let kept = [
                format!("k=1/{other}_0.parquet"),
                format!("k=1/{done}_0.parquet"),
                "k=1/notes.txt".to_string(),
            ];
            for file in mine.iter().chain(&kept) {
                place.put(file).await;
            }
            let report = place.recover(layout).await;
            assert_eq!(report.rolled_back, vec![unit.clone()], "{layout:?}");
            assert_eq!(report.data_files_deleted, 3, "{layout:?}");
            for file in &mine {
                assert!(!place.exists(file).await, "{layout:?}: {file} left");
            }
            for file in &kept {
                assert!(place.exists(file).await, "{layout:?}: {file} deleted");
            }
            for file in &kept {
                place
                    .out_fs
                    .rm_file(&format!("{}/{file}", place.out))
                    .await
                    .unwrap();
            }
        }
    }
}

#[tokio::test]
async fn a_record_naming_nothing_is_found_by_one_recursive_listing_when_partitioned() {
    for place in places() {
        let run = RunId::new();
        let units: Vec<UnitName> = (0..3).map(|n| UnitName::new(&run, n)).collect();
        // Ray's pending records: the IDs only.
        for unit in &units {
            place.ckpt.write_pending(unit, ids(&[7])).await.unwrap();
            place.put(&format!("a=x/b=1/{unit}-0.parquet")).await;
            place.put(&format!("a=y/{unit}-0.parquet")).await;
        }
        place.put("a=x/b=1/someone-else.parquet").await;
        // Flat: only the output's own level is searched.
        let flat = place.recover(OutputLayout::Flat).await;
        assert_eq!(flat.data_files_deleted, 0);
        for unit in &units {
            place.ckpt.write_pending(unit, ids(&[7])).await.unwrap();
        }
        let partitioned = place.recover(OutputLayout::Partitioned).await;
        assert_eq!(partitioned.rolled_back.len(), 3);
        assert_eq!(partitioned.data_files_deleted, 6);
        for unit in &units {
            assert!(!place.exists(&format!("a=y/{unit}-0.parquet")).await);
        }
        assert!(place.exists("a=x/b=1/someone-else.parquet").await);
    }
}

/// A pending record whose `cairn.partitions` names `dirs`, written by hand.
fn record_naming(dirs: &str) -> bytes::Bytes {
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![ids(&[1])]).unwrap();
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "cairn.partitions".into(),
            dirs.to_string(),
        )]))
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    out.into()
}

#[tokio::test]
async fn a_record_naming_a_path_outside_the_output_is_never_followed() {
    for place in places() {
        for bad in [
            r#"["../elsewhere"]"#,
            r#"["/abs"]"#,
            r#"["a//b"]"#,
            "not json",
        ] {
            let unit = UnitName::new(&RunId::new(), 0);
            let record = format!("{}/{}", place.ckpt.path(), unit.pending_file());
            place
                .ckpt
                .fs()
                .pipe(&record, record_naming(bad), WriteMode::Overwrite)
                .await
                .unwrap();
            // A sibling of the output with the unit's file: never touched.
            let outside = format!("{}/../elsewhere/{unit}_0.parquet", place.out);
            let outside = outside.replace("/out/../", "/");
            place
                .out_fs
                .pipe(&outside, "data".into(), WriteMode::Overwrite)
                .await
                .unwrap();
            place.put(&format!("p=1/{unit}_0.parquet")).await;
            // The whole output is searched instead, in either layout.
            let report = place.recover(OutputLayout::Flat).await;
            assert_eq!(report.data_files_deleted, 1, "{bad}");
            assert!(place.out_fs.exists(&outside).await.unwrap(), "{bad}");
        }
    }
}

#[tokio::test]
async fn committed_units_are_found_in_their_partitions() {
    for place in places() {
        let unit = UnitName::new(&RunId::new(), 0);
        place.ckpt.commit(&unit, ids(&[1])).await.unwrap();
        place.put(&format!("d=2026-11-30/{unit}_0.parquet")).await;
        place.put("d=2026-11-30/stray.parquet").await;
        let state = place.ckpt.load(StringMode::default()).await.unwrap();
        let flat = place
            .ckpt
            .check_data(&state, &place.out_fs, &place.out)
            .await
            .unwrap();
        assert_eq!(flat.missing, vec![unit.clone()]);
        let partitioned = place
            .ckpt
            .clone()
            .with_layout(OutputLayout::Partitioned)
            .check_data(&state, &place.out_fs, &place.out)
            .await
            .unwrap();
        assert!(partitioned.missing.is_empty());
        assert_eq!(partitioned.with_data, 1);
        assert_eq!(partitioned.orphans, vec!["stray.parquet".to_string()]);
    }
}

/// A driver's filesystem (listing cache on, as fsspec's default) listed the
/// output while it was flat; another process then wrote a partitioned
/// unit's data file and its pending record (naming no directories, as
/// Ray's). The layout and the roll-back must come from the store, not from
/// the cached listing: the unit's file is found and deleted.
async fn a_cached_listing_decides_nothing(options: &StorageOptions, root: &str) {
    let (out, ckpt_url) = (format!("{root}/out"), format!("{root}/ckpt"));
    let (out_fs, _) = FileSystem::from_url(&out, options).unwrap();
    assert!(
        out_fs.listing_cache().enabled.value,
        "the test needs the cache on"
    );
    let (ckpt_fs, _) = build_checkpoint_filesystem(&ckpt_url, options).unwrap();
    let ckpt = CheckpointDir::new(ckpt_fs, &ckpt_url, "id");
    let kept = format!("{out}/w_1-0.parquet");
    out_fs
        .pipe(&kept, "data".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(out_fs.ls(&out).await.unwrap().len(), 1, "now cached: flat");
    // Another process: a filesystem of its own.
    let (other, _) = FileSystem::from_url(&out, options).unwrap();
    let unit = UnitName::new(&RunId::new(), 0);
    ckpt.write_pending(&unit, ids(&[7])).await.unwrap();
    let stray = format!("{out}/k=1/{unit}-0.parquet");
    other
        .pipe(&stray, "data".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(
        out_fs.ls(&out).await.unwrap().len(),
        1,
        "the cache is stale"
    );
    let layout = cairn_checkpoint::internals::found_layout(&out_fs, &out)
        .await
        .unwrap();
    assert_eq!(layout, OutputLayout::Partitioned);
    let dir = ckpt.with_layout(layout);
    let state = dir.load(StringMode::default()).await.unwrap();
    let report = dir.recover(&out_fs, &out, &state).await.unwrap();
    assert_eq!(
        (report.rolled_back.len(), report.data_files_deleted),
        (1, 1)
    );
    assert!(
        !other.exists(&stray).await.unwrap(),
        "the unit's file is gone"
    );
    assert!(other.exists(&kept).await.unwrap());
}

#[tokio::test]
async fn a_cached_listing_decides_nothing_on_local_disk() {
    let tmp = tempfile::tempdir().unwrap();
    a_cached_listing_decides_nothing(&StorageOptions::new(), &tmp.path().display().to_string())
        .await;
}

#[tokio::test]
async fn a_cached_listing_decides_nothing_on_s3() {
    let Some((options, s3)) = cairn_conformance::s3_server("GARAGE", "cached listings on S3")
    else {
        return;
    };
    let root = format!(
        "s3://{}/cached-listing-{}",
        s3.bucket,
        RunId::new().as_str()
    );
    a_cached_listing_decides_nothing(&options, &root).await;
}
