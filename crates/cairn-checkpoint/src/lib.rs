//! cairn-checkpoint: job-level checkpointing on any cairn filesystem.
//!
//! Built so far, in the order of docs/checkpoint-protocol.md: the directory
//! layout ([`UnitName`], [`classify`]), ID files ([`encode_ids`],
//! [`decode_ids`]), the unit steps 1, 3, 4 ([`CheckpointDir::write_pending`],
//! [`CheckpointDir::commit`], [`CheckpointDir::release_pending`]), recovery
//! (step 6, [`CheckpointDir::recover`]), loading (step 7, [`load_committed`]),
//! clean-up (step 8, [`CheckpointDir::clean_up`]) and the compact sets of
//! committed IDs ([`idset`]); the lease (step 5, [`CheckpointDir::acquire_lease`]);
//! and [`CheckpointConfig::open`], which runs steps 5, 6 and 7 for a run.

mod cleanup;
mod commit;
mod config;
mod error;
pub mod failpoint;
mod idfile;
pub mod idset;
mod job;
mod layout;
mod lease;
mod listing;
mod load;
mod metrics;
mod recover;
mod verify;

pub use cleanup::CleanupReport;
pub use commit::CheckpointDir;
pub use config::{
    CheckpointConfig, DEFAULT_COMMIT_INTERVAL, DEFAULT_COMMIT_ROWS, DEFAULT_LEASE_TTL,
    OpenCheckpoint,
};
pub use error::{Error, Result};
pub use idfile::{decode_ids, encode_ids, recorded_partitions};
pub use idset::{IdSet, IdSetBuilder, IntIdSet, StringIdSet, StringMode};
pub use job::{InputFingerprint, JobRecord, paths_overlap, refuse_overlap};
pub use layout::{
    COMMITTED_SUFFIX, COMPLETE_FILE, CheckpointFile, DATA_DELIMITER, DATA_DELIMITERS, JOB_FILE,
    LEASE_FILE, LEASE_PREFIX, OutputLayout, PENDING_SUFFIX, RunId, UnitName, classify, lease_file,
    lease_generation,
};
pub use lease::{Lease, LeaseKeeper, LeaseRecord};
pub use load::{CommittedState, infer_id_column, list_committed, load_committed};
pub use metrics::register_metrics;
pub use recover::RecoveryReport;
pub use verify::{DataCheck, data_file_owner, found_layout};
