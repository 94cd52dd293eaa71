//! Parquet input: footers read in parallel, one schema for all files, row
//! groups as pieces, and the row groups a resume can skip unread (all
//! `row_hash` IDs committed, or an integer ID range from the statistics
//! entirely committed); ranged reads through the cairn filesystem.

use std::ops::Range;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use cairn_checkpoint::IdSet;
use cairn_fs::{FileSystem, StorageOptions};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt, stream};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use super::listing::list_inputs;
use super::{
    FileFormat, InputFile, PARALLEL_FOOTERS, Piece, PlannedSource, Skip, with_extra_fields,
};
use crate::error::{Error, Result};
use crate::ops::describe_fields;
use crate::row_hash::{ROW_HASH_COLUMN, row_hash_column, row_hash_seed};

pub(super) async fn plan_parquet(
    urls: &[String],
    options: &StorageOptions,
    include_row_hash: bool,
    include_paths: bool,
    skip: Option<Skip<'_>>,
) -> Result<PlannedSource> {
    let listed = list_inputs(urls, options, &["parquet"]).await?;
    let inputs = listed.iter().map(|l| l.fingerprint.clone()).collect();
    // A resume may find most files committed: it keeps only what their
    // footer reads fetch anyway, so the budget is not spent on them.
    let resumed = skip.as_ref().is_some_and(|skip| !skip.ids.is_empty());
    let held = HeldBytes::new(if resumed {
        FOOTER_READ
    } else {
        HELD_FILE_BYTES
    });
    let files: Vec<Arc<InputFile>> = stream::iter(listed)
        .map(|l| {
            let held = &held;
            async move { open_parquet(l.fs, l.path, l.size, held).await }
        })
        .buffered(PARALLEL_FOOTERS)
        .try_collect()
        .await?;
    let file_schema = same_schema(&files)?;
    let schema = with_extra_fields(&file_schema, include_row_hash, include_paths, urls)?;
    let by_hash = include_row_hash
        && skip
            .as_ref()
            .is_some_and(|s| s.id_column == ROW_HASH_COLUMN);
    let skip_by_hash = if by_hash { skip.as_ref() } else { None };
    let mut planned = PlannedSource {
        schema,
        pieces: Vec::new(),
        total_rows: Some(0),
        rows_skipped_unread: 0,
        row_groups_skipped: 0,
        files: files.len(),
        files_skipped: 0,
        include_row_hash,
        include_paths,
        json_schema: None,
        id_range: None,
        inputs,
    };
    // The ID column's range over all row groups, known only while every row
    // group has exact statistics.
    let mut id_range: Option<(i64, i64)> = None;
    let mut id_range_known = skip.is_some();
    for file in files {
        let FileFormat::Parquet(meta) = &file.format else {
            unreachable!("opened as Parquet")
        };
        let seed = row_hash_seed(&file.path);
        let mut first_row = 0u64;
        let mut kept_any = false;
        let id_leaf = skip
            .as_ref()
            .and_then(|s| integer_id_leaf(meta, s.id_column));
        for (index, group) in meta.metadata().row_groups().iter().enumerate() {
            let rows = group.num_rows() as u64;
            if id_range_known {
                match id_leaf.and_then(|leaf| exact_int_range(group.column(leaf).statistics())) {
                    None => id_range_known = false,
                    Some((a, b)) => {
                        id_range = Some(id_range.map_or((a, b), |(lo, hi)| (lo.min(a), hi.max(b))))
                    }
                }
            }
            let committed = match (skip_by_hash, &skip, id_leaf) {
                (Some(skip), _, _) if rows > 0 => {
                    let hashes = row_hash_column(seed, first_row, rows as usize);
                    let mask = skip.ids.contains_array(&hashes)?;
                    mask.true_count() as u64 == rows
                }
                (None, Some(skip), Some(leaf)) if rows > 0 => {
                    range_committed(group.column(leaf).statistics(), rows, skip.ids)
                }
                _ => false,
            };
            if committed {
                planned.rows_skipped_unread += rows;
                planned.row_groups_skipped += 1;
            } else {
                kept_any = true;
                planned.pieces.push(Piece::RowGroup {
                    file: file.clone(),
                    row_group: index,
                    first_row,
                });
            }
            first_row += rows;
        }
        if !kept_any && first_row > 0 {
            planned.files_skipped += 1;
        }
        *planned.total_rows.as_mut().expect("set above") += first_row;
    }
    planned.id_range = id_range.filter(|_| id_range_known);
    Ok(planned)
}

/// The leaf index of the ID column when it is a signed integer column (whose
/// Parquet statistics order like its values).
fn integer_id_leaf(meta: &ArrowReaderMetadata, id_column: &str) -> Option<usize> {
    let field = meta.schema().field_with_name(id_column).ok()?;
    if !matches!(
        field.data_type(),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
    ) {
        return None;
    }
    meta.metadata()
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.path().string() == id_column)
}

/// The exact `(min, max)` of a signed integer column chunk with no nulls,
/// from its statistics.
fn exact_int_range(
    statistics: Option<&parquet::file::statistics::Statistics>,
) -> Option<(i64, i64)> {
    use parquet::file::statistics::Statistics;
    let stats = statistics?;
    if stats.null_count_opt() != Some(0) || !stats.min_is_exact() || !stats.max_is_exact() {
        return None;
    }
    let (min, max) = match stats {
        Statistics::Int32(v) => (i64::from(*v.min_opt()?), i64::from(*v.max_opt()?)),
        Statistics::Int64(v) => (*v.min_opt()?, *v.max_opt()?),
        _ => return None,
    };
    (min <= max).then_some((min, max))
}

/// Whether a row group's integer IDs are all committed, known from its
/// statistics alone: every integer from its min to its max is committed
/// (then every value in the group is, whatever the values are). Checked
/// only when the range is at most 4× the row count.
fn range_committed(
    statistics: Option<&parquet::file::statistics::Statistics>,
    rows: u64,
    ids: &IdSet,
) -> bool {
    let Some((min, max)) = exact_int_range(statistics) else {
        return false;
    };
    let span = (max as i128 - min as i128 + 1) as u128;
    span <= 4 * u128::from(rows) && ids.contains_int_range(min, max)
}

/// What a file that Parquet cannot read looks like, from its first bytes.
fn sniff(head: &[u8]) -> &'static str {
    let text = head.trim_ascii_start();
    if head.starts_with(b"PAR1") {
        "it starts as Parquet does, so it is damaged or was cut short: restore it or move it out of the input"
    } else if text.starts_with(b"{") {
        "it looks like JSON lines: read the input with `--format json`"
    } else {
        "it is not Parquet: move it out of the input, or name only the Parquet files"
    }
}

/// pyarrow's and arrow-rs's first read of a Parquet file: its last 64 KiB,
/// where the footer is.
const FOOTER_READ: u64 = 64 * 1024;

/// Input files no larger than this are fetched whole by the planning (one
/// GET, the footer read from its bytes) and kept while
/// [`HeldBytes::BUDGET`] lasts, on a first run (a resume keeps only files
/// of at most [`FOOTER_READ`], which the footer read fetches anyway): their unit
/// then reads its rows with no request of its own, so a unit's input costs
/// one GET, the store's cheapest, where a footer read and a data read are
/// two. The bytes are the ones the unit would fetch anyway, but for a
/// file the planning then finds committed (a resume), up to the budget.
const HELD_FILE_BYTES: u64 = 1 << 20;

/// The small input files a planning keeps whole (at most
/// [`HELD_FILE_BYTES`] each). Bounded by [`HeldBytes::BUDGET`] for the
/// whole job; files past it have their footer read, then are read again
/// as any other.
pub(super) struct HeldBytes {
    left: std::sync::atomic::AtomicU64,
    /// The largest file kept.
    file_max: u64,
}

impl HeldBytes {
    /// Bytes of small files a job keeps in memory at most.
    const BUDGET: u64 = 64 << 20;

    /// Keeps files of at most `file_max` bytes, within the budget.
    fn new(file_max: u64) -> Self {
        Self {
            left: std::sync::atomic::AtomicU64::new(Self::BUDGET),
            file_max,
        }
    }

    /// Whether `size` more bytes fit, taken from the budget when they do.
    fn take(&self, size: u64) -> bool {
        use std::sync::atomic::Ordering;
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(size)
            })
            .is_ok()
    }
}

async fn open_parquet(
    fs: FileSystem,
    path: String,
    size: u64,
    held: &HeldBytes,
) -> Result<Arc<InputFile>> {
    let url = fs.url(&path);
    let mut reader = FileReader {
        fs: fs.clone(),
        path: path.clone(),
        size,
        metadata: None,
        whole: None,
    };
    // A small file is fetched whole in one GET (its footer read from
    // those bytes) and kept for its unit.
    let keep = size > 0 && size <= held.file_max && held.take(size);
    if keep {
        reader.whole = Some(reader.get_bytes(0..size).await.map_err(|e| Error::Input {
            file: url.clone(),
            reason: format!("could not be read ({e})"),
        })?);
    }
    let loaded = match ParquetMetaDataReader::new()
        .with_prefetch_hint(Some(FOOTER_READ as usize))
        .load_and_finish(&mut reader, size)
        .await
    {
        Ok(metadata) => ArrowReaderMetadata::try_new(Arc::new(metadata), ArrowReaderOptions::new()),
        Err(e) => Err(e),
    };
    let meta = match loaded {
        Ok(meta) => meta,
        Err(e) => {
            let head = fs
                .cat_range_with_size(&path, 0, Some(16), size)
                .await
                .unwrap_or_default();
            return Err(Error::Input {
                file: url.clone(),
                reason: format!("not a readable Parquet file ({e}); {}", sniff(&head)),
            });
        }
    };
    Ok(Arc::new(InputFile {
        fs,
        url,
        path,
        size,
        format: FileFormat::Parquet(meta),
        held: reader.whole,
    }))
}

/// The schema all files share (same column names and types, in order; a
/// column is nullable if it is in any file), or an error naming the first
/// file that differs.
fn same_schema(files: &[Arc<InputFile>]) -> Result<SchemaRef> {
    let schema_of = |file: &InputFile| match &file.format {
        FileFormat::Parquet(meta) => meta.schema().clone(),
        FileFormat::Json => unreachable!("Parquet only"),
    };
    let shape = |schema: &Schema| -> Vec<(String, DataType)> {
        schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect()
    };
    let first = schema_of(&files[0]);
    let mut nullable: Vec<bool> = first.fields().iter().map(|f| f.is_nullable()).collect();
    for file in &files[1..] {
        let schema = schema_of(file);
        if shape(&schema) != shape(&first) {
            return Err(Error::Input {
                file: file.url.clone(),
                reason: format!(
                    "its schema ({}) differs from that of {} ({}); every input file of a job must have the same columns and types",
                    describe_fields(&schema),
                    files[0].url,
                    describe_fields(&first)
                ),
            });
        }
        for (n, field) in nullable.iter_mut().zip(schema.fields()) {
            *n |= field.is_nullable();
        }
    }
    let fields: Vec<Field> = first
        .fields()
        .iter()
        .zip(nullable)
        .map(|(f, n)| f.as_ref().clone().with_nullable(n))
        .collect();
    Ok(Arc::new(Schema::new(fields)))
}

/// Parquet's view of a file on a cairn filesystem: ranged reads, one
/// request each (the size comes from the listing that found the file); the
/// ranges a row group needs at once (its column chunks) are merged where
/// they lie within 1 MiB of each other and fetched concurrently, as
/// object_store does for its Parquet reader. A file held whole is read
/// from memory.
pub(super) struct FileReader {
    pub(super) fs: FileSystem,
    pub(super) path: String,
    pub(super) size: u64,
    pub(super) metadata: Option<Arc<ParquetMetaData>>,
    pub(super) whole: Option<Bytes>,
}

/// `range` of a file held whole, or an error naming it when the range is
/// past its end.
fn slice_of(whole: &Bytes, range: Range<u64>) -> parquet::errors::Result<Bytes> {
    let (start, end) = (range.start as usize, range.end as usize);
    if start > end || end > whole.len() {
        return Err(ParquetError::EOF(format!(
            "bytes {start}..{end} of a file of {} bytes",
            whole.len()
        )));
    }
    Ok(whole.slice(start..end))
}

impl AsyncFileReader for FileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        if let Some(whole) = &self.whole {
            return std::future::ready(slice_of(whole, range)).boxed();
        }
        async move {
            self.fs
                .cat_range_with_size(&self.path, range.start, Some(range.end), self.size)
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        if let Some(whole) = &self.whole {
            let slices = ranges.into_iter().map(|r| slice_of(whole, r)).collect();
            return std::future::ready(slices).boxed();
        }
        let (fs, path, size) = (self.fs.clone(), self.path.clone(), self.size);
        async move {
            let fetch = |range: Range<u64>| {
                let (fs, path) = (fs.clone(), path.clone());
                async move {
                    fs.cat_range_with_size(&path, range.start, Some(range.end), size)
                        .await
                }
            };
            object_store::coalesce_ranges(
                &ranges,
                fetch,
                object_store::OBJECT_STORE_COALESCE_DEFAULT,
            )
            .await
            .map_err(|e| ParquetError::External(Box::new(e)))
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        let metadata = self.metadata.clone();
        async move { metadata.ok_or_else(|| ParquetError::General("footer not read yet".into())) }
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{ArrayRef, Int64Array};
    use cairn_fs::WriteMode;
    use parquet::arrow::ArrowWriter;

    fn parquet_of(ids: std::ops::Range<i64>) -> Bytes {
        let batch = arrow_array::RecordBatch::try_from_iter([(
            "uid",
            Arc::new(Int64Array::from_iter_values(ids)) as ArrayRef,
        )])
        .unwrap();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        out.into()
    }

    /// A planning keeps the small files its footer reads fetched whole (up
    /// to 1 MiB, past pyarrow's 64 KiB footer read too), and their rows
    /// are read from memory: gone from the store after the planning, they
    /// still read; a larger file is read from the store.
    #[tokio::test]
    async fn a_small_file_is_read_from_what_the_planning_fetched() {
        let fs = FileSystem::new("memory", &StorageOptions::new()).unwrap();
        let root = format!("/held-{}", std::process::id());
        let files = [
            (0..100, "a"),
            (100..300, "b"),
            (300..40_000, "medium"),
            (1_000_000..1_400_000, "large"),
        ];
        for (ids, name) in &files {
            let path = format!("{root}/{name}.parquet");
            fs.pipe(&path, parquet_of(ids.clone()), WriteMode::Overwrite)
                .await
                .unwrap();
        }
        let source = crate::Source::parquet([format!("memory://{root}")]);
        let mut planned = source.plan(&StorageOptions::new(), None).await.unwrap();
        for (_, name) in &files {
            fs.rm_file(&format!("{root}/{name}.parquet")).await.unwrap();
        }
        let mut read = Vec::new();
        let mut failed = Vec::new();
        for piece in std::mem::take(&mut planned.pieces) {
            let mut batches = planned.read(piece, 1 << 20);
            while let Some(batch) = batches.next().await {
                match batch {
                    Ok(batch) => read.extend(
                        batch
                            .column(0)
                            .as_primitive::<Int64Type>()
                            .values()
                            .iter()
                            .copied(),
                    ),
                    Err(e) => failed.push(e.to_string()),
                }
            }
        }
        read.sort_unstable();
        assert_eq!(read, (0..40_000).collect::<Vec<i64>>());
        // The medium file is past the first footer read, and kept.
        assert!(parquet_of(300..40_000).len() as u64 > FOOTER_READ);
        assert!(parquet_of(1_000_000..1_400_000).len() as u64 > HELD_FILE_BYTES);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].contains("large.parquet"), "{failed:?}");
    }

    #[test]
    fn the_held_bytes_stop_at_their_budget() {
        let held = HeldBytes::new(HELD_FILE_BYTES);
        assert!(held.take(HeldBytes::BUDGET - 10));
        assert!(!held.take(11));
        assert!(held.take(10));
        assert!(!held.take(1));
    }
}
