"""cairn's Lance sink for Ray Data: units appended in Lance versions whose
transaction properties record them (a group's ``cairn.units``, or one
unit's ``cairn.unit``), the data files each adds its ledger entry; see
:mod:`cairn._ray_table` and :mod:`cairn._ray_committer`."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import pyarrow as pa

from ._ray_committer import (
    DEFAULT_COMMIT_INTERVAL_SECONDS,
    DEFAULT_COMMIT_TIMEOUT_SECONDS,
    DEFAULT_MAX_UNITS_PER_COMMIT,
    Submission,
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

#: The transaction property that names a version's unit (a version of one
#: unit: ``max_units_per_commit=1``).
UNIT_PROPERTY = "cairn.unit"

#: The transaction property of a group commit's units: a JSON object of
#: each unit and the data files it adds (their paths in the fragments).
UNITS_PROPERTY = "cairn.units"


def _dataset(uri: str, storage_options: Optional[Dict[str, str]]) -> Any:
    """The Lance dataset at ``uri``, or None when there is none yet."""
    import lance

    try:
        return lance.dataset(uri, storage_options=storage_options)
    except (FileNotFoundError, ValueError):
        return None


#: Returned by :func:`_transaction_at` for a version the dataset no
#: longer keeps.
_CLEANED = object()


def _transaction_at(dataset: Any, version: int) -> Any:
    """The transaction of ``version`` (None when it has none), or
    ``_CLEANED`` when ``cleanup_old_versions`` removed the version. A read
    that fails for another reason raises: a store's error must not pass for
    a version cleaned up, whose units would be written again. Lance reads a
    removed version's manifest as any other and fails; only then are the
    versions it keeps listed, to tell the two apart."""
    try:
        return dataset.read_transaction(version)
    except (OSError, ValueError):
        kept = {int(v["version"]) for v in dataset.versions()}
        if version not in kept:
            return _CLEANED
        raise


def _files_ledger(fragments: Any, base: Optional[int] = None) -> str:
    """The ledger entry of a unit whose version adds ``fragments`` (Lance
    ``FragmentMetadata``): their data files' paths, unique to the write,
    and the version the commit is made on (``base``), when known."""
    entry: Dict[str, Any] = {"files": sorted(f.path for m in fragments for f in m.files)}
    if base is not None:
        entry["base"] = base
    return json.dumps(entry)


#: A Lance data file's path in a fragment: a name in the dataset's
#: ``data`` directory.
_DATA_FILE = re.compile(r"[A-Za-z0-9_-]+\.lance")


def _units_of(transaction: Any) -> Dict[str, Optional[List[str]]]:
    """The units a Lance transaction's properties record, each with the
    data files it added (None: every file the version added, a version of
    one unit)."""
    properties = transaction.transaction_properties or {}
    units: Dict[str, Optional[List[str]]] = {}
    one = properties.get(UNIT_PROPERTY)
    if one:
        units[one] = None
    try:
        many = json.loads(properties.get(UNITS_PROPERTY) or "{}")
    except ValueError:
        many = {}
    if isinstance(many, dict):
        for unit, files in many.items():
            units[unit] = [str(f) for f in files] if isinstance(files, list) else []
    return units


def _of_unit(fragments: Any, files: Optional[List[str]]) -> List[Any]:
    """The fragments (Lance ``FragmentMetadata``) among ``fragments`` whose
    data files are among ``files`` (all of them when ``files`` is None)."""
    if files is None:
        return list(fragments)
    named = set(files)
    return [m for m in fragments if any(f.path in named for f in m.files)]


#: The orphan warning's advice, as written (tested): Lance keeps files
#: younger than ``older_than`` (two weeks by default) and those no old
#: version named unless ``delete_unverified``; a fragment a running job's
#: committer holds is one of those, hence "once no job writes".
ORPHAN_CLEAN_UP = (
    "lance.dataset(uri).cleanup_old_versions(older_than=datetime.timedelta(0), "
    "delete_unverified=True), run once no job writes the dataset,"
)


class LanceUnitLog(UnitIds):
    """The units a Lance dataset's transactions record (``cairn.unit``, or
    a group commit's ``cairn.units``, in their properties), for cairn's
    recovery."""

    def __init__(
        self,
        uri: str,
        storage_options: Optional[Dict[str, str]] = None,
        since: Optional[int] = None,
        filesystem: Any = None,
        path: Optional[str] = None,
    ):
        self._uri = uri
        self._storage_options = storage_options
        #: The dataset's version when the job started (0: there was none):
        #: a unit of the job is in a later version, if any.
        self._since = since
        #: The pyarrow filesystem and path the dataset's directory is seen
        #: through, where files no version references are deleted (None:
        #: none is deleted).
        self._filesystem = filesystem
        self._path = path
        #: The dataset, for messages.
        self.table = without_secrets(uri)

    def table_ids(self, id_column: str) -> Optional[Iterator[pa.Array]]:
        """``id_column`` of every row of the dataset's latest version (that
        column alone), or None when there is no dataset."""
        dataset = _dataset(self._uri, self._storage_options)
        if dataset is None:
            return None
        self._column_of(dataset.schema.names, id_column)
        return (batch.column(0) for batch in dataset.to_batches(columns=[id_column]))

    def landed(self, unit: str) -> bool:
        """Whether a transaction of the versions made since the job started
        (of the whole history when that is not known) records the unit (a
        version whose transaction file was cleaned up records nothing)."""
        dataset = _dataset(self._uri, self._storage_options)
        if dataset is None:
            return False
        newer = dataset.version - (self._since or 0)
        if newer <= 0:
            return False
        transactions = dataset.get_transactions(recent_transactions=newer)
        return any(t is not None and unit in _units_of(t) for t in transactions)

    def _latest(self) -> Any:
        """The dataset's latest version (None: no dataset), opened once
        while :meth:`reading_once` is open."""
        return self.read_once("latest", lambda: _dataset(self._uri, self._storage_options))

    def _transaction(self, dataset: Any, version: int) -> Any:
        """:func:`_transaction_at`, read once a version while
        :meth:`reading_once` is open."""
        return self.read_once(("transaction", version), lambda: _transaction_at(dataset, version))

    def unit_ids(self, unit: str, id_column: str) -> Optional[pa.Array]:
        """``id_column`` of the fragments the version recording ``unit``
        added (Lance numbers fragments afresh, so they are the ones the
        version before did not have). Versions are searched from the
        latest down (a pending unit's version is among the latest)."""
        import lance

        dataset = self._latest()
        if dataset is None:
            return None
        version = dataset.version
        while True:
            if version < 1:
                return None
            transaction = self._transaction(dataset, version)
            if transaction is None or transaction is _CLEANED:
                return None
            units = _units_of(transaction)
            if unit in units:
                files = units[unit]
                break
            version -= 1

        def all_fragments(at: int) -> List[Any]:
            loaded = lance.dataset(self._uri, version=at, storage_options=self._storage_options)
            return list(loaded.get_fragments())

        def fragments(at: int) -> List[Tuple[int, Any]]:
            # A group commit's version adds other units' fragments too.
            return [
                (f.fragment_id, f)
                for f in self.read_once(("fragments", at), lambda: all_fragments(at))
                if at != version or _of_unit([f.metadata], files)
            ]

        if version > 1 and self._transaction(dataset, version - 1) is _CLEANED:
            # The version before was cleaned up: what the commit added
            # cannot be told from it.
            return None
        before = [key for key, _ in fragments(version - 1)] if version > 1 else []
        return added_ids(before, fragments(version), id_column)

    def ledger_of(self, unit: str) -> Optional[str]:
        """The ledger entry of ``unit``: the data files the version whose
        transaction names it added (searched from the latest version
        down, as :meth:`unit_ids`)."""
        dataset = self._latest()
        if dataset is None:
            return None
        for version in range(dataset.version, 0, -1):
            transaction = self._transaction(dataset, version)
            if transaction is None or transaction is _CLEANED:
                return None
            units = _units_of(transaction)
            if unit in units:
                fragments = getattr(transaction.operation, "fragments", None)
                if fragments is None:
                    return None
                # An append's entry names the version it was made on, as
                # the sink's does; the creating unit's names none.
                append = type(transaction.operation).__name__ == "Append"
                return _files_ledger(
                    _of_unit(fragments, units[unit]), transaction.read_version if append else None
                )
        return None

    def held(self, entries: Mapping[str, str]) -> List[str]:
        """The units of ``entries`` (unit: ledger entry) a data file of
        which the latest version holds. A file a compaction rewrote is not
        found, so neither is its unit (the caller refuses rather than
        guess); nor is the unit that created the dataset (its entry names
        no file)."""
        dataset = _dataset(self._uri, self._storage_options)
        if dataset is None:
            return []
        live = {f.path for fragment in dataset.get_fragments() for f in fragment.metadata.files}
        held = []
        for unit, entry in entries.items():
            try:
                files = json.loads(entry).get("files") or []
            except (ValueError, AttributeError):
                continue
            if any(path in live for path in files):
                held.append(unit)
        return held

    def absent(self, entries: Mapping[str, str]) -> List[str]:
        """The units of ``entries`` whose commit is not in the latest
        version's lineage, told by the versions that are left: the walk
        down from the latest (through restores, as :meth:`lineage`)
        reaches the version the commit was made on (its entry's base)
        without a version naming the unit. A commit lands above its base
        (Lance rebases an append over the versions made meanwhile), so it
        would have been passed. A unit whose base is not reached (a
        cleaned version, an overwrite, a restore below it first) is not
        answered."""
        bases: Dict[str, int] = {}
        for unit, entry in entries.items():
            try:
                base = json.loads(entry).get("base")
            except (ValueError, AttributeError):
                continue
            if isinstance(base, int):
                bases[unit] = base
        dataset = _dataset(self._uri, self._storage_options)
        if dataset is None or not bases:
            return []
        lowest = min(bases.values())
        found = set()
        # The versions the walk arrives at, every lineage version above
        # each of them read.
        arrived = {dataset.version}
        version = dataset.version
        while version > lowest:
            transaction = _transaction_at(dataset, version)
            if transaction is None or transaction is _CLEANED:
                break
            found.update(_units_of(transaction))
            operation = type(transaction.operation).__name__
            if operation == "Overwrite":
                break
            below = int(transaction.operation.version) if operation == "Restore" else version - 1
            if below >= version:
                break  # a restore goes down; anything else is not walked
            version = below
            arrived.add(version)
        return [unit for unit, base in bases.items() if unit not in found and base in arrived]

    def delete_unreferenced(
        self, rolled_back: Mapping[str, Tuple[Optional[str], Optional[float]]]
    ) -> int:
        """Deletes the data files of the rolled-back units (unit: its ledger
        entry or None, and the entry's age in seconds by the store's clock
        or None) that no version of the dataset references: those an entry
        names (written before the unit's commit began, which never landed),
        when no version the dataset keeps above the entry's base holds one
        of them (a version at or below the base was made before the files
        existed; their names are Lance's random ones) and the entry is
        older than the grace period (:data:`ORPHAN_GRACE_SECONDS`: a killed
        run's worker may still be committing them). Returns how many it
        deleted. The files of a unit without such an entry (killed while it
        wrote them; the unit that creates the dataset), of one within the
        grace period, or of one whose commit a version holds (landed, then
        restored away: kept for time travel), are left, and said so. A
        failure is logged, never raised: recovery goes on."""
        left = []
        deleted = 0
        try:
            named: Dict[str, Tuple[List[str], int]] = {}
            for unit, (entry, age) in rolled_back.items():
                files, base = entry_files(entry, _DATA_FILE)
                if files and old_enough(age) and self._filesystem is not None and self._path:
                    named[unit] = (files, base)
                else:
                    left.append(unit)
            if named:
                latest, referenced = self._files_above(min(base for _, base in named.values()))
                data = f"{self._path.rstrip('/')}/data"
                for unit, (files, base) in named.items():
                    # A base the dataset never had places nothing.
                    if base > latest or referenced.intersection(files):
                        left.append(unit)
                        continue
                    paths = [f"{data}/{name}" for name in files]
                    deleted += delete_orphans(self._filesystem, paths, self.table)
        except Exception as e:  # noqa: BLE001 - nothing proven, nothing more deleted
            logger.warning(
                "cairn: the files of the units rolled back in %s were kept: %s", self.table, e
            )
            left = list(rolled_back)
        if left:
            warn_orphans_left(self.table, left, ORPHAN_CLEAN_UP)
        return deleted

    def _files_above(self, base: int) -> Tuple[int, set]:
        """The dataset's latest version, and the data files the versions it
        keeps above ``base`` hold."""
        dataset = _dataset(self._uri, self._storage_options)
        if dataset is None:
            raise FileNotFoundError(f"no Lance dataset at {self.table}")
        held = set()
        for version in sorted(int(v["version"]) for v in dataset.versions()):
            if version > base:
                at = dataset.checkout_version(version)
                held.update(
                    f.path for fragment in at.get_fragments() for f in fragment.metadata.files
                )
        return dataset.version, held

    def recorded(self, units: List[str]) -> List[str]:
        """:meth:`lineage`'s units; a version ``cleanup_old_versions``
        removed before every unit asked about was found raises: a unit it
        recorded cannot be told from one that never reached the dataset,
        and taking it for either would lose its rows or write them
        twice."""
        found, cut = self.lineage(units)
        if cut is not None and len(found) < len(set(units)):
            raise ValueError(
                f"{cut}, and whether cairn's units it recorded reached the dataset cannot be told "
                "without it. Keep the dataset's versions until the job ends; now, move the "
                "checkpoint away and run the job again (into a new dataset, or after removing "
                "the rows of the job's units)"
            )
        return found

    def lineage(self, units: List[str]) -> Tuple[List[str], Optional[str]]:
        """The units among ``units`` recorded by a version in the latest
        version's lineage, and where the walk was cut (None when it was
        not): versions are walked from the latest down, a ``Restore`` to
        version ``r`` goes on at ``r`` (the versions between are not the
        dataset's any more), an ``Overwrite`` (the dataset's creation
        among them) or a ``Delete`` that left no row is the last one
        walked. The walk stops once every unit
        asked about is found, or at a version ``cleanup_old_versions``
        removed (the cut)."""
        dataset = _dataset(self._uri, self._storage_options)
        if dataset is None:
            return [], None
        wanted = set(units)
        in_lineage = set()
        version = dataset.version
        cut = None
        while version >= 1 and not wanted <= in_lineage:
            transaction = _transaction_at(dataset, version)
            if transaction is _CLEANED:
                cut = (
                    f"the Lance dataset {self.table}'s version {version} was removed by "
                    "cleanup_old_versions"
                )
                break
            if transaction is None:
                break  # a version of a Lance that kept no transactions
            in_lineage.update(_units_of(transaction))
            operation = type(transaction.operation).__name__
            if operation == "Restore":
                target = int(transaction.operation.version)
                if target >= version:
                    break  # a restore goes down; anything else is not walked
                version = target
                continue
            if operation == "Overwrite":
                break
            if operation == "Delete" and not dataset.checkout_version(version).get_fragments():
                # A delete that left no row: the units before it are not
                # in the dataset any more (Delta and Iceberg end the walk at
                # theirs too).
                break
            version -= 1
        return [u for u in units if u in in_lineage], cut


def _file_names(fragments: Any) -> List[str]:
    """The data files of ``fragments`` (Lance ``FragmentMetadata``), by
    their paths in the fragments (names in the dataset's ``data``
    directory)."""
    return sorted(f.path for m in fragments for f in m.files)


@dataclasses.dataclass
class _Staged:
    """A unit's fragments, written by its task (``write_fragments``) and
    not yet in a version: what the task hands the committer."""

    fragments: List[Any]
    fence: UnitFence
    #: The dataset's schema the fragments were written in.
    schema: Optional[pa.Schema] = None


@dataclasses.dataclass
class _GroupCommit:
    """The committer's side of the Lance sink: it commits a group of staged
    units in one ``Append`` version whose transaction names each unit and
    its files (``cairn.units``), then their checkpoint records."""

    uri: str
    storage_options: Optional[Dict[str, str]]
    #: The dataset's version when the job started: a unit of the job is in
    #: a later version, if any.
    since: int
    filesystem: Any
    path: str
    #: The units the versions read so far record (unit: its files and its
    #: ledger entry), and the last version read: each commit reads only
    #: the versions made since the one before (a committer Ray restarts
    #: reads them from ``since`` once).
    _recorded: Dict[str, Tuple[Optional[List[str]], str]] = dataclasses.field(
        default_factory=dict, repr=False
    )
    _read_to: int = dataclasses.field(default=0, repr=False)

    def make(self) -> Tuple[Callable, Callable]:
        """(commit_batch, discard) for :class:`cairn._ray_committer.GroupCommitter`."""
        return self.commit_batch, self.discard

    def _log(self) -> LanceUnitLog:
        return LanceUnitLog(self.uri, self.storage_options, self.since, self.filesystem, self.path)

    def discard(self, staged: _Staged) -> None:
        """Deletes a unit's staged data files, which no version names (a
        retry's, whose unit an earlier attempt committed or is committing;
        one whose fence failed): a file already gone, or one that cannot be
        deleted, is left with a warning."""
        discard_staged(
            self.filesystem, f"{self.path.rstrip('/')}/data", _file_names(staged.fragments)
        )

    def commit_batch(self, batch: List[Submission]) -> Dict[str, Tuple[str, str]]:
        """One version adding every unit's fragments: the fences first
        (each unit's pending record checked and its ledger entry, its files
        and the version the commit is made on, written into it), then the
        commit (Lance rebases an append over versions made meanwhile), then
        each unit's committed checkpoint record. A unit a version made
        since the job started already records (an earlier submission's
        commit, by a committer that died before its records) is not
        committed again: its checkpoint record is committed from the
        dataset."""
        import lance
        from lance import LanceOperation

        outcomes: Dict[str, Tuple[str, str]] = {}
        dataset = _dataset(self.uri, self.storage_options)
        if dataset is None:
            raise FileNotFoundError(f"no Lance dataset at {without_secrets(self.uri)}")
        live = self._not_recorded(dataset, list(batch), outcomes)

        def why_not(submission: Submission) -> Optional[str]:
            # Overwritten with, or altered to, another schema since the
            # unit was staged: Lance would take the fragments and fail
            # every read after.
            staged = submission.payload.schema
            if staged is None or staged.equals(dataset.schema, check_metadata=False):
                return None
            return (
                f"the Lance dataset {without_secrets(self.uri)} changed while the job ran: its "
                "schema is no longer the one the unit's fragments were written in"
            )

        live = refuse_unfitting(live, outcomes, self.discard, why_not)
        if not live:
            return outcomes
        base = dataset.version
        entries = {s.unit: _files_ledger(s.payload.fragments, base) for s in live}
        fenced = fence_group(live, entries, outcomes, self.discard)
        if not fenced:
            return outcomes
        crash_point("table-after-fence", fenced[0].unit)
        units = {s.unit: _file_names(s.payload.fragments) for s in fenced}
        transaction = lance.Transaction(
            read_version=base,
            operation=LanceOperation.Append([m for s in fenced for m in s.payload.fragments]),
            transaction_properties={UNITS_PROPERTY: json.dumps(units, sort_keys=True)},
        )
        # Not tried again here: a commit that raised may still land (a
        # store's timeout), and a second one would add the same files
        # again. A failed group is settled by the job's end and the resume.
        lance.LanceDataset.commit(self.uri, transaction, storage_options=self.storage_options)
        crash_point("table-after-commit", fenced[0].unit)
        commit_unit_records(
            [(s, entries[s.unit], None) for s in fenced], outcomes, self._log().table
        )
        return outcomes

    def _not_recorded(
        self, dataset: Any, live: List[Submission], outcomes: Dict[str, Tuple[str, str]]
    ) -> List[Submission]:
        """The submissions whose unit no version made since the job started
        records. The others' rows are in the dataset: a version naming this
        submission's files is its own commit (one that raised after it
        landed), committed with its IDs; one naming others is an earlier
        submission's, committed with the dataset's IDs, this submission's
        staged files discarded."""
        start = max(self.since, self._read_to)
        if dataset.version > start:
            # The latest first: a unit is recorded by one version.
            for transaction in dataset.get_transactions(
                recent_transactions=dataset.version - start
            ):
                if transaction is None:
                    continue
                fragments = getattr(transaction.operation, "fragments", None) or []
                # As ledger_of gives it: an append's entry names its base.
                append = type(transaction.operation).__name__ == "Append"
                base = transaction.read_version if append else None
                for unit, files in _units_of(transaction).items():
                    entry = _files_ledger(_of_unit(fragments, files), base)
                    self._recorded.setdefault(unit, (files, entry))
            self._read_to = dataset.version
        return settle_recorded(
            live,
            self._recorded,
            lambda submission, files: files == _file_names(submission.payload.fragments),
            self._log(),
            self.discard,
            outcomes,
        )


class LanceDatasink(TableDatasink):
    """Appends a dataset to the Lance dataset at ``uri``, exactly once
    under :func:`cairn.ray.checkpoint_config`::

        ds.write_datasink(cairn.ray.LanceDatasink("/data/lance/embeddings"))

    Group commits as ``IcebergDatasink``'s (the same three settings): the
    units the job's committer holds go into one Lance version, whose
    transaction names each unit and its data files; with
    ``max_units_per_commit=1`` each write task commits its own version.

    ``storage_options`` are Lance's; ``filesystem`` is the pyarrow
    filesystem Ray and cairn's manager see the dataset's directory through.
    A dataset that does not exist is created empty, with the schema of the
    first unit's rows, by one unit of the job (elected by a create-if-absent
    marker in the checkpoint: units creating it at once could replace one
    another's rows).
    Concurrent appends commit with Lance's own conflict resolution. While the job
    runs, only append to the dataset. Each unit's data files are its
    ledger entry in the checkpoint, so ``cleanup_old_versions`` while a
    job runs or between a kill and its resume leaves its units found
    (docs/python.md says what holds; ``compact_files`` before the job
    ends can make a resume refuse).
    """

    def __init__(
        self,
        uri: str,
        *,
        storage_options: Optional[Dict[str, str]] = None,
        filesystem: Any = None,
        max_units_per_commit: int = DEFAULT_MAX_UNITS_PER_COMMIT,
        commit_interval: float = DEFAULT_COMMIT_INTERVAL_SECONDS,
        commit_timeout: float = DEFAULT_COMMIT_TIMEOUT_SECONDS,
    ):
        """The sink's settings (docs/python.md has what each does).

        Args:
            uri: the Lance dataset's URI (a local path, ``s3://...``); the
                job's first unit creates it when it does not exist.
            storage_options: Lance's storage options (``aws_endpoint``,
                ``aws_access_key_id``, ...).
            filesystem: the pyarrow filesystem Ray and cairn's manager see the
                dataset's directory through:
                ``cairn.build_checkpoint_filesystem(uri, options)`` for a store
                other than local disk.
            max_units_per_commit: at most this many units (write tasks) in one
                table commit (1000); 1: each task commits its own unit.
            commit_interval: seconds the job's committer waits for more units
                before it commits the ones it holds (5).
            commit_timeout: seconds the job's end waits for the committer's
                last commit (3600) before it fails, keeping the checkpoint.
        """
        super().__init__(uri, filesystem=filesystem)
        self.uri = uri
        self._storage_options = dict(storage_options) if storage_options else None
        self.init_group_commits(max_units_per_commit, commit_interval, commit_timeout)

    def unit_log(self) -> LanceUnitLog:
        """What cairn's checkpoint manager asks about pending units."""
        return LanceUnitLog(
            self.uri,
            self._storage_options,
            getattr(self, "_since", None),
            self.filesystem,
            self.path,
        )

    def on_write_start(self, schema: Any = None) -> None:
        # On the driver, before Ray sends the sink to its write tasks (and
        # the committer starts): a retried task, and the committer, then
        # read only the versions this job made.
        dataset = _dataset(self.uri, self._storage_options)
        self._since = dataset.version if dataset is not None else 0
        super().on_write_start(schema)

    def _create(self, schema: pa.Schema) -> None:
        """The dataset created empty with ``schema`` (the unit's rows'), its
        first version: see :func:`create_table_once`."""
        import lance

        try:
            lance.write_dataset(
                schema.empty_table(),
                self.uri,
                mode="create",
                storage_options=self._storage_options,
            )
        except OSError as e:
            # Made meanwhile by a writer no election covers (no cairn
            # checkpoint): used as it is.
            if "already exists" not in str(e):
                raise

    def group_commit(self) -> _GroupCommit:
        """The committer's side: one version a group."""
        return _GroupCommit(
            self.uri,
            self._storage_options,
            getattr(self, "_since", 0),
            self.filesystem,
            self.path,
        )

    def append(self, rows: pa.Table, unit: str, fence: UnitFence) -> Any:
        """Writes the unit's data files (``write_fragments``), then hands
        them to the job's committer (:class:`_GroupCommit`), or
        (``max_units_per_commit=1``) calls ``fence`` with their paths as
        the ledger entry and commits them, a version naming ``unit``. A
        dataset that does not exist is made first, by one unit of the job
        (:func:`create_table_once`). Files a kill
        leaves uncommitted are never part of a version: readers never see
        them."""
        import lance

        def opened() -> Any:
            return create_table_once(
                self.unit_log().table,
                lambda: _dataset(self.uri, self._storage_options),
                lambda: self._create(rows.schema),
            )

        if self.hands_units_over():
            dataset = staging_table(self.run, self.uri, opened)
        else:
            dataset = opened()
        if dataset is None:
            raise FileNotFoundError(
                f"cairn.ray.LanceDatasink: the dataset {self.uri} is gone: was it deleted while "
                "the job ran? Run the job again"
            )
        transaction = lance.fragment.write_fragments(
            rows,
            # The dataset opened above, not opened again (its manifest
            # lists every fragment); a group's committer makes its own
            # transaction on the dataset it commits to.
            dataset,
            mode="append",
            return_transaction=True,
            storage_options=self._storage_options,
        )
        if self.hands_units_over():
            staged = _Staged(list(transaction.operation.fragments), fence, dataset.schema)
            return self.hand_over(unit, staged, fence)
        transaction = dataclasses.replace(transaction, transaction_properties={UNIT_PROPERTY: unit})
        crash_point("table-before-commit", unit)
        fence(_files_ledger(transaction.operation.fragments, transaction.read_version))
        crash_point("table-after-fence", unit)
        lance.LanceDataset.commit(self.uri, transaction, storage_options=self._storage_options)
        return None
