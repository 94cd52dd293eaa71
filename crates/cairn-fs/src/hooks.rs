//! Request hooks: a wrapper around the HTTP client OpenDAL uses, so a backend
//! (or you) can inspect and amend every request after it is signed and before
//! it is sent.
//!
//! A hook may add or replace headers the signature does not cover (such as
//! `Content-MD5` under SigV4, which signs only the headers it lists). It must
//! not change the body, the URL or a signed header.
//!
//! ```
//! use std::sync::Arc;
//! use cairn_fs::hooks::{ContentMd5OnMultiDelete, RequestHook};
//! use cairn_fs::{FileSystemBuilder, StorageOptions};
//! let fs = FileSystemBuilder::new("s3")
//!     .request_hook(Arc::new(ContentMd5OnMultiDelete))
//!     .build()
//!     .unwrap();
//! # let _ = fs;
//! ```

use std::sync::Arc;

use base64::Engine;
use opendal::Buffer;
use opendal::{HttpBody, HttpTransport};

use crate::answer::StoreAnswer;

/// Sees each HTTP request of a filesystem and may amend it.
pub trait RequestHook: Send + Sync + std::fmt::Debug + 'static {
    /// Called once per request (retries included), after signing.
    fn on_request(&self, request: &mut http::Request<Buffer>);
}

/// Guarantees a correct `Content-MD5` (base64 of the MD5 of the body) on
/// every S3 multi-object delete (`POST /?delete`), whatever the S3 client
/// sent. Tencent COS rejects a multi-delete without it; AWS SDKs moved to
/// CRC32 checksums in 2025 and broke COS for botocore users.
///
/// ```
/// use cairn_fs::hooks::{ContentMd5OnMultiDelete, RequestHook};
/// let body = "<Delete><Object><Key>a</Key></Object></Delete>";
/// let mut req = http::Request::post("http://b.cos.example.com/?delete")
///     .header("content-md5", "wrong")
///     .body(opendal::Buffer::from(body))
///     .unwrap();
/// ContentMd5OnMultiDelete.on_request(&mut req);
/// let expected = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, md5::compute(body).0);
/// assert_eq!(req.headers()["content-md5"], expected.as_str());
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct ContentMd5OnMultiDelete;

/// Whether `request` is an S3 multi-object delete.
pub fn is_multi_delete<T>(request: &http::Request<T>) -> bool {
    request.method() == http::Method::POST
        && request.uri().query().is_some_and(|q| {
            q.split('&')
                .any(|p| p == "delete" || p.starts_with("delete="))
        })
}

impl RequestHook for ContentMd5OnMultiDelete {
    fn on_request(&self, request: &mut http::Request<Buffer>) {
        if is_multi_delete(request) {
            set_content_md5(request);
        }
    }
}

/// Puts a `Content-MD5` (base64 of the MD5 of the body) on every upload
/// with a body: `PutObject` and `UploadPart` (a `PUT` without
/// `x-amz-copy-source`). The server then refuses a body that arrived
/// damaged or short (`BadDigest`) instead of storing it. Used for stores
/// whose support of the `x-amz-checksum-*` headers is not known (cos);
/// s3 sends `x-amz-checksum-crc32c` instead. A header already set is kept.
///
/// ```
/// use cairn_fs::hooks::{ContentMd5OnUpload, RequestHook};
/// let mut req = http::Request::put("http://b.cos.example.com/key")
///     .body(opendal::Buffer::from("data"))
///     .unwrap();
/// ContentMd5OnUpload.on_request(&mut req);
/// let expected = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, md5::compute("data").0);
/// assert_eq!(req.headers()["content-md5"], expected.as_str());
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct ContentMd5OnUpload;

impl RequestHook for ContentMd5OnUpload {
    fn on_request(&self, request: &mut http::Request<Buffer>) {
        if request.method() != http::Method::PUT
            || request.headers().contains_key("content-md5")
            || request.headers().contains_key("x-amz-copy-source")
        {
            return;
        }
        set_content_md5(request);
    }
}

/// Sets `Content-MD5` to the digest of `request`'s body.
fn set_content_md5(request: &mut http::Request<Buffer>) {
    let mut context = md5::Context::new();
    for chunk in request.body().clone() {
        context.consume(&chunk);
    }
    let digest = base64::engine::general_purpose::STANDARD.encode(context.finalize().0);
    let value = http::HeaderValue::from_str(&digest).expect("base64 is a valid header value");
    request
        .headers_mut()
        .insert(http::header::HeaderName::from_static("content-md5"), value);
}

/// Remembers, for the last multipart uploads completed through this
/// filesystem, the ETag the store gives the finished object: the MD5 of the
/// parts' MD5s (their ETags, as the `CompleteMultipartUpload` request lists
/// them) and the part count, `"<hex>-<n>"`. When the answer to a completion
/// is lost and its retry finds the upload gone, the writer compares the
/// object at its key with this: its own upload, or someone else's object of
/// the same size. (Stores that compute multipart ETags otherwise, and
/// SSE-KMS, whose part ETags are not MD5s, never match: such a lost answer
/// is reported as the failure it may be.)
///
/// ```
/// use cairn_fs::hooks::{CompletedUploads, RequestHook};
/// let body = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>\
///     <ETag>&quot;0cc175b9c0f1b6a831c399e269772661&quot;</ETag></Part></CompleteMultipartUpload>";
/// let mut req = http::Request::post("http://s3.example.com/bucket/dir/big?uploadId=u1")
///     .body(opendal::Buffer::from(body))
///     .unwrap();
/// let uploads = CompletedUploads::default();
/// uploads.on_request(&mut req);
/// let part = md5::compute("a").0; // the ETag above is MD5("a")
/// let expected = format!("{:x}-1", md5::compute(part));
/// assert_eq!(uploads.take("dir/big"), Some(expected));
/// assert_eq!(uploads.take("dir/big"), None);
/// ```
#[derive(Debug, Default)]
pub struct CompletedUploads {
    /// `(decoded request path, expected ETag)`, newest last, at most
    /// [`COMPLETED_UPLOADS_KEPT`].
    recent: std::sync::Mutex<std::collections::VecDeque<(String, String)>>,
}

/// Completed uploads remembered per filesystem (a lost answer is looked up
/// right after its retry, so only the last few matter).
const COMPLETED_UPLOADS_KEPT: usize = 256;

impl CompletedUploads {
    /// The expected ETag of the last upload completed at object key `key`
    /// (the key inside the operator's root), forgotten once taken.
    pub fn take(&self, key: &str) -> Option<String> {
        let suffix = format!("/{}", key.trim_start_matches('/'));
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let at = recent
            .iter()
            .rposition(|(path, _)| path.ends_with(&suffix))?;
        recent.remove(at).map(|(_, etag)| etag)
    }
}

/// The ETag a store gives the object a `CompleteMultipartUpload` body
/// finishes: MD5 of the parts' MD5s, then `-<parts>`. `None` when a part's
/// ETag is not an MD5 (SSE-KMS, another store's scheme).
fn multipart_etag(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Complete {
        #[serde(rename = "Part", default)]
        parts: Vec<Part>,
    }
    #[derive(serde::Deserialize)]
    struct Part {
        #[serde(rename = "PartNumber")]
        number: u32,
        #[serde(rename = "ETag")]
        etag: String,
    }
    let text = std::str::from_utf8(body).ok()?;
    let mut complete: Complete = quick_xml::de::from_str(text).ok()?;
    if complete.parts.is_empty() {
        return None;
    }
    complete.parts.sort_by_key(|p| p.number);
    let mut digests = Vec::with_capacity(complete.parts.len() * 16);
    for part in &complete.parts {
        let hex = part.etag.trim_matches('"');
        if hex.len() != 32 {
            return None;
        }
        for pair in hex.as_bytes().chunks(2) {
            let pair = std::str::from_utf8(pair).ok()?;
            digests.push(u8::from_str_radix(pair, 16).ok()?);
        }
    }
    Some(format!(
        "{:x}-{}",
        md5::compute(&digests),
        complete.parts.len()
    ))
}

impl RequestHook for CompletedUploads {
    fn on_request(&self, request: &mut http::Request<Buffer>) {
        let completes = request.method() == http::Method::POST
            && request
                .uri()
                .query()
                .is_some_and(|q| q.split('&').any(|p| p.starts_with("uploadId=")));
        if !completes {
            return;
        }
        let body = request.body().to_bytes();
        let Some(etag) = multipart_etag(&body) else {
            return;
        };
        let path = percent_encoding::percent_decode_str(request.uri().path())
            .decode_utf8_lossy()
            .into_owned();
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.retain(|(p, _)| *p != path);
        recent.push_back((path, etag));
        if recent.len() > COMPLETED_UPLOADS_KEPT {
            recent.pop_front();
        }
    }
}

/// An HTTP transport that runs hooks, then sends with reqwest.
///
/// It also tells a wrong endpoint from a server that is down for a moment:
/// a connection refused before this transport ever got an answer means
/// nothing listens at the endpoint (a typo, a server not started), so it
/// fails at once, naming the endpoint, instead of after every retry. Once
/// the server has answered, a refused connection (a restart) is retried as
/// any connection error is.
pub(crate) struct HookedTransport {
    pub inner: opendal_http_transport_reqwest::ReqwestTransport,
    pub hooks: Vec<Arc<dyn RequestHook>>,
    pub answered: std::sync::atomic::AtomicBool,
    /// The store's name in metrics (its endpoint, or its protocol).
    pub endpoint_label: String,
}

impl HookedTransport {
    pub(crate) fn new(
        inner: opendal_http_transport_reqwest::ReqwestTransport,
        hooks: Vec<Arc<dyn RequestHook>>,
        endpoint_label: String,
    ) -> Self {
        Self {
            inner,
            hooks,
            answered: std::sync::atomic::AtomicBool::new(false),
            endpoint_label,
        }
    }
}

/// Reads an error answer (4xx, 5xx, a redirect) once here: an answer cairn
/// gives a meaning to becomes an error carrying a [`StoreAnswer`]; any other
/// goes on to OpenDAL unchanged (its body, small, is read and handed on).
async fn read_error_answer(
    method: &http::Method,
    path: &str,
    response: http::Response<HttpBody>,
) -> opendal::Result<http::Response<HttpBody>> {
    let status = response.status().as_u16();
    if status < 400 && status != 301 {
        return Ok(response);
    }
    let (parts, mut body) = response.into_parts();
    let bytes = body.to_buffer().await?;
    if let Some(answer) = StoreAnswer::read(method, path, &parts, &bytes) {
        return Err(answer.into_opendal());
    }
    let size = bytes.len() as u64;
    let body = HttpBody::new(futures::stream::iter([Ok(bytes)]), Some(size));
    Ok(http::Response::from_parts(parts, body))
}

/// The first I/O error of kind `kind` in `err`'s sources.
fn io_error(err: &opendal::Error, kind: std::io::ErrorKind) -> Option<&std::io::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
    while let Some(e) = source {
        // An I/O error may wrap another as its payload (hyper's connector
        // wraps the TLS layer's), which `source()` skips.
        let mut io = e.downcast_ref::<std::io::Error>();
        while let Some(found) = io {
            if found.kind() == kind {
                return Some(found);
            }
            io = found
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<std::io::Error>());
        }
        source = e.source();
    }
    None
}

impl HttpTransport for HookedTransport {
    async fn fetch(
        &self,
        mut request: http::Request<Buffer>,
    ) -> opendal::Result<http::Response<HttpBody>> {
        use std::sync::atomic::Ordering;
        for hook in &self.hooks {
            hook.on_request(&mut request);
        }
        let endpoint = format!(
            "{}://{}",
            request.uri().scheme_str().unwrap_or("http"),
            request.uri().authority().map_or("?", |a| a.as_str())
        );
        let (method, path) = (request.method().clone(), request.uri().path().to_string());
        crate::request_counts::count(&method);
        let mut watch = RequestWatch::start(&request, &self.endpoint_label);
        let result = self.inner.fetch(request).await;
        let result = match result {
            Ok(response) => Ok(watch.answered(response)),
            Err(e) => {
                watch.failed(&e);
                Err(e)
            }
        };
        match result {
            Ok(response) => {
                self.answered.store(true, Ordering::Relaxed);
                read_error_answer(&method, &path, response).await
            }
            Err(e)
                if !self.answered.load(Ordering::Relaxed)
                    && io_error(&e, std::io::ErrorKind::ConnectionRefused).is_some() =>
            {
                Err(opendal::Error::new(
                    opendal::ErrorKind::ConfigInvalid,
                    format!(
                        "connection refused by {endpoint}: nothing listens there. Check the endpoint (endpoint_url option, AWS_ENDPOINT_URL, ...) and that the server is running"
                    ),
                )
                .set_permanent()
                .set_source(e))
            }
            // The TLS layer reports a handshake it cannot read as invalid
            // data: on the first contact over https, most often a server
            // that speaks plain HTTP.
            Err(e)
                if !self.answered.load(Ordering::Relaxed)
                    && endpoint.starts_with("https://")
                    && io_error(&e, std::io::ErrorKind::InvalidData).is_some() =>
            {
                let reason = io_error(&e, std::io::ErrorKind::InvalidData)
                    .map(|io| io.to_string())
                    .unwrap_or_default();
                Err(opendal::Error::new(
                    opendal::ErrorKind::ConfigInvalid,
                    format!(
                        "the TLS handshake with {endpoint} failed ({reason}): if the server speaks plain HTTP, write the endpoint with http://"
                    ),
                )
                .set_permanent()
                .set_source(e))
            }
            Err(e) => Err(e),
        }
    }
}

/// Records one request in the store metrics: counted and its body's bytes
/// when sent, its latency and status when answered, the answer body's bytes
/// as they are read; a request dropped before its answer (a timeout, a lost
/// lease) counts as `abandoned`.
struct RequestWatch {
    labels: crate::metrics::store_labels::RequestLabels,
    started: std::time::Instant,
    done: bool,
}

impl RequestWatch {
    fn start(request: &http::Request<Buffer>, endpoint: &str) -> RequestWatch {
        let metrics = crate::metrics::store();
        let labels = crate::metrics::store_labels::RequestLabels {
            op: crate::metrics::OpKind::of(request),
            endpoint: endpoint.to_string(),
        };
        metrics.requests.get_or_create(&labels).inc();
        let sent = request.body().len() as u64;
        if sent > 0 {
            metrics.sent_bytes.get_or_create(&labels).inc_by(sent);
        }
        RequestWatch {
            labels,
            started: std::time::Instant::now(),
            done: false,
        }
    }

    fn answered(&mut self, response: http::Response<HttpBody>) -> http::Response<HttpBody> {
        self.done = true;
        let metrics = crate::metrics::store();
        metrics
            .duration
            .get_or_create(&self.labels)
            .observe(self.started.elapsed().as_secs_f64());
        let status = response.status().as_u16();
        if status >= 400 {
            self.error(status.to_string());
        }
        let received = metrics.received_bytes.get_or_create_owned(&self.labels);
        let (parts, body) = response.into_parts();
        let body = body.map_inner(|stream| {
            use futures::StreamExt;
            Box::new(stream.inspect(move |chunk| {
                if let Ok(chunk) = chunk {
                    received.inc_by(chunk.len() as u64);
                }
            }))
        });
        http::Response::from_parts(parts, body)
    }

    fn failed(&mut self, err: &opendal::Error) {
        self.done = true;
        let kind = match crate::metrics::RetryCause::of(err) {
            crate::metrics::RetryCause::Timeout => "timeout",
            crate::metrics::RetryCause::Connection => "connection",
            _ => "transport",
        };
        self.error(kind.to_string());
    }

    fn error(&self, kind: String) {
        let labels = crate::metrics::store_labels::ErrorLabels {
            op: self.labels.op,
            endpoint: self.labels.endpoint.clone(),
            kind,
        };
        crate::metrics::store().errors.get_or_create(&labels).inc();
    }
}

impl Drop for RequestWatch {
    fn drop(&mut self) {
        if !self.done {
            self.error("abandoned".to_string());
        }
    }
}
