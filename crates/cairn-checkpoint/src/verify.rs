//! Whether every committed unit still has its data: one listing of the
//! output directory, each data file matched to its unit by the delimiter
//! rule. A resume refuses to go on (and to delete the checkpoint) while a
//! committed unit's data is gone, since its IDs would be skipped and its
//! rows lost; `cairn ckpt verify` reports the same.

use std::collections::{BTreeSet, HashSet};

use cairn_fs::FileSystem;
use futures::TryStreamExt;

use crate::commit::CheckpointDir;
use crate::error::{Error, Result};
use crate::layout::{DATA_DELIMITERS, OutputLayout, UnitName};
use crate::listing::missing_as_empty;
use crate::load::CommittedState;

/// What the output holds of the committed units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataCheck {
    /// Committed units with at least one data file.
    pub with_data: usize,
    /// Committed units that recorded writing no data (every row filtered out).
    pub without_output: usize,
    /// Committed units whose data files are gone.
    pub missing: Vec<UnitName>,
    /// Files of no committed unit (in-flight or rolled-back units' files,
    /// or anyone else's).
    pub orphans: Vec<String>,
}

/// The unit among `units` that owns the data file `base`: its name is the
/// file name up to a delimiter.
///
/// ```
/// use std::collections::HashSet;
/// let units: HashSet<&str> = ["run_1", "run_10"].into_iter().collect();
/// assert_eq!(cairn_checkpoint::internals::data_file_owner(&units, "run_1_0.parquet"), Some("run_1"));
/// assert_eq!(cairn_checkpoint::internals::data_file_owner(&units, "run_10-3.parquet"), Some("run_10"));
/// assert_eq!(cairn_checkpoint::internals::data_file_owner(&units, "run_100_0.parquet"), None);
/// ```
pub fn data_file_owner<'a>(units: &HashSet<&'a str>, base: &str) -> Option<&'a str> {
    base.char_indices()
        .rev()
        .filter(|(_, c)| DATA_DELIMITERS.contains(c))
        .find_map(|(at, _)| units.get(&base[..at]).copied())
}

/// The layout an output shows: partitioned when its directory holds
/// directories (a unit's files sit in them), else flat. For a checkpoint
/// whose job did not record its partition columns (Ray Data's writes).
/// Always asks the store, whatever the filesystem's listing cache holds.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use cairn_checkpoint::internals::{OutputLayout, found_layout};
/// let fs = cairn_fs::FileSystem::new("memory", &Default::default()).unwrap();
/// assert_eq!(found_layout(&fs, "/doc-out").await.unwrap(), OutputLayout::Flat);
/// fs.pipe("/doc-out/a_0.parquet", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
/// assert_eq!(found_layout(&fs, "/doc-out").await.unwrap(), OutputLayout::Flat);
/// fs.pipe("/doc-out/k=1/b_0.parquet", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
/// assert_eq!(found_layout(&fs, "/doc-out").await.unwrap(), OutputLayout::Partitioned);
/// # })
/// ```
pub async fn found_layout(output_fs: &FileSystem, output_dir: &str) -> Result<OutputLayout> {
    // A cached listing taken while the output was flat would hide the
    // partition directories a later write made.
    let mut entries = missing_as_empty(output_fs.uncached().ls_stream(output_dir).await)?;
    while let Some(entry) = entries.try_next().await? {
        if entry.is_dir() {
            return Ok(OutputLayout::Partitioned);
        }
    }
    Ok(OutputLayout::Flat)
}

impl CheckpointDir {
    /// Lists `output_dir` once (with its partition directories, at any
    /// depth, under a partitioned [`OutputLayout`]) and matches its files
    /// to the committed units of `state`.
    pub async fn check_data(
        &self,
        state: &CommittedState,
        output_fs: &FileSystem,
        output_dir: &str,
    ) -> Result<DataCheck> {
        let units: HashSet<&str> = state.committed.iter().map(UnitName::as_str).collect();
        let mut with_data: BTreeSet<&str> = BTreeSet::new();
        let mut check = DataCheck::default();
        // Streamed: a large output directory costs one listing page.
        let depth = match self.layout {
            OutputLayout::Flat => cairn_fs::FindOptions::new().max_depth(1),
            OutputLayout::Partitioned => cairn_fs::FindOptions::new(),
        };
        let mut files =
            missing_as_empty(output_fs.uncached().find_stream(output_dir, depth).await)?;
        while let Some(f) = files.try_next().await? {
            let base = f.name.rsplit('/').next().unwrap_or(&f.name);
            match data_file_owner(&units, base) {
                Some(unit) => {
                    with_data.insert(unit);
                }
                None => check.orphans.push(base.to_string()),
            }
        }
        check.orphans.sort();
        for unit in &state.committed {
            if with_data.contains(unit.as_str()) {
                check.with_data += 1;
            } else if state.units_without_output.binary_search(unit).is_ok() {
                check.without_output += 1;
            } else {
                check.missing.push(unit.clone());
            }
        }
        Ok(check)
    }

    /// [`CheckpointDir::check_data`], refusing with [`Error::DataMissing`]
    /// when a committed unit's data is gone.
    pub async fn require_data(
        &self,
        state: &CommittedState,
        output_fs: &FileSystem,
        output_dir: &str,
    ) -> Result<()> {
        let check = self.check_data(state, output_fs, output_dir).await?;
        if check.missing.is_empty() {
            return Ok(());
        }
        Err(Error::DataMissing {
            checkpoint: self.url()?,
            output: output_fs.url(&output_fs.strip(output_dir)?),
            units: check.missing.len(),
            examples: crate::layout::examples(&check.missing),
        })
    }
}

/// The first file a listing of `output_dir` finds, at any depth (`None`
/// for an empty or missing directory): whether an output already holds
/// files. Always asks the store, whatever the filesystem's listing cache
/// holds.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let fs = cairn_fs::FileSystem::new("memory", &Default::default()).unwrap();
/// assert_eq!(cairn_checkpoint::internals::first_file(&fs, "/doc-first").await.unwrap(), None);
/// fs.pipe("/doc-first/k=1/a.parquet", "x".into(), cairn_fs::WriteMode::Overwrite).await.unwrap();
/// assert!(cairn_checkpoint::internals::first_file(&fs, "/doc-first").await.unwrap().is_some());
/// # })
/// ```
pub async fn first_file(output_fs: &FileSystem, output_dir: &str) -> Result<Option<String>> {
    let mut files = missing_as_empty(
        output_fs
            .uncached()
            .find_stream(output_dir, cairn_fs::FindOptions::new())
            .await,
    )?;
    Ok(files.try_next().await?.map(|f| f.name))
}
