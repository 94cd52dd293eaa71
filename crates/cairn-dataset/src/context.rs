//! [`JobContext`]: what a job runs with (storage options, checkpoint,
//! workers, batch size, duplicate check, progress, interrupt).

use std::sync::Arc;

use cairn_checkpoint::internals::CheckpointConfig;
use cairn_fs::StorageOptions;

use crate::progress::Progress;

/// Default rows per batch read from the input.
pub const DEFAULT_BATCH_SIZE: usize = 4096;
/// Rows per output file when the job has no checkpoint.
pub const DEFAULT_ROWS_PER_FILE: usize = 100_000;

/// What a job runs with: storage options, an optional checkpoint, workers.
///
/// ```
/// let ctx = cairn_dataset::JobContext::new()
///     .checkpoint(cairn_dataset::CheckpointConfig::new("uid", "/tmp/ckpt"))
///     .workers(4);
/// assert_eq!(ctx.workers, 4);
/// ```
#[derive(Debug, Clone)]
pub struct JobContext {
    /// Storage options for every URL of the job (input, output, checkpoint
    /// unless the checkpoint config has its own).
    pub storage_options: StorageOptions,
    /// Checkpointing, when set.
    pub checkpoint: Option<CheckpointConfig>,
    /// Units in flight at once.
    pub workers: usize,
    /// Rows per batch read from the input (and sent to a transform command).
    pub batch_size: usize,
    /// Fail on an ID seen twice in one run (costs about 40 bytes per input
    /// row held for the run; row_hash IDs are never checked: they are unique).
    pub check_duplicate_ids: bool,
    /// The most IDs the duplicate check holds in its hash set (used when
    /// the IDs are not a dense integer range, for which a bitmap of one bit
    /// per integer serves): about 40 bytes each. Past it, later IDs are
    /// checked against the ones held but not against each other, and the
    /// job says so once.
    pub duplicate_check_max_ids: u64,
    /// Live counters.
    pub progress: Arc<Progress>,
    /// Set it to stop the job cleanly (see [`crate::Interrupt`]).
    pub interrupt: crate::Interrupt,
}

/// The default cap of the duplicate-ID check's hash set: 2^25 IDs, about
/// 1.3 GiB at worst.
pub const DEFAULT_DUPLICATE_CHECK_MAX_IDS: u64 = 1 << 25;

impl Default for JobContext {
    fn default() -> Self {
        Self::new()
    }
}

impl JobContext {
    /// No checkpoint, one worker per core, 4,096-row batches.
    pub fn new() -> Self {
        Self {
            storage_options: StorageOptions::new(),
            checkpoint: None,
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            batch_size: DEFAULT_BATCH_SIZE,
            check_duplicate_ids: true,
            duplicate_check_max_ids: DEFAULT_DUPLICATE_CHECK_MAX_IDS,
            progress: Arc::new(Progress::default()),
            interrupt: crate::Interrupt::new(),
        }
    }

    /// With storage options.
    pub fn storage_options(mut self, options: StorageOptions) -> Self {
        self.storage_options = options;
        self
    }

    /// With a checkpoint.
    pub fn checkpoint(mut self, config: CheckpointConfig) -> Self {
        self.checkpoint = Some(config);
        self
    }

    /// With `n` workers (at least one).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// With a read batch size (at least one row).
    pub fn batch_size(mut self, rows: usize) -> Self {
        self.batch_size = rows.max(1);
        self
    }
}
