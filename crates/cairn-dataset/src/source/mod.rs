//! Where a job's rows come from: Parquet or JSON-lines files on any cairn URL
//! (files, directories, globs), or batches in memory; planned into pieces
//! (a Parquet row group, a JSON file, a batch) that workers read.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use cairn_checkpoint::IdSet;
use cairn_fs::{FileSystem, StorageOptions};
use futures::stream::BoxStream;
use futures::{StreamExt, stream};
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::errors::ParquetError;

use crate::error::{Error, Result};
use crate::ops::describe_fields;
use crate::row_hash::{ROW_HASH_COLUMN, row_hash_column, row_hash_seed};

mod json_lines;
mod listing;
mod parquet_files;

use self::parquet_files::FileReader;

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
    /// The size the listing gave (ranged reads need no stat).
    size: u64,
    format: FileFormat,
    /// The whole file, kept from the read of its footer when it is small
    /// (see [`parquet_files::HeldBytes`]): its rows are read from here.
    held: Option<bytes::Bytes>,
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
    /// Every input file listed (skipped ones too), for the job record.
    pub(crate) inputs: Vec<cairn_checkpoint::internals::InputFingerprint>,
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
            } => {
                parquet_files::plan_parquet(urls, options, *include_row_hash, *include_paths, skip)
                    .await
            }
            Source::Json {
                urls,
                include_paths,
            } => json_lines::plan_json(urls, options, *include_paths).await,
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
        inputs: Vec::new(),
    })
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
                    size: file.size,
                    metadata: Some(meta.metadata().clone()),
                    whole: file.held.clone(),
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
                let path = file.path.clone();
                json_lines::stream_json(
                    file.fs.clone(),
                    file.path.clone(),
                    file.url.clone(),
                    json_schema,
                    batch_size,
                )
                .map(move |batch| add_columns(&schema, batch?, None, paths.then_some(&path)))
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
        let mut planned = self.plan(options, None).await?;
        let mut out = Vec::new();
        for piece in std::mem::take(&mut planned.pieces) {
            let mut batches = planned.read(piece, crate::DEFAULT_BATCH_SIZE);
            while let Some(batch) = batches.next().await {
                out.push(batch?);
            }
        }
        Ok(out)
    }
}
