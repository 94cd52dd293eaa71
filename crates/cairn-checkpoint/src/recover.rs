//! Step 6 of the protocol, [`CheckpointDir::recover`]: roll back every unit
//! that was in flight when the last run stopped.

use cairn_fs::FileSystem;
use futures::TryStreamExt;

use crate::commit::CheckpointDir;
use crate::error::Result;
use crate::layout::UnitName;
use crate::load::CommittedState;

/// What recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Pending units without a committed twin: their data files were deleted.
    pub rolled_back: Vec<UnitName>,
    /// Data files deleted.
    pub data_files_deleted: usize,
    /// Pending records of committed units, dropped.
    pub released: Vec<UnitName>,
}

impl CheckpointDir {
    /// Settles the pending units of `state` (from [`CheckpointDir::load`]):
    /// a pending unit with a committed twin loses its pending record; one
    /// without is rolled back (its data files
    /// in `output_dir`, then its pending record). The cost follows the pending units, not the size of
    /// the output. Safe to repeat after a crash in the middle of it.
    pub async fn recover(
        &self,
        output_fs: &FileSystem,
        output_dir: &str,
        state: &CommittedState,
    ) -> Result<RecoveryReport> {
        let mut report = RecoveryReport::default();
        if state.complete {
            // Every unit was committed before an interrupted clean-up: a
            // pending record may have outlived its committed twin, and its
            // data must stay.
            return Ok(report);
        }
        for unit in &state.pending {
            if state.committed.binary_search(unit).is_err() {
                report.data_files_deleted += self.roll_back(output_fs, output_dir, unit).await?;
                report.rolled_back.push(unit.clone());
            } else {
                self.fs.rm_file(&self.file(&unit.pending_file())).await?;
                report.released.push(unit.clone());
            }
        }
        Ok(report)
    }

    /// Rolls back one uncommitted unit: deletes its data files in
    /// `output_dir` (those named `<unit>_...`, `<unit>-...` or `<unit>.<ext>`,
    /// and the hidden temporary files of a killed local write), found with
    /// one prefix listing, then its pending record. Returns how many data
    /// files were deleted. Data go first, so a crash in the middle leaves
    /// the pending record and the next roll-back finishes the job.
    pub(crate) async fn roll_back(
        &self,
        output_fs: &FileSystem,
        output_dir: &str,
        unit: &UnitName,
    ) -> Result<usize> {
        let output_dir = output_dir.trim_end_matches('/');
        // The delimiter rule keeps other units' files (`<unit>0...`) out.
        let owned = |f: &cairn_fs::FileInfo| {
            let base = f.name.rsplit('/').next().unwrap_or(&f.name);
            unit.owns_data_file(base)
                // Temporary files a killed local write left
                // (`.<unit>_<n>.<ext>.cairn-tmp-...`).
                || (base.contains(crate::layout::TEMP_MARKER)
                    && base
                        .strip_prefix('.')
                        .is_some_and(|b| unit.owns_data_file(b)))
        };
        // Streamed: only the unit's own files are kept.
        let mut paths: Vec<String> = Vec::new();
        for prefix in [unit.as_str().to_string(), format!(".{}", unit.as_str())] {
            let mut listed = output_fs
                .find_prefix_stream(&format!("{output_dir}/{prefix}"))
                .await?;
            while let Some(file) = listed.try_next().await? {
                if owned(&file) {
                    paths.push(file.name);
                }
            }
        }
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        // Listed as files: deleted without a stat each.
        output_fs.rm_files(&paths).await?;
        self.fs.rm_file(&self.file(&unit.pending_file())).await?;
        crate::metrics::metrics().unit_rolled_back();
        Ok(paths.len())
    }
}
