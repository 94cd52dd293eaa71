//! Step 8 of the protocol, [`CheckpointDir::clean_up`]: after a successful
//! run, delete exactly what the protocol wrote.

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
        let entries = match self.fs.ls(&self.dir).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == cairn_fs::ErrorKind::NotFound => return Ok(report),
            Err(e) => return Err(e.into()),
        };
        // The run holds the lease and its workers are done: the listing is
        // complete without the marker, which is skipped below anyway.
        self.fs
            .pipe(&marker, bytes::Bytes::new(), cairn_fs::WriteMode::Overwrite)
            .await?;
        crate::failpoint::crash_point("clean-up-after-marker");
        let mut ours = Vec::new();
        for entry in entries {
            let base = entry
                .name
                .rsplit('/')
                .next()
                .unwrap_or(&entry.name)
                .to_string();
            match classify(&base) {
                CheckpointFile::Other(_) => report.kept_foreign.push(base),
                _ if entry.is_dir() => report.kept_foreign.push(base),
                CheckpointFile::Complete => {}
                _ => ours.push(entry.name),
            }
        }
        let paths: Vec<&str> = ours.iter().map(String::as_str).collect();
        if !paths.is_empty() {
            self.fs
                .rm_list(&paths, cairn_fs::TreeOptions::new())
                .await?;
        }
        report.deleted = paths.len();
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
}
