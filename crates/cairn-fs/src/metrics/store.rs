//! Requests to object stores: counts, bytes, latency, retries and errors,
//! per operation kind and store endpoint. Recorded by cairn's HTTP transport
//! (every request, retries included) and its retry layer (why a call was
//! retried). Local files send no request and are not counted.

use std::sync::LazyLock;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// What a request does, read from its method, query and headers.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub(crate) enum OpKind {
    Get,
    Head,
    List,
    Put,
    /// One part of a multipart upload.
    Part,
    /// A multipart upload's start, completion or abort.
    Multipart,
    Delete,
    Copy,
    Other,
}

impl OpKind {
    fn as_str(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::Head => "head",
            OpKind::List => "list",
            OpKind::Put => "put",
            OpKind::Part => "part",
            OpKind::Multipart => "multipart",
            OpKind::Delete => "delete",
            OpKind::Copy => "copy",
            OpKind::Other => "other",
        }
    }

    /// The kind of an S3-style (S3, COS, OSS) or GCS JSON API request.
    pub(crate) fn of<B>(request: &http::Request<B>) -> OpKind {
        let query = request.uri().query().unwrap_or("");
        let has = |name: &str| {
            query
                .split('&')
                .any(|p| p == name || p.strip_prefix(name).is_some_and(|r| r.starts_with('=')))
        };
        let path = request.uri().path();
        let gcs_object = path.starts_with("/storage/v1/b/") && path.contains("/o/");
        let copies = request.headers().keys().any(|h| {
            let h = h.as_str();
            h.starts_with("x-") && h.ends_with("-copy-source")
        });
        match *request.method() {
            http::Method::HEAD => OpKind::Head,
            http::Method::GET if has("list-type") || has("prefix") || has("delimiter") => {
                OpKind::List
            }
            http::Method::GET if has("uploadId") || has("uploads") => OpKind::List,
            http::Method::GET if path.starts_with("/storage/v1/b/") && path.ends_with("/o") => {
                OpKind::List
            }
            http::Method::GET if gcs_object && !has("alt") => OpKind::Head,
            http::Method::GET => OpKind::Get,
            http::Method::PUT if copies => OpKind::Copy,
            http::Method::PUT if has("partNumber") => OpKind::Part,
            http::Method::PUT => OpKind::Put,
            http::Method::POST if has("delete") => OpKind::Delete,
            http::Method::POST if has("uploads") || has("uploadId") => OpKind::Multipart,
            http::Method::POST if path.contains("/rewriteTo/") || path.contains("/copyTo/") => {
                OpKind::Copy
            }
            http::Method::POST if path.starts_with("/upload/") => OpKind::Put,
            http::Method::DELETE if has("uploadId") => OpKind::Multipart,
            http::Method::DELETE => OpKind::Delete,
            _ => OpKind::Other,
        }
    }

    /// The kind of request an OpenDAL operation sends (for retries, which
    /// are made per operation).
    pub(crate) fn of_operation(op: opendal::raw::Operation) -> OpKind {
        use opendal::raw::Operation;
        match op {
            Operation::Read => OpKind::Get,
            Operation::Stat => OpKind::Head,
            Operation::List => OpKind::List,
            Operation::Write => OpKind::Put,
            Operation::Delete => OpKind::Delete,
            Operation::Copy => OpKind::Copy,
            _ => OpKind::Other,
        }
    }
}

impl EncodeLabelValue for OpKind {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// Why a call was retried.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub(crate) enum RetryCause {
    /// The store asked to slow down (429, `SlowDown`, a rate limit code).
    Throttled,
    /// An attempt ran past its timeout.
    Timeout,
    /// The connection failed (refused, reset, closed early).
    Connection,
    /// Any other temporary failure: in practice a 5xx answer.
    ServerError,
}

impl RetryCause {
    fn as_str(self) -> &'static str {
        match self {
            RetryCause::Throttled => "throttled",
            RetryCause::Timeout => "timeout",
            RetryCause::Connection => "connection",
            RetryCause::ServerError => "server_error",
        }
    }

    /// The cause of a retry after `err`: its kind (rate limited), then the
    /// errors it carries (an I/O or HTTP client timeout or connection
    /// error), then OpenDAL's timeout layer's own message; otherwise a
    /// temporary error OpenDAL made of an answer, which is a 5xx.
    pub(crate) fn of(err: &opendal::Error) -> RetryCause {
        if err.kind() == opendal::ErrorKind::RateLimited {
            return RetryCause::Throttled;
        }
        let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
        while let Some(e) = source {
            if let Some(http) = e.downcast_ref::<reqwest::Error>() {
                if http.is_timeout() {
                    return RetryCause::Timeout;
                }
                if http.is_connect() || http.is_request() || http.is_body() {
                    return RetryCause::Connection;
                }
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                use std::io::ErrorKind as K;
                match io.kind() {
                    K::TimedOut => return RetryCause::Timeout,
                    K::ConnectionRefused
                    | K::ConnectionReset
                    | K::ConnectionAborted
                    | K::NotConnected
                    | K::BrokenPipe
                    | K::UnexpectedEof => return RetryCause::Connection,
                    _ => {}
                }
            }
            source = e.source();
        }
        // OpenDAL's TimeoutLayer: "operation timeout reached" and "io
        // operation timeout reached", with no source.
        if err.message().ends_with("timeout reached") {
            return RetryCause::Timeout;
        }
        if err
            .message()
            .starts_with("http response got too little data")
        {
            return RetryCause::Connection;
        }
        RetryCause::ServerError
    }
}

impl EncodeLabelValue for RetryCause {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    pub op: OpKind,
    pub endpoint: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RetryLabels {
    pub op: OpKind,
    pub endpoint: String,
    pub cause: RetryCause,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ErrorLabels {
    pub op: OpKind,
    pub endpoint: String,
    /// The answer's status (`"404"`, `"503"`), or `connection`, `timeout`,
    /// `transport` (another client error), `abandoned` (the caller gave up
    /// waiting: a timeout or a lost lease).
    pub kind: String,
}

/// The store metrics' families.
pub(crate) struct StoreMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub sent_bytes: Family<RequestLabels, Counter>,
    pub received_bytes: Family<RequestLabels, Counter>,
    pub duration: Family<RequestLabels, Histogram>,
    pub retries: Family<RetryLabels, Counter>,
    pub errors: Family<ErrorLabels, Counter>,
}

static METRICS: LazyLock<StoreMetrics> = LazyLock::new(|| {
    let metrics = StoreMetrics {
        requests: Family::default(),
        sent_bytes: Family::default(),
        received_bytes: Family::default(),
        // 1 ms to 65 s.
        duration: Family::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 17))
        }),
        retries: Family::default(),
        errors: Family::default(),
    };
    super::register(
        "store_requests",
        "HTTP requests sent to object stores, retries included",
        metrics.requests.clone(),
    );
    super::register(
        "store_sent_bytes",
        "Bytes of request bodies sent to object stores",
        metrics.sent_bytes.clone(),
    );
    super::register(
        "store_received_bytes",
        "Bytes of answer bodies read from object stores",
        metrics.received_bytes.clone(),
    );
    super::register(
        "store_request_duration_seconds",
        "Time from sending a request to its answer's headers",
        metrics.duration.clone(),
    );
    super::register(
        "store_retries",
        "Calls retried, by cause (throttled, server_error, timeout, connection)",
        metrics.retries.clone(),
    );
    super::register(
        "store_errors",
        "Requests that failed: error answers by status, transport errors by kind",
        metrics.errors.clone(),
    );
    metrics
});

pub(super) fn metrics() -> &'static StoreMetrics {
    &METRICS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(method: &str, uri: &str, headers: &[(&str, &str)]) -> OpKind {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        OpKind::of(&b.body(()).unwrap())
    }

    #[test]
    fn requests_are_told_apart_by_method_query_and_headers() {
        let s3 = "http://127.0.0.1:3900/bucket";
        assert_eq!(kind("GET", &format!("{s3}/k"), &[]), OpKind::Get);
        assert_eq!(kind("HEAD", &format!("{s3}/k"), &[]), OpKind::Head);
        assert_eq!(
            kind("GET", &format!("{s3}?list-type=2&prefix=a/"), &[]),
            OpKind::List
        );
        assert_eq!(kind("PUT", &format!("{s3}/k"), &[]), OpKind::Put);
        assert_eq!(
            kind("PUT", &format!("{s3}/k?partNumber=2&uploadId=x"), &[]),
            OpKind::Part
        );
        assert_eq!(
            kind("POST", &format!("{s3}/k?uploads"), &[]),
            OpKind::Multipart
        );
        assert_eq!(
            kind("POST", &format!("{s3}/k?uploadId=x"), &[]),
            OpKind::Multipart
        );
        assert_eq!(
            kind("DELETE", &format!("{s3}/k?uploadId=x"), &[]),
            OpKind::Multipart
        );
        assert_eq!(kind("POST", &format!("{s3}?delete"), &[]), OpKind::Delete);
        assert_eq!(kind("DELETE", &format!("{s3}/k"), &[]), OpKind::Delete);
        assert_eq!(
            kind(
                "PUT",
                &format!("{s3}/k"),
                &[("x-amz-copy-source", "/bucket/j")]
            ),
            OpKind::Copy
        );
        assert_eq!(
            kind("PUT", &format!("{s3}/k"), &[("x-cos-copy-source", "b/j")]),
            OpKind::Copy
        );
        let gcs = "http://127.0.0.1:4443/storage/v1/b/bucket";
        assert_eq!(kind("GET", &format!("{gcs}/o?prefix=a"), &[]), OpKind::List);
        assert_eq!(
            kind("GET", &format!("{gcs}/o/k%2Fx?alt=media"), &[]),
            OpKind::Get
        );
        assert_eq!(kind("GET", &format!("{gcs}/o/k%2Fx"), &[]), OpKind::Head);
        assert_eq!(
            kind(
                "POST",
                "http://h/upload/storage/v1/b/bucket/o?uploadType=media&name=k",
                &[]
            ),
            OpKind::Put
        );
        assert_eq!(
            kind("POST", &format!("{gcs}/o/a/rewriteTo/b/bucket/o/c"), &[]),
            OpKind::Copy
        );
    }

    #[test]
    fn retry_causes_come_from_the_error() {
        use opendal::{Error, ErrorKind};
        let throttled = Error::new(ErrorKind::RateLimited, "SlowDown").set_temporary();
        assert_eq!(RetryCause::of(&throttled), RetryCause::Throttled);
        let timeout = Error::new(ErrorKind::Unexpected, "io operation timeout reached");
        assert_eq!(RetryCause::of(&timeout), RetryCause::Timeout);
        let reset = Error::new(ErrorKind::Unexpected, "send http request")
            .set_source(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(RetryCause::of(&reset), RetryCause::Connection);
        let server = Error::new(ErrorKind::Unexpected, "InternalError").set_temporary();
        assert_eq!(RetryCause::of(&server), RetryCause::ServerError);
    }
}
