"""What a job's output already holds when a run starts, for cairn's Ray
manager: the record a finished job leaves beside its data files
(``_cairn_job.json``), and the IDs of the rows an output holds, read back
from its Parquet or JSON files or from a table with the table's own reader.

A run on a new checkpoint over an output that holds rows is judged here
(:func:`judge_existing_output`): the same finished job (its record names
this ID column and this input) writes nothing; a finished job's output
read by other input, or a table that holds rows, has its IDs counted as
committed (the rows there are never written again); files no cairn job
recorded are refused, as ``cairn job run`` refuses them."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads

from ._arrow_fs import arrow_filesystem
from ._native import NativeIdSetBuilder
from ._ray_keys import encode_key
from .fsspec import CairnFileSystem

logger = logging.getLogger("cairn.ray")

#: The finished job's record, beside its data files. Its name starts with
#: ``_``, so Ray's and pyarrow's readers of the output pass over it.
RECORD_NAME = "_cairn_job.json"

#: What the record's ``kind`` says.
RECORD_KIND = "cairn finished job"

#: The ID column of Ray's ``include_row_hash`` reads.
ROW_HASH = "row_hash"

#: ``checkpoint_config(existing_output=...)``'s choices.
EXISTING_OUTPUT_CHOICES = ("skip", "append")

#: The file sinks whose files cairn reads IDs back from, by Ray's class
#: name: the pyarrow dataset format that reads them.
_READABLE_FORMATS = {"ParquetDatasink": "parquet", "JSONDatasink": "json"}


class ExistingOutputRefused(ValueError):
    """A run refused before anything is written: its output holds rows
    cairn cannot tell apart from the ones it would write."""


@dataclass
class SameJob:
    """The output's record says this very job finished there: the same ID
    column and the same input digest."""

    record: Dict[str, Any]


@dataclass
class HoldsRows:
    """The output holds rows whose IDs count as committed (``what``:
    where they come from, for the log)."""

    what: str


def _uncached(fs: CairnFileSystem) -> CairnFileSystem:
    """``fs`` with the checkpoint preset (no listing cache): what the
    output holds decides what is skipped, so no listing is taken from a
    cache the user's filesystem may keep."""
    options = dict(fs.storage_options)
    if options.pop("checkpoint", False):
        return fs
    options.pop("protocol", None)
    return CairnFileSystem(fs._protocol, checkpoint=True, **options)


def _record_path(output_dir: str) -> str:
    return f"{output_dir.rstrip('/')}/{RECORD_NAME}"


def read_record(output_fs: CairnFileSystem, output_dir: str) -> Optional[Dict[str, Any]]:
    """The record of a finished job in ``output_dir``, or None when there
    is none. A record that is not cairn's JSON is refused: deleting it is
    the user's call, never a guess."""
    path = _record_path(output_dir)
    try:
        body = output_fs.cat_file(path)
    except FileNotFoundError:
        return None
    try:
        record = json.loads(body)
        if not isinstance(record, dict) or record.get("kind") != RECORD_KIND:
            raise ValueError(f"its kind is not {RECORD_KIND!r}")
        return record
    except ValueError as e:
        raise ExistingOutputRefused(
            f"{output_fs.unstrip_protocol(path)} is not a finished job's record cairn can read "
            f"({e}); restore it, or move it away and say how to treat the output's files with "
            "checkpoint_config(..., existing_output='append')"
        ) from e


def write_record(
    output_fs: CairnFileSystem,
    output_dir: str,
    id_column: str,
    input_digest: Optional[str],
    checkpoint: str,
) -> None:
    """Writes (or replaces) the record of a job that finished writing to
    ``output_dir``: its ID column, the digest of its input (None: the
    input was not files cairn lists) and when it finished."""
    record = {
        "kind": RECORD_KIND,
        "id_column": id_column,
        "input_digest": input_digest,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "checkpoint": checkpoint,
    }
    output_fs.pipe_file(_record_path(output_dir), json.dumps(record, indent=2).encode())


def first_data_file(output_fs: CairnFileSystem, output_dir: str) -> Optional[str]:
    """A file of ``output_dir`` that a reader of it would read (none whose
    name, or a directory's on its path, starts with ``.`` or ``_``), or
    None when it holds none or does not exist."""
    base = output_dir.rstrip("/") + "/"
    try:
        names = _uncached(output_fs).find(output_dir)
    except FileNotFoundError:
        return None
    for name in names:
        below = name[len(base) :] if name.startswith(base) else name.rsplit("/", 1)[-1]
        if not any(part.startswith((".", "_")) for part in below.split("/") if part):
            return output_fs.unstrip_protocol(name)
    return None


def _checkpoint_files(checkpoint_fs: CairnFileSystem, checkpoint_dir: str) -> List[str]:
    """The names of the files in the checkpoint directory (none when it
    does not exist)."""
    try:
        names = checkpoint_fs.ls(checkpoint_dir, detail=False)
    except FileNotFoundError:
        return []
    return [name.rstrip("/").rsplit("/", 1)[-1] for name in names]


def checkpoint_is_new(checkpoint_fs: CairnFileSystem, checkpoint_dir: str) -> bool:
    """Whether the checkpoint holds nothing of a job yet: no job record, no
    committed or pending unit, no completion marker (a lease left by a
    refused open does not count)."""
    return not any(
        base.endswith(".parquet") or base in (".cairn-job.json", ".cairn-complete")
        for base in _checkpoint_files(checkpoint_fs, checkpoint_dir)
    )


def checkpoint_holds_rows(checkpoint_fs: CairnFileSystem, checkpoint_dir: str) -> bool:
    """Whether the checkpoint holds a committed unit or a finished job's
    completion marker: rows in the output that a run skips."""
    return any(
        base == ".cairn-complete"
        or (base.endswith(".parquet") and not base.endswith(".pending.parquet"))
        for base in _checkpoint_files(checkpoint_fs, checkpoint_dir)
    )


def judge_existing_output(
    sink: Any,
    unit_log: Any,
    output_fs: CairnFileSystem,
    output_dir: str,
    id_column: str,
    input_digest: Optional[str],
) -> Optional[Any]:
    """How a run on a new checkpoint treats what its output holds: None
    (nothing there), :class:`SameJob`, or :class:`HoldsRows`; raises
    :class:`ExistingOutputRefused` for rows cairn cannot judge."""
    if unit_log is not None:
        batches = unit_log.table_ids(id_column)
        if batches is None:
            return None
        if any(len(ids) for ids in batches):
            return HoldsRows(f"the table {unit_log.table}")
        return None
    url = output_fs.unstrip_protocol(output_dir)
    record = read_record(output_fs, output_dir)
    if record is not None:
        if (
            input_digest is not None
            and record.get("input_digest") == input_digest
            and record.get("id_column") == id_column
        ):
            return SameJob(record)
        if id_column == ROW_HASH:
            raise ExistingOutputRefused(
                f"the output {url} holds a finished job's rows (finished at "
                f"{record.get('finished_at')}) and this run reads other input, with Ray's "
                "row_hash IDs: a row_hash names a row by its file's path and position, so a "
                "rewritten file's new rows would pass for the old ones and be skipped. Nothing "
                "was written. Run it over the finished job's input (it then writes nothing), "
                "read only the new files into the same output with existing_output='append', "
                "or write somewhere else"
            )
        if _format_of(sink) is None:
            _refuse_unreadable(sink, url, record)
        return HoldsRows(
            f"{url}, where a job with ID column {record.get('id_column')!r} finished at "
            f"{record.get('finished_at')} over {record.get('input_digest') or 'input cairn could not list'}"
        )
    example = first_data_file(output_fs, output_dir)
    if example is None:
        return None
    raise ExistingOutputRefused(
        f"the output {url} already holds files ({example}, ...) and no cairn job recorded "
        f"finishing there ({RECORD_NAME}), and the checkpoint has nothing committed: writing "
        "now would add every row again beside them. Nothing was written. Write somewhere else, "
        "restore the checkpoint those files belong to, or, to add beside them anyway, pass "
        "existing_output='append' to cairn.ray.checkpoint_config (or mode='overwrite' to the "
        "write, which replaces them)"
    )


def _format_of(sink: Any) -> Optional[str]:
    """The pyarrow format ``sink``'s files are read back in (None: a sink
    whose files cairn reads no IDs from)."""
    return _READABLE_FORMATS.get(type(sink).__name__)


def _refuse_unreadable(sink: Any, url: str, record: Dict[str, Any]) -> None:
    """Refuses a run that must skip the IDs of a finished job's output
    (``record``) written by a sink cairn reads no IDs from."""
    name = type(sink).__name__
    raise ExistingOutputRefused(
        f"the output {url} holds a finished job's rows (finished at "
        f"{record.get('finished_at')}) and this run's input cannot be told to be that job's "
        "(other files, another ID column, or a read that is not files cairn lists), so the "
        f"rows already there must be skipped by their IDs; cairn reads IDs back from Parquet and JSON "
        f"files only, and this write is {name}. Nothing was written. Run it over the "
        "finished job's input (it then writes nothing), write somewhere else, or pass "
        "existing_output='append' to cairn.ray.checkpoint_config to add every row beside "
        "them (or mode='overwrite' to the write, which replaces them)"
    )


def output_ids(
    sink: Any,
    unit_log: Any,
    output_fs: CairnFileSystem,
    output_dir: str,
    id_column: str,
    key_columns: Optional[List[str]] = None,
) -> Iterator[pa.Array]:
    """The IDs of the rows the output holds, chunk by chunk: a table's by
    its own reader (one projected scan), a file sink's from its Parquet or
    JSON files (the ID column alone read from Parquet, or a composite key's
    columns, encoded; hive partition directories read as pyarrow writes
    them)."""
    if unit_log is not None:
        batches = unit_log.table_ids(id_column)
        return iter(()) if batches is None else batches
    url = output_fs.unstrip_protocol(output_dir)
    found = _format_of(sink)
    if found is None:
        # The record is read for the message only.
        _refuse_unreadable(sink, url, read_record(output_fs, output_dir) or {})
    try:
        dataset = pads.dataset(
            output_fs._strip_protocol(output_dir),
            format=found,
            filesystem=arrow_filesystem(_uncached(output_fs)),
            partitioning="hive",
            # No schema inspected across files: each is read in its own.
            schema=pa.schema([]),
        )
    except FileNotFoundError:
        return iter(())
    return _fragment_ids(dataset, url, id_column, key_columns)


def _fragment_ids(
    dataset: Any, url: str, id_column: str, key_columns: Optional[List[str]] = None
) -> Iterator[Any]:
    """``id_column`` of each file of ``dataset``, each read in its own
    schema (a JSON file's types are its own: a column of nulls alone has
    none), skipping files without rows; a file with rows and without the
    column is refused."""
    for fragment in dataset.get_fragments():
        try:
            schema = fragment.physical_schema
        except pa.ArrowInvalid as e:
            if "Empty JSON stream" in str(e):
                # A JSON lines file of no rows.
                continue
            raise
        columns = key_columns or [id_column]
        missing = [c for c in columns if c not in schema.names]
        if missing:
            if fragment.count_rows() == 0:
                continue
            raise ExistingOutputRefused(
                f"{fragment.path} in {url} has no column {missing[0]!r}, so cairn cannot tell "
                "which input rows the output holds. Nothing was written. Write somewhere else, "
                "or pass existing_output='append' to cairn.ray.checkpoint_config to add every "
                "row beside them"
            )
        if key_columns is not None:
            yield encode_key(fragment.to_table(columns=columns, schema=schema), key_columns)
            continue
        column = fragment.to_table(columns=[id_column], schema=schema).column(0)
        if not pa.types.is_null(column.type):
            yield column


def committed_set(chunks: Iterator[pa.Array]) -> Tuple[np.ndarray, int]:
    """cairn's compact set of the non-null IDs of ``chunks`` as the bytes
    the filter actors read (a NumPy array of them), and how many IDs."""
    builder = NativeIdSetBuilder()
    for chunk in chunks:
        if isinstance(chunk, pa.ChunkedArray):
            pieces = chunk.chunks
        else:
            pieces = [chunk]
        for piece in pieces:
            if pa.types.is_dictionary(piece.type):
                piece = piece.dictionary_decode()
            builder.push(piece)
    ids = builder.build()
    return np.frombuffer(ids.to_bytes(), dtype=np.uint8), len(ids)
