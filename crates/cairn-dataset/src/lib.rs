//! cairn-dataset: resumable map-only jobs over Arrow batches.
//!
//! A [`Dataset`] reads Parquet or JSON lines from any cairn URL (or batches
//! in memory), applies map-like operators (Rust closures or an external
//! command speaking Arrow IPC), and writes Parquet or JSON lines. With a
//! [`CheckpointConfig`] in the [`JobContext`], every unit
//! of output commits with the checkpoint protocol, and a re-run of the same
//! job skips the rows already committed (whole row groups unread when the
//! IDs are Ray's `row_hash`).

mod checks;
mod command;
mod context;
mod dataset;
mod error;
mod executor;
mod interrupt;
mod key;
mod metrics;
mod ops;
mod partition;
mod plan;
mod progress;
mod row_hash;
mod seen;
mod sink;
mod source;
mod typed;

/// A job's checkpoint settings (the ID column, the checkpoint's URL, how
/// often a unit commits, the lease): what [`JobContext::checkpoint`] takes.
pub use cairn_checkpoint::internals::CheckpointConfig;
pub use context::{
    DEFAULT_BATCH_SIZE, DEFAULT_DUPLICATE_CHECK_MAX_IDS, DEFAULT_ROWS_PER_FILE, JobContext,
};
pub use dataset::Dataset;
pub use error::{Error, Result};
pub use executor::UNIT_MAX_BYTES;
pub use interrupt::Interrupt;
pub use key::composite_key;
pub use metrics::register_metrics;
pub use ops::{BoxError, Row};
pub use partition::{NULL_PARTITION, escape_partition_value};
pub use progress::{JobSummary, Progress, ProgressSnapshot};
pub use row_hash::{ROW_HASH_COLUMN, row_hash, row_hash_column, row_hash_seed};
pub use sink::{DEFAULT_MAX_OPEN_FILES, OutputFormat, SaveMode, Sink};
pub use source::{PATH_COLUMN, Source};

/// The Rust examples of docs/jobs.md, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/jobs.md")]
pub struct JobsGuide;
