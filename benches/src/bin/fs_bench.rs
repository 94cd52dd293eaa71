//! Small-object and large-object throughput on an S3 endpoint, through
//! cairn's FileSystem and through a bare OpenDAL operator, same concurrency.
//!
//! Usage: fs_bench cairn|opendal  (settings from BENCH_ENDPOINT, BENCH_KEY,
//! BENCH_SECRET, BENCH_BUCKET, BENCH_REGION, BENCH_SMALL_COUNT, BENCH_LARGE_MIB,
//! BENCH_CONCURRENCY). Prints one JSON object per measurement.

use std::time::Instant;

use bytes::Bytes;
use cairn_fs::{Environment, FileSystem, FileSystemBuilder, StorageOptions, WriteMode};
use futures::{StreamExt, TryStreamExt, stream};

struct Settings {
    endpoint: String,
    key: String,
    secret: String,
    bucket: String,
    region: String,
    small_count: usize,
    large_mib: usize,
    concurrency: usize,
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

impl Settings {
    fn from_env() -> Self {
        Self {
            endpoint: env("BENCH_ENDPOINT", "http://127.0.0.1:3900"),
            key: env("BENCH_KEY", ""),
            secret: env("BENCH_SECRET", ""),
            bucket: env("BENCH_BUCKET", "cairn-test"),
            region: env("BENCH_REGION", "us-east-1"),
            small_count: env("BENCH_SMALL_COUNT", "2000").parse().unwrap(),
            large_mib: env("BENCH_LARGE_MIB", "256").parse().unwrap(),
            concurrency: env("BENCH_CONCURRENCY", "32").parse().unwrap(),
        }
    }
}

fn report(tool: &str, op: &str, started: Instant, ops: usize, bytes: usize) {
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "tool": tool, "op": op, "seconds": secs,
            "ops_per_s": ops as f64 / secs,
            "mib_per_s": bytes as f64 / 1048576.0 / secs,
        })
    );
}

/// The operations, each implemented by both tools.
trait Store {
    async fn put(&self, key: &str, data: Bytes);
    async fn get(&self, key: &str) -> Bytes;
    async fn list(&self, prefix: &str) -> usize;
    async fn remove_all(&self, prefix: &str);
    async fn put_large(&self, key: &str, data: &[u8]);
    async fn get_large(&self, key: &str) -> usize;
    /// The large read as one contiguous `Bytes`, as `cat` returns it; `None`
    /// where `get_large` already gives that.
    async fn get_large_contiguous(&self, key: &str) -> Option<usize>;
}

struct Cairn {
    fs: FileSystem,
    bucket: String,
}

impl Store for Cairn {
    async fn put(&self, key: &str, data: Bytes) {
        let url = format!("s3://{}/{key}", self.bucket);
        self.fs
            .pipe(&url, data, WriteMode::Overwrite)
            .await
            .unwrap();
    }
    async fn get(&self, key: &str) -> Bytes {
        self.fs
            .cat(&format!("s3://{}/{key}", self.bucket))
            .await
            .unwrap()
    }
    async fn list(&self, prefix: &str) -> usize {
        self.fs
            .ls(&format!("s3://{}/{prefix}", self.bucket))
            .await
            .unwrap()
            .len()
    }
    async fn remove_all(&self, prefix: &str) {
        self.fs
            .rm_with(
                &format!("s3://{}/{prefix}", self.bucket),
                cairn_fs::TreeOptions::new().recursive(true),
            )
            .await
            .unwrap();
    }
    async fn put_large(&self, key: &str, data: &[u8]) {
        let mut w = self
            .fs
            .open_write(&format!("s3://{}/{key}", self.bucket))
            .await
            .unwrap();
        for chunk in data.chunks(8 << 20) {
            w.write(Bytes::copy_from_slice(chunk)).await.unwrap();
        }
        w.close().await.unwrap();
    }
    async fn get_large(&self, key: &str) -> usize {
        // The size first (as the bare reader's own stat does), then 8 MiB
        // ranges 4 at a time, as the bare reader reads.
        let url = format!("s3://{}/{key}", self.bucket);
        let size = self.fs.info(&url).await.unwrap().size;
        self.fs.cat_with_size(&url, size).await.unwrap().len()
    }
    async fn get_large_contiguous(&self, _key: &str) -> Option<usize> {
        None
    }
}

struct Bare {
    op: opendal::Operator,
}

impl Store for Bare {
    async fn put(&self, key: &str, data: Bytes) {
        self.op.write(key, data).await.unwrap();
    }
    async fn get(&self, key: &str) -> Bytes {
        self.op.read(key).await.unwrap().to_bytes()
    }
    async fn list(&self, prefix: &str) -> usize {
        self.op.list(&format!("{prefix}/")).await.unwrap().len()
    }
    async fn remove_all(&self, prefix: &str) {
        let entries: Vec<String> = self
            .op
            .lister_with(&format!("{prefix}/"))
            .recursive(true)
            .await
            .unwrap()
            .map_ok(|e| e.path().to_string())
            .try_collect()
            .await
            .unwrap();
        self.op.delete_iter(entries).await.unwrap();
    }
    async fn put_large(&self, key: &str, data: &[u8]) {
        let mut w = self
            .op
            .writer_with(key)
            .chunk(8 << 20)
            .concurrent(4)
            .await
            .unwrap();
        for chunk in data.chunks(8 << 20) {
            w.write(Bytes::copy_from_slice(chunk)).await.unwrap();
        }
        w.close().await.unwrap();
    }
    async fn get_large(&self, key: &str) -> usize {
        self.large_read(key).await.len()
    }
    async fn get_large_contiguous(&self, key: &str) -> Option<usize> {
        Some(self.large_read(key).await.to_bytes().len())
    }
}

impl Bare {
    /// The whole object in 8 MiB chunks, 4 at a time: the parts as received.
    async fn large_read(&self, key: &str) -> opendal::Buffer {
        let reader = self
            .op
            .reader_with(key)
            .chunk(8 << 20)
            .concurrent(4)
            .await
            .unwrap();
        reader.read(..).await.unwrap()
    }
}

async fn run(tool: &str, store: &impl Store, s: &Settings) {
    let prefix = format!("bench-{tool}-{}", std::process::id());
    let keys: Vec<String> = (0..s.small_count)
        .map(|i| format!("{prefix}/small/{i:06}"))
        .collect();
    let payload = Bytes::from(vec![7u8; 1024]);

    let t = Instant::now();
    stream::iter(&keys)
        .for_each_concurrent(s.concurrency, |k| store.put(k, payload.clone()))
        .await;
    report(tool, "put_1k", t, keys.len(), keys.len() * 1024);

    let t = Instant::now();
    let total: usize = stream::iter(&keys)
        .map(|k| store.get(k))
        .buffer_unordered(s.concurrency)
        .map(|b| b.len())
        .fold(0, |a, n| async move { a + n })
        .await;
    assert_eq!(total, keys.len() * 1024);
    report(tool, "get_1k", t, keys.len(), total);

    let t = Instant::now();
    assert_eq!(store.list(&format!("{prefix}/small")).await, keys.len());
    report(tool, "ls", t, 1, 0);

    let t = Instant::now();
    store.remove_all(&prefix).await;
    report(tool, "rm_recursive", t, keys.len(), 0);

    let large: Vec<u8> = (0..s.large_mib << 20).map(|i| (i % 251) as u8).collect();
    let key = format!("{prefix}/large.bin");
    let t = Instant::now();
    store.put_large(&key, &large).await;
    report(tool, "put_large", t, 1, large.len());
    let t = Instant::now();
    assert_eq!(store.get_large(&key).await, large.len());
    report(tool, "get_large", t, 1, large.len());
    let t = Instant::now();
    if let Some(read) = store.get_large_contiguous(&key).await {
        assert_eq!(read, large.len());
        report(tool, "get_large_contiguous", t, 1, large.len());
    }
    store.remove_all(&prefix).await;
}

#[tokio::main]
async fn main() {
    let tool = std::env::args()
        .nth(1)
        .expect("usage: fs_bench cairn|opendal");
    let s = Settings::from_env();
    match tool.as_str() {
        "cairn" => {
            let mut options = StorageOptions::new();
            options
                .set("s3", "endpoint_url", s.endpoint.clone().into())
                .set("s3", "key", s.key.clone().into())
                .set("s3", "secret", s.secret.clone().into())
                .set("s3", "region", s.region.clone().into());
            let fs = FileSystemBuilder::new("s3")
                .options(options)
                .env(Environment::default())
                .build()
                .unwrap();
            run(
                "cairn",
                &Cairn {
                    fs,
                    bucket: s.bucket.clone(),
                },
                &s,
            )
            .await;
        }
        "opendal" => {
            opendal::install_default();
            let builder = opendal::services::S3::default()
                .bucket(&s.bucket)
                .endpoint(&s.endpoint)
                .region(&s.region)
                .access_key_id(&s.key)
                .secret_access_key(&s.secret)
                .disable_ec2_metadata();
            let op = opendal::Operator::new(builder).unwrap();
            run("opendal", &Bare { op }, &s).await;
        }
        other => panic!("unknown tool {other}; use cairn or opendal"),
    }
}
