//! `file://` and plain paths: OpenDAL's `fs` service rooted at `/`.

use std::sync::Arc;

use futures::future::BoxFuture;
use opendal::Operator;

use super::{Backend, BackendFactory, ConditionalWrites, IoPolicy, Layout};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{BackendOptions, ConfigLine, Environment, Source, unknown_key, value_as_bool};

const VALID: &[&str] = &["auto_mkdir"];

/// The factory of the local filesystem (`file://`, `local://`, bare paths).
///
/// ```
/// use cairn_fs::backend::{BackendFactory, local::LocalFactory};
/// assert_eq!(LocalFactory.protocol(), "file");
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFactory;

impl BackendFactory for LocalFactory {
    fn protocol(&self) -> &str {
        "file"
    }
    fn schemes(&self) -> &[&str] {
        &["file", "local"]
    }
    fn layout(&self) -> Layout {
        Layout::SingleRoot
    }
    fn configure(&self, options: &BackendOptions, _env: &Environment) -> Result<Arc<dyn Backend>> {
        for (key, value, source) in options.iter() {
            let label = options.at(key, source).label();
            match key {
                // fsspec's flag; parents are always created here, so it only has to be valid.
                "auto_mkdir" => {
                    value_as_bool(value, &label)?;
                }
                _ => return Err(unknown_key(&label, VALID)),
            }
        }
        Ok(Arc::new(LocalBackend))
    }
}

/// The configured local backend.
#[derive(Debug)]
struct LocalBackend;

impl LocalBackend {
    fn build_operator(&self, _bucket: &str) -> Result<Operator> {
        Operator::new(opendal::services::Fs::default().root("/")).map_err(|e| {
            Error::new(ErrorKind::Config, "cannot open the local filesystem at /").with_source(e)
        })
    }
}

impl Backend for LocalBackend {
    fn operator<'a>(&'a self, _bucket: &'a str) -> BoxFuture<'a, Result<Operator>> {
        Box::pin(std::future::ready(self.build_operator(_bucket)))
    }

    fn real_directories(&self) -> bool {
        true
    }
    fn local_root(&self) -> Option<&std::path::Path> {
        Some(std::path::Path::new("/"))
    }
    fn io_policy(&self) -> IoPolicy {
        // Local I/O errors are not transient; retrying only delays the answer.
        IoPolicy {
            max_attempts: 1,
            ..IoPolicy::default()
        }
    }
    fn conditional_writes(&self) -> ConditionalWrites {
        ConditionalWrites::Native
    }
    fn describe(&self) -> Vec<ConfigLine> {
        vec![ConfigLine {
            name: "root".into(),
            value: "/".into(),
            source: Source::Default,
            note: None,
            unset: false,
        }]
    }
}
