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

use cairn_bench::{bare_operator, bench_filesystem, env_or, fill_empty};
use cairn_fs::WriteMode;
use futures::TryStreamExt;

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let keys: usize = env_or("BENCH_LS_KEYS", "2000").parse().unwrap();
    let rounds: usize = env_or("ROUNDS", "30").parse().unwrap();
    let bucket = env_or("BENCH_BUCKET", "cairn-test");
    let dir = format!("ls-bench-{keys}");
    let uncached = bench_filesystem(false);
    let cached = bench_filesystem(true);
    let paths = (0..keys).map(|i| format!("{bucket}/{dir}/part-{i:06}.parquet"));
    fill_empty(&uncached, paths.collect()).await;
    let op = bare_operator(&bucket);
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
