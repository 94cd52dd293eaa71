"""The checkpoint writer of write tasks under cairn's manager: Ray's
pending record, then a commit that is one move of it.

Ray 2.60's writer commits a unit by asking first whether its committed
record exists (a HEAD, and on an object store a listing to tell a missing
key from a directory) and whether its pending record does (a HEAD), then
moving it: on S3, 3 requests before the move's own 3. Here the move comes
first, and only a move that finds no pending record asks whether the
committed one is there (an earlier try of this commit moved it, and its
answer was lost). A file sink's record is written here, the bytes Ray's
writer writes, so its size is known and the move's copy asks the store
nothing first: a copy and a delete. A retried task's commit that finds both moves its new
pending record over the committed one: the record then holds the IDs of
the retry's rows, which Ray's file sinks write under the same file names
as the earlier attempt's (Ray's writer keeps the earlier IDs). A table
sink's retry that finds the earlier attempt's committed record keeps it
and drops its own pending record first. On local disk, where the checks
cost nothing, and on any filesystem that is not cairn's, the commit is
Ray's.

A table sink's retried task's pending record keeps the ledger entry an
earlier attempt wrote into it (or into its committed record) before its
table commit: Ray's writer would write the record again without it, and a
unit whose commit may have landed would then look like one whose commit
never began (the records' footers read, on retries of table sinks
only).

A unit a table sink handed to the job's committer is not committed here:
the committer commits it to the table, then its checkpoint record; a
retry of such a task keeps the pending record it finds (the committer may
be writing the unit's ledger entry into it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import pyarrow.fs as pafs

from ray.data.context import DataContext

from ._ray_compat import (
    NO_DATA_FILES,
    PENDING_CHECKPOINT_SUFFIX,
    BatchBasedCheckpointWriter,
    PendingCheckpoint,
    call_with_retry,
    current_task_context,
    datasink_being_planned,
)
from ._ray_fs import cairn_of
from ._ray_table import (
    CARRIED_ENTRY,
    HANDED_OVER_KEY,
    TAKEN_OVER,
    TableDatasink,
    id_record,
    ledger_entry,
    retried_here,
)


@dataclass
class SizedPendingCheckpoint(PendingCheckpoint):
    """A pending record this writer wrote, with its size in bytes: its
    commit's copy then asks the store nothing first (on S3 no HEAD)."""

    size: int


class MovingCheckpointWriter(BatchBasedCheckpointWriter):
    """Ray's batch checkpoint writer with a commit that moves the pending
    record with no checks first: for a file sink's record, whose size the
    writer knows, a copy and a delete (2 requests on S3, where Ray's takes
    6); a table sink's, written again with its ledger entry, 3 (the copy
    heads its source)."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        # Decided once, where Ray plans the write, not at every unit.
        cairn_fs = cairn_of(self.filesystem)
        #: cairn's filesystem of the checkpoint where a commit is a move
        #: without checks (an object store), else None (Ray's commit).
        self._moving_fs = (
            cairn_fs if cairn_fs is not None and not cairn_fs._real_directories() else None
        )
        #: Whether the job writes through a table sink (whose pending
        #: records carry ledger entries), decided where Ray plans it.
        sink = datasink_being_planned()
        self._table_sink = isinstance(sink, TableDatasink)
        #: Whether that sink hands its units to the job's committer, which
        #: may be writing the unit's ledger entry into its pending record.
        self._hands_over = self._table_sink and sink.hands_units_over()

    def write_pending_checkpoint(
        self, id_column_data: Any, checkpoint_id: str
    ) -> Optional[PendingCheckpoint]:
        """Ray's pending record: a file sink's written here with its size
        noted (for the commit's copy); a table sink's on a retried task
        with the ledger entry its earlier attempt's record holds."""
        if len(id_column_data) == 0:
            return super().write_pending_checkpoint(id_column_data, checkpoint_id)
        base = os.path.join(self.checkpoint_path_unwrapped, checkpoint_id)
        pending_path = f"{base}{PENDING_CHECKPOINT_SUFFIX}.parquet"
        committed_path = f"{base}.parquet"
        ctx = current_task_context()
        if ctx is not None and ctx.kwargs.get(NO_DATA_FILES):
            # Every row of the unit stands for a source with no outputs:
            # recorded as writing no data file, so its data check passes.
            record = id_record(id_column_data, self.id_col, no_data_files=True)
            self._write_record(pending_path, record)
            return SizedPendingCheckpoint(
                pending_path=pending_path, committed_path=committed_path, size=len(record)
            )
        if not self._table_sink:
            if self._moving_fs is None:
                return super().write_pending_checkpoint(id_column_data, checkpoint_id)
            # Ray's record, written here to know its size (a table sink's
            # record is written again with its ledger entry: no size).
            record = id_record(id_column_data, self.id_col)
            self._write_record(pending_path, record)
            return SizedPendingCheckpoint(
                pending_path=pending_path, committed_path=committed_path, size=len(record)
            )
        ctx = current_task_context()
        if ctx is None or not retried_here(ctx):
            return super().write_pending_checkpoint(id_column_data, checkpoint_id)
        if self._hands_over:
            kept = self._keep_handed_over(ctx, pending_path)
            if kept:
                return PendingCheckpoint(pending_path=pending_path, committed_path=committed_path)

        def earlier_entry() -> Optional[str]:
            entry = ledger_entry(self.filesystem, pending_path)
            return entry if entry is not None else ledger_entry(self.filesystem, committed_path)

        entry = call_with_retry(
            earlier_entry,
            description=f"read the ledger entry of {pending_path}",
            match=DataContext.get_current().retried_io_errors,
        )
        ctx.kwargs[CARRIED_ENTRY] = entry
        if entry is None:
            return super().write_pending_checkpoint(id_column_data, checkpoint_id)
        self._write_record(pending_path, id_record(id_column_data, self.id_col, entry))
        return PendingCheckpoint(pending_path=pending_path, committed_path=committed_path)

    def _keep_handed_over(self, ctx: Any, pending_path: str) -> bool:
        """Whether a retried task's pending record is kept as it is (True
        when it exists): an earlier attempt handed the unit to the job's
        committer, which may be writing its ledger entry into it right now
        (rewritten, the entry of a commit that lands could be lost). The
        committer writes the committed record from the IDs of the attempt
        it commits; the entry is carried for the task's own checks."""

        def existing_entry() -> Tuple[bool, Optional[str]]:
            if self.filesystem.get_file_info(pending_path).type != pafs.FileType.File:
                return False, None
            return True, ledger_entry(self.filesystem, pending_path)

        exists, entry = call_with_retry(
            existing_entry,
            description=f"read the pending checkpoint {pending_path}",
            match=DataContext.get_current().retried_io_errors,
        )
        if exists:
            ctx.kwargs[CARRIED_ENTRY] = entry
        return exists

    def _write_record(self, pending_path: str, record: bytes) -> None:
        def write() -> None:
            with self.filesystem.open_output_stream(pending_path) as out:
                out.write(record)

        call_with_retry(
            write,
            description=f"write pending checkpoint {pending_path}",
            match=DataContext.get_current().retried_io_errors,
        )

    def commit_checkpoint(self, pending: PendingCheckpoint) -> None:
        ctx = current_task_context()
        if ctx is not None and ctx.kwargs.get(HANDED_OVER_KEY):
            # The job's committer commits the unit to the table, then this
            # record.
            return
        cairn_fs = self._moving_fs
        if cairn_fs is None:
            super().commit_checkpoint(pending)
            return
        native = cairn_fs._native
        source = cairn_fs._strip_protocol(pending.pending_path)
        target = cairn_fs._strip_protocol(pending.committed_path)
        size = getattr(pending, "size", None)

        def move() -> None:
            try:
                native.mv_file(source, target, size)
            except FileNotFoundError:
                try:
                    native.info(target)
                    return  # moved by an earlier try whose answer was lost
                except FileNotFoundError:
                    pass
                refused = (
                    f"cairn: neither the pending checkpoint record {pending.pending_path} nor "
                    f"the committed one {pending.committed_path} exists, so the unit is not "
                    "committed: a newer run of this job recovered the checkpoint and rolled the "
                    "unit back (this task outlived its driver), or the checkpoint was deleted "
                    "while the job ran"
                )
                ctx = current_task_context()
                if ctx is not None:
                    # A second pass of the task's chain in this attempt (Ray
                    # Data's retried_map_errors) is refused by a table sink.
                    ctx.kwargs[TAKEN_OVER] = refused
                raise FileNotFoundError(refused) from None

        call_with_retry(
            move,
            description=f"commit checkpoint {pending.pending_path}",
            match=DataContext.get_current().retried_io_errors,
        )
