"""cairn's Delta Lake sink for Ray Data: each unit appended in one Delta
transaction that records it as an application transaction
(``cairn:<unit>``); see :mod:`cairn._ray_table`."""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import pyarrow as pa

from ._ray_table import TableDatasink, UnitIds, added_ids, warn_orphans_left, without_secrets

logger = logging.getLogger(__name__)

#: The Delta application-transaction ID of a unit: ``cairn:<unit>``.
APP_ID_PREFIX = "cairn:"

#: The commit-info key naming a commit's unit (from the commit's custom
#: metadata).
UNIT_KEY = "cairn.unit"

#: A unit's transaction version (one transaction per unit, so any will do).
_UNIT_VERSION = 1

#: Concurrent units commit with Delta's optimistic concurrency: an append
#: that loses the race for a log version is retried on the next one.
DEFAULT_MAX_COMMIT_RETRIES = 100


class DeltaUnitLog(UnitIds):
    """The units a Delta table's log records (its application
    transactions named ``cairn:<unit>``), for cairn's recovery."""

    def __init__(self, table_uri: str, storage_options: Optional[Dict[str, str]] = None):
        self._uri = table_uri
        self._storage_options = storage_options
        #: The table, for messages.
        self.table = without_secrets(table_uri)

    def delete_unreferenced(
        self, rolled_back: Mapping[str, Tuple[Optional[str], Optional[float]]]
    ) -> int:
        """Deletes nothing: the sink writes no ledger entry (its one call
        writes the files and commits them), so a rolled-back unit's files
        are not known. Says so, naming the units, and returns 0."""
        if rolled_back:
            warn_orphans_left(self.table, list(rolled_back), "Delta's vacuum")
        return 0

    def _table(self) -> Any:
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self._uri, storage_options=self._storage_options):
            return None
        return DeltaTable(self._uri, storage_options=self._storage_options)

    def landed(self, unit: str) -> bool:
        """Whether the table's snapshot holds the unit's application
        transaction."""
        table = self._table()
        return table is not None and table.transaction_version(APP_ID_PREFIX + unit) is not None

    def recorded(self, units: List[str]) -> List[str]:
        """The units among ``units`` committed by a version in the current
        version's lineage (none when there is no table yet).

        The log's commits are walked from the latest down: a ``RESTORE`` to
        version ``r`` goes on at ``r`` (the versions between are not the
        table's any more), an overwrite of the whole table, a replaced
        table, a ``TRUNCATE`` or a ``DELETE`` of every row ends the walk.
        Commits older than the log keeps (its clean-up removed them) are
        judged by the unit's application transaction, unless the walk was
        cut before reaching them. A restore to a version the log no longer
        keeps raises (the units it removed still have their application
        transactions). A restore whose own commit the clean-up removed
        cannot be seen: keep the log (``delta.logRetentionDuration``)
        longer than the job. A restore to a time (whose version the
        log does not name) raises: which units it kept cannot be told.
        Delta's application transactions alone would answer "recorded" for
        a unit a restore removed."""
        table, history = self._pinned_history()
        if table is None:
            return []
        in_lineage, cut = set(), False
        version = table.version()
        while version >= 0:
            entry = history.get(version)
            if entry is None:
                break  # older than the log keeps
            unit = entry.get(UNIT_KEY)
            if unit:
                in_lineage.add(unit)
            operation = entry.get("operation")
            parameters = entry.get("operationParameters") or {}
            if operation == "RESTORE":
                target = parameters.get("version")
                if target is None or int(target) >= version:
                    raise ValueError(
                        f"the Delta table {self.table} was restored at version {version} to "
                        f"{parameters or 'a version its log does not name'}: which of cairn's "
                        "units it kept cannot be told. Restore it to a version number, or move "
                        "the checkpoint away and run the job again"
                    )
                if int(target) not in history:
                    # The units committed between the target and the oldest
                    # kept commit are gone, and their application
                    # transactions (which a restore keeps) cannot tell them
                    # from units older than the target, which it kept.
                    raise ValueError(
                        f"the Delta table {self.table} was restored at version {version} to "
                        f"version {target}, older than its log keeps: which of cairn's units "
                        "the restore kept cannot be told. Keep the log "
                        "(delta.logRetentionDuration) longer than the job; now, move the "
                        "checkpoint away and run the job again"
                    )
                version = int(target)
                continue
            if _replaces_everything(operation, parameters):
                cut = True
                break
            version -= 1
        seen = {entry[UNIT_KEY] for entry in history.values() if entry.get(UNIT_KEY)}
        found = []
        for u in units:
            if u in in_lineage:
                found.append(u)
            elif not cut and version >= 0 and u not in seen:
                # Committed before the oldest commit the log keeps.
                if table.transaction_version(APP_ID_PREFIX + u) is not None:
                    found.append(u)
        return found

    def unreadable(self) -> Tuple[type, ...]:
        """Also deltalake's refusal of a table whose features pyarrow's
        view of it does not read (deletion vectors, column mapping)."""
        from deltalake.exceptions import DeltaProtocolError

        return (*super().unreadable(), DeltaProtocolError)

    def unit_ids(self, unit: str, id_column: str) -> Optional[pa.Array]:
        """``id_column`` of the files the commit recording ``unit`` added
        (its version's files less the version before's)."""
        from deltalake import DeltaTable

        table, history = self._pinned_history()
        versions = [v for v, entry in history.items() if entry.get(UNIT_KEY) == unit]
        if table is None or not versions:
            return None
        version = versions[0]
        if version > 0 and version - 1 not in history:
            # The version before was cleaned up: what the commit added
            # cannot be told from it.
            return None

        def fragments(at: int) -> List[Tuple[str, Any]]:
            loaded = DeltaTable(self._uri, version=at, storage_options=self._storage_options)
            return [(f.path, f) for f in loaded.to_pyarrow_dataset().get_fragments()]

        before = [key for key, _ in fragments(version - 1)] if version > 0 else []
        return added_ids(before, fragments(version), id_column)

    def _pinned_history(self) -> Tuple[Any, Dict[int, Dict[str, Any]]]:
        """The table and its log's commits by version, listed while no
        other commit landed: deltalake numbers ``history()``'s commits down
        from the version it loaded, but lists every commit there is, so a
        commit landing in between would shift every number."""
        for _ in range(_HISTORY_ATTEMPTS):
            table = self._table()
            if table is None:
                return None, {}
            history = {entry["version"]: entry for entry in table.history()}
            latest = self._table()
            if latest is not None and latest.version() == table.version():
                return table, history
        raise ValueError(
            f"the Delta table {self.table} kept changing while cairn read its log "
            f"({_HISTORY_ATTEMPTS} tries): run again once no other writer commits to it"
        )


#: Reads of a Delta log that another writer's commit interrupted, before
#: cairn gives up.
_HISTORY_ATTEMPTS = 10

#: Operations (delta-rs's and Spark's names) that replace every row.
_REPLACING = {
    "CREATE OR REPLACE TABLE",
    "REPLACE TABLE",
    "CREATE OR REPLACE TABLE AS SELECT",
    "REPLACE TABLE AS SELECT",
    "TRUNCATE",
}


def _replaces_everything(operation: Optional[str], parameters: Dict[str, Any]) -> bool:
    """Whether a Delta commit removed every row before it: an overwrite
    without a predicate or a dynamic partition overwrite, a replaced or
    truncated table, or a delete without a predicate (Spark writes ``[]``
    for none)."""
    predicate = parameters.get("predicate")
    no_predicate = predicate in (None, "", "[]")
    if operation == "WRITE":
        dynamic = str(parameters.get("partitionOverwriteMode", "")).upper() == "DYNAMIC"
        return parameters.get("mode") == "Overwrite" and no_predicate and not dynamic
    if operation in _REPLACING:
        return True
    return operation == "DELETE" and no_predicate


class DeltaDatasink(TableDatasink):
    """Appends a dataset to the Delta table at ``table_uri``, one Delta
    transaction per write task, exactly once under
    :func:`cairn.ray.checkpoint_config`::

        ds.write_datasink(cairn.ray.DeltaDatasink("s3://bucket/tables/t", storage_options={...}))

    ``storage_options`` are deltalake's (``AWS_ENDPOINT_URL``, ...);
    ``filesystem`` is the pyarrow filesystem Ray and cairn's manager see the
    table directory through (``cairn.build_checkpoint_filesystem(table_uri,
    options)`` for a store other than local disk). ``partition_by`` and
    ``schema_mode`` (``"merge"``) go to ``deltalake.write_deltalake``.

    The table's own log decides what is committed, so the sink needs a
    store where Delta commits are atomic: local disk, or S3-compatible
    stores with conditional writes (deltalake's ``conditional_put``) or a
    lock provider. On a store that ignores conditional writes (Garage),
    deltalake needs ``AWS_S3_ALLOW_UNSAFE_RENAME`` and two tasks committing
    at once can overwrite each other's log entry: run one write task at a
    time there (``concurrency=1``), or the end of the job (or a resume)
    will refuse the checkpoint whose units the table lost.
    """

    def __init__(
        self,
        table_uri: str,
        *,
        storage_options: Optional[Dict[str, str]] = None,
        partition_by: Optional[List[str]] = None,
        schema_mode: Optional[str] = None,
        filesystem: Any = None,
        max_commit_retries: int = DEFAULT_MAX_COMMIT_RETRIES,
    ):
        if schema_mode not in (None, "merge"):
            raise ValueError(
                f"schema_mode={schema_mode!r}: cairn.ray.DeltaDatasink appends, so only "
                "schema_mode='merge' (add new columns) or None (refuse a new schema) apply"
            )
        super().__init__(table_uri, filesystem=filesystem)
        self.table_uri = table_uri
        self._storage_options = dict(storage_options) if storage_options else None
        self._partition_by = list(partition_by) if partition_by else None
        self._schema_mode = schema_mode
        self._max_commit_retries = int(max_commit_retries)

    def unit_log(self) -> DeltaUnitLog:
        """What cairn's checkpoint manager asks about pending units."""
        return DeltaUnitLog(self.table_uri, self._storage_options)

    def append(self, rows: pa.Table, unit: str, fence: Callable[..., None]) -> None:
        """One ``write_deltalake`` append whose commit carries the unit's
        application transaction (``fence`` first: the call writes the
        files and commits them). No ledger entry: Delta's checkpoints keep
        every application transaction through log clean-up, so the log
        records the unit for as long as the table has it (unless
        ``delta.setTransactionRetentionDuration`` is set: then a resume
        refuses units it no longer finds)."""
        from deltalake import CommitProperties, Transaction, write_deltalake

        fence(None)
        write_deltalake(
            self.table_uri,
            rows,
            mode="append",
            partition_by=self._partition_by,
            schema_mode=self._schema_mode,
            storage_options=self._storage_options,
            commit_properties=CommitProperties(
                custom_metadata={UNIT_KEY: unit},
                max_commit_retries=self._max_commit_retries,
                app_transactions=[Transaction(APP_ID_PREFIX + unit, _UNIT_VERSION)],
            ),
        )
