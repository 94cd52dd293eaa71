//! Recovery for an output that is a table (Delta Lake, Iceberg, Lance): the
//! table's own log, not file names, says which units reached it.
//!
//! A unit bound for a table is written as pending, then its data files are
//! written and committed to the table in one table transaction that records
//! the unit's name, then the unit is committed in the checkpoint. A crash
//! between the table commit and the checkpoint commit leaves a unit pending
//! whose rows readers already see: rolling it back would write them twice.
//! So recovery asks the table ([`UnitLog`]): a pending unit the table
//! records is committed in the checkpoint; one it does not record loses its
//! pending record, and its data files, never visible to readers, are left
//! to the format's own clean-up (Delta's `vacuum`): cairn deletes nothing
//! inside a table.

use std::collections::HashSet;
use std::fmt;

use futures::future::BoxFuture;

use crate::commit::CheckpointDir;
use crate::error::{Error, Result};
use crate::layout::UnitName;
use crate::load::CommittedState;
use crate::recover::RecoveryReport;

/// The log of a table output: which units' transactions it holds.
///
/// ```
/// use std::collections::HashSet;
/// use futures::future::BoxFuture;
/// use cairn_checkpoint::UnitName;
/// use cairn_checkpoint::internals::UnitLog;
///
/// /// A table that recorded the units named in a list.
/// #[derive(Debug)]
/// struct Recorded(Vec<String>);
///
/// impl UnitLog for Recorded {
///     fn recorded<'a>(
///         &'a self,
///         units: &'a [UnitName],
///     ) -> BoxFuture<'a, cairn_checkpoint::Result<HashSet<UnitName>>> {
///         Box::pin(async move {
///             Ok(units.iter().filter(|u| self.0.iter().any(|r| r == u.as_str())).cloned().collect())
///         })
///     }
///     fn table(&self) -> String {
///         "file:///tables/t".into()
///     }
/// }
/// let log = Recorded(vec!["a".into()]);
/// assert_eq!(log.table(), "file:///tables/t");
/// ```
pub trait UnitLog: Send + Sync + fmt::Debug {
    /// Of `units`, those whose table transaction the table records.
    fn recorded<'a>(&'a self, units: &'a [UnitName]) -> BoxFuture<'a, Result<HashSet<UnitName>>>;

    /// The table, for messages (a URL, no secrets).
    fn table(&self) -> String;

    /// The committed record of a unit the table records, as the table
    /// holds it: a Parquet file of `id_column` over the rows the unit's
    /// table commit added. `None` (the default) commits the pending
    /// record's own IDs. A retried task rewrites its pending record from
    /// its own rows, which a non-deterministic transform may make other
    /// than the rows of the earlier attempt whose commit landed: the
    /// table's are the ones to skip.
    fn committed_record<'a>(
        &'a self,
        unit: &'a UnitName,
        id_column: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>>> {
        let _ = (unit, id_column);
        Box::pin(async { Ok(None) })
    }
}

impl CheckpointDir {
    /// Step 6 for a table output: each pending unit without a committed
    /// twin is committed in the checkpoint when `log` records it (with the
    /// IDs of its rows in the table, [`UnitLog::committed_record`], else
    /// its pending record's, as Ray's commit renames it), else its pending
    /// record is dropped and nothing in the table is touched. In the report, `rolled_back` are the units dropped,
    /// `committed_from_table` those committed here. Safe to repeat after a
    /// crash in the middle.
    pub async fn settle_by_log(
        &self,
        log: &dyn UnitLog,
        state: &CommittedState,
        id_column: &str,
    ) -> Result<RecoveryReport> {
        let mut report = RecoveryReport::default();
        if state.complete {
            return Ok(report);
        }
        let in_flight = self.release_committed_twins(state, &mut report).await?;
        if in_flight.is_empty() {
            return Ok(report);
        }
        let recorded = log.recorded(&in_flight).await?;
        for unit in in_flight {
            if recorded.contains(&unit) {
                self.promote(&unit, log, id_column).await?;
                report.committed_from_table.push(unit);
            } else {
                self.release_pending(&unit).await?;
                crate::metrics::metrics().unit_rolled_back();
                report.rolled_back.push(unit);
            }
        }
        Ok(report)
    }

    /// Commits a pending unit with the IDs the table holds for it (its
    /// pending record's own bytes when `log` does not give them), then
    /// drops the pending record.
    async fn promote(&self, unit: &UnitName, log: &dyn UnitLog, id_column: &str) -> Result<()> {
        let pending = self.file(&unit.pending_file());
        let bytes = match self.fs.cat(&pending).await {
            Ok(bytes) => bytes,
            // Promoted by an earlier recovery that stopped before the
            // clean-up below, or released since the listing.
            Err(e) if e.kind() == cairn_fs::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let bytes = match log.committed_record(unit, id_column).await? {
            Some(record) => bytes::Bytes::from(record),
            None => bytes,
        };
        match self
            .fs
            .pipe(
                &self.file(&unit.committed_file()),
                bytes,
                cairn_fs::WriteMode::Create,
            )
            .await
        {
            Ok(()) => crate::metrics::metrics().unit_committed(),
            Err(e) if e.kind() == cairn_fs::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
        self.release_pending(unit).await
    }

    /// Refuses with [`Error::UnitsNotInTable`] when a committed unit is not
    /// in the table's log: the table was replaced, rolled back or lost its
    /// history, and a resume would skip rows the table no longer holds.
    pub async fn require_logged(&self, log: &dyn UnitLog, state: &CommittedState) -> Result<()> {
        if state.committed.is_empty() {
            return Ok(());
        }
        let recorded = log.recorded(&state.committed).await?;
        let missing: Vec<&UnitName> = state
            .committed
            .iter()
            .filter(|u| !recorded.contains(*u))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(Error::UnitsNotInTable {
            checkpoint: self.url()?,
            table: log.table(),
            units: missing.len(),
            examples: crate::layout::examples(missing.iter().copied()),
        })
    }
}
