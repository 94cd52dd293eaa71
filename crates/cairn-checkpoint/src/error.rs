//! The one error type of cairn-checkpoint.

use arrow_schema::DataType;

/// What went wrong in a checkpoint operation, with what to do about it.
///
/// ```
/// let e = cairn_checkpoint::Error::UnsupportedIdType { data_type: arrow_schema::DataType::Float64 };
/// assert!(e.to_string().contains("Float64"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The ID column has a type that cannot identify rows.
    #[error(
        "ID column type {data_type} is not supported; use an integer (Int8..Int64, UInt8..UInt64) or a string/binary column"
    )]
    UnsupportedIdType {
        /// The offending type.
        data_type: DataType,
    },
    /// Two parts of one ID set disagree on the kind of ID.
    #[error(
        "ID column type changed from {expected} to {found}; every committed file and every batch of a job must use the same ID type"
    )]
    IdTypeMismatch {
        /// The kind seen first (`integer` or `string`).
        expected: &'static str,
        /// The kind seen now.
        found: &'static str,
    },
    /// The storage failed (the error names the URL and what to do).
    #[error("{0}")]
    Storage(#[source] cairn_fs::Error),
    /// An ID file cannot be read.
    #[error(
        "checkpoint ID file {file} is damaged or not Parquet: {reason}; nothing was deleted. Move it out of the checkpoint directory (its unit is then redone) or restore it"
    )]
    CorruptIdFile {
        /// The file's URL.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// Bytes given as a serialized ID set are not one.
    #[error(
        "the serialized set of committed IDs is damaged ({reason}); load the checkpoint again on the driver"
    )]
    CorruptIdSet {
        /// What is wrong.
        reason: String,
    },
    /// An ID file's column is not the ID column.
    #[error(
        "checkpoint ID file {file} holds columns {found:?}, not the single ID column {expected:?}; check id_column, or that this checkpoint belongs to this job"
    )]
    WrongIdColumn {
        /// The file's URL.
        file: String,
        /// The configured ID column.
        expected: String,
        /// The columns found.
        found: Vec<String>,
    },
    /// The checkpoint path names a file.
    #[error("checkpoint path {path} is a file; give a directory (it may not exist yet)")]
    CheckpointPathIsFile {
        /// The path.
        path: String,
    },
    /// Another run holds the checkpoint.
    #[error(
        "checkpoint {path} is in use by {holder}; its lease expires in {expires_in_secs} s. Wait for that run to end, or use another checkpoint path"
    )]
    LeaseHeld {
        /// The checkpoint directory.
        path: String,
        /// Who holds it.
        holder: String,
        /// Seconds until the lease expires unless renewed.
        expires_in_secs: u64,
    },
    /// This run's lease was taken by another run; this run must stop.
    #[error(
        "checkpoint {path}: this run lost its lease (now {}); stop this run, the other one owns the checkpoint", holder.as_deref().map_or_else(|| "held by no run: its lease file was removed, by a clean-up or by hand".to_string(), |holder| format!("held by {holder}"))
    )]
    LeaseLost {
        /// The checkpoint directory.
        path: String,
        /// The new holder, if any.
        holder: Option<String>,
    },
    /// This run held the lease past its deadline without renewing it.
    #[error(
        "checkpoint {path}: this run could not renew its lease within three quarters of its {ttl_secs} s lifetime, so another run may take the checkpoint over; it stopped before committing more. Run the same command again to resume"
    )]
    LeaseExpired {
        /// The checkpoint directory.
        path: String,
        /// The lease lifetime.
        ttl_secs: u64,
    },
    /// The checkpoint belongs to a job with another output.
    #[error(
        "checkpoint {checkpoint} belongs to the output {recorded}, not {given}; nothing was changed. Give the same output as the run that made it (check for a typo), or use another checkpoint path for a new job"
    )]
    OutputMismatch {
        /// The checkpoint.
        checkpoint: String,
        /// The output in its job record.
        recorded: String,
        /// The output given now.
        given: String,
    },
    /// The checkpoint belongs to a job with other settings.
    #[error(
        "checkpoint {checkpoint} was made by a job whose {what} is {recorded}, not {given}; nothing was changed. Run the job as it was, or use another checkpoint path for a new job"
    )]
    JobMismatch {
        /// The checkpoint.
        checkpoint: String,
        /// The setting.
        what: String,
        /// The recorded value.
        recorded: String,
        /// The value given now.
        given: String,
    },
    /// An input a row_hash checkpoint depends on changed.
    #[error(
        "checkpoint {checkpoint} uses row_hash IDs, which come from each input file's path and row positions, and the input {file} changed since it was read: {change}. Its rows would no longer match what was committed and would be written again. Restore the file, or start over with a fresh checkpoint path (and output)"
    )]
    InputChanged {
        /// The checkpoint.
        checkpoint: String,
        /// The input file's URL.
        file: String,
        /// What changed.
        change: String,
    },
    /// The checkpoint directory overlaps the output or an input.
    #[error(
        "the checkpoint {checkpoint} and the {role} {other} overlap (one is, or is inside, the other); nothing was written. Clean-up and recovery would delete the {role}'s files. Put the checkpoint in a directory of its own"
    )]
    Overlap {
        /// The checkpoint.
        checkpoint: String,
        /// The other directory.
        other: String,
        /// `output` or `input`.
        role: String,
    },
    /// Committed units whose data files are gone from the output.
    #[error(
        "checkpoint {checkpoint}: {units} committed units have no data files in {output} (e.g. {examples}); their IDs are committed, so a resume would skip their rows and lose them. Nothing was changed. Restore the missing files, or move the checkpoint away and run the job again into a fresh output"
    )]
    DataMissing {
        /// The checkpoint.
        checkpoint: String,
        /// The output directory.
        output: String,
        /// How many units lack data.
        units: usize,
        /// A few of them.
        examples: String,
    },
    /// Committed units whose transactions the output table does not record.
    #[error(
        "checkpoint {checkpoint}: {units} committed units are not in the table {table}'s log (e.g. {examples}); their IDs are committed, so a resume would skip rows the table does not hold. Nothing was changed. The table was replaced, restored to an older version, lost a commit (two at once on a store without conditional writes), or lost the history that records those units to its maintenance (Iceberg's expire_snapshots, Lance's cleanup_old_versions, a Delta transaction retention shorter than the job): restore it, or move the checkpoint away and run the job again, and keep the table's history until a job ends"
    )]
    UnitsNotInTable {
        /// The checkpoint.
        checkpoint: String,
        /// The table.
        table: String,
        /// How many committed units it does not record.
        units: usize,
        /// A few of them.
        examples: String,
    },
    /// A pending unit whose table commit began may have landed, and neither
    /// the table's history (cut by maintenance) nor its current files tell.
    #[error(
        "checkpoint {checkpoint}: unit {unit} began its commit to the table {table}, its data files are not in the table's current version, and the history that would say whether the commit landed is gone ({cut}). Nothing was settled, every record left as it was: committing it could skip rows the table lacks, rolling it back could write rows a compaction kept twice. Restore the table's history if you can; else count the unit's IDs in the table, then move the checkpoint away and run the job again without those rows. Keep the table's history until a job ends"
    )]
    UnitUndecided {
        /// The checkpoint.
        checkpoint: String,
        /// The table.
        table: String,
        /// The unit.
        unit: String,
        /// Where the history stops short.
        cut: String,
    },
    /// The output table's log could not be read.
    #[error(
        "could not read which units the table {table} records: {reason}. Nothing in the checkpoint was settled; check the table's URL and storage options, then run again"
    )]
    TableLog {
        /// The table.
        table: String,
        /// Why.
        reason: String,
    },
    /// A pending unit without a committed twin was found where no output is
    /// known to roll its data back in.
    #[error(
        "checkpoint {checkpoint}: unit {unit} is pending without a commit (a late write of a run that lost its lease), and no output was given to roll its data back in; nothing of it was deleted. Run `cairn ckpt gc {checkpoint} --output OUTPUT` with the job's output"
    )]
    UnsettledUnit {
        /// The checkpoint.
        checkpoint: String,
        /// The unit.
        unit: String,
    },
    /// A commit names a unit this run did not begin (or committed already).
    #[error(
        "checkpoint {checkpoint}: unit {unit} was not begun in this run (or was committed already), so there are no recorded IDs to commit; nothing was written. Call Run::begin with the unit's IDs before writing its data files, then Run::commit"
    )]
    UnitNotBegun {
        /// The checkpoint.
        checkpoint: String,
        /// The unit.
        unit: String,
    },
    /// A run was finished with units begun and never committed.
    #[error(
        "checkpoint {checkpoint}: {units} units were begun and never committed (e.g. {examples}), so their rows are not all in the output; the run was not finished and the checkpoint is kept (its lease released). Commit every unit before Run::finish, or run the job again: the next run rolls those units back and writes their rows"
    )]
    UnitsNotCommitted {
        /// The checkpoint.
        checkpoint: String,
        /// How many units were left uncommitted.
        units: usize,
        /// A few of them.
        examples: String,
    },
    /// A new checkpoint over an output that already holds files.
    #[error(
        "the output {output} already holds files ({example}, ...) and there is no checkpoint to resume (checkpoint {checkpoint} has nothing committed; a finished run removes its checkpoint): writing now would add every row again beside them. Nothing was written. Write somewhere else, restore the checkpoint those files belong to, or, to add beside them anyway, {hatch}"
    )]
    OutputNotEmpty {
        /// The checkpoint.
        checkpoint: String,
        /// The output directory.
        output: String,
        /// One file found there.
        example: String,
        /// How this door allows it.
        hatch: String,
    },
    /// A unit was begun on a checkpoint whose job had already finished.
    #[error(
        "checkpoint {checkpoint} records that this job finished (its clean-up was cut short): every row is in the output already and none may be written again. Call Run::finish to end the clean-up; to run the job again from the start, delete the checkpoint and empty the output"
    )]
    JobFinished {
        /// The checkpoint.
        checkpoint: String,
    },
    /// A finished job's completion marker names input other than the one
    /// this run reads: a new job on a reused checkpoint path.
    #[error(
        "checkpoint {checkpoint} records that a job into this output finished over other input ({read}; this run reads {now}). Its IDs were deleted when it finished, and its clean-up was cut short; nothing was changed. Delete the checkpoint {checkpoint} (all of it, {marker} included: a part left would be taken for a job still running) and run again: through cairn's Ray manager the run then reads the record the finished job left in its output (_cairn_job.json beside Parquet or JSON files, or the table's own rows), writes nothing over the same input, and over other input writes only the rows whose IDs the output does not hold. An output without that record (a job finished before cairn wrote one) is refused: then read only the new files, with a new checkpoint path"
    )]
    FinishedOverOtherInput {
        /// The checkpoint.
        checkpoint: String,
        /// The digest of the input the finished job read.
        read: String,
        /// The digest of the input this run reads.
        now: String,
        /// The completion marker's URL.
        marker: String,
    },
    /// The checkpoint settings are wrong.
    #[error("invalid checkpoint configuration: {reason}")]
    InvalidConfig {
        /// What is wrong and what to do.
        reason: String,
    },
    /// IDs could not be encoded as Parquet.
    #[error("cannot encode IDs as Parquet: {reason}")]
    Encode {
        /// Why.
        reason: String,
    },
}

impl From<cairn_fs::Error> for Error {
    fn from(err: cairn_fs::Error) -> Self {
        Error::Storage(err)
    }
}

/// The result type of cairn-checkpoint.
pub type Result<T, E = Error> = std::result::Result<T, E>;
