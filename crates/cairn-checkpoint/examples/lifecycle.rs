//! A checkpoint's whole life on one store, as docs/library.md walks it: a
//! run commits three units of ten IDs, crashes while writing the fourth,
//! and the next run rolls that unit back (its data file deleted), skips the
//! thirty committed IDs, writes the last ten and finishes (the checkpoint
//! deleted). Then the output is read back: every ID 0..40 exactly once.
//!
//!     cargo run -p cairn-checkpoint --example lifecycle -- BASE
//!
//! BASE is a directory URL: `/tmp/cairn-demo` (local disk), `memory:///demo`,
//! `s3://bucket/demo` (credentials and endpoint from the AWS_* variables,
//! as the AWS CLI reads them). On local disk and S3 the crash is real: the
//! first run is a child process that aborts mid-unit. memory:// lives in
//! one process (killing it would take the store with it), so there the
//! first run is dropped mid-unit instead: a dropped run releases its lease,
//! and the next run of the same process takes the checkpoint at once and
//! rolls the dropped run's unit back, as after a crash.

use std::collections::BTreeMap;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use cairn_checkpoint::arrow::array::{ArrayRef, Int64Array};
use cairn_checkpoint::{Checkpoint, Error, Run};
use cairn_fs::{FileSystem, StorageOptions, WriteMode};

const IDS: i64 = 40;
const UNIT: i64 = 10;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some(base) = args.get(1) else {
        eprintln!(
            "usage: lifecycle BASE [--crash]   (BASE: /tmp/dir, memory:///dir, s3://bucket/dir)"
        );
        return ExitCode::from(2);
    };
    let outcome = match args.get(2).map(String::as_str) {
        Some("--crash") => crashing_run(base).await,
        _ => lifecycle(base, &args[0]).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lifecycle: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The job's two halves: where it writes, and its checkpoint.
struct Job {
    output: FileSystem,
    output_dir: String,
    checkpoint: Checkpoint,
}

impl Job {
    fn new(base: &str) -> Result<Self> {
        let base = base.trim_end_matches('/');
        let options = StorageOptions::new();
        let output_dir = format!("{base}/out");
        let (output, _) = FileSystem::from_url(&output_dir, &options)?;
        // A short lease: a crashed child's lease is freed at once on this
        // machine (its process is seen gone), elsewhere after 3 s.
        let checkpoint = Checkpoint::at(&format!("{base}/ckpt"), &options, "id")?
            .lease_ttl(Duration::from_secs(3))?;
        Ok(Self {
            output,
            output_dir,
            checkpoint,
        })
    }

    /// Opens a run; a lease still held by a crashed run another machine
    /// cannot see gone is waited out.
    async fn open(&self) -> Result<Run> {
        for _ in 0..10 {
            match self.checkpoint.open(&self.output, &self.output_dir).await {
                Err(Error::LeaseHeld { .. }) => tokio::time::sleep(Duration::from_secs(1)).await,
                other => return Ok(other?),
            }
        }
        Err("the checkpoint's lease was never released".into())
    }

    /// One unit: pending record, data file (one ID a line), commit.
    async fn write_unit(&self, run: &Run, ids: Vec<i64>, commit: bool) -> Result<()> {
        let unit = run.next_unit();
        let body: String = ids.iter().map(|id| format!("{id}\n")).collect();
        let ids: ArrayRef = Arc::new(Int64Array::from(ids));
        run.begin(&unit, ids).await?;
        let file = format!("{}/{}", self.output_dir, unit.data_file(0, "txt"));
        run.fenced(self.output.pipe(&file, body.into(), WriteMode::Create))
            .await?;
        if commit {
            run.commit(&unit, 1).await?;
        }
        Ok(())
    }
}

/// The first run: three units committed, a fourth begun and its data file
/// written, then the crash before its commit.
async fn crashing_run(base: &str) -> Result<()> {
    let job = Job::new(base)?;
    let run = job.open().await?;
    for first in (0..3 * UNIT).step_by(UNIT as usize) {
        job.write_unit(&run, (first..first + UNIT).collect(), true)
            .await?;
    }
    job.write_unit(&run, (3 * UNIT..4 * UNIT).collect(), false)
        .await?;
    println!("first run: 3 units committed, the 4th written and not committed; crashing");
    if base.starts_with("memory:") {
        drop(run);
        return Ok(());
    }
    std::process::abort()
}

async fn lifecycle(base: &str, program: &str) -> Result<()> {
    let job = Job::new(base)?;
    if base.starts_with("memory:") {
        // memory:// is this process's: the crash is a dropped run.
        crashing_run(base).await?;
    } else {
        let status = Command::new(program).args([base, "--crash"]).status()?;
        if status.success() {
            return Err("the crashing run did not crash".into());
        }
    }

    let run = job.open().await?;
    let recovery = run.recovery();
    println!(
        "second run: rolled back {} unit(s), deleted {} data file(s); {} IDs committed",
        recovery.rolled_back.len(),
        recovery.data_files_deleted,
        run.committed().len()
    );
    if (recovery.rolled_back.len(), recovery.data_files_deleted) != (1, 1) {
        return Err(format!("expected one unit and its file rolled back: {recovery:?}").into());
    }
    let input = Int64Array::from((0..IDS).collect::<Vec<_>>());
    let done = run.is_committed(&input)?;
    let todo: Vec<i64> = input
        .iter()
        .zip(done.iter())
        .filter(|(_, done)| *done != Some(true))
        .filter_map(|(id, _)| id)
        .collect();
    if todo != (3 * UNIT..IDS).collect::<Vec<_>>() {
        return Err(format!("expected IDs 30..40 left to do, not {todo:?}").into());
    }
    job.write_unit(&run, todo, true).await?;
    let report = run.finish().await?;
    println!(
        "finished: checkpoint removed: {}, {} files deleted",
        report.removed_directory, report.deleted
    );
    if !report.removed_directory {
        return Err("the checkpoint was not removed".into());
    }

    // The oracle: the output files as they are, each ID counted.
    let mut seen = BTreeMap::<i64, usize>::new();
    for file in job.output.find(&job.output_dir).await? {
        let text = String::from_utf8(job.output.cat(&file.name).await?.to_vec())?;
        for line in text.lines() {
            *seen.entry(line.parse()?).or_default() += 1;
        }
    }
    if seen.len() != IDS as usize
        || seen.values().any(|&n| n != 1)
        || seen.keys().copied().ne(0..IDS)
    {
        return Err(format!("the output does not hold 0..{IDS} once each: {seen:?}").into());
    }
    println!("output: IDs 0..{IDS}, each exactly once");
    job.output
        .rm_with(
            &job.output_dir,
            cairn_fs::TreeOptions::new().recursive(true),
        )
        .await?;
    Ok(())
}
