//! cairn-checkpoint: job-level checkpointing on any cairn filesystem.
//!
//! Built so far, in the order of docs/checkpoint-protocol.md: the directory
//! layout ([`UnitName`], [`classify`]), ID files ([`encode_ids`],
//! [`decode_ids`]), step 7 ([`load_committed`]) and the compact sets of
//! committed IDs ([`idset`]). The commit protocol (steps 1-4), the lease
//! (5), recovery (6) and clean-up (8) are still to come.

mod error;
mod idfile;
pub mod idset;
mod layout;
mod load;

pub use error::{Error, Result};
pub use idfile::{decode_ids, encode_ids};
pub use idset::{IdSet, IdSetBuilder, IntIdSet, StringIdSet, StringMode};
pub use layout::{
    COMMITTED_SUFFIX, CheckpointFile, DATA_DELIMITER, LEASE_FILE, PENDING_SUFFIX, RunId, UnitName,
    classify,
};
pub use load::{CommittedState, load_committed};
