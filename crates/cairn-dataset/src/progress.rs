//! Live counters a job updates and a caller (the CLI's progress bar) reads,
//! and the summary a finished job returns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters of a running job, shared with whoever displays them.
///
/// ```
/// let progress = cairn_dataset::Progress::default();
/// assert_eq!(progress.snapshot().rows_done, 0);
/// ```
#[derive(Debug, Default)]
pub struct Progress {
    total_rows: AtomicU64,
    total_known: AtomicU64,
    rows_done: AtomicU64,
    rows_written: AtomicU64,
    bytes_written: AtomicU64,
    units_committed: AtomicU64,
}

/// One reading of [`Progress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProgressSnapshot {
    /// Input rows in all, when the input says (Parquet footers do).
    pub total_rows: Option<u64>,
    /// Input rows handled: read, or skipped as committed.
    pub rows_done: u64,
    /// Output rows written.
    pub rows_written: u64,
    /// Output bytes written.
    pub bytes_written: u64,
    /// Units committed.
    pub units_committed: u64,
}

impl Progress {
    /// Reads the counters.
    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            total_rows: (self.total_known.load(Ordering::Relaxed) == 1)
                .then(|| self.total_rows.load(Ordering::Relaxed)),
            rows_done: self.rows_done.load(Ordering::Relaxed),
            rows_written: self.rows_written.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            units_committed: self.units_committed.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn set_total(&self, total: Option<u64>) {
        if let Some(total) = total {
            self.total_rows.store(total, Ordering::Relaxed);
            self.total_known.store(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn add_done(&self, rows: u64) {
        self.rows_done.fetch_add(rows, Ordering::Relaxed);
    }

    pub(crate) fn add_unit(&self, rows: u64, bytes: u64) {
        self.rows_written.fetch_add(rows, Ordering::Relaxed);
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
        self.units_committed.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a finished job did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct JobSummary {
    /// Input files.
    pub input_files: u64,
    /// Input rows decoded.
    pub rows_read: u64,
    /// Input rows skipped because their IDs were committed (whether read or not).
    pub rows_skipped: u64,
    /// Of those, rows in row groups skipped without reading (row_hash IDs).
    pub rows_skipped_unread: u64,
    /// Row groups skipped without reading.
    pub row_groups_skipped: u64,
    /// Files skipped without reading any row group.
    pub files_skipped: u64,
    /// Output rows written.
    pub rows_written: u64,
    /// Output files written.
    pub files_written: u64,
    /// Output bytes written.
    pub bytes_written: u64,
    /// Units committed (with checkpointing; otherwise units written).
    pub units_committed: u64,
    /// Units a previous run left pending and this run rolled back.
    pub units_rolled_back: u64,
    /// Data files of those units deleted.
    pub data_files_rolled_back: u64,
    /// Whether the checkpoint was removed at the end.
    pub checkpoint_removed: bool,
    /// Files in the checkpoint directory that cairn did not write: clean-up
    /// left them (and so the directory) in place.
    pub checkpoint_foreign_files: Vec<String>,
    /// Whether the checkpoint said a previous run had finished (its clean-up
    /// was interrupted): this run only finished the clean-up.
    pub completed_before: bool,
    /// Wall time.
    #[serde(serialize_with = "seconds")]
    pub elapsed: Duration,
    /// HTTP requests this process sent to object stores while the job ran
    /// (other work in the same process counts too; local files: none).
    pub requests: cairn_fs::RequestCounts,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl JobSummary {
    /// Whether every input row was already committed, so nothing was written.
    ///
    /// ```
    /// let s = cairn_dataset::JobSummary { rows_skipped: 5, ..Default::default() };
    /// assert!(s.all_already_committed());
    /// ```
    pub fn all_already_committed(&self) -> bool {
        self.completed_before || (self.rows_skipped > 0 && self.units_committed == 0)
    }
}
