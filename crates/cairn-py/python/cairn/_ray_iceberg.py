"""cairn's Apache Iceberg sink for Ray Data: the units waiting for their
commit at the same time appended in one Iceberg snapshot, each unit's
ledger entry (written into its pending checkpoint record before the
commit) naming that snapshot and the write UUID in its data files' names.
The snapshot's summary says how many units it carries
(``cairn.group-size``) and names none of them: every metadata file of a
table repeats every snapshot's summary, so names there made a job's
metadata grow with its units times its commits. Only a unit whose record
can keep no entry is named (``cairn.units``: it and its write UUID), as a
snapshot of a single unit names it (``cairn.unit``). See
:mod:`cairn._ray_table` and :mod:`cairn._ray_committer`."""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Set, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from ._ray_committer import (
    DEFAULT_COMMIT_TIMEOUT_SECONDS,
    DEFAULT_MAX_UNITS_PER_COMMIT,
    DEFAULT_COMMIT_INTERVAL_SECONDS,
    FAILED,
    Submission,
    fence_all,
)
from ._ray_table import (
    TableDatasink,
    commit_unit_records,
    fence_group,
    UnitFence,
    UnitIds,
    crash_point,
    delete_orphans,
    joined,
    old_enough,
    settle_recorded,
    warn_orphans_left,
    without_secrets,
)

logger = logging.getLogger(__name__)

#: The snapshot-summary key that names a snapshot's unit (a snapshot of
#: one unit, as cairn made them with ``max_units_per_commit=1``).
UNIT_PROPERTY = "cairn.unit"

#: The snapshot-summary key of the units of a group commit whose
#: checkpoint record keeps no ledger entry (no checkpoint, or a task with
#: more than one record): a JSON object of each unit and the write UUID in
#: its data files' names.
UNITS_PROPERTY = "cairn.units"

#: The snapshot-summary key of how many units a group commit carries.
GROUP_SIZE_PROPERTY = "cairn.group-size"

#: Commits that lose the race to another unit's (the catalog's
#: compare-and-swap of the metadata pointer) are retried this many times
#: on the table's new metadata, beyond pyiceberg's own retries.
DEFAULT_MAX_COMMIT_RETRIES = 100


#: A manifest entry's status for a data file its snapshot added.
_ADDED = 1


def _ledger(snapshot: Any, write_uuid: Optional[str] = None) -> str:
    """The ledger entry of a unit whose rows ``snapshot`` adds: its ID
    (pyiceberg keeps it through its own retries of the commit) and its
    parent's (the snapshot the commit is made on, None for a table's
    first), its manifest list and sequence number (which name the files
    the commit wrote, should it never land), and for a group commit the
    write UUID in the unit's data files' names (which of the snapshot's
    files are the unit's)."""
    entry: Dict[str, Any] = {
        "snapshot": snapshot.snapshot_id,
        "base": snapshot.parent_snapshot_id,
        "manifest_list": snapshot.manifest_list,
        "sequence": snapshot.sequence_number,
    }
    if write_uuid is not None:
        entry["write_uuid"] = write_uuid
    return json.dumps(entry)


def _ledger_field(entry: str, field: str) -> Optional[int]:
    """A snapshot ID a ledger entry names (None for an entry this version
    of cairn does not read, or a field it does not have)."""
    try:
        value = json.loads(entry).get(field)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def _ledger_write_uuid(entry: Optional[str]) -> Optional[str]:
    """The write UUID a group commit's ledger entry names (None for any
    other entry)."""
    try:
        value = json.loads(entry).get("write_uuid") if entry else None
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _catalog(catalog_kwargs: Mapping[str, Any]) -> Any:
    from pyiceberg.catalog import load_catalog

    kwargs = dict(catalog_kwargs)
    return load_catalog(kwargs.pop("name", "default"), **kwargs)


def _units_of(summary: Any) -> Dict[str, Optional[str]]:
    """The units a snapshot's summary records, each with the write UUID
    in its data files' names (None: the snapshot's files are all the
    unit's)."""
    if summary is None:
        return {}
    unit = summary.get(UNIT_PROPERTY)
    units: Dict[str, Optional[str]] = {unit: None} if unit else {}
    grouped = summary.get(UNITS_PROPERTY)
    if grouped:
        try:
            parsed = json.loads(grouped)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ValueError(
                f"an Iceberg snapshot summary's {UNITS_PROPERTY!r} is not the JSON object cairn "
                f"writes: {grouped[:200]!r}"
            )
        units.update({str(u): str(w) for u, w in parsed.items()})
    return units


def _snapshot_of(metadata: Any, unit: str) -> Any:
    """The snapshot of the table's metadata whose summary names ``unit``,
    or None."""
    return next((s for s in metadata.snapshots if unit in _units_of(s.summary)), None)


class IcebergUnitLog(UnitIds):
    """The units an Iceberg table's snapshots record (``cairn.unit`` or
    ``cairn.units`` in their summaries) and those whose ledger entries name
    a snapshot (a group commit's units), for cairn's recovery. Recovery
    asks :meth:`lineage` by name, then :meth:`held` with the entries of the
    units it lacks; a unit :meth:`held` was told of is then found by its
    entry (:meth:`unit_ids`, :meth:`ledger_of`)."""

    def __init__(self, table_identifier: str, catalog_kwargs: Mapping[str, Any], location: str):
        self._identifier = table_identifier
        self._catalog_kwargs = dict(catalog_kwargs)
        self._location = location
        #: The table, for messages: its identifier and location.
        self.table = f"{table_identifier} ({without_secrets(location)})"
        #: The ledger entries :meth:`held` was given, by unit.
        self._told: Dict[str, str] = {}

    def _loaded(self) -> Any:
        """The table, loaded once while :meth:`reading_once` is open."""
        return self.read_once(
            "table", lambda: _catalog(self._catalog_kwargs).load_table(self._identifier)
        )

    def _metadata(self) -> Any:
        return self._loaded().metadata

    def table_ids(self, id_column: str) -> Optional[Iterator[pa.Array]]:
        """``id_column`` of every row of the table's current snapshot
        (pyiceberg's scan of that column alone), or None when the catalog
        has no such table."""
        from pyiceberg.exceptions import NoSuchTableError

        try:
            table = _catalog(self._catalog_kwargs).load_table(self._identifier)
        except NoSuchTableError:
            return None
        self._column_of([f.name for f in table.schema().fields], id_column)
        if table.current_snapshot() is None:
            return iter(())
        reader = table.scan(selected_fields=(id_column,)).to_arrow_batch_reader()
        return (batch.column(0) for batch in reader)

    def landed(self, unit: str) -> bool:
        """Whether a snapshot of the table's current metadata records the
        unit."""
        return _snapshot_of(self._metadata(), unit) is not None

    def _snapshot_with_uuid(self, metadata: Any, unit: str) -> Tuple[Any, Optional[str]]:
        """The snapshot of ``metadata`` that adds ``unit``'s rows (its
        summary names it, or the entry :meth:`held` was told names it) and
        the write UUID in the unit's files' names (None: all the snapshot's
        files are the unit's); (None, None) when none is kept."""
        snapshot = _snapshot_of(metadata, unit)
        if snapshot is not None:
            return snapshot, _units_of(snapshot.summary)[unit]
        entry = self._told.get(unit)
        own, write_uuid = _ledger_field(entry or "", "snapshot"), _ledger_write_uuid(entry)
        if own is None or write_uuid is None:
            return None, None
        snapshot = next((s for s in metadata.snapshots if s.snapshot_id == own), None)
        return (snapshot, write_uuid) if snapshot is not None else (None, None)

    def tell(self, entries: Mapping[str, Optional[str]]) -> None:
        """Remembers the ledger entries of units (unit: entry; None: none)
        that :meth:`unit_ids` and :meth:`ledger_of` find them by."""
        self._told.update({unit: entry for unit, entry in entries.items() if entry})

    def unit_ids(self, unit: str, id_column: str) -> Optional[pa.Array]:
        """``id_column`` of the data files the snapshot recording ``unit``
        added (its manifest entries of status ADDED; of a group commit,
        those whose names carry the unit's write UUID)."""
        table = self._loaded()
        snapshot, write_uuid = self._snapshot_with_uuid(table.metadata, unit)
        if snapshot is None:
            return None
        entries = self.read_once(
            ("entries", snapshot.snapshot_id),
            lambda: table.inspect.entries(snapshot_id=snapshot.snapshot_id)
            .select(["status", "snapshot_id", "data_file"])
            .to_pylist(),
        )
        added = [
            entry["data_file"]["file_path"]
            for entry in entries
            if entry["status"] == _ADDED
            and entry["snapshot_id"] == snapshot.snapshot_id
            # A group commit's files of this unit carry its write UUID.
            and (write_uuid is None or write_uuid in entry["data_file"]["file_path"])
        ]
        chunks = []
        for path in added:
            with table.io.new_input(path).open() as f:
                chunks.append(pq.read_table(f, columns=[id_column])[id_column].combine_chunks())
        return joined(chunks)

    def ledger_of(self, unit: str) -> Optional[str]:
        """The ledger entry of ``unit``: the ID of the snapshot of the
        table's metadata that records it (a group commit's unit: the entry
        :meth:`held` was told, when its snapshot is kept)."""
        metadata = self._metadata()
        snapshot = _snapshot_of(metadata, unit)
        if snapshot is not None:
            return _ledger(snapshot)
        found, _ = self._snapshot_with_uuid(metadata, unit)
        return self._told[unit] if found is not None else None

    def held(self, entries: Mapping[str, str]) -> List[str]:
        """The units of ``entries`` (unit: ledger entry) whose snapshot is
        in the current snapshot's ancestry as :meth:`lineage` walks it (a
        group commit's units, which no summary names), or added a data file
        the current snapshot still holds: its manifest entries keep the ID
        of the snapshot that added each file through snapshot expiry. A file
        a compaction rewrote is held under the compaction's snapshot, so
        its unit is not found here once its snapshot expired (the caller
        refuses rather than guess). Remembers the entries, for
        :meth:`unit_ids` and :meth:`ledger_of`."""
        from pyiceberg.manifest import ManifestContent

        self.tell(entries)
        wanted = {unit: _ledger_field(entry, "snapshot") for unit, entry in entries.items()}
        table = _catalog(self._catalog_kwargs).load_table(self._identifier)
        current = table.current_snapshot()
        if current is None or not any(s is not None for s in wanted.values()):
            return []
        in_lineage = self._walk(table.metadata).snapshots
        found = [unit for unit, snapshot in wanted.items() if snapshot in in_lineage]
        wanted = {u: s for u, s in wanted.items() if u not in found and s is not None}
        looked_for = set(wanted.values())
        if not looked_for:
            return found
        live: Set[int] = set()
        # The current snapshot's data manifests, entry by entry, until
        # every snapshot looked for is seen.
        for manifest in current.manifests(table.io):
            if manifest.content != ManifestContent.DATA:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                live.add(entry.snapshot_id)
            if looked_for <= live:
                break
        return found + [unit for unit, snapshot in wanted.items() if snapshot in live]

    def absent(self, entries: Mapping[str, str]) -> List[str]:
        """The units of ``entries`` whose commit is not in the current
        snapshot's ancestry, told by the history that is left: the walk up
        from the current snapshot reaches the snapshot the commit was made
        on (its entry's base) without passing its own. A commit that
        landed is a descendant of its base (a retry rebases it on a later
        snapshot), so it would have been passed. A unit whose base is not
        reached (expired) is not answered, nor is one whose commit a
        snapshot passed was cherry-picked from (``source-snapshot-id``)."""
        metadata = self._metadata()
        by_id = {s.snapshot_id: s for s in metadata.snapshots}
        passed = set()
        snapshot_id = metadata.current_snapshot_id
        while snapshot_id is not None and snapshot_id in by_id:
            passed.add(snapshot_id)
            source = _source_of(by_id[snapshot_id])
            if source is not None:
                passed.add(source)
            snapshot_id = by_id[snapshot_id].parent_snapshot_id
        answered = []
        for unit, entry in entries.items():
            own = _ledger_field(entry, "snapshot")
            base = _ledger_field(entry, "base")
            if own is not None and base is not None and base in passed and own not in passed:
                answered.append(unit)
        return answered

    def delete_unreferenced(
        self, rolled_back: Mapping[str, Tuple[Optional[str], Optional[float]]]
    ) -> int:
        """Deletes the files of the rolled-back units' commits (unit: its
        ledger entry or None, and the entry's age in seconds by the store's
        clock or None) that no snapshot of the table references: the
        manifest list an entry names, the manifests in it its snapshot
        added, and the data files those add, all under the table's
        location, when the table's metadata has no snapshot of that ID, no
        snapshot lists that manifest list, and no manifest a snapshot lists
        holds one of them (only the snapshots and manifests made at or
        after the commit's sequence number are read: an earlier one was
        made before the files existed), and the entry is older than the
        grace period (:data:`ORPHAN_GRACE_SECONDS`: a killed run's worker
        may still be committing) plus the time pyiceberg goes on retrying a
        commit (the table's ``commit.retry.total-timeout-ms``, 30 minutes by
        default: it retries on newer metadata with the same data files).
        Returns how many it deleted.
        The files of a unit without such an entry (killed while it wrote
        them), within the grace period, or whose proof fails, are left,
        and said so. A failure is logged, never raised: recovery goes on."""
        left = []
        deleted = 0
        table = None
        for unit, (entry, age) in rolled_back.items():
            try:
                if entry is None or age is None:
                    left.append(unit)
                    continue
                if table is None:
                    table = _catalog(self._catalog_kwargs).load_table(self._identifier)
                if not old_enough(age, _commit_retry_seconds(table)):
                    left.append(unit)
                    continue
                files = self._unreferenced_files(table, entry)
                if files is None:
                    left.append(unit)
                    continue
                deleted += delete_orphans(_Deleter(table.io), files, self.table)
            except Exception as e:  # noqa: BLE001 - nothing proven, nothing deleted
                logger.warning(
                    "cairn: the files of unit %s in %s were kept: %s", unit, self.table, e
                )
                left.append(unit)
        if left:
            warn_orphans_left(
                self.table,
                left,
                "an orphan-file clean-up of the table (Spark's remove_orphan_files, say)",
            )
        return deleted

    def _unreferenced_files(self, table: Any, entry: Optional[str]) -> Optional[List[str]]:
        """The files the commit ``entry`` names wrote, data files first,
        when no snapshot of ``table`` references them; None when the entry
        names none or a snapshot may reference them."""
        from pyiceberg.manifest import ManifestContent, read_manifest_list

        try:
            parsed = json.loads(entry) if entry else {}
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        own, sequence = parsed.get("snapshot"), parsed.get("sequence")
        listed = parsed.get("manifest_list")
        within = self._location.rstrip("/") + "/"
        if not isinstance(own, int) or not isinstance(sequence, int) or not isinstance(listed, str):
            return None
        if not _inside(listed, within):
            return None
        metadata = table.metadata
        last = getattr(metadata, "last_sequence_number", None)
        if last is not None and sequence > last + 1:
            return None  # not a commit made on this table's history
        if any(s.snapshot_id == own or s.manifest_list == listed for s in metadata.snapshots):
            return None  # landed (maybe rolled back since): kept for time travel
        io = table.io
        try:
            manifests = [
                m for m in read_manifest_list(io.new_input(listed)) if m.added_snapshot_id == own
            ]
        except FileNotFoundError:
            return None  # deleted by an earlier clean-up, which ends with it
        manifest_paths = {m.manifest_path for m in manifests}
        data = []
        for m in manifests:
            if m.content != ManifestContent.DATA:
                continue
            try:
                entries = m.fetch_manifest_entry(io, discard_deleted=False)
            except FileNotFoundError:
                continue  # an earlier clean-up deleted it, after its data files
            data.extend(
                e.data_file.file_path
                for e in entries
                if e.snapshot_id == own and e.status == _ADDED
            )
        files = set(data)
        read = set()  # a manifest most snapshots after it list again
        for snapshot in metadata.snapshots:
            if (snapshot.sequence_number or 0) < sequence:
                continue
            for manifest in snapshot.manifests(io):
                if manifest.manifest_path in manifest_paths:
                    return None
                if (manifest.sequence_number or 0) < sequence or manifest.manifest_path in read:
                    continue
                read.add(manifest.manifest_path)
                for e in manifest.fetch_manifest_entry(io, discard_deleted=False):
                    if e.data_file.file_path in files:
                        return None
        every = data + sorted(manifest_paths) + [listed]
        if not all(_inside(path, within) for path in every):
            return None
        return every

    def recorded(self, units: List[str]) -> List[str]:
        """The units among ``units`` recorded by a snapshot in the current
        snapshot's ancestry: :meth:`lineage`'s."""
        return self.lineage(units)[0]

    def lineage(self, units: List[str]) -> Tuple[List[str], Optional[str]]:
        """The units among ``units`` recorded by a snapshot in the current
        snapshot's ancestry (parent by parent), up to a snapshot that left
        the table empty (pyiceberg's overwrite deletes every file, then
        appends: what came before is not in the table), and where the
        ancestry was cut (its oldest snapshot's parent expired, or a parent
        it names is not kept; None when it reaches the table's first
        snapshot or the cut of an overwrite). A
        rollback leaves the snapshots after its target in the metadata but
        out of the ancestry; a compaction (``replace``) keeps every row. An
        overwrite that rewrote every data file and left rows raises: whether
        it was a delete of some rows or a replacement of all cannot be told
        from its summary. A group commit's units are not named here: their
        entries find them (:meth:`held`)."""
        walked = self._walk(self._metadata())
        return [u for u in units if u in walked.units], walked.cut

    def _walk(self, metadata: Any) -> "_Ancestry":
        """The current snapshot's ancestry as :meth:`lineage` reads it."""
        by_id = {s.snapshot_id: s for s in metadata.snapshots}
        walked = _Ancestry(set(), set(), None)
        snapshot_id = metadata.current_snapshot_id
        while snapshot_id is not None:
            if snapshot_id not in by_id:
                walked.cut = (
                    f"the Iceberg table {self.table}'s snapshot {snapshot_id} and its ancestors "
                    "were expired"
                )
                break
            snapshot = by_id[snapshot_id]
            summary = snapshot.summary
            walked.snapshots.add(snapshot_id)
            if summary is not None:
                walked.units.update(_units_of(summary))
                # A cherry-pick's copy of a unit's commit holds its rows.
                source = _source_of(snapshot)
                if source is not None and source in by_id:
                    walked.units.update(_units_of(by_id[source].summary))
                    walked.snapshots.add(source)
                emptied = _cut_by(summary)
                if emptied is None:
                    raise ValueError(
                        f"the Iceberg table {self.table}'s snapshot {snapshot_id} rewrote every "
                        "data file and left rows: whether the rows of cairn's earlier units "
                        "survived it cannot be told. Roll the table back to before it, or move "
                        "the checkpoint away and run the job again"
                    )
                if emptied:
                    break
            if snapshot.parent_snapshot_id is None and _had_a_parent(snapshot):
                # pyiceberg's expiry clears the parent of the oldest
                # snapshot it keeps.
                walked.cut = (
                    f"the Iceberg table {self.table}'s snapshots before {snapshot_id} were expired"
                )
            snapshot_id = snapshot.parent_snapshot_id
        return walked


@dataclass
class _Ancestry:
    """What the walk up a table's current snapshot's ancestry found."""

    #: The units the summaries of its snapshots name.
    units: Set[str]
    #: Its snapshots' IDs (and those of the commits its cherry-picks copied).
    snapshots: Set[int]
    #: Where it was cut by expiry, for messages (None: whole).
    cut: Optional[str]


#: How many times a committer reads a unit's checkpoint record before the
#: unit fails (whether an earlier commit holds it cannot be told).
_RECORD_READS = 3


def _require_manifest_list(snapshot: Any, io: Any, location: str) -> None:
    """Raises when ``snapshot``, found in the table's metadata as the
    commit of a unit, lists a manifest list that is gone: pyiceberg deletes
    a commit's files when it reports the commit failed, and a commit whose
    answer was lost on its last try can have landed anyway, leaving the
    table pointing at deleted files. Nothing settles a unit on such a
    table."""
    if not io.new_input(snapshot.manifest_list).exists():
        raise RuntimeError(
            f"cairn: the Iceberg table {without_secrets(location)}'s snapshot "
            f"{snapshot.snapshot_id} lists the manifest list {snapshot.manifest_list}, which is "
            "gone (pyiceberg reported its commit failed and deleted the commit's files, and it "
            "had landed): the table cannot be read past it. Roll the table back to the "
            "snapshot before it, then run the job again"
        )


def _commit_retry_seconds(table: Any) -> float:
    """How long pyiceberg goes on retrying a commit after the sink's fence
    (the table's ``commit.retry.total-timeout-ms``, 30 minutes by
    default): it rebuilds the snapshot on newer metadata with the same data
    files, so a killed run's worker may land them that long after its
    entry."""
    from pyiceberg.table import TableProperties
    from pyiceberg.utils.properties import property_as_int

    millis = property_as_int(
        table.metadata.properties,
        TableProperties.COMMIT_TOTAL_RETRY_TIME_MS,
        TableProperties.COMMIT_TOTAL_RETRY_TIME_MS_DEFAULT,
    )
    return max(0, millis or 0) / 1000


def _inside(path: str, within: str) -> bool:
    """Whether ``path`` is a file under the directory ``within`` (which
    ends in ``/``), no ``..`` or ``.`` segment taking it out."""
    if not path.startswith(within):
        return False
    return all(part not in ("", ".", "..") for part in path[len(within) :].split("/"))


class _Deleter:
    """A pyiceberg FileIO seen as the ``delete_file`` that
    :func:`delete_orphans` calls."""

    def __init__(self, io: Any):
        self._io = io

    def delete_file(self, path: str) -> None:
        self._io.delete(path)


def _source_of(snapshot: Any) -> Optional[int]:
    """The snapshot a cherry-pick copied (``source-snapshot-id`` in its
    summary), or None."""
    summary = snapshot.summary
    value = summary.get("source-snapshot-id") if summary is not None else None
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _had_a_parent(snapshot: Any) -> bool:
    """Whether a snapshot that names no parent had one: its sequence
    number is past the table's first (format 2 and later), it is a
    compaction or a delete, or its summary counts data files it removed or
    did not add (an overwrite of an empty table adds every file it
    holds)."""
    if (snapshot.sequence_number or 0) > 1:
        return True
    summary = snapshot.summary
    if summary is None:
        return False
    operation = getattr(summary, "operation", None)
    if str(getattr(operation, "value", operation)) in ("replace", "delete"):
        return True  # a table's first snapshot has nothing to rewrite or delete
    if int(summary.get("deleted-data-files") or 0) > 0:
        return True
    total = summary.get("total-data-files")
    added = summary.get("added-data-files")
    return total is not None and int(total) > int(added or 0)


def _cut_by(summary: Any) -> Optional[bool]:
    """Whether a snapshot removed every row its parent had: True when it
    left the table empty; None when it rewrote every data file and left
    rows (a copy-on-write delete of some rows or a replacement of all);
    False otherwise (appends, compactions, deletes that kept a file)."""

    def count(key: str) -> int:
        value = summary.get(key)
        return int(value) if value is not None else 0

    operation = getattr(summary, "operation", None)
    if str(getattr(operation, "value", operation)) == "replace":
        return False
    if count("deleted-data-files") == 0 or summary.get("total-data-files") is None:
        return False
    if count("total-records") == 0:
        return True
    if count("total-data-files") == count("added-data-files"):
        return None
    return False


#: How long a write task's process reuses the table it loaded to stage a
#: unit's files (its schema, partition spec and file IO), in seconds: a
#: catalog load a unit (the metadata file read and parsed) cost a 2,000-unit
#: job more than its commits.
_STAGING_TABLE_SECONDS = 30.0

#: The tables staging loaded in this process: (identifier, catalog) ->
#: (when, table).
_STAGING_TABLES: Dict[Tuple[str, str], Tuple[float, Any]] = {}


def _staging_table(identifier: str, catalog_kwargs: Mapping[str, Any]) -> Any:
    """The table ``identifier`` as staging sees it: loaded at most
    :data:`_STAGING_TABLE_SECONDS` ago in this process. Only its schema,
    partition spec and file IO are used (the commit loads the table
    afresh): files are written with a schema at most that old, as Ray's own
    Iceberg sink writes every task's files with the schema it loaded when
    the job started (Iceberg reads them by field ID)."""
    key = (identifier, json.dumps(catalog_kwargs, sort_keys=True, default=str))
    now = time.monotonic()
    cached = _STAGING_TABLES.get(key)
    if cached is not None and now - cached[0] < _STAGING_TABLE_SECONDS:
        return cached[1]
    table = _catalog(catalog_kwargs).load_table(identifier)
    _STAGING_TABLES[key] = (now, table)
    return table


@dataclass
class _Staged:
    """A unit's data files, written by its task and not yet in a commit:
    what the task hands the committer."""

    #: The UUID in the files' names (``00000-<task>-<uuid>.parquet``).
    write_uuid: str
    data_files: List[Any]
    fence: UnitFence


@dataclass
class _GroupCommit:
    """The committer's side of the Iceberg sink: built in the committer's
    process (:meth:`make`), it commits a group of staged units in one
    snapshot, then their checkpoint records."""

    table_identifier: str
    catalog_kwargs: Dict[str, Any]
    location: str
    snapshot_properties: Dict[str, str]
    max_commit_retries: int

    def make(self) -> Tuple[Callable, Callable]:
        """(commit_batch, discard) for :class:`cairn._ray_committer.GroupCommitter`."""
        return self.commit_batch, self.discard

    def _table(self) -> Any:
        return _catalog(self.catalog_kwargs).load_table(self.table_identifier)

    def discard(self, staged: _Staged) -> None:
        """Deletes a unit's staged data files that no commit named (a
        retry's, whose unit an earlier attempt committed or is committing;
        one whose fence failed): a file already gone, or one that cannot be
        deleted, is left with a warning."""
        try:
            io = self._table().io
        except Exception as e:  # noqa: BLE001 - a file left is logged, never fatal
            logger.warning("cairn: the staged files of a unit were left: %s", e)
            return
        for data_file in staged.data_files:
            try:
                io.delete(data_file.file_path)
            except FileNotFoundError:
                continue
            except Exception as e:  # noqa: BLE001 - as above
                logger.warning(
                    "cairn: the unreferenced file %s was left: %s", data_file.file_path, e
                )

    def commit_batch(self, batch: List[Submission]) -> Dict[str, Tuple[str, str]]:
        """One snapshot adding every unit's files, its summary saying how
        many units it carries (and naming those whose record keeps no
        entry): the fences first (each unit's pending record checked and
        its ledger entry, the snapshot's and its write UUID, written into
        it), then the commit, then each unit's committed checkpoint record.
        A commit that lost the race is retried on the table's new metadata
        (a new snapshot, the entries written again), unless that metadata
        holds the snapshot it reported failed (pyiceberg gives up on a
        response lost after the commit landed). A unit the table
        already records (an earlier submission's commit, made by a
        committer that died before its records) is not committed again:
        its checkpoint record is committed from the table."""
        from pyiceberg.exceptions import CommitFailedException

        outcomes: Dict[str, Tuple[str, str]] = {}
        live = list(batch)
        attempt = 0
        #: The entries of the commit that last reported failure, by unit.
        tried: Dict[str, str] = {}
        while live:
            table = self._table()
            live = self._not_recorded(table, live, outcomes, tried)
            if not live:
                break
            properties = {**self.snapshot_properties, GROUP_SIZE_PROPERTY: str(len(live))}
            # Only units that no entry will find are named.
            named = {s.unit: s.payload.write_uuid for s in live if not s.payload.fence.keeps_entry}
            if named:
                properties[UNITS_PROPERTY] = json.dumps(named, sort_keys=True)
            before = {snapshot.snapshot_id for snapshot in table.metadata.snapshots}
            transaction = table.transaction()
            with transaction._append_snapshot_producer(properties) as append_files:
                for submission in live:
                    for data_file in submission.payload.data_files:
                        append_files.append_data_file(data_file)
            staged = next(
                snapshot
                for snapshot in transaction.table_metadata.snapshots
                if snapshot.snapshot_id not in before
            )
            entries = {s.unit: _ledger(staged, s.payload.write_uuid) for s in live}
            fenced = fence_group(live, entries, outcomes, self.discard)
            if len(fenced) < len(live):
                live = fenced  # staged again without the units refused
                continue
            crash_point("table-after-fence", live[0].unit)
            try:
                transaction.commit_transaction()
            except CommitFailedException:
                if attempt == self.max_commit_retries:
                    raise
                tried = entries
                time.sleep(min(0.05 * 2**attempt, 2.0))
                attempt += 1
                continue
            crash_point("table-after-commit", live[0].unit)
            commit_unit_records(
                [(s, entries[s.unit], None) for s in live],
                outcomes,
                without_secrets(self.location),
            )
            break
        return outcomes

    def _not_recorded(
        self,
        table: Any,
        live: List[Submission],
        outcomes: Dict[str, Tuple[str, str]],
        tried: Mapping[str, str],
    ) -> List[Submission]:
        """The submissions whose unit no snapshot of ``table``'s metadata records:
        by name in its summary, or (a group commit's unit) by a ledger
        entry: the one of this call's commit that reported failure
        (``tried``), or the one the unit's checkpoint record holds now,
        read for a unit an earlier committer may have committed (a retried
        task's, one handed over again after its committer died, or any
        unit a restarted committer takes: that committer may have fenced
        and committed it; a unit whose record cannot be read fails, its
        files kept). The others' rows are in the table: a snapshot that
        names this submission's write UUID is its own commit (an earlier
        try that landed), committed with its IDs; one that names another is
        an earlier submission's, whose committer died before the unit's
        records: committed with the table's IDs, this submission's staged
        files discarded."""
        metadata = table.metadata
        recorded: Dict[str, Tuple[Optional[str], str]] = {}
        for snapshot in metadata.snapshots:
            units = _units_of(snapshot.summary)
            entry = _ledger(snapshot) if units else ""
            for unit, write_uuid in units.items():
                recorded[unit] = (write_uuid, entry)
        entries = {s.unit: tried[s.unit] for s in live if s.unit in tried}
        for submission in live:
            if submission.unit in entries:
                # What finds the unit's rows should its snapshot expire.
                submission.payload.fence.carried_entry = entries[submission.unit]
        asked = [
            s
            for s in live
            if s.unit not in recorded
            and s.unit not in entries
            and (s.payload.fence.retried or s.payload.fence.resent)
        ]
        read: Dict[str, Optional[str]] = {}

        def read_entry(submission: Submission) -> None:
            # A read that fails is tried again before its unit fails.
            for attempt in range(_RECORD_READS):
                try:
                    read[submission.unit] = submission.payload.fence.recorded_entry()
                    return
                except Exception:
                    if attempt + 1 == _RECORD_READS:
                        raise
                    time.sleep(0.2 * 2**attempt)

        errors = fence_all([functools.partial(read_entry, s) for s in asked])
        unread = set()
        for submission, error in zip(asked, errors):
            if error is not None:
                # Whether an earlier commit holds it cannot be told: its
                # files may be the table's, so they are kept; its pending
                # record settles it.
                outcomes[submission.unit] = (
                    FAILED,
                    f"its checkpoint record could not be read ({error})",
                )
                unread.add(submission.unit)
            elif read.get(submission.unit) is not None:
                entry = read[submission.unit]
                entries[submission.unit] = entry
                # What finds the unit's rows should its snapshot expire.
                submission.payload.fence.carried_entry = entry
        live = [s for s in live if s.unit not in unread]
        by_id = {snapshot.snapshot_id: snapshot for snapshot in metadata.snapshots}
        checked: Set[int] = set()
        for unit, entry in entries.items():
            write_uuid = _ledger_write_uuid(entry)
            if unit not in recorded and write_uuid is not None:
                snapshot = by_id.get(_ledger_field(entry, "snapshot"))
                if snapshot is None:
                    continue
                if snapshot.snapshot_id not in checked:
                    _require_manifest_list(snapshot, table.io, self.location)
                    checked.add(snapshot.snapshot_id)
                recorded[unit] = (write_uuid, entry)
        log = IcebergUnitLog(self.table_identifier, self.catalog_kwargs, self.location)
        log.tell({unit: entries[unit] for unit in entries if unit in recorded})
        return settle_recorded(
            live,
            recorded,
            lambda submission, write_uuid: write_uuid == submission.payload.write_uuid,
            log,
            self.discard,
            outcomes,
            lambda submission, entry: (_ledger_write_uuid(entry) == submission.payload.write_uuid),
        )


class IcebergDatasink(TableDatasink):
    """Appends a dataset to the existing Iceberg table ``table_identifier``
    of the catalog ``catalog_kwargs`` names (pyiceberg's ``load_catalog``
    arguments, ``name`` among them, as Ray's ``write_iceberg`` takes them),
    exactly once under :func:`cairn.ray.checkpoint_config`::

        ds.write_datasink(cairn.ray.IcebergDatasink(
            "db.events", {"name": "prod", "type": "sql", "uri": "sqlite:///catalog.db"}))

    Each write task (a unit) writes its data files and hands them to the
    job's committer (a Ray actor on the driver's node), which commits the
    units it holds in one snapshot once the oldest has waited
    ``commit_interval`` seconds or ``max_units_per_commit`` wait, then
    their checkpoint records; the job's end waits for the last commit, at
    most ``commit_timeout`` seconds. ``max_units_per_commit=1``: each task
    commits its own snapshot, as before group commits.

    ``filesystem`` is the pyarrow filesystem Ray and cairn's manager see the
    table's location through (``cairn.build_checkpoint_filesystem(location,
    options)`` for a store other than local disk); ``snapshot_properties``
    are added to each snapshot's summary. Commits race through the
    catalog's compare-and-swap of the table's metadata, retried on the new
    metadata. Create the table first (pyiceberg's ``create_table``). Each
    unit's snapshot ID is its ledger entry in the checkpoint, so expiring
    snapshots while a job runs or between a kill and its resume leaves its
    units found (docs/python.md says what holds; a compaction before the
    job ends can make a resume refuse).
    """

    def __init__(
        self,
        table_identifier: str,
        catalog_kwargs: Mapping[str, Any],
        *,
        filesystem: Any = None,
        snapshot_properties: Optional[Dict[str, str]] = None,
        max_commit_retries: int = DEFAULT_MAX_COMMIT_RETRIES,
        max_units_per_commit: int = DEFAULT_MAX_UNITS_PER_COMMIT,
        commit_interval: float = DEFAULT_COMMIT_INTERVAL_SECONDS,
        commit_timeout: float = DEFAULT_COMMIT_TIMEOUT_SECONDS,
    ):
        """The sink's settings (docs/python.md has what each does).

        Args:
            table_identifier: the table's identifier in the catalog
                (``"db.embeddings"``); the table must exist.
            catalog_kwargs: pyiceberg's ``load_catalog`` arguments, with the
                catalog's ``name`` (``{"name": "prod", "type": "sql", "uri":
                ...}``).
            filesystem: the pyarrow filesystem Ray and cairn's manager see the
                table's location through, for a store other than local disk.
            snapshot_properties: properties added to each snapshot's summary
                (``cairn.*`` keys are cairn's own).
            max_commit_retries: how often a commit that lost a race with
                another writer is tried again (100).
            max_units_per_commit: at most this many units (write tasks) in one
                table commit (1000); 1: each task commits its own unit.
            commit_interval: seconds the job's committer waits for more units
                before it commits the ones it holds (5).
            commit_timeout: seconds the job's end waits for the committer's
                last commit (3600) before it fails, keeping the checkpoint.
        """
        from pyiceberg.exceptions import NoSuchTableError

        try:
            table = _catalog(catalog_kwargs).load_table(table_identifier)
        except NoSuchTableError as e:
            raise ValueError(
                f"cairn.ray.IcebergDatasink: the catalog has no table {table_identifier!r}; "
                "create it first (pyiceberg: catalog.create_table(identifier, schema=...))"
            ) from e
        self._location = table.location()
        super().__init__(self._location, filesystem=filesystem)
        self.table_identifier = table_identifier
        self._catalog_kwargs = dict(catalog_kwargs)
        self._snapshot_properties = dict(snapshot_properties or {})
        for key in (UNIT_PROPERTY, UNITS_PROPERTY, GROUP_SIZE_PROPERTY):
            if key in self._snapshot_properties:
                raise ValueError(f"snapshot_properties: {key!r} is cairn's; use another key")
        self._max_commit_retries = int(max_commit_retries)
        self.init_group_commits(max_units_per_commit, commit_interval, commit_timeout)

    def unit_log(self) -> IcebergUnitLog:
        """What cairn's checkpoint manager asks about pending units."""
        return IcebergUnitLog(self.table_identifier, self._catalog_kwargs, self._location)

    def group_name(self) -> str:
        """The table's identifier and location, in its committer's name."""
        return f"{self.table_identifier} {self._location}"

    def group_commit(self) -> _GroupCommit:
        """The committer's side: one snapshot a group."""
        return _GroupCommit(
            self.table_identifier,
            self._catalog_kwargs,
            self._location,
            self._snapshot_properties,
            self._max_commit_retries,
        )

    def append(self, rows: pa.Table, unit: str, fence: UnitFence) -> Any:
        """The unit's data files written, then handed to the job's
        committer (:class:`_GroupCommit`; ``HANDED_OVER``), or committed
        here (``max_units_per_commit=1``: pyiceberg's ``Table.append`` in
        two steps, the fence between them). Returns True when the
        committer holds the unit committed by an earlier attempt of the
        task (this attempt's files were deleted)."""
        if not self.hands_units_over():
            self._append_alone(rows, unit, fence)
            return None
        return self.hand_over(unit, self._stage(rows, fence), fence)

    def _stage(self, rows: pa.Table, fence: UnitFence) -> _Staged:
        """Writes the unit's data files (pyiceberg's writer, as its
        ``append`` does, after its schema check), named by a new write
        UUID."""
        from pyiceberg.io.pyarrow import _check_pyarrow_schema_compatible, _dataframe_to_data_files
        from pyiceberg.table import DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE
        from pyiceberg.utils.config import Config

        table = _staging_table(self.table_identifier, self._catalog_kwargs)
        _check_pyarrow_schema_compatible(
            table.metadata.schema(),
            provided_schema=rows.schema,
            downcast_ns_timestamp_to_us=Config().get_bool(DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE)
            or False,
            format_version=table.metadata.format_version,
        )
        write_uuid = uuid.uuid4()
        data_files = list(
            _dataframe_to_data_files(
                table_metadata=table.metadata, write_uuid=write_uuid, df=rows, io=table.io
            )
        )
        return _Staged(str(write_uuid), data_files, fence)

    def _append_alone(self, rows: pa.Table, unit: str, fence: UnitFence) -> None:
        """One snapshot adding ``rows``, its summary naming ``unit``: the
        data files written once (as :meth:`_stage` writes them), then on
        the table's metadata a snapshot adding them, ``fence`` with its ID
        (chosen before the commit) as the ledger entry, then the commit.
        A commit that lost the race is retried on the table's new metadata
        with the same files, a new snapshot and entry, unless that metadata
        already records the unit: no retry leaves a copy of the rows that
        no snapshot names."""
        from pyiceberg.exceptions import CommitFailedException

        data_files = self._stage(rows, fence).data_files
        properties = {**self._snapshot_properties, UNIT_PROPERTY: unit}
        catalog = _catalog(self._catalog_kwargs)
        for attempt in range(self._max_commit_retries + 1):
            table = catalog.load_table(self.table_identifier)
            try:
                transaction = table.transaction()
                with transaction._append_snapshot_producer(properties) as append_files:
                    for data_file in data_files:
                        append_files.append_data_file(data_file)
                staged = _snapshot_of(transaction.table_metadata, unit)
                fence(None if staged is None else _ledger(staged))
                crash_point("table-after-fence", unit)
                transaction.commit_transaction()
                return
            except CommitFailedException:
                if attempt == self._max_commit_retries:
                    raise
                if self.unit_log().landed(unit):
                    return
                time.sleep(min(0.05 * 2**attempt, 2.0))
