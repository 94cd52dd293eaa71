//! Step 8 of the protocol, [`CheckpointDir::clean_up`]: after a successful
//! run, delete exactly what the protocol wrote.

use futures::TryStreamExt;

use crate::commit::CheckpointDir;
use crate::error::Result;
use crate::layout::{COMPLETE_FILE, CheckpointFile, classify};

/// What clean-up did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Protocol files deleted.
    pub deleted: usize,
    /// Files left because they are not the protocol's.
    pub kept_foreign: Vec<String>,
    /// Whether the directory itself was removed (it was left empty).
    pub removed_directory: bool,
}

impl CheckpointDir {
    /// Deletes the committed and pending ID files and the lease, then the
    /// directory if nothing else is in it. Anything else stays.
    ///
    /// Crash-safe: it first writes the completion marker, deletes the rest,
    /// and deletes the marker last. A run that finds the marker knows the
    /// job finished (every unit committed), runs no recovery (a pending
    /// record whose committed twin was already deleted must not cost its
    /// data), and finishes the clean-up.
    pub async fn clean_up(&self) -> Result<CleanupReport> {
        let mut report = CleanupReport::default();
        let marker = self.file(COMPLETE_FILE);
        let mut entries = self.fs.ls_stream(&self.dir).await?;
        // The first page tells whether there is anything to clean up; the
        // marker must not create a directory that is not there.
        let first = match entries.try_next().await {
            Ok(first) => first,
            Err(e) if e.kind() == cairn_fs::ErrorKind::NotFound => return Ok(report),
            Err(e) => return Err(e.into()),
        };
        // The run holds the lease and its workers are done: nothing of the
        // protocol's appears while the listing streams; the marker itself is
        // skipped below.
        self.fs
            .pipe(&marker, bytes::Bytes::new(), cairn_fs::WriteMode::Overwrite)
            .await?;
        crate::failpoint::crash_point("clean-up-after-marker");
        // Deleted a batch at a time as the listing streams; the lease last,
        // so the directory stays held until the rest is gone.
        let mut batch: Vec<String> = Vec::new();
        let mut lease = None;
        let mut next = first;
        while let Some(entry) = next {
            let base = entry.name.rsplit('/').next().unwrap_or(&entry.name);
            match classify(base) {
                CheckpointFile::Other(_) => report.kept_foreign.push(base.to_string()),
                _ if entry.is_dir() => report.kept_foreign.push(base.to_string()),
                CheckpointFile::Complete => {}
                CheckpointFile::Lease => lease = Some(entry.name),
                _ => batch.push(entry.name),
            }
            if batch.len() >= DELETE_BATCH {
                self.delete(&mut batch, &mut report).await?;
            }
            next = entries.try_next().await?;
        }
        batch.extend(lease);
        self.delete(&mut batch, &mut report).await?;
        crate::failpoint::crash_point("clean-up-before-marker-delete");
        self.fs.rm_file(&marker).await?;
        if report.kept_foreign.is_empty() {
            match self.fs.rmdir(&self.dir).await {
                Ok(()) => report.removed_directory = true,
                // Object stores have no empty directories to remove; a file
                // that appeared meanwhile keeps the directory.
                Err(e)
                    if matches!(
                        e.kind(),
                        cairn_fs::ErrorKind::NotFound | cairn_fs::ErrorKind::Other
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(report)
    }

    /// Deletes `batch` (protocol files) and empties it.
    async fn delete(&self, batch: &mut Vec<String>, report: &mut CleanupReport) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // Listed as files: deleted without a stat each.
        let paths: Vec<&str> = batch.iter().map(String::as_str).collect();
        self.fs.rm_files(&paths).await?;
        report.deleted += batch.len();
        batch.clear();
        Ok(())
    }
}

/// Protocol files deleted per request batch while the listing streams (an
/// S3 DeleteObjects takes 1,000 keys).
const DELETE_BATCH: usize = 1000;
