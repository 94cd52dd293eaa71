//! Step 7 of the protocol, `load_committed`: read every committed unit's IDs,
//! in parallel, into one [`IdSet`]; report the pending units recovery must
//! settle and any file that is not the protocol's.

use futures::{StreamExt, TryStreamExt, future, stream};

use cairn_fs::{ErrorKind, FileSystem};

use crate::error::{Error, Result};
use crate::idfile::decode_unit_ids;
use crate::idset::{IdSet, IdSetBuilder, StringMode};
use crate::layout::{CheckpointFile, UnitName, classify};

/// ID files read at once.
const PARALLEL_READS: usize = 8;
/// Decoded ID files waiting for the merger.
const MERGE_QUEUE: usize = 8;

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
    /// all of their rows), sorted. Unknown (empty) when the IDs were not
    /// read ([`list_committed`]).
    pub units_without_output: Vec<UnitName>,
    /// Bytes of the committed ID files, as listed.
    pub committed_bytes: u64,
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

/// The protocol's names in a checkpoint listing, sorted out as it streams.
#[derive(Default)]
struct Names {
    committed: Vec<UnitName>,
    committed_bytes: u64,
    pending: Vec<UnitName>,
    has_lease: bool,
    complete: bool,
    foreign: Vec<String>,
}

impl Names {
    /// Records one listed file; a committed ID file is returned (its path
    /// and unit) to be read.
    fn sort(&mut self, entry: cairn_fs::FileInfo) -> Option<(String, UnitName)> {
        let base = entry.name.rsplit('/').next().unwrap_or(&entry.name);
        match classify(base) {
            CheckpointFile::Committed(unit) => {
                self.committed.push(unit.clone());
                self.committed_bytes += entry.size;
                return Some((entry.name, unit));
            }
            CheckpointFile::Pending(unit) => self.pending.push(unit),
            CheckpointFile::Lease => self.has_lease = true,
            CheckpointFile::Complete => self.complete = true,
            CheckpointFile::Job | CheckpointFile::Temporary(_) => {}
            CheckpointFile::Other(name) => self.foreign.push(name),
        }
        None
    }
}

/// The ID column of a checkpoint: the one column of its first ID file
/// (committed or pending), or `None` for an empty checkpoint.
pub async fn infer_id_column(fs: &FileSystem, dir: &str) -> Result<Option<String>> {
    // The listing stops at the first ID file: one page, however many units.
    let mut listing = match fs.ls_stream(dir).await {
        Ok(listing) => listing,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let first = loop {
        match listing.try_next().await {
            Ok(Some(entry)) => {
                let base = entry.name.rsplit('/').next().unwrap_or(&entry.name);
                if !entry.is_dir()
                    && matches!(
                        classify(base),
                        CheckpointFile::Committed(_) | CheckpointFile::Pending(_)
                    )
                {
                    break entry;
                }
            }
            Ok(None) => return Ok(None),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        }
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
    load_state(fs, dir, id_column, Some(mode)).await
}

/// [`load_committed`] without reading a single ID file: the units, their
/// ID files' total size, the lease and marker, and an empty set. For a
/// caller that loads the IDs elsewhere (spread over a cluster).
pub async fn list_committed(fs: &FileSystem, dir: &str) -> Result<CommittedState> {
    load_state(fs, dir, "", None).await
}

/// The checkpoint's state, its committed IDs read with `mode` (or not
/// read at all with `None`).
async fn load_state(
    fs: &FileSystem,
    dir: &str,
    id_column: &str,
    mode: Option<StringMode>,
) -> Result<CommittedState> {
    let listing = match fs.ls_stream(dir).await {
        Ok(listing) => listing,
        Err(e) if e.kind() == ErrorKind::NotFound => stream::empty().boxed(),
        Err(e) => return Err(e.into()),
    };
    let dir_path = fs.strip(dir)?;
    let mut path_is_file = false;
    // The listing streams: each committed ID file is read as soon as it is
    // listed, while later pages are still coming; the rest is named in
    // `names`.
    let mut names = Names::default();
    let committed_paths = listing
        // A missing directory (NotFound, after nothing else) is a fresh
        // checkpoint.
        .filter(|entry| {
            let missing = matches!(entry, Err(e) if e.kind() == ErrorKind::NotFound);
            future::ready(!missing)
        })
        .map_err(Error::from)
        .try_filter_map(|entry| {
            let committed = if entry.is_dir() {
                None
            } else if entry.name == dir_path {
                path_is_file = true;
                None
            } else {
                names.sort(entry)
            };
            future::ready(Ok(committed.filter(|_| mode.is_some())))
        });
    let mode = mode.unwrap_or_default();
    let mut loaded = committed_paths
        .map_ok(|(path, unit)| async move {
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
        .try_buffer_unordered(PARALLEL_READS);
    // Each file's keys join the set's builder as soon as they are decoded,
    // on a thread of its own: a merge that seals a full buffer of loose
    // keys sorts for a second or two, while the reads go on. At most
    // PARALLEL_READS + MERGE_QUEUE files' builders exist besides it.
    let (to_merge, mut merging) = tokio::sync::mpsc::channel::<IdSetBuilder>(MERGE_QUEUE);
    let merger = tokio::task::spawn_blocking(move || -> Result<IdSetBuilder> {
        let mut all = IdSetBuilder::new(mode);
        while let Some(builder) = merging.blocking_recv() {
            all.merge(builder)?;
        }
        Ok(all)
    });
    let mut units_without_output = Vec::new();
    while let Some((builder, without_output)) = loaded.try_next().await? {
        units_without_output.extend(without_output);
        if to_merge.send(builder).await.is_err() {
            // The merger stopped at an error, which it returns below.
            break;
        }
    }
    drop((loaded, to_merge));
    let all = merger.await.expect("the merger does not panic")?;
    if path_is_file {
        return Err(Error::CheckpointPathIsFile {
            path: fs.url(&dir_path),
        });
    }
    let Names {
        mut committed,
        committed_bytes,
        mut pending,
        has_lease,
        complete,
        foreign,
    } = names;
    committed.sort();
    pending.sort();
    units_without_output.sort();
    Ok(CommittedState {
        ids: all.build(),
        committed,
        pending,
        has_lease,
        complete,
        foreign,
        units_without_output,
        committed_bytes,
    })
}
