"""What cairn's table sinks for Ray Data share: a unit per write task, its
rows committed to the table in one table transaction that records the
unit, between Ray's pending and committed checkpoint records; and the
log that recovery asks about the units a kill left pending.

Ray 2.60's own table writes (``write_delta``, ``write_iceberg``) commit the
table once, on the driver, at the end, and checkpoint each task after it
wrote files no one sees yet: a job killed midway loses those tasks' rows on
resume. Here a unit's rows are in the table (readable, a version of their
own) before its checkpoint commit, and recovery reads the table's history
for the units left pending: a unit the table records is committed, one it
does not is written again. Its data files, never committed, are deleted
where its ledger entry names them and the format's log proves no version
references them; the rest are left to the format's own clean-up.

Table maintenance removes history (Iceberg's snapshot expiry, Lance's
version clean-up), so the sinks also write a ledger entry into the unit's
pending record just before its table commit: where its rows will be (the
snapshot that adds them, the data files of its version). Ray's
commit carries it into the committed record; a resume looks a unit the
history no longer records up by its entry in the table's current files.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import threading
import time
import uuid
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
)
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from ray.data.block import Block, BlockAccessor
from ray.data.context import DataContext

from ._ray_committer import TAKEN_OVER as REFUSED
from ._ray_committer import (
    COMMITTED,
    DEFAULT_COMMIT_INTERVAL_SECONDS,
    DEFAULT_COMMIT_TIMEOUT_SECONDS,
    FAILED,
    LANDED_BEFORE,
    QUEUED,
    Submission,
    fence_all,
    committer_name,
    flush_committer,
    start_committer,
    stop_committer,
    submit_to,
)
from ._ray_compat import (
    PENDING_CHECKPOINT_SUFFIX,
    WRITE_UUID_KWARG_NAME,
    DelegatingBlockBuilder,
    FileDatasink,
    pending_records,
    split_base_and_ext,
    task_attempt,
    unwrap_protocol,
)

logger = logging.getLogger(__name__)

#: The outcome of cairn's clean-up of a table job's checkpoint, by
#: checkpoint path, in this process: None when it ended the checkpoint
#: (having checked every committed unit in the table), else its error. Ray
#: runs the clean-up, and only logs its error, before the sink's
#: ``on_write_complete``, which takes the outcome from here.
_CLEAN_UPS: Dict[str, Optional[BaseException]] = {}


def record_clean_up(checkpoint_path: str, error: Optional[BaseException]) -> None:
    """Keeps the outcome of the clean-up of ``checkpoint_path`` for the
    table sink's ``on_write_complete``."""
    _CLEAN_UPS[checkpoint_path] = error


#: The class attribute of a checkpoint manager that settles a table's
#: pending units by its log (cairn.ray.CheckpointManager's): a table sink
#: refuses any other manager.
SETTLES_TABLE_UNITS = "cairn_settles_table_units"


class UnitLog(Protocol):
    """A table's record of the units committed to it."""

    #: The table, for messages (no secrets).
    table: str

    def recorded(self, units: List[str]) -> List[str]:
        """The units among ``units`` whose rows the table's current version
        holds: committed by a version in its lineage, and not cut off since
        by a restore, a rollback or an overwrite. What recovery settles by
        and a resume checks the committed units against."""
        ...

    def landed(self, unit: str) -> bool:
        """Whether a table commit recording ``unit`` landed: asked only by
        a task Ray retries in the same run, whose earlier attempt may have
        committed before it died."""
        ...


#: Set in a write task's context before its table commit: a second pass
#: of the task's chain in the same attempt is a retry.
_COMMIT_TRIED = "_cairn_table_commit_tried"

#: Set in a retried write task's context by cairn's checkpoint writer: the
#: ledger entry it carried into the pending record it wrote (None: none),
#: so the task does not read the record back.
CARRIED_ENTRY = "_cairn_carried_ledger_entry"

#: Set in a write task's context (to the refusal's message) when its unit
#: was found taken over by a newer run: a second pass of the task's chain
#: in the same attempt is refused too.
TAKEN_OVER = "_cairn_unit_taken_over"


class UnitIds:
    """What the formats' unit logs share: the IDs a unit's commit put in
    the table, for its committed checkpoint record. A task Ray retries
    writes its pending record from its own rows; with a transform that is
    not deterministic those can differ from the rows of the earlier
    attempt whose commit landed, and the table's are the ones to skip."""

    def unit_ids(self, unit: str, id_column: str) -> Optional[pa.Array]:
        """``id_column`` of the rows the table commit recording ``unit``
        added (None when no commit records it)."""
        raise NotImplementedError

    def unreadable(self) -> Tuple[type, ...]:
        """The errors of :meth:`unit_ids` that say the IDs cannot be read
        here (a file maintenance removed, a format feature the reader does
        not support), as opposed to a store's error, which is raised."""
        return (FileNotFoundError, NotImplementedError)

    def ids_or_none(self, unit: str, id_column: str) -> Optional[pa.Array]:
        """:meth:`unit_ids`, or None with a warning when no commit records
        the unit any more or its IDs cannot be read (:meth:`unreadable`):
        the caller keeps the pending record's IDs (the attempt's own, exact
        for a transform that is deterministic). Any other error (a store's,
        a log that kept changing) is raised: the task fails, or recovery
        refuses the resume, rather than guess."""
        try:
            ids = self.unit_ids(unit, id_column)
        except self.unreadable() as e:
            logger.warning(
                "cairn: the IDs unit %s added to %s could not be read (%s): its checkpoint "
                "record keeps the IDs its pending record holds",
                unit,
                getattr(self, "table", "the table"),
                e,
            )
            return None
        if ids is None:
            logger.warning(
                "cairn: no commit of %s records unit %s any more: its checkpoint record keeps "
                "the IDs its pending record holds",
                getattr(self, "table", "the table"),
                unit,
            )
        return ids

    def committed_record(self, unit: str, id_column: str) -> Optional[bytes]:
        """The checkpoint record of ``unit`` as the table holds it: a
        Parquet file of ``id_column`` (Ray's record layout), or None (with
        a warning) when no commit records the unit or its IDs cannot be
        read."""
        ids = self.ids_or_none(unit, id_column)
        if ids is None:
            return None
        return id_record(ids, id_column, self.ledger_of(unit))

    def committed_records(self, units: List[str], id_column: str) -> Dict[str, bytes]:
        """:meth:`committed_record` of each of ``units`` (those with none
        left out), the table's history and each version's files read once
        for all of them (:meth:`read_once`), not once a unit: settling the
        thousand units of one crashed group commit reads the table as
        often as settling one."""
        records = {}
        with self.reading_once():
            for unit in units:
                record = self.committed_record(unit, id_column)
                if record is not None:
                    records[unit] = record
        return records

    @contextlib.contextmanager
    def reading_once(self) -> Iterator[None]:
        """While open, what :meth:`read_once` reads is read once and kept:
        the table cannot change under a settle in a way that matters (a
        unit's commit, once in the history, stays there until maintenance,
        which a settle's reads do not race: each read pins its version)."""
        # By thread: another thread asking the same log meanwhile reads
        # the table afresh.
        scopes = self.__dict__.setdefault("_read_once_by_thread", {})
        thread = threading.get_ident()
        outer = scopes.get(thread)
        if outer is None:
            scopes[thread] = {}
        try:
            yield
        finally:
            if outer is None:
                scopes.pop(thread, None)

    def read_once(self, key: Any, read: Callable[[], Any]) -> Any:
        """``read()``, kept under ``key`` while this thread's
        :meth:`reading_once` is open (read afresh otherwise)."""
        kept = self.__dict__.get("_read_once_by_thread", {}).get(threading.get_ident())
        if kept is None:
            return read()
        if key not in kept:
            kept[key] = read()
        return kept[key]

    def ledger_of(self, unit: str) -> Optional[str]:
        """The ledger entry of ``unit``, read from the table's history
        (None when no commit there records it, or the format keeps none)."""
        return None

    def table_ids(self, id_column: str) -> Optional[Iterator[pa.Array]]:
        """``id_column`` of every row the table holds now, chunk by chunk,
        read with the format's own reader (that column alone), or None when
        there is no table yet. A table without the column is refused: which
        input rows it holds cannot be told."""
        raise NotImplementedError

    def _column_of(self, names: Iterable[str], id_column: str) -> None:
        """Refuses a table whose schema (``names``) has no ``id_column``."""
        if id_column not in names:
            from ._ray_output import ExistingOutputRefused

            raise ExistingOutputRefused(
                f"the table {getattr(self, 'table', '')} already holds rows and has no column "
                f"{id_column!r}, so cairn cannot tell which input rows it holds. Nothing was "
                "written. Write to another table, or pass existing_output='append' to "
                "cairn.ray.checkpoint_config to add every row beside them"
            )


#: The key, in a unit's record's Parquet key-value metadata, of its
#: ledger entry (cairn_checkpoint's ``TABLE_LEDGER_KEY``).
LEDGER_KEY = "cairn.table_ledger"


def ledger_entry(filesystem: Any, path: str) -> Optional[str]:
    """The ledger entry of the record at ``path`` (None when it has none
    or is not there), from its footer."""
    try:
        metadata = pq.read_metadata(path, filesystem=filesystem).metadata or {}
    except FileNotFoundError:
        return None
    entry = metadata.get(LEDGER_KEY.encode())
    return None if entry is None else entry.decode()


def record_entries(
    filesystem: Any, directory: str, units: Iterable[str], suffixes: Sequence[str]
) -> Dict[str, str]:
    """The ledger entries of ``units``' records in the checkpoint
    ``directory``, read on a few threads: each unit's first record that has
    one, of those named ``<unit><suffix>.parquet`` (``""``: the committed
    record, Ray's pending suffix: the pending one), in ``suffixes``' order.
    A unit with none is left out; a read that fails raises."""
    units = list(units)
    found: Dict[str, str] = {}

    def read(unit: str) -> None:
        for suffix in suffixes:
            entry = ledger_entry(filesystem, os.path.join(directory, f"{unit}{suffix}.parquet"))
            if entry is not None:
                found[unit] = entry
                return

    for error in fence_all([functools.partial(read, unit) for unit in units]):
        if error is not None:
            raise error
    return found


def not_in_table(log: Any, config: Any, units: List[str]) -> List[str]:
    """The units of ``units`` the table ``log`` reads does not hold, as a
    job's end checks them: those its history does not record and whose
    ledger entry, in their record in the checkpoint ``config`` names (the
    committed one, else the pending one), does not find them either: a
    unit whose history maintenance removed, or that no history names (an
    Iceberg group commit's; one whose group landed and whose records its
    committer did not commit, or committed by an earlier pass of a group
    commit that then failed)."""
    found = set(log.lineage(units)[0] if hasattr(log, "lineage") else log.recorded(units))
    missing = [u for u in units if u not in found]
    if missing and config is not None and hasattr(log, "held"):
        entries = record_entries(
            config.filesystem,
            unwrap_protocol(config.checkpoint_path),
            missing,
            ["", PENDING_CHECKPOINT_SUFFIX],
        )
        held = set(log.held(entries)) if entries else set()
        missing = [u for u in missing if u not in held]
    return missing


def carried_entry(ctx: Any, filesystem: Any, pending_path: str) -> Optional[str]:
    """The ledger entry of a retried task's pending record: the one cairn's
    checkpoint writer carried into it, else read from the record."""
    if CARRIED_ENTRY in ctx.kwargs:
        return ctx.kwargs[CARRIED_ENTRY]
    return ledger_entry(filesystem, pending_path)


def retried_here(ctx: Any) -> bool:
    """Whether this write task is a retry: Ray's (an attempt number above
    0, or unknown) or Ray Data's second pass of its chain inside one
    attempt."""
    return bool(ctx.kwargs.get(_COMMIT_TRIED, False)) or task_attempt() != 0


#: The key of cairn-checkpoint's count of a unit's data files
#: (``idfile::DATA_FILES_KEY``): a unit recorded with 0 wrote none, which
#: its data check then expects.
DATA_FILES_KEY = "cairn.data_files"


def id_record(
    ids: pa.Array, id_column: str, ledger: Optional[str] = None, no_data_files: bool = False
) -> bytes:
    """A checkpoint record of ``ids`` as Ray's checkpoint writer lays it
    out: one Parquet file of the ID column; with ``ledger``, the unit's
    ledger entry in its key-value metadata (which Ray's reader ignores);
    with ``no_data_files``, that the unit writes no data file."""
    table = pa.table({id_column: ids})
    metadata = {}
    if ledger is not None:
        metadata[LEDGER_KEY] = ledger
    if no_data_files:
        metadata[DATA_FILES_KEY] = "0"
    if metadata:
        table = table.replace_schema_metadata(metadata)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def added_ids(
    before: Iterable[Any], after: Iterable[Tuple[Any, Any]], id_column: str
) -> Optional[pa.Array]:
    """``id_column`` of the fragments a commit added: ``after`` is the
    (key, fragment) pairs of the version it made (pyarrow dataset
    fragments, or Lance's), ``before`` the keys of the version before it."""
    known = set(before)
    chunks = [
        fragment.to_table(columns=[id_column])[id_column].combine_chunks()
        for key, fragment in after
        if key not in known
    ]
    return joined(chunks)


def joined(chunks: List[pa.Array]) -> Optional[pa.Array]:
    """The chunks as one array; None when there are none (a unit's commit
    always adds rows, so none found means they could not be told)."""
    if not chunks:
        return None
    return pa.concat_arrays(chunks)


class UnitTakenOver(RuntimeError):
    """A write task's unit lost its pending checkpoint record before its
    table commit: a newer run of the job recovered the checkpoint and
    rolled the unit back (the task outlived its killed driver), so its
    rows must not reach the table."""


#: How old a ledger entry of a commit that never landed must be before its
#: files are deleted (seconds, by the store's clock;
#: ``CAIRN_ORPHAN_GRACE_SECONDS`` changes it): a killed run's worker
#: outlives its driver by seconds and may still be making that commit
#: (pyiceberg retries it on newer metadata), which would then name deleted
#: files.
ORPHAN_GRACE_SECONDS = 60.0


def grace_seconds() -> float:
    """The grace period: ``CAIRN_ORPHAN_GRACE_SECONDS``, else (unset, or
    not a number, with a warning) :data:`ORPHAN_GRACE_SECONDS`."""
    grace = os.environ.get("CAIRN_ORPHAN_GRACE_SECONDS", "")
    if not grace:
        return ORPHAN_GRACE_SECONDS
    try:
        return float(grace)
    except ValueError:
        logger.warning("cairn: CAIRN_ORPHAN_GRACE_SECONDS=%r is not a number: 60 s taken", grace)
        return ORPHAN_GRACE_SECONDS


def old_enough(age_seconds: Optional[float], commit_retries: float = 0.0) -> bool:
    """Whether a ledger entry of that age (its pending record's, by the
    store's clock, as recovery reads it; None: unknown) is older than the
    grace period plus ``commit_retries`` (seconds a commit may go on
    retrying after its entry, by the format's own bound): only then can no
    worker of a killed run still be making the commit it names."""
    return age_seconds is not None and age_seconds >= grace_seconds() + commit_retries


def entry_files(entry: Optional[str], file_name: "re.Pattern[str]") -> Tuple[List[str], int]:
    """The data files a ledger entry (``{"files": [...], "base": N}``)
    names, and the version its commit was made on (0 when it names none:
    any version may then hold them). Only plain names of the format's data
    files (``file_name``, matched whole) are taken: an entry naming
    anything else names no file of cairn's, and nothing of it is taken."""
    try:
        parsed = json.loads(entry) if entry else {}
    except ValueError:
        return [], 0
    if not isinstance(parsed, dict):
        return [], 0
    files = parsed.get("files")
    base = parsed.get("base", 0)
    if not isinstance(files, list) or not isinstance(base, int) or base < 0:
        return [], 0
    plain = [name for name in files if isinstance(name, str) and file_name.fullmatch(name)]
    if len(plain) != len(files):
        return [], 0
    return plain, base


def delete_orphans(filesystem: Any, paths: List[str], table: str) -> int:
    """Deletes ``paths``, files of a table commit that never landed which
    the caller proved no version of ``table`` references; returns how many
    it deleted. A file already gone is not counted; one that cannot be
    deleted is logged and left: the resume goes on without it."""
    deleted = 0
    for path in paths:
        try:
            filesystem.delete_file(path)
        except FileNotFoundError:
            continue
        except OSError as e:
            logger.warning("cairn: the unreferenced file %s of %s was left: %s", path, table, e)
            continue
        deleted += 1
    return deleted


#: How long a write task's process stages units against a table it
#: loaded: loading a Delta table replays its log and lists every file it
#: holds, and opening a Lance dataset reads a manifest listing every
#: fragment, so a load per task grows with the units committed before it
#: (measured: 0.1 s a Delta task at 6,000 files, against 0.05 s for the
#: rest of a unit's work; the 10,000-unit jobs slowed as they grew).
STAGING_SECONDS = 30.0

#: The tables staging loaded in this process: (run, table) -> (when,
#: table).
_STAGING: Dict[Tuple[str, str], Tuple[float, Any]] = {}


#: The marker a unit writes create-if-absent in its job's checkpoint
#: directory to be the one unit that creates a table that does not exist
#: (a name the checkpoint's readers pass over, as its probes'); removed
#: once the table is made.
CREATE_MARKER = ".cairn-probe-table-create"
#: How long a unit waits for the unit holding the marker to create the
#: table, in seconds (an empty create takes about one): a holder killed
#: while it created leaves the marker, and the units then stop, naming
#: it, until the next run's start clears it.
CREATE_WAIT_SECONDS = 120.0


def _create_marker() -> Optional[Tuple[Any, str]]:
    """The checkpoint filesystem (cairn's) and the path of the job's create
    marker, or None outside a job checkpointed by cairn."""
    from ._ray_fs import cairn_of

    config = DataContext.get_current().checkpoint_config
    if config is None or config.filesystem is None:
        return None
    fs = cairn_of(config.filesystem)
    if fs is None:
        return None
    directory = fs._strip_protocol(config.checkpoint_path).rstrip("/")
    return fs, f"{directory}/{CREATE_MARKER}"


def create_table_once(table: str, load: Callable[[], Any], create: Callable[[], None]) -> Any:
    """``load()``'s table (None: there is none), made first when missing,
    by one unit of the job. Units that find no table write the job's create
    marker create-if-absent (as exclusive as the checkpoint's lease on that
    store); the one that wrote it calls ``create()`` if the table is still
    missing, then removes it; the others wait until the table exists (or
    the marker is gone: then one of them takes it). A format's create from
    several writers at once can otherwise succeed more than once (Lance:
    the later replacing the earlier's rows) or fail the others (Delta).
    Outside a job checkpointed by cairn there is no job to elect in:
    ``create()`` is called. A table that exists costs the one ``load()``."""
    found = load()
    if found is not None:
        return found
    marker = _create_marker()
    if marker is None:
        create()
        return load()
    fs, path = marker
    deadline = time.monotonic() + CREATE_WAIT_SECONDS
    while True:
        try:
            fs.pipe_file(path, b"", mode="create")
        except FileExistsError:
            found = load()
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"cairn: another unit of this job took {fs.unstrip_protocol(path)} to create "
                    f"the table {table} and has not in {CREATE_WAIT_SECONDS:.0f} s: if no job is "
                    "writing to it, delete that file and run the job again"
                ) from None
            time.sleep(0.2)
            continue
        try:
            if load() is None:
                create()
                logger.info("cairn: created %s (empty) for this job's units", table)
        finally:
            try:
                fs.rm_file(path)
            except FileNotFoundError:
                pass
        return load()


def clear_create_marker() -> None:
    """Removes a create marker a killed run left (the driver, as the write
    starts: no unit of this job holds it yet)."""
    marker = _create_marker()
    if marker is None:
        return
    fs, path = marker
    try:
        fs.rm_file(path)
    except FileNotFoundError:
        pass


def staging_table(run: str, table: str, load: Callable[[], Any]) -> Any:
    """The table ``load()`` returns, as a write task stages units against
    it: loaded at most :data:`STAGING_SECONDS` ago in this process by the
    same ``run`` (a table another run made, replaced or deleted is never
    used; ``run`` empty, outside a job's write: loaded each time). None
    (no table yet) is not kept. Only what staging needs is read from it:
    the committer checks the table it commits to again."""
    if not run:
        return load()
    key = (run, table)
    now = time.monotonic()
    # Tables of earlier runs and loads past their time are let go (a
    # Delta table holds its list of files).
    for old in [k for k, (when, _) in _STAGING.items() if now - when >= STAGING_SECONDS]:
        del _STAGING[old]
    cached = _STAGING.get(key)
    if cached is not None and now - cached[0] < STAGING_SECONDS:
        return cached[1]
    loaded = load()
    if loaded is not None:
        _STAGING[key] = (now, loaded)
    return loaded


def discard_staged(filesystem: Any, directory: str, names: Iterable[str]) -> None:
    """Deletes a unit's staged data files (``names`` in ``directory`` on
    the pyarrow ``filesystem``), which no table version names: a file
    already gone is skipped, one that cannot be deleted is left with a
    warning, never fatal (a group committer discards a retry's files, or
    those of a unit whose fence failed)."""
    directory = directory.rstrip("/")
    for name in names:
        path = f"{directory}/{name}"
        try:
            filesystem.delete_file(path)
        except FileNotFoundError:
            continue
        except Exception as e:  # noqa: BLE001 - a file left is logged, never fatal
            logger.warning("cairn: the unreferenced file %s was left: %s", path, e)


def warn_orphans_left(table: str, units: List[str], clean_up: str) -> None:
    """Says that the data files the rolled-back ``units`` may have written
    to ``table`` are left: cairn does not know them (a unit killed while it
    wrote them, before its ledger entry named them), could not prove that
    no version references them, or their entry is younger than the grace
    period. ``clean_up`` is the format's own tool that removes files no
    version references."""
    logger.warning(
        "cairn: %d unit(s) rolled back (%s) may have left data files in %s that no version "
        "references; cairn cannot name them, prove them unreferenced or was within %s s of "
        "their writing, so it keeps them: %s removes them",
        len(units),
        ", ".join(sorted(units)[:5]) + (", ..." if len(units) > 5 else ""),
        table,
        grace_seconds(),
        clean_up,
    )


def without_secrets(uri: str) -> str:
    """``uri`` for messages: no user info, no query."""
    parts = urlsplit(uri)
    if not parts.scheme:
        return uri
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class UnitFence:
    """What stands between a unit and its table commit: the check that
    Ray's pending record of the unit is still there, and the write of its
    ledger entry into that record. Pickled with what it needs (the
    checkpoint's filesystem, the record's paths, the unit's IDs), so a
    committer in another process can run it."""

    def __init__(
        self,
        unit: str,
        table: str,
        filesystem: Any,
        pending_paths: List[str],
        id_column: Optional[str],
        ids: Any,
        committed_paths: Optional[List[str]] = None,
        carried_entry: Optional[str] = None,
        retried: bool = True,
    ):
        self.unit = unit
        #: Whether the task may be a retry (False: a first attempt, whose
        #: unit is new in this run: no table commit can hold it yet).
        self.retried = retried
        #: For a retried task, the ledger entry its pending record carries
        #: from an earlier attempt's commit (None: none, or a first attempt).
        self.carried_entry = carried_entry
        #: Whether the unit was handed over again after its committer died
        #: (that committer may have fenced and committed it).
        self.resent = False
        self.table = table
        self._filesystem = filesystem
        self._pending_paths = pending_paths
        self._id_column = id_column
        self._ids = ids
        self._committed_paths = committed_paths or []
        #: The last record made, with its entry: the fence writes the
        #: pending record and the commit the committed one with the same
        #: entry, encoded once.
        self._record: Optional[Tuple[Optional[str], bytes]] = None

    @property
    def id_column(self) -> Optional[str]:
        """The checkpoint's ID column (None: no checkpoint)."""
        return self._id_column

    @property
    def ids(self) -> Any:
        """The IDs of the unit's rows (None: no checkpoint)."""
        return self._ids

    @property
    def keeps_entry(self) -> bool:
        """Whether :meth:`write_ledger` writes the unit's ledger entry into
        its pending record (a checkpoint, and one record of the unit's
        IDs): else only the table's history can name the unit."""
        return (
            self._filesystem is not None
            and self._ids is not None
            and len(set(self._pending_paths)) == 1
        )

    def recorded_entry(self) -> Optional[str]:
        """The ledger entry the unit's checkpoint records hold now: its
        pending record's, else its committed record's (None: neither has
        one). A committer reads it for a unit an earlier commit may hold."""
        if not self.keeps_entry:
            return None
        for path in sorted(set(self._pending_paths)) + sorted(set(self._committed_paths)):
            entry = ledger_entry(self._filesystem, path)
            if entry is not None:
                return entry
        return None

    def __call__(self, ledger: Optional[str], landed: bool = False) -> None:
        """Before a commit: :meth:`require_pending`, then the entry
        written; after one (``landed``): the entry written."""
        if not landed:
            self.require_pending()
        if ledger is not None:
            self.write_ledger(ledger)

    def require_pending(self) -> None:
        """Raises :class:`UnitTakenOver` when Ray's pending record of the
        unit is gone. Recovery drops a pending unit the table does not hold
        before a new run writes its rows again, so a task that outlived its
        killed driver stops here instead of committing them a second time
        (one request, a HEAD; a commit already past this check when the
        recovery ran can still land: see docs/python.md)."""
        if self._filesystem is None or not self._pending_paths:
            return
        for info in self._filesystem.get_file_info(self._pending_paths):
            if info.type == pafs.FileType.NotFound:
                raise UnitTakenOver(
                    f"cairn: unit {self.unit} was not committed to {self.table}: its pending "
                    f"checkpoint record {info.path} is gone, so a newer run of this job "
                    "recovered the checkpoint and writes these rows itself (this task outlived "
                    "its driver)"
                )

    def write_ledger(self, ledger: str) -> None:
        """Rewrites the unit's pending record (Ray's, of its rows' IDs)
        with its ledger entry (one PUT). A task with more than one pending
        record keeps them as Ray wrote them: which IDs belong to which
        cannot be told here, and a unit without an entry is settled by the
        table's history alone."""
        # A second pass of the task's chain inside its attempt lists the
        # same record again.
        paths = set(self._pending_paths)
        if self._filesystem is None or self._ids is None or len(paths) != 1:
            return
        with self._filesystem.open_output_stream(paths.pop()) as out:
            out.write(self._record_with(ledger))

    def _record_with(self, ledger: Optional[str]) -> bytes:
        """The unit's record: its IDs, with ``ledger``."""
        if self._record is None or self._record[0] != ledger:
            self._record = (ledger, id_record(self._ids, self._id_column, ledger))
        return self._record[1]

    def commit_record(self, ledger: Optional[str], record: Optional[bytes] = None) -> None:
        """The unit's checkpoint commit, by a committer that committed its
        rows to the table: its committed record written (``record``, else
        its IDs with ``ledger``), then its pending record deleted. A task
        with more than one pending record has each moved, as Ray commits
        them."""
        if self._filesystem is None:
            return
        pairs = sorted(set(zip(self._pending_paths, self._committed_paths)))
        if len(pairs) != 1 or self._ids is None:
            for pending, committed in pairs:
                self._filesystem.move(pending, committed)
            return
        pending, committed = pairs[0]
        if record is None:
            record = self._record_with(ledger)
        with self._filesystem.open_output_stream(committed) as out:
            out.write(record)
        try:
            self._filesystem.delete_file(pending)
        except FileNotFoundError:
            pass


def fence_group(
    live: List[Submission],
    entries: Dict[str, Optional[str]],
    outcomes: Dict[str, Tuple[str, str]],
    discard: Callable[[Any], None],
) -> List[Submission]:
    """A group committer's fences: each submission's unit fenced (its
    payload's :class:`UnitFence`, with its ledger entry in ``entries``) on
    a few threads; returns the fenced ones. A refused unit (taken over by
    a new run, or a fence that failed) gets its outcome and its staged
    files discarded."""
    errors = fence_all([functools.partial(s.payload.fence, entries[s.unit]) for s in live])
    fenced = []
    for submission, error in zip(live, errors):
        if error is None:
            fenced.append(submission)
            continue
        kind = REFUSED if isinstance(error, UnitTakenOver) else FAILED
        outcomes[submission.unit] = (kind, str(error) or type(error).__name__)
        discard(submission.payload)
    return fenced


def refuse_unfitting(
    live: List[Submission],
    outcomes: Dict[str, Tuple[str, str]],
    discard: Callable[[Any], None],
    why_not: Callable[[Submission], Optional[str]],
) -> List[Submission]:
    """The submissions whose staged files the table still takes as they
    are (``why_not`` gives None); each other one fails with its reason
    (the table changed while the job ran) and its staged files are
    discarded: the run again writes its unit as the table is then."""
    fitting = []
    for submission in live:
        why = why_not(submission)
        if why is None:
            fitting.append(submission)
            continue
        outcomes[submission.unit] = (FAILED, why)
        discard(submission.payload)
    return fitting


def held_by_earlier_commits(log: Any, submissions: List[Submission]) -> Dict[str, str]:
    """The units of ``submissions`` (those the table's history does not
    record) whose pending record carries a ledger entry that finds their
    rows in the table's current version (``log.held``): an earlier
    committer's commit of the unit, made before a task's retry handed it
    over again, whose version the table's maintenance removed since (a
    history read alone would commit the unit twice). Unit: that entry.
    Only retried tasks' units carry one."""
    entries = {
        s.unit: s.payload.fence.carried_entry
        for s in submissions
        if getattr(s.payload.fence, "carried_entry", None)
    }
    if not entries or not hasattr(log, "held"):
        return {}
    return {unit: entries[unit] for unit in log.held(entries)}


def settle_recorded(
    live: List[Submission],
    recorded: Dict[str, Tuple[Any, str]],
    own: Callable[[Submission, Any], bool],
    log: Any,
    discard: Callable[[Any], None],
    outcomes: Dict[str, Tuple[str, str]],
    own_entry: Optional[Callable[[Submission, str], bool]] = None,
) -> List[Submission]:
    """A group committer's check before its commit: returns the submissions
    whose unit the table does not hold yet. ``recorded`` maps each unit the
    table's history records to what names its commit's files and its
    ledger entry; ``own(submission, names)`` tells the submission's own
    commit (an earlier try that landed: committed with its IDs) from an
    earlier submission's, whose committer died before the unit's records
    (committed with the table's IDs, or the submission's when the table's
    cannot be read; its staged files discarded). A unit the history no
    longer records is found by its carried entry
    (:func:`held_by_earlier_commits`): the submission's own commit when
    ``own_entry(submission, entry)`` says so, else an earlier
    submission's."""
    held = held_by_earlier_commits(log, [s for s in live if s.unit not in recorded])
    left, found = [], []
    for submission in live:
        if submission.unit in held:
            entry = held[submission.unit]
            ours = own_entry is not None and own_entry(submission, entry)
        elif submission.unit in recorded:
            names, entry = recorded[submission.unit]
            ours = own(submission, names)
        else:
            left.append(submission)
            continue
        if not ours:
            discard(submission.payload)
        found.append((submission, entry, ours))
    # The table's IDs of the units an earlier submission committed, the
    # table read once for all of them.
    theirs = [s for s, _, ours in found if not ours]
    records: Dict[str, bytes] = {}
    for id_column in {s.payload.fence.id_column for s in theirs}:
        records.update(
            log.committed_records(
                [s.unit for s in theirs if s.payload.fence.id_column == id_column], id_column
            )
        )
    done = [(s, entry, None if ours else records.get(s.unit)) for s, entry, ours in found]
    commit_unit_records(done, outcomes, log.table)
    return left


def commit_unit_records(
    done: List[Tuple[Submission, Optional[str], Optional[bytes]]],
    outcomes: Dict[str, Tuple[str, str]],
    table: str,
) -> None:
    """A group committer's last step: the checkpoint records of units whose
    rows ``table`` holds committed (each with its ledger entry, or the
    record to write), on a few threads. One that fails is left pending,
    with a warning: the job's end settles it by the table's log."""
    steps = [
        functools.partial(s.payload.fence.commit_record, entry, record) for s, entry, record in done
    ]
    for (submission, _, _), error in zip(done, fence_all(steps)):
        if error is not None:
            logger.warning(
                "cairn: unit %s is in %s, and its checkpoint record was left pending (the "
                "job's end settles it by the table's log): %s",
                submission.unit,
                table,
                error,
            )
        outcomes[submission.unit] = (COMMITTED, "")


#: What :meth:`TableDatasink.append` returns when it handed the unit to the
#: job's committer, which commits it to the table and then in the
#: checkpoint (Ray's commit of its checkpoint record is skipped).
HANDED_OVER = "handed-over"

#: Set in a write task's context when its unit was handed to the job's
#: committer: cairn's checkpoint writer then leaves its pending record to
#: the committer.
HANDED_OVER_KEY = "_cairn_unit_handed_over"


class TableDatasink(FileDatasink):
    """A Ray datasink that commits each write task's rows to a table, once:
    subclasses give :meth:`unit_log` and :meth:`append` (one table
    transaction adding ``rows`` and recording ``unit``, or the unit's
    files handed to the job's committer with :meth:`hand_over`).

    Group commits: a subclass whose tasks can hand their units over calls
    :meth:`init_group_commits` and gives :meth:`group_commit` (the
    committer's side) and :meth:`group_name`; this class starts the job's
    committer where the write starts, waits for its last commit before the
    checkpoint is ended, and stops it."""

    #: The run this sink writes (set by :meth:`on_write_start`; empty
    #: outside a job's write), which the write tasks' staging cache is
    #: keyed by (:func:`staging_table`).
    run: str = ""

    #: At most this many units in one table commit (1: each task commits
    #: its own unit); set by :meth:`init_group_commits`.
    _max_units_per_commit = 1
    _commit_interval = DEFAULT_COMMIT_INTERVAL_SECONDS
    _commit_timeout = DEFAULT_COMMIT_TIMEOUT_SECONDS
    #: The job's committer, named where the write starts.
    _committer: Optional[str] = None

    def init_group_commits(
        self, max_units_per_commit: int, commit_interval: float, commit_timeout: float
    ) -> None:
        """Checks and keeps the group-commit settings of the sink's
        constructor (``max_units_per_commit=1``: no committer)."""
        if int(max_units_per_commit) < 1:
            raise ValueError(f"max_units_per_commit={max_units_per_commit}: must be at least 1")
        if float(commit_interval) < 0 or float(commit_timeout) <= 0:
            raise ValueError(
                f"commit_interval={commit_interval}, commit_timeout={commit_timeout}: the "
                "interval must be 0 or more seconds, the timeout more than 0"
            )
        self._max_units_per_commit = int(max_units_per_commit)
        self._commit_interval = float(commit_interval)
        self._commit_timeout = float(commit_timeout)

    def group_commit(self) -> Any:
        """The committer's side of the sink: a picklable object whose
        ``make()`` returns ``(commit_batch, discard)`` for
        :class:`cairn._ray_committer.GroupCommitter`."""
        raise NotImplementedError

    def group_name(self) -> str:
        """What names the table in the job's committer's name."""
        return self.unit_log().table

    def unit_log(self) -> UnitLog:
        """What cairn's checkpoint manager asks about pending units."""
        raise NotImplementedError

    def append(self, rows: pa.Table, unit: str, fence: "UnitFence") -> Any:
        """Commits ``rows`` to the table in one transaction that records
        ``unit``, calling ``fence`` just before the commit with the unit's
        ledger entry (where the commit puts its rows; None for a format
        whose history maintenance keeps): it raises :class:`UnitTakenOver`
        when the unit must not be committed, else writes the entry into
        the unit's pending record. ``fence(entry, landed=True)`` after the
        commit only rewrites the entry (for a commit whose files are known
        only once it is made). ``fence`` can be pickled: a committer that
        commits several tasks' units together runs it. Returns True when
        the unit was found committed by an earlier attempt of the task
        (this attempt's rows not committed), :data:`HANDED_OVER` when the
        job's committer took the unit (it commits the unit to the table and
        then in the checkpoint), else None."""
        raise NotImplementedError

    def refuse_other_managers(self) -> None:
        """Refuses, before anything is written, a job checkpointed by a
        manager that is not cairn's (it would roll back a unit the table
        already holds)."""
        config = DataContext.get_current().checkpoint_config
        if config is not None:
            # Told by the attribute cairn's manager (and a subclass of it)
            # carries, so this module does not import the manager's, which
            # imports this one.
            manager = getattr(config, "checkpoint_manager_cls", None)
            if not getattr(manager, SETTLES_TABLE_UNITS, False):
                raise ValueError(
                    f"cairn.ray.{type(self).__name__}({self.unit_log().table}) needs cairn's "
                    f"checkpoint manager, not {getattr(manager, '__name__', manager)}: another "
                    "manager rolls back a unit the table already holds, and its rows are written "
                    "twice. Use cairn.ray.checkpoint_config(...)"
                )

    def on_write_start(self, schema: Any = None) -> None:
        self.refuse_other_managers()
        clear_create_marker()
        self.run = uuid.uuid4().hex
        super().on_write_start(schema)
        self._committer = None  # a sink used again names its new job's
        name = self._committer_name()
        if name is not None:
            # Ray Data serializes the sink for its tasks after this call:
            # they hand their units to this name, whatever context they see.
            self._committer = name
            start_committer(
                name,
                self.group_commit().make,
                self._commit_interval,
                self._max_units_per_commit,
            )

    def _unit(self, ctx: Any) -> str:
        """The unit (Ray's checkpoint ID) of this write task: the base name
        Ray's planner gives its pending checkpoint record."""
        name = self.filename_provider.get_filename_for_task(
            ctx.kwargs[WRITE_UUID_KWARG_NAME], ctx.task_idx
        )
        return split_base_and_ext(name)[0]

    def write(self, blocks: Iterable[Block], ctx: Any) -> Optional[str]:
        """Commits the task's rows as its unit; returns the unit (None when
        the task had no rows), for :meth:`on_write_complete`."""
        builder = DelegatingBlockBuilder()
        for block in blocks:
            builder.add_block(block)
        rows = BlockAccessor.for_block(builder.build()).to_arrow()
        if rows.num_rows == 0:
            return None
        unit = self._unit(ctx)
        refused = ctx.kwargs.get(TAKEN_OVER)
        if refused:
            # Ray Data ran the task's chain again inside its attempt
            # (``retried_map_errors``), after Ray wrote the pending record
            # again: the refusal stands.
            raise UnitTakenOver(refused)
        log = self.unit_log()
        # Unit names are new in each run (Ray's write UUID), so only a
        # retry of this task can find its unit in the table: a first
        # attempt reads none of the table's history. A retry is Ray's
        # (another attempt of the task) or Ray Data's inside one attempt
        # (``retried_map_errors`` runs the task's chain again, with this
        # same context).
        retried = retried_here(ctx)
        if retried:
            crash_point("table-log-read", unit)
            if self._landed_before(ctx, unit, log):
                # A retried task whose table commit landed before it died.
                logger.info("cairn: unit %s is already in %s", unit, log.table)
                self._record_the_tables_ids(ctx, unit, log, rows)
                return unit
        ctx.kwargs[_COMMIT_TRIED] = True
        fence = self._fence_of(ctx, unit, rows, log.table, retried)
        try:
            landed_earlier = self.append(rows, unit, fence)
        except UnitTakenOver as e:
            # A second pass of the task's chain in this attempt is refused too.
            ctx.kwargs[TAKEN_OVER] = str(e)
            raise
        if landed_earlier == HANDED_OVER:
            ctx.kwargs[HANDED_OVER_KEY] = True
            crash_point("table-after-handover", unit)
            return unit
        if landed_earlier:
            # The committer found an earlier attempt's commit of the unit.
            logger.info("cairn: unit %s is already in %s", unit, log.table)
            self._record_the_tables_ids(ctx, unit, log, rows)
            return unit
        crash_point("table-after-commit", unit)
        return unit

    def _fence_of(
        self, ctx: Any, unit: str, rows: pa.Table, table: str, retried: bool
    ) -> "UnitFence":
        """The fence of this task's unit (its pending records, the IDs of
        its rows, whether the task may be a retry), for :meth:`append`."""
        config = DataContext.get_current().checkpoint_config
        if config is None:
            return UnitFence(unit, table, None, [], None, None, retried=retried)
        id_column = config.id_column
        pendings = pending_records(ctx)
        carried = None
        if pendings and retried:
            carried = carried_entry(ctx, config.filesystem, pendings[0].pending_path)
        return UnitFence(
            unit,
            table,
            config.filesystem,
            [p.pending_path for p in pendings],
            id_column,
            rows[id_column] if id_column in rows.column_names else None,
            [p.committed_path for p in pendings],
            carried,
            retried,
        )

    def _landed_before(self, ctx: Any, unit: str, log: Any) -> bool:
        """Whether an earlier attempt's table commit of ``unit`` landed:
        the table's history records it, or the ledger entry that attempt
        wrote before its commit (kept in the pending record by cairn's
        checkpoint writer) finds its rows in the table's current files, or
        that attempt's committed checkpoint record exists. Not landed when
        there is no entry, when the history that is left reaches the
        entry's base without the commit, or when the history is whole.
        Otherwise (an entry that finds nothing, a history maintenance cut
        above its base) raises: the commit may have landed and its files
        been rewritten since, and writing the rows again could double
        them."""
        if log.landed(unit):
            return True
        config = DataContext.get_current().checkpoint_config
        paths = {p.pending_path for p in pending_records(ctx)}
        if config is None or len(paths) != 1 or not hasattr(log, "held"):
            return False
        entry = carried_entry(ctx, config.filesystem, paths.pop())
        if entry is None:
            return False  # no earlier attempt began its commit
        if log.held({unit: entry}):
            return True
        absent = getattr(log, "absent", None)
        if absent is not None and absent({unit: entry}):
            return False  # the history left reaches its base: not landed
        _, cut = log.lineage([unit])
        if cut is None:
            return False
        committed = {p.committed_path for p in pending_records(ctx)}
        infos = config.filesystem.get_file_info(sorted(committed))
        if infos and all(info.type == pafs.FileType.File for info in infos):
            # The earlier attempt also committed its checkpoint record, so
            # its table commit landed (a compaction rewrote its files since).
            return True
        raise RuntimeError(
            f"cairn: unit {unit}'s earlier attempt began its commit to {log.table}, its data "
            f"files are not in the table's current version, and {cut}: whether that commit "
            "landed cannot be told, so this task writes nothing. Keep the table's history "
            "until the job ends; run the job again once no clean-up runs"
        )

    def _record_the_tables_ids(self, ctx: Any, unit: str, log: Any, rows: pa.Table) -> None:
        """Rewrites the unit's pending record (which Ray just wrote from
        this attempt's rows) with the IDs of the rows the table holds for
        it, when they differ: Ray's commit then records what is in the
        table. The rows this attempt made that the table does not hold are
        not output by this job (the earlier attempt's stand). When the
        table's IDs cannot be read (a format feature pyarrow does not read,
        files or log entries its maintenance removed), the pending record
        stays as it is, with a warning: exact for a deterministic
        transform."""
        config = DataContext.get_current().checkpoint_config
        pendings = pending_records(ctx)
        if config is None or not pendings:
            return
        filesystem = config.filesystem
        committed = filesystem.get_file_info([p.committed_path for p in pendings])
        if all(info.type == pafs.FileType.File for info in committed):
            # The earlier attempt committed its checkpoint record too, after
            # its table commit: that record is the table's rows. This
            # attempt's pending record goes, and the commit finds the unit
            # committed.
            for pending in pendings:
                try:
                    filesystem.delete_file(pending.pending_path)
                except FileNotFoundError:
                    pass  # the job's committer deleted it after its commit
            return
        if not isinstance(log, UnitIds):
            return
        id_column = config.id_column
        # The history's entry, else the one cairn's writer kept from the
        # earlier attempt.
        carried = carried_entry(ctx, filesystem, pendings[0].pending_path)
        ledger = log.ledger_of(unit) or carried
        ids = log.ids_or_none(unit, id_column)
        if ids is None or set(ids.to_pylist()) == set(rows[id_column].to_pylist()):
            # Ray's record of this attempt's rows stands, with the entry the
            # history gives where the record does not carry it already.
            if ledger is not None and ledger != carried:
                self._fence_of(ctx, unit, rows, log.table).write_ledger(ledger)
            return
        logger.warning(
            "cairn: unit %s of %s was retried and its rows differ from those its earlier "
            "attempt committed (a transform that is not deterministic): the checkpoint records "
            "the table's %d IDs, not this attempt's %d",
            unit,
            log.table,
            len(ids),
            rows.num_rows,
        )
        record = id_record(ids, id_column, ledger)
        for pending in pendings:
            with filesystem.open_output_stream(pending.pending_path) as out:
                out.write(record)

    def hands_units_over(self) -> bool:
        """Whether write tasks hand their units to the job's committer
        (which commits them to the table, then in the checkpoint) instead
        of committing each their own."""
        return self._max_units_per_commit > 1

    def _committer_name(self) -> Optional[str]:
        """The Ray actor name of the job's committer: the one the driver
        named where the write started (the sink reaches the tasks after
        it), else of this table and the job's checkpoint path; None when
        each task commits its own unit."""
        if not self.hands_units_over():
            return None
        if self._committer is not None:
            return self._committer
        config = DataContext.get_current().checkpoint_config
        return committer_name(self.group_name(), str(getattr(config, "checkpoint_path", "")))

    def hand_over(self, unit: str, staged: Any, fence: "UnitFence") -> Any:
        """Hands ``staged`` (the unit's files, written and not committed:
        what the sink's :meth:`group_commit` takes) to the job's committer;
        returns :data:`HANDED_OVER`, or True when the committer holds the
        unit committed by an earlier attempt of the task (``staged`` was
        discarded), for :meth:`append` to return."""
        table = self.unit_log().table
        ids = fence.ids
        size = ids.nbytes if ids is not None else 0
        kind, message = submit_to(
            self._committer_name(), table, unit, staged, self._commit_timeout, size
        )
        if kind == QUEUED:
            return HANDED_OVER
        if kind == LANDED_BEFORE:
            return True
        raise RuntimeError(f"cairn: unit {unit} was not taken for {table}: {kind}: {message}")

    def end_commits(self, config: Any = None) -> None:
        """Has the units this job handed to its committer committed, on the
        driver, before the job's checkpoint (``config``'s: the one cairn's
        manager ends; None: the current context's) is ended, waiting at
        most ``commit_timeout``; raises when a unit it failed, or a pending
        unit of the checkpoint, is not in the table. Nothing to do for a
        sink whose tasks commit their own units."""
        name = self._committer_name()
        if name is not None:
            failed = flush_committer(name, self._commit_timeout)
            self.check_none_lost(config, list(failed))

    def on_write_failed(self, error: Exception) -> None:
        """Has the committer commit the units it holds (waiting at most
        ``commit_timeout`` or 2 minutes, and a minute more for an answer),
        then stops it: units it could not commit stay pending for the
        resume to settle."""
        name = self._committer_name()
        if name is not None:
            try:
                flush_committer(name, min(self._commit_timeout, 120.0))
            except Exception as e:  # noqa: BLE001 - the job's own error is the one raised
                logger.warning("cairn: the failed job's committer did not commit all: %s", e)
            stop_committer(name)
        super().on_write_failed(error)

    def check_none_lost(self, config: Any = None, failed: Iterable[str] = ()) -> None:
        """Raises when a unit of ``failed`` (the committer's failures) or a
        pending unit of the checkpoint ``config`` names (None: the current
        context's) is not recorded by the table: after the committer was
        flushed, such a unit was handed to a committer that died or failed
        before its table commit, and ending the checkpoint would roll it
        back with its rows never written. A pending unit the table records
        is settled as committed by the checkpoint's end."""
        if config is None:
            config = DataContext.get_current().checkpoint_config
        pending = set(failed)
        if config is not None:
            directory = unwrap_protocol(config.checkpoint_path)
            try:
                infos = config.filesystem.get_file_info(pafs.FileSelector(directory))
            except FileNotFoundError:
                infos = []
            # Named as Ray's checkpoint writer names a pending record.
            suffix = f"{PENDING_CHECKPOINT_SUFFIX}.parquet"
            pending.update(
                os.path.basename(info.path)[: -len(suffix)]
                for info in infos
                if info.path.endswith(suffix)
            )
        if not pending:
            return
        pending = sorted(pending)
        log = self.unit_log()
        lost = not_in_table(log, config, pending)
        if lost:
            raise RuntimeError(
                f"cairn: {len(lost)} unit(s) were handed to the table committer of "
                f"{log.table} and are not in the table (e.g. {', '.join(lost[:3])}): the "
                "committer died or failed before their commit. The checkpoint is kept; run the "
                "job again: the resume writes their rows"
            )

    def on_write_complete(self, write_result: Any) -> None:
        """Fails the job, on the driver, when its units are not all in the
        table (then stops the job's committer, if any). Ray has already run cairn's clean-up, which checked every
        committed unit (earlier runs' too) before ending the checkpoint,
        and logged its error without failing the job: that error is raised
        here. Without a clean-up (``delete_checkpoint_on_success=False``,
        or no checkpoint), this job's own units are checked. Deletes
        nothing: unlike Ray's file sinks, which remove an output directory
        they made when no row was written, the table's directory may hold
        another writer's table."""
        try:
            self._check_the_jobs_units(write_result)
        finally:
            name = self._committer_name()
            if name is not None:
                stop_committer(name)

    def _check_the_jobs_units(self, write_result: Any) -> None:
        """:meth:`on_write_complete`'s check."""
        config = DataContext.get_current().checkpoint_config
        path = getattr(config, "checkpoint_path", None)
        if path is not None and path in _CLEAN_UPS:
            error = _CLEAN_UPS.pop(path)
            if error is not None:
                raise RuntimeError(
                    f"cairn.ray.{type(self).__name__}: the job's rows are written, but its "
                    f"checkpoint {path} was not ended: {error}"
                ) from error
            return
        # No clean-up ran (the checkpoint is kept): the committer's units
        # are committed before the table is checked.
        self.end_commits()
        units = [u for u in write_result.write_returns if u]
        if not units:
            return
        log = self.unit_log()
        missing = not_in_table(log, config, sorted(units))
        if missing:
            raise RuntimeError(
                f"cairn.ray.{type(self).__name__}: {len(missing)} unit(s) this job committed are "
                f"not in the table {log.table} (e.g. {', '.join(missing[:3])}): it was restored, "
                "rolled back or overwritten while the job ran, lost a commit (two at once on a "
                "store without conditional writes), or was compacted after its history was "
                "cleaned up (their files rewritten). A checkpoint kept holds their IDs as "
                "committed, and a resume refuses it until the table holds them again: restore "
                "the table, or move the checkpoint away and run the job again"
            )


def crash_point(name: str, unit: str) -> None:
    """A failpoint for the tests (``table-after-commit``: a unit's rows in
    the table, its checkpoint commit to come (in a group committer: a
    group's, named by its first unit); ``table-after-handover``: a unit
    handed to the job's committer, its task still to end;
    ``table-before-commit``, in
    the Lance sink: its data files written, its table commit to come;
    ``table-after-fence``, in the group committers and the Lance sink: its files
    written and named by its ledger entry, its table commit to come): with
    ``CAIRN_PY_FAILPOINT=<name>:<action>:<flag file>[:<passes>]``, the
    first task to reach it (after ``passes`` units went through it) writes
    its unit to the flag file,
    then ``hang`` (waits there for the harness to kill the job), ``exit``
    (its worker process dies at once, as a SIGKILLed one) or ``raise`` (a
    ``RuntimeError``, as a failing step after it would)."""
    point, _, rest = os.environ.get("CAIRN_PY_FAILPOINT", "").partition(":")
    action, _, rest = rest.partition(":")
    flag, _, passes = rest.partition(":")
    if point != name or not flag:
        return
    if passes and _passed(flag, int(passes)):
        return
    try:
        fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(unit)
    if action == "exit":
        os._exit(137)
    if action == "raise":
        raise RuntimeError(f"cairn failpoint {name} for unit {unit}")
    while True:
        time.sleep(1)


def _passed(flag: str, passes: int) -> bool:
    """Whether this arrival at a failpoint is one of the first ``passes``,
    counted across processes by the files ``<flag>.pass<n>`` each makes."""
    for n in range(passes):
        try:
            os.close(os.open(f"{flag}.pass{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            continue
    return False
