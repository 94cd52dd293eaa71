//! Job metrics in cairn's registry ([`cairn_fs::metrics`]): rows read,
//! skipped (already committed) and written, and the rows the job has to go
//! through, for a dashboard's progress.

use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RowState {
    state: &'static str,
}

pub(crate) struct JobMetrics {
    read: Counter,
    skipped: Counter,
    written: Counter,
    input: Gauge,
}

impl JobMetrics {
    pub(crate) fn rows_read(&self, rows: u64) {
        self.read.inc_by(rows);
    }

    /// Rows left out as committed, read or not.
    pub(crate) fn rows_skipped(&self, rows: u64) {
        self.skipped.inc_by(rows);
    }

    pub(crate) fn rows_written(&self, rows: u64) {
        self.written.inc_by(rows);
    }

    pub(crate) fn input_rows(&self, rows: u64) {
        self.input.set(i64::try_from(rows).unwrap_or(i64::MAX));
    }
}

static METRICS: LazyLock<JobMetrics> = LazyLock::new(|| {
    let rows: Family<RowState, Counter> = Family::default();
    let input: Gauge = Gauge::default();
    let metrics = JobMetrics {
        read: rows.get_or_create_owned(&RowState { state: "read" }),
        skipped: rows.get_or_create_owned(&RowState { state: "skipped" }),
        written: rows.get_or_create_owned(&RowState { state: "written" }),
        input: input.clone(),
    };
    cairn_fs::metrics::register(
        "job_rows",
        "Rows read from the input, skipped as already committed (read or left unread), and written",
        rows,
    );
    cairn_fs::metrics::register(
        "job_input_rows",
        "Rows in the job's input, by its files' metadata (0 until planned)",
        input,
    );
    metrics
});

pub(crate) fn metrics() -> &'static JobMetrics {
    &METRICS
}

/// Puts the job and checkpoint metrics in cairn's registry now, so that
/// [`cairn_fs::metrics::encode`] lists them at zero before a job starts.
///
/// ```
/// cairn_dataset::register_metrics();
/// assert!(cairn_fs::metrics::encode().contains("cairn_job_rows_total{state=\"written\"}"));
/// ```
pub fn register_metrics() {
    LazyLock::force(&METRICS);
    cairn_checkpoint::register_metrics();
}
