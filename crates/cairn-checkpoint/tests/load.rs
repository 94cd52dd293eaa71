//! Reading a checkpoint directory: committed and pending units, foreign files,
//! files written by pyarrow the way Ray Data writes them and the other way
//! round, and the errors for damaged input (after which nothing is deleted).

use std::process::Command;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray};
use cairn_checkpoint::internals::{RunId, encode_ids, list_committed, load_committed};
use cairn_checkpoint::{Error, IdSet, StringMode, UnitName};
use cairn_fs::{FileSystem, StorageOptions, WriteMode, build_checkpoint_filesystem};

fn ints(v: impl IntoIterator<Item = i64>) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(v))
}

async fn put(fs: &FileSystem, url: &str, bytes: bytes::Bytes) {
    fs.pipe(url, bytes, WriteMode::Overwrite).await.unwrap();
}

fn committed(set: &IdSet, ids: &[i64]) -> Vec<bool> {
    set.contains_array(&Int64Array::from(ids.to_vec()))
        .unwrap()
        .iter()
        .map(|v| v.unwrap())
        .collect()
}

async fn units_pending_and_foreign_files(dir: &str) {
    let (fs, _) = build_checkpoint_filesystem(dir, &StorageOptions::new()).unwrap();
    let run = RunId::new();
    let (a, b, c) = (
        UnitName::new(&run, 0),
        UnitName::new(&run, 1),
        UnitName::new(&run, 2),
    );
    let (a_ids, b_ids) = (
        encode_ids("uid", ints(0..100)).unwrap(),
        encode_ids("uid", ints(100..150)).unwrap(),
    );
    let committed_bytes = (a_ids.len() + b_ids.len()) as u64;
    put(&fs, &format!("{dir}/{}", a.committed_file()), a_ids).await;
    put(&fs, &format!("{dir}/{}", b.committed_file()), b_ids).await;
    put(
        &fs,
        &format!("{dir}/{}", b.pending_file()),
        encode_ids("uid", ints(100..150)).unwrap(),
    )
    .await;
    put(
        &fs,
        &format!("{dir}/{}", c.pending_file()),
        encode_ids("uid", ints(150..200)).unwrap(),
    )
    .await;
    put(&fs, &format!("{dir}/notes.txt"), "mine".into()).await;
    let state = load_committed(&fs, dir, "uid", StringMode::default())
        .await
        .unwrap();
    assert_eq!(state.ids.len(), 150);
    assert_eq!(
        committed(&state.ids, &[0, 149, 150, 199]),
        [true, true, false, false]
    );
    assert_eq!(state.committed, [a.clone(), b.clone()]);
    assert_eq!(state.pending, [b.clone(), c.clone()]);
    assert_eq!(state.foreign, ["notes.txt"]);
    assert!(!state.has_lease);
    assert_eq!(state.committed_bytes, committed_bytes);

    // Listed without reading an ID file: the same units and sizes, no IDs.
    let listed = list_committed(&fs, dir).await.unwrap();
    assert!(listed.ids.is_empty());
    assert_eq!(listed.committed, [a, b.clone()]);
    assert_eq!(listed.pending, [b, c]);
    assert_eq!(listed.foreign, ["notes.txt"]);
    assert_eq!(listed.committed_bytes, committed_bytes);
}

#[tokio::test]
async fn reads_units_on_memory() {
    units_pending_and_foreign_files(&format!("memory:///ckpt-{}", RunId::new().as_str())).await;
}

#[tokio::test]
async fn reads_units_on_local_disk() {
    let dir = tempfile::tempdir().unwrap();
    units_pending_and_foreign_files(&dir.path().display().to_string()).await;
}

#[tokio::test]
async fn reads_units_on_garage() {
    let Some((options, s3)) = cairn_conformance::s3_server("GARAGE", "reads_units_on_garage")
    else {
        return;
    };
    let dir = format!("s3://{}/ckpt-{}", s3.bucket, RunId::new().as_str());
    let (fs, _) = build_checkpoint_filesystem(&dir, &options).unwrap();
    let run = RunId::new();
    for seq in 0..20 {
        let unit = UnitName::new(&run, seq);
        let ids = ints(seq as i64 * 1000..(seq as i64 + 1) * 1000);
        put(
            &fs,
            &format!("{dir}/{}", unit.committed_file()),
            encode_ids("uid", ids).unwrap(),
        )
        .await;
    }
    let state = load_committed(&fs, &dir, "uid", StringMode::default())
        .await
        .unwrap();
    assert_eq!(state.ids.len(), 20_000);
    assert_eq!(state.committed.len(), 20);
    assert_eq!(
        committed(&state.ids, &[0, 19_999, 20_000]),
        [true, true, false]
    );
    fs.rm_with(&dir, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_missing_directory_is_a_fresh_checkpoint() {
    let dir = format!("memory:///never-made-{}", RunId::new().as_str());
    let (fs, _) = build_checkpoint_filesystem(&dir, &StorageOptions::new()).unwrap();
    let state = load_committed(&fs, &dir, "uid", StringMode::default())
        .await
        .unwrap();
    assert!(state.ids.is_empty() && state.committed.is_empty() && state.pending.is_empty());
}

#[tokio::test]
async fn damaged_input_is_a_clear_error_and_nothing_is_deleted() {
    let dir = format!("memory:///bad-{}", RunId::new().as_str());
    let (fs, _) = build_checkpoint_filesystem(&dir, &StorageOptions::new()).unwrap();
    let good = format!(
        "{dir}/{}",
        UnitName::from_stem("run_0000000000").committed_file()
    );
    put(&fs, &good, encode_ids("uid", ints(0..10)).unwrap()).await;
    let broken = format!("{dir}/run_0000000001.parquet");
    put(&fs, &broken, "this is not parquet".into()).await;
    let err = load_committed(&fs, &dir, "uid", StringMode::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CorruptIdFile { .. }), "{err}");
    assert!(err.to_string().contains("run_0000000001.parquet"), "{err}");
    assert!(fs.exists(&broken).await.unwrap() && fs.exists(&good).await.unwrap());

    fs.pipe(
        &broken,
        encode_ids("other", ints(0..3)).unwrap(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    let err = load_committed(&fs, &dir, "uid", StringMode::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::WrongIdColumn { .. }), "{err}");
    assert!(err.to_string().contains("\"other\""), "{err}");

    let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.5]));
    fs.pipe(
        &broken,
        encode_ids("uid", floats).unwrap(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    let err = load_committed(&fs, &dir, "uid", StringMode::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("Float64") && err.to_string().contains("run_0000000001"),
        "{err}"
    );

    let strings: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
    fs.pipe(
        &broken,
        encode_ids("uid", strings).unwrap(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    let err = load_committed(&fs, &dir, "uid", StringMode::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::IdTypeMismatch { .. }), "{err}");
    assert_eq!(fs.find(&dir).await.unwrap().len(), 2, "nothing deleted");

    let file = format!("memory:///a-file-{}", RunId::new().as_str());
    put(&fs, &file, "x".into()).await;
    let err = load_committed(&fs, &file, "uid", StringMode::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CheckpointPathIsFile { .. }), "{err}");
}

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scripts/ray_style_idfiles.py"
);

#[tokio::test]
async fn files_written_by_pyarrow_as_ray_does_are_read_and_ours_are_read_by_pyarrow() {
    let Some(python) = cairn_conformance::tools_python("pyarrow interop") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let out = Command::new(&python)
        .args([SCRIPT, "write", &d, "row_id"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bases: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    let (fs, _) = build_checkpoint_filesystem(&d, &StorageOptions::new()).unwrap();
    let state = load_committed(&fs, &d, "row_id", StringMode::default())
        .await
        .unwrap();
    assert_eq!(state.ids.len(), 1500);
    assert_eq!(committed(&state.ids, &[0, 1499, 1500]), [true, true, false]);
    let mut expected_committed: Vec<UnitName> =
        bases[..2].iter().map(|b| UnitName::from_stem(b)).collect();
    expected_committed.sort();
    assert_eq!(state.committed, expected_committed);
    assert_eq!(state.pending, [UnitName::from_stem(&bases[2])]);

    let ours = format!("{d}/{}", UnitName::new(&RunId::new(), 7).committed_file());
    fs.pipe(
        &ours,
        encode_ids("row_id", ints([5, 6, 7])).unwrap(),
        WriteMode::Create,
    )
    .await
    .unwrap();
    let out = Command::new(&python)
        .args([SCRIPT, "read", &ours, "row_id"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Vec<i64> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(read, [5, 6, 7]);
}
