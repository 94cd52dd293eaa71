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
//! pending record. Its data files, never visible to readers, are deleted
//! where the log proves no table version references them (the files its
//! ledger entry names, below, once the entry is older than a killed run's
//! workers can live: [`UnitLog::delete_unreferenced`]); the rest are left
//! to the format's own clean-up (Delta's `vacuum`, Lance's
//! `cleanup_old_versions`).
//!
//! Table maintenance (Iceberg's snapshot expiry, Lance's version clean-up)
//! removes the history that records units. So a sink also writes a ledger
//! entry into the unit's pending record before its table commit
//! ([`TABLE_LEDGER_KEY`](crate::idfile::TABLE_LEDGER_KEY): where the rows
//! are, such as the snapshot that adds them), which Ray's commit carries
//! into the committed record. A unit the history no longer records is
//! looked up by its entry in the table's current files
//! ([`UnitLog::held_by_ledger`]).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};

use crate::commit::CheckpointDir;
use crate::error::{Error, Result};
use crate::idfile::table_ledger;
use crate::layout::UnitName;
use crate::load::CommittedState;
use crate::recover::RecoveryReport;
use crate::store_clock::{STORE_CLOCK_GRAIN_MS, epoch_millis};

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

    /// The committed records of units the table records, as the table
    /// holds them: for each, a Parquet file of `id_column` over the rows
    /// the unit's table commit added. A unit left out (all of them, by
    /// default) is committed with its pending record's own IDs. A retried
    /// task rewrites its pending record from its own rows, which a
    /// non-deterministic transform may make other than the rows of the
    /// earlier attempt whose commit landed: the table's are the ones to
    /// skip. Asked once for every unit a settle commits, so a log reads
    /// the table's history once, not once a unit.
    fn committed_records<'a>(
        &'a self,
        units: &'a [UnitName],
        id_column: &'a str,
    ) -> BoxFuture<'a, Result<HashMap<UnitName, Vec<u8>>>> {
        let _ = (units, id_column);
        Box::pin(async { Ok(HashMap::new()) })
    }

    /// [`recorded`](Self::recorded), and whether the history it read stops
    /// short ([`Lineage::cut`]). The default reads a history that is never
    /// cut. A log whose history can be cut must belong to a sink that
    /// writes each unit's ledger entry into its pending record before its
    /// table commit: under a cut, a pending unit without an entry is one
    /// whose commit never began.
    fn lineage<'a>(&'a self, units: &'a [UnitName]) -> BoxFuture<'a, Result<Lineage>> {
        Box::pin(async move {
            Ok(Lineage {
                recorded: self.recorded(units).await?,
                cut: None,
            })
        })
    }

    /// Of `entries` (a unit and its ledger entry), the units whose rows the
    /// table's current version holds, told by the entry alone (the data
    /// files it names are live, say) rather than by history. The default
    /// tells none.
    fn held_by_ledger<'a>(
        &'a self,
        entries: &'a [(UnitName, String)],
    ) -> BoxFuture<'a, Result<HashSet<UnitName>>> {
        let _ = entries;
        Box::pin(async { Ok(HashSet::new()) })
    }

    /// Of `entries`, the units whose commit the history that is left
    /// shows not to be in the table's current version (the walk from it
    /// reaches the version the commit was made on without passing the
    /// commit), though maintenance cut the history further down. The
    /// default tells none.
    fn absent_by_ledger<'a>(
        &'a self,
        entries: &'a [(UnitName, String)],
    ) -> BoxFuture<'a, Result<HashSet<UnitName>>> {
        let _ = entries;
        Box::pin(async { Ok(HashSet::new()) })
    }

    /// Deletes the data files of units being rolled back that the log can
    /// prove no version of the table references: files of a commit that
    /// never landed, named by the unit's ledger entry, once the entry is
    /// old enough ([`RolledBack::age`]) that no worker of a killed run can
    /// still be making that commit. What it cannot prove unreferenced, and
    /// the files of a unit without an entry (killed while it wrote them,
    /// before its entry), it leaves, and says so. Called once every unit is
    /// decided, before their pending records go: a crash in the middle
    /// leaves the entries to the next recovery; an error is logged and
    /// recovery goes on. Returns how many files it deleted; the default
    /// deletes none.
    fn delete_unreferenced<'a>(
        &'a self,
        rolled_back: &'a [RolledBack],
    ) -> BoxFuture<'a, Result<usize>> {
        let _ = rolled_back;
        Box::pin(async { Ok(0) })
    }
}

/// A unit being rolled back, as [`UnitLog::delete_unreferenced`] is told
/// of it.
#[derive(Debug, Clone, PartialEq)]
pub struct RolledBack {
    /// The unit.
    pub unit: UnitName,
    /// Its ledger entry, when its pending record has one.
    pub entry: Option<String>,
    /// How long ago its pending record was last written (with its entry,
    /// just before its table commit would begin), by the store's clock and
    /// rounded down by the store's grain; None without an entry, or when
    /// the store gives no times.
    pub age: Option<Duration>,
}

/// What a table's history says of some units.
#[derive(Debug, Clone, Default)]
pub struct Lineage {
    /// The units a version in the current version's lineage records.
    pub recorded: HashSet<UnitName>,
    /// Where the history stops short, when it does: maintenance removed
    /// versions a unit of the job may be recorded in, so a unit not in
    /// `recorded` may still be in the table (for messages).
    pub cut: Option<String>,
}

/// How many records are read at once for their ledger entries.
const LEDGER_READS: usize = 16;

impl CheckpointDir {
    /// Step 6 for a table output: each pending unit without a committed
    /// twin is committed in the checkpoint when `log` records it, or its
    /// ledger entry finds its rows in the table (with the
    /// IDs of its rows in the table, [`UnitLog::committed_records`], else
    /// its pending record's, as Ray's commit renames it), else its pending
    /// record is dropped, after the files of its commit that never landed
    /// that the log proves unreferenced are deleted
    /// ([`UnitLog::delete_unreferenced`], counted in the report's
    /// `data_files_deleted`). Where the
    /// history is cut and a unit's entry says its commit began but neither
    /// finds it nor is shown absent by the history left above its base
    /// ([`UnitLog::absent_by_ledger`]), nothing is settled
    /// ([`Error::UnitUndecided`]). In the
    /// report, `rolled_back` are the units dropped,
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
        // Decided before anything changes: a refusal below leaves every
        // record as it was.
        let in_flight: Vec<UnitName> = state.in_flight().cloned().collect();
        if in_flight.is_empty() {
            self.release_committed_twins(state, &mut report).await?;
            return Ok(report);
        }
        let lineage = log.lineage(&in_flight).await?;
        let unresolved: Vec<UnitName> = in_flight
            .iter()
            .filter(|u| !lineage.recorded.contains(*u))
            .cloned()
            .collect();
        let entries = self.ledger_entries(&unresolved, false).await?;
        let held = if entries.is_empty() {
            HashSet::new()
        } else {
            log.held_by_ledger(&entries).await?
        };
        let begun: Vec<(UnitName, String)> = entries
            .iter()
            .filter(|(u, _)| !held.contains(u))
            .cloned()
            .collect();
        let absent = if lineage.cut.is_some() && !begun.is_empty() {
            log.absent_by_ledger(&begun).await?
        } else {
            HashSet::new()
        };
        if let Some(cut) = &lineage.cut
            && let Some((unit, _)) = begun.iter().find(|(u, _)| !absent.contains(u))
        {
            // Its table commit began (its entry precedes it), its files are
            // not live, and the history that would say whether it landed
            // (and a compaction rewrote it since) is gone: decided before
            // anything changes. (A unit whose commit the history left shows
            // not landed, `absent`, is rolled back below.)
            return Err(Error::UnitUndecided {
                checkpoint: self.url()?,
                table: log.table(),
                unit: unit.as_str().to_string(),
                cut: cut.clone(),
            });
        }
        self.release_committed_twins(state, &mut report).await?;
        let (in_table, rolled_back): (Vec<UnitName>, Vec<UnitName>) = in_flight
            .into_iter()
            .partition(|u| lineage.recorded.contains(u) || held.contains(u));
        if !in_table.is_empty() {
            let mut records = log.committed_records(&in_table, id_column).await?;
            let promotions: Vec<(UnitName, Option<Vec<u8>>)> = in_table
                .iter()
                .map(|unit| (unit.clone(), records.remove(unit)))
                .collect();
            futures::stream::iter(promotions)
                .map(|(unit, record)| async move { self.promote(&unit, record).await })
                .buffered(LEDGER_READS)
                .try_collect::<Vec<()>>()
                .await?;
            report.committed_from_table.extend(in_table);
        }
        if !rolled_back.is_empty() {
            // Before the pending records go: they hold the entries that
            // name the files. Deleting is a clean-up: its failure settles
            // nothing differently.
            match self.rolled_back_with_ages(&rolled_back, &begun).await {
                Ok(told) => match log.delete_unreferenced(&told).await {
                    Ok(deleted) => report.data_files_deleted += deleted,
                    Err(e) => tracing::warn!(
                        table = %log.table(),
                        "cairn: the files of the units rolled back were not deleted: {e}"
                    ),
                },
                Err(e) => tracing::warn!(
                    table = %log.table(),
                    "cairn: the ages of the rolled-back units' records were not read, so none \
                     of their files was deleted: {e}"
                ),
            }
        }
        for unit in rolled_back {
            self.release_pending(&unit).await?;
            crate::metrics::metrics().unit_rolled_back();
            report.rolled_back.push(unit);
        }
        Ok(report)
    }

    /// `units` as [`UnitLog::delete_unreferenced`] is told of them: each
    /// with its entry among `entries`, and the age of its pending record by
    /// the store's clock (one HEAD a unit with an entry, and one clock
    /// probe).
    async fn rolled_back_with_ages(
        &self,
        units: &[UnitName],
        entries: &[(UnitName, String)],
    ) -> Result<Vec<RolledBack>> {
        let entry_of: HashMap<&UnitName, &String> = entries.iter().map(|(u, e)| (u, e)).collect();
        let with_entry: Vec<(UnitName, String)> = units
            .iter()
            .filter(|u| entry_of.contains_key(u))
            .map(|u| (u.clone(), self.file(&u.pending_file())))
            .collect();
        let written: Vec<(UnitName, Option<i64>)> = futures::stream::iter(with_entry)
            .map(|(unit, path): (UnitName, String)| async move {
                match self.fs.info(&path).await {
                    Ok(info) => Ok((unit, info.last_modified.as_deref().and_then(epoch_millis))),
                    Err(e) if e.kind() == cairn_fs::ErrorKind::NotFound => Ok((unit, None)),
                    Err(e) => Err(Error::from(e)),
                }
            })
            .buffered(LEDGER_READS)
            .try_collect()
            .await?;
        let now = if written.iter().any(|(_, w)| w.is_some()) {
            self.store_now_millis().await?
        } else {
            None
        };
        let age_of: HashMap<UnitName, Duration> = written
            .into_iter()
            .filter_map(|(unit, w)| {
                let millis = now?.saturating_sub(w?).saturating_sub(STORE_CLOCK_GRAIN_MS);
                Some((
                    unit,
                    Duration::from_millis(u64::try_from(millis).unwrap_or(0)),
                ))
            })
            .collect();
        Ok(units
            .iter()
            .map(|unit| RolledBack {
                unit: unit.clone(),
                entry: entry_of.get(unit).map(|e| (*e).clone()),
                age: age_of.get(unit).copied(),
            })
            .collect())
    }

    /// The ledger entries of `units`' records (committed ones with
    /// `committed`, else pending ones): the units whose record has one.
    /// A record gone since the listing has none.
    async fn ledger_entries(
        &self,
        units: &[UnitName],
        committed: bool,
    ) -> Result<Vec<(UnitName, String)>> {
        // Owned names and paths: the futures borrow nothing per item.
        let files: Vec<(UnitName, String, String)> = units
            .iter()
            .map(|unit| {
                let name = if committed {
                    unit.committed_file()
                } else {
                    unit.pending_file()
                };
                (unit.clone(), self.file(&name), name)
            })
            .collect();
        let found: Vec<Option<(UnitName, String)>> = futures::stream::iter(files)
            .map(
                |(unit, path, name): (UnitName, String, String)| async move {
                    let bytes = match self.fs.cat(&path).await {
                        Ok(bytes) => bytes,
                        Err(e) if e.kind() == cairn_fs::ErrorKind::NotFound => return Ok(None),
                        Err(e) => return Err(Error::from(e)),
                    };
                    Ok(table_ledger(&name, bytes)?.map(|entry| (unit, entry)))
                },
            )
            .buffered(LEDGER_READS)
            .try_collect()
            .await?;
        Ok(found.into_iter().flatten().collect())
    }

    /// Commits a pending unit with `record`, the IDs the table holds for
    /// it (its pending record's own bytes when None), then drops the
    /// pending record.
    async fn promote(&self, unit: &UnitName, record: Option<Vec<u8>>) -> Result<()> {
        let pending = self.file(&unit.pending_file());
        let bytes = match self.fs.cat(&pending).await {
            Ok(bytes) => bytes,
            // Promoted by an earlier recovery that stopped before the
            // clean-up below, or released since the listing.
            Err(e) if e.kind() == cairn_fs::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let bytes = match record {
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

    /// Refuses with [`Error::UnitsNotInTable`] when a committed unit is
    /// neither in the table's log nor, by its ledger entry, in the table's
    /// current files: the table was replaced, rolled back or lost its
    /// history, and a resume would skip rows the table no longer holds.
    pub async fn require_logged(&self, log: &dyn UnitLog, state: &CommittedState) -> Result<()> {
        if state.committed.is_empty() {
            return Ok(());
        }
        let recorded = log.lineage(&state.committed).await?.recorded;
        let mut missing: Vec<UnitName> = state
            .committed
            .iter()
            .filter(|u| !recorded.contains(*u))
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        // History cut by maintenance: the units' ledger entries say where
        // their rows are.
        let entries = self.ledger_entries(&missing, true).await?;
        if !entries.is_empty() {
            let held = log.held_by_ledger(&entries).await?;
            missing.retain(|u| !held.contains(u));
            if missing.is_empty() {
                return Ok(());
            }
        }
        Err(Error::UnitsNotInTable {
            checkpoint: self.url()?,
            table: log.table(),
            units: missing.len(),
            examples: crate::layout::examples(missing.iter()),
        })
    }
}
