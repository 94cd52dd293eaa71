//! Resume time: open a checkpoint holding UNITS committed units (100 IDs
//! each) and a few pending ones: lease, recovery, loading of every committed
//! ID file. Setup writes the files first and is not timed.
//!
//! Usage: resume_bench URL UNITS   (storage options from BENCH_* like fs_bench
//! for s3:// URLs). Prints one JSON object.

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Int64Array};
use cairn_checkpoint::internals::{CheckpointConfig, RunId, encode_ids};
use cairn_checkpoint::{Checkpoint, UnitName};
use cairn_fs::{FileSystem, StorageOptions, WriteMode, build_checkpoint_filesystem};
use futures::{StreamExt, stream};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("checkpoint URL");
    let units: u64 = args.next().expect("unit count").parse().unwrap();
    let mut options = StorageOptions::new();
    if url.starts_with("s3://") {
        for (key, var) in [
            ("endpoint_url", "BENCH_ENDPOINT"),
            ("key", "BENCH_KEY"),
            ("secret", "BENCH_SECRET"),
        ] {
            options.set("s3", key, std::env::var(var).expect(var).into());
        }
    }
    let ckpt = format!("{url}/ckpt");
    let out = format!("{url}/out");
    let (fs, _) = build_checkpoint_filesystem(&ckpt, &options).unwrap();
    let run = RunId::new();
    let started = Instant::now();
    stream::iter(0..units)
        .for_each_concurrent(32, |seq| {
            let (fs, ckpt, run) = (fs.clone(), ckpt.clone(), run.clone());
            async move {
                let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(
                    (seq as i64 * 100)..(seq as i64 + 1) * 100,
                ));
                let unit = UnitName::new(&run, seq);
                fs.pipe(
                    &format!("{ckpt}/{}", unit.committed_file()),
                    encode_ids("id", ids).unwrap(),
                    WriteMode::Overwrite,
                )
                .await
                .unwrap();
            }
        })
        .await;
    // Three units in flight, with a data file each.
    let (out_fs, _) = FileSystem::from_url(&out, &options).unwrap();
    for seq in units..units + 3 {
        let unit = UnitName::new(&run, seq);
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![seq as i64]));
        fs.pipe(
            &format!("{ckpt}/{}", unit.pending_file()),
            encode_ids("id", ids).unwrap(),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
        out_fs
            .pipe(
                &format!("{out}/{}0.parquet", unit.data_prefix()),
                "data".into(),
                WriteMode::Overwrite,
            )
            .await
            .unwrap();
    }
    let setup = started.elapsed().as_secs_f64();

    let mut config = CheckpointConfig::new("id", &ckpt);
    config.storage_options = options.clone();
    let started = Instant::now();
    // The open every door runs (lease, recovery, IDs loaded), without the
    // data check of a file output that came after it.
    let run = Checkpoint::with_config(config, None)
        .without_output_check()
        .open(&out_fs, &out)
        .await
        .unwrap();
    let resume = started.elapsed().as_secs_f64();
    assert_eq!(run.committed().len(), (units * 100) as u64);
    assert_eq!(run.recovery().rolled_back.len(), 3);
    run.abandon().await.unwrap();
    let _ = fs
        .rm_with(&url, cairn_fs::TreeOptions::new().recursive(true))
        .await;
    println!(
        "{}",
        serde_json::json!({"url": url, "units": units, "ids": units * 100, "setup_seconds": setup, "resume_seconds": resume})
    );
}
