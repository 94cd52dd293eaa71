//! What the benchmarks of `src/bin` share.

/// Peak resident memory of this process so far (VmHWM), in MiB; NaN where
/// `/proc` does not say.
pub fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// The environment variable `name`, or `default`.
pub fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

/// A cairn s3 filesystem on the benchmark's endpoint (`BENCH_ENDPOINT`,
/// `BENCH_KEY`, `BENCH_SECRET`, `BENCH_REGION`), with the listing cache on
/// or off.
pub fn bench_filesystem(listing_cache: bool) -> cairn_fs::FileSystem {
    let mut options = cairn_fs::StorageOptions::new();
    options
        .set(
            "s3",
            "endpoint_url",
            env_or("BENCH_ENDPOINT", "http://127.0.0.1:3900").into(),
        )
        .set("s3", "key", env_or("BENCH_KEY", "").into())
        .set("s3", "secret", env_or("BENCH_SECRET", "").into())
        .set("s3", "region", env_or("BENCH_REGION", "us-east-1").into())
        .set("s3", "use_listings_cache", listing_cache.into());
    cairn_fs::FileSystemBuilder::new("s3")
        .options(options)
        .env(cairn_fs::Environment::default())
        .build()
        .expect("filesystem")
}

/// A bare OpenDAL S3 operator on the same endpoint and `bucket`.
pub fn bare_operator(bucket: &str) -> opendal::Operator {
    opendal::install_default();
    opendal::Operator::new(
        opendal::services::S3::default()
            .bucket(bucket)
            .endpoint(&env_or("BENCH_ENDPOINT", "http://127.0.0.1:3900"))
            .region(&env_or("BENCH_REGION", "us-east-1"))
            .access_key_id(&env_or("BENCH_KEY", ""))
            .secret_access_key(&env_or("BENCH_SECRET", ""))
            .disable_ec2_metadata(),
    )
    .expect("operator")
}

/// Writes an empty object at each of `paths`, 64 at a time; returns how
/// many.
pub async fn fill_empty(fs: &cairn_fs::FileSystem, paths: Vec<String>) -> usize {
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(paths)
        .map(|path| {
            let fs = fs.clone();
            async move {
                fs.pipe(&path, bytes::Bytes::new(), cairn_fs::WriteMode::Overwrite)
                    .await
            }
        })
        .buffer_unordered(64)
        .try_collect::<Vec<()>>()
        .await
        .expect("fill")
        .len()
}
