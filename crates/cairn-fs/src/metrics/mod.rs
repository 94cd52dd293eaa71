//! Process-wide metrics of cairn: one OpenMetrics registry that every cairn
//! crate registers its counters and histograms in (requests to stores here,
//! units and leases in cairn-checkpoint, rows in cairn-dataset), read as
//! OpenMetrics text by [`encode`] (what `cairn job run --metrics-addr`
//! serves) or as [`Sample`]s by [`samples`] (what Python's `cairn.metrics()`
//! returns).
//!
//! Metrics cost an atomic add or two per request or batch when nobody reads
//! them; nothing is formatted until they are read.
//!
//! ```
//! use prometheus_client::metrics::counter::Counter;
//! let widgets: Counter = Counter::default();
//! cairn_fs::metrics::register("doc_widgets", "Widgets made by this example", widgets.clone());
//! widgets.inc_by(3);
//! assert!(cairn_fs::metrics::encode().contains("cairn_doc_widgets_total 3"));
//! let sample = cairn_fs::metrics::samples()
//!     .into_iter()
//!     .find(|s| s.name == "cairn_doc_widgets_total")
//!     .unwrap();
//! assert_eq!(sample.value, 3.0);
//! ```

mod samples;
mod store;

use std::sync::{LazyLock, Mutex};

use prometheus_client::registry::{Metric, Registry};

pub use samples::Sample;

/// prometheus-client (0.26), whose metric types [`register`] takes.
pub use prometheus_client;
pub(crate) use store::{OpKind, RetryCause, StoreMetrics};

/// The label sets of the store metrics.
pub(crate) mod store_labels {
    pub(crate) use super::store::{ErrorLabels, RequestLabels, RetryLabels};
}

/// The registry every cairn metric is in; names get the `cairn_` prefix.
static REGISTRY: LazyLock<Mutex<Registry>> =
    LazyLock::new(|| Mutex::new(Registry::with_prefix("cairn")));

/// Adds `metric` to cairn's registry as `cairn_<name>` (counters get
/// `_total` after it). Register each metric once, when its owner is first
/// used: a name registered twice is encoded twice.
///
/// ```
/// use prometheus_client::metrics::gauge::Gauge;
/// let open: Gauge = Gauge::default();
/// cairn_fs::metrics::register("doc_open_things", "Things open now", open.clone());
/// open.set(2);
/// assert!(cairn_fs::metrics::encode().contains("cairn_doc_open_things 2"));
/// ```
pub fn register(name: &str, help: &str, metric: impl Metric) {
    REGISTRY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .register(name, help, metric);
}

/// Every cairn metric of this process as OpenMetrics text (ending in
/// `# EOF`), as a Prometheus scrape of `/metrics` expects it. A labelled
/// metric appears with its first series (the store's with the first
/// request).
///
/// ```
/// let text = cairn_fs::metrics::encode();
/// assert!(text.ends_with("# EOF\n"));
/// ```
pub fn encode() -> String {
    // Registered before the first request, so their order is fixed.
    store::metrics();
    let mut text = String::new();
    let registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    prometheus_client::encoding::text::encode(&mut text, &registry)
        .expect("writing to a String cannot fail");
    text
}

/// The content type of [`encode`]'s text, for an HTTP answer.
///
/// ```
/// assert!(cairn_fs::metrics::CONTENT_TYPE.starts_with("application/openmetrics-text"));
/// ```
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every sample of every cairn metric of this process (a histogram gives
/// its `_bucket`, `_sum` and `_count` samples).
///
/// ```
/// let samples = cairn_fs::metrics::samples();
/// assert!(samples.iter().all(|s| s.name.starts_with("cairn_")));
/// ```
pub fn samples() -> Vec<Sample> {
    samples::read(&encode())
}

pub(crate) fn store() -> &'static StoreMetrics {
    store::metrics()
}
