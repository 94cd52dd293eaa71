//! `cairn ckpt`: inspect and repair checkpoint directories (cairn's or Ray Data's).

use std::io::Write;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use cairn_checkpoint::internals::{
    CheckpointConfig, CheckpointDir, JobRecord, classify, decode_ids, found_layout, infer_id_column,
};
use cairn_checkpoint::{Checkpoint, StringMode, UnitName};
use cairn_fs::{FileSystem, StorageOptions, build_checkpoint_filesystem};
use clap::Subcommand;

/// The `cairn ckpt` subcommands.
#[derive(Subcommand, Debug)]
pub enum CkptCommand {
    /// Committed units and IDs, pending units, the lease holder.
    Status {
        /// The checkpoint directory (URL or absolute path).
        path: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check that every committed unit has data files in OUTPUT; list orphans
    /// (data files of no committed unit). Exits 1 if a committed unit has no data.
    Verify {
        /// The checkpoint directory (URL or absolute path).
        path: String,
        /// The job's output directory.
        #[arg(long)]
        output: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run recovery by hand: roll back pending units (takes the lease).
    Gc {
        /// The checkpoint directory (URL or absolute path).
        path: String,
        /// The job's output directory (where pending units' data files are).
        #[arg(long)]
        output: String,
    },
    /// Print every committed ID, one per line.
    Ids {
        /// The checkpoint directory (URL or absolute path).
        path: String,
    },
}

type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The checkpoint at `path`, its filesystem, and its ID column (read from
/// its files; `None` for an empty checkpoint).
async fn open(
    path: &str,
    options: &StorageOptions,
) -> CliResult<(FileSystem, CheckpointDir, Option<String>)> {
    let (fs, _) = build_checkpoint_filesystem(path, options)?;
    if !fs.exists(path).await? {
        return Err(format!(
            "no checkpoint at {}: nothing is there. Check the path (a finished run removes its checkpoint)",
            fs.url(&fs.strip(path)?)
        )
        .into());
    }
    let column = infer_id_column(&fs, path).await?;
    let dir = CheckpointDir::new(fs.clone(), path, column.as_deref().unwrap_or("id"));
    Ok((fs, dir, column))
}

/// `dir` with the layout of its job's output `out_path`: as the job record
/// `job` says when `cairn job run` completed it (it records the partition
/// columns, none for a flat output); otherwise (a Ray Data write, which
/// records none) partitioned when the output holds directories.
async fn with_output_layout(
    dir: CheckpointDir,
    job: Option<&JobRecord>,
    out_fs: &FileSystem,
    out_path: &str,
) -> CliResult<CheckpointDir> {
    let layout = match job {
        Some(job) if job.format.is_some() || !job.partition_by.is_empty() => job.layout(),
        _ => found_layout(out_fs, out_path).await?,
    };
    Ok(dir.with_layout(layout))
}

/// The table format whose files `out_path` holds, by the directory each
/// keeps its log in (Delta's `_delta_log`, Lance's `_versions`, Iceberg's
/// `metadata`), or "a table" when the job record says the output is one;
/// `None` for a file output.
async fn table_format(
    job: Option<&JobRecord>,
    out_fs: &FileSystem,
    out_path: &str,
) -> CliResult<Option<&'static str>> {
    let base = out_path.trim_end_matches('/');
    let fs = out_fs.uncached();
    for (log, format) in [("_delta_log", "Delta"), ("_versions", "Lance")] {
        if fs.exists(&format!("{base}/{log}")).await? {
            return Ok(Some(format));
        }
    }
    // A directory named `metadata` alone could be anyone's: Iceberg's
    // holds its `<n>-<uuid>.metadata.json` files.
    let metadata = format!("{base}/metadata");
    if fs.exists(&metadata).await?
        && fs
            .ls(&metadata)
            .await?
            .iter()
            .any(|entry| entry.name.ends_with(".metadata.json"))
    {
        return Ok(Some("Iceberg"));
    }
    Ok(job.filter(|job| job.table_output).map(|_| "a table"))
}

/// Refuses `cairn ckpt COMMAND` on the checkpoint `path` of a job whose
/// output is a table, changing nothing: which of its pending units reached
/// the table only the table's log says, and rolling back one the table
/// holds writes its rows again on the resume.
async fn refuse_table(
    job: Option<&JobRecord>,
    out_fs: &FileSystem,
    out_path: &str,
    path: &str,
    command: &str,
) -> CliResult<()> {
    let Some(format) = table_format(job, out_fs, out_path).await? else {
        return Ok(());
    };
    let table = out_fs.url(&out_fs.strip(out_path)?);
    let why = match command {
        "gc" => {
            "its pending units are settled by the table's log (a unit the table holds is committed, not rolled back), which only cairn's Ray manager reads; rolling one back here would have the resume write its rows twice"
        }
        _ => {
            "the table names its own data files, so a unit's data is found through the table's log, not by file names"
        }
    };
    Err(format!(
        "cairn ckpt {command} refuses the checkpoint {path}: its output {table} is {} ({why}). Nothing was changed. Run the job again with cairn.ray.checkpoint_config: the resume settles every pending unit by the table's log before it writes, and checks every committed unit against the table",
        match format {
            "a table" => "a table".to_string(),
            format => format!("a {format} table"),
        }
    )
    .into())
}

/// Runs one `cairn ckpt` subcommand; returns the process exit code.
pub async fn run(command: CkptCommand, options: &StorageOptions) -> CliResult<u8> {
    let mut out = std::io::stdout().lock();
    match command {
        CkptCommand::Status { path, json } => {
            let (_, dir, column) = open(&path, options).await?;
            let state = dir.load(StringMode::default()).await?;
            let lease = dir.read_lease().await?;
            let in_flight: Vec<&UnitName> = state.in_flight().collect();
            if json {
                let report = serde_json::json!({
                    "path": path,
                    "id_column": column,
                    "committed_units": state.committed.len(),
                    "committed_ids": state.ids.len(),
                    "pending_units": state.pending.iter().map(|u| u.to_string()).collect::<Vec<_>>(),
                    "uncommitted_pending_units": in_flight.len(),
                    "lease": lease,
                    "foreign_files": state.foreign,
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                writeln!(out, "checkpoint       {path}")?;
                writeln!(
                    out,
                    "id column        {}",
                    column.as_deref().unwrap_or("(empty checkpoint)")
                )?;
                writeln!(out, "committed units  {}", state.committed.len())?;
                writeln!(out, "committed IDs    {}", state.ids.len())?;
                writeln!(
                    out,
                    "pending units    {} ({} not committed: recovery rolls them back)",
                    state.pending.len(),
                    in_flight.len()
                )?;
                match lease {
                    Some(l) => writeln!(out, "lease            {}", describe_lease(&l))?,
                    None => writeln!(out, "lease            none")?,
                }
                if !state.foreign.is_empty() {
                    writeln!(
                        out,
                        "other files      {} (never touched)",
                        state.foreign.join(", ")
                    )?;
                }
            }
            Ok(0)
        }
        CkptCommand::Verify { path, output, json } => {
            let (_, dir, _) = open(&path, options).await?;
            let (out_fs, out_path) = FileSystem::from_url(&output, options)?;
            let job = dir.check_output(&out_fs.url(&out_path)).await?;
            refuse_table(job.as_ref(), &out_fs, &out_path, &path, "verify").await?;
            let dir = with_output_layout(dir, job.as_ref(), &out_fs, &out_path).await?;
            let state = dir.load(StringMode::default()).await?;
            let check = dir.check_data(&state, &out_fs, &out_path).await?;
            let missing: Vec<String> = check.missing.iter().map(|u| u.to_string()).collect();
            if json {
                let report = serde_json::json!({
                    "committed_units": state.committed.len(),
                    "units_without_output": check.without_output,
                    "units_without_data": missing,
                    "orphan_files": check.orphans,
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
            } else {
                writeln!(
                    out,
                    "committed units with data  {} of {}",
                    check.with_data,
                    state.committed.len()
                )?;
                if check.without_output > 0 {
                    writeln!(
                        out,
                        "units without output       {} (every row filtered out: no data expected)",
                        check.without_output
                    )?;
                }
                for unit in &missing {
                    writeln!(out, "MISSING DATA  {unit}")?;
                }
                for orphan in &check.orphans {
                    writeln!(out, "orphan        {orphan}")?;
                }
            }
            Ok(if missing.is_empty() { 0 } else { 1 })
        }
        CkptCommand::Gc { path, output } => {
            let (fs, dir, column) = open(&path, options).await?;
            let (out_fs, out_path) = FileSystem::from_url(&output, options)?;
            cairn_checkpoint::internals::refuse_overlap(
                dir.fs(),
                &path,
                &out_fs,
                &out_path,
                "output",
            )?;
            // Refused before the lease is taken: a wrong output would roll
            // back pending records while their data stays in the real one.
            let job = dir.check_output(&out_fs.url(&out_path)).await?;
            refuse_table(job.as_ref(), &out_fs, &out_path, &path, "gc").await?;
            // The ID column the job recorded when no ID file is left (a
            // finished job's marker alone): a guessed one would make its
            // marker pass for another job's.
            let column = match column {
                Some(column) => column,
                None => match dir.recorded_id_column().await? {
                    Some(column) => column,
                    None => {
                        writeln!(
                            out,
                            "nothing to recover: the checkpoint holds no unit and no job record"
                        )?;
                        return Ok(0);
                    }
                },
            };
            let layout = with_output_layout(dir, job.as_ref(), &out_fs, &out_path)
                .await?
                .layout();
            // The one sequence every door runs: the lease taken and kept
            // alive while recovery runs, pending units rolled back, then
            // the lease released with everything else kept (or a finished
            // job's cut-short clean-up ended).
            let mut config = CheckpointConfig::new(&column, &path);
            config.filesystem = Some(fs);
            config.storage_options = options.clone();
            config.output_layout = layout;
            config.read_ids = false;
            let run = Checkpoint::with_config(config, None)
                .without_output_check()
                .open(&out_fs, &out_path)
                .await?;
            if run.finished_before() {
                let cleaned = run.finish().await?;
                writeln!(
                    out,
                    "the run had finished and its clean-up was interrupted; finished it ({} files deleted)",
                    cleaned.deleted
                )?;
                return Ok(0);
            }
            let report = run.recovery().clone();
            run.abandon().await?;
            writeln!(
                out,
                "rolled back {} units ({} data files deleted); released {} pending records of committed units",
                report.rolled_back.len(),
                report.data_files_deleted,
                report.released.len()
            )?;
            Ok(0)
        }
        CkptCommand::Ids { path } => {
            let (fs, _, column) = open(&path, options).await?;
            let Some(column) = column else {
                return Ok(0);
            };
            // An unreadable directory is an error, never an empty list.
            for entry in fs.ls(&path).await? {
                let base = entry.name.rsplit('/').next().unwrap_or(&entry.name);
                if !matches!(
                    classify(base),
                    cairn_checkpoint::internals::CheckpointFile::Committed(_)
                ) {
                    continue;
                }
                let bytes = fs.cat(&entry.name).await?;
                for array in decode_ids(&fs.url(&entry.name), bytes, &column)? {
                    print_ids(&mut out, array.as_ref())?;
                }
            }
            Ok(0)
        }
    }
}

fn print_ids(out: &mut impl Write, array: &dyn Array) -> CliResult<()> {
    use arrow_array::types::*;
    use arrow_schema::DataType;
    macro_rules! ints {
        ($t:ty) => {
            for v in array.as_primitive::<$t>().iter().flatten() {
                writeln!(out, "{v}")?;
            }
        };
    }
    match array.data_type() {
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt64 => ints!(UInt64Type),
        DataType::Utf8 => array
            .as_string::<i32>()
            .iter()
            .flatten()
            .try_for_each(|v| writeln!(out, "{v}"))?,
        DataType::LargeUtf8 => array
            .as_string::<i64>()
            .iter()
            .flatten()
            .try_for_each(|v| writeln!(out, "{v}"))?,
        other => writeln!(out, "(IDs of type {other} are not printable)")?,
    }
    Ok(())
}

/// The lease as a person reads it: who, and until when (a time, not a
/// count of seconds since 1970).
fn describe_lease(lease: &cairn_checkpoint::internals::LeaseRecord) -> String {
    let holder = format!("{} pid {} (run {})", lease.host, lease.pid, lease.run);
    let at = i64::try_from(lease.expires_at)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(|| lease.expires_at.to_string(), |t| t.to_string());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if lease.released {
        format!("released by {holder}: free")
    } else if lease.is_live() {
        format!(
            "held by {holder} until {at} (in {} s; renewed while that run lives)",
            lease.expires_at.saturating_sub(now)
        )
    } else {
        format!("expired at {at}, last held by {holder}: free (the next run takes it over)")
    }
}
