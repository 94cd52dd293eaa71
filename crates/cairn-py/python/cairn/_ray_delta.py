"""cairn's Delta Lake sink for Ray Data: units appended in Delta
transactions that record each as an application transaction
(``cairn:<unit>``): a group of them in one commit by the job's committer,
or one unit a commit (a table whose appends need deltalake's writer,
``max_units_per_commit=1``); see
:mod:`cairn._ray_table` and :mod:`cairn._ray_committer`."""

from __future__ import annotations

import dataclasses
import json
import logging
from urllib.parse import urlsplit
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import pyarrow as pa

from ._ray_committer import (
    DEFAULT_COMMIT_INTERVAL_SECONDS,
    DEFAULT_COMMIT_TIMEOUT_SECONDS,
    DEFAULT_MAX_UNITS_PER_COMMIT,
    Submission,
)
from ._ray_delta_files import (
    DATA_FILE,
    StagedFile,
    fitted,
    reads_files_of,
    stats_hold,
    why_not_staged,
    write_staged,
)
from ._ray_table import (
    TableDatasink,
    UnitFence,
    UnitIds,
    added_ids,
    commit_unit_records,
    crash_point,
    create_table_once,
    delete_orphans,
    discard_staged,
    entry_files,
    fence_group,
    old_enough,
    refuse_unfitting,
    settle_recorded,
    staging_table,
    warn_orphans_left,
    without_secrets,
)

logger = logging.getLogger(__name__)

#: The Delta application-transaction ID of a unit: ``cairn:<unit>``.
APP_ID_PREFIX = "cairn:"

#: The commit-info key naming a commit's unit (from the commit's custom
#: metadata), in a commit of one unit.
UNIT_KEY = "cairn.unit"

#: The commit-info key of a group commit's units: an object of each unit
#: and the data files (paths in the table) it adds.
UNITS_KEY = "cairn.units"

#: A unit's transaction version (one transaction per unit, so any will do).
_UNIT_VERSION = 1

#: Concurrent units commit with Delta's optimistic concurrency: an append
#: that loses the race for a log version is retried on the next one.
DEFAULT_MAX_COMMIT_RETRIES = 100


def _units_of(entry: Mapping[str, Any]) -> Dict[str, Optional[List[str]]]:
    """The units a commit's info (a ``history()`` entry) records, each
    with the data files it added (None: every file the commit added, a
    commit of one unit)."""
    units: Dict[str, Optional[List[str]]] = {}
    one = entry.get(UNIT_KEY)
    if one:
        units[str(one)] = None
    many = entry.get(UNITS_KEY)
    if isinstance(many, str):
        try:
            many = json.loads(many)
        except ValueError:
            many = None
    if isinstance(many, dict):
        for unit, files in many.items():
            units[str(unit)] = [str(f) for f in files] if isinstance(files, list) else []
    return units


def _files_ledger(files: List[str], base: Optional[int]) -> str:
    """The ledger entry of a unit a group commit adds: its data files
    (paths in the table, unique to the write) and the version the commit
    is read at, when known."""
    entry: Dict[str, Any] = {"files": sorted(files)}
    if base is not None:
        entry["base"] = base
    return json.dumps(entry)


#: The orphan warning's advice, as written (tested): deltalake's vacuum
#: lists the directory only with ``full=True``, deletes only with
#: ``dry_run=False``, and spares files younger than its retention (7 days)
#: unless told otherwise; a staged file a running job's committer holds is
#: one of those, hence "once no job writes the table".
ORPHAN_CLEAN_UP = (
    "deltalake.DeltaTable(uri).vacuum(retention_hours=0, enforce_retention_duration=False, "
    "full=True, dry_run=False), run once no job writes the table,"
)


class DeltaUnitLog(UnitIds):
    """The units a Delta table's log records (its application
    transactions named ``cairn:<unit>``), for cairn's recovery."""

    def __init__(
        self,
        table_uri: str,
        storage_options: Optional[Dict[str, str]] = None,
        filesystem: Any = None,
        path: Optional[str] = None,
    ):
        self._uri = table_uri
        self._storage_options = storage_options
        #: The pyarrow filesystem and path the table's directory is seen
        #: through, where staged files no commit names are deleted (None:
        #: none is deleted).
        self._filesystem = filesystem
        self._path = path
        #: The table, for messages.
        self.table = without_secrets(table_uri)

    def delete_unreferenced(
        self, rolled_back: Mapping[str, Tuple[Optional[str], Optional[float]]]
    ) -> int:
        """Deletes the staged data files of the rolled-back units (unit: its
        ledger entry or None, and the entry's age in seconds by the store's
        clock or None) that no commit names: those an entry names, when
        the table's snapshot holds no application transaction of the unit
        (written atomically with its files' ``add`` actions, and kept by
        restores and log clean-up: no commit ever added them) and the
        entry is older than the grace period (a killed run's committer may
        still be committing them). Returns how many it deleted. The files
        of a unit committed by its task alone (no entry: its one call
        writes and commits them), of one within the grace period, of one
        some commit added (then restored away: kept for time travel), or
        when ``delta.setTransactionRetentionDuration`` may have expired
        transactions, are left, and said so. A failure is logged, never
        raised: recovery goes on."""
        left, deleted = [], 0
        try:
            table = self._table()
            expiring = table is not None and (table.metadata().configuration or {}).get(
                "delta.setTransactionRetentionDuration"
            )
            for unit, (entry, age) in rolled_back.items():
                files, _ = entry_files(entry, DATA_FILE)
                if (
                    not files
                    or table is None
                    or expiring
                    or not old_enough(age)
                    or self._filesystem is None
                    or not self._path
                    or table.transaction_version(APP_ID_PREFIX + unit) is not None
                ):
                    left.append(unit)
                    continue
                paths = [f"{self._path.rstrip('/')}/{name}" for name in files]
                deleted += delete_orphans(self._filesystem, paths, self.table)
        except Exception as e:  # noqa: BLE001 - nothing proven, nothing more deleted
            logger.warning(
                "cairn: the files of the units rolled back in %s were kept: %s", self.table, e
            )
            left = list(rolled_back)
        if left:
            warn_orphans_left(self.table, left, ORPHAN_CLEAN_UP)
        return deleted

    def _table(self) -> Any:
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self._uri, storage_options=self._storage_options):
            return None
        return DeltaTable(self._uri, storage_options=self._storage_options)

    def table_ids(self, id_column: str) -> Optional[Iterator[pa.Array]]:
        """``id_column`` of every row of the table's current version
        (deltalake's pyarrow dataset, that column alone), or None when
        there is no table."""
        table = self._table()
        if table is None:
            return None
        dataset = table.to_pyarrow_dataset()
        self._column_of(dataset.schema.names, id_column)
        return (batch.column(0) for batch in dataset.to_batches(columns=[id_column]))

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
            in_lineage.update(_units_of(entry))
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
        seen = {unit for entry in history.values() for unit in _units_of(entry)}
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
        (its version's files less the version before's; of a group
        commit's, those its entry names for the unit)."""
        from deltalake import DeltaTable

        table, history = self._pinned_history()
        versions = [v for v, entry in history.items() if unit in _units_of(entry)]
        if table is None or not versions:
            return None
        version = versions[0]
        files = _units_of(history[version])[unit]
        named = None if files is None else set(files)
        if version > 0 and version - 1 not in history:
            # The version before was cleaned up: what the commit added
            # cannot be told from it.
            return None

        def all_fragments(at: int) -> List[Tuple[str, Any]]:
            loaded = DeltaTable(self._uri, version=at, storage_options=self._storage_options)
            return [(f.path, f) for f in loaded.to_pyarrow_dataset().get_fragments()]

        def fragments(at: int) -> List[Tuple[str, Any]]:
            return [
                (path, f)
                for path, f in self.read_once(("fragments", at), lambda: all_fragments(at))
                # A group commit adds other units' files too.
                # (Staged files are in the table's directory, by name.)
                if at != version or named is None or path.rsplit("/", 1)[-1] in named
            ]

        before = [key for key, _ in fragments(version - 1)] if version > 0 else []
        return added_ids(before, fragments(version), id_column)

    def ledger_of(self, unit: str) -> Optional[str]:
        """The ledger entry of ``unit`` as its group commit's info gives it
        (its files, the version the commit read); None for a commit of one
        unit (its files are not named) or one the log no longer keeps."""
        _, history = self._pinned_history()
        for entry in history.values():
            files = _units_of(entry).get(unit)
            if files is not None:
                read = entry.get("readVersion")
                return _files_ledger(files, read if isinstance(read, int) else None)
        return None

    def _pinned_history(self, since: Optional[int] = None) -> Tuple[Any, Dict[int, Dict[str, Any]]]:
        """The table and its log's commits by version (those after version
        ``since`` only, when given), listed while no other commit landed:
        deltalake numbers ``history()``'s commits down from the version it
        loaded, but lists every commit there is, so a commit landing in
        between would shift every number. Read once while
        :meth:`reading_once` is open."""
        return self.read_once(("history", since), lambda: self._read_history(since))

    def _read_history(self, since: Optional[int]) -> Tuple[Any, Dict[int, Dict[str, Any]]]:
        for _ in range(_HISTORY_ATTEMPTS):
            table = self._table()
            if table is None:
                return None, {}
            newer = None if since is None else table.version() - since
            entries = table.history(limit=newer) if newer is None or newer > 0 else []
            history = {entry["version"]: entry for entry in entries}
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


@dataclasses.dataclass
class _Staged:
    """A unit's data files, written by its task into the table's directory
    and in no commit yet: what the task hands the committer."""

    files: List[StagedFile]
    fence: UnitFence
    #: The table's schema (Delta's JSON) the files were written in.
    schema: str = ""

    @property
    def paths(self) -> List[str]:
        """The files' paths in the table."""
        return [f.path for f in self.files]


#: Tables whose appends the sink left to deltalake's writer, in this
#: process (said once each).
_NOT_STAGED: set = set()


@dataclasses.dataclass
class _GroupCommit:
    """The committer's side of the Delta sink: it commits a group of staged
    units in one Delta transaction that adds their files and holds an
    application transaction per unit (its commit info names each unit's
    files, ``cairn.units``), then their checkpoint records."""

    uri: str
    storage_options: Optional[Dict[str, str]]
    filesystem: Any
    path: str
    max_commit_retries: int
    #: The table's version when the job started (-1: there was none): a
    #: unit of the job is in a later commit, if any.
    since: int = -1
    #: The units the commits read so far record (unit: its files, or None
    #: for a commit of one unit, and its ledger entry), and the last
    #: version read: each batch reads only the commits made since (a
    #: committer Ray restarts reads them from ``since`` once).
    _recorded: Dict[str, Tuple[Optional[List[str]], Optional[str]]] = dataclasses.field(
        default_factory=dict, repr=False
    )
    _read_to: int = dataclasses.field(default=-1, repr=False)

    def make(self) -> Tuple[Callable, Callable]:
        """(commit_batch, discard) for :class:`cairn._ray_committer.GroupCommitter`."""
        return self.commit_batch, self.discard

    def _log(self) -> DeltaUnitLog:
        return DeltaUnitLog(self.uri, self.storage_options, self.filesystem, self.path)

    def discard(self, staged: _Staged) -> None:
        """Deletes a unit's staged data files, which no commit names (a
        retry's, whose unit an earlier attempt committed or is committing;
        one whose fence failed): a file already gone, or one that cannot be
        deleted, is left with a warning."""
        discard_staged(self.filesystem, self.path, staged.paths)

    def commit_batch(self, batch: List[Submission]) -> Dict[str, Tuple[str, str]]:
        """One Delta commit adding every unit's files: the fences first
        (each unit's pending record checked and its ledger entry, its files
        and the version the commit is read at, written into it), then the
        commit (deltalake retries one that loses the race for a version on
        the next, up to ``max_commit_retries``), then each unit's committed
        checkpoint record. A unit whose application transaction the table
        already holds (an earlier submission's commit, by a committer that
        died before its records) is not committed again: its checkpoint
        record is committed from the table. A commit that raised is not
        tried again here: one that raised may still have landed (a store's
        timeout), and the job's end and the resume settle its units by the
        table's log."""
        from deltalake import CommitProperties, Transaction

        outcomes: Dict[str, Tuple[str, str]] = {}
        log = self._log()
        try:
            table, history = log._pinned_history(since=max(self.since, self._read_to))
        except ValueError:
            # Other writers kept committing: each unit's application
            # transaction is asked instead (no history read: not whole).
            table, history = log._table(), {}
        if table is None:
            raise FileNotFoundError(f"no Delta table at {log.table}")
        live = self._not_recorded(table, history, list(batch), outcomes)
        if not live:
            return outcomes
        changed = why_not_staged(table, None)
        current = table.schema()
        schema, arrow_schema = current.to_json(), pa.schema(current.to_arrow())
        configuration = dict(table.metadata().configuration or {})

        def why_not(submission: Submission) -> Optional[str]:
            # Changed since the unit was staged (a constraint or a feature
            # added, a column's type changed, more columns indexed).
            staged = submission.payload
            why = changed
            if why is None and staged.schema and not reads_files_of(schema, staged.schema):
                why = "its schema no longer reads the unit's files as they are"
            written = (
                [f["name"] for f in json.loads(staged.schema)["fields"]] if staged.schema else []
            )
            if why is None and not all(
                stats_hold(f, written, arrow_schema, configuration) for f in staged.files
            ):
                why = "it indexes columns the unit's file statistics do not cover"
            return (
                None
                if why is None
                else f"the Delta table {log.table} changed while the job ran: {why}"
            )

        live = refuse_unfitting(live, outcomes, self.discard, why_not)
        if not live:
            return outcomes
        entries = {s.unit: _files_ledger(s.payload.paths, table.version()) for s in live}
        fenced = fence_group(live, entries, outcomes, self.discard)
        if not fenced:
            return outcomes
        crash_point("table-after-fence", fenced[0].unit)
        table.create_write_transaction(
            [f.add_action() for s in fenced for f in s.payload.files],
            mode="append",
            schema=table.schema(),
            commit_properties=CommitProperties(
                custom_metadata={
                    UNITS_KEY: {s.unit: s.payload.paths for s in fenced},
                    # The version the entries name as their base.
                    "readVersion": table.version(),
                },
                max_commit_retries=self.max_commit_retries,
                app_transactions=[
                    Transaction(APP_ID_PREFIX + s.unit, _UNIT_VERSION) for s in fenced
                ],
            ),
        )
        crash_point("table-after-commit", fenced[0].unit)
        commit_unit_records([(s, entries[s.unit], None) for s in fenced], outcomes, log.table)
        return outcomes

    def _not_recorded(
        self,
        table: Any,
        history: Dict[int, Dict[str, Any]],
        live: List[Submission],
        outcomes: Dict[str, Tuple[str, str]],
    ) -> List[Submission]:
        """The submissions whose unit no commit made since the job started
        records (``history``: the commits since the last batch's read,
        kept in :attr:`_recorded`; when the log no longer keeps them all,
        each unit's application transaction in ``table``'s snapshot is
        asked instead, a log replay each). The others' rows are in the
        table: a commit naming this submission's staged files is its own
        (one that raised after it landed), committed with its IDs; any
        other an earlier submission's, committed with the table's IDs,
        this submission's files discarded."""
        start = max(self.since, self._read_to)
        if set(history) == set(range(start + 1, table.version() + 1)):
            for version in sorted(history):
                entry = history[version]
                read = entry.get("readVersion")
                for unit, files in _units_of(entry).items():
                    ledger = None
                    if files is not None:
                        ledger = _files_ledger(files, read if isinstance(read, int) else None)
                    self._recorded.setdefault(unit, (files, ledger))
            self._read_to = table.version()
        else:
            for s in live:
                if s.unit not in self._recorded and (
                    table.transaction_version(APP_ID_PREFIX + s.unit) is not None
                ):
                    self._recorded[s.unit] = (None, None)
        if not any(s.unit in self._recorded for s in live):
            return live
        active: Optional[set] = None

        def own(submission: Submission, files: Optional[List[str]]) -> bool:
            nonlocal active
            if files is not None:
                return sorted(files) == sorted(submission.payload.paths)
            if active is None:  # the commit's files are not named: the table's
                active = {uri.rsplit("/", 1)[-1] for uri in table.file_uris()}
            return bool(active.intersection(submission.payload.paths))

        # An earlier submission's entry is its commit's; else the one its
        # retry carries, if any.
        recorded = {
            s.unit: (
                self._recorded[s.unit][0],
                self._recorded[s.unit][1] or s.payload.fence.carried_entry,
            )
            for s in live
            if s.unit in self._recorded
        }
        return settle_recorded(live, recorded, own, self._log(), self.discard, outcomes)


class DeltaDatasink(TableDatasink):
    """Appends a dataset to the Delta table at ``table_uri``, exactly once
    under :func:`cairn.ray.checkpoint_config`::

        ds.write_datasink(cairn.ray.DeltaDatasink("s3://bucket/tables/t", storage_options={...}))

    Group commits as ``IcebergDatasink``'s (the same three settings): each
    write task writes its unit's rows as a Parquet file in the table's
    directory (with Delta's file statistics, or the row count alone:
    docs/python.md) and hands it to
    the job's committer, which commits the units it holds in one Delta
    transaction holding an application transaction per unit. A unit goes
    through deltalake's own ``write_deltalake``, a commit of its own, when
    its rows do not fit the table's schema as they are (new columns:
    ``schema_mode``), when the table is partitioned, has CHECK
    constraints, invariants or a writer feature beyond appendOnly and
    timestampNtz (deltalake's writer honours them), or is on a store and
    no ``filesystem`` is given for its directory; and every unit with
    ``max_units_per_commit=1`` (docs/python.md, "Group commits"). A table
    that does not exist is created empty, with the schema of the first
    unit's rows, by one unit of the job (elected by a create-if-absent
    marker in the checkpoint).

    ``storage_options`` are deltalake's (``AWS_ENDPOINT_URL``, ...);
    ``filesystem`` is the pyarrow filesystem Ray and cairn's manager see the
    table directory through (``cairn.build_checkpoint_filesystem(table_uri,
    options)`` for a store other than local disk): staged files are
    written through it. ``partition_by`` and ``schema_mode``
    (``"merge"``) go to ``deltalake.write_deltalake``.

    The table's own log decides what is committed, so the sink needs a
    store where Delta commits are atomic: local disk, or S3-compatible
    stores with conditional writes (deltalake's ``conditional_put``) or a
    lock provider. On a store that ignores conditional writes (Garage),
    deltalake needs ``AWS_S3_ALLOW_UNSAFE_RENAME`` and two commits at once
    can overwrite each other's log entry: run one write task at a time
    there (``concurrency=1``; with ``schema_mode="merge"`` also
    ``max_units_per_commit=1``: a unit whose rows do not fit is committed
    by its task, beside the committer), or the end of the job (or a
    resume) will refuse the checkpoint whose units the table lost.
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
        max_units_per_commit: int = DEFAULT_MAX_UNITS_PER_COMMIT,
        commit_interval: float = DEFAULT_COMMIT_INTERVAL_SECONDS,
        commit_timeout: float = DEFAULT_COMMIT_TIMEOUT_SECONDS,
    ):
        """The sink's settings (docs/python.md has what each does).

        Args:
            table_uri: the Delta table's URI (a local path, ``s3://...``); the
                job's first unit creates it when it does not exist.
            storage_options: deltalake's storage options (``AWS_ENDPOINT_URL``,
                ``AWS_ACCESS_KEY_ID``, ...).
            partition_by: partition columns, for a table this job creates
                (units then go through ``write_deltalake``).
            schema_mode: ``"merge"`` to add the rows' new columns to the
                table; None (the default) refuses rows that do not fit.
            filesystem: the pyarrow filesystem Ray and cairn's manager see the
                table's directory through:
                ``cairn.build_checkpoint_filesystem(table_uri, options)`` for a
                store other than local disk (staged files are written there).
            max_commit_retries: how often a commit that lost a race with
                another writer is tried again (100).
            max_units_per_commit: at most this many units (write tasks) in one
                table commit (1000); 1: each task commits its own unit.
            commit_interval: seconds the job's committer waits for more units
                before it commits the ones it holds (5).
            commit_timeout: seconds the job's end waits for the committer's
                last commit (3600) before it fails, keeping the checkpoint.
        """
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
        #: Whether staged files go where deltalake looks: local disk, or
        #: the filesystem the user gave for the table's directory.
        self._filesystem_given = filesystem is not None or urlsplit(table_uri).scheme in (
            "",
            "file",
        )
        self.init_group_commits(max_units_per_commit, commit_interval, commit_timeout)

    def unit_log(self) -> DeltaUnitLog:
        """What cairn's checkpoint manager asks about pending units."""
        return DeltaUnitLog(self.table_uri, self._storage_options, self.filesystem, self.path)

    def on_write_start(self, schema: Any = None) -> None:
        # On the driver, before the committer starts: it reads only the
        # commits this job made.
        table = self.unit_log()._table()
        self._since = table.version() if table is not None else -1
        super().on_write_start(schema)

    def _create(self, schema: pa.Schema) -> None:
        """The table created empty with ``schema`` (the unit's rows') and
        the sink's ``partition_by``, its version 0: see
        :func:`create_table_once`."""
        from deltalake import write_deltalake

        try:
            write_deltalake(
                self.table_uri,
                schema.empty_table(),
                mode="error",
                partition_by=self._partition_by,
                storage_options=self._storage_options,
            )
        except Exception as e:  # noqa: BLE001 - deltalake's errors share no base
            # Made meanwhile by a writer no election covers (no cairn
            # checkpoint): used as it is.
            if "exist" not in str(e).lower() or self.unit_log()._table() is None:
                raise

    def group_commit(self) -> _GroupCommit:
        """The committer's side: one Delta commit a group."""
        return _GroupCommit(
            self.table_uri,
            self._storage_options,
            self.filesystem,
            self.path,
            self._max_commit_retries,
            getattr(self, "_since", -1),
        )

    def append(self, rows: pa.Table, unit: str, fence: UnitFence) -> Any:
        """The unit's rows staged as a data file and handed to the job's
        committer (:class:`_GroupCommit`) when the table takes them
        (:meth:`_stage`); otherwise one ``write_deltalake`` append whose
        commit carries the unit's application transaction (``fence``
        first: the call writes the files and commits them, so no ledger
        entry). Delta's checkpoints keep every application transaction
        through log clean-up, so the log records the unit for as long as
        the table has it (unless ``delta.setTransactionRetentionDuration``
        is set: then a resume refuses units it no longer finds)."""
        from deltalake import CommitProperties, Transaction, write_deltalake

        log = self.unit_log()

        def loaded() -> Any:
            return create_table_once(log.table, log._table, lambda: self._create(rows.schema))

        if self.hands_units_over():
            staging = staging_table(self.run, log.table, loaded)
            staged = None if staging is None else self._stage(staging, rows, fence)
            if staged is not None:
                return self.hand_over(unit, staged, fence)
        # Loaded afresh: deltalake's writer commits on this snapshot.
        table = loaded()
        if table is None:
            raise FileNotFoundError(
                f"cairn.ray.DeltaDatasink: the table {self.table_uri} is gone: was it deleted "
                "while the job ran? Run the job again"
            )
        if self.hands_units_over():
            # A retry only (unit names are new in each run): an earlier
            # attempt's unit the job's committer committed. A crash point
            # before the log is read, as for the other reads of a retry.
            retried = getattr(fence, "retried", True)
            if retried:
                crash_point("table-log-read", unit)
            if retried and table.transaction_version(APP_ID_PREFIX + unit) is not None:
                return True
        fence(None)
        # The snapshot just read: a group commit of an earlier attempt of
        # this unit landing meanwhile makes this commit fail (deltalake's
        # check of concurrent application transactions), not land twice.
        write_deltalake(
            table,
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
        return None

    def _stage(self, table: Any, rows: pa.Table, fence: UnitFence) -> Optional[_Staged]:
        """The unit's rows written as a Parquet file into the directory of
        ``table`` (a ``DeltaTable``), in no commit yet; None (nothing
        written) when the table must take them through deltalake's
        writer: it needs it (:func:`why_not_staged`; a table on a store
        with no ``filesystem`` given, which deltalake's
        ``storage_options`` may not match; said once per table and
        process), or the rows do not fit its schema as they are."""
        reason = why_not_staged(table, self._partition_by)
        if reason is None and not self._filesystem_given:
            reason = (
                "it is on a store and no filesystem= was given for its directory "
                "(cairn.build_checkpoint_filesystem(table_uri, options))"
            )
        if reason is not None:
            if self.table_uri not in _NOT_STAGED:
                _NOT_STAGED.add(self.table_uri)
                logger.info(
                    "cairn: each unit is a commit of its own in %s: %s",
                    self.unit_log().table,
                    reason,
                )
            return None
        schema = pa.schema(table.schema().to_arrow())
        fits = fitted(rows, schema)
        if fits is None:
            return None
        configuration = dict(table.metadata().configuration or {})
        staged = write_staged(fits, self.filesystem, self.path, configuration)
        return _Staged([staged], fence, table.schema().to_json())
