//! Names in a checkpoint directory (the layout Ray Data 2.60 reads and
//! writes) and the rule that ties data files to their unit.

use std::sync::atomic::{AtomicU64, Ordering};

/// Suffix of a committed unit's ID file.
pub const COMMITTED_SUFFIX: &str = ".parquet";
/// Suffix of a pending unit's ID file.
pub const PENDING_SUFFIX: &str = ".pending.parquet";
/// The lease file of cairn before lease generations (hidden: PyArrow and
/// Ray skip names starting with `.`); read as generation 0.
pub const LEASE_FILE: &str = ".cairn-lease.json";
/// What every lease file's name starts with: `.cairn-lease.<generation>.json`.
pub const LEASE_PREFIX: &str = ".cairn-lease";
/// The job record: what the checkpoint belongs to (see [`crate::job::JobRecord`]).
pub const JOB_FILE: &str = ".cairn-job.json";

/// The name of lease generation `generation` (20 digits, so names sort).
///
/// ```
/// assert_eq!(cairn_checkpoint::internals::lease_file(7), ".cairn-lease.00000000000000000007.json");
/// assert_eq!(cairn_checkpoint::internals::lease_generation(&cairn_checkpoint::internals::lease_file(7)), Some(7));
/// assert_eq!(cairn_checkpoint::internals::lease_generation(".cairn-lease.x.json"), None);
/// ```
pub fn lease_file(generation: u64) -> String {
    format!("{LEASE_PREFIX}.{generation:020}.json")
}

/// The generation a lease file's name holds.
pub fn lease_generation(file_name: &str) -> Option<u64> {
    file_name
        .strip_prefix(LEASE_PREFIX)?
        .strip_prefix('.')?
        .strip_suffix(".json")?
        .parse()
        .ok()
}
/// The marker clean-up writes first and deletes last: while it exists, the
/// run finished and every unit was committed, whatever else is still there.
pub const COMPLETE_FILE: &str = ".cairn-complete";
/// What follows a unit's name in the names of the data files cairn writes.
pub const DATA_DELIMITER: char = '_';
/// Delimiters accepted after a unit's name when reading a directory: cairn's
/// `_`, the `-` of Ray Data 2.60's Parquet files (`<unit>-<n>.parquet`), and
/// the `.` of its block-based sinks (`write_json`, `write_csv`,
/// `write_numpy`, ...: `<unit>.<ext>`). Its row-based sinks
/// (`write_images`: `<unit>_<block>_<row>.<ext>`) use `_`.
pub const DATA_DELIMITERS: [char; 3] = ['_', '-', '.'];

/// Where a job's data files sit under its output directory, which decides
/// where recovery looks for an unfinished unit's files and where
/// `require_data` and `cairn ckpt verify` look for a committed unit's.
///
/// ```
/// use cairn_checkpoint::internals::OutputLayout;
/// assert_eq!(OutputLayout::default(), OutputLayout::Flat);
/// assert_eq!(OutputLayout::for_partition_columns(&["source".into()]), OutputLayout::Partitioned);
/// assert_eq!(OutputLayout::for_partition_columns(&[]), OutputLayout::Flat);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputLayout {
    /// Every data file directly in the output directory.
    #[default]
    Flat,
    /// Data files in partition directories under the output, at any depth
    /// (`out/source=web/date=2026-11-30/<unit>_0.parquet`, hive style).
    /// A unit's pending record written by cairn names its partition
    /// directories, so rolling it back lists only those; a record that
    /// names none (Ray's) is matched against one recursive listing of the
    /// output, shared by every unit being rolled back.
    Partitioned,
}

impl OutputLayout {
    /// The layout of a job partitioned by `columns` (none: flat).
    pub fn for_partition_columns(columns: &[String]) -> Self {
        if columns.is_empty() {
            OutputLayout::Flat
        } else {
            OutputLayout::Partitioned
        }
    }
}

/// A unit's name: cairn makes `<run>_<seq>` (32 hex digits, then 10 digits);
/// names read from a directory (Ray's `<uuid>_<uuid>_<nnnnnn>`) are kept as
/// they are.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use cairn_checkpoint::Checkpoint;
/// use cairn_fs::{FileSystem, StorageOptions};
/// let output = FileSystem::new("memory", &StorageOptions::new()).unwrap();
/// let checkpoint = Checkpoint::at("memory:///doc-unit/ckpt", &StorageOptions::new(), "id").unwrap();
/// let run = checkpoint.open(&output, "memory:///doc-unit/out").await.unwrap();
/// let unit = run.next_unit();
/// assert!(unit.owns_data_file(&unit.data_file(0, "parquet")));
/// // Ray Data's data files follow the unit's name with `-`, its
/// // block-based sinks' with `.`.
/// assert!(unit.owns_data_file(&format!("{}-0.parquet", unit.as_str())));
/// assert!(unit.owns_data_file(&format!("{}.json", unit.as_str())));
/// // A longer number is another unit, never this one's file.
/// assert!(!unit.owns_data_file(&format!("{}0_0.parquet", unit.as_str())));
/// run.abandon().await.unwrap();
/// # })
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnitName(String);

/// The name as a quoted string (a report's Debug shows names, not Rust's
/// tuple syntax).
impl std::fmt::Debug for UnitName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl UnitName {
    /// The name of unit `seq` of `run`. (for cairn's own crates: a program gets its
    /// units from `Run::next_unit`).
    #[doc(hidden)]
    pub fn new(run: &RunId, seq: u64) -> Self {
        Self(format!("{}_{seq:010}", run.0))
    }

    /// A unit name as found in a directory. (for cairn's own crates: a program gets its
    /// units from `Run::next_unit`).
    #[doc(hidden)]
    pub fn from_stem(stem: &str) -> Self {
        Self(stem.to_string())
    }

    /// The name itself.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `<unit>.parquet`. (for cairn's own crates: a program gets its
    /// units from `Run::next_unit`).
    #[doc(hidden)]
    pub fn committed_file(&self) -> String {
        format!("{}{COMMITTED_SUFFIX}", self.0)
    }

    /// `<unit>.pending.parquet`. (for cairn's own crates: a program gets its
    /// units from `Run::next_unit`).
    #[doc(hidden)]
    pub fn pending_file(&self) -> String {
        format!("{}{PENDING_SUFFIX}", self.0)
    }

    /// The prefix every data file of this unit starts with: `<unit>_`. (for cairn's own crates: a program gets its
    /// units from `Run::next_unit`).
    #[doc(hidden)]
    pub fn data_prefix(&self) -> String {
        format!("{}{DATA_DELIMITER}", self.0)
    }

    /// The name of this unit's data file number `index` with `extension`
    /// (no dot): `<unit>_<index>.<extension>`, the name recovery finds.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use cairn_checkpoint::Checkpoint;
    /// use cairn_fs::{FileSystem, StorageOptions};
    /// let output = FileSystem::new("memory", &StorageOptions::new()).unwrap();
    /// let checkpoint = Checkpoint::at("memory:///doc-file/ckpt", &StorageOptions::new(), "id").unwrap();
    /// let run = checkpoint.open(&output, "memory:///doc-file/out").await.unwrap();
    /// let unit = run.next_unit();
    /// assert_eq!(unit.data_file(0, "parquet"), format!("{}_0.parquet", unit.as_str()));
    /// assert!(unit.owns_data_file(&unit.data_file(12, "jsonl")));
    /// run.abandon().await.unwrap();
    /// # })
    /// ```
    pub fn data_file(&self, index: usize, extension: &str) -> String {
        format!("{}{DATA_DELIMITER}{index}.{extension}", self.0)
    }

    /// Whether a data file (a base name, no directory) belongs to this unit:
    /// it starts with the unit's name and then `_`, `-` (Ray Data's) or `.`.
    pub fn owns_data_file(&self, file_name: &str) -> bool {
        file_name
            .strip_prefix(&self.0)
            .is_some_and(|rest| rest.starts_with(DATA_DELIMITERS))
    }
}

impl std::fmt::Display for UnitName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The random identity of one run: 32 hex digits.
///
/// ```
/// let a = cairn_checkpoint::internals::RunId::new();
/// let b = cairn_checkpoint::internals::RunId::new();
/// assert_ne!(a, b);
/// assert_eq!(a.as_str().len(), 32);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunId(String);

impl RunId {
    /// A new run identity (time, process and a counter, hashed).
    pub fn new() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let seed = format!(
            "{nanos}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        Self(format!("{:x}", md5::compute(seed)))
    }

    /// A run identity given as 32 hex digits (tests, replays).
    pub fn from_hex(hex: &str) -> Self {
        Self(hex.to_string())
    }

    /// The identity as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

/// What a file in a checkpoint directory is.
///
/// ```
/// use cairn_checkpoint::{UnitName};
/// use cairn_checkpoint::internals::{CheckpointFile, classify};
/// assert_eq!(classify("a_b_000001.parquet"), CheckpointFile::Committed(UnitName::from_stem("a_b_000001")));
/// assert_eq!(classify("a_b_000001.pending.parquet"), CheckpointFile::Pending(UnitName::from_stem("a_b_000001")));
/// assert_eq!(classify(".cairn-lease.json"), CheckpointFile::Lease);
/// assert_eq!(classify(".cairn-complete"), CheckpointFile::Complete);
/// assert_eq!(classify(".cairn-lease.00000000000000000003.json"), CheckpointFile::Lease);
/// assert_eq!(classify(".cairn-job.json"), CheckpointFile::Job);
/// assert_eq!(classify("notes.txt"), CheckpointFile::Other("notes.txt".into()));
/// let temp = ".a_b_000001.parquet.cairn-tmp-12-34";
/// assert_eq!(classify(temp), CheckpointFile::Temporary(temp.into()));
/// // The create-if-absent probe of an object store, beside the lease.
/// let probe = ".cairn-probe-12-34";
/// assert_eq!(classify(probe), CheckpointFile::Temporary(probe.into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointFile {
    /// `<unit>.parquet`.
    Committed(UnitName),
    /// `<unit>.pending.parquet`.
    Pending(UnitName),
    /// The lease.
    Lease,
    /// The completion marker of an interrupted clean-up.
    Complete,
    /// The job record.
    Job,
    /// A temporary file cairn-fs left while writing one of the above on local
    /// disk (`.<name>.cairn-tmp-...`) when the process died, or its
    /// create-if-absent probe (`.cairn-probe-...`); clean-up removes it.
    Temporary(String),
    /// Anything else: not the protocol's, never touched.
    Other(String),
}

/// The marker cairn-fs puts in the names of its temporary files on local disk.
pub(crate) const TEMP_MARKER: &str = ".cairn-tmp-";

/// Classifies a base name found in a checkpoint directory.
pub fn classify(file_name: &str) -> CheckpointFile {
    if file_name.starts_with(cairn_fs::PROBE_PREFIX) {
        return CheckpointFile::Temporary(file_name.to_string());
    }
    if let Some((inner, _)) = file_name
        .strip_prefix('.')
        .and_then(|rest| rest.split_once(TEMP_MARKER))
        && !matches!(
            classify(inner),
            CheckpointFile::Other(_) | CheckpointFile::Temporary(_)
        )
    {
        return CheckpointFile::Temporary(file_name.to_string());
    }
    if file_name == LEASE_FILE || lease_generation(file_name).is_some() {
        CheckpointFile::Lease
    } else if file_name == JOB_FILE {
        CheckpointFile::Job
    } else if file_name == COMPLETE_FILE {
        CheckpointFile::Complete
    } else if let Some(stem) = file_name
        .strip_suffix(PENDING_SUFFIX)
        .filter(|s| !s.is_empty())
    {
        CheckpointFile::Pending(UnitName::from_stem(stem))
    } else if let Some(stem) = file_name
        .strip_suffix(COMMITTED_SUFFIX)
        .filter(|s| !s.is_empty() && !s.starts_with('.'))
    {
        CheckpointFile::Committed(UnitName::from_stem(stem))
    } else {
        CheckpointFile::Other(file_name.to_string())
    }
}

/// The first three of `units`, for an error message that names a few.
pub(crate) fn examples<'a>(units: impl IntoIterator<Item = &'a UnitName>) -> String {
    units
        .into_iter()
        .take(3)
        .map(UnitName::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_owns_only_its_own_data_files() {
        let unit = UnitName::new(&RunId::from_hex("0123456789abcdef0123456789abcdef"), 42);
        assert_eq!(unit.as_str(), "0123456789abcdef0123456789abcdef_0000000042");
        assert_eq!(
            unit.committed_file(),
            "0123456789abcdef0123456789abcdef_0000000042.parquet"
        );
        assert!(unit.owns_data_file("0123456789abcdef0123456789abcdef_0000000042_0.parquet"));
        // A longer number is another unit, never this one's file.
        assert!(!UnitName::from_stem("run_10").owns_data_file("run_100_0.parquet"));
        // Ray Data's data files follow the unit's name with `-`, its
        // block-based sinks' with `.`; its `:06` numbers run past a million.
        assert!(UnitName::from_stem("ds_w_000001").owns_data_file("ds_w_000001-0.parquet"));
        assert!(!UnitName::from_stem("ds_w_100000").owns_data_file("ds_w_1000000-0.parquet"));
        assert!(UnitName::from_stem("ds_w_100000").owns_data_file("ds_w_100000.json"));
        assert!(!UnitName::from_stem("ds_w_100000").owns_data_file("ds_w_1000000.json"));
    }
}
