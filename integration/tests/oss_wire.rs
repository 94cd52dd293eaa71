//! `oss://` against a local recording server on 127.0.0.1 (no OSS server can
//! run here): request shapes, signing headers, addressing, create-if-absent
//! and error mapping. The server keeps objects in memory, answers with the
//! XML OSS answers with, and records every request.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use cairn_conformance::loopback::loopback_client;
use cairn_fs::{Environment, ErrorKind, FileSystem, FileSystemBuilder, StorageOptions, WriteMode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

const KEY_ID: &str = "LTAI-test-key-id";
const SECRET: &str = "oss-test-secret-do-not-leak";

#[derive(Debug, Clone)]
struct Recorded {
    method: String,
    host: String,
    path: String,
    query: String,
    headers: BTreeMap<String, String>,
    body: Bytes,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Bytes>,
    log: Vec<Recorded>,
}

type Shared = Arc<Mutex<State>>;

fn error(status: u16, code: &str) -> hyper::Response<Full<Bytes>> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{code}</Message><RequestId>test</RequestId></Error>"
    );
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/xml")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn ok(body: impl Into<Bytes>) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(200)
        .header("etag", "\"etag-1\"")
        .header("last-modified", "Sun, 29 Nov 2026 12:00:00 GMT")
        .body(Full::new(body.into()))
        .unwrap()
}

fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|p| p.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')))
}

fn decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("x={s}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// Serves one request against the in-memory bucket `bucket`.
fn answer(
    state: &mut State,
    bucket: &str,
    rec: &Recorded,
    path_style: bool,
) -> hyper::Response<Full<Bytes>> {
    let mut key = rec.path.trim_start_matches('/').to_string();
    if path_style {
        key = key
            .strip_prefix(bucket)
            .unwrap_or(&key)
            .trim_start_matches('/')
            .to_string();
    }
    let key = decode(&key);
    if key.contains("forbidden") {
        return error(403, "AccessDenied");
    }
    match rec.method.as_str() {
        "PUT" => {
            let forbid = rec
                .headers
                .get("x-oss-forbid-overwrite")
                .map(String::as_str)
                == Some("true");
            if forbid && state.objects.contains_key(&key) {
                return error(409, "FileAlreadyExists");
            }
            state.objects.insert(key, rec.body.clone());
            ok(Bytes::new())
        }
        "GET" if key.is_empty() => {
            let prefix = query_param(&rec.query, "prefix")
                .map(decode)
                .unwrap_or_default();
            let delimiter = query_param(&rec.query, "delimiter").map(decode);
            let mut contents = String::new();
            let mut prefixes = std::collections::BTreeSet::new();
            for (k, v) in state.objects.range(prefix.clone()..) {
                let Some(rest) = k.strip_prefix(&prefix) else {
                    break;
                };
                match (&delimiter, rest.find('/')) {
                    (Some(_), Some(idx)) => {
                        prefixes.insert(format!("{prefix}{}", &rest[..=idx]));
                    }
                    _ => contents.push_str(&format!(
                        "<Contents><Key>{k}</Key><LastModified>2026-11-29T12:00:00.000Z</LastModified><ETag>\"e\"</ETag><Size>{}</Size></Contents>",
                        v.len()
                    )),
                }
            }
            let common: String = prefixes
                .iter()
                .map(|p| format!("<CommonPrefixes><Prefix>{p}</Prefix></CommonPrefixes>"))
                .collect();
            ok(format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><Name>{bucket}</Name><Prefix>{prefix}</Prefix><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>{contents}{common}</ListBucketResult>"
            ))
        }
        "GET" | "HEAD" => match state.objects.get(&key) {
            Some(v) if rec.method == "GET" => ok(v.clone()),
            Some(v) => hyper::Response::builder()
                .status(200)
                .header("content-length", v.len())
                .header("etag", "\"etag-1\"")
                .body(Full::new(Bytes::new()))
                .unwrap(),
            None => error(404, "NoSuchKey"),
        },
        "DELETE" => {
            state.objects.remove(&key);
            hyper::Response::builder()
                .status(204)
                .body(Full::new(Bytes::new()))
                .unwrap()
        }
        "POST"
            if rec
                .query
                .split('&')
                .any(|p| p == "delete" || p.starts_with("delete=")) =>
        {
            let body = String::from_utf8_lossy(&rec.body).to_string();
            let mut deleted = String::new();
            for part in body.split("<Key>").skip(1) {
                if let Some(end) = part.find("</Key>") {
                    state.objects.remove(&part[..end]);
                    deleted.push_str(&format!("<Deleted><Key>{}</Key></Deleted>", &part[..end]));
                }
            }
            ok(format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><DeleteResult>{deleted}</DeleteResult>"
            ))
        }
        _ => error(400, "InvalidRequest"),
    }
}

async fn start(bucket: &'static str, path_style: bool) -> (SocketAddr, Shared) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shared: Shared = Arc::default();
    let state = shared.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let state = state.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let state = state.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await.unwrap().to_bytes();
                        let rec = Recorded {
                            method: parts.method.to_string(),
                            host: parts
                                .headers
                                .get("host")
                                .map(|h| h.to_str().unwrap().to_string())
                                .unwrap_or_default(),
                            path: parts.uri.path().to_string(),
                            query: parts.uri.query().unwrap_or_default().to_string(),
                            headers: parts
                                .headers
                                .iter()
                                .map(|(k, v)| {
                                    (k.to_string(), v.to_str().unwrap_or_default().to_string())
                                })
                                .collect(),
                            body,
                        };
                        let mut state = state.lock().unwrap();
                        let response = answer(&mut state, bucket, &rec, path_style);
                        state.log.push(rec);
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, shared)
}

fn oss(addr: SocketAddr, style: Option<&str>) -> FileSystem {
    let mut options = StorageOptions::new();
    options
        .set(
            "oss",
            "endpoint",
            format!("http://oss-test.localhost:{}", addr.port()).into(),
        )
        .set("oss", "key", KEY_ID.into())
        .set("oss", "secret", SECRET.into());
    if let Some(style) = style {
        options.set("oss", "addressing_style", style.into());
    }
    FileSystemBuilder::new("oss")
        .options(options)
        .env(Environment::default())
        .http_client(loopback_client())
        .build()
        .unwrap()
}

#[tokio::test]
async fn virtual_host_requests_are_signed_and_round_trip() {
    let (addr, state) = start("bkt", false).await;
    let fs = oss(addr, None);
    fs.pipe(
        "oss://bkt/dir/a.txt",
        Bytes::from_static(b"alpha"),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    fs.pipe(
        "oss://bkt/dir/sub/b.txt",
        Bytes::from_static(b"bravo"),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    assert_eq!(fs.cat("oss://bkt/dir/a.txt").await.unwrap(), "alpha");
    assert_eq!(fs.info("oss://bkt/dir/a.txt").await.unwrap().size, 5);
    let names: Vec<String> = fs
        .ls("oss://bkt/dir")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["bkt/dir/a.txt", "bkt/dir/sub"]);
    fs.rm_with(
        "oss://bkt/dir",
        cairn_fs::TreeOptions::new().recursive(true),
    )
    .await
    .unwrap();
    assert!(
        state.lock().unwrap().objects.is_empty(),
        "recursive rm removed everything"
    );

    let state = state.lock().unwrap();
    assert!(state.log.len() >= 6);
    for r in &state.log {
        assert_eq!(
            r.host,
            format!("bkt.oss-test.localhost:{}", addr.port()),
            "{} {} not virtual-host",
            r.method,
            r.path
        );
        assert!(
            !r.path.starts_with("/bkt/"),
            "path-style request {}",
            r.path
        );
        let auth = r
            .headers
            .get("authorization")
            .expect("every request is signed");
        assert!(auth.starts_with("OSS") && auth.contains(KEY_ID), "{auth}");
        let all = format!("{r:?}");
        assert!(!all.contains(SECRET), "the secret went on the wire");
    }
    let put = state.log.iter().find(|r| r.method == "PUT").unwrap();
    assert!(put.headers.contains_key("date") || put.headers.contains_key("x-oss-date"));
    let deletes: Vec<&Recorded> = state.log.iter().filter(|r| r.method == "POST").collect();
    assert_eq!(deletes.len(), 1, "one batch delete");
    let md5 = base64::engine::general_purpose::STANDARD.encode(md5::compute(&deletes[0].body).0);
    assert_eq!(deletes[0].headers.get("content-md5"), Some(&md5));
}

#[tokio::test]
async fn path_style_when_asked() {
    let (addr, state) = start("bkt", true).await;
    let fs = oss(addr, Some("path"));
    fs.pipe(
        "oss://bkt/k",
        Bytes::from_static(b"v"),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    assert_eq!(fs.cat("oss://bkt/k").await.unwrap(), "v");
    let state = state.lock().unwrap();
    for r in &state.log {
        assert_eq!(r.host, format!("oss-test.localhost:{}", addr.port()));
        assert!(r.path.starts_with("/bkt/"), "{}", r.path);
    }
}

#[tokio::test]
async fn create_if_absent_uses_forbid_overwrite() {
    let (addr, state) = start("bkt", false).await;
    let fs = oss(addr, None);
    fs.pipe(
        "oss://bkt/once",
        Bytes::from_static(b"1"),
        WriteMode::Create,
    )
    .await
    .unwrap();
    let err = fs
        .pipe(
            "oss://bkt/once",
            Bytes::from_static(b"2"),
            WriteMode::Create,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists, "{err}");
    assert_eq!(fs.cat("oss://bkt/once").await.unwrap(), "1");
    assert_eq!(
        fs.conditional_writes("oss://bkt/x").await.unwrap(),
        cairn_fs::backend::ConditionalWrites::Native
    );
    let state = state.lock().unwrap();
    let conditional: Vec<&Recorded> = state
        .log
        .iter()
        .filter(|r| {
            r.method == "PUT"
                && r.headers.get("x-oss-forbid-overwrite").map(String::as_str) == Some("true")
        })
        .collect();
    assert!(
        conditional.len() >= 2,
        "create-if-absent sends x-oss-forbid-overwrite"
    );
    assert!(
        !state.objects.keys().any(|k| k.starts_with(".cairn-probe")),
        "the probe cleaned up"
    );
}

/// A role scoped to a prefix cannot write at the bucket's root: the probe
/// goes beside the file about to be created (a checkpoint's lease).
#[tokio::test]
async fn the_create_if_absent_probe_writes_beside_the_file() {
    let (addr, state) = start("bkt", false).await;
    let fs = oss(addr, None);
    fs.conditional_writes("oss://bkt/team/ckpt/.cairn-lease.json")
        .await
        .unwrap();
    let state = state.lock().unwrap();
    let writes: Vec<&str> = state
        .log
        .iter()
        .filter(|r| r.method == "PUT" || r.method == "DELETE")
        .map(|r| r.path.as_str())
        .collect();
    assert!(writes.len() >= 3, "two writes and a delete: {writes:?}");
    for path in writes {
        // The bucket is in the host (virtual-host style) or the path.
        let key = path.strip_prefix("/bkt").unwrap_or(path);
        assert!(
            key.starts_with("/team/ckpt/.cairn-probe-"),
            "the probe went to {path}"
        );
    }
}

#[tokio::test]
async fn errors_map_to_kinds_without_secrets() {
    let (addr, _state) = start("bkt", false).await;
    let fs = oss(addr, None);
    let err = fs.cat("oss://bkt/missing").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(!fs.exists("oss://bkt/missing").await.unwrap());
    let err = fs.cat("oss://bkt/forbidden-key").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let text = format!("{err} {err:?}");
    assert!(
        text.contains("bkt") && text.contains("credentials"),
        "{text}"
    );
    assert!(!text.contains(SECRET), "{text}");
    assert!(
        fs.exists("oss://bkt/forbidden-key").await.is_err(),
        "exists does not hide a refusal"
    );
}

#[test]
fn bad_oss_options_are_named() {
    let build = |opts: serde_json::Value| {
        FileSystemBuilder::new("oss")
            .options(StorageOptions::from_json(serde_json::json!({ "oss": opts })).unwrap())
            .env(Environment::default())
            .build()
    };
    let err = build(serde_json::json!({})).unwrap_err();
    assert!(err.to_string().contains("oss.endpoint"), "{err}");
    let err = build(serde_json::json!({"endpoint": "http://x", "addressing_style": "diagonal"}))
        .unwrap_err();
    assert!(err.to_string().contains("oss.addressing_style"), "{err}");
    let err = build(serde_json::json!({"endpoint": "http://x", "key": "only"})).unwrap_err();
    assert!(err.to_string().contains("oss.secret"), "{err}");
    let env = Environment::from_pairs([
        ("ALIBABA_CLOUD_ACCESS_KEY_ID", "AK"),
        ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "SK"),
        ("OSS_ENDPOINT", "https://oss-cn-hangzhou.aliyuncs.com"),
    ]);
    let fs = FileSystemBuilder::new("oss").env(env).build().unwrap();
    let report = fs.describe();
    let key = report.iter().find(|l| l.name == "key").unwrap();
    assert_eq!(
        key.source,
        cairn_fs::Source::Env("ALIBABA_CLOUD_ACCESS_KEY_ID".into())
    );
    assert_eq!(
        report.iter().find(|l| l.name == "secret").unwrap().value,
        "***"
    );
}
