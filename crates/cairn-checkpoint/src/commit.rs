//! Steps 1, 3 and 4 of the protocol, around the caller's step 2 (writing the
//! unit's data files `<output>/<unit>_<n>.<ext>`):
//! [`CheckpointDir::write_pending`], [`CheckpointDir::commit`],
//! [`CheckpointDir::release_pending`].

use arrow_array::ArrayRef;
use cairn_fs::{ErrorKind, FileSystem, WriteMode};

use crate::error::Result;
use crate::idfile::encode_unit_ids;
use crate::layout::{OutputLayout, UnitName};

/// A checkpoint directory on a cairn filesystem (use a checkpoint filesystem:
/// see `cairn_fs::build_checkpoint_filesystem`).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use cairn_checkpoint::{StringMode, UnitName};
/// use cairn_checkpoint::internals::{CheckpointDir, RunId};
/// let (fs, _) = cairn_fs::build_checkpoint_filesystem("memory:///doc-ckpt", &Default::default()).unwrap();
/// let ckpt = CheckpointDir::new(fs, "memory:///doc-ckpt", "id");
/// let unit = UnitName::new(&RunId::new(), 0);
/// let ids: arrow_array::ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1, 2]));
/// ckpt.write_pending(&unit, ids.clone()).await.unwrap();
/// // ... write the unit's data files here ...
/// ckpt.commit(&unit, ids).await.unwrap();
/// ckpt.release_pending(&unit).await.unwrap();
/// let state = ckpt.load(StringMode::default()).await.unwrap();
/// assert_eq!((state.ids.len(), state.pending.len()), (2, 0));
/// # })
/// ```
#[derive(Debug, Clone)]
pub struct CheckpointDir {
    pub(crate) fs: FileSystem,
    pub(crate) dir: String,
    pub(crate) id_column: String,
    pub(crate) layout: OutputLayout,
}

impl CheckpointDir {
    /// The checkpoint at `dir` (a URL or path `fs` serves), whose ID files
    /// hold the column `id_column`. Its listings always ask the store
    /// ([`FileSystem::uncached`]), whatever `fs`'s listing cache holds.
    pub fn new(fs: FileSystem, dir: &str, id_column: &str) -> Self {
        Self {
            fs: fs.uncached(),
            dir: dir.trim_end_matches('/').to_string(),
            id_column: id_column.to_string(),
            layout: OutputLayout::Flat,
        }
    }

    /// The same directory, for an output whose data files sit as `layout`
    /// says (flat by default).
    ///
    /// ```
    /// use cairn_checkpoint::internals::{CheckpointDir, OutputLayout};
    /// let (fs, _) = cairn_fs::build_checkpoint_filesystem("memory:///doc-layout", &Default::default()).unwrap();
    /// let ckpt = CheckpointDir::new(fs, "memory:///doc-layout", "id").with_layout(OutputLayout::Partitioned);
    /// assert_eq!(ckpt.layout(), OutputLayout::Partitioned);
    /// ```
    pub fn with_layout(mut self, layout: OutputLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Where the job's data files sit under its output.
    pub fn layout(&self) -> OutputLayout {
        self.layout
    }

    /// The filesystem the directory is on.
    pub fn fs(&self) -> &FileSystem {
        &self.fs
    }

    /// The directory's URL or path, as given.
    pub fn path(&self) -> &str {
        &self.dir
    }

    /// The directory's canonical URL (`file:///abs/ckpt`, `s3://bucket/ckpt`),
    /// for messages and records.
    pub fn url(&self) -> Result<String> {
        Ok(self.fs.url(&self.fs.strip(&self.dir)?))
    }

    /// The URL of a file in the directory.
    pub(crate) fn file(&self, name: &str) -> String {
        format!("{}/{name}", self.dir)
    }

    /// Step 1: records that `unit`, holding `ids`, is in flight.
    pub async fn write_pending(&self, unit: &UnitName, ids: ArrayRef) -> Result<()> {
        self.write_pending_in(unit, ids, &[]).await
    }

    /// Step 1 for a unit whose data files go into the partition
    /// directories `partitions` (paths relative to the output, such as
    /// `source=web/date=2026-11-30`; none: the output itself). The record
    /// names them, so rolling the unit back lists only those directories.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use std::sync::Arc;
    /// use cairn_checkpoint::UnitName;
    /// use cairn_checkpoint::internals::{CheckpointDir, RunId};
    /// let (fs, _) = cairn_fs::build_checkpoint_filesystem("memory:///doc-parts", &Default::default()).unwrap();
    /// let ckpt = CheckpointDir::new(fs.clone(), "memory:///doc-parts", "id");
    /// let unit = UnitName::new(&RunId::new(), 0);
    /// let ids: arrow_array::ArrayRef = Arc::new(arrow_array::Int64Array::from(vec![1, 2]));
    /// ckpt.write_pending_in(&unit, ids, &["source=web".into()]).await.unwrap();
    /// let record = fs.cat(&format!("memory:///doc-parts/{}", unit.pending_file())).await.unwrap();
    /// let dirs = cairn_checkpoint::internals::recorded_partitions("pending", record).unwrap();
    /// assert_eq!(dirs, Some(vec!["source=web".to_string()]));
    /// # })
    /// ```
    pub async fn write_pending_in(
        &self,
        unit: &UnitName,
        ids: ArrayRef,
        partitions: &[String],
    ) -> Result<()> {
        let bytes = encode_unit_ids(&self.id_column, ids, None, partitions)?;
        self.fs
            .pipe(
                &self.file(&unit.pending_file()),
                bytes,
                WriteMode::Overwrite,
            )
            .await?;
        Ok(())
    }

    /// Step 3, the commit point: writes `<unit>.parquet` with the same IDs, as
    /// one atomic create-if-absent (link on POSIX, a conditional PUT where the
    /// store honours it, a plain PUT where it does not). A commit that finds
    /// the unit already committed (a retried step) succeeds: it holds the same IDs.
    pub async fn commit(&self, unit: &UnitName, ids: ArrayRef) -> Result<()> {
        self.commit_unit(unit, ids, None).await
    }

    /// [`CheckpointDir::commit`], recording how many data files the unit
    /// wrote when known.
    pub(crate) async fn commit_unit(
        &self,
        unit: &UnitName,
        ids: ArrayRef,
        data_files: Option<usize>,
    ) -> Result<()> {
        let bytes = encode_unit_ids(&self.id_column, ids, data_files, &[])?;
        match self
            .fs
            .pipe(&self.file(&unit.committed_file()), bytes, WriteMode::Create)
            .await
        {
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e.into()),
            Ok(()) => {
                crate::metrics::metrics().unit_committed();
                Ok(())
            }
        }
    }

    /// Step 4: drops the pending record of a committed unit. Already gone is fine.
    pub async fn release_pending(&self, unit: &UnitName) -> Result<()> {
        Ok(self.fs.rm_file(&self.file(&unit.pending_file())).await?)
    }

    /// Step 7, [`crate::load::load_committed`] on this directory.
    pub async fn load(&self, mode: crate::StringMode) -> Result<crate::load::CommittedState> {
        crate::load::load_committed(&self.fs, &self.dir, &self.id_column, mode).await
    }

    /// [`crate::load::list_committed`] on this directory: its state without
    /// reading the IDs.
    pub async fn list(&self) -> Result<crate::load::CommittedState> {
        crate::load::list_committed(&self.fs, &self.dir).await
    }
}
