//! Process-wide counts of the HTTP requests cairn-fs has sent to object
//! stores, by method: what a job's summary reports as the requests it
//! issued. Local files are not requests and are not counted.

use std::sync::atomic::{AtomicU64, Ordering};

static GET: AtomicU64 = AtomicU64::new(0);
static PUT: AtomicU64 = AtomicU64::new(0);
static HEAD: AtomicU64 = AtomicU64::new(0);
static POST: AtomicU64 = AtomicU64::new(0);
static DELETE: AtomicU64 = AtomicU64::new(0);
static OTHER: AtomicU64 = AtomicU64::new(0);

/// HTTP requests sent by this process, by method (a listing is a GET; a
/// multipart upload's start, its completion and a batch delete are POSTs).
///
/// ```
/// let before = cairn_fs::request_counts();
/// // ... storage calls ...
/// let sent = cairn_fs::request_counts().since(&before);
/// assert_eq!(sent.total(), 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RequestCounts {
    /// GET requests (reads and listings).
    pub get: u64,
    /// PUT requests (whole uploads, upload parts, copies).
    pub put: u64,
    /// HEAD requests (stats).
    pub head: u64,
    /// POST requests (multipart start and completion, batch deletes).
    pub post: u64,
    /// DELETE requests.
    pub delete: u64,
    /// Any other method.
    pub other: u64,
}

impl RequestCounts {
    /// The requests sent after `earlier` was read.
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        RequestCounts {
            get: self.get - earlier.get,
            put: self.put - earlier.put,
            head: self.head - earlier.head,
            post: self.post - earlier.post,
            delete: self.delete - earlier.delete,
            other: self.other - earlier.other,
        }
    }

    /// All requests.
    pub fn total(&self) -> u64 {
        self.get + self.put + self.head + self.post + self.delete + self.other
    }
}

/// The requests this process has sent so far.
pub fn request_counts() -> RequestCounts {
    RequestCounts {
        get: GET.load(Ordering::Relaxed),
        put: PUT.load(Ordering::Relaxed),
        head: HEAD.load(Ordering::Relaxed),
        post: POST.load(Ordering::Relaxed),
        delete: DELETE.load(Ordering::Relaxed),
        other: OTHER.load(Ordering::Relaxed),
    }
}

/// Counts one request of `method`.
pub(crate) fn count(method: &http::Method) {
    let counter = match *method {
        http::Method::GET => &GET,
        http::Method::PUT => &PUT,
        http::Method::HEAD => &HEAD,
        http::Method::POST => &POST,
        http::Method::DELETE => &DELETE,
        _ => &OTHER,
    };
    counter.fetch_add(1, Ordering::Relaxed);
}
