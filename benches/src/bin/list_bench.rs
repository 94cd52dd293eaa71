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

use cairn_bench::{bare_operator, bench_filesystem, env_or, fill_empty};
use cairn_fs::FindOptions;
use futures::TryStreamExt;

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
    let keys: usize = env_or("BENCH_KEYS", "100000").parse().unwrap();
    let bucket = env_or("BENCH_BUCKET", "cairn-test");
    let prefix = format!("{bucket}/list-bench-{keys}");
    let fs = bench_filesystem(true);
    let started = Instant::now();
    let listed = match mode.as_str() {
        "fill" => {
            // Keys spread over 100 directories, as a job's outputs are.
            let paths = (0..keys).map(|i| format!("{prefix}/d{:03}/part-{i:08}.parquet", i % 100));
            fill_empty(&fs, paths.collect()).await
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
            let op = bare_operator(&bucket);
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
