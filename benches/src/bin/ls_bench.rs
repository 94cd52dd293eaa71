//! Where one `ls` of a 2,000-key directory spends its time against a bare
//! OpenDAL `list` on the same S3 endpoint: the bare list, cairn's
//! `ls_stream` collected (the listing turned into `FileInfo`s, nothing
//! else), `ls` with the listing cache off (plus the sort) and `ls` with it
//! on (plus the copy the cache keeps; a write into the directory before each
//! round empties the cache, outside the timing). One process, the variants
//! alternating, ROUNDS rounds; prints the median of each as JSON lines.
//!
//! Usage: ls_bench  (BENCH_ENDPOINT, BENCH_KEY, BENCH_SECRET, BENCH_BUCKET,
//! BENCH_REGION, BENCH_LS_KEYS default 2000, ROUNDS default 30).

use std::time::{Duration, Instant};

use cairn_fs::{Environment, FileSystem, FileSystemBuilder, StorageOptions, WriteMode};
use futures::{StreamExt, TryStreamExt, stream};

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn filesystem(cache: bool) -> FileSystem {
    let mut options = StorageOptions::new();
    options
        .set(
            "s3",
            "endpoint_url",
            env("BENCH_ENDPOINT", "http://127.0.0.1:3900").into(),
        )
        .set("s3", "key", env("BENCH_KEY", "").into())
        .set("s3", "secret", env("BENCH_SECRET", "").into())
        .set("s3", "region", env("BENCH_REGION", "us-east-1").into())
        .set("s3", "use_listings_cache", cache.into());
    FileSystemBuilder::new("s3")
        .options(options)
        .env(Environment::default())
        .build()
        .expect("filesystem")
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let keys: usize = env("BENCH_LS_KEYS", "2000").parse().unwrap();
    let rounds: usize = env("ROUNDS", "30").parse().unwrap();
    let bucket = env("BENCH_BUCKET", "cairn-test");
    let dir = format!("ls-bench-{keys}");
    let uncached = filesystem(false);
    let cached = filesystem(true);
    stream::iter(0..keys)
        .map(|i| {
            let fs = uncached.clone();
            let path = format!("{bucket}/{dir}/part-{i:06}.parquet");
            async move {
                fs.pipe(&path, bytes::Bytes::new(), WriteMode::Overwrite)
                    .await
            }
        })
        .buffer_unordered(64)
        .try_collect::<Vec<()>>()
        .await
        .expect("fill");
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
    let path = format!("{bucket}/{dir}");
    let marker = format!("{path}/part-marker");
    let mut samples: [Vec<Duration>; 4] = Default::default();
    for _ in 0..rounds {
        let t = Instant::now();
        assert!(op.list(&format!("{dir}/")).await.unwrap().len() >= keys);
        samples[0].push(t.elapsed());

        let t = Instant::now();
        let streamed: Vec<_> = uncached
            .ls_stream(&path)
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        samples[1].push(t.elapsed());
        assert!(streamed.len() >= keys);

        let t = Instant::now();
        assert!(uncached.ls(&path).await.unwrap().len() >= keys);
        samples[2].push(t.elapsed());

        // A write into the directory empties its cached listing.
        cached
            .pipe(&marker, bytes::Bytes::new(), WriteMode::Overwrite)
            .await
            .unwrap();
        let t = Instant::now();
        assert!(cached.ls(&path).await.unwrap().len() >= keys);
        samples[3].push(t.elapsed());
    }
    for (variant, samples) in ["opendal_list", "ls_stream", "ls_no_cache", "ls_cached"]
        .iter()
        .zip(samples)
    {
        println!(
            "{}",
            serde_json::json!({"variant": variant, "keys": keys, "median_ms": median(samples)})
        );
    }
}
