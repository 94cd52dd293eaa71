//! Backends: each module maps storage options to an OpenDAL operator and names
//! its schemes. OpenDAL does the I/O; [`crate::FileSystem`] does the rest.

use std::sync::Arc;

use futures::future::BoxFuture;
use opendal::Operator;

use crate::error::Result;
use crate::hooks::RequestHook;
use crate::options::{BackendOptions, ConfigLine, Environment};
pub use read_settings::S3ReadSettings;

pub mod cos;
mod flat;
pub mod gcs;
pub mod local;
pub mod memory;
pub mod oss;
mod read_settings;
pub mod s3;
pub(crate) mod shared;
pub mod tclake;

/// Builds the operator of `bucket` from a service builder, with an error that
/// names the protocol and the bucket.
pub(crate) fn open_operator(
    builder: impl opendal::Builder,
    protocol: &str,
    bucket: &str,
) -> Result<Operator> {
    Operator::new(builder).map_err(|e| {
        crate::Error::new(
            crate::ErrorKind::Config,
            format!(
                "cannot configure {protocol} for bucket {bucket:?}; check the {protocol} storage options"
            ),
        )
        .with_source(e)
    })
}

/// How a backend's paths name their objects.
///
/// ```
/// use cairn_fs::backend::Layout;
/// assert_ne!(Layout::Bucketed, Layout::SingleRoot);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `bucket/key`: the first path component picks an operator (s3, gcs, ...).
    Bucketed,
    /// `/abs/path`: one operator rooted at `/` (file, memory).
    SingleRoot,
    /// `a/b/.../key`: the first N path components pick an operator
    /// (`tclake://volume/<catalog>/<schema>/<volume>/key` has 4).
    Rooted(usize),
}

impl Layout {
    /// How many leading path components name an operator (`None`: one root).
    ///
    /// ```
    /// use cairn_fs::backend::Layout;
    /// assert_eq!(Layout::Bucketed.root_components(), Some(1));
    /// assert_eq!(Layout::Rooted(4).root_components(), Some(4));
    /// assert_eq!(Layout::SingleRoot.root_components(), None);
    /// ```
    pub fn root_components(self) -> Option<usize> {
        match self {
            Layout::Bucketed => Some(1),
            Layout::Rooted(n) => Some(n.max(1)),
            Layout::SingleRoot => None,
        }
    }
}

/// Whether a store honours create-if-absent writes.
///
/// ```
/// use cairn_fs::backend::ConditionalWrites;
/// assert_eq!(ConditionalWrites::Native.to_string(), "native");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionalWrites {
    /// The store refuses a create of an existing key (atomic, race-free).
    Native,
    /// The store ignores the condition; cairn checks existence first (not race-free).
    Emulated,
    /// Probe the store once per bucket and pick one of the above.
    Probe,
}

impl std::fmt::Display for ConditionalWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConditionalWrites::Native => "native",
            ConditionalWrites::Emulated => "emulated",
            ConditionalWrites::Probe => "probe",
        })
    }
}

/// A registered scheme family: turns resolved options into a configured [`Backend`].
///
/// Implement this to add your own scheme, then register it with
/// [`crate::Registry::register`] or [`crate::register`].
///
/// ```
/// use std::sync::Arc;
/// use cairn_fs::backend::{Backend, BackendFactory, Layout, memory::MemoryFactory};
/// use cairn_fs::{Environment, Registry};
///
/// /// `scratch://` is the memory backend under another name.
/// struct Scratch;
/// impl BackendFactory for Scratch {
///     fn protocol(&self) -> &str { "scratch" }
///     fn schemes(&self) -> &[&str] { &["scratch"] }
///     fn layout(&self) -> Layout { Layout::SingleRoot }
///     fn configure(&self, options: &cairn_fs::BackendOptions, env: &Environment)
///         -> cairn_fs::Result<Arc<dyn Backend>> {
///         MemoryFactory::default().configure(options, env)
///     }
/// }
/// let registry = Registry::with_builtins();
/// registry.register(Arc::new(Scratch));
/// assert!(registry.schemes().contains(&"scratch".to_string()));
/// ```
pub trait BackendFactory: Send + Sync + 'static {
    /// The canonical protocol name (`s3`).
    fn protocol(&self) -> &str;
    /// Every scheme this factory serves, canonical first (`["s3", "s3a"]`).
    fn schemes(&self) -> &[&str];
    /// How paths name objects on this backend.
    fn layout(&self) -> Layout;
    /// Resolves `options` (merged over the scheme names, from `FSSPEC_*`
    /// variables and explicit options) against `env`. Unknown or malformed
    /// options are errors naming the option and where it came from.
    fn configure(&self, options: &BackendOptions, env: &Environment) -> Result<Arc<dyn Backend>>;

    /// Top-level options whose values are text: an `FSSPEC_<P>_<K>` variable
    /// for one of them keeps its raw text instead of being JSON-decoded.
    fn string_options(&self) -> &[&str] {
        &[]
    }

    /// Whether the listing cache is on when the options do not say.
    fn listings_cache_default(&self) -> bool {
        true
    }
}

/// A configured backend: builds one operator per root (a bucket, a tclake
/// volume), asynchronously, so a backend may call a catalog first.
///
/// ```
/// use futures::future::BoxFuture;
/// use cairn_fs::backend::Backend;
///
/// /// Every root is a fresh in-memory store.
/// #[derive(Debug)]
/// struct Scratch;
/// impl Backend for Scratch {
///     fn operator<'a>(&'a self, _root: &'a str) -> BoxFuture<'a, cairn_fs::Result<opendal::Operator>> {
///         Box::pin(async {
///             opendal::Operator::new(opendal::services::Memory::default())
///                 .map_err(|e| cairn_fs::Error::new(cairn_fs::ErrorKind::Config, "no memory store").with_source(e))
///         })
///     }
/// }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// assert!(Scratch.operator("any").await.is_ok());
/// # })
/// ```
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// An operator for `root` (a bucket, a volume's path, `""` for
    /// single-root backends), without layers; the filesystem adds retry and
    /// timeout, and calls this once per root (concurrent callers of the
    /// same root wait for the one call; other roots do not).
    fn operator<'a>(&'a self, root: &'a str) -> BoxFuture<'a, Result<Operator>>;

    /// Whether directories exist on their own (file, memory) or only as key prefixes.
    fn real_directories(&self) -> bool {
        false
    }

    /// How create-if-absent writes are done.
    fn conditional_writes(&self) -> ConditionalWrites {
        ConditionalWrites::Native
    }

    /// The service endpoint requests go to, named in errors about a store
    /// that failed or did not answer (`None`: no network endpoint).
    fn endpoint(&self) -> Option<String> {
        None
    }

    /// Values to scrub from every error message (secrets).
    fn secrets(&self) -> Vec<String> {
        Vec::new()
    }

    /// The resolved configuration, secrets redacted.
    fn describe(&self) -> Vec<ConfigLine> {
        Vec::new()
    }

    /// Retry and timeout settings for the layers the filesystem stacks.
    fn io_policy(&self) -> IoPolicy {
        IoPolicy::default()
    }

    /// The directory this backend's keys live under, when they are local
    /// files: single-request writes then go through a temporary file, fsync,
    /// and rename (overwrite) or link (create-if-absent), then fsync of the
    /// directory, which OpenDAL's fs service does not do.
    fn local_root(&self) -> Option<&std::path::Path> {
        None
    }

    /// Whether deletes may go out as multi-object batches; when false, objects
    /// are deleted one request each (in parallel).
    fn batch_delete(&self) -> bool {
        true
    }

    /// Hooks that see (and may amend) every HTTP request of this backend.
    fn request_hooks(&self) -> Vec<Arc<dyn RequestHook>> {
        Vec::new()
    }

    /// What another S3 client needs to read this backend's objects as it
    /// does, where that is possible (`None`: not an S3-compatible store, or
    /// one whose reads another client would not make the same way).
    fn s3_read_settings(&self) -> Option<S3ReadSettings> {
        None
    }
}

/// Retry and timeout settings, applied as OpenDAL layers in one place.
///
/// Retries follow the AWS SDKs' standard mode: throttling (429, 503
/// SlowDown), 5xx, timeouts and connection errors are retried with
/// exponential back-off (×2 per attempt from `retry_base_delay`, capped at
/// `retry_max_delay`) plus a random jitter of up to the current delay; other
/// 4xx answers are not retried. A request stops at `max_attempts` or once
/// `retry_deadline` has passed since it started, whichever comes first.
///
/// ```
/// let p = cairn_fs::backend::IoPolicy::default();
/// assert!(p.max_attempts >= 1);
/// assert_eq!(p.retry_base_delay, std::time::Duration::from_millis(100));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IoPolicy {
    /// Attempts per request, the first included.
    pub max_attempts: usize,
    /// Delay before the first retry (before jitter).
    pub retry_base_delay: std::time::Duration,
    /// Longest delay between two attempts (before jitter).
    pub retry_max_delay: std::time::Duration,
    /// Deadline of a whole call, its retries included (`None`: attempts only).
    pub retry_deadline: Option<std::time::Duration>,
    /// Deadline of each attempt of a non-streaming call.
    pub op_timeout: std::time::Duration,
    /// Deadline of each streaming read or write step.
    pub io_timeout: std::time::Duration,
}

impl Default for IoPolicy {
    fn default() -> Self {
        Self {
            // Ten attempts ride out about 50 s of trouble (a server
            // restart, a throttling burst) before the call fails.
            max_attempts: 10,
            retry_base_delay: std::time::Duration::from_millis(100),
            retry_max_delay: std::time::Duration::from_secs(20),
            retry_deadline: Some(std::time::Duration::from_secs(300)),
            op_timeout: std::time::Duration::from_secs(120),
            io_timeout: std::time::Duration::from_secs(30),
        }
    }
}
