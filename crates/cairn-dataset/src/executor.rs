//! Runs a job's [`Plan`]: plan and checks before anything is written, then
//! workers that each fill one unit at a time (read → drop committed rows →
//! transform) and commit it with the checkpoint protocol, then clean-up.
//!
//! Memory is bounded by backpressure: workers pull pieces (one Parquet row
//! group or JSON file) from a queue only when they are ready for more, and a
//! worker holds at most one unit's rows (the commit interval) plus the piece
//! it is reading; nothing is read ahead of the workers.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow_schema::SchemaRef;
use cairn_checkpoint::internals::failpoint::crash_point;
use cairn_checkpoint::internals::{OutputLayout, RunId};
use cairn_checkpoint::{Checkpoint, IdSet, Run, UnitName};
use cairn_fs::{FileSystem, WriteMode};
use futures::StreamExt;

use crate::checks;
use crate::context::{DEFAULT_ROWS_PER_FILE, JobContext};
use crate::error::{Error, Result};
use crate::key::IdKey;
use crate::ops::{Op, Pipeline, describe_fields, validate_plan};
use crate::plan::Plan;
use crate::progress::{JobSummary, Progress};
use crate::row_hash::ROW_HASH_COLUMN;
use crate::seen::SeenIds;
use crate::sink::{OutputFormat, SaveMode, Sink, encode};
use crate::source::{Piece, PlannedSource, Skip, Source};

/// A unit also commits once its transformed rows take this much memory, so
/// wide rows (embeddings, images) do not make a commit interval of rows
/// exhaust memory.
pub const UNIT_MAX_BYTES: usize = 64 << 20;

/// Everything the workers share.
struct Shared {
    planned: PlannedSource,
    queue: Mutex<VecDeque<Piece>>,
    ops: Vec<Op>,
    batch_size: usize,
    id_column: Option<String>,
    /// The key `id_column` names (its columns).
    key: Option<IdKey>,
    /// The checkpoint's run (units begun, fenced and committed through it).
    checkpoint: Option<Run>,
    /// Unit names of a job without a checkpoint.
    run: RunId,
    next_seq: AtomicU64,
    out_fs: FileSystem,
    out_dir: String,
    format: OutputFormat,
    /// Partition columns (empty: flat output) and how many of a unit's
    /// files are written at once.
    partition_by: Vec<String>,
    max_open_files: usize,
    unit_rows: usize,
    unit_interval: Option<Duration>,
    output_schema: OnceLock<SchemaRef>,
    seen: Option<SeenIds>,
    progress: Arc<Progress>,
    stop: AtomicBool,
    interrupt: crate::Interrupt,
    /// A worker stopped for the interrupt with input left to read.
    cut_short: AtomicBool,
    counts: Counts,
}

impl Shared {
    /// A new unit's name: the checkpoint run's, or one of this job's.
    fn next_unit(&self) -> UnitName {
        match &self.checkpoint {
            Some(run) => run.next_unit(),
            None => UnitName::new(&self.run, self.next_seq.fetch_add(1, Ordering::Relaxed)),
        }
    }
}

#[derive(Default)]
struct Counts {
    rows_read: AtomicU64,
    rows_skipped: AtomicU64,
    rows_written: AtomicU64,
    files_written: AtomicU64,
    bytes_written: AtomicU64,
    units: AtomicU64,
}

impl Counts {
    fn report(&self, summary: &mut JobSummary) {
        summary.rows_read = self.rows_read.load(Ordering::Relaxed);
        summary.rows_skipped =
            self.rows_skipped.load(Ordering::Relaxed) + summary.rows_skipped_unread;
        summary.rows_written = self.rows_written.load(Ordering::Relaxed);
        summary.files_written = self.files_written.load(Ordering::Relaxed);
        summary.bytes_written = self.bytes_written.load(Ordering::Relaxed);
        summary.units_committed = self.units.load(Ordering::Relaxed);
    }
}

/// The rows a worker has taken into its current unit.
#[derive(Default)]
struct Unit {
    ids: Vec<ArrayRef>,
    input_rows: usize,
    output_bytes: usize,
    outputs: Vec<RecordBatch>,
    started: Option<Instant>,
}

/// What a job reads, how it transforms, where it writes.
struct Job<'a> {
    source: Source,
    ops: Vec<Op>,
    sink: &'a Sink,
    out_fs: FileSystem,
    out_dir: String,
    /// The checkpoint's ID column (none: no checkpoint).
    id_column: Option<String>,
}

pub(crate) async fn run(plan: Plan, ctx: &JobContext, sink: Sink) -> Result<JobSummary> {
    let started = Instant::now();
    crate::metrics::register_metrics();
    let requests_before = cairn_fs::request_counts();
    // What every way out of the run records: its wall time and requests.
    let stamp = |summary: &mut JobSummary| {
        summary.elapsed = started.elapsed();
        summary.requests = cairn_fs::request_counts().since(&requests_before);
    };
    if ctx.batch_size == 0 {
        return Err(Error::Plan {
            reason: format!(
                "batch_size is 0; give at least 1 row per batch (the default is {})",
                crate::DEFAULT_BATCH_SIZE
            ),
        });
    }
    let (out_fs, out_dir) = FileSystem::from_url(&sink.url, &ctx.storage_options)?;
    checks::output_apart_from_inputs(&plan.source, &out_fs, &out_dir, &ctx.storage_options)?;
    let id_column = ctx.checkpoint.as_ref().map(|c| c.id_column.clone());
    for column in key_columns(id_column.as_deref()) {
        crate::partition::check_partition_columns(&sink.partition_by, Some(column.as_str()))?;
    }
    let job = Job {
        source: plan.source,
        ops: plan.ops,
        sink: &sink,
        out_fs,
        out_dir,
        id_column,
    };
    let mut summary = JobSummary::default();
    // Checkpoint: lease, recovery, committed IDs, the output checked
    // against them (before planning, so the plan can skip committed row
    // groups).
    let checkpoint = open_checkpoint(&job, ctx).await?;
    if let Some(run) = &checkpoint {
        if run.finished_before() {
            // This job's previous run finished; only its clean-up was cut
            // short: this run ends it.
            checkpoint.expect("opened").finish().await?;
            summary.completed_before = true;
            summary.checkpoint_removed = true;
            stamp(&mut summary);
            return Ok(summary);
        }
        summary.units_rolled_back = run.recovery().rolled_back.len() as u64;
        summary.data_files_rolled_back = run.recovery().data_files_deleted as u64;
    }
    let result = run_job(job, ctx, checkpoint, &mut summary).await;
    stamp(&mut summary);
    result.map(|()| summary)
}

/// Opens the job's checkpoint, if it has one, through the one sequence
/// ([`Checkpoint::open`]); in mode error-if-exists a new checkpoint over
/// an output holding files is refused there.
async fn open_checkpoint(job: &Job<'_>, ctx: &JobContext) -> Result<Option<Run>> {
    let Some(config) = &ctx.checkpoint else {
        return Ok(None);
    };
    let mut config = config.clone();
    // The workers drop committed rows by this run's set: it must be read
    // (a caller's read_ids = false would leave it empty and every row
    // would be written again).
    config.read_ids = true;
    config.output_layout = OutputLayout::for_partition_columns(&job.sink.partition_by);
    if config.storage_options.is_empty() {
        config.storage_options = ctx.storage_options.clone();
    }
    // Before the lease is taken: nothing is written to a checkpoint that
    // overlaps an input (the output is checked by open).
    checks::checkpoint_outside_inputs(&job.source, &config.dir()?, &ctx.storage_options)?;
    let hatch = (job.sink.mode == SaveMode::ErrorIfExists)
        .then_some("choose mode append (add anyway) or overwrite (replace)");
    let checkpoint = Checkpoint::with_config(config, hatch);
    Ok(Some(checkpoint.open(&job.out_fs, &job.out_dir).await?))
}

/// Plans the job, runs its workers, and ends the checkpoint's run.
async fn run_job(
    job: Job<'_>,
    ctx: &JobContext,
    checkpoint: Option<Run>,
    summary: &mut JobSummary,
) -> Result<()> {
    let planned = match plan_job(&job, ctx, checkpoint.as_ref()).await {
        Ok(planned) => planned,
        Err(e) => {
            if let Some(run) = checkpoint {
                run.end_refused().await;
            }
            return Err(e);
        }
    };
    report_plan(&planned, ctx, summary);
    let shared = Arc::new(Shared::new(job, ctx, planned, checkpoint));
    let outcome = run_workers(&shared, ctx.workers).await;
    let shared = Arc::into_inner(shared).expect("workers are done");
    shared.counts.report(summary);
    // Asked to stop with input left: the units taken were committed; keep
    // the checkpoint, give the lease back, say how to resume.
    let outcome = match outcome {
        Ok(()) if shared.cut_short.load(Ordering::SeqCst) => Err(Error::Interrupted {
            units_committed: summary.units_committed,
        }),
        outcome => outcome,
    };
    match shared.checkpoint {
        Some(run) => end_run(run, outcome, ctx, summary).await,
        None => outcome,
    }
}

/// Everything that can be refused, checked before the first write: the
/// output mode against the committed IDs, the plan (committed row groups
/// skipped), the ID column and operators, the job record (changed inputs
/// under row_hash IDs refused, this run's inputs recorded), the output
/// (emptied in mode overwrite).
async fn plan_job(
    job: &Job<'_>,
    ctx: &JobContext,
    checkpoint: Option<&Run>,
) -> Result<PlannedSource> {
    let empty = IdSet::Empty;
    let committed = checkpoint.map_or(&empty, Run::committed);
    let sink = job.sink;
    checks::overwrite_keeps_committed_rows(sink.mode, committed, &job.out_fs.url(&job.out_dir))?;
    let skip = job.id_column.as_deref().map(|id| Skip {
        ids: committed,
        id_column: id,
    });
    let planned = job.source.plan(&ctx.storage_options, skip).await?;
    for column in key_columns(job.id_column.as_deref()) {
        checks::id_column(&planned.schema, &column)?;
    }
    if job.id_column.is_none() {
        validate_plan(&job.ops, &planned.schema, None)?;
    }
    for column in key_columns(job.id_column.as_deref()) {
        validate_plan(&job.ops, &planned.schema, Some(column.as_str()))?;
    }
    if job.ops.is_empty() && !sink.partition_by.is_empty() {
        // The rows are the input's: a partition column they lack, or one
        // that cannot name a directory, is refused before any write.
        crate::partition::file_schema(&planned.schema, &sink.partition_by, &sink.url)?;
    }
    if let Some(run) = checkpoint {
        let uses_row_hash = job.id_column.as_deref() == Some(ROW_HASH_COLUMN);
        let record = run.job().check_run(
            &run.dir().url()?,
            sink.format.extension(),
            &sink.partition_by,
            uses_row_hash,
            &planned.inputs,
        )?;
        if &record != run.job() {
            run.record_job(&record).await?;
        }
    }
    checks::prepare_output(
        &job.out_fs,
        &job.out_dir,
        sink.mode,
        committed.is_empty(),
        job.id_column.is_some(),
        &planned.inputs,
    )
    .await?;
    Ok(planned)
}

/// The plan's figures, in the summary, the progress bar and the metrics.
fn report_plan(planned: &PlannedSource, ctx: &JobContext, summary: &mut JobSummary) {
    summary.input_files = planned.files as u64;
    summary.rows_skipped_unread = planned.rows_skipped_unread;
    summary.row_groups_skipped = planned.row_groups_skipped;
    summary.files_skipped = planned.files_skipped;
    ctx.progress.set_total(planned.total_rows);
    ctx.progress.add_done(planned.rows_skipped_unread);
    if let Some(total) = planned.total_rows {
        crate::metrics::metrics().input_rows(total);
    }
    crate::metrics::metrics().rows_skipped(planned.rows_skipped_unread);
}

impl Shared {
    fn new(
        job: Job<'_>,
        ctx: &JobContext,
        mut planned: PlannedSource,
        checkpoint: Option<Run>,
    ) -> Self {
        let (unit_rows, unit_interval) = match &ctx.checkpoint {
            Some(c) => (c.commit_rows, Some(c.commit_interval)),
            None => (DEFAULT_ROWS_PER_FILE, None),
        };
        let check_duplicates = ctx.check_duplicate_ids
            && job
                .id_column
                .as_deref()
                .is_some_and(|id| id != ROW_HASH_COLUMN);
        let seen = check_duplicates.then(|| {
            SeenIds::new(
                planned.id_range,
                planned.total_rows,
                ctx.duplicate_check_max_ids,
            )
        });
        Self {
            queue: Mutex::new(VecDeque::from(std::mem::take(&mut planned.pieces))),
            planned,
            ops: job.ops,
            batch_size: ctx.batch_size,
            key: job.id_column.as_deref().map(IdKey::parse),
            id_column: job.id_column,
            checkpoint,
            run: RunId::new(),
            next_seq: AtomicU64::new(0),
            out_fs: job.out_fs,
            out_dir: job.out_dir,
            format: job.sink.format,
            partition_by: job.sink.partition_by.clone(),
            max_open_files: job.sink.max_open_files.max(1),
            unit_rows,
            unit_interval,
            output_schema: OnceLock::new(),
            seen,
            progress: ctx.progress.clone(),
            stop: AtomicBool::new(false),
            interrupt: ctx.interrupt.clone(),
            cut_short: AtomicBool::new(false),
            counts: Counts::default(),
        }
    }
}

/// Runs `workers` workers to the end of the input; the first error.
async fn run_workers(shared: &Arc<Shared>, workers: usize) -> Result<()> {
    let handles: Vec<_> = (0..workers.max(1))
        .map(|_| tokio::spawn(worker(shared.clone())))
        .collect();
    let mut first_error = None;
    for handle in handles {
        let outcome = handle.await.unwrap_or_else(|e| {
            Err(Error::Plan {
                reason: format!("a worker panicked: {e}"),
            })
        });
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Ends the checkpoint's run: a failed or interrupted job abandons it (the
/// lease released, the checkpoint kept for the next run); a finished one
/// finishes it (the checkpoint deleted unless kept on success).
async fn end_run(
    run: Run,
    outcome: Result<()>,
    ctx: &JobContext,
    summary: &mut JobSummary,
) -> Result<()> {
    if let Err(e) = outcome {
        if let Err(release) = run.abandon().await {
            tracing::warn!("could not release the checkpoint lease: {release}");
        }
        return Err(e);
    }
    let report = run.finish().await?;
    if ctx
        .checkpoint
        .as_ref()
        .is_some_and(|c| c.delete_checkpoint_on_success)
    {
        summary.units_rolled_back += report.rolled_back.len() as u64;
        summary.data_files_rolled_back += report.data_files_deleted as u64;
        summary.checkpoint_removed = report.removed_directory || report.kept_foreign.is_empty();
        summary.checkpoint_foreign_files = report.kept_foreign;
    }
    Ok(())
}

async fn worker(shared: Arc<Shared>) -> Result<()> {
    let outcome = work(&shared).await;
    if outcome.is_err() {
        shared.stop.store(true, Ordering::Relaxed);
    }
    outcome
}

async fn work(shared: &Arc<Shared>) -> Result<()> {
    let pipeline = Arc::new(Mutex::new(Pipeline::new(
        &shared.ops,
        shared.key.as_ref().map_or(&[][..], IdKey::columns),
    )));
    let mut unit = Unit::default();
    'pieces: loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let piece = {
            let mut queue = shared.queue.lock().expect("queue lock");
            if shared.interrupt.is_requested() {
                if !queue.is_empty() {
                    shared.cut_short.store(true, Ordering::SeqCst);
                }
                break;
            }
            queue.pop_front()
        };
        let Some(piece) = piece else { break };
        let label = piece_label(&piece);
        let mut batches = shared.planned.read(piece, shared.batch_size);
        while let Some(batch) = batches.next().await {
            let mut batch = batch?;
            let rows = batch.num_rows() as u64;
            shared.counts.rows_read.fetch_add(rows, Ordering::Relaxed);
            crate::metrics::metrics().rows_read(rows);
            shared.progress.add_done(rows);
            if let Some(key) = &shared.key {
                let all_ids = key.ids(&batch, &label)?;
                let ids;
                (batch, ids) = drop_committed(shared, batch, all_ids, &label)?;
                if let Some(seen) = &shared.seen {
                    seen.insert(&ids, shared.id_column.as_deref().unwrap_or(""), &label)?;
                }
                unit.ids.push(ids);
            }
            if batch.num_rows() == 0 {
                continue;
            }
            unit.input_rows += batch.num_rows();
            unit.started.get_or_insert_with(Instant::now);
            let stage = pipeline.clone();
            let outputs = tokio::task::spawn_blocking(move || {
                stage.lock().expect("pipeline lock").apply(batch)
            })
            .await
            .map_err(|e| Error::Plan {
                reason: format!("a transform panicked: {e}"),
            })??;
            unit.output_bytes += outputs
                .iter()
                .map(RecordBatch::get_array_memory_size)
                .sum::<usize>();
            unit.outputs.extend(outputs);
            let due = unit.input_rows >= shared.unit_rows
                || unit.output_bytes >= UNIT_MAX_BYTES
                || shared
                    .unit_interval
                    .zip(unit.started)
                    .is_some_and(|(interval, since)| since.elapsed() >= interval);
            if due {
                flush(shared, &mut unit).await?;
            }
            if shared.interrupt.is_requested() {
                // What was transformed is committed below; the rest of this
                // piece is read again by the next run (its rows are not).
                shared.cut_short.store(true, Ordering::SeqCst);
                break 'pieces;
            }
        }
    }
    flush(shared, &mut unit).await
}

fn piece_label(piece: &Piece) -> String {
    match piece {
        Piece::RowGroup { file, .. } | Piece::JsonFile(file) => file.url.clone(),
        Piece::Batch(_) => "in-memory items".to_string(),
    }
}

/// Removes the rows whose IDs (`ids`, one a row) are committed: the rows
/// kept and their IDs. A null ID is an error.
fn drop_committed(
    shared: &Shared,
    batch: RecordBatch,
    ids: ArrayRef,
    label: &str,
) -> Result<(RecordBatch, ArrayRef)> {
    if ids.null_count() > 0 {
        return Err(Error::Input {
            file: label.to_string(),
            reason: format!(
                "{} rows have no value in the ID column {:?}; every row needs an ID",
                ids.null_count(),
                shared.id_column.as_deref().unwrap_or("")
            ),
        });
    }
    let Some(run) = shared
        .checkpoint
        .as_ref()
        .filter(|run| !run.committed().is_empty())
    else {
        return Ok((batch, ids));
    };
    let committed = run.is_committed(ids.as_ref())?;
    let skipped = committed.true_count();
    if skipped == 0 {
        return Ok((batch, ids));
    }
    shared
        .counts
        .rows_skipped
        .fetch_add(skipped as u64, Ordering::Relaxed);
    crate::metrics::metrics().rows_skipped(skipped as u64);
    let keep = BooleanArray::new(!committed.values(), None);
    let fail = |e: arrow_schema::ArrowError| Error::Input {
        file: label.to_string(),
        reason: e.to_string(),
    };
    let kept = arrow_select::filter::filter_record_batch(&batch, &keep).map_err(fail)?;
    let kept_ids = arrow_select::filter::filter(ids.as_ref(), &keep).map_err(fail)?;
    Ok((kept, kept_ids))
}

/// The columns of the key named `id_column` (none without one).
fn key_columns(id_column: Option<&str>) -> Vec<String> {
    id_column.map_or_else(Vec::new, |id| IdKey::parse(id).columns().to_vec())
}

/// Writes the unit's data and commits it: pending record, data file(s),
/// committed record, pending record released (docs/checkpoint-protocol.md).
async fn flush(shared: &Shared, unit: &mut Unit) -> Result<()> {
    let unit = std::mem::take(unit);
    if unit.input_rows == 0 && unit.ids.iter().all(|ids| ids.is_empty()) {
        return Ok(());
    }
    let name = shared.next_unit();
    let ids = match unit.ids.as_slice() {
        [] => None,
        arrays => {
            let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
            Some(
                arrow_select::concat::concat(&refs).map_err(|e| Error::Plan {
                    reason: format!("cannot gather the unit's IDs ({e})"),
                })?,
            )
        }
    };
    let out_rows: usize = unit.outputs.iter().map(RecordBatch::num_rows).sum();
    let written = if shared.partition_by.is_empty() {
        write_flat(shared, &name, ids.as_ref(), unit.outputs).await?
    } else {
        write_partitioned(shared, &name, ids.as_ref(), unit.outputs).await?
    };
    if let (Some(run), Some(_)) = (&shared.checkpoint, ids) {
        // Commits the IDs its begin recorded, then drops the pending record.
        run.commit(&name, written.files).await?;
    }
    shared
        .counts
        .rows_written
        .fetch_add(out_rows as u64, Ordering::Relaxed);
    crate::metrics::metrics().rows_written(out_rows as u64);
    shared
        .counts
        .bytes_written
        .fetch_add(written.bytes, Ordering::Relaxed);
    shared.counts.units.fetch_add(1, Ordering::Relaxed);
    shared.progress.add_unit(out_rows as u64, written.bytes);
    Ok(())
}

/// What a unit's data files came to.
#[derive(Default)]
struct Written {
    files: usize,
    bytes: u64,
}

/// The pending record and the data file of a unit of a flat output:
/// `<out>/<unit>_0.<ext>`.
async fn write_flat(
    shared: &Shared,
    name: &UnitName,
    ids: Option<&ArrayRef>,
    outputs: Vec<RecordBatch>,
) -> Result<Written> {
    let file = format!(
        "{}/{}_0.{}",
        shared.out_dir,
        name.as_str(),
        shared.format.extension()
    );
    let file_url = shared.out_fs.url(&file);
    let out_rows: usize = outputs.iter().map(RecordBatch::num_rows).sum();
    // Encoding (CPU) overlaps the pending record's write (I/O); the data
    // file is written only once the pending record is durable.
    let encoding = if out_rows > 0 {
        let schema = output_schema(shared, &outputs, &file_url)?;
        Some(spawn_encode(shared, schema, outputs, file_url.clone()))
    } else {
        None
    };
    if let (Some(run), Some(ids)) = (&shared.checkpoint, ids) {
        run.begin(name, ids.clone()).await?;
        crash_point("unit-after-pending");
    }
    let mut written = Written::default();
    if let Some(encoding) = encoding {
        written.bytes = write_encoded(shared, &file, encoding).await?;
        written.files = usize::from(written.bytes > 0);
        crash_point("unit-after-data");
    }
    Ok(written)
}

/// The pending record (naming the unit's partition directories) and one
/// data file per partition the unit's rows fall in:
/// `<out>/<col>=<value>/.../<unit>_0.<ext>`, at most
/// `max_open_files` encoded and sent at once. The unit commits only after
/// every one of them is written, so it commits all of its partitions or
/// none.
async fn write_partitioned(
    shared: &Shared,
    name: &UnitName,
    ids: Option<&ArrayRef>,
    outputs: Vec<RecordBatch>,
) -> Result<Written> {
    let base = format!("{}_0.{}", name.as_str(), shared.format.extension());
    let label = shared.out_fs.url(&format!("{}/{base}", shared.out_dir));
    let partitions = if outputs.iter().any(|b| b.num_rows() > 0) {
        let schema = output_schema(shared, &outputs, &label)?;
        let file_schema = crate::partition::file_schema(&schema, &shared.partition_by, &label)?;
        let split = crate::partition::split(&outputs, &shared.partition_by, &file_schema, &label)?;
        drop(outputs);
        split
            .into_iter()
            .map(|p| (p.dir, file_schema.clone(), p.batches))
            .collect()
    } else {
        Vec::new()
    };
    if let (Some(run), Some(ids)) = (&shared.checkpoint, ids) {
        let dirs: Vec<String> = partitions.iter().map(|(d, _, _)| d.clone()).collect();
        run.begin_in(name, ids.clone(), &dirs).await?;
        crash_point("unit-after-pending");
    }
    let count = partitions.len();
    let mut writes = futures::stream::iter(partitions)
        .map(|(dir, schema, batches)| {
            let file = format!("{}/{dir}/{base}", shared.out_dir);
            let encoding = spawn_encode(shared, schema, batches, shared.out_fs.url(&file));
            async move { write_encoded(shared, &file, encoding).await }
        })
        .buffer_unordered(shared.max_open_files);
    let mut written = Written::default();
    while let Some(bytes) = writes.next().await {
        written.bytes += bytes?;
        written.files += 1;
        if written.files < count {
            // Some of the unit's partitions written, others not yet.
            crash_point("unit-after-partition-file");
        }
    }
    crash_point("unit-after-data");
    Ok(written)
}

/// Encodes `batches` into a file's bytes on the blocking pool.
fn spawn_encode(
    shared: &Shared,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    url: String,
) -> tokio::task::JoinHandle<Result<Option<bytes::Bytes>>> {
    let format = shared.format;
    // A composite key's name is no column of the output.
    let id_column = shared
        .id_column
        .clone()
        .filter(|_| !shared.key.as_ref().is_some_and(IdKey::is_composite));
    tokio::task::spawn_blocking(move || {
        encode(format, &schema, &batches, &url, id_column.as_deref())
    })
}

/// Writes what `encoding` gives to `file` (fenced by the lease when the
/// job is checkpointed); the bytes written (0 for no rows).
async fn write_encoded(
    shared: &Shared,
    file: &str,
    encoding: tokio::task::JoinHandle<Result<Option<bytes::Bytes>>>,
) -> Result<u64> {
    let encoded = encoding.await.map_err(|e| Error::Output {
        file: shared.out_fs.url(file),
        reason: format!("encoding panicked: {e}"),
    })??;
    let Some(bytes) = encoded else {
        return Ok(0);
    };
    let size = bytes.len() as u64;
    let write = shared.out_fs.pipe(file, bytes, WriteMode::Overwrite);
    match &shared.checkpoint {
        // Fenced like the commit: no request of this unit leaves after the
        // lease's deadline.
        Some(run) => run.fenced(write).await?,
        None => write.await?,
    }
    shared.counts.files_written.fetch_add(1, Ordering::Relaxed);
    Ok(size)
}

/// The job's output schema (the first unit's), which every unit must keep.
fn output_schema(shared: &Shared, outputs: &[RecordBatch], file: &str) -> Result<SchemaRef> {
    let first = outputs
        .iter()
        .find(|b| b.num_rows() > 0)
        .expect("some rows")
        .schema();
    let schema = shared.output_schema.get_or_init(|| first.clone()).clone();
    if let Some(other) = outputs
        .iter()
        .filter(|b| b.num_rows() > 0)
        .find(|b| b.schema().fields() != schema.fields())
    {
        return Err(Error::Output {
            file: file.to_string(),
            reason: format!(
                "the transforms produced rows with columns ({}) after rows with columns ({}); every output row of a job must have one schema",
                describe_fields(&other.schema()),
                describe_fields(&schema)
            ),
        });
    }
    Ok(schema)
}
