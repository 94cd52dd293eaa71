//! The job record, `.cairn-job.json`: what a checkpoint belongs to. Written
//! at the first open (output and ID column) and completed by the job runner
//! (format, `row_hash`, a fingerprint of every input file); every later run,
//! `cairn ckpt gc` and `cairn ckpt verify` are checked against it, so a typo
//! in an output URL or a rewritten input is refused instead of costing rows.
//! Checkpoints written by Ray Data have no record and keep working.

use cairn_fs::{ErrorKind, FileSystem, WriteMode};
use serde::{Deserialize, Serialize};

use crate::commit::CheckpointDir;
use crate::error::{Error, Result};
use crate::layout::JOB_FILE;

/// What a checkpoint belongs to.
///
/// ```
/// let record = cairn_checkpoint::internals::JobRecord::new("s3://b/out", "uid");
/// assert!(record.same_output("s3://b/out/"));
/// assert!(!record.same_output("s3://b/out2"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The output directory's URL.
    pub output: String,
    /// The ID column.
    pub id_column: String,
    /// The output format (`parquet`, `json`), once a job runner recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Whether the IDs are Ray Data's `row_hash` (derived from each file's
    /// path and row positions, so a changed input file changes them).
    #[serde(default)]
    pub row_hash: bool,
    /// The columns the output is partitioned by (hive-style directories),
    /// once a job runner recorded them; empty for a flat output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition_by: Vec<String>,
    /// Every input file runs on this checkpoint have read.
    #[serde(default)]
    pub inputs: Vec<InputFingerprint>,
    /// A digest of the input the job's last run read, from a door that
    /// lists it (Ray's): a finished job's marker binds the job to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_digest: Option<String>,
    /// The output already held rows when this checkpoint's first run
    /// opened it (a finished job's, or a table's), and the door counts the
    /// IDs the output holds as committed: every run of this job then
    /// skips them, resumes included, not only the IDs of its own units.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_ids_committed: bool,
    /// The output is a table (Delta, Iceberg, Lance) whose own log says
    /// which units reached it: only a door that reads that log (cairn's
    /// Ray manager) may settle this checkpoint's pending units.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub table_output: bool,
}

/// One input file as a run saw it.
///
/// ```
/// let a = cairn_checkpoint::internals::InputFingerprint {
///     url: "s3://b/in/a.parquet".into(),
///     size: 10,
///     etag: Some("e1".into()),
///     modified: Some("2026-12-01 10:00:00 UTC".into()),
/// };
/// let mut b = a.clone();
/// assert_eq!(a.change_from(&b), None);
/// b.modified = Some("2026-12-01 10:00:00.123 UTC".into());
/// assert_eq!(a.change_from(&b), None, "with ETags on both sides, they decide");
/// b.etag = Some("e2".into());
/// assert!(a.change_from(&b).unwrap().contains("ETag"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputFingerprint {
    /// The file's URL.
    pub url: String,
    /// Its size in bytes.
    pub size: u64,
    /// The store's ETag, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// Its last modification time, when the store gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
}

impl InputFingerprint {
    /// How `now` differs from this earlier sight of the same file, if it does.
    pub fn change_from(&self, now: &InputFingerprint) -> Option<String> {
        if self.size != now.size {
            return Some(format!(
                "its size went from {} to {} bytes",
                self.size, now.size
            ));
        }
        if let (Some(a), Some(b)) = (&self.etag, &now.etag) {
            // The ETag decides when both sides have one: the time's
            // precision differs between a listing (milliseconds on S3) and a
            // HEAD (seconds), so the same object can show two times.
            return (a != b).then(|| format!("its ETag went from {a} to {b}"));
        }
        if let (Some(a), Some(b)) = (&self.modified, &now.modified)
            && a != b
        {
            return Some(format!("it was modified at {b} (was {a})"));
        }
        None
    }
}

fn trimmed(url: &str) -> &str {
    let t = url.trim_end_matches('/');
    if t.is_empty() { url } else { t }
}

impl JobRecord {
    /// A record of a job writing to `output` with IDs in `id_column`.
    pub fn new(output: &str, id_column: &str) -> Self {
        Self {
            output: trimmed(output).to_string(),
            id_column: id_column.to_string(),
            format: None,
            row_hash: false,
            partition_by: Vec::new(),
            inputs: Vec::new(),
            input_digest: None,
            output_ids_committed: false,
            table_output: false,
        }
    }

    /// Whether `output` names the recorded output directory.
    pub fn same_output(&self, output: &str) -> bool {
        trimmed(&self.output) == trimmed(output)
    }

    /// Where the recorded job's data files sit under its output.
    pub fn layout(&self) -> crate::layout::OutputLayout {
        crate::layout::OutputLayout::for_partition_columns(&self.partition_by)
    }

    /// Checks a run that writes `format` partitioned by `partition_by`
    /// (none: flat) with `row_hash` IDs (or not) from the input files
    /// `inputs` against this record, and returns the record to write back
    /// (the new inputs added). With `row_hash` IDs a recorded
    /// file that is gone or changed is refused: its rows' hashes no longer
    /// match what was committed. New files are fine; with a real ID column
    /// any input change is.
    pub fn check_run(
        &self,
        checkpoint: &str,
        format: &str,
        partition_by: &[String],
        row_hash: bool,
        inputs: &[InputFingerprint],
    ) -> Result<JobRecord> {
        let mismatch = |what: &str, recorded: String, given: String| Error::JobMismatch {
            checkpoint: checkpoint.to_string(),
            what: what.to_string(),
            recorded,
            given,
        };
        if let Some(recorded) = &self.format
            && recorded != format
        {
            return Err(mismatch("output format", recorded.clone(), format.into()));
        }
        if self.format.is_some() && self.partition_by != partition_by {
            let describe = |columns: &[String]| match columns {
                [] => "none (a flat output)".to_string(),
                columns => columns.join(","),
            };
            return Err(mismatch(
                "partition columns",
                describe(&self.partition_by),
                describe(partition_by),
            ));
        }
        if self.format.is_some() && self.row_hash != row_hash {
            return Err(mismatch(
                "use of row_hash IDs",
                self.row_hash.to_string(),
                row_hash.to_string(),
            ));
        }
        let now: std::collections::HashMap<&str, &InputFingerprint> =
            inputs.iter().map(|f| (f.url.as_str(), f)).collect();
        if row_hash {
            for before in &self.inputs {
                let change = match now.get(before.url.as_str()) {
                    None => Some("it is gone (deleted or renamed)".to_string()),
                    Some(after) => before.change_from(after),
                };
                if let Some(change) = change {
                    return Err(Error::InputChanged {
                        checkpoint: checkpoint.to_string(),
                        file: before.url.clone(),
                        change,
                    });
                }
            }
        }
        let mut next = self.clone();
        next.format = Some(format.to_string());
        next.partition_by = partition_by.to_vec();
        next.row_hash = row_hash;
        let known: std::collections::HashSet<String> =
            self.inputs.iter().map(|f| f.url.clone()).collect();
        next.inputs
            .extend(inputs.iter().filter(|f| !known.contains(&f.url)).cloned());
        if !row_hash {
            // Only row_hash IDs depend on the files; keep what is there now.
            next.inputs = inputs.to_vec();
        }
        Ok(next)
    }
}

impl CheckpointDir {
    /// The job record, if this checkpoint has one.
    pub async fn read_job_record(&self) -> Result<Option<JobRecord>> {
        let url = self.file(JOB_FILE);
        match self.fs.cat(&url).await {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                Error::CorruptIdFile {
                    file: url.clone(),
                    reason: format!(
                        "the job record is not valid JSON ({e}); restore it, or move it away if you are sure which output this checkpoint belongs to"
                    ),
                }
            }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The ID column this checkpoint's job recorded: its job record's, or
    /// (a finished job whose clean-up was cut short, the record deleted)
    /// its completion marker's; `None` when neither names one.
    pub async fn recorded_id_column(&self) -> Result<Option<String>> {
        if let Some(record) = self.read_job_record().await? {
            return Ok(Some(record.id_column));
        }
        Ok(self
            .read_marker()
            .await?
            .and_then(|marker| marker.job)
            .map(|job| job.id_column))
    }

    /// Writes the job record (the caller holds the lease).
    pub async fn write_job_record(&self, record: &JobRecord) -> Result<()> {
        let body = serde_json::to_vec_pretty(record).expect("the record serializes");
        self.fs
            .pipe(&self.file(JOB_FILE), body.into(), WriteMode::Overwrite)
            .await?;
        Ok(())
    }

    /// Refuses an output other than the recorded one, naming both URLs;
    /// returns the record (`None` for a checkpoint without one, such as
    /// Ray Data's).
    pub async fn check_output(&self, output_url: &str) -> Result<Option<JobRecord>> {
        let record = self.read_job_record().await?;
        if let Some(record) = &record
            && !record.same_output(output_url)
        {
            return Err(Error::OutputMismatch {
                checkpoint: self.url()?,
                recorded: record.output.clone(),
                given: trimmed(output_url).to_string(),
            });
        }
        Ok(record)
    }
}

/// Refuses a checkpoint directory that is, contains or lies inside `other`
/// (the output, or an input), before anything is written: clean-up and
/// recovery would then touch the other's files.
///
/// ```
/// let (fs, _) = cairn_fs::FileSystem::from_url("/tmp", &Default::default()).unwrap();
/// assert!(cairn_checkpoint::internals::refuse_overlap(&fs, "/data/ckpt", &fs, "/data/out", "output").is_ok());
/// assert!(cairn_checkpoint::internals::refuse_overlap(&fs, "/data/out/ckpt", &fs, "/data/out", "output").is_err());
/// assert!(cairn_checkpoint::internals::refuse_overlap(&fs, "/data", &fs, "/data/out", "output").is_err());
/// assert!(cairn_checkpoint::internals::refuse_overlap(&fs, "/data/out/", &fs, "/data/out", "output").is_err());
/// ```
pub fn refuse_overlap(
    checkpoint_fs: &FileSystem,
    checkpoint: &str,
    other_fs: &FileSystem,
    other: &str,
    role: &str,
) -> Result<()> {
    if paths_overlap(checkpoint_fs, checkpoint, other_fs, other)? {
        return Err(Error::Overlap {
            checkpoint: checkpoint_fs.url(&checkpoint_fs.strip(checkpoint)?),
            other: other_fs.url(&other_fs.strip(other)?),
            role: role.to_string(),
        });
    }
    Ok(())
}

/// Whether two locations overlap: on the same kind of store, one is the
/// other or lies inside it (a root path, `""` or `/`, contains everything).
///
/// ```
/// let (fs, _) = cairn_fs::FileSystem::from_url("/tmp", &Default::default()).unwrap();
/// assert!(cairn_checkpoint::internals::paths_overlap(&fs, "/d/in", &fs, "/d").unwrap());
/// assert!(cairn_checkpoint::internals::paths_overlap(&fs, "/d", &fs, "/d/in/").unwrap());
/// assert!(!cairn_checkpoint::internals::paths_overlap(&fs, "/d/in", &fs, "/d/input").unwrap());
/// ```
pub fn paths_overlap(a_fs: &FileSystem, a: &str, b_fs: &FileSystem, b: &str) -> Result<bool> {
    if a_fs.protocol() != b_fs.protocol() {
        return Ok(false);
    }
    let a = a_fs.strip(a)?;
    let b = b_fs.strip(b)?;
    let within = |inner: &str, outer: &str| {
        let outer = outer.trim_end_matches('/');
        inner == outer || outer.is_empty() || inner.starts_with(&format!("{outer}/"))
    };
    Ok(within(&a, &b) || within(&b, &a))
}
