//! The [`FileSystem`]: one API over every backend, fsspec's names and semantics.
//!
//! A backend supplies an OpenDAL operator per root (bucket, volume); the
//! modules here turn that into one filesystem: `builder` (options and
//! environment to a filesystem), `paths` (URLs, stripped paths, roots and
//! keys), `operators` (one layered operator per root, built once),
//! `conditional` (how create-if-absent writes are done on a store), and the
//! operations, each derived once for all backends: `info` (info, exists,
//! ls), `walk` (find, walk, du, prefix listings), `glob` (glob,
//! expand_path), `io` (cat, pipe, open), `copy`
//! (cp, mv, put, get), `remove` (rm, mkdir).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::backend::{Backend, ConditionalWrites, Layout};
use crate::cache::{DirCache, ListingCacheConfig};
use crate::error::{Error, Result, from_opendal, with_store_hint};
use crate::hooks::RequestHook;
use crate::options::{ConfigLine, Source, StorageOptions};
use crate::transfer_config::TransferConfig;
use crate::url::split_protocol;

mod builder;
mod conditional;
mod copy;
mod glob;
mod info;
mod io;
mod layers;
mod operators;
mod paths;
mod remove;
mod walk;
mod walk_options;

pub use builder::{FileSystemBuilder, build_checkpoint_filesystem};
pub use conditional::PROBE_PREFIX;
#[cfg(feature = "object-store")]
pub(crate) use io::is_staging_file;
pub(crate) use paths::Location;
pub use walk_options::{FindOptions, TreeOptions};

pub use crate::entry::{DiskUsage, FileInfo, FileType, WalkStep};
pub use copy::TransferProgress;
pub use io::{FileReader, FileWriter, WriteMode};

/// A filesystem for one protocol and one set of options, fsspec style.
///
/// Paths may be given as URLs (`s3://bucket/key`) or as stripped paths
/// (`bucket/key`; `/abs/path` for `file` and `memory`); results use stripped
/// paths. Cloning is cheap and shares the operator cache.
///
/// ```
/// # tokio_test();
/// # fn tokio_test() { tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use cairn_fs::{FileSystem, StorageOptions, WriteMode};
/// let fs = FileSystem::new("memory", &StorageOptions::new()).unwrap();
/// fs.pipe("memory:///docs/hello.txt", "hi".into(), WriteMode::Overwrite).await.unwrap();
/// assert_eq!(fs.cat("/docs/hello.txt").await.unwrap(), "hi");
/// assert!(fs.isdir("/docs").await.unwrap());
/// # }) }
/// ```
#[derive(Clone)]
pub struct FileSystem {
    inner: Arc<Inner>,
    /// Whether listings and `info` always ask the store (see
    /// [`FileSystem::uncached`]); writes still invalidate the shared cache.
    uncached: bool,
}

struct Inner {
    protocol: String,
    schemes: Vec<String>,
    layout: Layout,
    backend: Arc<dyn Backend>,
    operators: Mutex<HashMap<String, Arc<tokio::sync::OnceCell<opendal::Operator>>>>,
    conditional: Mutex<HashMap<String, ConditionalWrites>>,
    secrets: Vec<String>,
    cache: DirCache,
    http_client: Option<reqwest::Client>,
    hooks: Vec<Arc<dyn RequestHook>>,
    /// The ETags multipart uploads completed here should have (also among
    /// `hooks`): a writer whose completion answer was lost checks the object
    /// against it.
    uploads: Arc<crate::hooks::CompletedUploads>,
    retries: layers::RetryCounter,
    /// The store's name in metrics (its endpoint, or its protocol).
    endpoint_label: String,
    transfer: TransferConfig,
}

impl std::fmt::Debug for FileSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSystem")
            .field("protocol", &self.inner.protocol)
            .field("backend", &self.inner.backend)
            .finish()
    }
}

impl FileSystem {
    /// The filesystem of `protocol` with `options`, resolved against the
    /// process environment, from the global registry.
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("s3a", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(fs.protocol(), "s3");
    /// ```
    pub fn new(protocol: &str, options: &StorageOptions) -> Result<Self> {
        FileSystemBuilder::new(protocol)
            .options(options.clone())
            .build()
    }

    /// The filesystem serving `url` and the URL's stripped path, as fsspec's
    /// `url_to_fs`. A path without a scheme is local.
    ///
    /// ```
    /// let (fs, path) = cairn_fs::FileSystem::from_url("memory:///a/b", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!((fs.protocol(), path.as_str()), ("memory", "/a/b"));
    /// ```
    pub fn from_url(url: &str, options: &StorageOptions) -> Result<(Self, String)> {
        let (scheme, _) = split_protocol(url);
        let fs = Self::new(scheme.as_deref().unwrap_or("file"), options)?;
        let path = fs.strip(url)?;
        Ok((fs, path))
    }

    /// The canonical protocol name.
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("local", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(fs.protocol(), "file");
    /// ```
    pub fn protocol(&self) -> &str {
        &self.inner.protocol
    }

    /// What another S3 client needs to read this filesystem's objects as it
    /// does: `None` unless the store is S3-compatible (`s3`, `cos`), its
    /// credentials are static keys (or anonymous), reads are not
    /// requester-pays, and requests go through cairn's own HTTP client
    /// (not one given to [`FileSystemBuilder::http_client`]). cairn-py
    /// hands pyarrow its own S3 client built from these, for the
    /// random-access reads of a Parquet file, which pyarrow runs at once
    /// only through its own client.
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert!(fs.s3_read_settings().is_none());
    /// ```
    pub fn s3_read_settings(&self) -> Option<crate::backend::S3ReadSettings> {
        if self.inner.http_client.is_some() {
            return None;
        }
        self.inner.backend.s3_read_settings()
    }

    /// The resolved configuration of this filesystem's backend, secrets redacted.
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("s3", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert!(fs.describe().iter().any(|l| l.name == "region"));
    /// ```
    pub fn describe(&self) -> Vec<ConfigLine> {
        let mut lines = self.inner.backend.describe();
        lines.extend(self.inner.cache.config().describe());
        lines.extend(self.inner.transfer.describe());
        for hook in &self.inner.hooks {
            lines.push(ConfigLine {
                name: "request_hook".into(),
                value: format!("{hook:?}"),
                source: Source::Default,
                note: None,
                unset: false,
            });
        }
        lines
    }

    /// Requests retried so far by this filesystem and its clones (after a
    /// throttling answer, a 5xx, a timeout or a connection error).
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(fs.retried_requests(), 0);
    /// ```
    pub fn retried_requests(&self) -> u64 {
        self.inner.retries.get()
    }

    /// The part size and parts in flight of large transfers (storage options
    /// `part_size` and `max_concurrency`).
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(fs.transfer().part_size.value, cairn_fs::DEFAULT_PART_SIZE);
    /// ```
    pub fn transfer(&self) -> &TransferConfig {
        &self.inner.transfer
    }

    /// The listing-cache settings in force.
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert!(fs.listing_cache().enabled.value);
    /// ```
    pub fn listing_cache(&self) -> &ListingCacheConfig {
        self.inner.cache.config()
    }

    /// Forgets every cached listing (fsspec's `invalidate_cache()`).
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// fs.invalidate_cache();
    /// ```
    pub fn invalidate_cache(&self) {
        self.inner.cache.clear();
    }

    /// The same filesystem (its connections and options, and the listing
    /// cache its clones share) whose `ls`, `ls_stream`, `info` and
    /// `exists` always ask the store, never a cached listing; its writes
    /// still drop what they change from the shared cache. Anything that
    /// decides what to delete, or how an output is laid out, lists through
    /// this view: a listing cached before another process wrote is stale.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_fs::{FileSystem, StorageOptions, WriteMode};
    /// let fs = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    /// fs.pipe("/uncached-doc/a", "x".into(), WriteMode::Overwrite).await.unwrap();
    /// assert_eq!(fs.ls("/uncached-doc").await.unwrap().len(), 1); // now cached
    /// // Another writer (here: a filesystem of its own) adds a file.
    /// let other = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    /// other.pipe("/uncached-doc/b", "y".into(), WriteMode::Overwrite).await.unwrap();
    /// assert_eq!(fs.ls("/uncached-doc").await.unwrap().len(), 1);
    /// assert_eq!(fs.uncached().ls("/uncached-doc").await.unwrap().len(), 2);
    /// # })
    /// ```
    pub fn uncached(&self) -> FileSystem {
        FileSystem {
            inner: self.inner.clone(),
            uncached: true,
        }
    }

    /// The shared listing cache, for invalidation (every view of the
    /// filesystem drops what it writes).
    pub(crate) fn cache(&self) -> &DirCache {
        &self.inner.cache
    }

    /// The listing cache to answer reads from: `None` when it is off or
    /// this view is [`FileSystem::uncached`].
    pub(crate) fn read_cache(&self) -> Option<&DirCache> {
        (!self.uncached && self.inner.cache.config().enabled.value).then_some(&self.inner.cache)
    }

    pub(crate) fn real_directories(&self) -> bool {
        self.inner.backend.real_directories()
    }

    pub(crate) fn batch_delete(&self) -> bool {
        self.inner.backend.batch_delete()
    }

    /// Maps an OpenDAL error about `loc` to a cairn error, secrets scrubbed.
    pub(crate) fn error(&self, err: opendal::Error, loc: &Location) -> Error {
        let bucket = (self.inner.layout != Layout::SingleRoot).then_some(loc.root.as_str());
        self.error_at(err, &self.url(&loc.path), bucket)
    }

    /// Maps an OpenDAL error about `url` (in `bucket`) to a cairn error,
    /// naming the store when its retries ran out; secrets scrubbed.
    pub(crate) fn error_at(&self, err: opendal::Error, url: &str, bucket: Option<&str>) -> Error {
        // Temporary: the deadline cut the retries short; persistent: they
        // ran out. Either way the store, not the request, is at fault.
        let retried = err.is_temporary() || err.is_persistent();
        let mut error = from_opendal(err, url, bucket);
        if retried && let Some(endpoint) = self.inner.backend.endpoint() {
            let policy = self.inner.backend.io_policy();
            error = with_store_hint(error, &endpoint, policy.max_attempts, policy.retry_deadline);
        }
        error.redact(&self.inner.secrets)
    }
}
