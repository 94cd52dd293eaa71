//! Requests per operation, counted on the wire by a request hook (it sees
//! every HTTP request the filesystem sends, retries included) against
//! Garage. docs/library.md and docs/benchmarks.md state these counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cairn_fs::hooks::RequestHook;
use cairn_fs::{Environment, FileSystem, FileSystemBuilder, ObjectStoreView, WriteMode};
use object_store::{ObjectStore, ObjectStoreExt, path::Path};

/// Counts the requests it sees.
#[derive(Debug, Default)]
struct Counter(AtomicUsize);

impl RequestHook for Counter {
    fn on_request(&self, _request: &mut http::Request<opendal::Buffer>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Counter {
    fn take(&self) -> usize {
        self.0.swap(0, Ordering::SeqCst)
    }
}

fn garage(test: &str) -> Option<(FileSystem, Arc<Counter>, String)> {
    garage_with(test, |_| {})
}

/// [`garage`], with `tweak` applied to the storage options first.
fn garage_with(
    test: &str,
    tweak: impl FnOnce(&mut cairn_fs::StorageOptions),
) -> Option<(FileSystem, Arc<Counter>, String)> {
    let (mut options, s3) = cairn_conformance::s3_server("GARAGE", test)?;
    tweak(&mut options);
    let counter = Arc::new(Counter::default());
    let fs = FileSystemBuilder::new("s3")
        .options(options)
        .env(Environment::default())
        .request_hook(counter.clone())
        .build()
        .unwrap();
    let root = format!(
        "s3://{}/request-counts/{test}-{}",
        s3.bucket,
        std::process::id()
    );
    Some((fs, counter, root))
}

#[tokio::test]
async fn reads_cost_one_request_each() {
    let Some((fs, counter, root)) = garage("reads") else {
        return;
    };
    let file = format!("{root}/f.bin");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    fs.pipe(&file, data.clone().into(), WriteMode::Overwrite)
        .await
        .unwrap();
    counter.take();

    let size = data.len() as u64;
    let cases: Vec<(&str, usize, usize)> = vec![
        (
            "cat_range_with_size inside the file (size from a listing)",
            1,
            {
                let got = fs
                    .cat_range_with_size(&file, 10, Some(2_000), size)
                    .await
                    .unwrap();
                assert_eq!(got, &data[10..2_000]);
                counter.take()
            },
        ),
        ("cat_range_with_size past the end", 1, {
            let got = fs
                .cat_range_with_size(&file, 99_990, Some(200_000), size)
                .await
                .unwrap();
            assert_eq!(got, &data[99_990..]);
            counter.take()
        }),
        ("cat_range to the end", 1, {
            let got = fs.cat_range(&file, 99_000, None).await.unwrap();
            assert_eq!(got, &data[99_000..]);
            counter.take()
        }),
        ("cat_range from the end", 1, {
            assert!(fs.cat_range(&file, 100_000, None).await.unwrap().is_empty());
            counter.take()
        }),
        ("cat_range bounded, size unknown: stat + GET", 2, {
            let got = fs.cat_range(&file, 99_990, Some(200_000)).await.unwrap();
            assert_eq!(got, &data[99_990..]);
            counter.take()
        }),
        ("cat", 1, {
            assert_eq!(fs.cat(&file).await.unwrap().len(), data.len());
            counter.take()
        }),
        ("info", 1, {
            assert_eq!(fs.info(&file).await.unwrap().size, 100_000);
            counter.take()
        }),
    ];
    for (what, expected, requests) in &cases {
        assert_eq!(requests, expected, "{what}");
    }

    // A large file with its size known: 8 MiB ranges, no stat.
    let large = format!("{root}/large.bin");
    let big: Vec<u8> = (0..20_000_000u32).map(|i| (i % 253) as u8).collect();
    fs.pipe(&large, big.clone().into(), WriteMode::Overwrite)
        .await
        .unwrap();
    counter.take();
    let got = fs.cat_with_size(&large, big.len() as u64).await.unwrap();
    assert!(got == big, "20 MB read in parallel ranges, byte for byte");
    assert_eq!(
        counter.take(),
        3,
        "cat_with_size of 20 MB: three 8 MiB ranges"
    );
    assert_eq!(fs.cat_with_size(&file, size).await.unwrap(), data);
    assert_eq!(counter.take(), 1, "cat_with_size of a small file: one GET");
    // Size unknown: the last 8 MiB as a suffix range names the size, then
    // the first 12 MB in two parallel 8 MiB ranges; no HEAD.
    let got = fs.cat(&large).await.unwrap();
    assert!(got == big, "20 MB read by cat, byte for byte");
    assert_eq!(
        counter.take(),
        3,
        "cat of 20 MB: the last part, then two ranges"
    );
    let exact = format!("{root}/two-parts.bin");
    fs.pipe(
        &exact,
        big[..16 << 20].to_vec().into(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    let empty = format!("{root}/empty.bin");
    fs.pipe(&empty, bytes::Bytes::new(), WriteMode::Overwrite)
        .await
        .unwrap();
    counter.take();
    assert!(
        fs.cat(&exact).await.unwrap() == big[..16 << 20],
        "two parts exactly"
    );
    assert_eq!(
        counter.take(),
        2,
        "cat of two parts exactly: the last, then the first"
    );
    assert!(fs.cat(&empty).await.unwrap().is_empty());
    counter.take();

    let store = ObjectStoreView::new(fs.clone(), &root).unwrap();
    let path = Path::from("f.bin");
    assert_eq!(store.get_range(&path, 5..50).await.unwrap(), &data[5..50]);
    assert_eq!(
        counter.take(),
        2,
        "object_store get_range goes through get_opts: HEAD + GET"
    );
    let parts = store
        .get_ranges(&path, &[0..10, 500..600, 90_000..90_001])
        .await
        .unwrap();
    assert_eq!(parts[1], &data[500..600]);
    assert_eq!(
        counter.take(),
        4,
        "object_store get_ranges: one HEAD, one GET per range"
    );
    store.head(&path).await.unwrap();
    assert_eq!(counter.take(), 1, "object_store head");
    assert!(store.get_range(&path, 100_000..100_010).await.is_err());
    counter.take();
    fs.rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();

    // Deletes: rm_list asks each path's type first; rm_files, for files a
    // listing found, is one multi-delete per 1,000 keys.
    let files: Vec<String> = (0..3).map(|i| format!("{root}/del/{i}")).collect();
    for f in &files {
        fs.pipe(f, "x".into(), WriteMode::Overwrite).await.unwrap();
    }
    let paths: Vec<&str> = files.iter().map(String::as_str).collect();
    counter.take();
    fs.rm_files(&paths).await.unwrap();
    assert_eq!(counter.take(), 1, "rm_files of 3 files: one multi-delete");
    for f in &files {
        fs.pipe(f, "x".into(), WriteMode::Overwrite).await.unwrap();
    }
    counter.take();
    fs.rm_list(&paths, cairn_fs::TreeOptions::new())
        .await
        .unwrap();
    assert_eq!(
        counter.take(),
        4,
        "rm_list of 3 files: a HEAD each, one multi-delete"
    );
}

/// `part_size` and `max_concurrency` set how a large read is split: a 20 MB
/// file in 5 MiB parts is 4 GETs (3 at the default 8 MiB).
#[tokio::test]
async fn part_size_option_sets_the_ranges_of_a_large_read() {
    let Some((fs, counter, root)) = garage_with("part-size", |options| {
        options.set("s3", "part_size", (5u64 << 20).into());
        options.set("s3", "max_concurrency", 2.into());
    }) else {
        return;
    };
    assert_eq!(fs.transfer().concurrency.value, 2);
    let file = format!("{root}/large.bin");
    let big: Vec<u8> = (0..20_000_000u32).map(|i| (i % 241) as u8).collect();
    fs.pipe(&file, big.clone().into(), WriteMode::Overwrite)
        .await
        .unwrap();
    counter.take();
    let got = fs.cat_with_size(&file, big.len() as u64).await.unwrap();
    assert!(got == big, "byte for byte");
    assert_eq!(counter.take(), 4, "20 MB in 5 MiB ranges");
    fs.rm(&file).await.unwrap();
}

/// Overwrites a file, once, when the first ranged read of its start goes
/// out: the moment between `cat`'s read of a large file's last part and its
/// reads of the rest.
#[derive(Debug)]
struct OverwriteOnce {
    fs: FileSystem,
    path: String,
    data: Vec<u8>,
    armed: std::sync::atomic::AtomicBool,
}

impl RequestHook for OverwriteOnce {
    fn on_request(&self, request: &mut http::Request<opendal::Buffer>) {
        let from_the_start = request
            .headers()
            .get(http::header::RANGE)
            .is_some_and(|range| range.as_bytes().starts_with(b"bytes=0-"));
        if from_the_start && self.armed.swap(false, Ordering::SeqCst) {
            let (fs, path, data) = (self.fs.clone(), self.path.clone(), self.data.clone());
            std::thread::spawn(move || {
                tokio::runtime::Runtime::new().unwrap().block_on(fs.pipe(
                    &path,
                    data.into(),
                    WriteMode::Overwrite,
                ))
            })
            .join()
            .unwrap()
            .unwrap();
        }
    }
}

/// A large file overwritten (by another of the same size) while `cat`
/// reads it is an error naming it, never a mix of the two objects: the
/// ranged reads are pinned to the ETag the last part came with.
#[tokio::test]
async fn cat_refuses_a_file_overwritten_while_it_is_read() {
    let Some((options, s3)) = cairn_conformance::s3_server("GARAGE", "cat-overwrite") else {
        return;
    };
    let path = format!(
        "s3://{}/request-counts/cat-overwrite-{}/large.bin",
        s3.bucket,
        std::process::id()
    );
    let writer = FileSystemBuilder::new("s3")
        .options(options.clone())
        .env(Environment::default())
        .build()
        .unwrap();
    let first: Vec<u8> = vec![1; 20_000_000];
    writer
        .pipe(&path, first.clone().into(), WriteMode::Overwrite)
        .await
        .unwrap();
    let overwrite = Arc::new(OverwriteOnce {
        fs: writer.clone(),
        path: path.clone(),
        data: vec![2; 20_000_000],
        armed: true.into(),
    });
    let reader = FileSystemBuilder::new("s3")
        .options(options)
        .env(Environment::default())
        .request_hook(overwrite.clone())
        .build()
        .unwrap();
    let err = reader.cat(&path).await.unwrap_err();
    assert!(
        !overwrite.armed.load(Ordering::SeqCst),
        "the file was overwritten during the read"
    );
    assert_eq!(err.kind(), cairn_fs::ErrorKind::PreconditionFailed, "{err}");
    assert!(err.to_string().contains(&path), "{err}");
    // Read again, the file is the second object whole.
    assert!(reader.cat(&path).await.unwrap().iter().all(|&b| b == 2));
    writer.rm(&path).await.unwrap();
}
