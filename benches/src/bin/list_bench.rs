//! Listing a large prefix on an S3 endpoint: cairn's `find` (a sorted
//! `Vec`), cairn's `find_stream` (entries as pages arrive), `glob_stream`
//! (a `*/*.parquet` pattern's matches as pages arrive), `walk` (one
//! directory at a time) and a bare OpenDAL recursive lister, each in its own
//! process so its peak memory (VmHWM) is its own.
//!
//! Usage: list_bench fill|find|find_stream|glob_stream|walk|opendal  (BENCH_ENDPOINT,
//! BENCH_KEY, BENCH_SECRET, BENCH_BUCKET, BENCH_REGION, BENCH_KEYS).
//! Prints one JSON object.

use std::time::Instant;

use cairn_fs::{
    Environment, FileSystem, FileSystemBuilder, FindOptions, StorageOptions, WriteMode,
};
use futures::{StreamExt, TryStreamExt, stream};

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn filesystem() -> FileSystem {
    let mut options = StorageOptions::new();
    options
        .set(
            "s3",
            "endpoint_url",
            env("BENCH_ENDPOINT", "http://127.0.0.1:3900").into(),
        )
        .set("s3", "key", env("BENCH_KEY", "").into())
        .set("s3", "secret", env("BENCH_SECRET", "").into())
        .set("s3", "region", env("BENCH_REGION", "us-east-1").into());
    FileSystemBuilder::new("s3")
        .options(options)
        .env(Environment::default())
        .build()
        .expect("filesystem")
}

/// The entries of a listing stream, counted, not kept.
async fn count(
    stream: cairn_fs::Result<
        futures::stream::BoxStream<'static, cairn_fs::Result<cairn_fs::FileInfo>>,
    >,
) -> usize {
    stream
        .expect("listing")
        .try_fold(0usize, |n, _| async move { Ok(n + 1) })
        .await
        .expect("stream")
}

#[tokio::main]
async fn main() {
    let mode = std::env::args()
        .nth(1)
        .expect("fill|find|find_stream|glob_stream|walk|opendal");
    let keys: usize = env("BENCH_KEYS", "100000").parse().unwrap();
    let bucket = env("BENCH_BUCKET", "cairn-test");
    let prefix = format!("{bucket}/list-bench-{keys}");
    let fs = filesystem();
    let started = Instant::now();
    let listed = match mode.as_str() {
        "fill" => {
            // Keys spread over 100 directories, as a job's outputs are.
            stream::iter(0..keys)
                .map(|i| {
                    let fs = fs.clone();
                    let path = format!("{prefix}/d{:03}/part-{i:08}.parquet", i % 100);
                    async move {
                        fs.pipe(&path, bytes::Bytes::new(), WriteMode::Overwrite)
                            .await
                    }
                })
                .buffer_unordered(64)
                .try_collect::<Vec<()>>()
                .await
                .expect("fill")
                .len()
        }
        "find" => fs.find(&prefix).await.expect("find").len(),
        "find_stream" => count(fs.find_stream(&prefix, FindOptions::new()).await).await,
        "glob_stream" => {
            let pattern = format!("{prefix}/*/*.parquet");
            count(fs.glob_stream(&pattern, FindOptions::new()).await).await
        }
        "walk" => {
            let steps = fs.walk(&prefix, FindOptions::new()).await.expect("walk");
            steps
                .try_fold(0usize, |n, step| async move { Ok(n + step.files.len()) })
                .await
                .expect("walk")
        }
        "opendal" => {
            opendal::install_default();
            let op = opendal::Operator::new(
                opendal::services::S3::default()
                    .bucket(&bucket)
                    .endpoint(&env("BENCH_ENDPOINT", "http://127.0.0.1:3900"))
                    .region(&env("BENCH_REGION", "us-east-1"))
                    .access_key_id(&env("BENCH_KEY", ""))
                    .secret_access_key(&env("BENCH_SECRET", ""))
                    .disable_ec2_metadata(),
            )
            .expect("operator");
            let lister = op
                .lister_with(&format!("list-bench-{keys}/"))
                .recursive(true)
                .await
                .expect("lister");
            lister
                .try_fold(0usize, |n, _| async move { Ok(n + 1) })
                .await
                .expect("list")
        }
        other => panic!("unknown mode {other}"),
    };
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "mode": mode, "keys": listed, "seconds": secs,
            "keys_per_s": listed as f64 / secs, "peak_rss_mib": cairn_bench::peak_rss_mib(),
        })
    );
}
