//! Wire-level checks of `cos://` that no local server makes: a recording proxy
//! on 127.0.0.1 sits between cairn and Garage, keeps every request, and
//! forwards it unchanged. Every multi-object delete must carry the right
//! Content-MD5, and every request must be virtual-host style.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use cairn_conformance::S3Settings;
use cairn_conformance::loopback::loopback_client;
use cairn_fs::hooks::{RequestHook, is_multi_delete};
use cairn_fs::{Environment, FileSystem, FileSystemBuilder, WriteMode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

#[derive(Debug, Clone)]
struct Recorded {
    method: String,
    host: String,
    path_and_query: String,
    content_md5: Option<String>,
    body: Bytes,
}

impl Recorded {
    fn is_multi_delete(&self) -> bool {
        let req = http::Request::builder()
            .method(self.method.as_str())
            .uri(&self.path_and_query)
            .body(())
            .unwrap();
        is_multi_delete(&req)
    }

    fn md5_is_right(&self) -> bool {
        let expected = base64::engine::general_purpose::STANDARD.encode(md5::compute(&self.body).0);
        self.content_md5.as_deref() == Some(expected.as_str())
    }
}

type Log = Arc<Mutex<Vec<Recorded>>>;

/// Starts the recording proxy in front of `upstream` (host:port on 127.0.0.1).
async fn start_proxy(upstream: String) -> (SocketAddr, Log) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log: Log = Arc::default();
    let client = loopback_client();
    let shared = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (log, client, upstream) = (shared.clone(), client.clone(), upstream.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (log, client, upstream) = (log.clone(), client.clone(), upstream.clone());
                    async move { Ok::<_, Infallible>(forward(req, &log, &client, &upstream).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, log)
}

async fn forward(
    req: hyper::Request<hyper::body::Incoming>,
    log: &Log,
    client: &reqwest::Client,
    upstream: &str,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    log.lock().unwrap().push(Recorded {
        method: parts.method.to_string(),
        host: header("host").unwrap_or_default(),
        path_and_query: path_and_query.clone(),
        content_md5: header("content-md5"),
        body: body.clone(),
    });
    // Forward unchanged, Host header included, so the signature still holds.
    let mut request = client
        .request(
            parts.method.clone(),
            format!("http://{upstream}{path_and_query}"),
        )
        .body(body);
    for (name, value) in &parts.headers {
        request = request.header(name, value);
    }
    let answer = request.send().await.unwrap();
    let mut response = hyper::Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != http::header::TRANSFER_ENCODING && name != http::header::CONNECTION {
            response = response.header(name, value);
        }
    }
    response
        .body(Full::new(answer.bytes().await.unwrap()))
        .unwrap()
}

fn garage() -> Option<S3Settings> {
    cairn_conformance::s3_server("GARAGE", "COS wire test").map(|(_, settings)| settings)
}

/// Writes 1500 small files under `root` and removes them recursively: two
/// multi-delete batches.
async fn write_and_remove(fs: &FileSystem, root: &str) {
    let urls: Vec<String> = (0..1500).map(|i| format!("{root}/f{i:04}")).collect();
    futures::future::try_join_all(urls.chunks(100).map(|chunk| async move {
        for url in chunk {
            fs.pipe(url, Bytes::from_static(b"x"), WriteMode::Overwrite)
                .await?;
        }
        Ok::<_, cairn_fs::Error>(())
    }))
    .await
    .unwrap();
    assert_eq!(fs.ls(root).await.unwrap().len(), 1500);
    fs.rm_with(root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap();
    assert!(!fs.exists(root).await.unwrap());
}

fn unique(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("wire-{test}-{}-{nanos}", std::process::id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cos_multi_deletes_carry_content_md5_and_requests_are_virtual_host() {
    let Some(s3) = garage() else { return };
    let upstream = s3.endpoint.trim_start_matches("http://").to_string();
    let (proxy, log) = start_proxy(upstream).await;
    let fs = FileSystemBuilder::new("cos")
        .options(s3.cos_options(
            &format!("http://s3.garage.localhost:{}", proxy.port()),
            &s3.secret,
        ))
        .env(Environment::default())
        .http_client(loopback_client())
        .build()
        .unwrap();
    write_and_remove(&fs, &format!("cos://{}/{}", s3.bucket, unique("cos"))).await;

    let log = log.lock().unwrap();
    let deletes: Vec<&Recorded> = log.iter().filter(|r| r.is_multi_delete()).collect();
    assert!(
        deletes.len() >= 2,
        "expected at least 2 multi-deletes, saw {}",
        deletes.len()
    );
    for d in &deletes {
        assert!(
            d.md5_is_right(),
            "multi-delete with Content-MD5 {:?}",
            d.content_md5
        );
    }
    let bucket_host = format!("{}.s3.garage.localhost:{}", s3.bucket, proxy.port());
    for r in log.iter() {
        assert_eq!(
            r.host, bucket_host,
            "{} {} is not virtual-host style",
            r.method, r.path_and_query
        );
        assert!(
            !r.path_and_query.starts_with(&format!("/{}/", s3.bucket)),
            "path-style request: {}",
            r.path_and_query
        );
    }
    eprintln!(
        "{} requests recorded, {} multi-deletes checked",
        log.len(),
        deletes.len()
    );
}

/// A hook that damages Content-MD5, to show the proxy's check can fail.
/// (It runs after the backend's hooks, so it cannot show the COS hook
/// repairing a header; the hook's own tests do that.)
#[derive(Debug)]
struct DamageContentMd5;

impl RequestHook for DamageContentMd5 {
    fn on_request(&self, request: &mut http::Request<opendal::Buffer>) {
        if is_multi_delete(request) {
            request.headers_mut().insert(
                "content-md5",
                http::HeaderValue::from_static("AAAAAAAAAAAAAAAAAAAAAA=="),
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_sees_a_wrong_content_md5() {
    let Some(s3) = garage() else { return };
    let upstream = s3.endpoint.trim_start_matches("http://").to_string();
    let (proxy, log) = start_proxy(upstream).await;
    let mut options = s3.options_with_secret(&s3.secret);
    options.set(
        "s3",
        "endpoint_url",
        format!("http://s3.garage.localhost:{}", proxy.port()).into(),
    );
    let fs = FileSystemBuilder::new("s3")
        .options(options)
        .env(Environment::default())
        .http_client(loopback_client())
        .request_hook(Arc::new(DamageContentMd5))
        .build()
        .unwrap();
    let root = format!("s3://{}/{}", s3.bucket, unique("damaged"));
    for i in 0..3 {
        fs.pipe(
            &format!("{root}/f{i}"),
            Bytes::from_static(b"x"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    }
    // OpenDAL signs the Content-MD5 it sends, so the damaged header also
    // breaks the signature and Garage refuses the delete; the proxy saw it first.
    let err = fs
        .rm_with(&root, cairn_fs::TreeOptions::new().recursive(true))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), cairn_fs::ErrorKind::PermissionDenied, "{err}");
    let log = log.lock().unwrap();
    let deletes: Vec<&Recorded> = log.iter().filter(|r| r.is_multi_delete()).collect();
    assert!(!deletes.is_empty());
    assert!(
        deletes.iter().all(|d| !d.md5_is_right()),
        "the damaged header went unnoticed"
    );
    assert!(
        log.iter().all(|r| !r.host.starts_with(&s3.bucket)),
        "s3 with a custom endpoint is path style"
    );
}
