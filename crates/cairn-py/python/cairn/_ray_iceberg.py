"""cairn's Apache Iceberg sink for Ray Data: each unit appended in one
Iceberg snapshot whose summary records it (``cairn.unit``); see
:mod:`cairn._ray_table`."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List, Mapping, Optional

import pyarrow as pa
import pyarrow.parquet as pq

from ._ray_table import TableDatasink, UnitIds, joined, without_secrets

logger = logging.getLogger(__name__)

#: The snapshot-summary key that names a snapshot's unit.
UNIT_PROPERTY = "cairn.unit"

#: Commits that lose the race to another unit's (the catalog's
#: compare-and-swap of the metadata pointer) are retried this many times
#: on the table's new metadata, beyond pyiceberg's own retries.
DEFAULT_MAX_COMMIT_RETRIES = 100


#: A manifest entry's status for a data file its snapshot added.
_ADDED = 1


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

    def recorded(self, units: List[str]) -> List[str]:
        """The units among ``units`` recorded by a snapshot in the current
        snapshot's ancestry (parent by parent), up to a snapshot that left
        the table empty (pyiceberg's overwrite deletes every file, then
        appends: what came before is not in the table). A rollback leaves
        the snapshots after its target in the metadata but out of the
        ancestry; an expired snapshot ends the ancestry; a compaction
        (``replace``) keeps every row. An overwrite that rewrote every data
        file and left rows raises: whether it was a delete of some rows or
        a replacement of all cannot be told from its summary."""
        metadata = self._metadata()
        by_id = {s.snapshot_id: s for s in metadata.snapshots}
        in_lineage = set()
        snapshot_id = metadata.current_snapshot_id
        while snapshot_id is not None and snapshot_id in by_id:
            snapshot = by_id[snapshot_id]
            summary = snapshot.summary
            if summary is not None:
                unit = summary.get(UNIT_PROPERTY)
                if unit:
                    in_lineage.add(unit)
                cut = _cut_by(summary)
                if cut is None:
                    raise ValueError(
                        f"the Iceberg table {self.table}'s snapshot {snapshot_id} rewrote every "
                        "data file and left rows: whether the rows of cairn's earlier units "
                        "survived it cannot be told. Roll the table back to before it, or move "
                        "the checkpoint away and run the job again"
                    )
                if cut:
                    break
            snapshot_id = snapshot.parent_snapshot_id
        return [u for u in units if u in in_lineage]


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
    metadata. Create the table first (pyiceberg's ``create_table``).
    Expiring the table's snapshots while a job runs removes the records of
    its units: the job's end (or the next resume) then refuses the
    checkpoint, naming the units, rather than go on wrong.
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

    def append(self, rows: pa.Table, unit: str, fence: Callable[[], None]) -> None:
        """One snapshot adding ``rows``, its summary naming ``unit``: the
        data files written, then ``fence``, then the commit (pyiceberg's
        ``Table.append`` in two steps); a commit that lost the race is
        retried on the table's new metadata unless that metadata already
        records the unit."""
        from pyiceberg.exceptions import CommitFailedException

        properties = {**self._snapshot_properties, UNIT_PROPERTY: unit}
        catalog = _catalog(self._catalog_kwargs)
        for attempt in range(self._max_commit_retries + 1):
            table = catalog.load_table(self.table_identifier)
            try:
                transaction = table.transaction()
                transaction.append(rows, snapshot_properties=properties)
                fence()
                transaction.commit_transaction()
                return
            except CommitFailedException:
                if attempt == self._max_commit_retries:
                    raise
                if self.unit_log().landed(unit):
                    return
                time.sleep(min(0.05 * 2**attempt, 2.0))
