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
use cairn_checkpoint::internals::{CheckpointDir, JobRecord, LeaseKeeper, OutputLayout, RunId};
use cairn_checkpoint::{IdSet, UnitName};
use cairn_fs::{ErrorKind, FileSystem, WriteMode};
use futures::StreamExt;

use crate::checks;
use crate::context::{DEFAULT_ROWS_PER_FILE, JobContext};
use crate::error::{Error, Result};
use crate::ops::{Op, Pipeline, describe_fields, validate_plan};
use crate::plan::Plan;
use crate::progress::{JobSummary, Progress};
use crate::row_hash::ROW_HASH_COLUMN;
use crate::seen::SeenIds;
use crate::sink::{OutputFormat, Sink, encode};
use crate::source::{Piece, PlannedSource, Skip};

/// A unit also commits once its transformed rows take this much memory, so
/// wide rows (embeddings, images) do not make a commit interval of rows
/// exhaust memory.
pub const UNIT_MAX_BYTES: usize = 64 << 20;

/// The checkpoint of this run, once opened: lease kept alive, run identity.
struct RunCheckpoint {
    dir: CheckpointDir,
    keeper: LeaseKeeper,
    run: RunId,
    config: cairn_checkpoint::internals::CheckpointConfig,
    job: JobRecord,
    /// This run made the checkpoint (see `OpenCheckpoint::fresh`).
    fresh: bool,
}

/// Everything the workers share.
struct Shared {
    planned: PlannedSource,
    queue: Mutex<VecDeque<Piece>>,
    ops: Vec<Op>,
    batch_size: usize,
    id_column: Option<String>,
    committed: IdSet,
    checkpoint: Option<(CheckpointDir, LeaseKeeper)>,
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

#[derive(Default)]
struct Counts {
    rows_read: AtomicU64,
    rows_skipped: AtomicU64,
    rows_written: AtomicU64,
    files_written: AtomicU64,
    bytes_written: AtomicU64,
    units: AtomicU64,
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

pub(crate) async fn run(plan: Plan, ctx: &JobContext, sink: Sink) -> Result<JobSummary> {
    let started = Instant::now();
    crate::metrics::register_metrics();
    let requests_before = cairn_fs::request_counts();
    // What every way out of the run records: its wall time and requests.
    let stamp = |summary: &mut JobSummary| {
        summary.elapsed = started.elapsed();
        summary.requests = cairn_fs::request_counts().since(&requests_before);
    };
    let Plan { source, ops } = plan;
    if ctx.batch_size == 0 {
        return Err(Error::Plan {
            reason: format!(
                "batch_size is 0; give at least 1 row per batch (the default is {})",
                crate::DEFAULT_BATCH_SIZE
            ),
        });
    }
    let (out_fs, out_dir) = FileSystem::from_url(&sink.url, &ctx.storage_options)?;
    checks::output_apart_from_inputs(&source, &out_fs, &out_dir, &ctx.storage_options)?;
    let id_column = ctx.checkpoint.as_ref().map(|c| c.id_column.clone());
    crate::partition::check_partition_columns(&sink.partition_by, id_column.as_deref())?;

    // Checkpoint: lease, recovery, committed IDs (before planning, so the
    // plan can skip committed row groups).
    let mut summary = JobSummary::default();
    let mut committed = IdSet::Empty;
    let mut checkpoint = None;
    if let Some(config) = &ctx.checkpoint {
        let mut config = config.clone();
        config.output_layout = OutputLayout::for_partition_columns(&sink.partition_by);
        if config.storage_options.is_empty() {
            config.storage_options = ctx.storage_options.clone();
        }
        // Before the lease is taken: nothing is written to a checkpoint
        // that overlaps an input (the output is checked by open).
        checks::checkpoint_outside_inputs(&source, &config.dir()?, &ctx.storage_options)?;
        let open = config.open(&out_fs, &out_dir).await?;
        if open.state.complete {
            // This job's previous run finished; only its clean-up was cut
            // short. Clean-up removes the lease this run just took, too.
            let _ = open.keeper.stop().await?;
            open.dir.clean_up(Some((&out_fs, &out_dir))).await?;
            summary.completed_before = true;
            summary.checkpoint_removed = true;
            stamp(&mut summary);
            return Ok(summary);
        }
        if !open.state.committed.is_empty()
            && let Err(e) = open.dir.require_data(&open.state, &out_fs, &out_dir).await
        {
            // A committed unit whose data is gone: going on would skip its
            // rows for good (and delete the checkpoint, their only record).
            release(&open.dir, open.keeper).await;
            return Err(e.into());
        }
        summary.units_rolled_back = open.recovery.rolled_back.len() as u64;
        summary.data_files_rolled_back = open.recovery.data_files_deleted as u64;
        committed = open.state.ids;
        checkpoint = Some(RunCheckpoint {
            dir: open.dir,
            keeper: open.keeper,
            run: open.run,
            config,
            job: open.job,
            fresh: open.fresh,
        });
    }
    let result = prepare_and_run(
        source,
        ops,
        ctx,
        &sink,
        out_fs,
        out_dir,
        id_column,
        committed,
        checkpoint,
        &mut summary,
    )
    .await;
    stamp(&mut summary);
    result.map(|()| summary)
}

#[allow(clippy::too_many_arguments)]
async fn prepare_and_run(
    source: crate::source::Source,
    ops: Vec<Op>,
    ctx: &JobContext,
    sink: &Sink,
    out_fs: FileSystem,
    out_dir: String,
    id_column: Option<String>,
    committed: IdSet,
    checkpoint: Option<RunCheckpoint>,
    summary: &mut JobSummary,
) -> Result<()> {
    // Everything that can be refused is checked before the first write.
    let checked = async {
        checks::overwrite_keeps_committed_rows(sink.mode, &committed, &out_fs.url(&out_dir))?;
        let skip = id_column.as_deref().map(|id| Skip {
            ids: &committed,
            id_column: id,
        });
        let planned = source.plan(&ctx.storage_options, skip).await?;
        if let Some(id) = &id_column {
            checks::id_column(&planned.schema, id)?;
        }
        validate_plan(&ops, &planned.schema, id_column.as_deref())?;
        if ops.is_empty() && !sink.partition_by.is_empty() {
            // The rows are the input's: a partition column they lack, or
            // one that cannot name a directory, is refused before any write.
            crate::partition::file_schema(&planned.schema, &sink.partition_by, &sink.url)?;
        }
        if let Some(c) = &checkpoint {
            // The checkpoint's record of this job: refuses changed inputs
            // under row_hash IDs, then records what this run reads.
            let uses_row_hash = id_column.as_deref() == Some(ROW_HASH_COLUMN);
            let record = c.job.check_run(
                &c.dir.url()?,
                sink.format.extension(),
                &sink.partition_by,
                uses_row_hash,
                &planned.inputs,
            )?;
            if record != c.job {
                c.dir.write_job_record(&record).await?;
            }
        }
        checks::prepare_output(
            &out_fs,
            &out_dir,
            sink.mode,
            committed.is_empty(),
            id_column.is_some(),
            &planned.inputs,
        )
        .await?;
        Ok(planned)
    }
    .await;
    let mut planned = match checked {
        Ok(planned) => planned,
        Err(e) => {
            if let Some(c) = checkpoint {
                if c.fresh {
                    // Refused before its first unit: the checkpoint this run
                    // made holds nothing worth keeping, and a record left in
                    // it would bind the path to a job that never ran. Only
                    // while the lease is still ours: a run that took it over
                    // owns the directory now.
                    match c.keeper.stop().await {
                        Ok(_) => {
                            let output = (&out_fs, out_dir.as_str());
                            if let Err(clean) = c.dir.clean_up(Some(output)).await {
                                tracing::warn!("could not remove the unused checkpoint: {clean}");
                            }
                        }
                        Err(lost) => tracing::warn!("the checkpoint is left as it is: {lost}"),
                    }
                } else {
                    release(&c.dir, c.keeper).await;
                }
            }
            return Err(e);
        }
    };

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

    let (unit_rows, unit_interval) = match &checkpoint {
        Some(c) => (c.config.commit_rows, Some(c.config.commit_interval)),
        None => (DEFAULT_ROWS_PER_FILE, None),
    };
    let check_duplicates =
        ctx.check_duplicate_ids && id_column.as_deref().is_some_and(|id| id != ROW_HASH_COLUMN);
    let (run, config, checkpoint) = match checkpoint {
        Some(c) => (c.run, Some(c.config), Some((c.dir, c.keeper))),
        None => (RunId::new(), None, None),
    };
    let pieces = VecDeque::from(std::mem::take(&mut planned.pieces));
    let seen = check_duplicates.then(|| {
        SeenIds::new(
            planned.id_range,
            planned.total_rows,
            ctx.duplicate_check_max_ids,
        )
    });
    let shared = Arc::new(Shared {
        queue: Mutex::new(pieces),
        planned,
        ops,
        batch_size: ctx.batch_size,
        id_column,
        committed,
        checkpoint,
        run,
        next_seq: AtomicU64::new(0),
        out_fs,
        out_dir,
        format: sink.format,
        partition_by: sink.partition_by.clone(),
        max_open_files: sink.max_open_files.max(1),
        unit_rows,
        unit_interval,
        output_schema: OnceLock::new(),
        seen,
        progress: ctx.progress.clone(),
        stop: AtomicBool::new(false),
        interrupt: ctx.interrupt.clone(),
        cut_short: AtomicBool::new(false),
        counts: Counts::default(),
    });

    let workers: Vec<_> = (0..ctx.workers.max(1))
        .map(|_| tokio::spawn(worker(shared.clone())))
        .collect();
    let mut first_error = None;
    for handle in workers {
        let outcome = handle.await.unwrap_or_else(|e| {
            Err(Error::Plan {
                reason: format!("a worker panicked: {e}"),
            })
        });
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    let shared = Arc::into_inner(shared).expect("workers are done");
    let counts = &shared.counts;
    summary.rows_read = counts.rows_read.load(Ordering::Relaxed);
    summary.rows_skipped =
        counts.rows_skipped.load(Ordering::Relaxed) + summary.rows_skipped_unread;
    summary.rows_written = counts.rows_written.load(Ordering::Relaxed);
    summary.files_written = counts.files_written.load(Ordering::Relaxed);
    summary.bytes_written = counts.bytes_written.load(Ordering::Relaxed);
    summary.units_committed = counts.units.load(Ordering::Relaxed);

    // Asked to stop with input left: the units taken were committed; keep
    // the checkpoint, give the lease back, say how to resume.
    let interrupted = first_error.is_none() && shared.cut_short.load(Ordering::SeqCst);
    let interruption = Error::Interrupted {
        units_committed: summary.units_committed,
    };
    let Some((dir, keeper)) = shared.checkpoint else {
        if interrupted {
            return Err(interruption);
        }
        return first_error.map_or(Ok(()), Err);
    };
    if let Some(e) = first_error {
        release(&dir, keeper).await;
        return Err(e);
    }
    if interrupted {
        release(&dir, keeper).await;
        return Err(interruption);
    }
    crash_point("run-before-clean-up");
    let lease = keeper.stop().await?;
    let config = config.expect("a checkpoint has a config");
    if config.delete_checkpoint_on_success {
        let report = dir
            .clean_up(Some((&shared.out_fs, shared.out_dir.as_str())))
            .await?;
        summary.units_rolled_back += report.rolled_back.len() as u64;
        summary.data_files_rolled_back += report.data_files_deleted as u64;
        summary.checkpoint_removed = report.removed_directory || report.kept_foreign.is_empty();
        summary.checkpoint_foreign_files = report.kept_foreign;
    } else {
        dir.release_lease(lease).await?;
    }
    Ok(())
}

/// Gives the lease back after a failed run, so the next run need not wait
/// for it to expire. The checkpoint itself is kept.
async fn release(dir: &CheckpointDir, keeper: LeaseKeeper) {
    if let Ok(lease) = keeper.stop().await
        && let Err(e) = dir.release_lease(lease).await
    {
        tracing::warn!("could not release the checkpoint lease: {e}");
    }
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
        shared.id_column.as_deref(),
    )));
    let mut unit = Unit::default();
    let id_index = shared.id_column.as_ref().map(|id| {
        shared
            .planned
            .schema
            .index_of(id)
            .expect("checked in the plan")
    });
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
            if let Some(index) = id_index {
                batch = drop_committed(shared, batch, index, &label)?;
                let ids = batch.column(index).clone();
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

/// Removes the rows whose IDs are committed; a null ID is an error.
fn drop_committed(
    shared: &Shared,
    batch: RecordBatch,
    index: usize,
    label: &str,
) -> Result<RecordBatch> {
    let ids = batch.column(index);
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
    if shared.committed.is_empty() {
        return Ok(batch);
    }
    let committed = shared.committed.contains_array(ids.as_ref())?;
    let skipped = committed.true_count();
    if skipped == 0 {
        return Ok(batch);
    }
    shared
        .counts
        .rows_skipped
        .fetch_add(skipped as u64, Ordering::Relaxed);
    crate::metrics::metrics().rows_skipped(skipped as u64);
    let keep = BooleanArray::new(!committed.values(), None);
    arrow_select::filter::filter_record_batch(&batch, &keep).map_err(|e| Error::Input {
        file: label.to_string(),
        reason: e.to_string(),
    })
}

/// Writes the unit's data and commits it: pending record, data file(s),
/// committed record, pending record released (docs/checkpoint-protocol.md).
async fn flush(shared: &Shared, unit: &mut Unit) -> Result<()> {
    let unit = std::mem::take(unit);
    if unit.input_rows == 0 && unit.ids.iter().all(|ids| ids.is_empty()) {
        return Ok(());
    }
    let name = UnitName::new(&shared.run, shared.next_seq.fetch_add(1, Ordering::Relaxed));
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
    if let (Some((dir, keeper)), Some(ids)) = (&shared.checkpoint, ids) {
        dir.commit_fenced(keeper, &name, ids, written.files).await?;
        crash_point("unit-after-commit");
        if let Err(e) = dir.release_pending(&name).await {
            // The unit is committed; a leftover pending record is settled
            // by the next run's recovery.
            if !matches!(&e, cairn_checkpoint::Error::Storage(s) if s.kind() == ErrorKind::NotFound)
            {
                tracing::warn!(
                    "unit {} committed; its pending record stays: {e}",
                    name.as_str()
                );
            }
        }
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
    if let (Some((dir, keeper)), Some(ids)) = (&shared.checkpoint, ids) {
        keeper.fenced(dir.write_pending(name, ids.clone())).await?;
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
    if let (Some((dir, keeper)), Some(ids)) = (&shared.checkpoint, ids) {
        let dirs: Vec<String> = partitions.iter().map(|(d, _, _)| d.clone()).collect();
        keeper
            .fenced(dir.write_pending_in(name, ids.clone(), &dirs))
            .await?;
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
    let id_column = shared.id_column.clone();
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
        Some((_, keeper)) => keeper.fenced(write).await?,
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
