//! cairn-checkpoint: job-level checkpointing on any cairn filesystem, so a
//! read → transform → write job killed midway resumes where it stopped,
//! with every input row in the output exactly once.
//!
//! A job's output is written in **units**: a batch of input rows, named by
//! their IDs (a column that identifies a row), and the data files written
//! from them. A unit is recorded pending before its files are written and
//! committed after; a run that crashes leaves at most its units in flight
//! pending, and the next run deletes their data files before it starts
//! (docs/checkpoint-protocol.md has the protocol and what each store
//! guarantees; docs/library.md the guide).
//!
//! The calls a user needs:
//! 1. [`Checkpoint::at`] (or [`Checkpoint::on`] a filesystem you built)
//!    names the checkpoint and the ID column;
//! 2. [`Checkpoint::open`] starts a [`Run`]: the lease taken, the last
//!    run's uncommitted units rolled back, the committed IDs loaded
//!    ([`Run::committed`]: the rows to skip);
//! 3. per unit, [`Run::next_unit`] and [`Run::begin`] with its IDs, its
//!    data files written as [`UnitName::data_file`] names them (behind
//!    [`Run::fenced`]), then [`Run::commit`] (the IDs begin recorded);
//! 4. [`Run::finish`] once every unit is committed (the checkpoint deleted;
//!    refused while a unit is begun and not committed), or [`Run::abandon`]
//!    on failure (kept for the next run). A dropped run releases its lease.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use std::sync::Arc;
//! use cairn_checkpoint::{Checkpoint, arrow::array::{Array, ArrayRef, Int64Array}};
//! use cairn_fs::{FileSystem, StorageOptions, WriteMode};
//!
//! let output = FileSystem::new("memory", &StorageOptions::new()).unwrap();
//! let checkpoint = Checkpoint::at("memory:///lib-doc/ckpt", &StorageOptions::new(), "id").unwrap();
//! let run = checkpoint.open(&output, "memory:///lib-doc/out").await.unwrap();
//! let input = Int64Array::from((0..10).collect::<Vec<i64>>());
//! let done = run.is_committed(&input).unwrap();
//! assert_eq!(done.true_count(), 0, "a new checkpoint has nothing committed");
//! let unit = run.next_unit();
//! let ids: ArrayRef = Arc::new(input);
//! run.begin(&unit, ids).await.unwrap();
//! let file = format!("memory:///lib-doc/out/{}", unit.data_file(0, "jsonl"));
//! run.fenced(output.pipe(&file, "...".into(), WriteMode::Create)).await.unwrap();
//! run.commit(&unit, 1).await.unwrap();
//! run.finish().await.unwrap();
//! # })
//! ```
//!
//! The building blocks under [`Run`] (the checkpoint directory, the lease,
//! ID files, the job record) are not part of this API: cairn's own job
//! runner and Python package reach them through the `internals` cargo
//! feature, which makes no promise of stability.

#![warn(missing_docs)]
// Without `internals`, the building blocks only cairn's other crates call
// are unreachable, not unused.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

mod cleanup;
mod commit;
mod config;
mod error;
mod failpoint;
mod idfile;
mod idset;
mod job;
mod layout;
mod lease;
mod listing;
mod load;
mod metrics;
mod recover;
mod run;
mod store_clock;
mod table;
mod token;
mod verify;

pub use cleanup::CleanupReport;
pub use config::DEFAULT_LEASE_TTL;
pub use error::{Error, Result};
pub use idset::{IdSet, IdSetBuilder, IntIdSet, StringIdSet, StringMode};
pub use layout::UnitName;
pub use metrics::register_metrics;
pub use recover::RecoveryReport;
pub use run::{Checkpoint, Run};

/// The protocol's building blocks, for cairn's own crates (cairn-dataset,
/// the `cairn` CLI, cairn-py), which implement other doors onto the same
/// checkpoint. Behind the `internals` cargo feature and without a promise
/// of stability: a program uses [`Checkpoint`] and [`Run`].
///
/// ```
/// use cairn_checkpoint::internals::{COMMITTED_SUFFIX, classify, CheckpointFile};
/// assert!(matches!(classify(&format!("u{COMMITTED_SUFFIX}")), CheckpointFile::Committed(_)));
/// ```
#[cfg(feature = "internals")]
pub mod internals {
    pub use crate::commit::CheckpointDir;
    pub use crate::config::{
        CheckpointConfig, DEFAULT_COMMIT_INTERVAL, DEFAULT_COMMIT_ROWS, OpenCheckpoint,
    };
    pub use crate::idfile::{TABLE_LEDGER_KEY, decode_ids, encode_ids, recorded_partitions};
    pub use crate::idset::{check_id_type, id_keys};
    pub use crate::job::{InputFingerprint, JobRecord, paths_overlap, refuse_overlap};
    pub use crate::layout::{
        COMMITTED_SUFFIX, COMPLETE_FILE, CheckpointFile, DATA_DELIMITER, DATA_DELIMITERS, JOB_FILE,
        LEASE_FILE, LEASE_PREFIX, OutputLayout, PENDING_SUFFIX, RunId, classify, lease_file,
        lease_generation,
    };
    pub use crate::lease::{Lease, LeaseKeeper, LeaseRecord};
    pub use crate::load::{CommittedState, infer_id_column, list_committed, load_committed};
    pub use crate::table::{Lineage, RolledBack, UnitLog};
    pub use crate::verify::{DataCheck, data_file_owner, first_file, found_layout};

    /// Crash points in the code that runs in production, inert unless the
    /// crate is built with the `failpoints` feature (the tests' builds).
    pub mod failpoint {
        pub use crate::failpoint::{crash_point, setup_from_env};
    }
}

/// The arrow-rs crates (version 60) whose types are in this crate's
/// signatures ([`Run::begin`] takes an `ArrayRef`): build IDs with these,
/// or with arrow 60 of your own.
///
/// ```
/// use cairn_checkpoint::arrow::array::{ArrayRef, StringArray};
/// let ids: ArrayRef = std::sync::Arc::new(StringArray::from(vec!["a", "b"]));
/// assert_eq!(ids.data_type(), &cairn_checkpoint::arrow::schema::DataType::Utf8);
/// ```
pub mod arrow {
    pub use arrow_array as array;
    pub use arrow_schema as schema;
}

/// The bytes crate (1.x), whose `Bytes` [`IdSet::from_shared`] takes: a
/// set read in place from memory another owner keeps alive.
pub use bytes;

/// The filesystem crate a [`Checkpoint`] runs on, re-exported so its
/// version is the one this crate was built with.
pub use cairn_fs;

/// The examples of docs/library.md (this crate's and cairn-fs's), compiled
/// as doc tests so they keep matching the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
mod library_md {}
