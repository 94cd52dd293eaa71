//! cairn-fs: an fsspec-style virtual filesystem over Apache OpenDAL.
//!
//! A URL (`s3://bucket/key`, `file:///abs/path`, `memory:///x`, or a plain
//! local path) resolves through a [`Registry`] of schemes to a backend, which
//! turns storage options and the environment into OpenDAL operators. On top
//! sits one [`FileSystem`] API that behaves the same on every backend.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use cairn_fs::{FileSystem, StorageOptions, WriteMode};
//! let (fs, path) = FileSystem::from_url("memory:///intro/a.txt", &StorageOptions::new()).unwrap();
//! fs.pipe(&path, "hello".into(), WriteMode::Create).await.unwrap();
//! assert_eq!(fs.ls("/intro").await.unwrap()[0].size, 5);
//! # })
//! ```

#![warn(missing_docs)]

mod answer;
pub mod backend;
mod cache;
mod entry;
mod error;
mod filesystem;
mod fsspec_env;
pub mod hooks;
mod http_client;
pub mod metrics;
mod options;
mod registry;
mod request_counts;
#[cfg(feature = "object-store")]
mod store_view;
mod transfer_config;
mod url;

pub use cache::ListingCacheConfig;
pub use error::{Error, ErrorKind, Result};
pub use filesystem::{
    DiskUsage, FileInfo, FileReader, FileSystem, FileSystemBuilder, FileType, FileWriter,
    FindOptions, PROBE_PREFIX, TransferProgress, TreeOptions, WalkStep, WriteMode,
    build_checkpoint_filesystem,
};
pub use fsspec_env::FsspecEnv;
pub use options::{
    BackendOptions, ConfigLine, Environment, Setting, Source, StorageOptions, is_secret_name,
};
pub use registry::{Registry, register};
pub use request_counts::{RequestCounts, request_counts};
#[cfg(feature = "object-store")]
pub use store_view::ObjectStoreView;
pub use transfer_config::{DEFAULT_CONCURRENCY, DEFAULT_PART_SIZE, TransferConfig};
pub use url::{has_magic, split_protocol};

/// Apache OpenDAL (0.59), whose `Operator` a [`backend::Backend`] returns:
/// implement a backend with this one, or with opendal 0.59 of your own.
///
/// ```
/// let op = cairn_fs::opendal::Operator::new(cairn_fs::opendal::services::Memory::default()).unwrap();
/// assert_eq!(op.info().scheme().to_string(), "memory");
/// ```
pub use opendal;

/// reqwest (0.13), whose `Client` [`FileSystemBuilder::http_client`] takes.
pub use reqwest;

/// The http crate (1.x), whose `Request` a [`hooks::RequestHook`] sees
/// (its body an [`opendal::Buffer`]).
pub use http;

/// object_store (0.14), whose `ObjectStore` trait [`ObjectStoreView`]
/// implements.
#[cfg(feature = "object-store")]
pub use object_store;

// docs/library.md's examples are compiled as doc tests of cairn-checkpoint,
// which depends on this crate and can compile both halves of the guide.
