//! cairn-checkpoint: job-level checkpointing on any cairn filesystem.
//!
//! This first part holds the compact sets of committed IDs ([`idset`]); the
//! commit protocol, recovery, lease and clean-up follow in the order of
//! docs/checkpoint-protocol.md.

mod error;
pub mod idset;

pub use error::{Error, Result};
pub use idset::{IdSet, IdSetBuilder, IntIdSet, StringIdSet, StringMode};
