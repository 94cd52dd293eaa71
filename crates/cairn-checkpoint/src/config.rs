//! The user's checkpoint settings and opening a checkpoint for a run, which
//! runs steps 5 (lease), 6 (recover) and 7 (load) in that order.

use std::sync::Arc;
use std::time::Duration;

use cairn_fs::{FileSystem, StorageOptions, build_checkpoint_filesystem, split_protocol};

use crate::commit::CheckpointDir;
use crate::error::{Error, Result};
use crate::idset::StringMode;
use crate::job::JobRecord;
use crate::layout::{OutputLayout, RunId};
use crate::lease::LeaseKeeper;
use crate::load::CommittedState;
use crate::recover::RecoveryReport;
use crate::table::UnitLog;

/// Default commit interval in rows (fast transforms write units of this
/// size; slow ones commit on the time interval first).
pub const DEFAULT_COMMIT_ROWS: usize = 100_000;
/// Default commit interval in time.
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_secs(30);
/// Default lease lifetime (renewed every third of it).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(120);

/// What a job says about its checkpoint.
///
/// ```
/// let config = cairn_checkpoint::internals::CheckpointConfig::new("uid", "/data/ckpt");
/// assert!(config.delete_checkpoint_on_success);
/// config.validate().unwrap();
/// assert!(cairn_checkpoint::internals::CheckpointConfig::new("", "/x").validate().is_err());
/// assert!(cairn_checkpoint::internals::CheckpointConfig::new("uid", "relative/ckpt").validate().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// The column that identifies an input row.
    pub id_column: String,
    /// Where the checkpoint lives: a URL, or an absolute local path.
    pub checkpoint_path: String,
    /// A filesystem to use instead of the one the path's scheme names.
    pub filesystem: Option<FileSystem>,
    /// Storage options for the path's filesystem (when `filesystem` is unset).
    pub storage_options: StorageOptions,
    /// Remove the checkpoint's files after a successful run.
    pub delete_checkpoint_on_success: bool,
    /// Commit a unit after this many input rows ...
    pub commit_rows: usize,
    /// ... or after this much time, whichever comes first.
    pub commit_interval: Duration,
    /// How string IDs are kept.
    pub string_mode: StringMode,
    /// Lease lifetime.
    pub lease_ttl: Duration,
    /// Whether [`CheckpointConfig::open`] reads the committed IDs into its
    /// state (false: units and sizes only, an empty set, for a caller that
    /// loads the IDs elsewhere, such as shards spread over a cluster).
    pub read_ids: bool,
    /// Where the job's data files sit under its output: flat, or in
    /// partition directories (which recovery and `require_data` then
    /// search at any depth).
    pub output_layout: OutputLayout,
    /// The output is a table whose own log records which units reached it
    /// ([`crate::table::UnitLog`]): recovery commits the pending units it
    /// records and deletes nothing in the output.
    pub unit_log: Option<Arc<dyn UnitLog>>,
    /// Whether opening checks a file output's data files against the
    /// committed units (after recovery). Off only for a door that opens a
    /// checkpoint to end it, whose writers record no count of data files.
    /// A table output's log is checked either way, before any pending unit
    /// is settled (a refusal changes nothing): at the end of a job too, so
    /// a unit the table lost while the job ran stops the clean-up.
    pub check_output: bool,
    /// A digest of the input this run reads, when the door knows it (Ray's
    /// reads: `"<n> files, <hash of their paths, sizes and times>"`):
    /// recorded in the job record, so a completion marker names it, and a
    /// run over other input is refused by a finished job's marker instead
    /// of writing nothing ([`Error::FinishedOverOtherInput`]). `None`: not
    /// known (a marker then binds the job by output and ID column only).
    pub input_digest: Option<String>,
    /// Whether the IDs the output already holds count as committed
    /// (the output held rows when the door started its first run): kept
    /// in the job record at the checkpoint's first open, and read from it
    /// on every later one ([`JobRecord::output_ids_committed`]).
    pub output_ids_committed: bool,
}

impl CheckpointConfig {
    /// Settings with the defaults: delete on success, commit every 100,000 rows
    /// or 30 s, 128-bit fingerprints for string IDs, a 120 s lease.
    pub fn new(id_column: &str, checkpoint_path: &str) -> Self {
        Self {
            id_column: id_column.to_string(),
            checkpoint_path: checkpoint_path.to_string(),
            filesystem: None,
            storage_options: StorageOptions::new(),
            delete_checkpoint_on_success: true,
            commit_rows: DEFAULT_COMMIT_ROWS,
            commit_interval: DEFAULT_COMMIT_INTERVAL,
            string_mode: StringMode::default(),
            lease_ttl: DEFAULT_LEASE_TTL,
            read_ids: true,
            output_layout: OutputLayout::Flat,
            unit_log: None,
            check_output: true,
            input_digest: None,
            output_ids_committed: false,
        }
    }

    /// Checks the settings without touching storage.
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(Error::InvalidConfig { reason });
        if self.id_column.trim().is_empty() {
            return invalid(
                "id_column is empty; name the column that identifies each input row".into(),
            );
        }
        if self.checkpoint_path.trim().is_empty() {
            return invalid(
                "checkpoint_path is empty; give a directory URL or an absolute path".into(),
            );
        }
        let (scheme, rest) = split_protocol(&self.checkpoint_path);
        if scheme.is_none() && !rest.starts_with('/') {
            return invalid(format!(
                "checkpoint_path {:?} is relative; give an absolute path so every run finds the same checkpoint",
                self.checkpoint_path
            ));
        }
        if self.commit_rows == 0 || self.commit_interval.is_zero() {
            return invalid(
                "the commit interval must be at least one row and more than zero seconds".into(),
            );
        }
        if self.lease_ttl < Duration::from_secs(3) {
            return invalid(
                "lease_ttl must be at least 3 s (it is renewed every third of it)".into(),
            );
        }
        Ok(())
    }

    /// The checkpoint directory these settings name (no I/O).
    pub fn dir(&self) -> Result<CheckpointDir> {
        self.validate()?;
        let fs = match &self.filesystem {
            Some(fs) => fs.clone(),
            None => build_checkpoint_filesystem(&self.checkpoint_path, &self.storage_options)?.0,
        };
        Ok(
            CheckpointDir::new(fs, &self.checkpoint_path, &self.id_column)
                .with_layout(self.output_layout),
        )
    }

    /// Opens the checkpoint for a run that writes to `output_dir` on
    /// `output_fs`: refuses a checkpoint that overlaps the output, takes the
    /// lease (renewed from then on, while the rest of the opening runs),
    /// clears a checkpoint another job finished with, refuses a checkpoint
    /// whose job record names another output (and records this output in a
    /// new checkpoint), recovers pending units, loads the committed IDs.
    pub async fn open(&self, output_fs: &FileSystem, output_dir: &str) -> Result<OpenCheckpoint> {
        let dir = self.dir()?;
        crate::job::refuse_overlap(&dir.fs, &dir.dir, output_fs, output_dir, "output")?;
        if dir.fs.isfile(&dir.dir).await? {
            return Err(Error::CheckpointPathIsFile { path: dir.url()? });
        }
        let run = RunId::new();
        let lease = dir.acquire_lease(&run, self.lease_ttl).await?;
        // Loading a large checkpoint can outlast the lease's lifetime.
        let keeper = LeaseKeeper::start(dir.clone(), lease);
        let output_url = output_fs.url(&output_fs.strip(output_dir)?);
        let opened = self
            .open_held(&dir, &keeper, &output_url, output_fs, output_dir)
            .await
            .and_then(|opened| keeper.check().map(|()| opened));
        match opened {
            Ok((state, recovery, job, fresh)) => Ok(OpenCheckpoint {
                dir: dir.with_layout(self.layout_of(&job)),
                run,
                keeper,
                state,
                recovery,
                job,
                fresh,
            }),
            Err(e) => {
                match keeper.stop().await {
                    Ok(lease) => {
                        if let Err(release) = dir.release_lease(lease).await {
                            tracing::warn!("could not release the checkpoint lease: {release}");
                        }
                    }
                    Err(lost) => tracing::warn!("the checkpoint lease was not kept: {lost}"),
                }
                Err(e)
            }
        }
    }

    /// The layout a run on the checkpoint of `job` settles and checks: a
    /// job recorded as partitioned is partitioned whatever this run says
    /// (its units may have files in any partition directory; the job
    /// runner refuses the mismatch after recovery).
    fn layout_of(&self, job: &JobRecord) -> OutputLayout {
        match job.layout() {
            OutputLayout::Flat => self.output_layout,
            OutputLayout::Partitioned => OutputLayout::Partitioned,
        }
    }

    /// The checkpoint's state, its IDs read when [`CheckpointConfig::read_ids`].
    async fn load_state(&self, dir: &CheckpointDir) -> Result<CommittedState> {
        if self.read_ids {
            dir.load(self.string_mode).await
        } else {
            dir.list().await
        }
    }

    /// The part of [`CheckpointConfig::open`] done while holding the lease.
    async fn open_held(
        &self,
        dir: &CheckpointDir,
        keeper: &LeaseKeeper,
        output_url: &str,
        output_fs: &FileSystem,
        output_dir: &str,
    ) -> Result<(CommittedState, RecoveryReport, JobRecord, bool)> {
        let mut state = self.load_state(dir).await?;
        if state.complete {
            let marker = dir.read_marker().await?.unwrap_or_default();
            // An older marker names no job: the record, if still there, does.
            let finished_job = match marker.job {
                Some(job) => Some(job),
                None => dir.read_job_record().await?,
            };
            if let Some(job) = finished_job
                .as_ref()
                .filter(|job| job.same_output(output_url) && job.id_column == self.id_column)
            {
                if let (Some(read), Some(now)) = (&job.input_digest, &self.input_digest)
                    && read != now
                {
                    return Err(Error::FinishedOverOtherInput {
                        checkpoint: dir.url()?,
                        read: read.clone(),
                        now: now.clone(),
                        marker: format!("{}/{}", dir.url()?, crate::layout::COMPLETE_FILE),
                    });
                }
                // This job finished; only its clean-up was cut short, and
                // every unit was committed: nothing to roll back.
                let job = JobRecord::new(output_url, &self.id_column);
                return Ok((state, RecoveryReport::default(), job, false));
            }
            // Another job finished here (or one cairn cannot tell): finish
            // its clean-up, keeping this run's lease, and start afresh.
            tracing::info!(
                checkpoint = %dir.dir,
                "the checkpoint holds a finished job other than this one; removing its files and starting afresh"
            );
            let previous_output = match &finished_job {
                Some(job) => Some(FileSystem::from_url(&job.output, &self.storage_options)?),
                None => None,
            };
            let previous_layout = finished_job
                .as_ref()
                .map_or(self.output_layout, JobRecord::layout);
            dir.clone()
                .with_layout(previous_layout)
                .clean_up_keeping(
                    previous_output
                        .as_ref()
                        .map(|(fs, path)| (fs, path.as_str())),
                    Some(keeper.record().generation),
                )
                .await?;
            state = self.load_state(dir).await?;
        }
        let recorded = dir.check_output(output_url).await?;
        if let Some(record) = &recorded
            && record.id_column != self.id_column
        {
            return Err(Error::JobMismatch {
                checkpoint: dir.url()?,
                what: "ID column".into(),
                recorded: record.id_column.clone(),
                given: self.id_column.clone(),
            });
        }
        if let Some(log) = &self.unit_log
            && !state.complete
        {
            // Before anything is written or settled: a table that lost
            // committed units (moved, restored, replaced, or a commit lost
            // on a store without conditional writes) is refused with the
            // checkpoint as it was, pending records included, so the units
            // the table held between its commit and the checkpoint's are
            // not forgotten when it is back. At the end of a job this is
            // the check that the job's units are all in the table.
            dir.require_logged(log.as_ref(), &state).await?;
        }
        let fresh = recorded.is_none() && state.committed.is_empty() && state.pending.is_empty();
        let job = match recorded {
            Some(mut record) => {
                // The input this run reads is the one the job ends with;
                // a table's checkpoint made before the record said so
                // learns it here.
                let digest_changed =
                    self.input_digest.is_some() && record.input_digest != self.input_digest;
                let table_learned = self.unit_log.is_some() && !record.table_output;
                if digest_changed || table_learned {
                    if digest_changed {
                        record.input_digest = self.input_digest.clone();
                    }
                    record.table_output |= self.unit_log.is_some();
                    dir.write_job_record(&record).await?;
                }
                record
            }
            None => {
                // First open (or a checkpoint Ray Data wrote): bind it to
                // this output before any unit is written or rolled back.
                let mut record = JobRecord::new(output_url, &self.id_column);
                record.input_digest = self.input_digest.clone();
                record.output_ids_committed = self.output_ids_committed;
                record.table_output = self.unit_log.is_some();
                dir.write_job_record(&record).await?;
                record
            }
        };
        keeper.check()?;
        if let Some(log) = &self.unit_log {
            let recovery = dir
                .settle_by_log(log.as_ref(), &state, &self.id_column)
                .await?;
            if !recovery.committed_from_table.is_empty() {
                // The units committed here join the committed state.
                state = self.load_state(dir).await?;
            }
            state.pending.clear();
            return Ok((state, recovery, job, fresh));
        }
        let recovery = dir
            .clone()
            .with_layout(self.layout_of(&job))
            .recover(output_fs, output_dir, &state)
            .await?;
        // Recovery only removes pending records and uncommitted data; the
        // committed IDs it leaves are the ones just loaded.
        state.pending.clear();
        Ok((state, recovery, job, fresh))
    }
}

/// A checkpoint opened for a run: the lease held, recovery done, IDs loaded.
/// What a [`Run`](crate::Run) is made of; read through its accessors, and
/// ended with [`OpenCheckpoint::release`] when no run takes it.
#[derive(Debug)]
pub struct OpenCheckpoint {
    /// The directory.
    pub(crate) dir: CheckpointDir,
    /// This run's identity (unit names start with it).
    pub(crate) run: RunId,
    /// The lease this run holds, renewed in the background since it was
    /// taken; `keeper.stop()` gives it back to release.
    pub(crate) keeper: LeaseKeeper,
    /// The committed IDs and units.
    pub(crate) state: CommittedState,
    /// What recovery did.
    pub(crate) recovery: RecoveryReport,
    /// What the checkpoint belongs to (written at the first open).
    pub(crate) job: JobRecord,
    /// Whether this open made the checkpoint: nothing was committed or
    /// pending and it had no job record. A run refused before its first
    /// unit may then remove it whole ([`CheckpointDir::clean_up`]).
    pub(crate) fresh: bool,
}

impl OpenCheckpoint {
    /// The checkpoint directory.
    pub fn dir(&self) -> &CheckpointDir {
        &self.dir
    }

    /// The committed IDs and units.
    pub fn state(&self) -> &CommittedState {
        &self.state
    }

    /// What recovery did.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Stops renewing the lease and gives it back: the checkpoint is then
    /// free for the next run.
    pub async fn release(self) -> Result<()> {
        let lease = self.keeper.stop().await?;
        self.dir.release_lease(lease).await
    }
}
