//! Step 6 of the protocol, [`CheckpointDir::recover`]: roll back every unit
//! that was in flight when the last run stopped.

use std::collections::{HashMap, HashSet};

use cairn_fs::{ErrorKind, FileSystem, FindOptions};
use futures::TryStreamExt;

use crate::commit::CheckpointDir;
use crate::error::{Error, Result};
use crate::idfile::recorded_partitions;
use crate::layout::{OutputLayout, TEMP_MARKER, UnitName};
use crate::listing::missing_as_empty;
use crate::load::CommittedState;
use crate::verify::data_file_owner;

/// What recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Pending units without a committed twin: their data files were deleted.
    pub rolled_back: Vec<UnitName>,
    /// Data files deleted.
    pub data_files_deleted: usize,
    /// Pending records of committed units, dropped.
    pub released: Vec<UnitName>,
    /// Pending units an output table records (their table transaction
    /// landed): committed in the checkpoint, not rolled back.
    pub committed_from_table: Vec<UnitName>,
}

/// Where a unit being rolled back may have data files.
enum Whereabouts {
    /// In these directories (the output, or the partition directories its
    /// pending record names): one prefix listing each.
    Dirs(Vec<String>),
    /// Anywhere under the output: found by one recursive listing shared by
    /// every such unit.
    Anywhere,
}

impl CheckpointDir {
    /// Settles the pending units of `state` (from [`CheckpointDir::load`]):
    /// a pending unit with a committed twin loses its pending record; one
    /// without is rolled back (its data files in `output_dir`, then its
    /// pending record). The cost follows the pending units, not the size
    /// of the output, except for pending records that name no partition
    /// directories under a partitioned layout ([`OutputLayout`]): those
    /// share one recursive listing of the output. Safe to repeat after a
    /// crash in the middle of it.
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
        let in_flight = self.release_committed_twins(state, &mut report).await?;
        let in_flight: Vec<&UnitName> = in_flight.iter().collect();
        let mut files = self
            .data_files_of(output_fs, output_dir, &in_flight)
            .await?;
        for unit in in_flight {
            let paths = files.remove(unit).unwrap_or_default();
            report.data_files_deleted += self.delete_unit(output_fs, unit, paths).await?;
            report.rolled_back.push(unit.clone());
        }
        Ok(report)
    }

    /// The first part of settling `state`'s pending units, whatever the
    /// output: drops the pending record of each unit that has a committed
    /// twin (noted in `report.released`) and returns the others, the units
    /// in flight when the last run stopped.
    pub(crate) async fn release_committed_twins(
        &self,
        state: &CommittedState,
        report: &mut RecoveryReport,
    ) -> Result<Vec<UnitName>> {
        let mut in_flight = Vec::new();
        for unit in &state.pending {
            if state.committed.binary_search(unit).is_err() {
                in_flight.push(unit.clone());
            } else {
                self.release_pending(unit).await?;
                report.released.push(unit.clone());
            }
        }
        Ok(in_flight)
    }

    /// Rolls back one uncommitted unit: deletes its data files in
    /// `output_dir` (those named `<unit>_...`, `<unit>-...` or `<unit>.<ext>`,
    /// and the hidden temporary files of a killed local write), then its
    /// pending record. Returns how many data files were deleted. Data go
    /// first, so a crash in the middle leaves the pending record and the
    /// next roll-back finishes the job.
    pub(crate) async fn roll_back(
        &self,
        output_fs: &FileSystem,
        output_dir: &str,
        unit: &UnitName,
    ) -> Result<usize> {
        let mut files = self.data_files_of(output_fs, output_dir, &[unit]).await?;
        let paths = files.remove(unit).unwrap_or_default();
        self.delete_unit(output_fs, unit, paths).await
    }

    /// Deletes `paths` (the unit's data files), then its pending record.
    async fn delete_unit(
        &self,
        output_fs: &FileSystem,
        unit: &UnitName,
        paths: Vec<String>,
    ) -> Result<usize> {
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        // Listed as files: deleted without a stat each.
        output_fs.rm_files(&paths).await?;
        self.fs.rm_file(&self.file(&unit.pending_file())).await?;
        crate::metrics::metrics().unit_rolled_back();
        Ok(paths.len())
    }

    /// The data files of each of `units` under `output_dir`.
    async fn data_files_of(
        &self,
        output_fs: &FileSystem,
        output_dir: &str,
        units: &[&UnitName],
    ) -> Result<HashMap<UnitName, Vec<String>>> {
        let output_dir = output_dir.trim_end_matches('/');
        // What is rolled back is decided by the store's listing, never a cache.
        let output_fs = &output_fs.uncached();
        let mut found: HashMap<UnitName, Vec<String>> = HashMap::new();
        let mut anywhere: HashSet<&str> = HashSet::new();
        for &unit in units {
            let dirs = match self.whereabouts(unit).await? {
                Whereabouts::Dirs(dirs) => dirs,
                Whereabouts::Anywhere => {
                    anywhere.insert(unit.as_str());
                    continue;
                }
            };
            let mut paths = Vec::new();
            for dir in dirs {
                let dir = if dir.is_empty() {
                    output_dir.to_string()
                } else {
                    format!("{output_dir}/{dir}")
                };
                paths.extend(unit_files_in(output_fs, &dir, unit).await?);
            }
            found.insert(unit.clone(), paths);
        }
        if !anywhere.is_empty() {
            // Streamed: only the units' own files are kept.
            let mut listed =
                missing_as_empty(output_fs.find_stream(output_dir, FindOptions::new()).await)?;
            while let Some(file) = listed.try_next().await? {
                let base = file.name.rsplit('/').next().unwrap_or(&file.name);
                if let Some(owner) = owner_of(&anywhere, base) {
                    found
                        .entry(UnitName::from_stem(owner))
                        .or_default()
                        .push(file.name);
                }
            }
        }
        Ok(found)
    }

    /// Where `unit`'s data files may be: the partition directories its
    /// pending record names; the output itself under a flat layout; else
    /// anywhere under the output. A record that cannot be read is taken
    /// to name nothing: the whole output is searched.
    async fn whereabouts(&self, unit: &UnitName) -> Result<Whereabouts> {
        let record = self.file(&unit.pending_file());
        let listed = match self.fs.cat(&record).await {
            Ok(bytes) => recorded_partitions(&record, bytes),
            // Gone since the listing: nothing says where its files are.
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(match listed {
            Ok(Some(dirs)) => Whereabouts::Dirs(dirs),
            Ok(None) if self.layout == OutputLayout::Flat => Whereabouts::Dirs(vec![String::new()]),
            Ok(None) => Whereabouts::Anywhere,
            Err(e @ Error::CorruptIdFile { .. }) => {
                tracing::warn!("{e}; looking for its unit's data files in the whole output");
                Whereabouts::Anywhere
            }
            Err(e) => return Err(e),
        })
    }
}

/// The files of `unit` directly in `dir`: two prefix listings (its data
/// files, and the hidden temporary files of a killed local write).
async fn unit_files_in(fs: &FileSystem, dir: &str, unit: &UnitName) -> Result<Vec<String>> {
    let names: HashSet<&str> = [unit.as_str()].into_iter().collect();
    let mut paths = Vec::new();
    for prefix in [unit.as_str().to_string(), format!(".{}", unit.as_str())] {
        let mut listed = fs.find_prefix_stream(&format!("{dir}/{prefix}")).await?;
        while let Some(file) = listed.try_next().await? {
            let base = file.name.rsplit('/').next().unwrap_or(&file.name);
            // The delimiter rule keeps other units' files (`<unit>0...`) out.
            if owner_of(&names, base).is_some() {
                paths.push(file.name);
            }
        }
    }
    Ok(paths)
}

/// The unit among `units` that owns the file named `base`: one of its data
/// files, or a temporary file a killed local write left of one
/// (`.<unit>_<n>.<ext>.cairn-tmp-...`).
fn owner_of<'a>(units: &HashSet<&'a str>, base: &str) -> Option<&'a str> {
    match base.strip_prefix('.') {
        Some(hidden) if base.contains(TEMP_MARKER) => data_file_owner(units, hidden),
        Some(_) => None,
        None => data_file_owner(units, base),
    }
}
