//! The library's front door: [`Checkpoint`] names a job's checkpoint and
//! opens it for a [`Run`], which hands out units, writes their pending
//! records, commits them behind the lease, and ends the run in the order
//! the protocol needs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arrow_array::ArrayRef;
use cairn_fs::{FileSystem, StorageOptions, build_checkpoint_filesystem, split_protocol};

use crate::cleanup::CleanupReport;
use crate::config::{CheckpointConfig, OpenCheckpoint};
use crate::error::{Error, Result};
use crate::idset::{IdSet, Kind, StringMode};
use crate::layout::UnitName;
use crate::recover::RecoveryReport;

/// A job's checkpoint: where it lives, the column that identifies an input
/// row, and how a run ends. [`Checkpoint::open`] starts a run.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use cairn_checkpoint::{Checkpoint, arrow::array::{ArrayRef, Int64Array}};
/// use cairn_fs::{FileSystem, StorageOptions};
/// use std::sync::Arc;
///
/// let output = FileSystem::new("memory", &StorageOptions::new()).unwrap();
/// let checkpoint = Checkpoint::at("memory:///doc-run/ckpt", &StorageOptions::new(), "id").unwrap();
/// let run = checkpoint.open(&output, "memory:///doc-run/out").await.unwrap();
/// let unit = run.next_unit();
/// let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
/// run.begin(&unit, ids.clone()).await.unwrap();
/// let file = format!("memory:///doc-run/out/{}", unit.data_file(0, "jsonl"));
/// run.output_fs().pipe(&file, "{}\n".into(), cairn_fs::WriteMode::Create).await.unwrap();
/// run.commit(&unit, ids, 1).await.unwrap();
/// let report = run.finish().await.unwrap();
/// assert!(report.removed_directory);
/// # })
/// ```
#[derive(Debug, Clone)]
pub struct Checkpoint {
    config: CheckpointConfig,
}

impl Checkpoint {
    /// The checkpoint at `url` (a URL or an absolute local path), on the
    /// filesystem its scheme names with `options`, built with the
    /// checkpoint preset (no listing cache: every decision asks the store).
    pub fn at(url: &str, options: &StorageOptions, id_column: &str) -> Result<Self> {
        let mut config = CheckpointConfig::new(id_column, url);
        config.storage_options = options.clone();
        config.validate()?;
        let (fs, _) = build_checkpoint_filesystem(url, options)?;
        config.filesystem = Some(fs);
        Ok(Self { config })
    }

    /// The checkpoint at `path` on `fs`, a filesystem the caller built (its
    /// listing cache, if any, is never consulted: the checkpoint reads
    /// through [`FileSystem::uncached`]). A `path` whose scheme is not
    /// `fs`'s protocol is refused.
    ///
    /// ```
    /// use cairn_fs::{FileSystem, StorageOptions};
    /// let fs = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    /// assert!(cairn_checkpoint::Checkpoint::on(&fs, "memory:///ckpt", "id").is_ok());
    /// let err = cairn_checkpoint::Checkpoint::on(&fs, "s3://bucket/ckpt", "id").unwrap_err();
    /// assert!(err.to_string().contains("s3://bucket/ckpt"));
    /// ```
    pub fn on(fs: &FileSystem, path: &str, id_column: &str) -> Result<Self> {
        let (scheme, _) = split_protocol(path);
        let served = |scheme: &str| {
            cairn_fs::Registry::global()
                .resolve(scheme)
                .is_ok_and(|factory| factory.schemes().contains(&fs.protocol()))
        };
        if let Some(scheme) = scheme
            && !served(&scheme)
        {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "checkpoint path {path} is not on the given filesystem (protocol {}); give a path of that filesystem, or build the checkpoint with Checkpoint::at",
                    fs.protocol()
                ),
            });
        }
        let mut config = CheckpointConfig::new(id_column, path);
        config.validate()?;
        config.filesystem = Some(fs.uncached());
        Ok(Self { config })
    }

    /// Keep the checkpoint's files when a run finishes (by default
    /// [`Run::finish`] deletes them: the job is done).
    pub fn keep_on_success(mut self) -> Self {
        self.config.delete_checkpoint_on_success = false;
        self
    }

    /// The lease's lifetime (120 s by default, at least 3 s): how long a
    /// crashed run's checkpoint stays locked when the crashed process cannot
    /// be seen to be gone (another machine).
    pub fn lease_ttl(mut self, ttl: Duration) -> Result<Self> {
        self.config.lease_ttl = ttl;
        self.config.validate()?;
        Ok(self)
    }

    /// How string IDs are held in memory (128-bit fingerprints by default).
    pub fn string_mode(mut self, mode: StringMode) -> Self {
        self.config.string_mode = mode;
        self
    }

    /// Starts a run writing to `output_dir` on `output_fs`: takes the
    /// lease (renewed in the background from then on), refuses a checkpoint
    /// of another job, rolls back what a crashed run left pending (its data
    /// files in the output included), and loads the committed IDs.
    pub async fn open(&self, output_fs: &FileSystem, output_dir: &str) -> Result<Run> {
        let open = self.config.open(output_fs, output_dir).await?;
        let kind = open.state.ids.kind();
        Ok(Run {
            open,
            output_fs: output_fs.clone(),
            output_dir: output_dir.trim_end_matches('/').to_string(),
            delete_on_success: self.config.delete_checkpoint_on_success,
            next_seq: AtomicU64::new(0),
            kind: Mutex::new(kind),
        })
    }
}

/// One run of a job on its checkpoint, from [`Checkpoint::open`]: the lease
/// held, the last run's pending units rolled back, the committed IDs
/// loaded. Each unit of output goes [`Run::next_unit`], [`Run::begin`], its
/// data files written (named by [`UnitName::data_file`]), [`Run::commit`].
/// A run ends with [`Run::finish`] (success) or [`Run::abandon`] (failure:
/// the checkpoint kept for the next run). A run that crashes ends neither
/// way; the next one rolls back its uncommitted unit.
#[derive(Debug)]
pub struct Run {
    open: OpenCheckpoint,
    output_fs: FileSystem,
    output_dir: String,
    delete_on_success: bool,
    next_seq: AtomicU64,
    /// The kind of ID the checkpoint holds, once known.
    kind: Mutex<Option<Kind>>,
}

impl Run {
    /// The IDs committed before this run: rows to skip.
    pub fn committed(&self) -> &IdSet {
        &self.open.state.ids
    }

    /// What opening rolled back of the last run.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.open.recovery
    }

    /// The output's filesystem, as given to [`Checkpoint::open`].
    pub fn output_fs(&self) -> &FileSystem {
        &self.output_fs
    }

    /// The output directory, as given to [`Checkpoint::open`].
    pub fn output_dir(&self) -> &str {
        &self.output_dir
    }

    /// A new unit's name, unique to this run. A unit's data files are named
    /// by [`UnitName::data_file`] in the output directory, so recovery can
    /// find them.
    pub fn next_unit(&self) -> UnitName {
        UnitName::new(
            &self.open.run,
            self.next_seq.fetch_add(1, Ordering::Relaxed),
        )
    }

    /// Step 1: records that `unit` is about to write data files for the
    /// input rows `ids`, before any of them is written. Refused once the
    /// lease is lost or expired, and for IDs of another kind than the
    /// checkpoint's (integers where strings are committed, or the reverse).
    pub async fn begin(&self, unit: &UnitName, ids: ArrayRef) -> Result<()> {
        self.check_kind(&ids)?;
        self.open
            .keeper
            .fenced(self.open.dir.write_pending(unit, ids))
            .await
    }

    /// Step 3: commits `unit` once its `data_files` data files are all
    /// written, only while this run holds the lease and the unit's pending
    /// record is still there. After this, its rows are never written again.
    pub async fn commit(&self, unit: &UnitName, ids: ArrayRef, data_files: usize) -> Result<()> {
        self.check_kind(&ids)?;
        self.open
            .dir
            .commit_fenced(&self.open.keeper, unit, ids, data_files)
            .await
    }

    /// Ends a successful run: stops renewing the lease, then (unless the
    /// checkpoint was made with [`Checkpoint::keep_on_success`]) deletes the
    /// checkpoint's files and the directory, or else releases the lease.
    /// Files in the checkpoint that are not the protocol's are kept and
    /// listed in the report. Call it once every unit is committed: a unit
    /// begun and not committed is rolled back here, its data files deleted.
    pub async fn finish(self) -> Result<CleanupReport> {
        let lease = self.open.keeper.stop().await?;
        if self.delete_on_success {
            self.open
                .dir
                .clean_up(Some((&self.output_fs, self.output_dir.as_str())))
                .await
        } else {
            self.open.dir.release_lease(lease).await?;
            Ok(CleanupReport::default())
        }
    }

    /// Ends a failed run: releases the lease so the next run need not wait
    /// for it, and keeps everything else. Units begun and not committed
    /// are rolled back by the next run.
    pub async fn abandon(self) -> Result<()> {
        let lease = self.open.keeper.stop().await?;
        self.open.dir.release_lease(lease).await
    }

    fn check_kind(&self, ids: &ArrayRef) -> Result<()> {
        let given = Kind::of(ids.data_type())?;
        let mut held = self.kind.lock().expect("id kind");
        match *held {
            Some(kind) if kind != given => Err(Error::IdTypeMismatch {
                expected: kind.name(),
                found: given.name(),
            }),
            Some(_) => Ok(()),
            None => {
                *held = Some(given);
                Ok(())
            }
        }
    }
}
