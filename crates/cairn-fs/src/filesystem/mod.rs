//! The [`FileSystem`]: one API over every backend, fsspec's names and semantics.
//!
//! A backend supplies an OpenDAL operator per bucket; this module adds the
//! layers (timeout inside retry), caches operators, maps paths and errors.
//! The operations live in sibling modules, each derived once for all backends:
//! `info` (info, exists, ls), `walk` (find, glob, du, expand_path), `io` (cat,
//! pipe, open), `copy` (cp, mv, put, get), `remove` (rm, mkdir).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opendal::Operator;

use crate::backend::{Backend, ConditionalWrites, Layout};
use crate::cache::{DirCache, ListingCacheConfig};
use crate::error::{Error, ErrorKind, Result, from_opendal, with_store_hint};
use crate::fsspec_env::FsspecEnv;
use crate::hooks::{HookedTransport, RequestHook};
use crate::options::{BackendOptions, ConfigLine, Environment, Source, StorageOptions};
use crate::registry::Registry;
use crate::url::{absolute_local, normalize_posix, split_protocol};

mod copy;
mod info;
mod io;
mod layers;
mod remove;
mod walk;

pub use copy::other_paths;
pub use info::{DiskUsage, FileInfo, FileType};
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
}

struct Inner {
    protocol: String,
    schemes: Vec<String>,
    layout: Layout,
    backend: Arc<dyn Backend>,
    operators: Mutex<HashMap<String, Operator>>,
    conditional: Mutex<HashMap<String, ConditionalWrites>>,
    secrets: Vec<String>,
    cache: DirCache,
    http_client: Option<reqwest::Client>,
    hooks: Vec<Arc<dyn RequestHook>>,
    retries: layers::RetryCounter,
}

impl std::fmt::Debug for FileSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSystem")
            .field("protocol", &self.inner.protocol)
            .field("backend", &self.inner.backend)
            .finish()
    }
}

/// A resolved location: the operator of its bucket and the key inside it.
pub(crate) struct Location {
    pub op: Operator,
    pub bucket: String,
    /// Key inside the operator, no leading slash; empty for the bucket or root.
    pub key: String,
    /// The stripped path, as results name it.
    pub path: String,
}

impl Location {
    /// The key of this location seen as a directory (`dir/`, or `/` for the root).
    pub fn dir_key(&self) -> String {
        if self.key.is_empty() {
            "/".to_string()
        } else {
            format!("{}/", self.key)
        }
    }
}

/// Builds a [`FileSystem`] with an explicit registry, environment, HTTP client
/// and request hooks.
///
/// ```
/// use cairn_fs::{Environment, FileSystemBuilder, StorageOptions};
/// let fs = FileSystemBuilder::new("s3")
///     .options(StorageOptions::new())
///     .env(Environment::from_pairs([("AWS_ENDPOINT_URL", "http://127.0.0.1:3900")]))
///     .build()
///     .unwrap();
/// assert_eq!(fs.protocol(), "s3");
/// ```
#[derive(Clone)]
pub struct FileSystemBuilder<'a> {
    protocol: String,
    options: StorageOptions,
    env: Option<Environment>,
    registry: Option<&'a Registry>,
    http_client: Option<reqwest::Client>,
    hooks: Vec<Arc<dyn RequestHook>>,
    for_checkpoints: bool,
}

impl<'a> FileSystemBuilder<'a> {
    /// A builder for `protocol` (a scheme or alias), with no options.
    ///
    /// ```
    /// let _ = cairn_fs::FileSystemBuilder::new("file");
    /// ```
    pub fn new(protocol: &str) -> Self {
        Self {
            protocol: protocol.to_string(),
            options: StorageOptions::new(),
            env: None,
            registry: None,
            http_client: None,
            hooks: Vec::new(),
            for_checkpoints: false,
        }
    }

    /// The storage options (a map per protocol).
    ///
    /// ```
    /// let _ = cairn_fs::FileSystemBuilder::new("file").options(cairn_fs::StorageOptions::new());
    /// ```
    pub fn options(mut self, options: StorageOptions) -> Self {
        self.options = options;
        self
    }

    /// The environment to resolve against (default: the process environment).
    ///
    /// ```
    /// let _ = cairn_fs::FileSystemBuilder::new("file").env(cairn_fs::Environment::default());
    /// ```
    pub fn env(mut self, env: Environment) -> Self {
        self.env = Some(env);
        self
    }

    /// The registry to look the scheme up in (default: [`Registry::global`]).
    ///
    /// ```
    /// let registry = cairn_fs::Registry::with_builtins();
    /// let _ = cairn_fs::FileSystemBuilder::new("file").registry(&registry);
    /// ```
    pub fn registry(mut self, registry: &'a Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// The HTTP client HTTP backends send with (timeouts, proxies, TLS roots,
    /// host-name overrides); default: OpenDAL's.
    ///
    /// ```
    /// let client = reqwest::Client::builder().build().unwrap();
    /// let _ = cairn_fs::FileSystemBuilder::new("s3").http_client(client);
    /// ```
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// Adds a hook that sees every HTTP request, after the backend's own.
    ///
    /// ```
    /// let hook = std::sync::Arc::new(cairn_fs::hooks::ContentMd5OnMultiDelete);
    /// let _ = cairn_fs::FileSystemBuilder::new("s3").request_hook(hook);
    /// ```
    pub fn request_hook(mut self, hook: Arc<dyn RequestHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// The checkpoint-storage preset: the listing cache is always off, so a
    /// run sees what another process committed a moment ago.
    ///
    /// ```
    /// let fs = cairn_fs::FileSystemBuilder::new("s3").for_checkpoints().build().unwrap();
    /// assert!(!fs.listing_cache().enabled.value);
    /// ```
    pub fn for_checkpoints(mut self) -> Self {
        self.for_checkpoints = true;
        self
    }

    /// Resolves the options and returns the filesystem; operators are built lazily.
    ///
    /// Options are merged, lowest precedence first: the backend's native
    /// environment, `FSSPEC_<P>`, `FSSPEC_<P>_<K>`, explicit options.
    ///
    /// ```
    /// let err = cairn_fs::FileSystemBuilder::new("nope").build().unwrap_err();
    /// assert_eq!(err.kind(), cairn_fs::ErrorKind::UnknownScheme);
    /// ```
    pub fn build(self) -> Result<FileSystem> {
        // OpenDAL's default reqwest transport, installed once per process.
        static HTTP: std::sync::Once = std::sync::Once::new();
        HTTP.call_once(opendal::install_default);
        let registry: &Registry = match self.registry {
            Some(r) => r,
            None => Registry::global(),
        };
        let factory = registry.resolve(&self.protocol)?;
        let env = self.env.unwrap_or_else(Environment::process);
        let schemes = factory.schemes();
        let fsspec = FsspecEnv::parse(&env, |protocol, option| {
            schemes.contains(&protocol) && factory.string_options().contains(&option)
        });
        if let Some((name, reason)) = fsspec.ignored().iter().find(|(name, _)| {
            schemes
                .iter()
                .any(|s| name.to_lowercase() == format!("fsspec_{s}"))
        }) {
            return Err(Error::new(
                ErrorKind::Config,
                format!("environment variable {name} cannot be used: {reason}; fix or unset it"),
            ));
        }
        for (name, reason) in fsspec.ignored() {
            tracing::warn!(variable = %name, "ignoring environment variable: {reason}");
        }
        let mut options = BackendOptions::new(factory.protocol());
        for scheme in schemes {
            fsspec.apply(scheme, &mut options);
        }
        for scheme in schemes {
            for (key, value) in self.options.protocol(scheme).into_iter().flatten() {
                options.set(
                    key,
                    value.clone(),
                    Source::Option(format!("{scheme}.{key}")),
                );
            }
        }
        let mut cache =
            ListingCacheConfig::take_from(&mut options, factory.listings_cache_default())?;
        if self.for_checkpoints {
            if cache.enabled.value && cache.enabled.source != Source::Default {
                tracing::warn!(
                    "use_listings_cache is ignored for checkpoint storage: it must see other processes' commits"
                );
            }
            cache = ListingCacheConfig::disabled();
            cache.enabled.source = Source::Option("checkpoint storage preset".into());
        }
        let backend = factory.configure(&options, &env)?;
        let secrets = backend.secrets();
        let mut hooks = backend.request_hooks();
        hooks.extend(self.hooks);
        Ok(FileSystem {
            inner: Arc::new(Inner {
                protocol: factory.protocol().to_string(),
                schemes: schemes.iter().map(|s| s.to_string()).collect(),
                layout: factory.layout(),
                backend,
                operators: Mutex::new(HashMap::new()),
                conditional: Mutex::new(HashMap::new()),
                secrets,
                cache: DirCache::new(cache),
                http_client: self.http_client,
                hooks,
                retries: layers::RetryCounter::default(),
            }),
        })
    }
}

/// The filesystem serving `url`, with the checkpoint-storage preset (listing
/// cache off), and the URL's stripped path. A POSIX path needs no options.
///
/// ```
/// let (fs, path) = cairn_fs::build_checkpoint_filesystem("/tmp/ckpt", &cairn_fs::StorageOptions::new()).unwrap();
/// assert_eq!((fs.protocol(), path.as_str()), ("file", "/tmp/ckpt"));
/// assert!(!fs.listing_cache().enabled.value);
/// ```
pub fn build_checkpoint_filesystem(
    url: &str,
    options: &StorageOptions,
) -> Result<(FileSystem, String)> {
    let (scheme, _) = split_protocol(url);
    let fs = FileSystemBuilder::new(scheme.as_deref().unwrap_or("file"))
        .options(options.clone())
        .for_checkpoints()
        .build()?;
    let path = fs.strip(url)?;
    Ok((fs, path))
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

    /// The resolved configuration of this filesystem's backend, secrets redacted.
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("s3", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert!(fs.describe().iter().any(|l| l.name == "region"));
    /// ```
    pub fn describe(&self) -> Vec<ConfigLine> {
        let mut lines = self.inner.backend.describe();
        lines.extend(self.inner.cache.config().describe());
        for hook in &self.inner.hooks {
            lines.push(ConfigLine {
                name: "request_hook".into(),
                value: format!("{hook:?}"),
                source: Source::Default,
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

    pub(crate) fn cache(&self) -> &DirCache {
        &self.inner.cache
    }

    /// Removes this filesystem's scheme from `url` and normalizes the path:
    /// `s3://b/k/` gives `b/k`, a relative local path becomes absolute.
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("s3", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(fs.strip("s3://bucket/a/b/").unwrap(), "bucket/a/b");
    /// assert!(fs.strip("memory:///x").is_err());
    /// ```
    pub fn strip(&self, url: &str) -> Result<String> {
        let (scheme, rest) = split_protocol(url);
        if let Some(scheme) = &scheme
            && !self.inner.schemes.iter().any(|s| s == scheme)
        {
            return Err(Error::new(
                ErrorKind::InvalidUrl,
                format!(
                    "this is a {} filesystem and cannot serve a {scheme}:// URL; open a filesystem for that URL instead",
                    self.inner.protocol
                ),
            )
            .with_url(url));
        }
        match self.inner.layout {
            Layout::Bucketed | Layout::Rooted(_) => {
                let trimmed = rest.trim_matches('/');
                Ok(trimmed.to_string())
            }
            Layout::SingleRoot => {
                let path = if self.inner.protocol == "file" {
                    if scheme.is_some() && !rest.starts_with('/') {
                        return Err(Error::new(
                            ErrorKind::InvalidUrl,
                            "a file URL must hold an absolute path: write file:///abs/path",
                        )
                        .with_url(url));
                    }
                    absolute_local(rest, url)?
                } else {
                    normalize_posix(&format!("/{rest}"))
                };
                Ok(strip_trailing_slash(&path))
            }
        }
    }

    /// The URL of a stripped path (`bucket/key` gives `s3://bucket/key`).
    ///
    /// ```
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(fs.url("/a/b"), "memory:///a/b");
    /// ```
    pub fn url(&self, path: &str) -> String {
        match split_protocol(path) {
            (Some(_), _) => path.to_string(),
            (None, rest) => format!("{}://{rest}", self.inner.protocol),
        }
    }

    /// How create-if-absent writes are done on the bucket of `path`: natively,
    /// or emulated by a check before the write (not race-free). On s3 the first
    /// call probes the store once per bucket with a short-lived object.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let fs = cairn_fs::FileSystem::new("memory", &cairn_fs::StorageOptions::new()).unwrap();
    /// assert_eq!(fs.conditional_writes("/x").await.unwrap(), cairn_fs::backend::ConditionalWrites::Native);
    /// # })
    /// ```
    pub async fn conditional_writes(&self, path: &str) -> Result<ConditionalWrites> {
        let loc = self.locate(path)?;
        self.conditional_mode(&loc).await
    }

    pub(crate) fn real_directories(&self) -> bool {
        self.inner.backend.real_directories()
    }

    pub(crate) fn batch_delete(&self) -> bool {
        self.inner.backend.batch_delete()
    }

    /// Resolves a URL or stripped path to its operator and key.
    pub(crate) fn locate(&self, path: &str) -> Result<Location> {
        let path = self.strip(path)?;
        let (bucket, key) = match self.inner.layout.root_components() {
            Some(1) => {
                let (bucket, key) = path.split_once('/').unwrap_or((path.as_str(), ""));
                if bucket.is_empty() {
                    return Err(Error::new(
                        ErrorKind::InvalidUrl,
                        "the URL names no bucket; write it as scheme://bucket/key",
                    )
                    .with_url(self.url(&path)));
                }
                (bucket.to_string(), key.to_string())
            }
            Some(n) => {
                let mut parts = path.splitn(n + 1, '/');
                let root: Vec<&str> = parts.by_ref().take(n).collect();
                if root.len() < n || root.iter().any(|p| p.is_empty()) {
                    return Err(Error::new(
                        ErrorKind::InvalidUrl,
                        format!(
                            "the URL names no root: its first {n} path components pick where its files are (e.g. tclake://volume/<catalog>/<schema>/<volume>/<path>)"
                        ),
                    )
                    .with_url(self.url(&path)));
                }
                (root.join("/"), parts.next().unwrap_or("").to_string())
            }
            None => (String::new(), path.trim_start_matches('/').to_string()),
        };
        let op = self.operator(&bucket)?;
        Ok(Location {
            op,
            bucket,
            key,
            path,
        })
    }

    fn operator(&self, bucket: &str) -> Result<Operator> {
        let mut cache = self
            .inner
            .operators
            .lock()
            .expect("operator cache poisoned");
        if let Some(op) = cache.get(bucket) {
            return Ok(op.clone());
        }
        let policy = self.inner.backend.io_policy();
        let op = self
            .inner
            .backend
            .operator(bucket)
            .map_err(|e| e.redact(&self.inner.secrets))?;
        let op = layers::with_io_layers(op, &policy, &self.inner.retries);
        // Local disk and memory send no HTTP; every other backend goes
        // through the hooks and cairn's client (crate::http).
        let op = if self.real_directories() && self.inner.http_client.is_none() {
            op
        } else {
            let client = self
                .inner
                .http_client
                .clone()
                .unwrap_or_else(crate::http::default_client);
            let transport = HookedTransport::new(
                opendal_http_transport_reqwest::ReqwestTransport::new(client),
                self.inner.hooks.clone(),
            );
            let ctx = op
                .context()
                .with_http_transport(opendal::HttpTransporter::new(transport));
            op.with_context(ctx)
        };
        cache.insert(bucket.to_string(), op.clone());
        Ok(op)
    }

    /// Maps an OpenDAL error about `loc` to a cairn error, secrets scrubbed.
    pub(crate) fn error(&self, err: opendal::Error, loc: &Location) -> Error {
        let bucket = (self.inner.layout != Layout::SingleRoot).then_some(loc.bucket.as_str());
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
            error = with_store_hint(error, &endpoint, &self.inner.backend.io_policy());
        }
        error.redact(&self.inner.secrets)
    }

    /// The stripped path of an operator entry path inside `loc`'s bucket.
    pub(crate) fn entry_path(&self, loc: &Location, entry: &str) -> String {
        let entry = entry.trim_matches('/');
        match self.inner.layout {
            Layout::Bucketed | Layout::Rooted(_) if entry.is_empty() => loc.bucket.clone(),
            Layout::Bucketed | Layout::Rooted(_) => format!("{}/{entry}", loc.bucket),
            Layout::SingleRoot => format!("/{entry}"),
        }
    }

    async fn conditional_mode(&self, loc: &Location) -> Result<ConditionalWrites> {
        let declared = self.inner.backend.conditional_writes();
        if declared != ConditionalWrites::Probe {
            return Ok(declared);
        }
        if let Some(mode) = self
            .inner
            .conditional
            .lock()
            .expect("probe cache poisoned")
            .get(&loc.bucket)
        {
            return Ok(*mode);
        }
        let mode = self.probe_conditional_writes(loc).await?;
        self.inner
            .conditional
            .lock()
            .expect("probe cache poisoned")
            .insert(loc.bucket.clone(), mode);
        Ok(mode)
    }

    /// Writes a probe object twice, the second time create-if-absent: a store
    /// that refuses the second write honours the condition.
    async fn probe_conditional_writes(&self, loc: &Location) -> Result<ConditionalWrites> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let probe = Location {
            op: loc.op.clone(),
            bucket: loc.bucket.clone(),
            key: format!(".cairn-probe-{}-{nanos}", std::process::id()),
            path: loc.path.clone(),
        };
        probe
            .op
            .write(&probe.key, "probe")
            .await
            .map_err(|e| self.error(e, &probe))?;
        let second = probe
            .op
            .write_with(&probe.key, "probe")
            .if_not_exists(true)
            .await;
        let cleanup = probe.op.delete(&probe.key).await;
        let mode = match second {
            Err(e)
                if matches!(
                    e.kind(),
                    opendal::ErrorKind::ConditionNotMatch | opendal::ErrorKind::AlreadyExists
                ) =>
            {
                ConditionalWrites::Native
            }
            Ok(_) => {
                // Info, not a warning: a checkpoint, the one place where it
                // matters, warns about it itself (once, when it opens).
                tracing::info!(
                    bucket = %loc.bucket,
                    "the store ignores create-if-absent writes; cairn checks existence before \
                     exclusive creates instead, which is not race-free"
                );
                ConditionalWrites::Emulated
            }
            Err(e) => return Err(self.error(e, &probe)),
        };
        cleanup.map_err(|e| self.error(e, &probe))?;
        self.cache().invalidate(&loc.bucket);
        Ok(mode)
    }
}

fn strip_trailing_slash(path: &str) -> String {
    if path.len() > 1 {
        path.trim_end_matches('/').to_string()
    } else {
        path.to_string()
    }
}
