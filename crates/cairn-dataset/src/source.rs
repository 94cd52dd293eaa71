//! Where a job's rows come from: Parquet or JSON-lines files on any cairn URL
//! (files, directories, globs), or batches in memory; planned into pieces
//! (a Parquet row group, a JSON file, a batch) that workers read.

use std::collections::HashMap;
use std::io::Cursor;
use std::ops::Range;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use cairn_checkpoint::IdSet;
use cairn_fs::{FileSystem, StorageOptions};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryFutureExt, TryStreamExt, stream};
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::error::{Error, Result};
use crate::row_hash::{ROW_HASH_COLUMN, row_hash_column, row_hash_seed};

/// The name of the column `include_paths` adds.
pub const PATH_COLUMN: &str = "path";

/// Footers read at once while planning.
const PARALLEL_FOOTERS: usize = 16;

/// Where a job's rows come from.
///
/// ```
/// let source = cairn_dataset::Source::parquet(["s3://bucket/in/"]).with_row_hash();
/// assert!(matches!(source, cairn_dataset::Source::Parquet { include_row_hash: true, .. }));
/// ```
#[derive(Debug, Clone)]
pub enum Source {
    /// Parquet files: URLs of files, directories (every `*.parquet` under
    /// them, hidden `.`/`_` names skipped) or globs.
    Parquet {
        /// The URLs.
        urls: Vec<String>,
        /// Add Ray Data's `row_hash` column (UInt64).
        include_row_hash: bool,
        /// Add a `path` column with each row's file.
        include_paths: bool,
    },
    /// JSON-lines files (`*.json`, `*.jsonl`, `*.ndjson` under directories);
    /// the schema is inferred from the first 1,000 lines of each file and merged.
    Json {
        /// The URLs.
        urls: Vec<String>,
        /// Add a `path` column with each row's file.
        include_paths: bool,
    },
    /// Batches in memory (all with one schema).
    Items(Vec<RecordBatch>),
}

impl Source {
    /// Parquet input, as Ray's `read_parquet`.
    pub fn parquet<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Self {
        Source::Parquet {
            urls: urls.into_iter().map(Into::into).collect(),
            include_row_hash: false,
            include_paths: false,
        }
    }

    /// JSON-lines input, as Ray's `read_json` on JSON lines.
    pub fn json<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Self {
        Source::Json {
            urls: urls.into_iter().map(Into::into).collect(),
            include_paths: false,
        }
    }

    /// Adds the `row_hash` column (Parquet only; ignored otherwise).
    pub fn with_row_hash(mut self) -> Self {
        if let Source::Parquet {
            include_row_hash, ..
        } = &mut self
        {
            *include_row_hash = true;
        }
        self
    }

    /// Adds the `path` column.
    pub fn with_paths(mut self) -> Self {
        match &mut self {
            Source::Parquet { include_paths, .. } | Source::Json { include_paths, .. } => {
                *include_paths = true
            }
            Source::Items(_) => {}
        }
        self
    }
}

/// One input file.
#[derive(Debug)]
pub(crate) struct InputFile {
    fs: FileSystem,
    /// The URL, for messages.
    pub(crate) url: String,
    /// The stripped path (what Ray hashes and what `path` holds).
    path: String,
    format: FileFormat,
}

#[derive(Debug)]
enum FileFormat {
    Parquet(ArrowReaderMetadata),
    Json,
}

/// A piece of input one worker reads at once.
#[derive(Debug, Clone)]
pub(crate) enum Piece {
    RowGroup {
        file: Arc<InputFile>,
        row_group: usize,
        first_row: u64,
    },
    JsonFile(Arc<InputFile>),
    Batch(RecordBatch),
}

/// A source after planning: the pieces left to read.
#[derive(Debug)]
pub(crate) struct PlannedSource {
    /// The schema of the rows the pieces yield (with the added columns).
    pub(crate) schema: SchemaRef,
    pub(crate) pieces: Vec<Piece>,
    /// Rows in the input when known (Parquet and items).
    pub(crate) total_rows: Option<u64>,
    /// Rows skipped without reading (committed row groups).
    pub(crate) rows_skipped_unread: u64,
    pub(crate) row_groups_skipped: u64,
    pub(crate) files: usize,
    pub(crate) files_skipped: u64,
    include_row_hash: bool,
    include_paths: bool,
    /// The schema from storage, for the JSON decoder.
    json_schema: Option<SchemaRef>,
    /// The exact range of an integer ID column over every row group, when
    /// the Parquet statistics give it.
    pub(crate) id_range: Option<(i64, i64)>,
}

/// Committed IDs the planner may use to skip row groups.
pub(crate) struct Skip<'a> {
    pub(crate) ids: &'a IdSet,
    pub(crate) id_column: &'a str,
}

impl Source {
    /// Lists the files, reads Parquet footers, checks that every file has
    /// the same schema, and skips row groups whose every `row_hash` is in
    /// `skip` (computable from the path and the row count).
    pub(crate) async fn plan(
        &self,
        options: &StorageOptions,
        skip: Option<Skip<'_>>,
    ) -> Result<PlannedSource> {
        match self {
            Source::Items(batches) => plan_items(batches),
            Source::Parquet {
                urls,
                include_row_hash,
                include_paths,
            } => plan_parquet(urls, options, *include_row_hash, *include_paths, skip).await,
            Source::Json {
                urls,
                include_paths,
            } => plan_json(urls, options, *include_paths).await,
        }
    }
}

fn plan_items(batches: &[RecordBatch]) -> Result<PlannedSource> {
    let Some(first) = batches.first() else {
        return Err(Error::Plan {
            reason: "from_items got no batches; give at least one (it may have no rows)".into(),
        });
    };
    let schema = first.schema();
    if let Some(other) = batches
        .iter()
        .find(|b| b.schema().fields() != schema.fields())
    {
        return Err(Error::Plan {
            reason: format!(
                "from_items batches differ in schema: {} vs {}",
                describe_fields(&schema),
                describe_fields(&other.schema())
            ),
        });
    }
    Ok(PlannedSource {
        schema,
        pieces: batches.iter().cloned().map(Piece::Batch).collect(),
        total_rows: Some(batches.iter().map(|b| b.num_rows() as u64).sum()),
        rows_skipped_unread: 0,
        row_groups_skipped: 0,
        files: 0,
        files_skipped: 0,
        include_row_hash: false,
        include_paths: false,
        json_schema: None,
        id_range: None,
    })
}

async fn plan_parquet(
    urls: &[String],
    options: &StorageOptions,
    include_row_hash: bool,
    include_paths: bool,
    skip: Option<Skip<'_>>,
) -> Result<PlannedSource> {
    let listed = list_inputs(urls, options, &["parquet"]).await?;
    let files: Vec<Arc<InputFile>> = stream::iter(listed)
        .map(|(fs, path, size)| async move { open_parquet(fs, path, size).await })
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
                    range_committed(group.column(leaf).statistics(), rows, skip.ids)?
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
) -> Result<bool> {
    let Some((min, max)) = exact_int_range(statistics) else {
        return Ok(false);
    };
    let span = (max as i128 - min as i128 + 1) as u128;
    if span > 4 * u128::from(rows) {
        return Ok(false);
    }
    let range = arrow_array::Int64Array::from_iter_values(min..=max);
    Ok(ids.contains_array(&range)?.true_count() as u128 == span)
}

async fn plan_json(
    urls: &[String],
    options: &StorageOptions,
    include_paths: bool,
) -> Result<PlannedSource> {
    let listed = list_inputs(urls, options, &["json", "jsonl", "ndjson"]).await?;
    let mut merged = Schema::empty();
    let mut files = Vec::new();
    for (fs, path, size) in listed {
        let url = fs.url(&path);
        let head = fs.cat_range(&path, 0, Some(size.min(4 << 20))).await?;
        let complete = if size <= 4 << 20 {
            &head[..]
        } else {
            let end = head.iter().rposition(|&b| b == b'\n').unwrap_or(0);
            &head[..end]
        };
        let (schema, _) = arrow_json::reader::infer_json_schema(Cursor::new(complete), Some(1000))
            .map_err(|e| Error::Input {
                file: url.clone(),
                reason: format!("not JSON lines ({e}); give one JSON object per line"),
            })?;
        merged = Schema::try_merge([merged, schema]).map_err(|e| Error::Input {
            file: url.clone(),
            reason: format!("its columns conflict with the files before it ({e})"),
        })?;
        files.push(Arc::new(InputFile {
            fs,
            url,
            path,
            format: FileFormat::Json,
        }));
    }
    let json_schema = Arc::new(merged);
    let schema = with_extra_fields(&json_schema, false, include_paths, urls)?;
    Ok(PlannedSource {
        schema,
        total_rows: None,
        rows_skipped_unread: 0,
        row_groups_skipped: 0,
        files: files.len(),
        files_skipped: 0,
        pieces: files.into_iter().map(Piece::JsonFile).collect(),
        include_row_hash: false,
        include_paths,
        json_schema: Some(json_schema),
        id_range: None,
    })
}

/// Every input file of `urls`: a file as is, a directory's files with one of
/// `extensions` (hidden names skipped), a glob's matches. Sorted per URL.
async fn list_inputs(
    urls: &[String],
    options: &StorageOptions,
    extensions: &[&str],
) -> Result<Vec<(FileSystem, String, u64)>> {
    if urls.is_empty() {
        return Err(Error::Plan {
            reason: "no input URLs; give at least one file, directory or glob".into(),
        });
    }
    let mut filesystems: HashMap<Option<String>, FileSystem> = HashMap::new();
    let mut out = Vec::new();
    for url in urls {
        let (scheme, _) = cairn_fs::split_protocol(url);
        let fs = match filesystems.get(&scheme) {
            Some(fs) => fs.clone(),
            None => {
                let (fs, _) = FileSystem::from_url(url, options)?;
                filesystems.insert(scheme, fs.clone());
                fs
            }
        };
        let path = fs.strip(url)?;
        let mut found: Vec<(String, u64)> = Vec::new();
        if path.contains(['*', '?', '[']) {
            for name in fs.glob(&path, None).await? {
                let info = fs.info(&name).await?;
                if !info.is_dir() {
                    found.push((info.name, info.size));
                }
            }
        } else {
            let info = fs.info(&path).await?;
            if info.is_dir() {
                for entry in fs.find(&path, None, false).await? {
                    let base = entry.name.rsplit('/').next().unwrap_or(&entry.name);
                    let wanted = extensions
                        .iter()
                        .any(|ext| base.ends_with(&format!(".{ext}")));
                    if wanted && !base.starts_with(['.', '_']) {
                        found.push((entry.name, entry.size));
                    }
                }
            } else {
                found.push((info.name, info.size));
            }
        }
        if found.is_empty() {
            return Err(Error::Plan {
                reason: format!(
                    "no input files at {url} (looked for {}); check the URL",
                    extensions
                        .iter()
                        .map(|e| format!("*.{e}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        found.sort();
        out.extend(found.into_iter().map(|(p, s)| (fs.clone(), p, s)));
    }
    Ok(out)
}

async fn open_parquet(fs: FileSystem, path: String, size: u64) -> Result<Arc<InputFile>> {
    let url = fs.url(&path);
    let not_parquet = |e: ParquetError| Error::Input {
        file: url.clone(),
        reason: format!("not a readable Parquet file ({e})"),
    };
    let mut reader = FileReader {
        fs: fs.clone(),
        path: path.clone(),
        metadata: None,
    };
    let metadata = ParquetMetaDataReader::new()
        .with_prefetch_hint(Some(64 * 1024))
        .load_and_finish(&mut reader, size)
        .await
        .map_err(not_parquet)?;
    let meta = ArrowReaderMetadata::try_new(Arc::new(metadata), ArrowReaderOptions::new())
        .map_err(not_parquet)?;
    Ok(Arc::new(InputFile {
        fs,
        url,
        path,
        format: FileFormat::Parquet(meta),
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

fn describe_fields(schema: &Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn with_extra_fields(
    schema: &SchemaRef,
    row_hash: bool,
    paths: bool,
    urls: &[String],
) -> Result<SchemaRef> {
    let mut fields: Vec<Arc<Field>> = schema.fields().iter().cloned().collect();
    for (wanted, name, data_type) in [
        (row_hash, ROW_HASH_COLUMN, DataType::UInt64),
        (paths, PATH_COLUMN, DataType::Utf8),
    ] {
        if !wanted {
            continue;
        }
        if schema.index_of(name).is_ok() {
            return Err(Error::Plan {
                reason: format!(
                    "the input ({}) already has a column {name:?}, which include_{} would add; rename it or drop that option",
                    urls.join(", "),
                    if name == PATH_COLUMN {
                        "paths"
                    } else {
                        "row_hash"
                    }
                ),
            });
        }
        fields.push(Arc::new(Field::new(name, data_type, false)));
    }
    Ok(Arc::new(Schema::new(fields)))
}

impl PlannedSource {
    /// The batches of one piece, `batch_size` rows at most, with the added columns.
    pub(crate) fn read(
        &self,
        piece: Piece,
        batch_size: usize,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let schema = self.schema.clone();
        let (row_hash, paths) = (self.include_row_hash, self.include_paths);
        match piece {
            Piece::Batch(batch) => stream::iter(
                (0..batch.num_rows().div_ceil(batch_size.max(1)))
                    .map(move |i| {
                        let start = i * batch_size;
                        Ok(batch.slice(start, batch_size.min(batch.num_rows() - start)))
                    })
                    .collect::<Vec<_>>(),
            )
            .boxed(),
            Piece::RowGroup {
                file,
                row_group,
                first_row,
            } => {
                let FileFormat::Parquet(meta) = &file.format else {
                    unreachable!("row groups are Parquet")
                };
                let reader = FileReader {
                    fs: file.fs.clone(),
                    path: file.path.clone(),
                    metadata: Some(meta.metadata().clone()),
                };
                let built =
                    ParquetRecordBatchStreamBuilder::new_with_metadata(reader, meta.clone())
                        .with_row_groups(vec![row_group])
                        .with_batch_size(batch_size)
                        .build();
                let url = file.url.clone();
                let seed = row_hash_seed(&file.path);
                let path = file.path.clone();
                let mut position = first_row;
                match built {
                    Err(e) => stream::once(async move { Err(read_error(&url, e)) }).boxed(),
                    Ok(batches) => batches
                        .map(move |batch| {
                            let batch = batch.map_err(|e| read_error(&url, e))?;
                            let start = position;
                            position += batch.num_rows() as u64;
                            add_columns(
                                &schema,
                                batch,
                                row_hash.then_some((seed, start)),
                                paths.then_some(&path),
                            )
                        })
                        .boxed(),
                }
            }
            Piece::JsonFile(file) => {
                let json_schema = self.json_schema.clone().expect("JSON source has a schema");
                async move {
                    let bytes = file.fs.cat(&file.path).await?;
                    let reader = arrow_json::ReaderBuilder::new(json_schema)
                        .with_batch_size(batch_size)
                        .build(Cursor::new(bytes))
                        .map_err(|e| json_error(&file.url, e))?;
                    let batches = reader
                        .map(|b| {
                            let batch = b.map_err(|e| json_error(&file.url, e))?;
                            add_columns(&schema, batch, None, paths.then_some(&file.path))
                        })
                        .collect::<Vec<_>>();
                    Ok::<_, Error>(stream::iter(batches))
                }
                .try_flatten_stream()
                .boxed()
            }
        }
    }
}

fn read_error(url: &str, e: ParquetError) -> Error {
    Error::Input {
        file: url.to_string(),
        reason: format!("cannot read it ({e})"),
    }
}

fn json_error(url: &str, e: arrow_schema::ArrowError) -> Error {
    Error::Input {
        file: url.to_string(),
        reason: format!("cannot decode its JSON lines ({e})"),
    }
}

fn add_columns(
    schema: &SchemaRef,
    batch: RecordBatch,
    row_hash: Option<(u64, u64)>,
    path: Option<&String>,
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    if let Some((seed, start)) = row_hash {
        columns.push(row_hash_column(seed, start, rows));
    }
    if let Some(path) = path {
        columns.push(Arc::new(StringArray::from_iter_values(
            std::iter::repeat_n(path.as_str(), rows),
        )));
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| Error::Plan {
        reason: format!("input batch does not fit the planned schema ({e})"),
    })
}

/// Parquet's view of a file on a cairn filesystem: ranged reads.
struct FileReader {
    fs: FileSystem,
    path: String,
    metadata: Option<Arc<ParquetMetaData>>,
}

impl AsyncFileReader for FileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.fs
                .cat_range(&self.path, range.start, Some(range.end))
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

impl Source {
    /// Reads every row of the source into memory (for checks and small
    /// inputs; jobs stream instead).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    /// let batch = RecordBatch::try_from_iter([("uid", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef)]).unwrap();
    /// let rows = cairn_dataset::Source::Items(vec![batch]).collect(&Default::default()).await.unwrap();
    /// assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
    /// # })
    /// ```
    pub async fn collect(&self, options: &StorageOptions) -> Result<Vec<RecordBatch>> {
        let planned = self.plan(options, None).await?;
        let mut out = Vec::new();
        for piece in planned.pieces.clone() {
            let mut batches = planned.read(piece, crate::DEFAULT_BATCH_SIZE);
            while let Some(batch) = batches.next().await {
                out.push(batch?);
            }
        }
        Ok(out)
    }
}
