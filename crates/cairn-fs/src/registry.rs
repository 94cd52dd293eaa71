//! The table from URL scheme to backend factory.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use crate::backend::BackendFactory;
use crate::backend::{
    cos::CosFactory, gcs::GcsFactory, local::LocalFactory, memory::MemoryFactory, oss::OssFactory,
    s3::S3Factory,
};
use crate::error::{Error, ErrorKind, Result};

/// Maps schemes (and their aliases) to backend factories.
///
/// ```
/// let registry = cairn_fs::Registry::with_builtins();
/// assert_eq!(registry.resolve("s3a").unwrap().protocol(), "s3");
/// let err = registry.resolve("ftp").err().unwrap();
/// assert!(err.to_string().contains("memory"));
/// ```
#[derive(Default)]
pub struct Registry {
    factories: RwLock<BTreeMap<String, Arc<dyn BackendFactory>>>,
}

impl Registry {
    /// An empty registry.
    ///
    /// ```
    /// assert!(cairn_fs::Registry::empty().schemes().is_empty());
    /// ```
    pub fn empty() -> Self {
        Self::default()
    }

    /// A registry holding the built-in backends: `file` (`local`), `memory`, `s3` (`s3a`), `cos`, `oss`, `gcs` (`gs`).
    ///
    /// ```
    /// assert!(cairn_fs::Registry::with_builtins().schemes().contains(&"file".to_string()));
    /// ```
    pub fn with_builtins() -> Self {
        let registry = Self::empty();
        registry.register(Arc::new(LocalFactory));
        registry.register(Arc::new(MemoryFactory));
        registry.register(Arc::new(S3Factory));
        registry.register(Arc::new(CosFactory));
        registry.register(Arc::new(OssFactory));
        registry.register(Arc::new(GcsFactory));
        #[cfg(feature = "tclake")]
        registry.register(Arc::new(crate::backend::tclake::TclakeFactory));
        #[cfg(not(feature = "tclake"))]
        registry.register(Arc::new(crate::backend::tclake::TclakeUnavailable));
        registry
    }

    /// Registers `factory` under each of its schemes, replacing earlier ones.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let registry = cairn_fs::Registry::empty();
    /// registry.register(Arc::new(cairn_fs::backend::memory::MemoryFactory));
    /// assert_eq!(registry.schemes(), vec!["memory".to_string()]);
    /// ```
    pub fn register(&self, factory: Arc<dyn BackendFactory>) {
        let mut table = self.factories.write().expect("registry lock poisoned");
        for scheme in factory.schemes() {
            table.insert(scheme.to_ascii_lowercase(), factory.clone());
        }
    }

    /// The factory of `scheme`, or an UnknownScheme error listing the known ones.
    ///
    /// ```
    /// assert!(cairn_fs::Registry::with_builtins().resolve("memory").is_ok());
    /// ```
    pub fn resolve(&self, scheme: &str) -> Result<Arc<dyn BackendFactory>> {
        let table = self.factories.read().expect("registry lock poisoned");
        table
            .get(&scheme.to_ascii_lowercase())
            .cloned()
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::UnknownScheme,
                    format!(
                        "no backend is registered for scheme {scheme:?}; known schemes: {}. \
                         Register your own with cairn_fs::register",
                        table.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                )
            })
    }

    /// Every registered scheme, sorted.
    ///
    /// ```
    /// let schemes = cairn_fs::Registry::with_builtins().schemes();
    /// assert!(schemes.contains(&"s3".to_string()) && schemes.contains(&"s3a".to_string()));
    /// ```
    pub fn schemes(&self) -> Vec<String> {
        let table = self.factories.read().expect("registry lock poisoned");
        table.keys().cloned().collect()
    }

    /// The process-wide registry that URL-based constructors use.
    ///
    /// ```
    /// assert!(cairn_fs::Registry::global().resolve("file").is_ok());
    /// ```
    pub fn global() -> &'static Registry {
        static GLOBAL: OnceLock<Registry> = OnceLock::new();
        GLOBAL.get_or_init(Registry::with_builtins)
    }
}

/// Registers a backend factory in the global registry, the same call the
/// built-ins use.
///
/// ```
/// use std::sync::Arc;
/// cairn_fs::register(Arc::new(cairn_fs::backend::memory::MemoryFactory));
/// assert!(cairn_fs::Registry::global().resolve("memory").is_ok());
/// ```
pub fn register(factory: Arc<dyn BackendFactory>) {
    Registry::global().register(factory);
}
