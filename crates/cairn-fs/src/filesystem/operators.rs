//! Operators: one per root (bucket, volume), built once by the backend,
//! wrapped in cairn's layers and HTTP transport, and cached.

use std::sync::Arc;

use opendal::Operator;

use super::{FileSystem, Location, layers};
use crate::error::Result;
use crate::hooks::HookedTransport;

impl FileSystem {
    /// Resolves a URL or stripped path to its operator and key.
    pub(crate) async fn locate(&self, path: &str) -> Result<Location> {
        let path = self.strip(path)?;
        let (root, key) = self.split_root(&path)?;
        let op = self.operator(&root).await?;
        Ok(Location {
            op,
            root,
            key,
            path,
        })
    }

    /// The operator of `root`, built on first use. Concurrent callers of one
    /// root wait for the one build; callers of other roots are not held up
    /// (a tclake volume's operator takes two catalog calls to build).
    async fn operator(&self, root: &str) -> Result<Operator> {
        let cell = {
            let mut cells = self
                .inner
                .operators
                .lock()
                .expect("operator cache poisoned");
            Arc::clone(cells.entry(root.to_string()).or_default())
        };
        cell.get_or_try_init(|| self.build_operator(root))
            .await
            .cloned()
    }

    async fn build_operator(&self, root: &str) -> Result<Operator> {
        let policy = self.inner.backend.io_policy();
        let op = self
            .inner
            .backend
            .operator(root)
            .await
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
                .unwrap_or_else(crate::http_client::default_client);
            let transport = HookedTransport::new(
                opendal_http_transport_reqwest::ReqwestTransport::new(client),
                self.inner.hooks.clone(),
                self.inner.endpoint_label.clone(),
            );
            let ctx = op
                .context()
                .with_http_transport(opendal::HttpTransporter::new(transport));
            op.with_context(ctx)
        };
        Ok(op)
    }
}
