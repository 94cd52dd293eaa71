"""cairn's Apache Iceberg sink for Ray Data: each unit appended in one
Iceberg snapshot whose summary records it (``cairn.unit``), the snapshot's
ID its ledger entry; see :mod:`cairn._ray_table`."""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from ._ray_table import (
    TableDatasink,
    UnitIds,
    crash_point,
    delete_orphans,
    joined,
    old_enough,
    warn_orphans_left,
    without_secrets,
)

logger = logging.getLogger(__name__)

#: The snapshot-summary key that names a snapshot's unit.
UNIT_PROPERTY = "cairn.unit"

#: Commits that lose the race to another unit's (the catalog's
#: compare-and-swap of the metadata pointer) are retried this many times
#: on the table's new metadata, beyond pyiceberg's own retries.
DEFAULT_MAX_COMMIT_RETRIES = 100


#: A manifest entry's status for a data file its snapshot added.
_ADDED = 1


def _ledger(snapshot: Any) -> str:
    """The ledger entry of a unit whose rows ``snapshot`` adds: its ID and
    its parent's (the snapshot the commit is made on, None for a table's
    first), and its manifest list and sequence number (which name the files
    the commit wrote, should it never land)."""
    return json.dumps(
        {
            "snapshot": snapshot.snapshot_id,
            "base": snapshot.parent_snapshot_id,
            "manifest_list": snapshot.manifest_list,
            "sequence": snapshot.sequence_number,
        }
    )


def _ledger_field(entry: str, field: str) -> Optional[int]:
    """A snapshot ID a ledger entry names (None for an entry this version
    of cairn does not read, or a field it does not have)."""
    try:
        value = json.loads(entry).get(field)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def _catalog(catalog_kwargs: Mapping[str, Any]) -> Any:
    from pyiceberg.catalog import load_catalog

    kwargs = dict(catalog_kwargs)
    return load_catalog(kwargs.pop("name", "default"), **kwargs)


def _snapshot_of(metadata: Any, unit: str) -> Any:
    """The snapshot of the table's metadata whose summary names ``unit``,
    or None."""
    return next(
        (
            s
            for s in metadata.snapshots
            if s.summary is not None and s.summary.get(UNIT_PROPERTY) == unit
        ),
        None,
    )


class IcebergUnitLog(UnitIds):
    """The units an Iceberg table's snapshots record (``cairn.unit`` in
    their summaries), for cairn's recovery."""

    def __init__(self, table_identifier: str, catalog_kwargs: Mapping[str, Any], location: str):
        self._identifier = table_identifier
        self._catalog_kwargs = dict(catalog_kwargs)
        self._location = location
        #: The table, for messages: its identifier and location.
        self.table = f"{table_identifier} ({without_secrets(location)})"

    def _metadata(self) -> Any:
        return _catalog(self._catalog_kwargs).load_table(self._identifier).metadata

    def landed(self, unit: str) -> bool:
        """Whether a snapshot of the table's current metadata records the
        unit."""
        return _snapshot_of(self._metadata(), unit) is not None

    def unit_ids(self, unit: str, id_column: str) -> Optional[pa.Array]:
        """``id_column`` of the data files the snapshot recording ``unit``
        added (its manifest entries of status ADDED)."""
        table = _catalog(self._catalog_kwargs).load_table(self._identifier)
        snapshot = _snapshot_of(table.metadata, unit)
        if snapshot is None:
            return None
        entries = table.inspect.entries(snapshot_id=snapshot.snapshot_id)
        added = [
            entry["data_file"]["file_path"]
            for entry in entries.select(["status", "snapshot_id", "data_file"]).to_pylist()
            if entry["status"] == _ADDED and entry["snapshot_id"] == snapshot.snapshot_id
        ]
        chunks = []
        for path in added:
            with table.io.new_input(path).open() as f:
                chunks.append(pq.read_table(f, columns=[id_column])[id_column].combine_chunks())
        return joined(chunks)

    def ledger_of(self, unit: str) -> Optional[str]:
        """The ledger entry of ``unit``: the ID of the snapshot of the
        table's metadata that records it."""
        snapshot = _snapshot_of(self._metadata(), unit)
        return None if snapshot is None else _ledger(snapshot)

    def held(self, entries: Mapping[str, str]) -> List[str]:
        """The units of ``entries`` (unit: ledger entry) whose snapshot
        added a data file the current snapshot still holds: its manifest
        entries keep the ID of the snapshot that added each file through
        snapshot expiry. A file a compaction rewrote is held under the
        compaction's snapshot, so its unit is not found here (the caller
        refuses rather than guess)."""
        from pyiceberg.manifest import ManifestContent

        wanted = {unit: _ledger_field(entry, "snapshot") for unit, entry in entries.items()}
        looked_for = {snapshot for snapshot in wanted.values() if snapshot is not None}
        table = _catalog(self._catalog_kwargs).load_table(self._identifier)
        current = table.current_snapshot()
        if current is None or not looked_for:
            return []
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
        return [unit for unit, snapshot in wanted.items() if snapshot in live]

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
        from its summary."""
        metadata = self._metadata()
        by_id = {s.snapshot_id: s for s in metadata.snapshots}
        in_lineage = set()
        snapshot_id = metadata.current_snapshot_id
        expired = None
        while snapshot_id is not None:
            if snapshot_id not in by_id:
                expired = (
                    f"the Iceberg table {self.table}'s snapshot {snapshot_id} and its ancestors "
                    "were expired"
                )
                break
            snapshot = by_id[snapshot_id]
            summary = snapshot.summary
            if summary is not None:
                unit = summary.get(UNIT_PROPERTY)
                if unit:
                    in_lineage.add(unit)
                # A cherry-pick's copy of a unit's commit holds its rows.
                source = _source_of(snapshot)
                if source is not None and source in by_id:
                    picked = (by_id[source].summary or {}).get(UNIT_PROPERTY)
                    if picked:
                        in_lineage.add(picked)
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
                expired = (
                    f"the Iceberg table {self.table}'s snapshots before {snapshot_id} were expired"
                )
            snapshot_id = snapshot.parent_snapshot_id
        return [u for u in units if u in in_lineage], expired


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


class IcebergDatasink(TableDatasink):
    """Appends a dataset to the existing Iceberg table ``table_identifier``
    of the catalog ``catalog_kwargs`` names (pyiceberg's ``load_catalog``
    arguments, ``name`` among them, as Ray's ``write_iceberg`` takes them),
    one snapshot per write task, exactly once under
    :func:`cairn.ray.checkpoint_config`::

        ds.write_datasink(cairn.ray.IcebergDatasink(
            "db.events", {"name": "prod", "type": "sql", "uri": "sqlite:///catalog.db"}))

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
    ):
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
        if UNIT_PROPERTY in self._snapshot_properties:
            raise ValueError(f"snapshot_properties: {UNIT_PROPERTY!r} is cairn's; use another key")
        self._max_commit_retries = int(max_commit_retries)

    def unit_log(self) -> IcebergUnitLog:
        """What cairn's checkpoint manager asks about pending units."""
        return IcebergUnitLog(self.table_identifier, self._catalog_kwargs, self._location)

    def append(self, rows: pa.Table, unit: str, fence: Callable[..., None]) -> None:
        """One snapshot adding ``rows``, its summary naming ``unit``: the
        data files written, then ``fence`` with the snapshot's ID (chosen
        by the writer before the commit) as the ledger entry, then the
        commit (pyiceberg's ``Table.append`` in two steps); a commit that
        lost the race is retried on the table's new metadata, a new
        snapshot and entry, unless that metadata already records the
        unit."""
        from pyiceberg.exceptions import CommitFailedException

        properties = {**self._snapshot_properties, UNIT_PROPERTY: unit}
        catalog = _catalog(self._catalog_kwargs)
        for attempt in range(self._max_commit_retries + 1):
            table = catalog.load_table(self.table_identifier)
            try:
                transaction = table.transaction()
                transaction.append(rows, snapshot_properties=properties)
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
