//! Step 7 of the protocol, `load_committed`: read every committed unit's IDs,
//! in parallel, into one [`IdSet`]; report the pending units recovery must
//! settle and any file that is not the protocol's.

use futures::{StreamExt, TryStreamExt, stream};

use cairn_fs::{ErrorKind, FileSystem};

use crate::error::{Error, Result};
use crate::idfile::decode_unit_ids;
use crate::idset::{IdSet, IdSetBuilder, StringMode};
use crate::layout::{CheckpointFile, UnitName, classify};

/// ID files read at once.
const PARALLEL_READS: usize = 8;

/// What a checkpoint directory holds.
#[derive(Debug)]
pub struct CommittedState {
    /// The committed IDs.
    pub ids: IdSet,
    /// Units with a committed ID file, sorted.
    pub committed: Vec<UnitName>,
    /// Units with a pending ID file, sorted (some may also be committed).
    pub pending: Vec<UnitName>,
    /// Whether a lease file is present.
    pub has_lease: bool,
    /// Whether the completion marker is present: a run finished and its
    /// clean-up was interrupted. Nothing is left to do but finish it.
    pub complete: bool,
    /// Names that are not the protocol's; never read, never deleted.
    pub foreign: Vec<String>,
    /// Committed units that recorded writing no data file (a filter dropped
    /// all of their rows), sorted.
    pub units_without_output: Vec<UnitName>,
}

impl CommittedState {
    /// Pending units without a committed twin: the units a run left in
    /// flight, which recovery rolls back.
    pub fn in_flight(&self) -> impl Iterator<Item = &UnitName> {
        self.pending
            .iter()
            .filter(|unit| self.committed.binary_search(unit).is_err())
    }
}

/// The ID column of a checkpoint: the one column of its first ID file
/// (committed or pending), or `None` for an empty checkpoint.
pub async fn infer_id_column(fs: &FileSystem, dir: &str) -> Result<Option<String>> {
    let entries = match fs.ls(dir).await {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Some(first) = entries.iter().find(|e| {
        let base = e.name.rsplit('/').next().unwrap_or(&e.name);
        !e.is_dir()
            && matches!(
                classify(base),
                CheckpointFile::Committed(_) | CheckpointFile::Pending(_)
            )
    }) else {
        return Ok(None);
    };
    let bytes = fs.cat(&first.name).await?;
    let url = fs.url(&first.name);
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| Error::CorruptIdFile {
            file: url.clone(),
            reason: format!("not a readable Parquet file ({e})"),
        })?;
    let fields = builder.schema().fields();
    if fields.len() != 1 {
        return Err(Error::WrongIdColumn {
            file: url,
            expected: "(one column)".into(),
            found: fields.iter().map(|f| f.name().clone()).collect(),
        });
    }
    Ok(Some(fields[0].name().clone()))
}

/// Reads the checkpoint directory `dir` on `fs` (use a checkpoint filesystem:
/// no listing cache). A missing directory is a fresh checkpoint. A path that
/// is a file, a damaged ID file or an ID column of the wrong name or type is
/// an error naming the file; nothing is deleted.
pub async fn load_committed(
    fs: &FileSystem,
    dir: &str,
    id_column: &str,
    mode: StringMode,
) -> Result<CommittedState> {
    let entries = match fs.ls(dir).await {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let dir_path = fs.strip(dir)?;
    if entries.len() == 1 && !entries[0].is_dir() && entries[0].name == dir_path {
        return Err(Error::CheckpointPathIsFile {
            path: fs.url(&dir_path),
        });
    }
    let mut state = CommittedState {
        ids: IdSet::Empty,
        committed: Vec::new(),
        pending: Vec::new(),
        has_lease: false,
        complete: false,
        foreign: Vec::new(),
        units_without_output: Vec::new(),
    };
    let mut committed_paths = Vec::new();
    for entry in entries.iter().filter(|e| !e.is_dir()) {
        let base = entry.name.rsplit('/').next().unwrap_or(&entry.name);
        match classify(base) {
            CheckpointFile::Committed(unit) => {
                committed_paths.push((entry.name.clone(), unit.clone()));
                state.committed.push(unit);
            }
            CheckpointFile::Pending(unit) => state.pending.push(unit),
            CheckpointFile::Lease => state.has_lease = true,
            CheckpointFile::Complete => state.complete = true,
            CheckpointFile::Job => {}
            CheckpointFile::Temporary(_) => {}
            CheckpointFile::Other(name) => state.foreign.push(name),
        }
    }
    state.committed.sort();
    state.pending.sort();

    let mut loaded = stream::iter(committed_paths)
        .map(|(path, unit)| async move {
            let bytes = fs.cat(&path).await?;
            let url = fs.url(&path);
            let column = id_column.to_string();
            tokio::task::spawn_blocking(move || -> Result<(IdSetBuilder, Option<UnitName>)> {
                let mut builder = IdSetBuilder::new(mode);
                let ids = decode_unit_ids(&url, bytes, &column, true)?;
                let added = match &ids.runs {
                    Some(runs) => builder.push_runs(runs),
                    None => ids.arrays.iter().try_for_each(|a| builder.push_array(a)),
                };
                added.map_err(|e| Error::CorruptIdFile {
                    file: url.clone(),
                    reason: e.to_string(),
                })?;
                Ok((builder, (ids.data_files == Some(0)).then_some(unit)))
            })
            .await
            .expect("ID decoding catches its panics")
        })
        .buffer_unordered(PARALLEL_READS);
    // Each file's keys join the set's builder as soon as they are decoded,
    // so at most PARALLEL_READS files' builders exist besides it.
    let mut all = IdSetBuilder::new(mode);
    while let Some((builder, without_output)) = loaded.try_next().await? {
        all.merge(builder)?;
        state.units_without_output.extend(without_output);
    }
    state.units_without_output.sort();
    state.ids = all.build();
    Ok(state)
}
