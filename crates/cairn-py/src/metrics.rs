//! cairn's metrics for Python: the process's counters and histograms as
//! samples (`cairn.metrics()`) or OpenMetrics text (`cairn.metrics_text()`).

use pyo3::prelude::*;

/// One sample as Python gets it: `(name, [(label, value)], value)`.
type PySample = (String, Vec<(String, String)>, f64);

/// Every cairn metric sample of this process.
#[pyfunction]
pub fn metric_samples() -> Vec<PySample> {
    cairn_checkpoint::register_metrics();
    cairn_fs::metrics::samples()
        .into_iter()
        .map(|s| (s.name, s.labels, s.value))
        .collect()
}

/// Every cairn metric of this process as OpenMetrics text.
#[pyfunction]
pub fn metrics_text() -> String {
    cairn_checkpoint::register_metrics();
    cairn_fs::metrics::encode()
}
