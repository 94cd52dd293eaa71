//! Step 8 of the protocol, [`CheckpointDir::clean_up`]: after a successful
//! run, settle what is still pending, then delete exactly what the protocol
//! wrote, behind a completion marker that names the finished job.

use std::collections::HashSet;

use cairn_fs::{ErrorKind, FileSystem, WriteMode};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use crate::commit::CheckpointDir;
use crate::error::{Error, Result};
use crate::job::JobRecord;
use crate::layout::{COMPLETE_FILE, CheckpointFile, UnitName, classify, lease_generation};

/// What clean-up did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Protocol files deleted.
    pub deleted: usize,
    /// Files left because they are not the protocol's.
    pub kept_foreign: Vec<String>,
    /// Whether the directory is gone: removed once empty, or, on a store
    /// without directories, no file left under it.
    pub removed_directory: bool,
    /// Pending units without a committed twin found at clean-up (late
    /// writes of a run that lost its lease): their data files were deleted
    /// before their pending records.
    pub rolled_back: Vec<UnitName>,
    /// Data files those roll-backs deleted.
    pub data_files_deleted: usize,
    /// Whether the completion marker is still there: a clean-up that
    /// stopped before its last step, which a driver takes when it exits.
    pub marker_left: bool,
}

/// The completion marker's content: which job finished, and whether its
/// clean-up settled every pending record before writing the marker (cairn
/// before this record wrote an empty marker, and settled nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CompletionMarker {
    /// The finished job's record (`None`: the checkpoint had none).
    #[serde(default)]
    pub job: Option<JobRecord>,
    /// Every pending record was settled before the marker was written, so a
    /// pending record found later is a late write, never finished data.
    #[serde(default)]
    pub settled: bool,
}

/// Where pending units found at clean-up are rolled back: the output of the
/// job (its data files are there), if the caller knows it.
type Output<'a> = Option<(&'a FileSystem, &'a str)>;

impl CheckpointDir {
    /// Deletes the committed and pending ID files, the job record and the
    /// lease, then the directory if nothing else is in it. Anything else
    /// stays.
    ///
    /// `output` is the job's output (filesystem and directory). A pending
    /// record without a committed twin found here was written late by a run
    /// that lost its lease (its requests landed after this run recovered):
    /// its data files in `output` are deleted before it. Without `output`,
    /// such a unit stops the clean-up with an error naming it, and nothing
    /// of it is deleted.
    ///
    /// Crash-safe: it settles the pending records first, then writes the
    /// completion marker (naming the job), deletes the rest, and deletes
    /// the marker last. A run that finds the marker knows the job finished
    /// (every unit committed), runs no recovery, and finishes the clean-up.
    pub async fn clean_up(&self, output: Output<'_>) -> Result<CleanupReport> {
        let mut report = self.clean_up_to_marker(output).await?;
        if report.marker_left {
            report.removed_directory = self.remove_completion_marker().await?;
            report.marker_left = false;
        }
        Ok(report)
    }

    /// [`CheckpointDir::clean_up`] that stops before its last step: the
    /// completion marker stays (`marker_left` in the report), the only
    /// file of the protocol's left, saying the job finished, until
    /// [`CheckpointDir::remove_completion_marker`]. A driver that removes
    /// it only when it exits with success leaves, when killed after its
    /// clean-up, a checkpoint that still says the job finished, so a run
    /// again writes nothing.
    pub async fn clean_up_to_marker(&self, output: Output<'_>) -> Result<CleanupReport> {
        self.clean_up_keeping(output, None).await
    }

    /// The clean-up's last step: deletes the completion marker, then the
    /// directory if nothing else is in it. Whether the directory is gone.
    pub async fn remove_completion_marker(&self) -> Result<bool> {
        match self.fs.rm_file(&self.file(COMPLETE_FILE)).await {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        // Files not the protocol's keep the directory.
        Ok(self.fs.remove_dir_if_empty(&self.dir).await?)
    }

    /// Removes what a run that made this checkpoint and wrote no unit left
    /// in it: the job record and its own lease (`lease`, stopped), then the
    /// directory if nothing else is in it. Writes no completion marker, so
    /// a removal cut short leaves a checkpoint that reads as new, never as
    /// a finished job.
    pub(crate) async fn remove_unused(&self, lease: crate::lease::Lease) -> Result<()> {
        let own = self.file(&crate::layout::lease_file(lease.record().generation));
        for file in [self.file(crate::layout::JOB_FILE), own] {
            match self.fs.rm_file(&file).await {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        // No marker is there: this removes the directory once empty.
        self.remove_completion_marker().await.map(|_| ())
    }

    /// [`CheckpointDir::clean_up`] that leaves the lease of generation
    /// `keep` (and so the directory) in place: a new run clearing a finished
    /// job's checkpoint before it starts on the same path.
    pub(crate) async fn clean_up_keeping(
        &self,
        output: Output<'_>,
        keep: Option<u64>,
    ) -> Result<CleanupReport> {
        let mut report = CleanupReport::default();
        let Some(seen) = self.survey().await? else {
            return Ok(report);
        };
        let marker = match seen.marker {
            true => Some(self.read_marker().await?.unwrap_or_default()),
            false => None,
        };
        // Settle: with the marker of older cairn, a pending record may have
        // outlived its committed twin (already deleted) and its data is
        // finished output; otherwise a pending unit without a twin never
        // committed and its data must go.
        let unsettled_marker = marker.as_ref().is_some_and(|m| !m.settled);
        for unit in &seen.pending {
            if seen.committed.contains(unit.as_str()) || unsettled_marker {
                self.fs.rm_file(&self.file(&unit.pending_file())).await?;
            } else {
                self.roll_back_late(output, unit, &mut report).await?;
            }
        }
        if marker.is_none() {
            let marker = CompletionMarker {
                job: self.read_job_record().await?,
                settled: true,
            };
            let body = serde_json::to_vec(&marker).expect("the marker serializes");
            self.fs
                .pipe(&self.file(COMPLETE_FILE), body.into(), WriteMode::Overwrite)
                .await?;
        }
        crate::failpoint::crash_point("clean-up-after-marker");
        self.delete_protocol_files(output, keep, &seen.committed, &mut report)
            .await?;
        crate::failpoint::crash_point("clean-up-before-marker-delete");
        if keep.is_some() {
            // A new run clearing a finished job's checkpoint: its lease
            // keeps the directory.
            self.fs.rm_file(&self.file(COMPLETE_FILE)).await?;
        } else {
            report.marker_left = true;
        }
        Ok(report)
    }

    /// One listing of the directory: the committed units, the pending ones,
    /// whether the marker is there. `None` when the directory is not.
    async fn survey(&self) -> Result<Option<Survey>> {
        let mut entries = self.fs.ls_stream(&self.dir).await?;
        let mut seen = Survey::default();
        loop {
            let entry = match entries.try_next().await {
                Ok(Some(entry)) => entry,
                Ok(None) => break,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            seen.entries += 1;
            let base = entry.name.rsplit('/').next().unwrap_or(&entry.name);
            match classify(base) {
                CheckpointFile::Committed(unit) => {
                    seen.committed.insert(unit.as_str().to_string());
                }
                CheckpointFile::Pending(unit) => seen.pending.push(unit),
                CheckpointFile::Complete => seen.marker = true,
                _ => {}
            }
        }
        // An empty listing: nothing to clean up, and the marker must not
        // create a directory that is not there.
        Ok((seen.entries > 0).then_some(seen))
    }

    /// Deletes the protocol's files a batch at a time as the listing
    /// streams; the lease last, so the directory stays held until the rest
    /// is gone. A pending record that appeared after the settling (a late
    /// write) is rolled back unless its unit committed.
    async fn delete_protocol_files(
        &self,
        output: Output<'_>,
        keep: Option<u64>,
        committed: &HashSet<String>,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let mut entries = self.fs.ls_stream(&self.dir).await?;
        let mut batch: Vec<String> = Vec::new();
        let mut late: Vec<UnitName> = Vec::new();
        let mut leases = Vec::new();
        while let Some(entry) = entries.try_next().await? {
            let base = entry.name.rsplit('/').next().unwrap_or(&entry.name);
            match classify(base) {
                CheckpointFile::Other(_) => report.kept_foreign.push(base.to_string()),
                _ if entry.is_dir() => report.kept_foreign.push(base.to_string()),
                CheckpointFile::Complete => {}
                CheckpointFile::Lease => {
                    if keep.is_none() || lease_generation(base) != keep {
                        leases.push(entry.name);
                    }
                }
                CheckpointFile::Pending(unit) if !committed.contains(unit.as_str()) => {
                    late.push(unit)
                }
                _ => batch.push(entry.name),
            }
            if batch.len() >= DELETE_BATCH {
                self.delete(&mut batch, report).await?;
            }
        }
        for unit in &late {
            self.roll_back_late(output, unit, report).await?;
        }
        batch.extend(leases);
        self.delete(&mut batch, report).await
    }

    /// Rolls back a pending unit without a committed twin found at
    /// clean-up, in `output`; refused (naming the unit) without one.
    async fn roll_back_late(
        &self,
        output: Output<'_>,
        unit: &UnitName,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let Some((fs, dir)) = output else {
            return Err(Error::UnsettledUnit {
                checkpoint: self.url()?,
                unit: unit.to_string(),
            });
        };
        tracing::warn!(
            checkpoint = %self.dir,
            "unit {unit} was written after this run recovered (a run that lost its lease): rolling back its data"
        );
        report.data_files_deleted += self.roll_back(fs, dir, unit).await?;
        report.rolled_back.push(unit.clone());
        Ok(())
    }

    /// The completion marker, if there is one (an empty marker, from older
    /// cairn, reads as naming no job and not settled).
    pub(crate) async fn read_marker(&self) -> Result<Option<CompletionMarker>> {
        let url = self.file(COMPLETE_FILE);
        match self.fs.cat(&url).await {
            Ok(bytes) if bytes.is_empty() => Ok(Some(CompletionMarker::default())),
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Error::CorruptIdFile {
                    file: url.clone(),
                    reason: format!(
                        "the completion marker is not valid JSON ({e}); if the job that wrote this checkpoint finished, delete the checkpoint"
                    ),
                }
            }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
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

/// What one listing of a checkpoint directory found, for clean-up.
#[derive(Default)]
struct Survey {
    entries: usize,
    committed: HashSet<String>,
    pending: Vec<UnitName>,
    marker: bool,
}

/// Protocol files deleted per request batch while the listing streams (an
/// S3 DeleteObjects takes 1,000 keys).
const DELETE_BATCH: usize = 1000;
