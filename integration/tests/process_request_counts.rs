//! `cairn_fs::request_counts()` counts every HTTP request the process
//! sends, by method: checked against a request hook that sees each one, on
//! Garage. One test in this binary, so no other test's requests mix in.

use std::sync::Arc;
use std::sync::Mutex;

use cairn_fs::hooks::RequestHook;
use cairn_fs::{Environment, FileSystemBuilder, TreeOptions, WriteMode, request_counts};

/// Records the method of each request it sees.
#[derive(Debug, Default)]
struct Methods(Mutex<Vec<http::Method>>);

impl RequestHook for Methods {
    fn on_request(&self, request: &mut http::Request<opendal::Buffer>) {
        self.0.lock().unwrap().push(request.method().clone());
    }
}

#[tokio::test]
async fn process_counts_match_the_requests_on_the_wire() {
    let Some((options, s3)) = cairn_conformance::s3_server("GARAGE", "process-counts") else {
        return;
    };
    let seen = Arc::new(Methods::default());
    let fs = FileSystemBuilder::new("s3")
        .options(options)
        .env(Environment::default())
        .request_hook(seen.clone())
        .build()
        .unwrap();
    let root = format!("s3://{}/process-counts-{}", s3.bucket, std::process::id());
    let before = request_counts();
    for i in 0..3 {
        fs.pipe(&format!("{root}/f{i}"), "x".into(), WriteMode::Overwrite)
            .await
            .unwrap();
    }
    assert_eq!(fs.cat(&format!("{root}/f1")).await.unwrap(), "x");
    assert_eq!(fs.find(&root).await.unwrap().len(), 3);
    fs.info(&format!("{root}/f2")).await.unwrap();
    fs.rm_with(&root, TreeOptions::new().recursive(true))
        .await
        .unwrap();
    let sent = request_counts().since(&before);
    let methods = seen.0.lock().unwrap().clone();
    let of = |m: http::Method| methods.iter().filter(|x| **x == m).count() as u64;
    assert_eq!(
        sent.total(),
        methods.len() as u64,
        "{sent:?} vs {methods:?}"
    );
    assert_eq!(
        (sent.get, sent.put, sent.head, sent.post, sent.delete),
        (
            of(http::Method::GET),
            of(http::Method::PUT),
            of(http::Method::HEAD),
            of(http::Method::POST),
            of(http::Method::DELETE)
        )
    );
    assert_eq!(sent.put, 3, "three uploads");
    assert!(sent.get >= 2, "a read and a listing: {sent:?}");
}
