//! `file://` and plain paths: OpenDAL's `fs` service rooted at `/`.

use std::sync::Arc;

use opendal::Operator;
use serde_json::{Map, Value};

use super::{Backend, BackendFactory, ConditionalWrites, Layout};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{ConfigLine, Environment, Source, unknown_key, value_as_bool};

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
    fn configure(
        &self,
        options: &Map<String, Value>,
        _env: &Environment,
    ) -> Result<Arc<dyn Backend>> {
        for (key, value) in options {
            match key.as_str() {
                // fsspec's flag; parents are always created here, so it only has to be valid.
                "auto_mkdir" => {
                    value_as_bool(value, "file.auto_mkdir")?;
                }
                other => return Err(unknown_key(&format!("file.{other}"), VALID)),
            }
        }
        Ok(Arc::new(LocalBackend))
    }
}

/// The configured local backend.
#[derive(Debug)]
struct LocalBackend;

impl Backend for LocalBackend {
    fn operator(&self, _bucket: &str) -> Result<Operator> {
        Operator::new(opendal::services::Fs::default().root("/")).map_err(|e| {
            Error::new(ErrorKind::Config, "cannot open the local filesystem at /").with_source(e)
        })
    }
    fn real_directories(&self) -> bool {
        true
    }
    fn conditional_writes(&self) -> ConditionalWrites {
        ConditionalWrites::Native
    }
    fn describe(&self) -> Vec<ConfigLine> {
        vec![ConfigLine {
            name: "root".into(),
            value: "/".into(),
            source: Source::Default,
        }]
    }
}
