//! `cairn job`: run a resumable map-only job, make sample input, check that
//! an output holds every input ID exactly once.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use cairn_checkpoint::internals::{CheckpointConfig, id_keys};
use cairn_dataset::{Dataset, JobContext, JobSummary, SaveMode, Sink, Source};
use cairn_fs::{FileSystem, StorageOptions, WriteMode};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Input and output file formats.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Parquet files.
    Parquet,
    /// JSON lines.
    Json,
}

/// What to do with files already in the output directory.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Refuse a non-empty output unless resuming a checkpoint with committed IDs.
    Error,
    /// Add files whatever the output holds.
    Append,
    /// Delete the output first (refused while the checkpoint holds committed IDs).
    Overwrite,
}

/// The input of a job, as `run` and `verify` take it.
#[derive(Args, Debug)]
pub struct InputArgs {
    /// Input files, directories or globs (any cairn URL); repeatable.
    #[arg(long = "input", required = true, num_args = 1..)]
    inputs: Vec<String>,
    /// Input format.
    #[arg(long, value_enum, default_value = "parquet")]
    format: Format,
    /// Add Ray Data's row_hash column (Parquet input); use it as the ID
    /// column when the input has no ID of its own.
    #[arg(long)]
    include_row_hash: bool,
}

impl InputArgs {
    /// The source these arguments name.
    fn source(self) -> CliResult<Source> {
        match (self.format, self.include_row_hash) {
            (Format::Json, true) => Err("--include-row-hash needs Parquet input (Ray's row_hash is defined for read_parquet)".into()),
            (Format::Parquet, true) => Ok(Source::parquet(self.inputs).with_row_hash()),
            (format, false) => Ok(format.source(self.inputs)),
        }
    }
}

impl Format {
    /// The format as users write it.
    fn name(self) -> &'static str {
        match self {
            Format::Parquet => "Parquet",
            Format::Json => "JSON-lines",
        }
    }

    /// A source of files in this format at `urls`.
    fn source(self, urls: Vec<String>) -> Source {
        match self {
            Format::Parquet => Source::parquet(urls),
            Format::Json => Source::json(urls),
        }
    }
}

/// The flags of `cairn job run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Add a `path` column naming each row's input file.
    #[arg(long)]
    pub include_paths: bool,
    /// Output directory URL.
    #[arg(long)]
    pub output: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "parquet")]
    pub output_format: Format,
    /// Existing output: error (default; resuming a checkpoint is fine),
    /// append, or overwrite.
    #[arg(long, value_enum, default_value = "error")]
    pub mode: Mode,
    /// Partition the output by these columns (outermost first), in
    /// hive-style directories `COL=VALUE/...` as pyarrow's `write_dataset`
    /// lays them out; the columns leave the files. Text, integer, boolean
    /// or date columns.
    #[arg(long = "partition-by", value_name = "COL[,COL]", value_delimiter = ',')]
    pub partition_by: Vec<String>,
    /// The most files one unit writes at once (a unit writes one file per
    /// partition its rows fall in).
    #[arg(long = "max-open-files", value_name = "N", requires = "partition_by",
          default_value_t = cairn_dataset::DEFAULT_MAX_OPEN_FILES, value_parser = at_least_one)]
    pub max_open_files: usize,
    /// Checkpoint directory URL (or absolute path); without it the job
    /// is not resumable.
    #[arg(long, requires = "id_column")]
    pub checkpoint: Option<String>,
    /// The column that identifies each input row, or the columns whose
    /// values together do, comma-separated (`video,shot_idx`: a composite
    /// key).
    #[arg(long)]
    pub id_column: Option<String>,
    /// Rows per batch read and sent to each transform.
    #[arg(long, default_value_t = cairn_dataset::DEFAULT_BATCH_SIZE,
          value_parser = at_least_one)]
    pub batch_size: usize,
    /// Units in flight at once (default: one per core).
    #[arg(long, value_parser = at_least_one)]
    pub workers: Option<usize>,
    /// The most IDs the duplicate-ID check holds in memory (about 40
    /// bytes each; a dense integer range uses a bitmap instead).
    #[arg(long, default_value_t = cairn_dataset::DEFAULT_DUPLICATE_CHECK_MAX_IDS)]
    pub duplicate_check_max_ids: u64,
    /// Commit a unit after this many input rows.
    #[arg(long, default_value_t = cairn_checkpoint::internals::DEFAULT_COMMIT_ROWS)]
    pub commit_every_rows: usize,
    /// ... or after this many seconds, whichever comes first.
    #[arg(long, default_value_t = cairn_checkpoint::internals::DEFAULT_COMMIT_INTERVAL.as_secs_f64())]
    pub commit_every_secs: f64,
    /// Keep the checkpoint after a successful run.
    #[arg(long)]
    pub keep_checkpoint: bool,
    /// A transform command (run with `sh -c`, one process per worker)
    /// that reads Arrow IPC stream batches on stdin and writes one
    /// batch on stdout per batch read; repeatable, applied in order.
    #[arg(long = "map-cmd", value_name = "COMMAND")]
    pub map_cmds: Vec<String>,
    /// Seconds a transform may take over one batch; past it the process
    /// (and what it started) is killed and the job stops (committed
    /// units are kept). Default: no limit.
    #[arg(long = "map-timeout", value_name = "SECS", value_parser = map_timeout_seconds)]
    pub map_timeout: Option<Duration>,
    /// Lifetime of the checkpoint's lease in seconds (renewed every
    /// third of it; another run may take the checkpoint over once it
    /// ends unrenewed). Raise it for stores far away, where a request
    /// can take longer than a quarter of it.
    #[arg(long = "lease-ttl", value_name = "SECS", value_parser = lease_ttl_seconds,
          default_value = "120")]
    pub lease_ttl: Duration,
    /// Keep only these columns (comma-separated), after the transforms.
    #[arg(long, value_delimiter = ',')]
    pub select: Vec<String>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Serve the job's metrics (requests, bytes, latency, retries and
    /// errors per store and operation; rows; units; lease renewals) as
    /// OpenMetrics text on http://HOST:PORT/metrics while it runs, for
    /// Prometheus to scrape. Port 0 picks a free port; the address is
    /// printed on stderr.
    #[arg(long = "metrics-addr", value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// Keep serving --metrics-addr this many seconds after the job
    /// ends, so that the last scrape sees the final counts.
    #[arg(
        long = "metrics-linger",
        value_name = "SECS",
        default_value_t = 0.0,
        requires = "metrics_addr"
    )]
    pub metrics_linger: f64,
    /// Write the same metrics to this local file at the start (zeros: a
    /// path that cannot be written is refused before the job reads a row)
    /// and when the job ends (succeeded, failed or interrupted).
    #[arg(long = "metrics-file", value_name = "PATH")]
    pub metrics_file: Option<std::path::PathBuf>,
}

/// The `cairn job` subcommands.
#[derive(Subcommand, Debug)]
pub enum JobCommand {
    /// Read, transform, write; with --checkpoint, re-running the same command
    /// after a failure skips the rows already written.
    Run(Box<RunArgs>),
    /// Write sample Parquet input: `uid` (int64, 0..rows) and `text`
    /// (and `source` with --sources).
    Sample {
        /// Output directory URL.
        output: String,
        /// Rows in all.
        #[arg(long, default_value_t = 100_000)]
        rows: usize,
        /// Parquet files to spread them over.
        #[arg(long, default_value_t = 10)]
        files: usize,
        /// Rows per Parquet row group.
        #[arg(long, default_value_t = 10_000)]
        row_group_rows: usize,
        /// Add a `source` column of this many values (`source-<uid % N>`),
        /// to partition by.
        #[arg(long, value_name = "N", value_parser = at_least_one)]
        sources: Option<usize>,
    },
    /// Check that OUTPUT holds every ID of INPUT exactly once (for 1:1 jobs);
    /// exits 1 when rows are missing, duplicated or unknown.
    Verify {
        #[command(flatten)]
        input: InputArgs,
        /// The job's output directory URL.
        #[arg(long)]
        output: String,
        /// The output's format (a directory holding only the other format
        /// is read as that one, with a note).
        #[arg(long, value_enum, default_value = "parquet")]
        output_format: Format,
        /// The column that identifies each row, in input and output.
        #[arg(long)]
        id_column: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `cairn job` subcommand; returns the process exit code.
pub async fn run(command: JobCommand, options: &StorageOptions) -> CliResult<u8> {
    match command {
        JobCommand::Run(args) => run_with_metrics(*args, options).await,
        JobCommand::Sample {
            output,
            rows,
            files,
            row_group_rows,
            sources,
        } => {
            let shape = SampleShape {
                rows,
                files,
                row_group_rows,
                sources,
            };
            write_sample(&output, &shape, options).await?;
            println!("wrote {rows} rows in {files} Parquet files under {output}");
            Ok(0)
        }
        JobCommand::Verify {
            input,
            output,
            output_format,
            id_column,
            json,
        } => {
            let input = input.source()?;
            let output_source = output_format.source(vec![output.clone()]);
            let expected = count_ids(&input, &id_column, options).await?;
            let found = match count_ids(&output_source, &id_column, options).await {
                Ok(found) => found,
                Err(e)
                    if matches!(
                        e.downcast_ref::<cairn_dataset::Error>(),
                        Some(cairn_dataset::Error::NoInputFiles { .. })
                    ) =>
                {
                    // Not one file of the format asked for: the output may
                    // be in the other one (a JSON job verified as Parquet).
                    let other = match output_format {
                        Format::Parquet => Format::Json,
                        Format::Json => Format::Parquet,
                    };
                    match count_ids(&other.source(vec![output.clone()]), &id_column, options).await
                    {
                        Ok(found) => {
                            eprintln!(
                                "note: {output} holds no {} files; read it as {} (give --output-format to say so)",
                                output_format.name(),
                                other.name()
                            );
                            found
                        }
                        Err(_) => HashMap::new(),
                    }
                }
                Err(e) => return Err(e),
            };
            let missing = expected.keys().filter(|k| !found.contains_key(k)).count();
            let duplicated = found.values().filter(|&&n| n > 1).count();
            let unknown = found.keys().filter(|k| !expected.contains_key(k)).count();
            let input_dups = expected.values().filter(|&&n| n > 1).count();
            let output_rows: u64 = found.values().sum();
            let ok = missing == 0 && duplicated == 0 && unknown == 0;
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "input_ids": expected.len(), "output_rows": output_rows,
                        "missing": missing, "duplicated": duplicated, "unknown": unknown,
                        "duplicated_in_input": input_dups, "exactly_once": ok,
                    })
                );
            } else {
                println!(
                    "input IDs: {}, output rows: {output_rows}, missing: {missing}, duplicated: {duplicated}, unknown: {unknown}",
                    expected.len()
                );
                println!(
                    "{}",
                    if ok {
                        "exactly once: every input ID is in the output once"
                    } else {
                        "NOT exactly once"
                    }
                );
            }
            Ok(if ok { 0 } else { 1 })
        }
    }
}

/// The ID column name `--id-column` gives: one column, or a composite
/// key's (its comma-separated columns as a JSON list, as cairn.ray names
/// it).
fn key_name(given: &str) -> CliResult<String> {
    if !given.contains(',') {
        return Ok(given.to_string());
    }
    let columns: Vec<&str> = given.split(',').map(str::trim).collect();
    let unique: std::collections::HashSet<&&str> = columns.iter().collect();
    if columns.iter().any(|c| c.is_empty()) || unique.len() != columns.len() {
        return Err(format!(
            "--id-column {given:?}: give a column, or the key's columns separated by commas, each once (video,shot_idx)"
        )
        .into());
    }
    Ok(cairn_dataset::composite_key(&columns))
}

/// How many times each ID (as its 128-bit key) occurs in `source`.
async fn count_ids(
    source: &Source,
    column: &str,
    options: &StorageOptions,
) -> CliResult<HashMap<u128, u64>> {
    let mut counts = HashMap::new();
    for batch in source.collect(options).await? {
        let ids = batch.column_by_name(column).ok_or_else(|| {
            format!("no column {column:?} in {source:?}; give the ID column with --id-column")
        })?;
        for key in id_keys(ids.as_ref())?.into_iter().flatten() {
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    Ok(counts)
}

/// A bar on stderr fed from the job's counters every 200 ms.
fn progress_bar(ctx: &JobContext) -> (ProgressBar, tokio::task::JoinHandle<()>) {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {human_pos}/{human_len} rows ({rate}, ETA {eta}) {msg}",
        )
        .expect("valid template")
        // Whole rows a second ({per_sec} prints fractions of a row).
        .with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0} rows/s", state.per_sec());
            },
        )
        .progress_chars("=> "),
    );
    let progress = ctx.progress.clone();
    let shown = bar.clone();
    let ticker = tokio::spawn(async move {
        loop {
            let now = progress.snapshot();
            if let Some(total) = now.total_rows {
                shown.set_length(total);
            }
            shown.set_position(now.rows_done);
            shown.set_message(format!(
                "| written {} rows, {:.1} MiB, {} units",
                now.rows_written,
                now.bytes_written as f64 / (1 << 20) as f64,
                now.units_committed
            ));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    (bar, ticker)
}

/// Runs the job with its metrics served (`--metrics-addr`, kept up
/// `--metrics-linger` after the end) and written (`--metrics-file`) however
/// it ends; the job's own error comes first.
async fn run_with_metrics(args: RunArgs, options: &StorageOptions) -> CliResult<u8> {
    let linger = Duration::try_from_secs_f64(args.metrics_linger)
        .map_err(|_| "--metrics-linger must be a number of seconds, 0 or more")?;
    // Written once before the job too: a path that cannot be written is
    // refused before anything is read or written.
    if let Some(path) = &args.metrics_file {
        crate::metrics_export::write_file(path)?;
    }
    let server = match &args.metrics_addr {
        Some(addr) => {
            let server = crate::metrics_export::serve(addr).await?;
            eprintln!("cairn: metrics on http://{}/metrics", server.addr);
            Some(server)
        }
        None => None,
    };
    let metrics_file = args.metrics_file.clone();
    let result = Box::pin(run_job(args, options)).await;
    if let Some(path) = &metrics_file
        && let Err(e) = crate::metrics_export::write_file(path)
    {
        if result.is_ok() {
            return Err(e);
        }
        eprintln!("cairn: {e}");
    }
    if server.is_some() && !linger.is_zero() {
        tokio::time::sleep(linger).await;
    }
    result
}

/// Runs the job `run` describes and reports it; returns the exit code.
async fn run_job(run: RunArgs, options: &StorageOptions) -> CliResult<u8> {
    let RunArgs {
        input,
        include_paths,
        output,
        output_format,
        mode,
        partition_by,
        max_open_files,
        checkpoint,
        id_column,
        batch_size,
        workers,
        duplicate_check_max_ids,
        commit_every_rows,
        commit_every_secs,
        keep_checkpoint,
        map_cmds,
        map_timeout,
        lease_ttl,
        select,
        json,
        quiet,
        ..
    } = run;
    let mut source = input.source()?;
    if include_paths {
        source = source.with_paths();
    }
    let mut dataset = Dataset::from_source(source);
    for command in &map_cmds {
        dataset = match map_timeout {
            Some(timeout) => dataset.map_command_with_timeout(command, timeout),
            None => dataset.map_command(command),
        };
    }
    if !select.is_empty() {
        dataset = dataset.select_columns(select);
    }
    let mut ctx = JobContext::new()
        .storage_options(options.clone())
        .batch_size(batch_size);
    ctx.duplicate_check_max_ids = duplicate_check_max_ids;
    if let Some(n) = workers {
        ctx = ctx.workers(n);
    }
    if let Some(path) = checkpoint {
        let id = key_name(&id_column.expect("clap requires --id-column with --checkpoint"))?;
        let mut config = CheckpointConfig::new(&id, &path);
        config.storage_options = options.clone();
        config.commit_rows = commit_every_rows;
        config.commit_interval = Duration::try_from_secs_f64(commit_every_secs)
            .map_err(|_| "--commit-every-secs must be a positive number of seconds")?;
        config.delete_checkpoint_on_success = !keep_checkpoint;
        config.lease_ttl = lease_ttl;
        ctx = ctx.checkpoint(config);
    } else if id_column.is_some() {
        return Err("--id-column only matters with --checkpoint; add --checkpoint URL to make the job resumable".into());
    }
    let sink = match output_format {
        Format::Parquet => Sink::parquet(&output),
        Format::Json => Sink::json(&output),
    }
    .mode(match mode {
        Mode::Error => SaveMode::ErrorIfExists,
        Mode::Append => SaveMode::Append,
        Mode::Overwrite => SaveMode::Overwrite,
    })
    .partition_by(partition_by)
    .max_open_files(max_open_files);
    let bar = (!quiet && std::io::stderr().is_terminal()).then(|| progress_bar(&ctx));
    let signals = crate::interrupt::on_signals(ctx.interrupt.clone());
    let result = dataset.write(&ctx, sink).await;
    if let Some((bar, ticker)) = bar {
        ticker.abort();
        bar.finish_and_clear();
    }
    let summary = match result {
        Err(e @ cairn_dataset::Error::Interrupted { .. }) => {
            eprintln!("cairn: {e}");
            return Ok(signals.exit_code());
        }
        other => other?,
    };
    report(&summary, json, ctx.checkpoint.as_ref())?;
    Ok(0)
}

/// The end-of-run summary (invariant 10: say what happened).
fn report(
    summary: &JobSummary,
    json: bool,
    checkpoint: Option<&CheckpointConfig>,
) -> CliResult<()> {
    if json {
        println!("{}", serde_json::to_string(summary)?);
        return Ok(());
    }
    let mut err = std::io::stderr().lock();
    if summary.units_rolled_back > 0 {
        writeln!(
            err,
            "recovered: rolled back {} unfinished units of an earlier run ({} data files deleted); their rows are redone",
            summary.units_rolled_back, summary.data_files_rolled_back
        )?;
    }
    // Counts that add up: input = already committed + processed; the
    // committed ones were skipped unread (row groups, files) or read and
    // dropped.
    let input = summary.rows_read + summary.rows_skipped_unread;
    let dropped = summary.rows_skipped - summary.rows_skipped_unread;
    writeln!(
        err,
        "rows: {input} in the input, {} already committed ({} skipped without reading, {dropped} read and dropped), {} processed, {} written; {} units committed, {} files ({:.1} MiB) in {:.2} s",
        summary.rows_skipped,
        summary.rows_skipped_unread,
        input - summary.rows_skipped,
        summary.rows_written,
        summary.units_committed,
        summary.files_written,
        summary.bytes_written as f64 / (1 << 20) as f64,
        summary.elapsed.as_secs_f64()
    )?;
    if summary.completed_before {
        writeln!(
            err,
            "a previous run had finished this job; its clean-up was interrupted and is now done: nothing was written"
        )?;
    } else if summary.all_already_committed() {
        let kept = checkpoint.is_some_and(|c| !c.delete_checkpoint_on_success);
        writeln!(
            err,
            "every input row was already committed{}: nothing was written",
            if kept {
                " (the checkpoint of a finished run was kept with --keep-checkpoint; remove it to run again from scratch)"
            } else {
                ""
            }
        )?;
    }
    if let Some(config) = checkpoint {
        if summary.checkpoint_removed {
            writeln!(err, "done; checkpoint {} removed", config.checkpoint_path)?;
        } else if config.delete_checkpoint_on_success {
            let files = &summary.checkpoint_foreign_files;
            writeln!(
                err,
                "done; checkpoint {} cleaned; files cairn did not write were left there: {}{}",
                config.checkpoint_path,
                files.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
                if files.len() > 5 { ", ..." } else { "" }
            )?;
        } else {
            writeln!(err, "done; checkpoint {} kept", config.checkpoint_path)?;
        }
    }
    Ok(())
}

/// `rows` rows of `uid` and `text` in `files` Parquet files.
/// What `cairn job sample` writes.
#[derive(Clone, Copy)]
struct SampleShape {
    rows: usize,
    files: usize,
    row_group_rows: usize,
    /// Values of the `source` column, if it is written.
    sources: Option<usize>,
}

async fn write_sample(
    output: &str,
    shape: &SampleShape,
    options: &StorageOptions,
) -> CliResult<()> {
    let SampleShape {
        rows,
        files,
        row_group_rows,
        sources,
    } = *shape;
    if files == 0 {
        return Err("--files must be at least 1".into());
    }
    let (fs, dir) = FileSystem::from_url(output, options)?;
    // Files of an earlier, larger sample would stay beside the new ones and
    // repeat its IDs.
    match fs
        .find_with(&dir, cairn_fs::FindOptions::new().max_depth(1))
        .await
    {
        Ok(found) if !found.is_empty() => {
            return Err(format!(
                "{} already holds files ({}, ...); write the sample into an empty directory (or remove it first)",
                fs.url(&dir),
                found[0].name
            )
            .into());
        }
        _ => {}
    }
    let per_file = rows.div_ceil(files);
    for file in 0..files {
        let start = (file * per_file).min(rows);
        let end = ((file + 1) * per_file).min(rows);
        let uid = Int64Array::from_iter_values(start as i64..end as i64);
        let text = StringArray::from_iter_values(
            (start..end)
                .map(|i| format!("sample row {i}: the quick brown fox jumps over the lazy dog")),
        );
        let mut columns = vec![
            ("uid", Arc::new(uid) as ArrayRef),
            ("text", Arc::new(text) as ArrayRef),
        ];
        if let Some(n) = sources {
            let source =
                StringArray::from_iter_values((start..end).map(|i| format!("source-{}", i % n)));
            columns.push(("source", Arc::new(source) as ArrayRef));
        }
        let batch = RecordBatch::try_from_iter(columns)?;
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(row_group_rows.max(1)))
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        let mut buffer = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut buffer, batch.schema(), Some(props))?;
        writer.write(&batch)?;
        writer.close()?;
        let path = format!("{}/part-{file:05}.parquet", dir.trim_end_matches('/'));
        fs.pipe(&path, buffer.into(), WriteMode::Overwrite).await?;
    }
    Ok(())
}

/// A number of seconds in `min..=max`, as a duration; the flag's name and
/// the bounds are in the error.
fn seconds_between(text: &str, min: f64, max: f64) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs >= min && secs <= max => Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("{text:?} is not a number of seconds")),
        Ok(secs) if secs.is_nan() => Err(format!("{text:?} is not a number of seconds")),
        Ok(_) => Err(format!("give between {min} and {max} seconds, not {text}")),
        Err(_) => Err(format!("{text:?} is not a number of seconds")),
    }
}

/// `--map-timeout`: above zero, at most a week (a longer wait is no limit:
/// leave the flag out).
fn map_timeout_seconds(text: &str) -> Result<Duration, String> {
    if text.parse::<f64>().is_ok_and(|secs| secs <= 0.0) {
        return Err(format!("{text:?} is not a number of seconds above 0"));
    }
    seconds_between(text, f64::MIN_POSITIVE, 7.0 * 86_400.0)
        .map_err(|e| format!("{e} (leave --map-timeout out for no limit)"))
}

/// `--lease-ttl`: at least 3 s (it is renewed every third of it), at most
/// a day.
fn lease_ttl_seconds(text: &str) -> Result<Duration, String> {
    seconds_between(text, 3.0, 86_400.0)
}

/// A count of at least 1 (`--batch-size`, `--workers`).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err("it must be at least 1".into()),
        Err(_) => Err(format!("{text:?} is not a whole number")),
    }
}
