//! How create-if-absent writes are done on a store: natively, or emulated
//! by a check first; probed once per root where the backend cannot say.

use super::{FileSystem, Location};
use crate::backend::ConditionalWrites;
use crate::error::Result;

/// What the name of a create-if-absent probe object starts with; it lives
/// for two writes and a delete, beside the file about to be created. A
/// process killed in between leaves one behind: a program that lists a
/// directory cairn writes to skips these names (cairn-checkpoint does).
///
/// ```
/// assert!(".cairn-probe-12-34".starts_with(cairn_fs::PROBE_PREFIX));
/// ```
pub const PROBE_PREFIX: &str = ".cairn-probe-";

impl FileSystem {
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
        let loc = self.locate(path).await?;
        self.conditional_mode(&loc).await
    }

    pub(crate) async fn conditional_mode(&self, loc: &Location) -> Result<ConditionalWrites> {
        let declared = self.inner.backend.conditional_writes();
        if declared != ConditionalWrites::Probe {
            return Ok(declared);
        }
        if let Some(mode) = self
            .inner
            .conditional
            .lock()
            .expect("probe cache poisoned")
            .get(&loc.root)
        {
            return Ok(*mode);
        }
        let mode = self.probe_conditional_writes(loc).await?;
        self.inner
            .conditional
            .lock()
            .expect("probe cache poisoned")
            .insert(loc.root.clone(), mode);
        Ok(mode)
    }

    /// Writes a probe object twice, the second time create-if-absent: a store
    /// that refuses the second write honours the condition. The probe goes
    /// beside `loc` (in its directory), where the caller is about to write:
    /// credentials scoped to a prefix may not write at the bucket's root.
    async fn probe_conditional_writes(&self, loc: &Location) -> Result<ConditionalWrites> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let name = format!("{PROBE_PREFIX}{}-{nanos}", std::process::id());
        let key = match loc.key.trim_end_matches('/').rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/{name}"),
            None => name,
        };
        let probe = Location {
            op: loc.op.clone(),
            root: loc.root.clone(),
            key,
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
                    bucket = %loc.root,
                    "the store ignores create-if-absent writes; cairn checks existence before \
                     exclusive creates instead, which is not race-free"
                );
                ConditionalWrites::Emulated
            }
            Err(e) => return Err(self.error(e, &probe)),
        };
        cleanup.map_err(|e| self.error(e, &probe))?;
        self.cache().invalidate(&loc.root);
        Ok(mode)
    }
}
