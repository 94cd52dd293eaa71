//! [`FileSystemBuilder`]: storage options, `FSSPEC_*` variables and the
//! environment resolved into a [`FileSystem`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{FileSystem, Inner, layers};
use crate::cache::{DirCache, ListingCacheConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::fsspec_env::FsspecEnv;
use crate::hooks::RequestHook;
use crate::options::{BackendOptions, Environment, Source, StorageOptions};
use crate::registry::Registry;
use crate::transfer_config::TransferConfig;
use crate::url::split_protocol;

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
    /// let client = cairn_fs::reqwest::Client::builder().build().unwrap();
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
        let transfer = TransferConfig::take_from(&mut options)?;
        let backend = factory.configure(&options, &env)?;
        let secrets = backend.secrets();
        let mut hooks = backend.request_hooks();
        hooks.extend(self.hooks);
        let uploads = Arc::new(crate::hooks::CompletedUploads::default());
        hooks.push(uploads.clone());
        let endpoint_label = metrics_endpoint_label(backend.endpoint(), factory.protocol());
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
                uploads,
                retries: layers::RetryCounter::new(&endpoint_label),
                endpoint_label,
                transfer,
            }),
            uncached: false,
        })
    }
}

/// A store's name in metrics: its endpoint URL without any user part, or
/// its protocol when it has no endpoint of its own (gcs, local disk).
fn metrics_endpoint_label(endpoint: Option<String>, protocol: &str) -> String {
    match endpoint {
        Some(url) if !url.is_empty() => match url.split_once("://") {
            Some((scheme, rest)) => {
                let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
                format!("{scheme}://{}", host.trim_end_matches('/'))
            }
            None => url,
        },
        _ => protocol.to_string(),
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
