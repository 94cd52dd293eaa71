//! Where a job's rows go: Parquet or JSON-lines files under one directory
//! URL, one data file per unit, named `<unit>_0.<ext>` so that recovery can
//! find a unit's files by prefix; or, partitioned, one file per unit in
//! each hive-style partition directory its rows fall in
//! (`<col>=<value>/.../<unit>_0.<ext>`).

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::error::{Error, Result};

/// The file format of a sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Parquet (snappy), as Ray's `write_parquet`.
    Parquet,
    /// JSON lines, as Ray's `write_json`.
    Json,
}

impl OutputFormat {
    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Parquet => "parquet",
            OutputFormat::Json => "json",
        }
    }
}

/// What to do with files already in the output directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SaveMode {
    /// Refuse to write into a directory that already holds files, unless
    /// this run resumes a checkpoint with committed IDs (the default: a
    /// finished job run again would otherwise write every row a second time).
    #[default]
    ErrorIfExists,
    /// Add files next to what is there, whatever it is.
    Append,
    /// Delete the directory's contents first. Refused while the checkpoint
    /// holds committed IDs: those rows would be skipped and lost.
    Overwrite,
}

/// Where and how a job writes.
///
/// ```
/// let sink = cairn_dataset::Sink::parquet("s3://bucket/out/");
/// assert_eq!(sink.format, cairn_dataset::OutputFormat::Parquet);
/// let partitioned = sink.partition_by(["source", "date"]).max_open_files(16);
/// assert_eq!(partitioned.partition_by, ["source", "date"]);
/// ```
#[derive(Debug, Clone)]
pub struct Sink {
    /// The output directory URL.
    pub url: String,
    /// The file format.
    pub format: OutputFormat,
    /// What to do with existing files.
    pub mode: SaveMode,
    /// Columns whose values name the hive-style directories the rows go
    /// into, outermost first (empty: every file directly in `url`).
    pub partition_by: Vec<String>,
    /// The most files one unit writes at once (each is encoded in memory
    /// and sent whole), so a unit spanning many partitions holds at most
    /// this many encoded files besides its rows.
    pub max_open_files: usize,
}

/// The default [`Sink::max_open_files`].
pub const DEFAULT_MAX_OPEN_FILES: usize = 64;

impl Sink {
    /// Parquet files under `url`.
    pub fn parquet(url: &str) -> Self {
        Self {
            url: url.trim_end_matches('/').to_string(),
            format: OutputFormat::Parquet,
            mode: SaveMode::ErrorIfExists,
            partition_by: Vec::new(),
            max_open_files: DEFAULT_MAX_OPEN_FILES,
        }
    }

    /// JSON-lines files under `url`.
    pub fn json(url: &str) -> Self {
        Self {
            format: OutputFormat::Json,
            ..Self::parquet(url)
        }
    }

    /// With a save mode.
    pub fn mode(mut self, mode: SaveMode) -> Self {
        self.mode = mode;
        self
    }

    /// Partitioned by `columns` (hive style, outermost first), as pyarrow's
    /// `write_dataset(partitioning=columns, partitioning_flavor="hive")`
    /// lays out its files. The columns must be text, integers, booleans
    /// or dates; they are left out of the files.
    pub fn partition_by<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.partition_by = columns.into_iter().map(Into::into).collect();
        self
    }

    /// At most `files` files of one unit written at once (at least 1).
    pub fn max_open_files(mut self, files: usize) -> Self {
        self.max_open_files = files.max(1);
        self
    }
}

/// Encodes one unit's batches (empty ones skipped) into a file's bytes;
/// `None` when there are no rows. All batches must have `schema`'s fields.
pub(crate) fn encode(
    format: OutputFormat,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    file: &str,
    id_column: Option<&str>,
) -> Result<Option<Bytes>> {
    let rows: Vec<&RecordBatch> = batches.iter().filter(|b| b.num_rows() > 0).collect();
    if rows.is_empty() {
        return Ok(None);
    }
    let fail = |e: String| Error::Output {
        file: file.to_string(),
        reason: e,
    };
    let mut buffer = Vec::new();
    match format {
        OutputFormat::Parquet => {
            let mut props = WriterProperties::builder().set_compression(Compression::SNAPPY);
            // Unique IDs never gain from a dictionary (and row_hash values
            // make building one expensive).
            if let Some(id) = id_column {
                props = props.set_column_dictionary_enabled(ColumnPath::from(id), false);
            }
            let props = props.build();
            let mut writer = ArrowWriter::try_new(&mut buffer, schema.clone(), Some(props))
                .map_err(|e| fail(e.to_string()))?;
            for batch in rows {
                writer.write(batch).map_err(|e| fail(e.to_string()))?;
            }
            writer.close().map_err(|e| fail(e.to_string()))?;
        }
        OutputFormat::Json => {
            let mut writer = arrow_json::LineDelimitedWriter::new(&mut buffer);
            for batch in rows {
                writer.write(batch).map_err(|e| fail(e.to_string()))?;
            }
            writer.finish().map_err(|e| fail(e.to_string()))?;
        }
    }
    Ok(Some(Bytes::from(buffer)))
}
