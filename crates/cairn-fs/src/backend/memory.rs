//! `memory://`: OpenDAL's in-memory service, one store shared by the process,
//! as fsspec's MemoryFileSystem shares one store across instances.

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use opendal::Operator;

use super::{Backend, BackendFactory, ConditionalWrites, IoPolicy, Layout};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{BackendOptions, Environment, unknown_key};

/// The factory of the in-memory filesystem.
///
/// ```
/// use cairn_fs::backend::{BackendFactory, memory::MemoryFactory};
/// assert_eq!(MemoryFactory::default().protocol(), "memory");
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryFactory;

impl BackendFactory for MemoryFactory {
    fn protocol(&self) -> &str {
        "memory"
    }
    fn schemes(&self) -> &[&str] {
        &["memory"]
    }
    fn layout(&self) -> Layout {
        Layout::SingleRoot
    }
    fn configure(&self, options: &BackendOptions, _env: &Environment) -> Result<Arc<dyn Backend>> {
        if let Some((key, _, source)) = options.iter().next() {
            return Err(unknown_key(&options.at(key, source).label(), &["(none)"]));
        }
        Ok(Arc::new(MemoryBackend))
    }
}

#[derive(Debug)]
struct MemoryBackend;

fn shared_store() -> Result<Operator> {
    static STORE: OnceLock<Operator> = OnceLock::new();
    if let Some(op) = STORE.get() {
        return Ok(op.clone());
    }
    let op = Operator::new(opendal::services::Memory::default()).map_err(|e| {
        Error::new(ErrorKind::Config, "cannot create the memory store").with_source(e)
    })?;
    Ok(STORE.get_or_init(|| op).clone())
}

impl MemoryBackend {
    fn build_operator(&self, _bucket: &str) -> Result<Operator> {
        shared_store()
    }
}

impl Backend for MemoryBackend {
    fn operator<'a>(&'a self, _bucket: &'a str) -> BoxFuture<'a, Result<Operator>> {
        Box::pin(std::future::ready(self.build_operator(_bucket)))
    }

    fn real_directories(&self) -> bool {
        true
    }
    fn io_policy(&self) -> IoPolicy {
        IoPolicy {
            max_attempts: 1,
            ..IoPolicy::default()
        }
    }
    fn conditional_writes(&self) -> ConditionalWrites {
        ConditionalWrites::Native
    }
}
