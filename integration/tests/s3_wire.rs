//! Wire-level check of s3fs's `requester_pays` and `s3_additional_kwargs`
//! (server-side encryption) on moto: a request hook records every request
//! exactly as cairn sends it (after signing). Every request carries
//! `x-amz-request-payer: requester`; every upload carries
//! `x-amz-server-side-encryption`, and moto stores the object encrypted.

use std::sync::{Arc, Mutex};

use cairn_fs::hooks::RequestHook;
use cairn_fs::{Environment, FileSystemBuilder, StorageOptions, WriteMode};

/// (method, path and query, request-payer header, SSE header) of each request.
type Seen = Vec<(String, String, Option<String>, Option<String>)>;

#[derive(Debug, Default)]
struct Recorder(Mutex<Seen>);

impl RequestHook for Recorder {
    fn on_request(&self, request: &mut http::Request<opendal::Buffer>) {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap_or("").to_string())
        };
        self.0.lock().unwrap().push((
            request.method().to_string(),
            request
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            header("x-amz-request-payer"),
            header("x-amz-server-side-encryption"),
        ));
    }
}

#[tokio::test]
#[ignore = "needs the moto server: scripts/test.sh runs it"]
async fn requester_pays_and_sse_are_on_the_wire() {
    let (_, settings) = cairn_conformance::s3_server("MOTO", "s3 wire test")
        .expect("the moto server (scripts/test.sh)");
    let mut options = StorageOptions::new();
    options
        .set("s3", "endpoint_url", settings.endpoint.clone().into())
        .set("s3", "region", settings.region.clone().into())
        .set("s3", "key", settings.key.clone().into())
        .set("s3", "secret", settings.secret.clone().into())
        .set("s3", "requester_pays", true.into())
        .set(
            "s3",
            "s3_additional_kwargs",
            serde_json::json!({"ServerSideEncryption": "AES256"}),
        );
    let recorder = Arc::new(Recorder::default());
    let fs = FileSystemBuilder::new("s3")
        .options(options)
        .env(Environment::default())
        .request_hook(recorder.clone())
        .build()
        .unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = format!("s3://{}/s3-wire-{nanos}", settings.bucket);
    fs.pipe(&format!("{dir}/a"), "payload".into(), WriteMode::Overwrite)
        .await
        .unwrap();
    let mut writer = fs.open_write(&format!("{dir}/b")).await.unwrap();
    writer.write(vec![7u8; 9 << 20].into()).await.unwrap();
    writer.close().await.unwrap();
    assert_eq!(fs.cat(&format!("{dir}/a")).await.unwrap(), "payload");
    assert_eq!(fs.ls(&dir).await.unwrap().len(), 2);
    fs.rm_with(&dir, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();

    let seen = recorder.0.lock().unwrap().clone();
    assert!(seen.len() >= 6, "{seen:?}");
    for (method, path, payer, _) in &seen {
        assert_eq!(
            payer.as_deref(),
            Some("requester"),
            "{method} {path} lacks x-amz-request-payer"
        );
    }
    let uploads: Vec<_> = seen
        .iter()
        .filter(|(m, p, _, _)| {
            (m == "PUT" && !p.contains("partNumber=")) || (m == "POST" && p.contains("uploads"))
        })
        .collect();
    assert!(uploads.len() >= 2, "a put and a multipart start: {seen:?}");
    for (method, path, _, sse) in uploads {
        assert_eq!(sse.as_deref(), Some("AES256"), "{method} {path} lacks SSE");
    }
}
