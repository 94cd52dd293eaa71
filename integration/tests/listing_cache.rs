//! The listing cache: staleness, invalidation by own writes, expiry, and the
//! resume case (another process commits; a checkpoint filesystem sees it at
//! once, a cached one does not). On memory, file and Garage.

use std::time::Duration;

use cairn_fs::{
    FileSystem, FileSystemBuilder, StorageOptions, WriteMode, build_checkpoint_filesystem,
};

/// Two independent filesystem objects over one store, plus the root URL.
struct Pair {
    writer: FileSystem,
    cached: FileSystem,
    root: String,
    options: StorageOptions,
    _dir: Option<tempfile::TempDir>,
}

fn unique() -> String {
    format!(
        "cache-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

fn pair(protocol: &str, extra: &[(&str, serde_json::Value)]) -> Option<Pair> {
    let (mut options, root, dir) = match protocol {
        "memory" => (
            StorageOptions::new(),
            format!("memory:///{}", unique()),
            None,
        ),
        "file" => {
            let dir = tempfile::tempdir().unwrap();
            (
                StorageOptions::new(),
                format!("file://{}", dir.path().display()),
                Some(dir),
            )
        }
        "s3" => {
            let (options, s3) = cairn_conformance::s3_server("GARAGE", "listing cache on Garage")?;
            (options, format!("s3://{}/{}", s3.bucket, unique()), None)
        }
        other => panic!("{other}"),
    };
    for (k, v) in extra {
        options.set(protocol, k, v.clone());
    }
    let build = || {
        FileSystemBuilder::new(protocol)
            .options(options.clone())
            .env(cairn_fs::Environment::default())
            .build()
            .unwrap()
    };
    Some(Pair {
        writer: build(),
        cached: build(),
        root,
        options,
        _dir: dir,
    })
}

async fn names(fs: &FileSystem, url: &str) -> Vec<String> {
    let base = fs.strip(url).unwrap();
    fs.ls(url)
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name[base.len() + 1..].to_string())
        .collect()
}

async fn stale_until_refreshed(protocol: &str) {
    let Some(p) = pair(protocol, &[]) else { return };
    let dir = format!("{}/ckpt", p.root);
    p.writer
        .pipe(
            &format!("{dir}/a.parquet"),
            "a".into(),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(names(&p.cached, &dir).await, ["a.parquet"]);
    // Another process commits b: the cached filesystem does not see it ...
    p.writer
        .pipe(
            &format!("{dir}/b.parquet"),
            "b".into(),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(
        names(&p.cached, &dir).await,
        ["a.parquet"],
        "served from the cache"
    );
    assert!(
        !p.cached.exists(&format!("{dir}/b.parquet")).await.unwrap(),
        "exists answers from the cached parent"
    );
    // ... a checkpoint filesystem does, at once ...
    let (ckpt, path) = build_checkpoint_filesystem(&dir, &p.options).unwrap();
    assert!(!ckpt.listing_cache().enabled.value);
    assert_eq!(names(&ckpt, &path).await, ["a.parquet", "b.parquet"]);
    assert!(ckpt.exists(&format!("{dir}/b.parquet")).await.unwrap());
    // ... and the cached one after a refresh.
    p.cached.invalidate_cache();
    assert_eq!(names(&p.cached, &dir).await, ["a.parquet", "b.parquet"]);
}

async fn own_writes_invalidate(protocol: &str) {
    let Some(p) = pair(protocol, &[]) else { return };
    let dir = format!("{}/own/sub", p.root);
    p.cached
        .pipe(&format!("{dir}/x"), "x".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(names(&p.cached, &dir).await, ["x"]);
    assert_eq!(names(&p.cached, &format!("{}/own", p.root)).await, ["sub"]);
    p.cached
        .pipe(&format!("{dir}/y"), "y".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(
        names(&p.cached, &dir).await,
        ["x", "y"],
        "pipe invalidates the directory"
    );
    p.cached
        .cp(&format!("{dir}/x"), &format!("{dir}/z"))
        .await
        .unwrap();
    assert_eq!(
        names(&p.cached, &dir).await,
        ["x", "y", "z"],
        "cp invalidates the target"
    );
    p.cached.rm(&format!("{dir}/x")).await.unwrap();
    assert_eq!(names(&p.cached, &dir).await, ["y", "z"], "rm invalidates");
    let mut w = p.cached.open_write(&format!("{dir}/w")).await.unwrap();
    w.write("w".into()).await.unwrap();
    w.close().await.unwrap();
    assert_eq!(
        names(&p.cached, &dir).await,
        ["w", "y", "z"],
        "closing a writer invalidates"
    );
    p.cached
        .rm_with(
            &format!("{}/own", p.root),
            cairn_fs::TreeOptions::new().recursive(true),
        )
        .await
        .unwrap();
    assert!(
        !p.cached.exists(&dir).await.unwrap(),
        "recursive rm invalidates ancestors"
    );
}

async fn expiry_and_off_switch(protocol: &str) {
    let Some(p) = pair(
        protocol,
        &[("listings_expiry_time", serde_json::json!(0.3))],
    ) else {
        return;
    };
    let dir = format!("{}/exp", p.root);
    p.writer
        .pipe(&format!("{dir}/a"), "a".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(names(&p.cached, &dir).await, ["a"]);
    p.writer
        .pipe(&format!("{dir}/b"), "b".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(names(&p.cached, &dir).await, ["a"]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        names(&p.cached, &dir).await,
        ["a", "b"],
        "expired entries are listed again"
    );

    let Some(p) = pair(
        protocol,
        &[("use_listings_cache", serde_json::json!(false))],
    ) else {
        return;
    };
    let dir = format!("{}/off", p.root);
    p.writer
        .pipe(&format!("{dir}/a"), "a".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(names(&p.cached, &dir).await, ["a"]);
    p.writer
        .pipe(&format!("{dir}/b"), "b".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    assert_eq!(
        names(&p.cached, &dir).await,
        ["a", "b"],
        "use_listings_cache=false never caches"
    );
}

#[tokio::test]
async fn checkpoint_options_cannot_turn_the_cache_on() {
    let mut options = StorageOptions::new();
    options.set("file", "use_listings_cache", serde_json::json!(true));
    let (fs, _) = build_checkpoint_filesystem("/tmp/x", &options).unwrap();
    assert!(!fs.listing_cache().enabled.value);
    let cos = FileSystemBuilder::new("cos")
        .options(
            StorageOptions::from_json(serde_json::json!({"cos": {"region": "ap-guangzhou"}}))
                .unwrap(),
        )
        .env(cairn_fs::Environment::default())
        .build()
        .unwrap();
    assert!(!cos.listing_cache().enabled.value, "off by default for cos");
    assert!(
        FileSystem::new("s3", &StorageOptions::new())
            .unwrap()
            .listing_cache()
            .enabled
            .value
    );
}

macro_rules! on_backends {
    ($($body:ident),*) => {
        mod memory { $( #[tokio::test] async fn $body() { super::$body("memory").await } )* }
        mod file { $( #[tokio::test] async fn $body() { super::$body("file").await } )* }
        mod garage { $( #[tokio::test] async fn $body() { super::$body("s3").await } )* }
    };
}
on_backends!(
    stale_until_refreshed,
    own_writes_invalidate,
    expiry_and_off_switch
);
