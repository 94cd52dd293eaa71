//! tclake:// against the local catalog: where a volume's files land, what
//! is refused (LAKEHOUSE catalogs, other path forms), the catalog's errors
//! (bad signature, missing schema or volume, an API error), and credentials
//! that expire while the volume is in use.

use std::time::{Duration, Instant};

use cairn_conformance::{TCLAKE_SK, tclake_catalog};
use cairn_fs::{Environment, ErrorKind, FileSystem, FileSystemBuilder, StorageOptions, WriteMode};

fn filesystem(options: StorageOptions) -> FileSystem {
    FileSystemBuilder::new("tclake")
        .options(options)
        .env(Environment::default())
        .build()
        .unwrap()
}

fn unique() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_is_its_storage_location() {
    let Some(catalog) = tclake_catalog("a_volume_is_its_storage_location") else {
        return;
    };
    let fs = filesystem(catalog.options(TCLAKE_SK));
    let name = format!("placement/{}/a.txt", unique());
    fs.pipe(
        &format!("tclake://volume/lake/raw/files/{name}"),
        "alpha".into(),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    // The same object through plain s3: the volume's StorageLocation prefix.
    let mut s3 = StorageOptions::new();
    s3.set("s3", "endpoint_url", catalog.s3.endpoint.clone().into())
        .set("s3", "region", catalog.s3.region.clone().into())
        .set("s3", "key", catalog.s3.key.clone().into())
        .set("s3", "secret", catalog.s3.secret.clone().into());
    let plain = FileSystemBuilder::new("s3")
        .options(s3)
        .env(Environment::default())
        .build()
        .unwrap();
    let direct = plain
        .cat(&format!("s3://{}/tclake/files/{name}", catalog.s3.bucket))
        .await
        .unwrap();
    assert_eq!(&direct[..], b"alpha");
    let info = fs
        .info(&format!("tclake://volume/lake/raw/files/{name}"))
        .await
        .unwrap();
    assert_eq!(info.name, format!("volume/lake/raw/files/{name}"));
    let described = fs.describe();
    let sk = described.iter().find(|l| l.name == "sk").unwrap();
    assert_eq!(sk.value, "***");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_a_volume_is_refused() {
    let Some(catalog) = tclake_catalog("what_is_not_a_volume_is_refused") else {
        return;
    };
    let fs = filesystem(catalog.options(TCLAKE_SK));
    let err = fs.ls("tclake://volume/tables/t/v/x").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert!(
        err.to_string().contains("LAKEHOUSE catalog")
            && err.to_string().contains("VOLUME catalogs only"),
        "{err}"
    );
    let err = fs
        .ls("tclake://lakehouse/lake/raw/table/x")
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("tclake://lakehouse/... is not supported"),
        "{err}"
    );
    let err = fs.ls("tclake://volume/lake").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidUrl, "{err}");
    assert!(
        err.to_string()
            .contains("tclake://volume/<catalog>/<schema>/<volume>/<path>"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_errors_are_clear() {
    let Some(catalog) = tclake_catalog("catalog_errors_are_clear") else {
        return;
    };
    // A wrong SecretKey: the catalog's signature check fails.
    let wrong = "not-the-right-key-4a7c";
    let err = filesystem(catalog.options(wrong))
        .ls("tclake://volume/lake/raw/files/")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let text = format!("{err} {err:?}");
    assert!(
        text.contains("AuthFailure.SignatureFailure") && text.contains("tclake.sk"),
        "{err}"
    );
    assert!(!text.contains(wrong), "the secret leaked: {text}");

    let fs = filesystem(catalog.options(TCLAKE_SK));
    let err = fs.ls("tclake://volume/lake/raw/nope/x").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(
        err.to_string().contains("ResourceNotFound.Volume")
            && err.to_string().contains("lake/raw/nope"),
        "{err}"
    );
    let err = fs.ls("tclake://volume/lake/gone/v/x").await.unwrap_err();
    assert!(err.to_string().contains("ResourceNotFound.Schema"), "{err}");
    let err = fs.ls("tclake://volume/broken/s/v/x").await.unwrap_err();
    assert!(
        err.to_string().contains("InternalError") && err.to_string().contains("unavailable"),
        "{err}"
    );

    // Missing settings name the option and the variable.
    let mut options = catalog.options(TCLAKE_SK);
    options.set("tclake", "region", serde_json::Value::Null);
    let mut bare = StorageOptions::new();
    bare.set("tclake", "sid", "x".into())
        .set("tclake", "sk", "y".into());
    let err = FileSystemBuilder::new("tclake")
        .options(bare)
        .env(Environment::default())
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("tclake.region")
            && err.to_string().contains("TENCENTCLOUD_REGION"),
        "{err}"
    );
    // The Tencent variables are the fallback.
    let env = Environment::from_pairs([
        ("TENCENTCLOUD_SECRET_ID", cairn_conformance::TCLAKE_SID),
        ("TENCENTCLOUD_SECRET_KEY", TCLAKE_SK),
        ("TENCENTCLOUD_REGION", catalog.s3.region.as_str()),
    ]);
    let mut only_endpoints = StorageOptions::new();
    only_endpoints
        .set("tclake", "endpoint", catalog.endpoint.clone().into())
        .set("tclake", "cos_endpoint", catalog.s3.endpoint.clone().into())
        .set("tclake", "addressing_style", "path".into());
    let fs = FileSystemBuilder::new("tclake")
        .options(only_endpoints)
        .env(env)
        .build()
        .unwrap();
    fs.ls("tclake://volume/lake/raw/files/").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_expire_while_in_use_and_work_goes_on() {
    let Some(catalog) = tclake_catalog("credentials_expire_while_in_use_and_work_goes_on") else {
        return;
    };
    let fs = filesystem(catalog.options(TCLAKE_SK));
    let root = format!("tclake://volume/lake/raw/short/expiry-{}", unique());
    let issued_before = catalog.stats().await["credentials"].as_u64().unwrap();
    // The volume's credentials last 20 s and are replaced 15 s before they
    // expire: 12 s of continuous writes and reads go through three sets.
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(12) {
        let path = format!("{root}/f{n}");
        fs.pipe(&path, format!("{n}").into(), WriteMode::Overwrite)
            .await
            .unwrap();
        assert_eq!(fs.cat(&path).await.unwrap(), format!("{n}").as_bytes());
        n += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fs.find(&root).await.unwrap().len(), n);
    let issued = catalog.stats().await["credentials"].as_u64().unwrap() - issued_before;
    assert!(
        issued >= 3,
        "credentials were fetched {issued} times in 12 s of 20 s credentials"
    );
    assert!(
        issued < n as u64,
        "credentials were fetched for every request ({issued} for {n} files)"
    );
    fs.rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
}
