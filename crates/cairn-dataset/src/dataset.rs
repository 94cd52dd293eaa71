//! The user's view: a [`Dataset`] built from a source and map-like
//! operators, run by writing it to a sink (with a [`JobContext`]).

use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, RecordBatch};

use crate::context::JobContext;
use crate::error::Result;
use crate::ops::{BoxError, Op, Row};
use crate::plan::Plan;
use crate::progress::JobSummary;
use crate::sink::Sink;
use crate::source::Source;
use crate::typed;

/// A map-only job: a source, operators, and (when written) a sink.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Int64Array, RecordBatch};
/// let batch = RecordBatch::try_from_iter([("uid", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef)]).unwrap();
/// let summary = cairn_dataset::Dataset::from_items(vec![batch])
///     .filter("odd", |b: &RecordBatch| {
///         let uid = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
///         Ok(uid.iter().map(|v| v.map(|v| v % 2 == 1)).collect())
///     })
///     .write_parquet(&cairn_dataset::JobContext::new(), "memory:///doc-out")
///     .await
///     .unwrap();
/// assert_eq!((summary.rows_read, summary.rows_written), (3, 2));
/// # })
/// ```
#[derive(Debug, Clone)]
pub struct Dataset {
    pub(crate) source: Source,
    pub(crate) ops: Vec<Op>,
}

impl Dataset {
    /// Rows from `source`.
    pub fn from_source(source: Source) -> Self {
        Self {
            source,
            ops: Vec::new(),
        }
    }

    /// Parquet files, directories or globs on any cairn URL.
    pub fn read_parquet<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Self {
        Self::from_source(Source::parquet(urls))
    }

    /// JSON-lines files, directories or globs on any cairn URL.
    pub fn read_json<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Self {
        Self::from_source(Source::json(urls))
    }

    /// Batches in memory.
    pub fn from_items(batches: Vec<RecordBatch>) -> Self {
        Self::from_source(Source::Items(batches))
    }

    fn then(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// Applies `f` to batches of at most `batch_size` rows (the read batch
    /// when `None`). The output may have any number of rows.
    pub fn map_batches(
        self,
        name: &str,
        batch_size: Option<usize>,
        f: impl Fn(RecordBatch) -> std::result::Result<RecordBatch, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.then(Op::MapBatches {
            name: name.to_string(),
            batch_size,
            f: Arc::new(f),
        })
    }

    /// Applies `f` to each row read as a `T` (a serde type whose fields are
    /// the columns it needs), writing each `U` it returns as a row (the
    /// output columns are `U`'s fields, in order; keep the ID column among
    /// them). Batches are converted column by column by serde_arrow, with no
    /// JSON in between.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    /// #[derive(serde::Deserialize)]
    /// struct Doc { uid: i64, text: String }
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Counted { uid: i64, text: String, chars: u64 }
    /// let batch = RecordBatch::try_from_iter([
    ///     ("uid", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
    ///     ("text", Arc::new(StringArray::from(vec!["ab", "cde"])) as ArrayRef),
    /// ]).unwrap();
    /// let summary = cairn_dataset::Dataset::from_items(vec![batch])
    ///     .map_rows("count", |d: Doc| Ok(Counted { chars: d.text.len() as u64, uid: d.uid, text: d.text }))
    ///     .write_parquet(&cairn_dataset::JobContext::new(), "memory:///typed-doc")
    ///     .await
    ///     .unwrap();
    /// assert_eq!(summary.rows_written, 2);
    /// # })
    /// ```
    pub fn map_rows<T, U>(
        self,
        name: &str,
        f: impl Fn(T) -> std::result::Result<U, BoxError> + Send + Sync + 'static,
    ) -> Self
    where
        T: serde::de::DeserializeOwned + 'static,
        U: serde::Serialize + serde::de::DeserializeOwned + 'static,
    {
        self.map_batches(
            name,
            None,
            typed::rows_fn(move |row| f(row).map(|u| vec![u])),
        )
    }

    /// [`Dataset::map_rows`] returning any number of rows per input row; all
    /// rows from one input row commit together, with that row's ID.
    pub fn flat_map_rows<T, U>(
        self,
        name: &str,
        f: impl Fn(T) -> std::result::Result<Vec<U>, BoxError> + Send + Sync + 'static,
    ) -> Self
    where
        T: serde::de::DeserializeOwned + 'static,
        U: serde::Serialize + serde::de::DeserializeOwned + 'static,
    {
        self.map_batches(name, None, typed::rows_fn(f))
    }

    /// Applies `f` to each row (as a JSON object; convenient, not fast: see
    /// [`Dataset::map_rows`] for typed rows).
    pub fn map(
        self,
        name: &str,
        f: impl Fn(Row) -> std::result::Result<Row, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.then(Op::Map {
            name: name.to_string(),
            f: Arc::new(f),
        })
    }

    /// Turns each row into zero or more rows. All rows from one input row
    /// commit together, with that row's ID.
    pub fn flat_map(
        self,
        name: &str,
        f: impl Fn(Row) -> std::result::Result<Vec<Row>, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.then(Op::FlatMap {
            name: name.to_string(),
            f: Arc::new(f),
        })
    }

    /// Keeps the rows where `f` says true. Dropped rows count as done.
    pub fn filter(
        self,
        name: &str,
        f: impl Fn(&RecordBatch) -> std::result::Result<BooleanArray, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.then(Op::Filter {
            name: name.to_string(),
            f: Arc::new(f),
        })
    }

    /// Adds (or replaces) `column` with the values `f` computes per batch.
    pub fn with_column(
        self,
        column: &str,
        f: impl Fn(&RecordBatch) -> std::result::Result<ArrayRef, BoxError> + Send + Sync + 'static,
    ) -> Self {
        self.then(Op::WithColumn {
            column: column.to_string(),
            f: Arc::new(f),
        })
    }

    /// Keeps only `columns`, in that order.
    pub fn select_columns<S: Into<String>>(self, columns: impl IntoIterator<Item = S>) -> Self {
        self.then(Op::Select(columns.into_iter().map(Into::into).collect()))
    }

    /// Removes `columns`.
    pub fn drop_columns<S: Into<String>>(self, columns: impl IntoIterator<Item = S>) -> Self {
        self.then(Op::Drop(columns.into_iter().map(Into::into).collect()))
    }

    /// Transforms batches with an external process, one per worker, started
    /// with `sh -c command`: it reads Arrow IPC stream batches on stdin and
    /// writes one answer batch on stdout per batch read (docs/user-guide.md).
    pub fn map_command(self, command: &str) -> Self {
        self.then(Op::Command {
            command: command.to_string(),
            timeout: None,
        })
    }

    /// [`map_command`](Self::map_command) whose process must answer each
    /// batch within `timeout`: a process that hangs (a stuck model, a
    /// deadlock) is killed with its process group and the job stops with an
    /// error naming the timeout; committed units are kept.
    ///
    /// ```
    /// let ds = cairn_dataset::Dataset::read_parquet(["/tmp/in"])
    ///     .map_command_with_timeout("python3 model.py", std::time::Duration::from_secs(600));
    /// # let _ = ds;
    /// ```
    pub fn map_command_with_timeout(self, command: &str, timeout: std::time::Duration) -> Self {
        self.then(Op::Command {
            command: command.to_string(),
            timeout: Some(timeout),
        })
    }

    /// Runs the job, writing to `sink`.
    pub async fn write(self, ctx: &JobContext, sink: Sink) -> Result<JobSummary> {
        let plan = Plan {
            source: self.source,
            ops: self.ops,
        };
        crate::executor::run(plan, ctx, sink).await
    }

    /// Runs the job, writing Parquet files under `url`.
    pub async fn write_parquet(self, ctx: &JobContext, url: &str) -> Result<JobSummary> {
        self.write(ctx, Sink::parquet(url)).await
    }

    /// Runs the job, writing JSON-lines files under `url`.
    pub async fn write_json(self, ctx: &JobContext, url: &str) -> Result<JobSummary> {
        self.write(ctx, Sink::json(url)).await
    }
}
