//! The one way into a checkpoint: [`Checkpoint`] names a job's checkpoint
//! and opens it for a [`Run`], which hands out units, records each unit's
//! IDs once, commits them behind the lease, and ends the run in the order
//! the protocol needs. Every door (this library, the `cairn` job runner,
//! the Python package's Ray manager and table sinks) opens, commits and
//! ends through it, so a guarantee tested here holds for all of them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arrow_array::{Array, ArrayRef, BooleanArray};
use cairn_fs::{
    ErrorKind, FileSystem, StorageOptions, build_checkpoint_filesystem, split_protocol,
};

use crate::cleanup::CleanupReport;
use crate::config::{CheckpointConfig, OpenCheckpoint};
use crate::error::{Error, Result};
use crate::idset::{IdSet, Kind, StringMode};
use crate::layout::UnitName;
use crate::recover::RecoveryReport;

/// What the library's door says when a new checkpoint meets an output
/// that already holds files.
const LIBRARY_HATCH: &str = "build the checkpoint with Checkpoint::append_to_existing_output()";

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
/// run.begin(&unit, ids).await.unwrap();
/// let file = format!("memory:///doc-run/out/{}", unit.data_file(0, "jsonl"));
/// run.fenced(run.output_fs().pipe(&file, "{}\n".into(), cairn_fs::WriteMode::Create)).await.unwrap();
/// run.commit(&unit, 1).await.unwrap();
/// let report = run.finish().await.unwrap();
/// assert!(report.removed_directory);
/// # })
/// ```
#[derive(Debug, Clone)]
pub struct Checkpoint {
    config: CheckpointConfig,
    /// How a new checkpoint over an output holding files is refused (what
    /// the error tells the user to do), or `None`: such an output is fine.
    refuse_existing_output: Option<String>,
}

impl Checkpoint {
    /// The checkpoint at `url` (a URL or an absolute local path), on the
    /// filesystem its scheme names with `options`, built with the
    /// checkpoint preset (no listing cache: every decision asks the store).
    ///
    /// ```
    /// use cairn_fs::StorageOptions;
    /// assert!(cairn_checkpoint::Checkpoint::at("memory:///ckpt", &StorageOptions::new(), "id").is_ok());
    /// let err = cairn_checkpoint::Checkpoint::at("nosuch://bucket/ckpt", &StorageOptions::new(), "id").unwrap_err();
    /// assert!(err.to_string().contains("\"nosuch\""), "{err}");
    /// ```
    pub fn at(url: &str, options: &StorageOptions, id_column: &str) -> Result<Self> {
        let mut config = CheckpointConfig::new(id_column, url);
        config.storage_options = options.clone();
        config.validate()?;
        let (fs, _) = build_checkpoint_filesystem(url, options)?;
        config.filesystem = Some(fs);
        Ok(Self::from_config(config))
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
        on_filesystem(
            fs,
            path,
            "checkpoint path",
            "build the checkpoint with Checkpoint::at",
        )?;
        let mut config = CheckpointConfig::new(id_column, path);
        config.validate()?;
        config.filesystem = Some(fs.uncached());
        Ok(Self::from_config(config))
    }

    /// The checkpoint the settings `config` name (cairn's other doors build
    /// theirs with partition layouts, table logs and sharded loading), with
    /// the library's refusal of an output that holds files.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub(crate) fn from_config(config: CheckpointConfig) -> Self {
        Self {
            config,
            refuse_existing_output: Some(LIBRARY_HATCH.to_string()),
        }
    }

    /// Keep the checkpoint's files when a run finishes (by default
    /// [`Run::finish`] deletes them: the job is done).
    pub fn keep_on_success(mut self) -> Self {
        self.config.delete_checkpoint_on_success = false;
        self
    }

    /// Accept an output that already holds files when the checkpoint has
    /// nothing committed. By default [`Checkpoint::open`] refuses that with
    /// [`Error::OutputNotEmpty`]: the files are another run's (a finished
    /// job whose checkpoint was deleted, say), and the rows written now
    /// would sit beside them twice.
    ///
    /// ```
    /// use cairn_fs::StorageOptions;
    /// let checkpoint = cairn_checkpoint::Checkpoint::at("memory:///ckpt", &StorageOptions::new(), "id")
    ///     .unwrap()
    ///     .append_to_existing_output();
    /// # let _ = checkpoint;
    /// ```
    pub fn append_to_existing_output(mut self) -> Self {
        self.refuse_existing_output = None;
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

    /// How string IDs are held in memory (96-bit fingerprints by default,
    /// or exactly: see [`StringMode`]).
    pub fn string_mode(mut self, mode: StringMode) -> Self {
        self.config.string_mode = mode;
        self
    }

    /// Starts a run writing to `output_dir` on `output_fs`: takes the
    /// lease (renewed in the background from then on), refuses a checkpoint
    /// of another job, rolls back what a crashed run left pending (its data
    /// files in the output included), loads the committed IDs, and checks
    /// the output against them: a committed unit whose data files are gone
    /// is [`Error::DataMissing`] (its rows would be skipped for ever), and
    /// a checkpoint with nothing committed over an output that holds files
    /// is [`Error::OutputNotEmpty`] (unless
    /// [`Checkpoint::append_to_existing_output`]). A refused open releases
    /// the lease and changes nothing else, but for removing the
    /// checkpoint it made itself.
    pub async fn open(&self, output_fs: &FileSystem, output_dir: &str) -> Result<Run> {
        on_filesystem(
            output_fs,
            output_dir,
            "output directory",
            "build the output's filesystem with FileSystem::from_url(output_dir, ...)",
        )?;
        let open = self.config.open(output_fs, output_dir).await?;
        let kind = open.state.ids.kind();
        let run = Run {
            open,
            output_fs: output_fs.clone(),
            output_dir: output_dir.trim_end_matches('/').to_string(),
            delete_on_success: self.config.delete_checkpoint_on_success,
            table_output: self.config.unit_log.is_some(),
            next_seq: AtomicU64::new(0),
            kind: Mutex::new(kind),
            in_flight: Mutex::new(HashMap::new()),
        };
        match run.check_output(self).await {
            Ok(()) => Ok(run),
            Err(e) => {
                run.end_refused().await;
                Err(e)
            }
        }
    }
}

/// One run of a job on its checkpoint, from [`Checkpoint::open`]: the lease
/// held, the last run's pending units rolled back, the committed IDs
/// loaded and checked against the output. Each unit of output goes
/// [`Run::next_unit`], [`Run::begin`] with its IDs (recorded once, here),
/// its data files written (named by [`UnitName::data_file`], best behind
/// [`Run::fenced`]), [`Run::commit`].
///
/// A run ends with [`Run::finish`] (success: refused while a unit is begun
/// and not committed) or [`Run::abandon`] (failure: the checkpoint kept for
/// the next run). A run that is dropped without either (an error returned
/// with `?`) stops renewing its lease; a quarter of the lease's lifetime
/// later (the margin for writes it had sent) a run of the same process
/// takes the checkpoint, and a background task releases it. A run that
/// crashes ends neither way; the next one rolls back its uncommitted units.
pub struct Run {
    open: OpenCheckpoint,
    output_fs: FileSystem,
    output_dir: String,
    delete_on_success: bool,
    /// The output is a table whose log settles units: nothing in it is
    /// deleted by clean-up.
    table_output: bool,
    next_seq: AtomicU64,
    /// The kind of ID the checkpoint holds, once known.
    kind: Mutex<Option<Kind>>,
    /// Units begun and not yet committed, with the IDs their begin recorded.
    in_flight: Mutex<HashMap<UnitName, ArrayRef>>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("checkpoint", &self.open.dir.path())
            .field("run", &self.open.run.as_str())
            .field("output", &self.output_dir)
            .field("committed_ids", &self.open.state.ids.len())
            .field("in_flight", &self.in_flight().len())
            .finish()
    }
}

impl Run {
    /// The IDs committed before this run: rows to skip. The set answers
    /// for any kind of ID while it is empty; [`Run::is_committed`] checks
    /// the kind the same way on every run.
    pub fn committed(&self) -> &IdSet {
        &self.open.state.ids
    }

    /// Which of `ids` were committed before this run (true: skip the row).
    /// IDs of another kind than the checkpoint's, or than this run's first
    /// IDs, are [`Error::IdTypeMismatch`], on a fresh checkpoint as on a
    /// resumed one.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_checkpoint::{Checkpoint, arrow::array::{Int64Array, StringArray}};
    /// use cairn_fs::{FileSystem, StorageOptions};
    /// let output = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    /// let checkpoint = Checkpoint::at("memory:///doc-is/ckpt", &StorageOptions::new(), "id").unwrap();
    /// let run = checkpoint.open(&output, "memory:///doc-is/out").await.unwrap();
    /// assert_eq!(run.is_committed(&Int64Array::from(vec![1, 2])).unwrap().true_count(), 0);
    /// assert!(run.is_committed(&StringArray::from(vec!["a"])).is_err());
    /// run.abandon().await.unwrap();
    /// # })
    /// ```
    pub fn is_committed(&self, ids: &dyn Array) -> Result<BooleanArray> {
        self.check_kind(ids)?;
        self.open.state.ids.contains_array(ids)
    }

    /// What opening rolled back of the last run.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.open.recovery
    }

    /// Whether the checkpoint records that this job finished before and
    /// only its clean-up was cut short: every row is in the output, none
    /// may be written ([`Run::begin`] is refused), and [`Run::finish`]
    /// ends the clean-up. The committed set may then be incomplete (part of
    /// it was already deleted): do not filter by it.
    pub fn finished_before(&self) -> bool {
        self.open.state.complete
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
    /// input rows `ids`, before any of them is written; [`Run::commit`]
    /// commits exactly these IDs. Refused once the lease is lost or
    /// expired, for IDs of another kind than the checkpoint's (integers
    /// where strings are committed, or the reverse), and on a checkpoint
    /// whose job [`Run::finished_before`].
    pub async fn begin(&self, unit: &UnitName, ids: ArrayRef) -> Result<()> {
        self.begin_partitioned(unit, ids, &[]).await
    }

    /// Step 1 for a unit whose data files go into the partition directories
    /// `partitions` (none: the output itself). Only for a checkpoint whose
    /// layout is partitioned (the job runner's partitioned outputs): a flat
    /// one's data check would not look there.
    async fn begin_partitioned(
        &self,
        unit: &UnitName,
        ids: ArrayRef,
        partitions: &[String],
    ) -> Result<()> {
        if self.finished_before() {
            return Err(Error::JobFinished {
                checkpoint: self.open.dir.url()?,
            });
        }
        self.check_kind(ids.as_ref())?;
        // Counted as begun before the record is written: a begin whose
        // answer was lost may have left the record, and the unit must not
        // pass for finished.
        self.in_flight().insert(unit.clone(), ids.clone());
        self.open
            .keeper
            .fenced(self.open.dir.write_pending_in(unit, ids, partitions))
            .await
    }

    /// Runs `write` (a request of one of this run's units: a data file)
    /// behind the lease's fence: refused once the lease is lost or expired,
    /// and abandoned with [`Error::LeaseExpired`] if it is still running
    /// when the lease's deadline passes. So no request of this run is sent
    /// after another run may have taken the checkpoint over.
    pub async fn fenced<T, E>(&self, write: impl Future<Output = Result<T, E>>) -> Result<T>
    where
        Error: From<E>,
    {
        self.open.keeper.fenced(write).await
    }

    /// Steps 3 and 4: commits `unit` with the IDs its [`Run::begin`]
    /// recorded once its `data_files` data files are all written, only
    /// while this run holds the lease (no newer run took it, so none rolled
    /// the unit back), then drops the pending record. After this, its rows are
    /// never written again. A unit not begun in this run (or committed
    /// already) is [`Error::UnitNotBegun`].
    pub async fn commit(&self, unit: &UnitName, data_files: usize) -> Result<()> {
        let ids = self.in_flight().get(unit).cloned();
        let Some(ids) = ids else {
            return Err(Error::UnitNotBegun {
                checkpoint: self.open.dir.url()?,
                unit: unit.to_string(),
            });
        };
        self.open
            .dir
            .commit_fenced(&self.open.keeper, unit, ids, data_files)
            .await?;
        self.in_flight().remove(unit);
        crate::failpoint::crash_point("unit-after-commit");
        match self.open.dir.release_pending(unit).await {
            Ok(()) => {}
            Err(Error::Storage(e)) if e.kind() == ErrorKind::NotFound => {}
            // The unit is committed; a leftover pending record is settled
            // by the next run's recovery or this run's clean-up.
            Err(e) => tracing::warn!("unit {unit} committed; its pending record stays: {e}"),
        }
        Ok(())
    }

    /// Ends a successful run: stops renewing the lease, then (unless the
    /// checkpoint was made with [`Checkpoint::keep_on_success`]) deletes the
    /// checkpoint's files and the directory, or else releases the lease.
    /// Files in the checkpoint that are not the protocol's are kept and
    /// listed in the report.
    ///
    /// Refused with [`Error::UnitsNotCommitted`] while a unit is begun and
    /// not committed: the run is abandoned instead (the lease released, the
    /// checkpoint kept), so the next run rolls those units back and writes
    /// their rows.
    pub async fn finish(self) -> Result<CleanupReport> {
        self.end_success(false).await
    }

    /// The end of a successful run ([`Run::finish`]); with `leave_marker`,
    /// when it deletes the checkpoint, it stops before the last step: the
    /// completion marker stays (`marker_left`), saying the job finished,
    /// until it is removed (`CheckpointDir::remove_completion_marker`): a
    /// driver that removes it only when it exits cleanly leaves, when
    /// stopped otherwise after the job, a checkpoint on which a run again
    /// writes nothing.
    async fn end_success(self, leave_marker: bool) -> Result<CleanupReport> {
        let unfinished: Vec<UnitName> = {
            let mut units: Vec<UnitName> = self.in_flight().keys().cloned().collect();
            units.sort();
            units
        };
        if !unfinished.is_empty() {
            let checkpoint = self.open.dir.url()?;
            self.abandon().await?;
            return Err(Error::UnitsNotCommitted {
                checkpoint,
                units: unfinished.len(),
                examples: crate::layout::examples(&unfinished),
            });
        }
        crate::failpoint::crash_point("run-before-clean-up");
        // A finished job's cut-short clean-up is ended whatever this run
        // keeps: its marker says the checkpoint is being deleted.
        let keep = !self.delete_on_success && !self.finished_before();
        let lease = self.open.keeper.stop().await?;
        if keep {
            self.open.dir.release_lease(lease).await?;
            return Ok(CleanupReport::default());
        }
        // A table holds what it holds: nothing in it is cairn's to delete.
        let output = (!self.table_output).then_some((&self.output_fs, self.output_dir.as_str()));
        if leave_marker {
            self.open.dir.clean_up_to_marker(output).await
        } else {
            self.open.dir.clean_up(output).await
        }
    }

    /// Ends a failed run: releases the lease so the next run need not wait
    /// for it, and keeps everything else. Units begun and not committed
    /// are rolled back by the next run.
    pub async fn abandon(self) -> Result<()> {
        let lease = self.open.keeper.stop().await?;
        self.open.dir.release_lease(lease).await
    }

    /// Ends a run refused before its first unit (by [`Checkpoint::open`]'s
    /// checks, or by the caller's own planning): a checkpoint this run
    /// made (nothing was committed or pending, and it had no job record)
    /// loses the job record and the lease this run wrote, and the directory
    /// once empty (no completion marker: a removal cut short must never
    /// read as a finished job), since a record left in it would bind the
    /// path to a job that never ran; any other is kept, its lease released. Only while the
    /// lease is still this run's: a run that took it over owns the
    /// directory now. What fails here is logged: the refusal is the error
    /// to report.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_checkpoint::Checkpoint;
    /// use cairn_fs::{FileSystem, StorageOptions};
    /// let output = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    /// let checkpoint = Checkpoint::at("memory:///doc-refused/ckpt", &StorageOptions::new(), "id").unwrap();
    /// let run = checkpoint.open(&output, "memory:///doc-refused/out").await.unwrap();
    /// run.end_refused().await;
    /// assert!(!output.exists("memory:///doc-refused/ckpt/.cairn-job.json").await.unwrap());
    /// # })
    /// ```
    pub async fn end_refused(self) {
        if !self.open.fresh || !self.in_flight().is_empty() {
            if let Err(e) = self.abandon().await {
                tracing::warn!("could not release the checkpoint lease: {e}");
            }
            return;
        }
        match self.open.keeper.stop().await {
            Ok(lease) => {
                if let Err(e) = self.open.dir.remove_unused(lease).await {
                    tracing::warn!("could not remove the unused checkpoint: {e}");
                }
            }
            Err(lost) => tracing::warn!("the checkpoint is left as it is: {lost}"),
        }
    }

    /// The checks of an open against the output: a committed unit's data
    /// (or table record) gone, or a new checkpoint over files of another
    /// run.
    async fn check_output(&self, checkpoint: &Checkpoint) -> Result<()> {
        let state = &self.open.state;
        if state.complete || !checkpoint.config.check_output {
            return Ok(());
        }
        if self.table_output {
            // A table names its own files: its log, not their names, says
            // which units it holds, and was asked before anything was
            // settled (CheckpointConfig::open).
            return Ok(());
        }
        if !state.committed.is_empty() {
            return self
                .open
                .dir
                .require_data(state, &self.output_fs, &self.output_dir)
                .await;
        }
        let Some(hatch) = &checkpoint.refuse_existing_output else {
            return Ok(());
        };
        match crate::verify::first_file(&self.output_fs, &self.output_dir).await? {
            Some(example) => Err(Error::OutputNotEmpty {
                checkpoint: self.open.dir.url()?,
                output: self.output_fs.url(&self.output_fs.strip(&self.output_dir)?),
                example: self.output_fs.url(&example),
                hatch: hatch.clone(),
            }),
            None => Ok(()),
        }
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<UnitName, ArrayRef>> {
        self.in_flight.lock().expect("units in flight")
    }

    fn check_kind(&self, ids: &dyn Array) -> Result<()> {
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

/// Refuses a `path` (the `what` of a run) whose scheme `fs` does not
/// serve, with [`Error::InvalidConfig`] naming both and `fix`.
fn on_filesystem(fs: &FileSystem, path: &str, what: &str, fix: &str) -> Result<()> {
    let (scheme, _) = split_protocol(path);
    let served = |scheme: &str| {
        cairn_fs::Registry::global()
            .resolve(scheme)
            .is_ok_and(|factory| factory.schemes().contains(&fs.protocol()))
    };
    match scheme {
        Some(scheme) if !served(&scheme) => Err(Error::InvalidConfig {
            reason: format!(
                "{what} {path} is not on the given filesystem (protocol {}); give a path of that filesystem, or {fix}",
                fs.protocol()
            ),
        }),
        _ => Ok(()),
    }
}

/// What cairn's other doors (the job runner, the Python package) need of
/// the one sequence beyond the library's calls: their own settings, the
/// job record, and the ends of a run that hands its units to other writers.
#[cfg(feature = "internals")]
impl Checkpoint {
    /// The checkpoint `config` names; a new checkpoint over an output that
    /// holds files is refused with `hatch` as the way out (`None`: such an
    /// output is accepted, as for a mode that appends or replaces).
    ///
    /// ```
    /// use cairn_checkpoint::{Checkpoint, internals::CheckpointConfig};
    /// let checkpoint = Checkpoint::with_config(CheckpointConfig::new("id", "memory:///ckpt"), Some("use --mode append"));
    /// # let _ = checkpoint;
    /// ```
    pub fn with_config(config: CheckpointConfig, hatch: Option<&str>) -> Self {
        Self {
            config,
            refuse_existing_output: hatch.map(str::to_string),
        }
    }

    /// Opens without checking a file output's data files against the
    /// committed units: for a door that opens a checkpoint only to end it
    /// (Ray's clean-up after a job), whose writers (Ray's tasks) record no
    /// count of data files. A table output's log is still checked: every
    /// committed unit must be in the table.
    pub fn without_output_check(mut self) -> Self {
        self.config.check_output = false;
        self.refuse_existing_output = None;
        self
    }
}

#[cfg(feature = "internals")]
impl Run {
    /// [`Run::begin`] for a unit whose data files go into the partition
    /// directories `partitions` (paths relative to the output, such as
    /// `source=web/date=2026-11-30`): the record names them, so rolling the
    /// unit back lists only those directories. For a checkpoint opened with
    /// a partitioned `output_layout` (its data check searches every depth).
    pub async fn begin_in(
        &self,
        unit: &UnitName,
        ids: ArrayRef,
        partitions: &[String],
    ) -> Result<()> {
        self.begin_partitioned(unit, ids, partitions).await
    }

    /// The checkpoint directory (its URL, its layout).
    pub fn dir(&self) -> &crate::commit::CheckpointDir {
        &self.open.dir
    }

    /// What the checkpoint belongs to.
    pub fn job(&self) -> &crate::job::JobRecord {
        &self.open.job
    }

    /// The committed units and sizes as opened.
    pub fn state(&self) -> &crate::load::CommittedState {
        &self.open.state
    }

    /// Rewrites the job record (a job runner adding its format and inputs),
    /// behind the lease's fence.
    pub async fn record_job(&self, record: &crate::job::JobRecord) -> Result<()> {
        self.fenced(self.open.dir.write_job_record(record)).await
    }

    /// Ends this process's hold on the checkpoint for writers elsewhere
    /// (Ray's write tasks, which commit through their own records): the
    /// lease released, everything kept. Returns what the open found.
    pub async fn hand_over(self) -> Result<(crate::load::CommittedState, RecoveryReport)> {
        let lease = self.open.keeper.stop().await?;
        self.open.dir.release_lease(lease).await?;
        Ok((self.open.state, self.open.recovery))
    }

    /// [`Run::finish`] that leaves the completion marker (a driver removes
    /// it when it exits cleanly).
    pub async fn finish_keeping_marker(self) -> Result<CleanupReport> {
        self.end_success(true).await
    }
}
